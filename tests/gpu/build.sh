#!/usr/bin/env bash
# Builds the GPU check's bundle: the probe (x86-64, Rust's std linked in; only glibc and what it
# dlopens, libnvidia-ml, come from the machine), check.py and README.md, in build/gpu-bundle/ and
# build/gpu-bundle.tar.gz. Run it here; copy the tarball to the GPU machine; see README.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PATH="$HOME/.cargo/bin:$PATH"
bash "$ROOT/kernelspec/patch-deps.sh"
(cd "$ROOT" && cargo build --release --locked -p dryml-gpu-probe)
OUT="$ROOT/build/gpu-bundle"
rm -rf "$OUT"
mkdir -p "$OUT"
cp "$ROOT/target/release/dryml-gpu-probe" "$ROOT/tests/gpu/check.py" "$ROOT/tests/gpu/README.md" "$OUT/"
strip --strip-all "$OUT/dryml-gpu-probe"
# Nothing but glibc may be linked: the GPU machine has no Rust toolchain and no network.
libs="$(ldd "$OUT/dryml-gpu-probe" | awk '{print $1}' | grep -v -E '^(linux-vdso|/lib64/ld-linux-x86-64|libc|libm|libgcc_s|libdl|libpthread|librt)\.' || true)"
if [ -n "$libs" ]; then
    echo "the probe links libraries a GPU machine may lack: $libs" >&2
    exit 1
fi
glibc="$(objdump -T "$OUT/dryml-gpu-probe" | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n | tail -1)"
tar -C "$ROOT/build" -czf "$ROOT/build/gpu-bundle.tar.gz" gpu-bundle
echo "bundle: $ROOT/build/gpu-bundle.tar.gz ($(du -h "$ROOT/build/gpu-bundle.tar.gz" | cut -f1); the probe needs $glibc or newer)"
