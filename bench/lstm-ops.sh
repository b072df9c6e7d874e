#!/usr/bin/env bash
# The bf16 speed-up of the CPU backend's LSTM chunk op: builds bench/lstm_ops.c against the library of BUILD
# (default build/, run `make` first) and times lstm-lm's, lstm-long's and a narrow biglstm's chunk shapes with fp32
# and with bf16 maps, forward and backward, the same threads for both (see the program's top comment). The last
# line is `bf16_vs_fp32_lstm: X`, fp32 time over bf16 time of every shape together.
# Env: BUILD (default build), THREADS (default: all cores), REPS (default 5), OMP_WAIT_POLICY (default passive).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
THREADS=${THREADS:-$(nproc)}
REPS=${REPS:-5}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
[ -f "$BUILD/libvdnn.a" ] || { echo "lstm-ops: $BUILD/libvdnn.a not built (run make)" >&2; exit 1; }
# The library's OpenBLAS: its OpenMP build where installed (CMakeLists.txt), whose GEMMs run on the same OpenMP
# threads as oneDNN's primitives; the default (pthreads) build's threads yield against them on a small machine.
OPENBLAS_DIR=/usr/lib/$(gcc -dumpmachine)/openblas-openmp
BLAS=(-lopenblas)
[ -e "$OPENBLAS_DIR/libopenblas.so" ] && BLAS=(-L"$OPENBLAS_DIR" -Wl,-rpath,"$OPENBLAS_DIR" -lopenblas)
BIN="$BUILD/bench_lstm_ops"
gcc -std=c11 -O2 -Wall -Werror -fopenmp -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc bench/lstm_ops.c "$BUILD/libvdnn.a" \
    -ldnnl "${BLAS[@]}" -lz -lm -lpthread -o "$BIN"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN" --threads "$THREADS" --reps "$REPS"
