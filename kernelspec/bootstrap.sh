#!/usr/bin/env bash
# Shared set-up for setup.sh and tests/run.sh: toolchain bits, the project venv, the release build.
# Idempotent: a second run reuses the venv and the warm target directory.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# A checkout without .venv gets a link to the machine's one (DRYML_VENV_DIR), as it shares the
# build dir below: the venv's path names libtorch, which torch-sys and the kernel's build cache
# key on, so a venv of each fresh clone (CI's) was 5 GB more to install and tch built anew.
if ! [ -e "$ROOT/.venv" ]; then
    SHARED_VENV="${DRYML_VENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dryml-rust/venv}"
    mkdir -p "$SHARED_VENV"
    ln -sfn "$SHARED_VENV" "$ROOT/.venv"
fi
VENV="$(cd "$ROOT/.venv" && pwd -P)"
export PATH="$HOME/.cargo/bin:$PATH"
# rust-analyzer's stdx (in the kernel, through evcxr) reads `CI` when it compiles, so a build
# under CI=true rebuilt every ra_ap_* crate that setup.sh had built without it (4.5 minutes). No
# step of ours reads it.
unset CI

# rust-analyzer (inside evcxr) completes std items only with the standard library's sources.
if ! [ -d "$(rustc --print sysroot)/lib/rustlib/src/rust/library" ]; then
    rustup component add rust-src >/dev/null 2>&1 || echo "note: rust-src unavailable; std completions will be limited"
fi

if ! [ -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import nbclient, jupyter_kernel_test, jupyterlab, xdist, sklearn, pyarrow, polars, tensorboard, ipywidgets, jupyterlab_widgets, tqdm, papermill, jupytext, jupyter_console, voila, mlflow" 2>/dev/null; then
    echo "==> creating $VENV with JupyterLab, nbclient and the test tools"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pip
    "$VENV/bin/pip" install --quiet -r "$ROOT/tests/requirements.txt"
fi

# papermill's translator for the kernel (kernelspec/papermill), installed again when its files
# change: the venv is shared by every clone on the machine, so not as an editable install of one.
PM_DIR="$ROOT/kernelspec/papermill"
PM_STAMP="$(cd "$PM_DIR" && find pyproject.toml dryml_papermill -name '*.py' -o -name '*.toml' | sort | xargs sha256sum | sha256sum)"
if [ "$(cat "$VENV/.dryml-papermill" 2>/dev/null)" != "$PM_STAMP" ]; then
    PM_BUILD="$(mktemp -d)"
    cp -r "$PM_DIR/pyproject.toml" "$PM_DIR/dryml_papermill" "$PM_BUILD/"
    # The venv's setuptools where it has one; else pip fetches one to build with.
    "$VENV/bin/pip" install --quiet --no-build-isolation "$PM_BUILD" 2>/dev/null ||
        "$VENV/bin/pip" install --quiet "$PM_BUILD"
    rm -rf "$PM_BUILD"
    echo "$PM_STAMP" >"$VENV/.dryml-papermill"
fi

# Real images with no network: scikit-learn's digits, in target/data as CSV, .npz, Parquet and
# folders of PNG files by class.
"$VENV/bin/python" "$ROOT/tests/data/digits.py" "$ROOT/target/data"

# PyTorch's wheel carries libtorch 2.13.0, which tch 0.26 (dryml's `torch` feature) builds against.
if ! compgen -G "$VENV/lib/python3*/site-packages/torch/lib/libtorch.so" >/dev/null; then
    echo "==> installing torch==2.13.0 into $VENV (libtorch for tch cells; about 5 GB)"
    "$VENV/bin/pip" install --quiet torch==2.13.0
fi

# The debugger's adapter: Debian's lldb-19 ships lldb-dap-19 (and lldb-server, and LLDB's Python
# for Rust's value formatters). Installed with apt-get only when no lldb-dap is on the PATH.
if [ -z "$(compgen -c lldb-dap || true)" ]; then
    echo "==> installing lldb-19 (lldb-dap, for the JupyterLab debugger)"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get install -y -qq lldb-19 >/dev/null 2>&1 ||
        { $SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y -qq lldb-19 >/dev/null; } ||
        echo "note: apt-get could not install lldb-19; the debugger's tests will say that lldb-dap is missing"
fi

# tmux: the terminal tests/test_clients.py runs `jupyter console` in. Installed only when missing.
if ! command -v tmux >/dev/null; then
    echo "==> installing tmux (the console test's terminal)"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get install -y -qq tmux >/dev/null 2>&1 ||
        { $SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y -qq tmux >/dev/null; } ||
        echo "note: apt-get could not install tmux; the console test will fail to start it"
fi

# Cargo's intermediate artifacts go to one directory per machine (`build.build-dir`; the final
# ones stay in target/): a fresh clone, as CI's, rebuilds only this workspace's crates and the
# patched ones, not the hundreds of dependencies an earlier clone built.
export CARGO_BUILD_BUILD_DIR="${CARGO_BUILD_BUILD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dryml-rust/cargo-build}"

bash "$ROOT/kernelspec/patch-deps.sh"
echo "==> building dryml-kernel (release)"
# tests/run.sh keeps every cargo run's output in CARGO_LOG, to name crates built twice.
(cd "$ROOT" && cargo build --release --locked -p dryml-kernel) 2>&1 | tee -a "${CARGO_LOG:-/dev/null}"
KERNEL_BIN="$ROOT/target/release/dryml-kernel"
export KERNEL_BIN VENV ROOT
