//! The child's output pump: fd 1 swapped for a pipe that a thread reads, user bytes framed to
//! the kernel's socket as they come, evcxr's protocol lines passed on to evcxr whole, and the
//! comms the kernel sends read back.

use super::*;

fn pipe() -> std::io::Result<(RawFd, RawFd)> {
    let mut fds = [0; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((fds[0], fds[1]))
}

pub(super) fn start_pump(path: &std::path::Path) -> std::io::Result<()> {
    let socket = UnixStream::connect(path)?;
    let comms = socket.try_clone()?;
    std::thread::Builder::new().name("dryml-comm-in".into()).spawn(move || read_comms(comms))?;
    let (out_r, out_w) = pipe()?;
    // Flush handshake with the flusher thread that the kernel's start-up cell spawns in user code.
    let (req_r, req_w) = pipe()?;
    let (ack_r, ack_w) = pipe()?;
    let orig = unsafe { libc::dup(1) };
    if orig < 0 || unsafe { libc::dup2(out_w, 1) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // The flusher's ends stay close-on-exec: it runs in this process, never in a program it starts.
    unsafe { libc::close(out_w) };
    // Still single-threaded here: evcxr's runtime loop has not started.
    std::env::set_var(FLUSH_FDS_ENV, format!("{req_r},{ack_w}"));
    let pump = Pump {
        input: unsafe { std::fs::File::from_raw_fd(out_r) },
        evcxr: unsafe { std::fs::File::from_raw_fd(orig) },
        socket,
        flush_req: unsafe { std::fs::File::from_raw_fd(req_w) },
        flush_ack: ack_r,
        cur: Vec::new(),
        in_content: false,
        ends: 0,
    };
    std::thread::Builder::new().name("dryml-stdout-pump".into()).spawn(move || pump.run())?;
    Ok(())
}

struct Pump {
    input: std::fs::File,
    evcxr: std::fs::File,
    socket: UnixStream,
    flush_req: std::fs::File,
    flush_ack: RawFd,
    /// The current line's bytes not yet passed on.
    cur: Vec<u8>,
    /// Inside an `EVCXR_BEGIN_CONTENT` block, which evcxr must see whole.
    in_content: bool,
    /// Cell ends so far: each end's syncs carry its number.
    ends: u64,
}

impl Pump {
    fn run(mut self) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match self.input.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            self.feed(&buf[..n]);
        }
    }

    fn feed(&mut self, data: &[u8]) {
        for piece in data.split_inclusive(|b| *b == b'\n') {
            self.cur.extend_from_slice(piece);
            if piece.ends_with(b"\n") {
                let line = std::mem::take(&mut self.cur);
                self.line(&line);
            } else if !self.in_content {
                let keep = held_suffix_start(&self.cur);
                let user: Vec<u8> = self.cur.drain(..keep).collect();
                self.send(TAG_OUT, &user);
            }
        }
    }

    fn line(&mut self, line: &[u8]) {
        if self.in_content {
            if line == b"EVCXR_END_CONTENT\n" {
                self.in_content = false;
            }
            let _ = self.evcxr.write_all(line);
            return;
        }
        let Some(pos) = find_marker(line) else {
            self.send(TAG_OUT, line);
            return;
        };
        self.send(TAG_OUT, &line[..pos]);
        let proto = &line[pos..];
        if proto.starts_with(b"DRYML_") {
            self.send(TAG_CONTROL, &proto[..proto.len() - 1]);
            return;
        }
        if proto == b"EVCXR_PANIC_NOTIFICATION\n" {
            let line = match take_backtrace() {
                Some(backtrace) => {
                    #[derive(serde::Serialize)]
                    struct Panic {
                        backtrace: String,
                    }
                    let panic = serde_json::to_string(&Panic { backtrace }).expect("a backtrace serialises");
                    format!("{} {panic}", dryml_sys::protocol::PANIC)
                }
                None => dryml_sys::protocol::PANIC.to_string(),
            };
            self.send(TAG_CONTROL, line.as_bytes());
        }
        if proto == b"EVCXR_EXECUTION_COMPLETE\n" {
            self.flush_user_stdout();
            dryml_interrupt_flag.store(false, Ordering::SeqCst);
            self.ends += 1;
            let n = self.ends.to_string();
            self.send(TAG_SYNC, n.as_bytes());
            // stderr is unbuffered, so all the cell wrote there is in the pipe before this line
            // (which ends a line `eprint!` left open; the kernel splits it off).
            let marker = format!("{}{n}\n", dryml_sys::protocol::STDERR_SYNC);
            unsafe { libc::write(2, marker.as_ptr().cast(), marker.len()) };
            let end = format!("EVCXR_BEGIN_CONTENT {}\n{n}\nEVCXR_END_CONTENT\n", dryml_sys::protocol::SYNC_MIME);
            let _ = self.evcxr.write_all(end.as_bytes());
        } else if proto.starts_with(b"EVCXR_BEGIN_CONTENT") {
            self.in_content = true;
        }
        let _ = self.evcxr.write_all(proto);
    }

    /// Asks user code's flusher to flush its stdout buffer, then passes on what that wrote,
    /// so a trailing `print!` lands before the cell's end.
    fn flush_user_stdout(&mut self) {
        if self.flush_req.write_all(b"f").is_err() {
            return;
        }
        let mut fds = [libc::pollfd { fd: self.flush_ack, events: libc::POLLIN, revents: 0 }];
        // No flusher (start-up cell not run yet) means no ack; don't hold the cell for long.
        if unsafe { libc::poll(fds.as_mut_ptr(), 1, 200) } > 0 {
            let mut b = [0u8; 64];
            unsafe { libc::read(self.flush_ack, b.as_mut_ptr().cast(), b.len()) };
        }
        // Whatever the flush wrote is already in the pipe: drain it without blocking.
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.input);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let mut p = [libc::pollfd { fd, events: libc::POLLIN, revents: 0 }];
            if unsafe { libc::poll(p.as_mut_ptr(), 1, 0) } <= 0 {
                break;
            }
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            // Only user text can be here: the child is between cells.
            self.cur.extend_from_slice(&buf[..n as usize]);
        }
        let pending = std::mem::take(&mut self.cur);
        self.send(TAG_OUT, &pending);
    }

    fn send(&mut self, tag: u8, payload: &[u8]) {
        if tag == TAG_OUT && payload.is_empty() {
            return;
        }
        if self.socket.write_all(&frame(tag, payload)).is_err() {
            // The kernel went away; keep evcxr's protocol working by falling back to its pipe.
            if tag == TAG_OUT {
                let _ = self.evcxr.write_all(payload);
            }
        }
    }
}

/// The comm reader: the frontend's comm messages, which the kernel writes back on the output
/// socket, go to the handlers cells registered, while a cell runs or between cells.
fn read_comms(mut socket: UnixStream) {
    while let Some((tag, payload)) = read_frame(&mut socket) {
        if tag == TAG_WIDGETS {
            dryml_widgets_available.store(true, Ordering::Relaxed);
            continue;
        }
        if tag == TAG_PRELOAD {
            preload(payload);
            continue;
        }
        if tag == TAG_TENSORBOARD {
            dryml::__kernel::tensorboard::set_ambient(&payload);
            continue;
        }
        if tag != TAG_COMM || dryml::__kernel::comm::deliver(&payload) {
            continue;
        }
        // No handler (its cell's comm is gone): the kernel and the frontend forget the comm.
        let msg: serde_json::Value = serde_json::from_slice(&payload).unwrap_or_default();
        if msg["op"] != "close" {
            /// The kernel's close of a comm no handler has.
            #[derive(serde::Serialize)]
            struct Close<'a> {
                op: &'static str,
                comm_id: &'a serde_json::Value,
                data: serde_json::Map<String, serde_json::Value>,
            }
            let close = Close { op: "close", comm_id: &msg["comm_id"], data: Default::default() };
            println!("{} {}", dryml_sys::protocol::COMM, serde_json::to_string(&close).expect("a close serialises"));
        }
    }
}

/// Where a protocol marker starts in a complete line, if anywhere.
pub(super) fn find_marker(line: &[u8]) -> Option<usize> {
    MARKERS.iter().filter_map(|m| line.windows(m.len()).position(|w| w == *m)).min()
}

/// The start of the suffix of a partial line that must wait for more bytes: a marker that has
/// begun, or a tail that could still become one.
pub(super) fn held_suffix_start(cur: &[u8]) -> usize {
    if let Some(p) = find_marker(cur) {
        return p;
    }
    let start = cur.len().saturating_sub(5);
    (start..cur.len()).find(|&i| MARKERS.iter().any(|m| m.starts_with(&cur[i..]))).unwrap_or(cur.len())
}

/// Loads the library at `path` on a thread of its own and keeps it: the cell being built links
/// it, and finds it loaded (by its name). A failure is the cell's own load's to report.
fn preload(path: Vec<u8>) {
    let Ok(path) = std::ffi::CString::new(path) else { return };
    let _ = std::thread::Builder::new().name("dryml-preload".into()).spawn(move || {
        // SAFETY: a path the kernel sent; the handle is never closed.
        unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    });
}
