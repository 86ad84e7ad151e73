//! Exports what every cell shares from the kernel binary (the interrupt flag, the batch-size
//! table), so cells can find it with `dlsym`.
fn main() {
    for sym in ["dryml_interrupt_flag", "dryml_batch_get", "dryml_batch_record"] {
        println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol={sym}");
    }
}
