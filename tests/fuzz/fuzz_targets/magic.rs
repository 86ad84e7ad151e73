//! The magic parser on any cell: a parsed cell or an error that points inside the cell.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|cell: &str| {
    if let Err(e) = dryml_magics::parse_cell(cell) {
        assert!(e.line >= 1 && e.line <= cell.split('\n').count().max(1), "line {} of {cell:?}", e.line);
        let _ = (e.to_string(), e.caret());
    }
});
