//! `child`'s unit tests.

use super::pump::{find_marker, held_suffix_start};
use super::*;

#[test]
fn held_suffix() {
    assert_eq!(held_suffix_start(b"hello"), 5);
    assert_eq!(held_suffix_start(b"helloE"), 5);
    assert_eq!(held_suffix_start(b"helloEVC"), 5);
    assert_eq!(held_suffix_start(b"helloEVCXR_PAN"), 5);
    assert_eq!(held_suffix_start(b"helloDRY"), 5);
    assert_eq!(held_suffix_start(b"EVX"), 3);
    assert_eq!(find_marker(b"abcEVCXR_PANIC_NOTIFICATION\n"), Some(3));
    assert_eq!(find_marker(b"plain\n"), None);
}

#[test]
fn flusher_reads_the_shared_env_name() {
    assert!(FLUSHER_CELL.contains(&format!("\"{FLUSH_FDS_ENV}\"")));
}
