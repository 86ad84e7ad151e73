//! Line input from the notebook user (Jupyter's `input_request`).

use crate::display::interrupted;

/// Reads a line typed by the notebook user (Jupyter's `input_request`).
///
/// Outside the kernel this reads standard input.
///
/// # Panics
/// When the user interrupts the cell before or while it waits: the kernel then stops waiting for
/// the answer, and the cell ends as interrupted with the notebook's variables kept.
pub fn input(prompt: &str) -> String {
    use std::io::{BufRead, Write};
    let stop = || {
        if interrupted() {
            panic!("interrupted while waiting for input to {prompt:?}");
        }
    };
    stop();
    if std::env::var_os("EVCXR_IS_RUNTIME").is_some() {
        // evcxr's input protocol: a request line on stdout, the answer on stdin.
        println!("EVCXR_INPUT_REQUEST:{prompt}");
    } else {
        print!("{prompt}");
    }
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    stop();
    line.trim_end_matches(['\n', '\r']).to_string()
}
