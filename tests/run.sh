#!/usr/bin/env bash
# Every test: the format and lint checks, Rust unit tests, a short run of every fuzz target, end-to-end tests against the
# real kernel binary (our own, the jupyter_kernel_test conformance suite, the notebooks and a
# short soak, a one-node Slurm cluster), then JupyterLab in a real browser. One build serves all.
set -euo pipefail
START=$SECONDS
# Each phase's start, in minutes since this script started: where a slow CI run spent its time.
phase() { printf '==> %s (at %d:%02d)\n' "$1" $(((SECONDS - START) / 60)) $(((SECONDS - START) % 60)); }
source "$(dirname "${BASH_SOURCE[0]}")/../kernelspec/bootstrap.sh"
cd "$ROOT"

# LIBTORCH names the wheel's directory, a variable torch-sys's build script watches: asked through
# LIBTORCH_USE_PYTORCH, it finds the path with python and watches nothing, so the build directory
# every clone shares (bootstrap.sh) kept the first clone's path and a later clone failed to link.
TORCH_DIR="$(echo "$VENV"/lib/python3*/site-packages/torch)"
CXX11_ABI="$("$VENV/bin/python" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null)"
with_torch() {
    env -u LIBTORCH_USE_PYTORCH LIBTORCH="$TORCH_DIR" LIBTORCH_CXX11_ABI="$CXX11_ABI" \
        LD_LIBRARY_PATH="$TORCH_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
}
FEATURES=torch,linfa,candle,numpy,images,parquet,polars

phase "format and lints (rustfmt.toml; clippy with warnings as errors, dryml with every feature)"
cargo fmt --all --check
(cd tests/fuzz && cargo fmt --check)
cargo clippy --locked --workspace --all-targets --exclude dryml-gpu-model -- -D warnings
with_torch cargo clippy --locked -p dryml --all-targets --features "$FEATURES" -- -D warnings

phase "unit tests"
cargo test --release --locked --workspace

phase "unit tests of dryml's features: torch (tch against the venv's libtorch), linfa, candle, numpy, images, parquet, polars"
with_torch cargo test --release --locked -p dryml --features "$FEATURES"

phase "fuzz targets, a short fixed run each (tests/fuzz/run.sh RUNS for longer)"
bash tests/fuzz/run.sh 20000

phase "end-to-end tests"
export DRYML_KERNEL_BIN="$KERNEL_BIN"
"$VENV/bin/python" -m pytest tests -v --timeout=900 -p no:cacheprovider "$@"

phase "browser tests (JupyterLab in headless Chromium)"
bash tests/browser/run.sh
phase "done"
