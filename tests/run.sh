#!/usr/bin/env bash
# Every test: the format and lint checks, Rust unit tests, a short run of every fuzz target,
# end-to-end tests against the real kernel binary (our own, the jupyter_kernel_test conformance
# suite, the notebooks and a short soak, a one-node Slurm cluster), then JupyterLab in a real
# browser, and last the turnaround benchmark's figures. One build serves all.
set -euo pipefail
START=$SECONDS
# Each phase's start, in minutes since this script started, and at the end (pass or fail) a table
# of what each phase took: where a slow CI run spent its time.
PHASE_NAMES=()
PHASE_STARTS=()
clock() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }
phase() {  # phase NAME [WHAT IT DOES]
    [ -z "${CARGO_LOG:-}" ] || echo "### ${1// /-}" >>"$CARGO_LOG"
    printf '==> %s%s (at %s)\n' "$1" "${2:+: $2}" "$(clock $((SECONDS - START)))"
    PHASE_NAMES+=("$1")
    PHASE_STARTS+=($((SECONDS - START)))
}
phase_times() {  # phase_times EXIT_STATUS
    local rc=$1 i end
    echo "==> phase times (the test command $([ $rc -eq 0 ] && echo passed || echo "failed, exit $rc"))"
    for i in "${!PHASE_NAMES[@]}"; do
        end=${PHASE_STARTS[$((i + 1))]:-$((SECONDS - START))}
        printf '    %-22s at %6s  took %6s\n' "${PHASE_NAMES[$i]}" "$(clock "${PHASE_STARTS[$i]}")" \
            "$(clock $((end - PHASE_STARTS[i])))"
    done
    printf '    %-22s           %6s\n' "all" "$(clock $((SECONDS - START)))"
}
# Every cargo run's output also goes to CARGO_LOG, marked by phase, so the end can name the
# crates.io crates compiled in more than one phase: on a warm build cache each is built once per
# machine, and one built again means a phase asked for other features, flags or environment.
CARGO_LOG="$(mktemp)"
# The end-to-end tests' analysis misses (conftest.py), printed at the end.
export DRYML_TEST_MISSES="$(mktemp)"
logged() { "$@" 2>&1 | tee -a "$CARGO_LOG"; }
rebuilt() {
    awk '/^### /{p=$2} /^ *Compiling [^ ]+ v[^ ]+$/{k=$2" "$3; if (k in seen && seen[k] != p) again[k]=seen[k]" and "p; seen[k]=p}
         END{for (k in again) print "    " k ": " again[k]}' "$CARGO_LOG" | sort
}
finish() {
    local rc=$?
    local again
    again="$(rebuilt)"
    if [ -n "$again" ]; then
        echo "==> crates.io crates compiled in more than one phase: empty on a warm build cache; a cold"
        echo "    machine builds some once per profile (check, release) or per feature set:"
        echo "$again"
    fi
    rm -f "$CARGO_LOG"
    if [ -s "$DRYML_TEST_MISSES" ]; then
        echo "==> the shared analysis: loads whose cargo metadata failed (tried again), times it"
        echo "    started again, and \`let\`s it found no type for (rustc's were asked for):"
        sed 's/^/    /' "$DRYML_TEST_MISSES"
    fi
    rm -f "$DRYML_TEST_MISSES"
    phase_times "$rc"
}
trap finish EXIT
phase "set-up" "the venv, then the kernel's release build"
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
FEATURES=torch,linfa,candle,burn,numpy,images,parquet,polars,mlflow

phase "lints" "rustfmt.toml; clippy with warnings as errors, dryml with every feature"
cargo fmt --all --check
(cd tests/fuzz && cargo fmt --check)
logged cargo clippy --locked --workspace --all-targets --exclude dryml-gpu-model -- -D warnings
logged with_torch cargo clippy --locked -p dryml --all-targets --features "$FEATURES" -- -D warnings

phase "unit" "the workspace's unit tests, and those of the patched evcxr"
logged cargo test --release --locked --workspace
logged cargo test --release --locked -p evcxr --lib

phase "features" "dryml's unit tests with torch (the venv's libtorch), linfa, candle, burn, numpy, images, parquet, polars"
logged with_torch cargo test --release --locked -p dryml --features "$FEATURES"

phase "fuzz" "a short fixed run of each target (tests/fuzz/run.sh RUNS for longer)"
bash tests/fuzz/run.sh 20000

phase "end to end" "the real kernel through jupyter_client"
export DRYML_KERNEL_BIN="$KERNEL_BIN"
# The suite's kernels build about 7 GB into the machine's build cache (every framework, each of
# dryml's feature sets); at the default bound (10 GiB) their warm-ups evicted what earlier tests
# had built, and later tests built torch-sys and polars again.
export DRYML_BUILD_CACHE_LIMIT="${DRYML_BUILD_CACHE_LIMIT:-20G}"
# Two pytest workers, a test file each at a time (a file's tests keep their order and its module
# kernel; conftest.py hands out the longest files first), then the tests marked `timing` (bounds on
# an interrupt's wait, output order, redraws, the soak) alone: beside the other worker's builds a
# 2 s bound once took 2.2 s. DRYML_TEST_WORKERS=1 runs everything in one process.
WORKERS="${DRYML_TEST_WORKERS:-2}"
pytest_run() { "$VENV/bin/python" -m pytest tests -v --timeout=900 -p no:cacheprovider --durations=20 "$@"; }
if [ "$WORKERS" -le 1 ]; then
    pytest_run "$@"
else
    pytest_run -n "$WORKERS" --dist loadfile --no-loadscope-reorder -m "not timing" "$@"
    phase "timing tests" "the tests marked timing, alone"
    # Exit 5: the arguments selected none of them.
    pytest_run -m timing "$@" || [ $? -eq 5 ]
fi

phase "browser" "JupyterLab in headless Chromium"
bash tests/browser/run.sh

# A benchmark, not a test: what a user waits for after a start and two restarts (the first cell,
# the first naming dryml and tch, a trivial cell), with where the time went, printed for the log
# to show a return of issue 61's slow first tch cell. No figure can fail the command.
phase "turnaround" "the first cells after a start and restarts (figures only)"
"$VENV/bin/python" tests/bench/bench_latency.py --restarts 3 || echo "note: the turnaround benchmark did not finish"
