#!/usr/bin/env bash
# vdnn against PyTorch on one NVIDIA GPU (issue 5): VGG-16 and ResNet-50 at 3x224x224, synthetic data,
# SGD with momentum, TF32 on and the same batch on both sides. It measures
#   - in-core images/s: `vdnn train --device cuda --policy none` over PyTorch eager (cudnn.benchmark=True);
#   - at budgets of 50% and 25% of vdnn's in-core peak (`vdnn plan --json` peak_device_bytes): vdnn's
#     `--policy auto` (with a `vdnn profile`) over the faster of PyTorch's save_on_cpu(pin_memory=True) and
#     torch.utils.checkpoint (checkpoint_sequential over sqrt(n) segments of VGG's features; one
#     checkpoint per ResNet bottleneck block) under set_per_process_memory_fraction(budget / total);
#     a PyTorch variant that runs out of memory counts as not running; and vdnn auto at 50% over vdnn in-core;
#   - the largest VGG-16 batch that trains: vdnn by `vdnn plan --policy auto` feasibility with the card's
#     free memory (less MAXB_MARGIN) as budget, confirmed by training 3 steps; PyTorch in-core by trying
#     training steps (doubling, then bisection to 8, torch.cuda.empty_cache() between tries);
#   - the simulator: `vdnn simulate` (from the profile) against the measured auto step at 50%.
# Models: PyTorch builds torchvision's vgg16 / resnet50; vdnn reads models/vgg16.cfg / models/resnet50.cfg
# (the same layers: 138,357,544 and 25,557,032 parameters at 224x224 with 1000 classes; the report lists
# both sides' counts).
#
# Run it on a GPU machine from the repository root, in one go (about 9 minutes with the build):
#     bash bench/gpu-vs-pytorch.sh OUTDIR          (or OUT=OUTDIR bash bench/gpu-vs-pytorch.sh)
# It builds vdnn with CUDA into build-gpu/ (only the vdnn command), runs everything under a deadline
# (TIME_BUDGET seconds from its start; stages that do not fit are reported as skipped) and writes to OUTDIR:
#     gpu-vs-pytorch-<device>-<date>.md   the report (device, date, command, settings, tables, ratios)
#     results.json                        every figure, and the ratios
#     work.tar.gz                         each command's line, stdout and stderr; the profiles; the build log;
#                                         gpu-vs-pytorch.log, this script's output
# Copy the report to bench/results/ to keep it. The last six lines on stdout are the ratios, one per line:
#     incore_ratio, budget50_vs_pytorch, budget25_vs_pytorch, budget50_vs_incore (auto's step time at 50%
#     over in-core's) (geometric means over the two models, where both sides have a figure), max_batch_ratio
#     (VGG-16), sim_error (worst model, 50%).
# Without a GPU it stops with an error, unless GPUBENCH_CPU_TEST=1 (or --cpu-test): then it runs the
# whole flow with tiny sizes on the CPU backend and PyTorch on the CPU (budgets not enforced on PyTorch's
# side, a faked out-of-memory above batch 24 for its largest-batch search), to test the bench itself.
#
# If the GPU machine lacks oneDNN, OpenBLAS, zlib or cmocka headers/libraries (it cannot install them: no
# network there), fetch Debian's packages where apt works with `bash bench/gpu-vs-pytorch.sh --fetch-debs`
# (into .debs/, git-ignored, about 20 MB) and bring .debs along; the build then unpacks them into
# /tmp/vdnn-deps when the plain configure fails (GPUBENCH_USE_DEBS=1: always).
#
# Env: MODELS ("vgg16:64 resnet50:128", NAME:BATCH[:CxHxW]), INPUT (3x224x224, where MODELS gives none), CLASSES (1000), STEPS (10 timed),
#      WARMUP (3), LR (0.001), SEGMENTS (checkpoint_sequential segments, 0: sqrt), TIME_BUDGET (540 s),
#      PRECISION (fp32; bf16 or fp16: vdnn --precision against PyTorch's torch.autocast to that type),
#      MAXB_MODEL (vgg16; none skips), MAXB_INPUT, MAXB_START (64), MAXB_MARGIN (bytes, 2 GiB),
#      MAXB_HOST_BUDGET (bytes; 0: 60% of MemTotal), MAXB_TORCH_SECONDS (150), VDNN (a built vdnn to use
#      instead of building), BUILD_DIR (build-gpu), VDNN_CUDNN_BENCHMARK (1: cuDNN autotuning in vdnn, as
#      PyTorch's cudnn.benchmark), PYTHON (the python with torch + torchvision; found by itself otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$(date +%s)
CMDLINE="${PRECISION:+PRECISION=$PRECISION }bash bench/gpu-vs-pytorch.sh $*"

die() {
    echo "gpu-vs-pytorch: $*" >&2
    exit 1
}

CPU_TEST=${GPUBENCH_CPU_TEST:-0}
DEBS=${GPUBENCH_DEBS:-$ROOT/.debs}
POS=()
for arg in "$@"; do
    case $arg in
    --cpu-test) CPU_TEST=1 ;;
    --fetch-debs)
        # Debian 12 packages that the build needs, for a machine that has no network.
        mkdir -p "$DEBS"
        cd "$DEBS"
        apt-get download libdnnl2 libdnnl-dev ocl-icd-libopencl1 libopenblas0-pthread libopenblas-pthread-dev \
            libgfortran5 libquadmath0 zlib1g zlib1g-dev libcmocka0 libcmocka-dev \
            protobuf-c-compiler libonnx-dev libprotobuf-c-dev libprotobuf-c1 libprotoc32 libprotobuf32
        du -sh "$DEBS"
        exit 0
        ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    -*) die "unknown option $arg (see --help)" ;;
    *) POS+=("$arg") ;;
    esac
done
OUTDIR=${POS[0]:-${OUT:-}}
[ -n "$OUTDIR" ] || OUTDIR=$(mktemp -d /tmp/gpu-vs-pytorch.XXXXXX)
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
WORK=$(mktemp -d /tmp/gpu-vs-pytorch-work.XXXXXX)
LOG=$WORK/gpu-vs-pytorch.log
: >"$LOG"
# Everything this script prints also goes to the log.
exec > >(tee -a "$LOG") 2>&1
pack() { tar -C "$WORK" -czf "$OUTDIR/work.tar.gz" . >/dev/null 2>&1 || true; }
trap pack EXIT

if [ "$CPU_TEST" = 1 ]; then
    DEVICE=cpu
    # ResNet-50 at 3x128x128, batch 16 is small enough for the CPU and big enough for a 50% budget to fit.
    MODELS=${MODELS:-"vgg16:2:3x64x64 resnet50:16:3x128x128"}
    INPUT=${INPUT:-3x64x64}
    CLASSES=${CLASSES:-10}
    STEPS=${STEPS:-2}
    WARMUP=${WARMUP:-1}
    MAXB_INPUT=${MAXB_INPUT:-3x32x32}
    MAXB_START=${MAXB_START:-8}
    MAXB_FREE=${MAXB_FREE:-$((512 << 20))}
    MAXB_MARGIN=${MAXB_MARGIN:-0}
    MAXB_HOST_BUDGET=${MAXB_HOST_BUDGET:-$((1 << 30))}
    MAXB_FAKE_OOM=${MAXB_FAKE_OOM:-24}
    MAXB_TORCH_STEPS=1
    BUILD_DIR=${BUILD_DIR:-build}
else
    DEVICE=cuda
    MODELS=${MODELS:-"vgg16:64 resnet50:128"}
    INPUT=${INPUT:-3x224x224}
    CLASSES=${CLASSES:-1000}
    STEPS=${STEPS:-10}
    WARMUP=${WARMUP:-3}
    MAXB_INPUT=${MAXB_INPUT:-3x224x224}
    MAXB_START=${MAXB_START:-64}
    MAXB_FREE=${MAXB_FREE:-0}
    MAXB_MARGIN=${MAXB_MARGIN:-$((2 << 30))}
    MAXB_HOST_BUDGET=${MAXB_HOST_BUDGET:-0}
    MAXB_FAKE_OOM=0
    MAXB_TORCH_STEPS=2
    BUILD_DIR=${BUILD_DIR:-build-gpu}
    export VDNN_CUDNN_BENCHMARK=${VDNN_CUDNN_BENCHMARK:-1}
fi
TIME_BUDGET=${TIME_BUDGET:-540}
MAXB_MODEL=${MAXB_MODEL:-vgg16}
MAXB_TORCH_SECONDS=${MAXB_TORCH_SECONDS:-150}
LR=${LR:-0.001}
SEGMENTS=${SEGMENTS:-0}
echo "gpu-vs-pytorch: $(date -u +%Y-%m-%dT%H:%MZ), device $DEVICE, output in $OUTDIR"

# ---- the GPU and the python with torch + torchvision ----
PY=${PYTHON:-}
if [ "$DEVICE" = cuda ]; then
    command -v nvidia-smi >/dev/null 2>&1 || die "no GPU: nvidia-smi is not installed (GPUBENCH_CPU_TEST=1 tests the flow on the CPU)"
    nvidia-smi -L 2>/dev/null | grep -q '^GPU ' || die "no GPU: nvidia-smi -L lists none (GPUBENCH_CPU_TEST=1 tests the flow on the CPU)"
    check='import torch, torchvision; assert torch.cuda.is_available(), "torch.cuda.is_available() is False"'
    cands=(python3 /usr/bin/python3)
else
    check='import torch, torchvision'
    cands=(/usr/bin/python3 python3)
fi
if [ -z "$PY" ]; then
    for p in "${cands[@]}"; do
        if command -v "$p" >/dev/null 2>&1 && "$p" -c "$check" 2>/dev/null; then
            PY=$(command -v "$p")
            break
        fi
    done
fi
[ -n "$PY" ] || die "no python3 with torch and torchvision$([ "$DEVICE" = cuda ] && echo ' that sees the GPU') (set PYTHON=)"
"$PY" -c "$check" || die "$PY: torch/torchvision unusable"
echo "python: $PY ($("$PY" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__)'))"

if [ "$DEVICE" = cuda ]; then
    IFS=, read -r GPU DRIVER GPUMEM < <(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0)
    GPU=$(echo "$GPU" | xargs)
    DRIVER=$(echo "$DRIVER" | xargs)
    GPUMEM=$(echo "$GPUMEM" | xargs)
    SLUG=$(echo "$GPU" | tr '[:upper:]' '[:lower:]' | sed 's/nvidia//; s/[^a-z0-9]\{1,\}/-/g; s/^-//; s/-$//')
else
    GPU="CPU test mode ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
    DRIVER=none
    GPUMEM=none
    SLUG=cpu-test
fi
echo "device: $GPU, driver $DRIVER, $GPUMEM"

# ---- build ----
use_debs() {
    ls "$DEBS"/*.deb >/dev/null 2>&1 || return 1
    local d=/tmp/vdnn-deps f
    rm -rf "$d"
    mkdir -p "$d"
    for f in "$DEBS"/*.deb; do dpkg-deb -x "$f" "$d"; done
    local l=$d/usr/lib/x86_64-linux-gnu
    export LD_LIBRARY_PATH=$l:$l/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export LIBRARY_PATH=$l:$l/openblas-pthread${LIBRARY_PATH:+:$LIBRARY_PATH}
    deb_args=(-DCMAKE_PREFIX_PATH="$d/usr" -DDNNL_LIB="$l/libdnnl.so" -DDNNL_INCLUDE="$d/usr/include"
        -DOPENBLAS_LIB="$l/openblas-pthread/libopenblas.so"
        -DOPENBLAS_INCLUDE="$d/usr/include/x86_64-linux-gnu/openblas-pthread"
        -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath,$l:$l/openblas-pthread -Wl,-rpath-link,$l:$l/openblas-pthread")
    echo "build: using the packages in $DEBS, unpacked into $d"
}

BUILD_NOTE=""
if [ -n "${VDNN:-}" ]; then
    [ -x "$VDNN" ] || die "VDNN=$VDNN is not an executable"
    BUILD_NOTE="given: $VDNN"
elif [ "$DEVICE" = cpu ] && [ -x "$BUILD_DIR/vdnn" ]; then
    VDNN=$BUILD_DIR/vdnn
    BUILD_NOTE="existing $VDNN"
else
    blog=$WORK/build.log
    cuda_flag=ON
    [ "$DEVICE" = cpu ] && cuda_flag=OFF
    args=(-S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DVDNN_CUDA=$cuda_flag")
    # Only the vdnn command is built here: no cmocka needed for the tests it skips.
    ldconfig -p 2>/dev/null | grep -q 'libcmocka\.so ' || args+=(-DCMOCKA_LIB=/nonexistent/libcmocka-tests-not-built.so)
    deb_args=()
    echo "build: cmake into $BUILD_DIR (log in work.tar.gz)"
    if [ "${GPUBENCH_USE_DEBS:-0}" = 1 ]; then
        use_debs || die "GPUBENCH_USE_DEBS=1 but no .deb files in $DEBS"
        rm -rf "$BUILD_DIR"
    fi
    if ! cmake "${args[@]}" "${deb_args[@]}" >"$blog" 2>&1; then
        if [ ${#deb_args[@]} -eq 0 ] && use_debs; then
            rm -rf "$BUILD_DIR"
            cmake "${args[@]}" "${deb_args[@]}" >>"$blog" 2>&1 || die "cmake configure failed with $DEBS too: $(grep -m3 -i 'error\|could not\|not found' "$blog" | xargs)"
        else
            die "cmake configure failed: $(grep -m3 -i 'error\|could not\|not found' "$blog" | xargs). Missing oneDNN/OpenBLAS/zlib? Run 'bash bench/gpu-vs-pytorch.sh --fetch-debs' where apt works and bring .debs/ along"
        fi
    fi
    grep 'vdnn:' "$blog" | sed 's/^-- /build: /' || true
    if [ "$DEVICE" = cuda ] && ! grep -q 'CUDA backend on' "$blog"; then
        die "vdnn was configured without its CUDA backend: $(grep -m1 'vdnn:' "$blog" | sed 's/^-- //')"
    fi
    cmake --build "$BUILD_DIR" --target vdnn_cli -j "$(nproc)" >>"$blog" 2>&1 ||
        die "build failed: $(grep -m5 -i 'error' "$blog" | xargs)"
    VDNN=$BUILD_DIR/vdnn
    BUILD_NOTE="$BUILD_DIR (CUDA $cuda_flag$([ ${#deb_args[@]} -gt 0 ] && echo ', libraries from .debs'))"
    echo "build: done in $(($(date +%s) - START)) s"
fi
VDNN=$(cd "$(dirname "$VDNN")" && pwd)/$(basename "$VDNN")
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT+changes"

# ---- measure, report; the ratios are the last lines ----
set +e
"$PY" -u bench/gpu_bench.py bench --vdnn "$VDNN" --py "$PY" --work "$WORK" --outdir "$OUTDIR" --device "$DEVICE" \
    --threads "$(nproc)" --deadline $((START + TIME_BUDGET)) --models "$MODELS" --input "$INPUT" --classes "$CLASSES" \
    --steps "$STEPS" --warmup "$WARMUP" --lr "$LR" --segments "$SEGMENTS" --precision "${PRECISION:-fp32}" \
    --maxb-model "$MAXB_MODEL" --maxb-input "$MAXB_INPUT" --maxb-start "$MAXB_START" --maxb-free-bytes "$MAXB_FREE" \
    --maxb-margin "$MAXB_MARGIN" --maxb-host-budget "$MAXB_HOST_BUDGET" --maxb-torch-seconds "$MAXB_TORCH_SECONDS" \
    --maxb-torch-steps "$MAXB_TORCH_STEPS" --maxb-torch-fake-oom-above "$MAXB_FAKE_OOM" \
    --meta "date=$(date -u +%Y-%m-%dT%H:%MZ)" --meta "gpu=$GPU" --meta "driver=$DRIVER" --meta "gpu_memory=$GPUMEM" \
    --meta "device_slug=$SLUG" --meta "host=$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
    --meta "command=$CMDLINE" --meta "commit=$COMMIT" --meta "build=$BUILD_NOTE" \
    --meta "vdnn_cudnn_benchmark=${VDNN_CUDNN_BENCHMARK:-unset}"
rc=$?
[ $rc -eq 0 ] || die "gpu_bench.py failed (exit $rc); partial results in $OUTDIR"
