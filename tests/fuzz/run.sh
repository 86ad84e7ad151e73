#!/usr/bin/env bash
# Runs the fuzz targets (libFuzzer through cargo-fuzz, on the nightly toolchain it needs):
#   bash tests/fuzz/run.sh [RUNS] [TARGET...]
# RUNS executions per target (default 20000: CI's short run); every target when none is named.
# Each run starts from tests/fuzz/seeds/<target> plus a scratch corpus, so the checkout is not
# written to. A crash stops the script, leaving the input under tests/fuzz/artifacts/<target>.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
RUNS="${1:-20000}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(wire is_complete magic requests selector object index)

# Nightly and the sanitizer's flags build apart from the shared build dir, in a target dir of
# their own that every clone on the machine shares, as the build dir is (bootstrap.sh): a fresh
# clone rebuilds only this checkout's crates, not the instrumented dependencies.
unset CARGO_BUILD_BUILD_DIR
TARGET_DIR="${DRYML_FUZZ_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dryml-rust/fuzz-target}"
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --version 0.13.2

cp tests/fuzz/Cargo.lock "${TMPDIR:-/tmp}/dryml-fuzz-lock.$$"
cargo +nightly fuzz build --fuzz-dir tests/fuzz --target-dir "$TARGET_DIR" >/dev/null
# cargo-fuzz has no --locked: the lock file must come out of the build unchanged.
if ! cmp -s tests/fuzz/Cargo.lock "${TMPDIR:-/tmp}/dryml-fuzz-lock.$$"; then
    cp "${TMPDIR:-/tmp}/dryml-fuzz-lock.$$" tests/fuzz/Cargo.lock
    echo "fuzz: tests/fuzz/Cargo.lock is out of date; update it with a build and commit it" >&2
    exit 1
fi
rm -f "${TMPDIR:-/tmp}/dryml-fuzz-lock.$$"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for t in "${TARGETS[@]}"; do
    mkdir -p "$scratch/$t"
    log="$scratch/$t.log"
    start=$(date +%s)
    if ! cargo +nightly fuzz run --fuzz-dir tests/fuzz --target-dir "$TARGET_DIR" "$t" "$scratch/$t" "tests/fuzz/seeds/$t" -- \
            -runs="$RUNS" -max_len=4096 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1; then
        tail -40 "$log" >&2
        echo "fuzz: $t crashed; the input is under tests/fuzz/artifacts/$t" >&2
        exit 1
    fi
    execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")"
    cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")"
    printf 'fuzz: %-12s %10s executions, %5s edges, %4ss, no crash\n' "$t" "$execs" "$cov" "$(( $(date +%s) - start ))"
done
