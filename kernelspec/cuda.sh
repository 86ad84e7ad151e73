#!/usr/bin/env bash
# What a build of candle's CUDA backend (dryml's `candle-cuda`) needs, from PyPI into the venv
# beside PyTorch's CUDA libraries: nvcc, NVVM, the compiler's headers and thrust (CCCL), of the
# CUDA that the venv's PyTorch was built for. Sourced, it exports:
#   CUDA_HOME         the wheels' nvidia/cu13 (nvcc finds its parts there, as in a toolkit)
#   CUDA_ROOT         the link names cargo needs: the libraries' unversioned names, and a stub of
#                     the driver's libcuda.so (the machine's driver gives the real one at run time)
#   CUDA_COMPUTE_CAP  nvidia-smi's GPU, else as set, else 90 (H100 and H200)
#   CUDARC_CUDA_VERSION  that CUDA's version as cudarc writes it (13000 for 13.0)
#   PATH              with nvcc
# and writes them but PATH to VENV/share/dryml-rust/cuda.env, which the kernel reads where
# NVIDIA's driver runs (kernel/src/cuda.rs): its cells then build dryml's `candle-cuda`.
# Usage: source kernelspec/cuda.sh VENV   (returns 1, saying why, where it cannot)
cuda_setup() {
    local venv="$1" py cuda major site
    py="$venv/bin/python"
    cuda="$("$py" -c 'import torch; print(torch.version.cuda or "")' 2>/dev/null || true)"
    if [ -z "$cuda" ]; then
        echo "cuda.sh: the venv's PyTorch has no CUDA: candle's CUDA backend is not built" >&2
        return 1
    fi
    major="${cuda%%.*}"
    site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    export CUDA_HOME="$site/nvidia/cu$major"
    if [ ! -x "$CUDA_HOME/bin/nvcc" ] || [ ! -d "$CUDA_HOME/nvvm" ] || [ ! -d "$CUDA_HOME/include/thrust" ]; then
        "$venv/bin/pip" install --quiet "nvidia-cuda-nvcc==$cuda.*" "nvidia-nvvm==$cuda.*" \
            "nvidia-cuda-crt==$cuda.*" "nvidia-cuda-cccl==$cuda.*" || return 1
    fi
    CUDA_HOME="$(readlink -f "$CUDA_HOME")"
    export PATH="$CUDA_HOME/bin:$PATH"
    export CUDA_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/dryml-rust/cuda-link/$cuda"
    if [ ! -f "$CUDA_ROOT/lib/libcuda.so" ]; then
        local lib tmp
        mkdir -p "$CUDA_ROOT/lib"
        for lib in cublas cublasLt curand nvrtc cudart; do
            ln -sf "$(ls "$CUDA_HOME"/lib/lib$lib.so.[0-9]* | head -1)" "$CUDA_ROOT/lib/lib$lib.so"
        done
        # The driver API's entry points, each an empty function, under the driver's soname: a
        # link-time stand-in, as the toolkit's lib64/stubs/libcuda.so is.
        tmp="$(mktemp -d)"
        cc -E -P -I"$CUDA_HOME/include" "$CUDA_HOME/include/cuda.h" \
            | grep -oE '\bcu[A-Z][A-Za-z0-9_]*[[:space:]]*\(' | tr -d ' (' | sort -u \
            | sed 's/.*/void &(void) {}/' > "$tmp/stub.c"
        cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$tmp/libcuda.so" "$tmp/stub.c" \
            && mv "$tmp/libcuda.so" "$CUDA_ROOT/lib/libcuda.so"
        rm -rf "$tmp"
    fi
    if [ -z "${CUDA_COMPUTE_CAP:-}" ]; then
        CUDA_COMPUTE_CAP="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null \
            | head -1 | tr -d '.' || true)"
        export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
    fi
    export CUDARC_CUDA_VERSION="${major}0${cuda#*.}0"
    mkdir -p "$venv/share/dryml-rust"
    printf 'CUDA_HOME=%s\nCUDA_ROOT=%s\nCUDA_COMPUTE_CAP=%s\nCUDARC_CUDA_VERSION=%s\n' \
        "$CUDA_HOME" "$CUDA_ROOT" "$CUDA_COMPUTE_CAP" "$CUDARC_CUDA_VERSION" > "$venv/share/dryml-rust/cuda.env.new"
    mv "$venv/share/dryml-rust/cuda.env.new" "$venv/share/dryml-rust/cuda.env"
}
cuda_setup "${1:?usage: source kernelspec/cuda.sh VENV}"
