//! The kernel's rustc wrapper for this crate's tests, on its own (`dryml_builds::wrapper_hook`),
//! as the kernel binary runs it for cells.

fn main() -> std::process::ExitCode {
    dryml_builds::wrapper_hook();
    eprintln!("dryml-record-rustc: {} is not set: run me as cargo's rustc wrapper", dryml_builds::RECORD_ENV);
    std::process::ExitCode::FAILURE
}
