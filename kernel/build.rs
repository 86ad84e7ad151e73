//! Exports the interrupt flag from the kernel binary so cells can find it with `dlsym`.
fn main() {
    println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol=dryml_interrupt_flag");
}
