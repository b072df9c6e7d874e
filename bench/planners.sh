#!/usr/bin/env bash
# Measured and simulated step time of every planner (none, all, conv, recompute, dyn, pooch, auto) for ResNet-50
# and VGG-16 (or NETS) at budgets of 50% and 25% of the in-core peak, on the CPU backend with an emulated host
# link: bench/planners.py, which runs every plan of a net in one process with their steps interleaved (a whole
# process on a small shared machine runs fast or slow, more than planners differ by). The last line is
# `auto_overhead_vs_best_other: X`: auto's measured time over the fastest other planner's, worst case.
# Env: NETS ("model:CxHxW:batch[:classes[:text]] ..."; classes default 10; `text` trains a sequence model such as
#      gpt-mini, input 1xTx1, classes its vocabulary 256, on English text), STEPS (steps per visit of a net, the
#      first not timed; default 3), ROUNDS (visits of every net; default 10), LINK (e.g. 16GB/s), THREADS,
#      FRACTIONS ("0.5 0.25"), POLICIES (default all seven), PROFILES (profiles measured first, default 3; the
#      plans are made from the median one, and simulated from it and, beside it, from the per-field medians of
#      the profiles measured after every round), OUT (directory for the profiles). Needs `make` (the Python package's libvdnn.so); PYTHON (default
#      /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -e build/libvdnn.so ] || [ -n "${VDNN_LIBRARY:-}" ] || { echo "planners: build/libvdnn.so not built (run make)" >&2; exit 1; }
args=(--nets "${NETS:-resnet50:3x128x128:16 vgg16:3x64x64:64}" --steps "${STEPS:-3}" --rounds "${ROUNDS:-10}"
      --link "${LINK:-16GB/s}" --threads "${THREADS:-$(nproc)}" --fractions "${FRACTIONS:-0.5 0.25}"
      --profiles "${PROFILES:-3}")
[ -n "${POLICIES:-}" ] && args+=(--policies "$POLICIES")
[ -n "${OUT:-}" ] && args+=(--out "$OUT")
# Debian's interpreter: its python3-numpy and python3-cffi are what scripts/setup.sh installs.
exec "${PYTHON:-/usr/bin/python3}" bench/planners.py "${args[@]}"
