//! A sandbox forked while another thread is inside a panic hook still ends on its own panic:
//! the child takes no lock the parent's panicking thread holds. (It once called `set_hook`
//! in the child and hung for good.) Its own test binary: it sets the process's panic hook.

use dryml::compute::context::Requests;
use dryml::{Compute, ComputeError};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn a_sandbox_forked_during_another_threads_panic_ends_on_its_own_panic() {
    // A hook that is slow for one thread's panic: that thread holds the hook's lock meanwhile.
    let (inside, is_inside) = mpsc::channel::<()>();
    let inside = std::sync::Mutex::new(inside);
    std::panic::set_hook(Box::new(move |_| {
        if std::thread::current().name() == Some("slow-panic") {
            let _ = inside.lock().unwrap().send(());
            std::thread::sleep(Duration::from_secs(3));
        }
    }));
    let compute = Compute::new(&Requests::parse("num_cpus=1").unwrap()).timeout(Duration::from_secs(20));
    assert_eq!(compute.run(|| 1 + 1).unwrap(), 2, "a first sandbox");
    let slow = std::thread::Builder::new().name("slow-panic".into()).spawn(|| panic!("slowly")).unwrap();
    is_inside.recv_timeout(Duration::from_secs(10)).expect("the slow panic started");
    let t0 = Instant::now();
    let r = compute.run(|| -> u32 { panic!("in the sandbox") });
    assert!(
        matches!(&r, Err(ComputeError::Panicked(m)) if m.contains("in the sandbox")),
        "{r:?} after {:?}",
        t0.elapsed()
    );
    assert!(slow.join().is_err());
}
