//! A rustc workspace wrapper for this crate's tests, as the kernel binary is for cells: it runs
//! rustc, then records the command of the crate named in `DRYML_RECORD_CRATE` in the file named
//! in `DRYML_RECORD_TO`.

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(rustc) = args.next() else {
        eprintln!("usage: dryml-record-rustc RUSTC ARGS...");
        return ExitCode::FAILURE;
    };
    let mut command = Command::new(rustc);
    command.args(args);
    let status = match command.status() {
        Ok(status) => status,
        Err(e) => {
            eprintln!("dryml-record-rustc: running rustc: {e}");
            return ExitCode::FAILURE;
        }
    };
    let args: Vec<_> = command.get_args().collect();
    let named = std::env::var_os("DRYML_RECORD_CRATE");
    let ours = args.windows(2).any(|w| w[0] == "--crate-name" && Some(w[1]) == named.as_deref());
    if let (true, true, Some(to)) = (status.success(), ours, std::env::var_os("DRYML_RECORD_TO")) {
        dryml_builds::record(&command, to.as_ref(), &["DRYML_RECORD_CRATE", "DRYML_RECORD_TO"]);
    }
    ExitCode::from(status.code().unwrap_or(1) as u8)
}
