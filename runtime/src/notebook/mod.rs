//! IPython's notebook habits in a cell's process: shell commands (`!cmd` lines, `%%bash`)
//! and `%timeit`'s adaptive timing. The kernel turns those lines into calls of these.

pub mod shell;
pub mod timeit;
