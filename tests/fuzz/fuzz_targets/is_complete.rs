//! `is_complete` on any text a console sends on Enter: it answers, never panics or overflows.
#![no_main]

#[path = "../../../kernel/src/engine/is_complete.rs"]
#[allow(dead_code)]
mod is_complete;
#[path = "../../../kernel/src/syntax.rs"]
#[allow(dead_code)]
mod syntax;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|code: &str| {
    let _ = is_complete::is_complete(code).status();
});
