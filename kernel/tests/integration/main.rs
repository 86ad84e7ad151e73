//! The kernel's integration tests, one binary (linking once): the protocol driven by a test
//! frontend over real ZeroMQ sockets, against a toy handler, with no evcxr; the debugger bridge
//! against the real kernel and a real lldb-dap; and the architecture's invariants, read from
//! the sources.

mod debugger;
mod frontend;
mod generated;
mod layers;
mod protocol;
