#!/usr/bin/env bash
# The vdnn command line: exit codes and messages for bad flags, values, models and budgets; the JSON of
# `vdnn plan` and `vdnn train`, and that the peak a training run measures is the one `vdnn plan` plans.
# Usage: cli_errors.sh PATH/TO/vdnn   (run from the repository root; CTest does both)
set -uo pipefail

VDNN=${1:?usage: cli_errors.sh PATH/TO/vdnn}
# shellcheck source=lib_cli.sh
source "$(dirname "$0")/lib_cli.sh"

# ---- flags and values ----
run "unknown flag (train)" 2 "'--bogus'" -- train --bogus 1
run "unknown flag (plan)" 2 "'--frobnicate'" -- plan lenet --frobnicate
run "unknown flag (info)" 2 "'--policy'" -- info lenet --policy all
run "unknown command" 2 "'trian'" -- trian
run "--batch 0" 2 "--batch" "'0'" -- train --batch 0
run "--batch -3" 2 "--batch" -- plan lenet --batch -3
run "--budget 12XB" 2 "--budget" "'12XB'" -- plan lenet --budget 12XB
run "--budget 0" 2 "--budget" -- train --budget 0
run "--input 3x0x4" 2 "--input" "'3x0x4'" -- plan lenet --input 3x0x4
run "--input 3x4" 2 "--input" -- info lenet --input 3x4
run "--policy foo" 2 "--policy" "'foo'" -- plan lenet --policy foo
run "--conv-algo foo" 2 "--conv-algo" "'foo'" -- plan lenet --conv-algo foo
run "--steps x" 2 "--steps" -- train --steps x
run "--batch without value" 2 "--batch" -- plan lenet --batch
run "no such model" 1 "nosuchnet" -- plan nosuchnet

# ---- a malformed model names its file and line ----
mkdir -p "$TMP/models"
cat >"$TMP/models/broken.cfg" <<'EOF'
[net]
name=broken

[conv1]
type=conv
filters=4
size=3

[relu1]
type=reluu
EOF
run "malformed model (plan)" 1 "$TMP/models/broken.cfg:10:" "reluu" -- plan "$TMP/models/broken.cfg" --input 1x8x8 --classes 3
run "malformed model (train)" 1 "$TMP/models/broken.cfg:10:" -- train --model "$TMP/models/broken.cfg" --data synthetic --input 1x8x8 --classes 3 --device cpu
cat >"$TMP/models/shape.cfg" <<'EOF'
[net]
name=shape
[conv1]
type=conv
filters=4
size=9
[fc]
type=fc
outputs=classes
[loss]
type=softmax
EOF
run "a map that shrinks to nothing" 1 "$TMP/models/shape.cfg:3" -- plan "$TMP/models/shape.cfg" --input 1x4x4 --classes 3

# ---- budgets ----
"$VDNN" plan lenet --batch 64 --json >"$TMP/plan64.json" 2>"$TMP/err" || bad "plan lenet --batch 64: $(cat "$TMP/err")"
need=$(json_get "$TMP/plan64.json" peak_device_bytes)
run "plan over budget" 3 "needs at least" "($need bytes)" "the budget is 1.00 MiB" -- plan lenet --batch 64 --budget 1MiB
if "$VDNN" plan lenet --batch 64 --budget "$need" >/dev/null 2>"$TMP/err"; then ok; else bad "plan at exactly its peak ($need) does not fit"; fi
run "plan one byte short" 3 "($need bytes)" -- plan lenet --batch 64 --budget $((need - 1))
run "train over budget" 1 "memory budget too small" "smallest budget that works is" -- \
    train --model lenet --data synthetic --steps 2 --batch 8 --budget 1MiB --device cpu
if grep -q "^step " "$TMP/out" "$TMP/err"; then bad "train over budget started training"; else ok; fi
# The smallest budget named really works.
smallest=$(sed -n 's/.*works is [^(]*(\([0-9]*\) bytes) with --policy \([a-z]*\).*/\1 \2/p' "$TMP/err")
if [ -n "$smallest" ] && "$VDNN" plan lenet --batch 8 --input 1x28x28 --classes 10 --budget "${smallest% *}" \
    --policy "${smallest#* }" >/dev/null 2>&1; then ok; else bad "the named smallest budget '$smallest' does not fit"; fi

# ---- info ----
"$VDNN" info vgg16 --batch 256 --input 3x224x224 >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc = 0 ] && grep -q "totals at batch 256" "$TMP/out" && grep -qE "parameters +138357544" "$TMP/out" &&
    grep -q "in-core with vdnn's liveness reuse" "$TMP/out"; then ok; else bad "info vgg16: exit $rc: $(tail -5 "$TMP/out") $(cat "$TMP/err")"; fi

# ---- plan --json ----
for pol in none all conv; do
    f="$TMP/plan-$pol.json"
    if ! "$VDNN" plan vgg16 --batch 4 --input 3x64x64 --classes 10 --policy $pol --json >"$f" 2>"$TMP/err"; then
        bad "plan --json ($pol) failed: $(cat "$TMP/err")"
        continue
    fi
    if python3 -c 'import json,sys; json.load(sys.stdin)' <"$f"; then ok; else bad "plan --json ($pol) is not JSON"; fi
    if python3 - "$f" "$pol" <<'EOF'; then ok; else bad "plan --json ($pol): keys or values wrong"; fi
import json, sys
d = json.load(open(sys.argv[1]))
pol = sys.argv[2]
for k in ("policy", "feasible", "peak_device_bytes", "avg_device_bytes", "host_bytes", "bytes_moved",
          "min_budget_bytes", "tensors"):
    assert k in d, k
assert d["policy"] == pol and d["feasible"] is True
for k in ("peak_device_bytes", "avg_device_bytes", "host_bytes", "bytes_moved", "min_budget_bytes"):
    assert isinstance(d[k], int) and d[k] >= 0, k
assert 0 < d["avg_device_bytes"] <= d["peak_device_bytes"]
assert d["min_budget_bytes"] == d["peak_device_bytes"]  # a static policy needs its peak at any budget
assert d["tensors"], "no tensors"
for t in d["tensors"]:
    assert isinstance(t["name"], str) and t["name"], t
    assert isinstance(t["bytes"], int) and t["bytes"] > 0, t
    assert t["class"] in ("keep", "swap"), t
swapped = [t for t in d["tensors"] if t["class"] == "swap"]
moved = 2 * sum(t["bytes"] for t in swapped)
if pol == "none":
    assert not swapped and d["host_bytes"] == 0 and d["bytes_moved"] == 0
else:
    assert swapped and d["host_bytes"] > 0 and d["bytes_moved"] == moved, (d["bytes_moved"], moved)
EOF
done
p_none=$(json_get "$TMP/plan-none.json" peak_device_bytes)
p_all=$(json_get "$TMP/plan-all.json" peak_device_bytes)
p_conv=$(json_get "$TMP/plan-conv.json" peak_device_bytes)
if [ "$p_all" -lt "$p_none" ] && [ "$p_conv" -lt "$p_none" ]; then ok; else
    bad "peaks none $p_none, all $p_all, conv $p_conv: swapping should need less"
fi

# ---- policy um (OC-DNN's Unified Memory mode): a dry run plans it anywhere; training needs CUDA ----
f="$TMP/plan-um.json"
if "$VDNN" plan vgg16 --batch 4 --input 3x64x64 --classes 10 --policy um --json >"$f" 2>"$TMP/err"; then ok; else
    bad "plan --policy um --json failed: $(cat "$TMP/err")"
fi
if python3 - "$f" "$TMP/plan-all.json" <<'EOF'; then ok; else bad "plan --policy um --json: keys or values wrong"; fi
import json, sys
u, a = (json.load(open(f)) for f in sys.argv[1:3])
assert u["policy"] == "um" and u["feasible"] is True
assert u["host_bytes"] == 0 and u["managed_bytes"] > 0 and a["managed_bytes"] == 0
# The same feature maps leave the device as under all, into managed memory instead of the pinned pool.
swapped = lambda d: sorted(t["name"] for t in d["tensors"] if t["class"] == "swap")
assert swapped(u) == swapped(a) and swapped(u)
assert all(t["managed"] == (t["class"] == "swap") for t in u["tensors"])
assert not any(t["managed"] for t in a["tensors"])
assert u["managed_bytes"] >= sum(t["bytes"] for t in u["tensors"] if t["managed"])
assert u["bytes_moved"] == a["bytes_moved"]
assert u["peak_device_bytes"] <= a["peak_device_bytes"]
EOF
"$VDNN" plan lenet --batch 8 --policy um >"$TMP/out" 2>"$TMP/err"
if [ $? = 0 ] && grep -q "^managed pool: " "$TMP/out" && grep -qE "^data +[0-9]+ managed " "$TMP/out"; then ok; else
    bad "plan --policy um (table): $(cat "$TMP/out" "$TMP/err" | tail -5)"
fi
run "policy um on the CPU" 1 "policy 'um' needs the CUDA backend (Unified Memory)" -- \
    train --data synthetic --input 1x28x28 --classes 10 --steps 1 --batch 8 --device cpu --policy um
if grep -q "^step " "$TMP/out" "$TMP/err"; then bad "policy um on the CPU started training"; else ok; fi
run "--allow-oversubscribe is not a plan flag" 2 "'--allow-oversubscribe'" -- plan lenet --policy um --allow-oversubscribe
# plan/simulate/plot --device cuda plan with the CUDA op info, which needs the GPU (or a profile recorded on it).
if ! nvidia-smi -L >/dev/null 2>&1; then
    run "plan --device cuda without a GPU" 1 "--device cuda: no GPU" -- plan lenet --device cuda
    # A build with the CUDA backend (not the sanitizer build) says which driver its CUDA needs.
    "$VDNN" plan lenet --device cuda >"$TMP/nogpu" 2>&1 || true
    if ! grep -q "built without the CUDA backend" "$TMP/nogpu"; then
        run "the no-GPU message names the driver needed" 1 "needs an NVIDIA driver" -- simulate lenet --device cuda
    fi
fi
run "plan --device takes cpu, cuda or auto" 2 "--device: invalid value 'gpu' (cpu, cuda or auto)" -- plan lenet --device gpu

# ---- --no-tf32 and --deterministic: CUDA settings, accepted on the CPU, where they change nothing ----
run "--no-tf32 is not an info flag" 2 "'--no-tf32'" -- info lenet --no-tf32
for cmd in train eval profile; do
    # Through a file: grep -q leaving a pipe early would kill a help longer than one stdio buffer with SIGPIPE.
    "$VDNN" $cmd --help >"$TMP/help"
    if grep -q -- "--no-tf32" "$TMP/help" && grep -q -- "--deterministic" "$TMP/help" &&
        grep -q "no effect" "$TMP/help"; then ok; else bad "$cmd --help does not explain --no-tf32 / --deterministic"; fi
done
for flags in "" "--no-tf32 --deterministic"; do
    # shellcheck disable=SC2086
    "$VDNN" train --data synthetic --input 1x28x28 --classes 10 --steps 2 --batch 8 --device cpu --json $flags \
        >"$TMP/flags-${flags:+on}.json" 2>"$TMP/err" || bad "train --device cpu $flags failed: $(tail -3 "$TMP/err")"
done
if python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); assert (a["final_loss"],a["test_accuracy"])==(b["final_loss"],b["test_accuracy"])' \
    "$TMP/flags-.json" "$TMP/flags-on.json" 2>/dev/null; then ok; else bad "--no-tf32 --deterministic changed a CPU run"; fi

# ---- train --json: one object, and the measured peak is the planned one ----
for pol in none all conv; do
    extra=()
    [ $pol != none ] && extra=(--poison)
    f="$TMP/train-$pol.json"
    if ! "$VDNN" train --data synthetic --input 1x28x28 --classes 10 --steps 3 --batch 8 --json --device cpu \
        --policy $pol "${extra[@]}" >"$f" 2>"$TMP/err"; then
        bad "train --json ($pol) failed: $(tail -3 "$TMP/err")"
        continue
    fi
    if [ "$(grep -c . "$f")" = 1 ] && python3 - "$f" <<'EOF'; then ok; else bad "train --json ($pol): $(cat "$f")"; fi
import json, math, sys
d = json.load(open(sys.argv[1]))
for k in ("test_accuracy", "final_loss", "images_per_sec", "peak_device_bytes"):
    assert k in d, k
assert 0.0 <= d["test_accuracy"] <= 1.0
assert math.isfinite(d["final_loss"]) and d["final_loss"] > 0
assert d["images_per_sec"] > 0
assert isinstance(d["peak_device_bytes"], int) and d["peak_device_bytes"] > 0
EOF
    "$VDNN" plan lenet --batch 8 --input 1x28x28 --classes 10 --policy $pol --json >"$TMP/p.json" 2>/dev/null
    measured=$(json_get "$f" peak_device_bytes)
    planned=$(json_get "$TMP/p.json" peak_device_bytes)
    if [ "$measured" = "$planned" ]; then ok; else bad "$pol: train measured a peak of $measured bytes, plan says $planned"; fi
done
# Swapping changes no number: the same seed gives the same loss and accuracy under every policy.
same=$(python3 -c 'import json,sys; r=[json.load(open(f)) for f in sys.argv[1:]]; print(len({(x["final_loss"], x["test_accuracy"]) for x in r}))' \
    "$TMP/train-none.json" "$TMP/train-all.json" "$TMP/train-conv.json" 2>/dev/null)
if [ "$same" = 1 ]; then ok; else bad "policies gave different losses or accuracies"; fi

# ---- synthetic data makes at least one batch: a batch above its 1024 training images trains ----
run "synthetic batch 1100" 0 -- train --data synthetic --input 1x28x28 --classes 10 --steps 1 --batch 1100 --no-eval \
    --device cpu

# ---- --save into a directory that does not exist ----
mkdir "$TMP/save"
run "save into a missing directory" 2 "$TMP/save/nodir/ck.bin" "does not exist" -- \
    train --data synthetic --input 1x28x28 --classes 10 --steps 1 --batch 8 --device cpu --save "$TMP/save/nodir/ck.bin"
if [ -z "$(ls -A "$TMP/save")" ]; then ok; else bad "a failed save left files: $(ls -A "$TMP/save")"; fi
# A good save writes exactly one file and resumes.
run "save" 0 -- train --data synthetic --input 1x28x28 --classes 10 --steps 1 --batch 8 --device cpu --save "$TMP/save/ck.bin"
if [ "$(ls -A "$TMP/save")" = "ck.bin" ]; then ok; else bad "save left: $(ls -A "$TMP/save")"; fi
run "resume into another model" 1 "does not match" -- \
    train --model resnet18 --data synthetic --input 1x28x28 --classes 10 --steps 2 --batch 8 --device cpu --resume "$TMP/save/ck.bin"
head -c 100 "$TMP/save/ck.bin" >"$TMP/cut.bin"
run "resume a truncated checkpoint" 1 "$TMP/cut.bin" -- \
    train --data synthetic --input 1x28x28 --classes 10 --steps 2 --batch 8 --device cpu --resume "$TMP/cut.bin"

# ---- the smallest budget `vdnn plan` names for a planner follows --conv-algo: with a choice of algorithms
# auto goes lower than with the defaults only, and a plan at that budget fits ----
for algo in choose default; do
    "$VDNN" plan vgg16 --input 3x112x112 --batch 32 --classes 10 --policy auto --conv-algo $algo --json \
        >"$TMP/min-$algo.json" 2>"$TMP/err" || bad "plan auto --conv-algo $algo: $(head -c 300 "$TMP/err")"
done
if python3 - "$TMP/min-choose.json" "$TMP/min-default.json" <<'EOF'; then ok; else bad "min_budget_bytes ignores --conv-algo"; fi
import json, sys
c, d = (json.load(open(f))["min_budget_bytes"] for f in sys.argv[1:3])
assert 0 < c < d, (c, d)
open(sys.argv[1] + ".budget", "w").write(str(c))
EOF
run "plan auto at its named min budget" 0 -- plan vgg16 --input 3x112x112 --batch 32 --classes 10 --policy auto \
    --budget "$(cat "$TMP/min-choose.json.budget" 2>/dev/null || echo 1)"

# ---- a deep net at full size under every planner: plans that add recompute workspaces while finalizing ----
for pol in recompute auto; do
  run "resnet50 224 b32 $pol" 0 -- plan resnet50 --input 3x224x224 --batch 32 --classes 10 --policy $pol --json
done

# ---- --precision: values, the refusal where the CPU lacks AVX-512 BF16 (simulated), maps at half the bytes ----
run "--precision fp8" 2 "--precision" "'fp8'" -- plan lenet --precision fp8
run "--precision without value" 2 "--precision" -- info lenet --precision
run "--precision fp16 on the CPU" 1 "--precision: fp16 does not run on the cpu backend" "CUDA only" -- \
    train --data synthetic --input 1x28x28 --classes 10 --steps 1 --device cpu --precision fp16
export VDNN_CPU_ISA=no-bf16
run "--precision bf16 without AVX-512 BF16 (train)" 1 "--precision: bf16 does not run on the cpu backend" \
    "AVX-512 BF16" "VDNN_CPU_ISA=no-bf16" -- train --data synthetic --input 1x28x28 --classes 10 --steps 1 --device cpu \
    --precision bf16
run "--precision bf16 without AVX-512 BF16 (plan)" 1 "--precision: bf16" "AVX-512 BF16" -- plan lenet --precision bf16
run "--precision bf16 without AVX-512 BF16 (info)" 1 "--precision: bf16" "AVX-512 BF16" -- info lenet --precision bf16
unset VDNN_CPU_ISA
if "$VDNN" plan lenet --precision bf16 >/dev/null 2>&1; then
  "$VDNN" info lenet --json >"$TMP/info32.json"
  "$VDNN" info lenet --json --precision bf16 >"$TMP/info16.json"
  f32=$(json_get "$TMP/info32.json" feature_map_bytes)
  f16=$(json_get "$TMP/info16.json" feature_map_bytes)
  if [ "$((f16 * 2))" = "$f32" ]; then ok; else bad "info --precision bf16: feature maps $f16 bytes, fp32 $f32"; fi
  run "bf16 save" 0 -- train --data synthetic --input 1x28x28 --classes 10 --steps 2 --batch 8 --device cpu \
      --precision bf16 --save "$TMP/bf16.ckpt"
  run "bf16 checkpoint into an fp32 eval" 0 "written by a bf16 net" "continue in fp32" -- \
      eval --data synthetic --input 1x28x28 --classes 10 --batch 8 --device cpu --resume "$TMP/bf16.ckpt"
  run "bf16 checkpoint into a bf16 eval" 0 -- \
      eval --data synthetic --input 1x28x28 --classes 10 --batch 8 --device cpu --resume "$TMP/bf16.ckpt" --precision bf16
  if grep -q "written by" "$TMP/err"; then bad "a bf16 checkpoint into a bf16 net should load silently"; else ok; fi
else
  echo "skipped the bf16 runs: this CPU lacks AVX-512 BF16"
fi

# ---- dynamic loss scaling (fp16's, asked for on fp32 here): a power of two, the skipped steps reported ----
run "--loss-scale 3" 2 "--loss-scale" "power of two" -- \
    train --data synthetic --input 1x8x8 --classes 3 --steps 1 --batch 4 --device cpu --loss-scale 3
run "--loss-scale x" 2 "--loss-scale" -- train --loss-scale x
run "fp16 on the cpu" 1 "fp16" -- train --data synthetic --input 1x8x8 --classes 3 --steps 1 --batch 4 --device cpu \
    --precision fp16
if "$VDNN" train --data synthetic --input 1x8x8 --classes 3 --steps 3 --batch 4 --device cpu --no-eval \
    --loss-scale 1024 >"$TMP/ls.out" 2>"$TMP/err" && grep -q "loss scaling: 0 of 3 steps skipped" "$TMP/ls.out"
then ok; else bad "train --loss-scale 1024: $(head -c 300 "$TMP/ls.out") $(head -c 300 "$TMP/err")"; fi
if "$VDNN" train --data synthetic --input 1x8x8 --classes 3 --steps 2 --batch 4 --device cpu --no-eval --json \
    --loss-scale 1024 >"$TMP/ls.json" 2>/dev/null && [ "$(json_get "$TMP/ls.json" skipped_steps)" = 0 ] &&
    [ "$(json_get "$TMP/ls.json" loss_scale)" = 1024 ]
then ok; else bad "train --loss-scale 1024 --json: $(head -c 300 "$TMP/ls.json")"; fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
