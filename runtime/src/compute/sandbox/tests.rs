//! The sandbox run for real: forked children, their results, errors, limits and reports.

use super::child::RESULT_FD;
use super::*;
use crate::compute::last_report;

fn reqs(s: &str) -> Requests {
    Requests::parse(s).unwrap()
}

#[test]
fn returns_values_and_applies_the_context() {
    let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let got = Compute::new(&reqs("default num_cpus=1"))
        .run(move || {
            let ctx = crate::compute::context::current().unwrap();
            (big.iter().map(|&b| b as u64).sum::<u64>(), ctx.to_string(), std::env::var("OMP_NUM_THREADS").unwrap())
        })
        .unwrap();
    let want: u64 = (0..1_000_000u32).map(|i| (i % 251) as u64).sum();
    assert_eq!(got.0, want);
    assert!(got.1.starts_with("default: cpu/"), "{}", got.1);
    assert_eq!(got.2, "1");
    let r = last_report().unwrap();
    assert!(r.pid.is_some() && r.peak_rss > 0);
    assert!(crate::compute::context::current().is_none(), "the caller's context is untouched");
}

#[test]
fn failures_are_reported_and_leave_the_caller_intact() {
    let r = Compute::new(&reqs("default num_cpus=0")).run(|| -> u32 { panic!("boom {}", 7) });
    match r {
        Err(ComputeError::Panicked(m)) => assert!(m.starts_with("boom 7 (at "), "{m}"),
        other => panic!("{other:?}"),
    }
    let r = Compute::new(&reqs("default num_cpus=0"))
        .timeout(Duration::from_millis(200))
        .run::<(), _>(|| std::thread::sleep(Duration::from_secs(30)));
    assert_eq!(r.unwrap_err().to_string(), "SandboxTimedOut: the sandbox was stopped after the 0.2 s timeout");
    let r = Compute::new(&reqs("default num_cpus=0")).mem_limit(50 << 20).run::<(), _>(|| {
        let mut v: Vec<Vec<u8>> = Vec::new();
        loop {
            v.push(vec![1u8; 8 << 20]);
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    match r {
        Err(ComputeError::OutOfMemory { limit, used }) => assert!(limit == 50 << 20 && used > limit),
        other => panic!("{other:?}"),
    }
    // The name is said once: in Display, and as the cell error's ename.
    let e = ComputeError::Failed("the cell returned an error: X".into());
    assert_eq!(
        (e.to_string().as_str(), e.message().as_str()),
        ("SandboxFailed: the cell returned an error: X", "the cell returned an error: X")
    );
    let r = Compute::new(&reqs("default num_cpus=0")).run(|| -> u8 { std::process::exit(4) });
    assert_eq!(r.unwrap_err(), ComputeError::Exited { code: 4 });
    let r = Compute::new(&reqs("default num_cpus=0")).run(|| -> u8 { std::process::abort() });
    assert_eq!(r.unwrap_err().to_string(), "SandboxKilled: the sandbox was killed by SIGABRT (6)");
}

#[test]
fn sandboxes_read_no_stdin_and_die_with_their_parent() {
    let n = Compute::new(&reqs("default num_cpus=0")).run(|| {
        let mut s = String::new();
        std::io::stdin().read_line(&mut s).unwrap()
    });
    assert_eq!(n.unwrap(), 0, "stdin is /dev/null");
    // A process that starts a sandbox and is then killed: the sandbox goes too.
    let file = std::env::temp_dir().join(format!("dryml-orphan-{}", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let middle = unsafe { libc::fork() };
    if middle == 0 {
        let f = file.clone();
        let _ = Compute::new(&reqs("default num_cpus=0")).run(move || {
            std::fs::write(&f, std::process::id().to_string()).unwrap();
            std::thread::sleep(Duration::from_secs(60));
        });
        unsafe { libc::_exit(0) };
    }
    let t0 = Instant::now();
    let sandbox: i32 = loop {
        if let Some(p) = std::fs::read_to_string(&file).ok().and_then(|t| t.parse().ok()) {
            break p;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "the sandbox never started");
        std::thread::sleep(Duration::from_millis(10));
    };
    unsafe {
        libc::kill(middle, libc::SIGKILL);
        libc::waitpid(middle, std::ptr::null_mut(), 0);
    }
    let t0 = Instant::now();
    while procfs::start_time(sandbox as u32).is_some() {
        assert!(t0.elapsed() < Duration::from_secs(10), "the orphaned sandbox {sandbox} lives on");
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_file(&file);
}

#[test]
fn a_sandbox_killed_mid_result_is_killed_and_its_children_are_not_waited_for() {
    // Killed while writing its result (the start of a frame is sent, then SIGKILL, as a
    // kill mid-write leaves it): half a frame is no result, and the error says so.
    let r = Compute::new(&reqs("default num_cpus=0")).run(|| -> Vec<u8> {
        let mut head = vec![OK];
        head.extend_from_slice(&1000u64.to_le_bytes());
        head.extend_from_slice(&[7u8; 10]);
        let fd = RESULT_FD.load(std::sync::atomic::Ordering::SeqCst);
        unsafe {
            libc::write(fd, head.as_ptr().cast(), head.len());
            libc::kill(std::process::id() as i32, libc::SIGKILL);
        }
        unreachable!()
    });
    assert_eq!(r.map(|v| v.len()).unwrap_err(), ComputeError::Killed { signal: libc::SIGKILL });
    // A process the sandbox started keeps the result pipe open for 30 s: the result comes
    // when the sandbox returns, not when that process ends.
    let t0 = Instant::now();
    let r = Compute::new(&reqs("default num_cpus=0")).run(|| {
        if unsafe { libc::fork() } == 0 {
            std::thread::sleep(Duration::from_secs(30));
            unsafe { libc::_exit(0) };
        }
        41 + 1
    });
    assert_eq!(r.unwrap(), 42);
    assert!(t0.elapsed() < Duration::from_secs(10), "waited {:?}", t0.elapsed());
    // Also when the sandbox dies without a result while that process lives on.
    let t0 = Instant::now();
    let r = Compute::new(&reqs("default num_cpus=0")).run(|| -> u8 {
        if unsafe { libc::fork() } == 0 {
            std::thread::sleep(Duration::from_secs(30));
            unsafe { libc::_exit(0) };
        }
        std::process::abort()
    });
    assert_eq!(r.unwrap_err(), ComputeError::Killed { signal: libc::SIGABRT });
    assert!(t0.elapsed() < Duration::from_secs(10), "waited {:?}", t0.elapsed());
}

#[test]
fn updates_come_back_only_on_success() {
    let mut model = vec![1.0f64, 2.0];
    let loss = Compute::new(&reqs("default num_cpus=0"))
        .run_updating(&mut model, |m| {
            m.push(3.0);
            m.iter().sum::<f64>()
        })
        .unwrap();
    assert_eq!((loss, model.clone()), (6.0, vec![1.0, 2.0, 3.0]));
    let r = Compute::new(&reqs("default num_cpus=0")).run_updating::<_, (), _>(&mut model, |m| {
        m.clear();
        panic!("no")
    });
    assert!(matches!(r, Err(ComputeError::Panicked(_))));
    assert_eq!(model, vec![1.0, 2.0, 3.0]);
}

#[test]
fn existing_context_flags() {
    // No context in this test process.
    let e = Compute::new(&reqs("tf")).dont_create(true).run(|| 1).unwrap_err();
    assert!(e.to_string().starts_with("NoContextError"), "{e}");
    let v = Compute::new(&reqs("default num_cpus=0")).use_existing(true).run(|| 5).unwrap();
    assert_eq!(v, 5, "no context: a sandbox is made");
    let e = Compute::new(&reqs("tf num_gpus=1")).run(|| 1).unwrap_err();
    assert!(e.to_string().starts_with("ResourcesUnavailableError: tf: num_gpus=1 cannot be met"), "{e}");
}
