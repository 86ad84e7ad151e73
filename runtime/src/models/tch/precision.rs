//! The precision switches libtorch has and tch 0.26 does not expose: TF32 matmuls
//! (`torch.backends.cuda.matmul.allow_tf32`) and autocast to bf16 on a device
//! (`torch.autocast(device, torch.bfloat16)`), called in the libtorch already loaded, as
//! PyTorch's Python calls them. A switch is set for one pass and put back after it.

use crate::models::precision::Precision;
use crate::models::ModelError;
use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

/// c10's `DeviceType` and `ScalarType` numbers (stable across releases; tch's `Kind` uses the
/// same `ScalarType` numbers).
const CPU: i8 = 0;
const CUDA: i8 = 1;
const BFLOAT16: i8 = 15;

/// The functions, by their C++ names (Itanium mangling, as libtorch exports them).
struct Switches {
    global_context: unsafe extern "C" fn() -> *mut c_void,
    set_tf32: unsafe extern "C" fn(*mut c_void, bool),
    tf32: unsafe extern "C" fn(*const c_void) -> bool,
    set_autocast: unsafe extern "C" fn(i8, bool),
    autocast: unsafe extern "C" fn(i8) -> bool,
    set_dtype: unsafe extern "C" fn(i8, i8),
    dtype: unsafe extern "C" fn(i8) -> i8,
    increment: unsafe extern "C" fn() -> c_int,
    decrement: unsafe extern "C" fn() -> c_int,
    clear_cache: unsafe extern "C" fn(),
}

/// libtorch's switches, found once; an error names what this libtorch lacks.
fn switches() -> Result<&'static Switches, ModelError> {
    static FOUND: OnceLock<Result<Switches, String>> = OnceLock::new();
    FOUND.get_or_init(find).as_ref().map_err(|e| ModelError::Model(e.clone()))
}

fn find() -> Result<Switches, String> {
    // The cell's library may have loaded libtorch locally: ask for it by name, loading nothing.
    let lib = c"libtorch_cpu.so";
    // SAFETY: RTLD_NOLOAD only looks up a library already loaded; a null handle is checked.
    let mut handle = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        handle = libc::RTLD_DEFAULT;
    }
    let sym = |name: &CStr, what: &str| -> Result<*mut c_void, String> {
        // SAFETY: a lookup by name in a valid handle.
        let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
        if p.is_null() {
            Err(format!("precision: this libtorch has no `{what}` (dryml's tf32 and bf16 need PyTorch 2.4 or newer)"))
        } else {
            Ok(p)
        }
    };
    // SAFETY: each symbol is the C++ function of that signature (a member function takes its
    // object first; the enums are `int8_t`), in every libtorch that exports the name.
    unsafe {
        Ok(Switches {
            global_context: as_fn(sym(c"_ZN2at13globalContextEv", "at::globalContext")?),
            set_tf32: as_fn(sym(c"_ZN2at7Context18setAllowTF32CuBLASEb", "setAllowTF32CuBLAS")?),
            tf32: as_fn(sym(c"_ZNK2at7Context15allowTF32CuBLASEv", "allowTF32CuBLAS")?),
            set_autocast: as_fn(sym(
                c"_ZN2at8autocast20set_autocast_enabledEN3c1010DeviceTypeEb",
                "at::autocast::set_autocast_enabled",
            )?),
            autocast: as_fn(sym(
                c"_ZN2at8autocast19is_autocast_enabledEN3c1010DeviceTypeE",
                "at::autocast::is_autocast_enabled",
            )?),
            set_dtype: as_fn(sym(
                c"_ZN2at8autocast18set_autocast_dtypeEN3c1010DeviceTypeENS1_10ScalarTypeE",
                "at::autocast::set_autocast_dtype",
            )?),
            dtype: as_fn(sym(
                c"_ZN2at8autocast18get_autocast_dtypeEN3c1010DeviceTypeE",
                "at::autocast::get_autocast_dtype",
            )?),
            increment: as_fn(sym(c"_ZN2at8autocast17increment_nestingEv", "increment_nesting")?),
            decrement: as_fn(sym(c"_ZN2at8autocast17decrement_nestingEv", "decrement_nesting")?),
            clear_cache: as_fn(sym(c"_ZN2at8autocast11clear_cacheEv", "at::autocast::clear_cache")?),
        })
    }
}

/// A function's address as the function pointer type `F`.
///
/// # Safety
/// `p` must be the address of a function of type `F`.
unsafe fn as_fn<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>(), "a function pointer");
    // SAFETY: the caller's; the sizes are checked above.
    unsafe { std::mem::transmute_copy(&p) }
}

/// A precision in force for one pass on `device`; dropped, what was there before is back.
pub(super) struct InForce {
    switches: Option<&'static Switches>,
    tf32: Option<bool>,
    autocast: Option<(i8, bool, i8)>,
}

impl InForce {
    /// `precision` for a pass on `device`: TF32 on for a CUDA device's matmuls, or autocast to
    /// bf16 on the device's type. FP32 touches nothing.
    pub(super) fn on(precision: Precision, device: ::tch::Device) -> Result<InForce, ModelError> {
        let mut in_force = InForce { switches: None, tf32: None, autocast: None };
        if precision == Precision::Fp32 {
            return Ok(in_force);
        }
        let s = switches()?;
        in_force.switches = Some(s);
        // SAFETY: libtorch's own calls, on its global context and this thread's autocast state.
        unsafe {
            match precision {
                Precision::Fp32 => {}
                Precision::Tf32 => {
                    let ctx = (s.global_context)();
                    in_force.tf32 = Some((s.tf32)(ctx));
                    (s.set_tf32)(ctx, true);
                }
                Precision::Bf16 => {
                    let kind = if device.is_cuda() { CUDA } else { CPU };
                    in_force.autocast = Some((kind, (s.autocast)(kind), (s.dtype)(kind)));
                    (s.set_autocast)(kind, true);
                    (s.set_dtype)(kind, BFLOAT16);
                    (s.increment)();
                }
            }
        }
        Ok(in_force)
    }
}

impl Drop for InForce {
    fn drop(&mut self) {
        let Some(s) = self.switches else { return };
        // SAFETY: as in `on`, putting back what it read there.
        unsafe {
            if let Some(was) = self.tf32 {
                (s.set_tf32)((s.global_context)(), was);
            }
            if let Some((kind, enabled, dtype)) = self.autocast {
                // The casts of the weights are cached while autocast is nested; the last one out
                // clears them, as PyTorch's context manager does.
                if (s.decrement)() == 0 {
                    (s.clear_cache)();
                }
                (s.set_dtype)(kind, dtype);
                (s.set_autocast)(kind, enabled);
            }
        }
    }
}

/// Whether libtorch's TF32 matmul switch is on now (for tests).
#[cfg(test)]
pub(super) fn tf32_now() -> bool {
    let s = switches().expect("libtorch's switches");
    // SAFETY: a read of libtorch's global context.
    unsafe { (s.tf32)((s.global_context)()) }
}
