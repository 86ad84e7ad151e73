//! Links libtorch's CUDA half into the model check where the libtorch built against has one:
//! torch-sys asks for it, but calls none of its code, so the linker's --as-needed drops it and
//! libtorch then has no CUDA backend.

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    let Some(lib) = std::env::var_os("LIBTORCH").map(|d| std::path::PathBuf::from(d).join("lib")) else { return };
    if lib.join("libtorch_cuda.so").is_file() {
        println!("cargo:rustc-link-arg-bins=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg-bins=-L{}", lib.display());
        println!("cargo:rustc-link-arg-bins=-ltorch_cuda");
        println!("cargo:rustc-link-arg-bins=-Wl,--as-needed");
    }
}
