//! The analysis process on its own, for the crate's tests: the kernel's binary serves it the
//! same way when started with `DRYML_ANALYSIS_SOCKET` set.

fn main() {
    dryml_analysis::rustc_wrapper_hook();
    let Some(socket) = std::env::var_os(dryml_analysis::SOCKET_ENV) else {
        eprintln!("{} is not set", dryml_analysis::SOCKET_ENV);
        std::process::exit(2);
    };
    dryml_analysis::serve(std::path::Path::new(&socket))
}
