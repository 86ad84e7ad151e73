//! The kernel's integration tests, one binary (linking once): the protocol driven by a test
//! frontend over real ZeroMQ sockets, against a toy handler, with no evcxr; and the
//! architecture's invariants, read from the sources.

mod frontend;
mod layers;
mod protocol;
