#!/usr/bin/env bash
# The bf16 speed-up of the CPU backend's convolutions: builds bench/bf16_ops.c against the library of BUILD
# (default build/, run `make` first) and times ResNet-18's and VGG-16's convolution shapes at 3x64x64 with fp32 and
# with bf16 maps, forward and backward, the same threads for both (see the program's top comment). The last line is
# `bf16_vs_fp32_conv: X`, fp32 time over bf16 time of every layer of both nets together.
# Env: BUILD (default build), BATCH (default 64), THREADS (default: all cores), REPS (default 3),
# OMP_WAIT_POLICY (default passive: spinning threads of other processes on a small machine skew either side).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BATCH=${BATCH:-64}
THREADS=${THREADS:-$(nproc)}
REPS=${REPS:-3}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
[ -f "$BUILD/libvdnn.a" ] || { echo "bf16-ops: $BUILD/libvdnn.a not built (run make)" >&2; exit 1; }
# The library's OpenBLAS: its OpenMP build where installed (CMakeLists.txt), whose GEMMs run on the same OpenMP
# threads as oneDNN's primitives; the default (pthreads) build's threads yield against them on a small machine.
OPENBLAS_DIR=/usr/lib/$(gcc -dumpmachine)/openblas-openmp
BLAS=(-lopenblas)
[ -e "$OPENBLAS_DIR/libopenblas.so" ] && BLAS=(-L"$OPENBLAS_DIR" -Wl,-rpath,"$OPENBLAS_DIR" -lopenblas)
BIN="$BUILD/bench_bf16_ops"
gcc -std=c11 -O2 -fopenmp -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc bench/bf16_ops.c "$BUILD/libvdnn.a" \
    -ldnnl "${BLAS[@]}" -lz -lm -lpthread -o "$BIN"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "oneDNN ISA: $(DNNL_VERBOSE=1 "$BIN" --batch 1 --reps 1 2>/dev/null | grep -m1 -o 'isa:.*' || true)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN" --batch "$BATCH" --threads "$THREADS" --reps "$REPS"
