#!/usr/bin/env bash
# The browser tests: JupyterLab from the venv in Debian's headless Chromium, driven through
# playwright-core (pinned in tests/package.json). Installs chromium with apt-get only when it is
# missing. Needs KERNEL_BIN and VENV (kernelspec/bootstrap.sh sets them); screenshots go to
# target/test-artifacts/browser/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CHROMIUM=/usr/bin/chromium

if ! [ -x "$CHROMIUM" ]; then
    echo "==> installing Debian's chromium for the browser tests"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    if ! { $SUDO apt-get install -y -qq chromium >/dev/null 2>&1 ||
           { $SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y -qq chromium >/dev/null; }; }; then
        echo "error: the browser tests need Debian's chromium at $CHROMIUM, and apt-get could not install it" >&2
        echo "       (install it with: apt-get install chromium)" >&2
        exit 1
    fi
fi

cd "$ROOT/tests"
# npm ci only when the lock file changed since the last install.
if ! cmp -s package-lock.json node_modules/.dryml-installed-lock 2>/dev/null; then
    npm ci --no-audit --no-fund --loglevel=error
    cp package-lock.json node_modules/.dryml-installed-lock
fi
export DRYML_KERNEL_BIN="${KERNEL_BIN:-${DRYML_KERNEL_BIN:-$ROOT/target/release/dryml-kernel}}"
export VENV="${VENV:-$ROOT/.venv}"
node --test --test-concurrency=1 --test-reporter=spec browser/
echo "browser screenshots: $ROOT/target/test-artifacts/browser/"
