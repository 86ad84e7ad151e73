#!/usr/bin/env bash
# Builds the GPU check's bundle: the probe (x86-64, Rust's std linked in; only glibc and what it
# dlopens, libnvidia-ml, come from the machine), check.py and README.md, in build/gpu-bundle/ and
# build/gpu-bundle.tar.gz. Run it here; copy the tarball to the GPU machine; see README.md.
#
#   bash tests/gpu/build.sh                  # the model against the venv's PyTorch
#   bash tests/gpu/build.sh --torch 2.11.0   # ... against PyTorch 2.11.0's wheel from PyPI
#   bash tests/gpu/build.sh --cuda           # ... with candle's CUDA backend (nvcc from PyPI;
#                                            # CUDA_COMPUTE_CAP, 90 unless set: H100 and H200)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PATH="$HOME/.cargo/bin:$PATH"
WANTED=""
FEATURES=torch
while [ $# -gt 0 ]; do
    case "$1" in
        --torch) WANTED="${2:?--torch needs a version, as 2.11.0}"; shift 2 ;;
        --cuda) FEATURES=candle-cuda; shift ;;
        *) echo "usage: $0 [--torch VERSION] [--cuda]" >&2; exit 2 ;;
    esac
done
bash "$ROOT/kernelspec/patch-deps.sh"
(cd "$ROOT" && cargo build --release --locked -p dryml-gpu-probe)
# The model check links libtorch, found there in PyTorch's wheel: built where the venv has one.
# LIBTORCH and LIBTORCH_CXX11_ABI as tests/run.sh sets them (the venv's real path, the wheel's
# ABI): torch-sys rebuilds when either changes, and the build directory is the machine's, so a
# clone's link path here cost a rebuild of torch-sys and tch here and another in the next run.
VENV="$(cd "$ROOT/.venv" 2>/dev/null && pwd -P || echo "$ROOT/.venv")"
TORCH_DIR="$(echo "$VENV"/lib/python3*/site-packages/torch)"
MODEL="$ROOT/target/release/dryml-gpu-model"
VENV_TORCH="$("$VENV/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null || true)"
if [ "$FEATURES" = candle-cuda ]; then
    source "$ROOT/kernelspec/cuda.sh" "$VENV"
fi
if [ -n "$WANTED" ] && [ "$WANTED" != "${VENV_TORCH%%+*}" ]; then
    # Another PyTorch: its wheel's libtorch (lib and headers only), kept per machine.
    TORCH_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/dryml-rust/libtorch/$WANTED/torch"
    if [ ! -f "$TORCH_DIR/lib/libtorch.so" ]; then
        tmp="$(mktemp -d)"
        "$VENV/bin/pip" download --quiet --no-deps --only-binary=:all: --dest "$tmp" "torch==$WANTED"
        mkdir -p "$tmp/x"
        unzip -q "$tmp"/torch-*.whl 'torch/lib/*' 'torch/include/*' 'torch/version.py' -d "$tmp/x"
        rm -rf "$TORCH_DIR" && mkdir -p "$(dirname "$TORCH_DIR")" && mv "$tmp/x/torch" "$TORCH_DIR"
        rm -rf "$tmp"
    fi
    # tch 0.26's torch-sys is generated for 2.13: our patch stubs what an older libtorch lacks.
    # The patched crate is built in a copy of the workspace whose Cargo.lock names it (only its
    # source changes, and --locked holds the rest), so the repository's lock stays as it is.
    bash "$ROOT/kernelspec/patch-deps.sh" torch-sys
    OWN="$ROOT/target/gpu-torch-$WANTED"
    WS="$OWN/workspace"
    rm -rf "$WS" && mkdir -p "$WS/target"
    tar -C "$ROOT" --exclude=./target --exclude=./tests/fuzz/target --exclude=./build --exclude=./.git \
        --exclude=./.venv --exclude=node_modules -cf - . | tar -C "$WS" -xf -
    ln -s "$ROOT/target/patched" "$WS/target/patched"
    sed -i '/^\[patch.crates-io\]$/a torch-sys = { path = "target/patched/torch-sys-0.26.0" }' "$WS/Cargo.toml"
    python3 - "$WS/Cargo.lock" <<'EOF'
import re, sys
lock = open(sys.argv[1]).read()
entry = re.search(r'\[\[package\]\]\nname = "torch-sys"\nversion = "0.26.0"\nsource = .*\nchecksum = .*\n', lock)
open(sys.argv[1], "w").write(lock.replace(entry[0], '[[package]]\nname = "torch-sys"\nversion = "0.26.0"\n'))
EOF
    CXX11_ABI=1
    (cd "$WS" && env -u LIBTORCH_USE_PYTORCH LIBTORCH="$TORCH_DIR" LIBTORCH_CXX11_ABI="$CXX11_ABI" \
        CARGO_TARGET_DIR="$OWN/target" cargo build --release --locked -p dryml-gpu-model --features "$FEATURES")
    MODEL="$OWN/target/release/dryml-gpu-model"
    BUILT_FOR="$(sed -n "s/^__version__ = '\(.*\)'/\1/p" "$(dirname "$TORCH_DIR")/torch/version.py")"
elif [ -f "$TORCH_DIR/lib/libtorch.so" ]; then
    CXX11_ABI="$("$VENV/bin/python" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')"
    (cd "$ROOT" && env -u LIBTORCH_USE_PYTORCH LIBTORCH="$TORCH_DIR" LIBTORCH_CXX11_ABI="$CXX11_ABI" \
        cargo build --release --locked -p dryml-gpu-model --features "$FEATURES")
    BUILT_FOR="$VENV_TORCH"
fi
OUT="$ROOT/build/gpu-bundle"
rm -rf "$OUT"
mkdir -p "$OUT"
cp "$ROOT/target/release/dryml-gpu-probe" "$ROOT"/tests/gpu/{check.py,bench.py,README.md} "$OUT/"
strip --strip-all "$OUT/dryml-gpu-probe"
if [ -n "${BUILT_FOR:-}" ]; then
    cp "$MODEL" "$OUT/"
    strip --strip-all "$OUT/dryml-gpu-model"
    echo "$BUILT_FOR" > "$OUT/libtorch-version"
fi
# Nothing but glibc may be linked: the GPU machine has no Rust toolchain and no network. The
# model adds libtorch's own libraries (and what they load, which PyTorch's wheel and its nvidia
# packages hold there) and libstdc++; with candle's CUDA backend, the driver's libcuda and the
# CUDA libraries that PyTorch's nvidia packages hold.
system='^(linux-vdso|/lib64/ld-linux-x86-64|ld-linux-x86-64|libc|libm|libgcc_s|libdl|libpthread|librt|libutil)\.'
for bin in "$OUT"/dryml-gpu-*; do
    if [ "$(basename "$bin")" = dryml-gpu-probe ]; then
        libs="$(ldd "$bin" | awk '{print $1}' | grep -v -E "$system" || true)"
    else
        libs="$(objdump -p "$bin" | awk '/NEEDED/ {print $2}' | grep -v -E "$system" \
            | grep -v -E '^libstdc\+\+\.' | grep -v -E '^lib(cuda|cudart|cublas|cublasLt|curand|nvrtc)\.so' \
            | while read -r lib; do
                [ -e "$TORCH_DIR/lib/$lib" ] || echo "$lib"; done)"
    fi
    if [ -n "$libs" ]; then
        echo "$(basename "$bin") links libraries a GPU machine may lack: $libs" >&2
        exit 1
    fi
done
glibc="$(objdump -T "$OUT/dryml-gpu-probe" | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n | tail -1)"
tar -C "$ROOT/build" -czf "$ROOT/build/gpu-bundle.tar.gz" gpu-bundle
echo "bundle: $ROOT/build/gpu-bundle.tar.gz ($(du -h "$ROOT/build/gpu-bundle.tar.gz" | cut -f1); the probe needs $glibc or newer; the model built for PyTorch ${BUILT_FOR:-none})"
