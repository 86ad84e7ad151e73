//! A context applied to a process: the environment its frameworks read and the CPUs its threads
//! may run on.

use crate::compute::context::Context;
use crate::compute::devices::Machine;

/// Applies a context to this process: its environment and the CPU affinity of every thread.
/// Frameworks read the environment when they start, so what started before is not changed.
pub fn apply(ctx: &Context, machine: &Machine) {
    for (k, v) in ctx.env(machine) {
        // The kernel's helper threads in this process never read the environment.
        std::env::set_var(k, v);
    }
    pin_and_start(ctx);
}

/// [`apply`] in a child just forked from a process with other threads: the environment is set
/// through libc, not `std::env`, whose lock another thread may have held at the fork (and would
/// then hold forever in the child, as one did in a test run).
pub(crate) fn apply_in_fork(ctx: &Context, machine: &Machine) {
    for (k, v) in ctx.env(machine) {
        if let (Ok(k), Ok(v)) = (std::ffi::CString::new(k), std::ffi::CString::new(v)) {
            unsafe { libc::setenv(k.as_ptr(), v.as_ptr(), 1) };
        }
    }
    pin_and_start(ctx);
}

fn pin_and_start(ctx: &Context) {
    pin_threads(None, &ctx.cpu_set());
    // libtorch reads OMP_NUM_THREADS only when it starts; a fork of a process where it already
    // runs needs the call.
    #[cfg(feature = "torch")]
    if let Some(n) = ctx.threads() {
        tch::set_num_threads(n as i32);
    }
}

/// Pins every thread of a process (`None`: this one) to `cpus`; threads it starts later inherit
/// the mask. Empty: no change.
pub fn pin_threads(pid: Option<u32>, cpus: &[u32]) {
    if cpus.is_empty() {
        return;
    }
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        unsafe { libc::CPU_SET(c as usize, &mut set) };
    }
    for tid in crate::sys::procfs::tasks(pid.unwrap_or_else(std::process::id)) {
        unsafe { libc::sched_setaffinity(tid as i32, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    }
}
