#!/usr/bin/env bash
# The main job on a fresh machine: build, install the kernelspec into the project's venv,
# execute notebooks/tour.ipynb headless, and say where to look.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

"$KERNEL_BIN" install --prefix "$VENV"
# Where NVIDIA's driver runs, candle gets its CUDA backend: nvcc from PyPI (kernelspec/cuda.sh).
if [ -e /proc/driver/nvidia/version ] || [ -e /dev/nvidiactl ]; then
    source "$ROOT/kernelspec/cuda.sh" "$VENV" || echo "==> candle's models stay on the CPU"
fi
# The machine's build cache gets dryml, tch, candle and burn now, so a user's first cell naming
# one of them takes seconds.
echo "==> building dryml, tch, candle and burn into the build cache (once per machine and toolchain)"
"$KERNEL_BIN" cache warm --torch --candle --burn
mkdir -p "$ROOT/build"
OUT="$ROOT/build/tour.executed.ipynb"
echo "==> executing notebooks/tour.ipynb"
"$VENV/bin/jupyter" nbconvert --to notebook --execute \
    --ExecutePreprocessor.kernel_name=dryml-rust --ExecutePreprocessor.timeout=600 \
    --output "$OUT" "$ROOT/notebooks/tour.ipynb"
cat <<MSG

Done. The executed tour is at:
    $OUT
To work in JupyterLab with the "DRYML Rust" kernel:
    $VENV/bin/jupyter lab $ROOT/notebooks
MSG
