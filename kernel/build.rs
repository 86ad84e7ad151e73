//! Exports what every cell shares from the kernel binary (the interrupt flag, the batch-size
//! table), so cells can find it with `dlsym`. The names come from the runtime's one list.
mod symbols {
    include!("../runtime/sys/src/symbols.rs");
}

fn main() {
    println!("cargo:rerun-if-changed=../runtime/sys/src/symbols.rs");
    for sym in symbols::EXPORTED {
        println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol={sym}");
    }
}
