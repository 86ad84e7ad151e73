//! The kernel's integration tests, one binary (linking once): the protocol driven by a test
//! frontend over real ZeroMQ sockets, against a toy handler, with no evcxr; the debugger bridge
//! against the real kernel and a real lldb-dap; and the architecture's invariants, read from
//! the sources.

mod debugger;
mod frontend;
mod generated;
mod layers;
mod protocol;

/// The package's binary `name`, as cargo gives it to this run: the machine's build directory,
/// which clones share, may hold this test as another checkout compiled it, with its path in `env!`.
fn own_bin(name: &str, compiled: &str) -> std::path::PathBuf {
    std::env::var_os(format!("CARGO_BIN_EXE_{name}")).map_or_else(|| compiled.into(), Into::into)
}
