//! The kernel's interrupt, seen from a cell: long loops poll [`interrupted`] and stop cleanly,
//! so the kernel does not have to kill the process (and lose the notebook's variables).

use std::sync::atomic::AtomicBool;

extern "C" {
    fn dlsym(handle: *mut std::ffi::c_void, symbol: *const std::ffi::c_char) -> *mut std::ffi::c_void;
}

/// The address of a symbol the kernel binary hosting this cell exports (kernel/build.rs), if
/// there is one. Each cell has its own copy of this crate's statics; what every cell must share
/// lives in the kernel binary.
pub(crate) fn kernel_symbol(name: &str) -> Option<usize> {
    let name = std::ffi::CString::new(name).ok()?;
    // RTLD_DEFAULT is the null handle on glibc and musl.
    let addr = unsafe { dlsym(std::ptr::null_mut(), name.as_ptr()) as usize };
    (addr != 0).then_some(addr)
}

/// The flag lives in the kernel binary that hosts the cell; it exports it by name.
fn flag() -> Option<&'static AtomicBool> {
    static FLAG: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let addr = *FLAG.get_or_init(|| kernel_symbol(crate::sys::protocol::symbols::INTERRUPT_FLAG).unwrap_or(0));
    (addr != 0).then(|| unsafe { &*(addr as *const AtomicBool) })
}

/// True once the user has pressed interrupt during the current cell. Always false outside
/// the kernel.
pub fn interrupted() -> bool {
    flag().is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
}

#[cfg(test)]
mod tests {
    #[test]
    fn not_interrupted_outside_the_kernel() {
        assert!(!super::interrupted());
    }
}
