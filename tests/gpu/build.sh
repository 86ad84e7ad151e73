#!/usr/bin/env bash
# Builds the GPU check's bundle: the probe (x86-64, Rust's std linked in; only glibc and what it
# dlopens, libnvidia-ml, come from the machine), check.py and README.md, in build/gpu-bundle/ and
# build/gpu-bundle.tar.gz. Run it here; copy the tarball to the GPU machine; see README.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PATH="$HOME/.cargo/bin:$PATH"
bash "$ROOT/kernelspec/patch-deps.sh"
(cd "$ROOT" && cargo build --release --locked -p dryml-gpu-probe)
# The model check links libtorch, found there in PyTorch's wheel: built where the venv has one.
# LIBTORCH and LIBTORCH_CXX11_ABI as tests/run.sh sets them (the venv's real path, the wheel's
# ABI): torch-sys rebuilds when either changes, and the build directory is the machine's, so a
# clone's link path here cost a rebuild of torch-sys and tch here and another in the next run.
VENV="$(cd "$ROOT/.venv" 2>/dev/null && pwd -P || echo "$ROOT/.venv")"
TORCH_DIR="$(echo "$VENV"/lib/python3*/site-packages/torch)"
if [ -f "$TORCH_DIR/lib/libtorch.so" ]; then
    CXX11_ABI="$("$VENV/bin/python" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')"
    (cd "$ROOT" && env -u LIBTORCH_USE_PYTORCH LIBTORCH="$TORCH_DIR" LIBTORCH_CXX11_ABI="$CXX11_ABI" \
        cargo build --release --locked -p dryml-gpu-model --features torch)
fi
OUT="$ROOT/build/gpu-bundle"
rm -rf "$OUT"
mkdir -p "$OUT"
cp "$ROOT/target/release/dryml-gpu-probe" "$ROOT/tests/gpu/check.py" "$ROOT/tests/gpu/README.md" "$OUT/"
strip --strip-all "$OUT/dryml-gpu-probe"
if [ -f "$TORCH_DIR/lib/libtorch.so" ]; then
    cp "$ROOT/target/release/dryml-gpu-model" "$OUT/"
    strip --strip-all "$OUT/dryml-gpu-model"
    "$VENV/bin/python" -c 'import torch; print(torch.__version__)' > "$OUT/libtorch-version"
fi
# Nothing but glibc may be linked: the GPU machine has no Rust toolchain and no network. The
# model adds libtorch and what it loads, which PyTorch's wheel (and its nvidia packages) hold there.
system='^(linux-vdso|/lib64/ld-linux-x86-64|libc|libm|libgcc_s|libdl|libpthread|librt|libutil)\.'
for bin in "$OUT"/dryml-gpu-*; do
    libs="$(LD_LIBRARY_PATH="$TORCH_DIR/lib" ldd "$bin" | grep -v -F "$(dirname "$TORCH_DIR")/" \
        | awk '{print $1}' | grep -v -E "$system" | grep -v -E '^libstdc\+\+\.' || true)"
    if [ "$(basename "$bin")" = dryml-gpu-probe ]; then
        libs="$(ldd "$bin" | awk '{print $1}' | grep -v -E "$system" || true)"
    fi
    if [ -n "$libs" ]; then
        echo "$(basename "$bin") links libraries a GPU machine may lack: $libs" >&2
        exit 1
    fi
done
glibc="$(objdump -T "$OUT/dryml-gpu-probe" | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n | tail -1)"
tar -C "$ROOT/build" -czf "$ROOT/build/gpu-bundle.tar.gz" gpu-bundle
echo "bundle: $ROOT/build/gpu-bundle.tar.gz ($(du -h "$ROOT/build/gpu-bundle.tar.gz" | cut -f1); the probe needs $glibc or newer)"
