#!/usr/bin/env bash
# One lent GPU session's work in one command: find CUDA, cuDNN and cuBLAS on the machine (system toolkit or the
# NVIDIA Python wheels), build vdnn and its tests with the CUDA backend into build-gpu/, run the GPU tests, a
# training smoke run per policy, then (STAGES containing "seqbench") bench/sequence-vs-pytorch.sh on the GPU in fp32
# and bf16 (gpt2-small at 1024 tokens, gpt-mini, lstm-lm), and (STAGES containing "bench") bench/gpu-vs-pytorch.sh.
#
#     bash bench/gpu-session.sh OUTDIR        (STAGES="build test smoke bench", the default;
#                                              BUILD_TARGETS="a b" builds only those targets: the command is
#                                              vdnn_cli, the library vdnn; the whole build takes about 30 s;
#                                              PRECISION=bf16 runs the bench in bf16 against PyTorch's autocast)
#
# OUTDIR gets few files, since a lent machine hands back at most 8: ctest.log, smoke.log, build.log (only when the
# build failed), seqbench.log and the bench's report, results.json and work.tar.gz; the environment and the build's summary go
# to stdout (tee it into OUTDIR too). Libraries the machine
# lacks (oneDNN, OpenBLAS, zlib, cmocka) come from .debs/ (bash bench/gpu-vs-pytorch.sh --fetch-debs where apt
# works); cuDNN/NCCL headers the machine lacks from .gpu-deps/include (copied from a toolkit elsewhere).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUTDIR=${1:-${OUT:-/tmp/gpu-session}}
mkdir -p "$OUTDIR"
STAGES=${STAGES:-"build test smoke bench"}
BUILD_DIR=${BUILD_DIR:-build-gpu}
START=$(date +%s)
LOGS=$(mktemp -d /tmp/vdnn-session.XXXXXX)
has_stage() { case " $STAGES " in *" $1 "*) return 0 ;; esac; return 1; }
elapsed() { echo $(($(date +%s) - START)); }

# ---- environment: where CUDA, cuDNN, cuBLAS live ----
{
    date -u +%Y-%m-%dT%H:%MZ
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
    command -v nvcc && nvcc --version | tail -2
    ls -d /usr/local/cuda* 2>/dev/null
    python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1
} >"$LOGS/env.log" 2>&1
LINKS=/tmp/vdnn-links
RPATH=
mkdir -p "$LINKS/lib" "$LINKS/include"
search_dirs=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu /usr/local/lib
    /opt /usr/local/lib/python3*/dist-packages /usr/lib/python3/dist-packages)
find_lib() { # name → path of lib<name>.so or lib<name>.so.N
    local f
    f=$(find "${search_dirs[@]}" -name "lib$1.so" -not -path '*/stubs/*' 2>/dev/null | head -1)
    [ -n "$f" ] || f=$(find "${search_dirs[@]}" -name "lib$1.so.[0-9]*" -not -path '*/stubs/*' 2>/dev/null | sort | head -1)
    echo "$f"
}
for name in cudnn cublas cublasLt nccl; do
    f=$(find_lib $name)
    echo "lib$name: ${f:-not found}" >>"$LOGS/env.log"
    [ -n "$f" ] || continue
    ln -sf "$f" "$LINKS/lib/lib$name.so"
    d=$(dirname "$f")
    # Only through the binaries' run path: on LD_LIBRARY_PATH these would also reach PyTorch, which needs its own.
    case ":$RPATH:" in *":$d:"*) ;; *) RPATH=$RPATH:$d ;; esac
done
CUDNN_H=$(find /usr/include /usr/local/cuda/include /opt -name cudnn_version.h 2>/dev/null | head -1)
echo "cudnn_version.h: ${CUDNN_H:-not found, using .gpu-deps/include}" >>"$LOGS/env.log"
if [ -n "$CUDNN_H" ]; then
    CUDNN_INC=$(dirname "$CUDNN_H")
    grep -E 'define CUDNN_(MAJOR|MINOR|PATCHLEVEL)' "$CUDNN_H" >>"$LOGS/env.log"
else
    CUDNN_INC=$ROOT/.gpu-deps/include
fi
export LIBRARY_PATH=$LINKS/lib${LIBRARY_PATH:+:$LIBRARY_PATH}
cat "$LOGS/env.log"

# ---- build ----
if has_stage build; then
    d=/tmp/vdnn-deps
    rm -rf "$d"
    mkdir -p "$d"
    for f in .debs/*.deb; do dpkg-deb -x "$f" "$d"; done
    l=$d/usr/lib/x86_64-linux-gnu
    export LIBRARY_PATH=$l:$l/openblas-pthread:$LIBRARY_PATH
    # protoc-c (ONNX import's generator) from .debs runs at build time only, on the libraries beside it.
    SAVED_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
    export PATH=$d/usr/bin:$PATH
    export LD_LIBRARY_PATH=$l${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    rm -rf "$BUILD_DIR"
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVDNN_CUDA=ON \
        -DCMAKE_PREFIX_PATH="$d/usr" -DCMAKE_LIBRARY_PATH="$LINKS/lib" \
        -DDNNL_LIB="$l/libdnnl.so" -DDNNL_INCLUDE="$d/usr/include" \
        -DOPENBLAS_LIB="$l/openblas-pthread/libopenblas.so" \
        -DOPENBLAS_INCLUDE="$d/usr/include/x86_64-linux-gnu/openblas-pthread" \
        -DCMOCKA_LIB="$l/libcmocka.so" -DVDNN_ONNX_PROTO="$d/usr/include/onnx/onnx.proto" \
        -DVDNN_CUDNN_LIB="$LINKS/lib/libcudnn.so" -DVDNN_CUDNN_INCLUDE="$CUDNN_INC" \
        -DCMAKE_EXE_LINKER_FLAGS="-Wl,--disable-new-dtags,-rpath,$l:$l/openblas-pthread$RPATH -Wl,-rpath-link,$l:$l/openblas-pthread" \
        >"$LOGS/build.log" 2>&1
    grep -E 'vdnn:|Error|error' "$LOGS/build.log"
    cmake --build "$BUILD_DIR" -j "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS} >>"$LOGS/build.log" 2>&1
    rc=$?
    # The binaries find these through their run path; PyTorch (bench) must not see them.
    export LD_LIBRARY_PATH=$SAVED_LD_LIBRARY_PATH
    echo "build: exit $rc after $(elapsed) s"
    if [ $rc -ne 0 ]; then
        cp "$LOGS/build.log" "$OUTDIR/"
        grep -B2 -A8 -m10 -E 'error|Error' "$LOGS/build.log" | head -80
        exit 1
    fi
fi
VDNN=$ROOT/$BUILD_DIR/vdnn
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}

# ---- GPU tests (and every other test whose name says cuda, um or gpu) ----
if has_stage test; then
    # Side by side: the op harness's four CUDA entries each take minutes, mostly their CPU references.
    OMP_NUM_THREADS=4 ctest --test-dir "$BUILD_DIR" -R 'cuda|um|gpu' -V -j 6 --timeout ${TEST_TIMEOUT:-300} \
        >"$OUTDIR/ctest.log" 2>&1
    echo "ctest: exit $? after $(elapsed) s"
    grep -E 'Test +#|tests passed|SKIP|FAILED|\[ +(OK|PASSED|SKIPPED|FAILED|ERROR) ' "$OUTDIR/ctest.log" | head -60
fi

# ---- one short training run per policy on the GPU ----
if has_stage smoke; then
    # Every policy must give in-core's loss: by default each convolution prefers reproducible algorithms (an atomic
    # one only where none ran), and VDNN_DETERMINISTIC=1 allows none.
    for det in 0 1; do
        for p in none all conv recompute pooch auto um; do
            echo "== lenet --policy $p deterministic $det" >>"$OUTDIR/smoke.log"
            VDNN_DETERMINISTIC=$det timeout 120 "$VDNN" train --device cuda --data synthetic --steps 40 --policy $p \
                --json >>"$OUTDIR/smoke.log" 2>&1
            echo "smoke $p deterministic $det: exit $?"
        done
    done
    echo "== vgg16 b64 in-core" >>"$OUTDIR/smoke.log"
    timeout 120 "$VDNN" train --device cuda --model vgg16 --input 3x224x224 --classes 1000 --batch 64 \
        --data synthetic --steps 8 --policy none --json >>"$OUTDIR/smoke.log" 2>&1
    echo "smoke vgg16: exit $? after $(elapsed) s"
    # Sequence models (attention, layer norm, GELU, LSTM, AdamW on CUDA): every policy must give in-core's losses.
    for m in gpt-mini lstm-lm; do
        cat docs/*.md >/tmp/vdnn-text.txt
        for p in none all recompute auto; do
            echo "== $m --policy $p" >>"$OUTDIR/smoke.log"
            timeout 120 "$VDNN" train --device cuda --model $m --data text:/tmp/vdnn-text.txt --batch 16 --steps 20 \
                --optimizer adamw --lr 0.001 --policy $p --json >>"$OUTDIR/smoke.log" 2>&1
            echo "smoke $m $p: exit $?"
        done
    done
    # With 16-bit maps (the sequence ops' bf16/fp16 kernels and tensor-core GEMMs, the LSTM chunk widened into its
    # fp32 code): every policy in-core's loss.
    for m in gpt-mini lstm-lm; do
        for prec in bf16 fp16; do
            for p in none all recompute auto; do
                echo "== $m $prec --policy $p" >>"$OUTDIR/smoke.log"
                timeout 120 "$VDNN" train --device cuda --model $m --data text:/tmp/vdnn-text.txt --batch 16 \
                    --steps 20 --optimizer adamw --lr 0.001 --precision $prec --policy $p --json \
                    >>"$OUTDIR/smoke.log" 2>&1
                echo "smoke $m $prec $p: exit $?"
            done
        done
    done
    # Fused attention (cuda_ops_attn_fused.c, written without a GPU): gpt-mini with every attention fused, each
    # precision, in-core and under all; its losses are close to (not equal to) the materialized attention's above.
    for prec in fp32 bf16 fp16; do
        for p in none all; do
            echo "== gpt-mini fused $prec --policy $p" >>"$OUTDIR/smoke.log"
            timeout 120 "$VDNN" train --device cuda --model gpt-mini --attention fused --data text:/tmp/vdnn-text.txt \
                --batch 16 --steps 20 --optimizer adamw --lr 0.001 --precision $prec --policy $p --json \
                >>"$OUTDIR/smoke.log" 2>&1
            echo "smoke gpt-mini fused $prec $p: exit $?"
        done
    done
    echo "smoke sequence models: after $(elapsed) s"
    # One line per run: the model, policy and final loss; runs of one model that should agree show the same loss.
    awk '/^== /{name=$0} /^\{/{match($0, /"final_loss": [^,]*/); print name, substr($0, RSTART, RLENGTH)}' \
        "$OUTDIR/smoke.log"
fi

if has_stage seqbench; then
    # Transformers on the GPU against their PyTorch twin (bench/seq_torch.py: attention written out as vdnn computes
    # it), both sides in-core, fp32 (TF32 on both) then bf16 against autocast; SEQ_CASES overrides the cases.
    for prec in fp32 bf16; do
        DEVICE=cuda PRECISION=$prec VDNN=$VDNN STEPS=${SEQ_STEPS:-20} REPEATS=${SEQ_REPEATS:-2} \
            CASES=${SEQ_CASES:-"gpt2-small:1024:8 gpt-mini:64:32 lstm-lm:128:32"} timeout 200 bash bench/sequence-vs-pytorch.sh \
            >>"$OUTDIR/seqbench.log" 2>&1
        echo "seqbench $prec: exit $? after $(elapsed) s"
    done
    grep -E '^(device|gpt|lstm|ratio)' "$OUTDIR/seqbench.log"
fi

if has_stage bench; then
    left=$((${CALL_SECONDS:-570} - $(elapsed) - 20))
    echo "bench: $left s left"
    if [ "$left" -gt 120 ]; then
        VDNN=$VDNN TIME_BUDGET=$left bash bench/gpu-vs-pytorch.sh "$OUTDIR/bench${PRECISION:+-$PRECISION}"
    fi
fi

# The logs and reports go into bench/results/ as they are: paths in them are the repository's and $OUT, not this
# machine's.
find "$OUTDIR" -maxdepth 2 -type f \( -name '*.md' -o -name '*.log' \) -not -name session.log -print0 |
    xargs -0 -r sed -i "s#$ROOT/##g; s#$ROOT#.#g; s#$OUTDIR#\$OUT#g"
