#!/usr/bin/env bash
# Every test: Rust unit tests, then end-to-end tests against the real kernel binary
# (our own, the jupyter_kernel_test conformance suite, and the notebooks). One build serves all.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../kernelspec/bootstrap.sh"
cd "$ROOT"

echo "==> unit tests"
cargo test --release --locked --workspace

echo "==> end-to-end tests"
export DRYML_KERNEL_BIN="$KERNEL_BIN"
"$VENV/bin/python" -m pytest tests -v --timeout=900 -p no:cacheprovider "$@"
