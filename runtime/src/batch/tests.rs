//! Tests of `batch`.

use super::*;

#[derive(Debug, PartialEq)]
enum E {
    Oom,
    Other,
}
impl OutOfMemory for E {
    fn is_out_of_memory(&self) -> bool {
        *self == E::Oom
    }
}

#[test]
fn sizes_shrink_and_are_remembered_per_call_site() {
    let limit = std::cell::Cell::new(100usize);
    let mut tried = Vec::new();
    let call = |tried: &mut Vec<usize>| {
        batch(512, |b| {
            tried.push(b);
            if b > limit.get() {
                Err(E::Oom)
            } else {
                Ok(b)
            }
        })
    };
    // One call site, called in a loop: the second call starts at the size that worked.
    let mut got = Vec::new();
    for _ in 0..2 {
        got.push(call(&mut tried).unwrap());
    }
    assert_eq!(got, vec![64, 64]);
    assert_eq!(tried, vec![512, 256, 128, 64, 64]);
    // Another call site starts again from the top.
    let mut other = Vec::new();
    batch(512, |b| {
        other.push(b);
        if b > 100 {
            Err(E::Oom)
        } else {
            Ok(())
        }
    })
    .unwrap();
    assert_eq!(other, vec![512, 256, 128, 64]);
}

#[test]
fn factor_no_cache_and_giving_up() {
    let mut tried = Vec::new();
    let r: Result<(), E> = Batcher::new(10).factor(0.9).cache(Cache::None).batch(|b| {
        tried.push(b);
        Err(E::Oom)
    });
    assert_eq!(r, Err(E::Oom), "gives up with the last error at size 1");
    assert_eq!(tried, vec![10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
    // Other errors pass through at once.
    let mut n = 0;
    let r: Result<(), E> = Batcher::new(64).cache(Cache::None).batch(|_| {
        n += 1;
        Err(E::Other)
    });
    assert_eq!((r, n), (Err(E::Other), 1));
    // Cache::None starts from the top every time.
    for _ in 0..2 {
        let mut first = None;
        Batcher::new(64)
            .cache(Cache::None)
            .batch(|b| {
                first.get_or_insert(b);
                if b > 8 {
                    Err(E::Oom)
                } else {
                    Ok(())
                }
            })
            .unwrap();
        assert_eq!(first, Some(64));
    }
}

#[test]
fn range_goes_on_from_where_it_was_with_the_smaller_step() {
    let mut calls = Vec::new();
    Batcher::new(32)
        .cache(Cache::None)
        .range(0, 100, |lo, hi| {
            calls.push((lo, hi));
            if hi - lo > 20 && lo >= 32 {
                Err(E::Oom)
            } else {
                Ok(())
            }
        })
        .unwrap();
    assert_eq!(calls, vec![(0, 32), (32, 64), (32, 48), (48, 64), (64, 80), (80, 96), (96, 100)]);
    let covered: usize = calls.iter().filter(|(l, h)| !(h - l > 20 && *l >= 32)).map(|(l, h)| h - l).sum();
    assert_eq!(covered, 100);
}

#[test]
fn keys_global_cache_and_probing_back_up() {
    let spike = std::cell::Cell::new(true);
    let run = |tried: &mut Vec<usize>| {
        Batcher::new(64).key("probe-test").cache(Cache::Global).probe_up(2).batch(|b| {
            tried.push(b);
            if spike.get() && b > 16 {
                Err(E::Oom)
            } else {
                Ok(())
            }
        })
    };
    let mut tried = Vec::new();
    run(&mut tried).unwrap();
    assert_eq!(tried, vec![64, 32, 16]);
    spike.set(false);
    let mut later = Vec::new();
    for _ in 0..4 {
        run(&mut later).unwrap();
    }
    // 16 once more (streak 2), then probes up to 32, 32 again, then 64.
    assert_eq!(later, vec![16, 32, 32, 64]);
}

#[test]
fn one_call_site_with_two_closures_keeps_two_sizes_and_a_shared_key_stays_under_initial() {
    // As in a notebook, where two cells' call sites can have the same file, line and column
    // (each cell is its own crate): one Batcher, so one Location, used from two functions.
    let b = Batcher::new(64).cache(Cache::Global);
    fn small(b: &Batcher) -> Result<usize, E> {
        b.batch(|n| if n > 16 { Err(E::Oom) } else { Ok(n) })
    }
    fn large(b: &Batcher) -> Result<usize, E> {
        b.batch(Ok)
    }
    assert_eq!(small(&b), Ok(16));
    assert_eq!(large(&b), Ok(64), "another closure does not inherit 16");
    assert_eq!(small(&b), Ok(16));
    // A helper that wraps a loop passes its callers' sites on with #[track_caller].
    #[track_caller]
    fn helper(limit: usize) -> Result<usize, E> {
        batch(64, move |n| if n > limit { Err(E::Oom) } else { Ok(n) })
    }
    assert_eq!(helper(8), Ok(8));
    assert_eq!(helper(32), Ok(32), "another call site starts from the top");
    // A named key is shared on purpose, but never starts above what the call asks for.
    assert_eq!(Batcher::new(64).key("shared").batch(|n| if n > 16 { Err(E::Oom) } else { Ok(n) }), Ok(16));
    assert_eq!(Batcher::new(64).key("shared").batch(Ok::<usize, E>), Ok(16));
    assert_eq!(Batcher::new(8).key("shared").batch(Ok::<usize, E>), Ok(8));
}

/// A path in the temp dir unique to this process.
fn tempfile_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("dryml-test-{}-{name}", std::process::id()))
}

/// True in the process [`run_child`] starts: the test runs its child half there.
fn in_child() -> bool {
    std::env::var_os("DRYML_TEST_CHILD").is_some()
}

/// Runs test `name` alone in a new process of this test binary, with `DRYML_TEST_CHILD` set
/// and its stderr going to `stderr`; returns its exit status. Not a fork: a fork of the
/// multi-threaded test runner can inherit a lock (the size table's, the meminfo cache's)
/// held by a test on another thread, and hang.
fn run_child(name: &str, stderr: std::process::Stdio) -> std::process::ExitStatus {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &format!("batch::tests::{name}"), "--test-threads=1", "--nocapture"])
        .env("DRYML_TEST_CHILD", "1")
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .status()
        .unwrap()
}

#[test]
fn a_slow_range_outside_the_kernel_logs_one_line_at_the_end() {
    if in_child() {
        // stderr is a pipe, as in a log: no redraws, one line once the loop is done.
        let r = range(0, 4, 1, |_, _| {
            std::thread::sleep(std::time::Duration::from_millis(300));
            Ok::<(), E>(())
        });
        std::process::exit(r.is_ok() as i32);
    }
    let log = tempfile_path("slow-range.log");
    let file = std::fs::File::create(&log).unwrap();
    let status = run_child("a_slow_range_outside_the_kernel_logs_one_line_at_the_end", file.into());
    assert_eq!(status.code(), Some(1));
    let out = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out:?}");
    assert!(lines[0].starts_with(&format!("[{}] 4/4 (1.", "#".repeat(30))), "{out:?}");
}

#[test]
fn a_slow_range_on_a_terminal_redraws_one_line() {
    if in_child() {
        let r = range(0, 8, 1, |_, _| {
            std::thread::sleep(std::time::Duration::from_millis(150));
            Ok::<(), E>(())
        });
        std::process::exit(r.is_ok() as i32);
    }
    let (mut master, mut slave) = (0, 0);
    let r = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
    assert_eq!(r, 0, "openpty");
    // The child gets its own copy of the terminal's slave end as stderr.
    let slave_copy = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(libc::dup(slave)) };
    let status = run_child("a_slow_range_on_a_terminal_redraws_one_line", slave_copy.into());
    assert_eq!(status.code(), Some(1));
    // Read while our end of the slave is still open: all of it is buffered by now.
    let mut buf = vec![0u8; 1 << 16];
    let n = unsafe { libc::read(master, buf.as_mut_ptr().cast(), buf.len()) };
    unsafe {
        libc::close(slave);
        libc::close(master);
    }
    // The terminal turns the final \n into \r\n.
    let out = String::from_utf8_lossy(&buf[..n.max(0) as usize]).replace("\r\n", "\n");
    // Redraws after 200 ms, each starting with \r, then the last one ends the line.
    let draws: Vec<&str> = out.split('\r').filter(|d| !d.is_empty()).collect();
    assert!(draws.len() >= 2, "{out:?}");
    assert!(draws.last().unwrap().starts_with(&format!("[{}] 8/8 (1.", "#".repeat(30))), "{out:?}");
    assert!(out.ends_with('\n') && out.matches('\n').count() == 1, "{out:?}");
}

/// This process's address space in bytes (`VmSize`).
fn vm_size() -> u64 {
    crate::sys::procfs::statm(std::process::id()).unwrap().size
}

#[test]
fn real_out_of_memory_under_a_cpu_memory_limit() {
    // In a child, so the limit does not bind the test runner.
    if in_child() {
        let limit = (vm_size() + (384 << 20)) as f64 / (1u64 << 30) as f64;
        set_cpu_memory_limit(limit).unwrap();
        let got = batch(1usize << 31, |n| {
            let mut v: Vec<u8> = Vec::new();
            v.try_reserve_exact(n)?;
            v.resize(n, 1);
            std::hint::black_box(&v);
            Ok::<usize, std::collections::TryReserveError>(v.len())
        });
        let code = match got {
            Ok(n) => n.trailing_zeros() as i32,
            Err(_) => 99,
        };
        std::process::exit(code);
    }
    let status = run_child("real_out_of_memory_under_a_cpu_memory_limit", std::process::Stdio::inherit());
    assert!(status.code().is_some(), "the child died: {status}");
    // 2 GiB, 1 GiB and 512 MiB do not fit under +384 MiB; 256 MiB does. (The margins are
    // wide: malloc_trim between tries hands back some of what was mapped.)
    assert_eq!(status.code(), Some(28));
}

#[test]
fn boxed_and_io_errors_count_by_what_they_hold() {
    let oom: Box<dyn std::error::Error> = Box::new(Vec::<u8>::new().try_reserve(usize::MAX).unwrap_err());
    assert!(oom.is_out_of_memory());
    let other: Box<dyn std::error::Error + Send + Sync> = "bad input".into();
    assert!(!other.is_out_of_memory());
    assert!(std::io::Error::from(std::io::ErrorKind::OutOfMemory).is_out_of_memory());
    assert!(!std::io::Error::from(std::io::ErrorKind::NotFound).is_out_of_memory());
    // With `?` in a closure returning Box<dyn Error>: sizes shrink past the failing ones.
    let got = Batcher::new(1 << 20).cache(Cache::None).batch(|n| -> Result<usize, Box<dyn std::error::Error>> {
        if n > 1000 {
            Vec::<u8>::new().try_reserve(usize::MAX)?;
        }
        Ok(n)
    });
    assert_eq!(got.unwrap(), 512);
}

#[test]
fn try_reserve_counts_as_out_of_memory() {
    let got = batch(1usize << 62, |n| {
        let mut v: Vec<u8> = Vec::new();
        v.try_reserve_exact(n)?;
        Ok::<usize, std::collections::TryReserveError>(n)
    })
    .unwrap();
    assert!(got < 1 << 40, "{got}");
}

#[cfg(feature = "torch")]
#[test]
fn chunked_walks_every_slice_and_tch_errors_are_sorted() {
    use tch::{Device, Kind, Tensor};
    let t = Tensor::zeros([100, 3], (Kind::Float, Device::Cpu));
    let mut seen = Vec::new();
    Batcher::new(32)
        .cache(Cache::None)
        .chunked(&t, 0, |chunk, lo, hi| {
            seen.push((lo, hi));
            if hi - lo > 20 && lo >= 32 {
                // libtorch's own words for a failed CUDA allocation.
                return Err(tch::TchError::Torch("CUDA out of memory. Tried to allocate 2.00 GiB".into()));
            }
            let _ = chunk.fill_(1.0);
            Ok(())
        })
        .unwrap();
    assert_eq!(seen, vec![(0, 32), (32, 64), (32, 48), (48, 64), (64, 80), (80, 96), (96, 100)]);
    assert_eq!(t.sum(Kind::Float).double_value(&[]), 300.0, "chunks are views: every row was filled");
    // A shape error is not out of memory: it passes through at once.
    let mut n = 0;
    let r = chunked(&t, 64, -1, |c, _, _| {
        n += 1;
        c.f_view([7, 7]).map(|_| ())
    });
    assert!(r.is_err() && n == 1);
    assert!(!tch::TchError::Convert("CUDA out of memory".into()).is_out_of_memory());
    for m in [
        "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported",
        "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous input.",
        "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried to allocate 4294967296 bytes.",
    ] {
        assert!(tch::TchError::Torch(m.into()).is_out_of_memory(), "{m}");
    }
    assert!(!tch::TchError::Torch("shape '[7, 7]' is invalid for input of size 300".into()).is_out_of_memory());
    // candle's CUDA backend (cudarc's driver error, as candle prints it).
    assert!(is_out_of_memory_message("DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")"));
}

#[cfg(feature = "torch")]
#[test]
fn real_out_of_memory_with_tch_tensors_under_a_cpu_memory_limit() {
    use tch::{Device, Kind, Tensor};
    // In a child, so the limit does not bind the test runner; libtorch's thread pools start
    // there, before the limit and not under it.
    if in_child() {
        tch::set_num_threads(2);
        let _ = Tensor::ones([64, 64], (Kind::Float, Device::Cpu))
            .matmul(&Tensor::ones([64, 64], (Kind::Float, Device::Cpu)));
        let limit = (vm_size() + (384 << 20)) as f64 / (1u64 << 30) as f64;
        set_cpu_memory_limit(limit).unwrap();
        let mut failures = 0;
        let rows = Batcher::new(1 << 28).cache(Cache::None).batch(|n| {
            let r = Tensor::f_ones([n as i64, 4], (Kind::Float, Device::Cpu)).map(|t| t.size()[0]);
            failures += r.is_err() as i32;
            r
        });
        // 2^28 rows of 16 bytes is 4 GiB; 512 MiB is the last that fails under +384 MiB.
        let code = match rows {
            Ok(n) if n == 1 << 24 => failures,
            _ => 99,
        };
        std::process::exit(code);
    }
    let status =
        run_child("real_out_of_memory_with_tch_tensors_under_a_cpu_memory_limit", std::process::Stdio::inherit());
    assert!(status.code().is_some(), "the child died: {status}");
    assert_eq!(status.code(), Some(4));
}
