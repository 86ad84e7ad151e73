#!/usr/bin/env bash
# Applies our patches (kernel/patches/<crate>-<version>.patch) to dependencies' sources as
# published on crates.io, into target/patched/<crate>-<version>, where Cargo.toml's
# [patch.crates-io] points. Every build needs this first (bootstrap.sh runs it). Idempotent:
# redone only when a patch file changes. The published archive is checked against its checksum.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

patch_crate() {
    local crate="$1" version="$2" sha256="$3"
    local patch="$ROOT/kernel/patches/$crate-$version.patch"
    local dest="$ROOT/target/patched/$crate-$version"
    local want
    want="$(sha256sum "$patch" | cut -d' ' -f1)"
    if [ "$(cat "$dest/.dryml-patch" 2>/dev/null)" = "$want" ]; then
        return 0
    fi
    local archive
    archive="$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"$crate-$version.crate" 2>/dev/null | head -n1 || true)"
    local tmp
    tmp="$(mktemp -d)"
    if [ -z "$archive" ]; then
        archive="$tmp/$crate-$version.crate"
        curl -sSfL --retry 3 -o "$archive" "https://static.crates.io/crates/$crate/$crate-$version.crate" \
            || { echo "patch-deps: cannot download $crate $version from crates.io" >&2; exit 1; }
    fi
    if [ "$(sha256sum "$archive" | cut -d' ' -f1)" != "$sha256" ]; then
        echo "patch-deps: $archive does not match crates.io's checksum for $crate $version" >&2
        exit 1
    fi
    mkdir -p "$tmp/src"
    tar xzf "$archive" -C "$tmp/src" --strip-components=1
    (cd "$tmp/src" && patch -p1 --quiet --forward < "$patch") \
        || { echo "patch-deps: $patch does not apply to $crate $version" >&2; exit 1; }
    echo "$want" > "$tmp/src/.dryml-patch"
    mkdir -p "$(dirname "$dest")"
    rm -rf "$dest"
    mv "$tmp/src" "$dest"
    rm -rf "$tmp"
    echo "==> patched $crate $version with $(basename "$patch")"
}

# The checksum is Cargo.lock's for the registry crate, from before the patch replaced it.
patch_crate evcxr 0.22.0 ee69caeeefc311959b85962458e370d8eccb165123edbc5270134aaee6d7ed80
patch_crate zeromq 0.7.0 55b31ad37d1aad854ddc8c4f16b637259ce95f757f6c32f05447279c68ed9e2a
# burn's manifests without their optional libtorch backend: Cargo's resolver weighs an optional
# dependency's `links` even when it is off, and burn-tch's tch 0.22 clashes with our tch 0.26.
patch_crate burn-dispatch 0.22.1 64d255d7609901f7aaf2138b394a6fe8dd8c7b526d1ed2736ba2c643944028fa
patch_crate burn-signal 0.22.1 3afcc7d0f8654ccf9529c9e93f21383b8828d4c784c0429966d2026698f72451
# torch-sys only when asked: the GPU check's model built against an older PyTorch
# (tests/gpu/build.sh --torch), in a build of its own; the workspace builds the registry's.
if [ "${1:-}" = torch-sys ]; then
    patch_crate torch-sys 0.26.0 5ae60ab95333c42adcc1a9e74057357e4324a1f344c403e48712a144ab731019
fi
