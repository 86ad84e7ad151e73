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
# ipywidgets 7's front end (widgets7.test.mjs) in a venv of its own, shared by the machine's
# clones as the project's is; made again when its pins change.
VENV_WIDGETS7="${DRYML_VENV_WIDGETS7:-${XDG_CACHE_HOME:-$HOME/.cache}/dryml-rust/venv-widgets7}"
if ! cmp -s browser/requirements-widgets7.txt "$VENV_WIDGETS7/.dryml-installed" 2>/dev/null; then
    echo "==> making $VENV_WIDGETS7 (Notebook 6.5 with ipywidgets 7's front end)"
    rm -rf "$VENV_WIDGETS7"
    python3 -m venv "$VENV_WIDGETS7"
    "$VENV_WIDGETS7/bin/pip" install --quiet -r browser/requirements-widgets7.txt
    cp browser/requirements-widgets7.txt "$VENV_WIDGETS7/.dryml-installed"
fi
export VENV_WIDGETS7
export DRYML_KERNEL_BIN="${KERNEL_BIN:-${DRYML_KERNEL_BIN:-$ROOT/target/release/dryml-kernel}}"
export VENV="${VENV:-$ROOT/.venv}"
node --test --test-concurrency=1 --test-reporter=spec browser/
echo "browser screenshots: $ROOT/target/test-artifacts/browser/"
