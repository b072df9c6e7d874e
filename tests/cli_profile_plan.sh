#!/usr/bin/env bash
# A profile carries its device's op info, so `vdnn plan --profile FILE` plans for the profiled device on any machine.
# (1) Recorded with `vdnn profile` on the CPU backend and planned from the file (no --device), the plan is the one the
#     live CPU backend makes (`--device cpu`, same profile), byte for byte, for several zoo nets and every policy
#     that trains on the CPU; and the one `vdnn train` trains with, for one of them.
# (2) The committed GPU fixture (tests/data/profiles/h100-vgg16-b64-described.json, described from the CUDA backend's
#     rules without a GPU) plans vgg16 at batch 64 under auto in 8 GiB here, and differs from the CPU op-info plan
#     where the backends' rules do (the CPU's ReLU masks and pooling indices).
# (3) Files of format version 1 plan with the CPU op info and say so; newer, truncated and malformed files fail
#     naming the file.
# (4) `vdnn profile --describe-gpu CC` writes a GPU's profile without the GPU (the CUDA backend's op rules, a
#     roofline estimate) that plans its own precision here; bad values are refused; builds without the CUDA backend
#     say they cannot and write nothing.
# Usage: cli_profile_plan.sh PATH/TO/vdnn   (run from the repository root; CTest does both)
set -uo pipefail

VDNN=${1:?usage: cli_profile_plan.sh PATH/TO/vdnn}
# shellcheck source=lib_cli.sh
source "$(dirname "$0")/lib_cli.sh"

# model input batch
nets=("lenet 1x28x28 4" "googlenet 3x32x32 2" "resnet18 3x32x32 2" "vgg16 3x32x32 2")
if [ "${VDNN_TEST_QUICK:-0}" != 0 ]; then nets=("lenet 1x28x28 4" "resnet18 3x32x32 2"); fi
policies=(none all conv recompute dyn pooch auto)

# ---- (1) recorded on the CPU, planned from the file: the live backend's plan ----
for n in "${nets[@]}"; do
    read -r model input batch <<<"$n"
    shape=(--input "$input" --classes 10 --batch "$batch")
    prof="$TMP/$model.json"
    if ! "$VDNN" profile "$model" "${shape[@]}" --device cpu --threads 1 --iterations 1 --out "$prof" \
            >/dev/null 2>"$TMP/err"; then
        bad "$model: profile: $(head -c 300 "$TMP/err")"
        continue
    fi
    if [ "$(json_get "$prof" version)" = 2 ] && python3 -c 'import json,sys; p=json.load(open(sys.argv[1]));
assert p["op_info_source"] == "backend" and p["device_info"]["backend"] == "cpu"
assert all(len(l["ops"]) >= 1 for l in p["layers"])' "$prof"; then ok; else bad "$model: the profile has no op info"; fi
    for p in "${policies[@]}"; do
        budget=()
        case $p in
        recompute | dyn | pooch | auto)
            "$VDNN" plan "$model" "${shape[@]}" --profile "$prof" --policy "$p" --json >"$TMP/free.json" 2>/dev/null
            least=$(json_get "$TMP/free.json" min_budget_bytes)
            peak=$(json_get "$TMP/free.json" peak_device_bytes)
            budget=(--budget $(((least + peak) / 2)))
            ;;
        esac
        # Exit 3 (the plan does not fit: some planners find nothing at that budget) is a plan too: both must agree.
        "$VDNN" plan "$model" "${shape[@]}" --profile "$prof" --policy "$p" "${budget[@]}" --json \
            >"$TMP/from.json" 2>"$TMP/err.from"
        from=$?
        "$VDNN" plan "$model" "${shape[@]}" --profile "$prof" --device cpu --threads 1 --policy "$p" \
            "${budget[@]}" --json >"$TMP/live.json" 2>"$TMP/err.live"
        live=$?
        if [ "$from" != "$live" ] || { [ "$from" != 0 ] && [ "$from" != 3 ]; }; then
            bad "$model/$p: exit $from from the profile, $live live: $(head -c 300 "$TMP/err.from" "$TMP/err.live")"
            continue
        fi
        # Planned from its op info, a profile of this device prints nothing more than the live plan does.
        same "$model/$p: the messages from the profile and live" "$TMP/err.from" "$TMP/err.live"
        same "$model/$p: the plan from the profile and the live CPU backend's" "$TMP/from.json" "$TMP/live.json"
    done
done
# The plan a training run makes with that profile, for one net and a cost-driven policy.
prof="$TMP/lenet.json"
if [ -f "$prof" ]; then
    shape=(--input 1x28x28 --classes 10 --batch 4)
    "$VDNN" plan lenet "${shape[@]}" --profile "$prof" --policy auto --json >"$TMP/free.json" 2>/dev/null
    b=$((($(json_get "$TMP/free.json" min_budget_bytes) + $(json_get "$TMP/free.json" peak_device_bytes)) / 2))
    "$VDNN" plan lenet "${shape[@]}" --profile "$prof" --policy auto --budget "$b" --json >"$TMP/from.json" 2>/dev/null
    if "$VDNN" train --model lenet --data synthetic "${shape[@]}" --device cpu --threads 1 --profile "$prof" \
            --policy auto --budget "$b" --steps 1 --no-eval --log-every 1000 --plan-json "$TMP/train.json" \
            >/dev/null 2>"$TMP/err"; then
        same "lenet/auto: the plan from the profile and the plan trained" "$TMP/from.json" "$TMP/train.json"
    else
        bad "lenet/auto: train: $(head -c 300 "$TMP/err")"
    fi
fi

# ---- (2) the GPU fixture plans without a GPU, with CUDA's op rules ----
fixture=tests/data/profiles/h100-vgg16-b64-described.json
gpu=(vgg16 --profile "$fixture" --batch 64 --input 3x224x224)
run "vgg16 planned for the described GPU" 0 -- plan "${gpu[@]}" --policy auto --budget 8GiB
if grep -q "feasible" "$TMP/out" || [ -s "$TMP/out" ]; then ok; else bad "fixture plan printed nothing"; fi
"$VDNN" plan "${gpu[@]}" --policy auto --budget 8GiB --json >"$TMP/g.json" 2>/dev/null
[ "$(json_get "$TMP/g.json" feasible)" = true ] && ok || bad "fixture: auto does not fit 8 GiB"
"$VDNN" plan "${gpu[@]}" --policy none --json >"$TMP/g.json" 2>/dev/null
run "the fixture planned with the CPU op info says whose op info it uses" 0 \
    "planning with this backend's op info, not the profile's" "is not this cpu backend's" -- \
    plan "${gpu[@]}" --policy none --json --device cpu
cp "$TMP/out" "$TMP/c.json"
# CUDA keeps no ReLU masks or pooling indices (backward reads y, and pooling's x); the CPU keeps 15 masks and 5
# index maps: the plans' aux tensors and peaks differ.
if python3 - "$TMP/g.json" "$TMP/c.json" <<'EOF'; then ok; else bad "the fixture's plan is not the CUDA op rules' one"; fi
import json, sys
g, c = (json.load(open(f)) for f in sys.argv[1:3])
aux = lambda p: sorted(t["name"] for t in p["tensors"] if t["kind"] == "aux")
assert aux(g) == [], aux(g)
assert len(aux(c)) == 20 and all(n.startswith(("relu", "pool")) for n in aux(c)), aux(c)
assert g["peak_device_bytes"] != c["peak_device_bytes"]
EOF
run "simulate names where the op info comes from" 0 -- simulate "${gpu[@]}" --policy auto --budget 8GiB
if grep -q "^op info: $fixture (cuda: .*described without the device" "$TMP/out"; then ok; else
    bad "simulate: no op info line: $(grep -i "op info" "$TMP/out")"; fi
run "plot plans from the fixture" 0 -- plot "${gpu[@]}" --policies none,auto --budget 8GiB --out "$TMP/p.svg"

# ---- (3) old, newer, truncated and malformed files ----
src="$TMP/lenet.json"
if [ -f "$src" ]; then
    lenet=(lenet --input 1x28x28 --classes 10 --batch 4)
    python3 - "$src" "$TMP/v1.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
for k in ("format", "version", "device_info", "precision", "op_info_source"):
    p.pop(k, None)
for l in p["layers"]:
    for k in ("ops", "kind", "out"):
        l.pop(k, None)
json.dump(p, open(sys.argv[2], "w"), indent=1)
EOF
    run "a version 1 profile plans with the CPU op info and says so" 0 \
        "$TMP/v1.json records no op info (format version 1)" "planning with the cpu backend's op info" -- \
        plan "${lenet[@]}" --profile "$TMP/v1.json" --policy auto
    sed 's/"version": 2/"version": 7/' "$src" >"$TMP/v7.json"
    run "a newer format version is refused" 1 "$TMP/v7.json:" "format version 7 is newer than this vdnn reads (1 to 2)" -- \
        plan "${lenet[@]}" --profile "$TMP/v7.json"
    head -c 1500 "$src" >"$TMP/cut.json"
    run "a truncated profile names the file" 1 "$TMP/cut.json:" -- plan "${lenet[@]}" --profile "$TMP/cut.json"
    run "a truncated profile names the file (simulate)" 1 "$TMP/cut.json:" -- simulate "${lenet[@]}" --profile "$TMP/cut.json"
    sed '0,/"aux_bytes"/s/"aux_bytes"/"aux_bytez"/' "$src" >"$TMP/key.json"
    run "an unknown op info key names the file and the key" 1 "$TMP/key.json:" 'unknown key "aux_bytez"' -- \
        plan "${lenet[@]}" --profile "$TMP/key.json"
    # A candidate's optional detail (what it runs, as CUDA's profiles write it) reads; of another type, it names
    # the file and key.
    sed '0,/"chunk_images": 0}/s//"chunk_images": 0, "detail": "fwd_gemm bwd_data_algo_1+tc"}/' "$src" >"$TMP/detail.json"
    if grep -q '"detail"' "$TMP/detail.json" && "$VDNN" plan "${lenet[@]}" --profile "$TMP/detail.json" >/dev/null 2>"$TMP/err"
    then ok; else bad "a profile with a candidate's detail: $(head -c 300 "$TMP/err")"; fi
    sed '0,/"chunk_images": 0}/s//"chunk_images": 0, "detail": 5}/' "$src" >"$TMP/detail5.json"
    run "a detail that is not a string names the file" 1 "$TMP/detail5.json:" '"detail" must be a string' -- \
        plan "${lenet[@]}" --profile "$TMP/detail5.json"
    run "a profile at another batch is refused" 1 "profile is for batch 4" -- \
        plan lenet --input 1x28x28 --classes 10 --batch 8 --profile "$src"
fi

# ---- (4) a GPU's profile described without the GPU (`vdnn profile --describe-gpu`) ----
desc=(gpt-mini --batch 4)
"$VDNN" profile "${desc[@]}" --describe-gpu 9.0 --gpu-name "H100 SXM" --precision bf16 --out "$TMP/d.json" \
    >"$TMP/out" 2>"$TMP/err"
rc=$?
if grep -q "built without the CUDA backend" "$TMP/err"; then
    # A build without the CUDA backend cannot describe a GPU: it says so and writes nothing.
    if [ "$rc" = 1 ] && [ ! -e "$TMP/d.json" ]; then ok; else bad "describe-gpu without the CUDA backend: exit $rc"; fi
else
    if [ "$rc" = 0 ]; then ok; else bad "describe-gpu: exit $rc: $(head -c 300 "$TMP/err")"; fi
    if python3 - "$TMP/d.json" <<'EOF'; then ok; else bad "the described profile is not what it says"; fi
import json, sys
p = json.load(open(sys.argv[1]))
assert p["op_info_source"] == "described" and p["precision"] == "bf16" and p["measured"] is False, p
assert p["device_info"]["compute"] == "9.0" and p["device_info"]["name"].startswith("H100 SXM"), p["device_info"]
assert all("ops" in l for l in p["layers"][1:]), "a layer without op info"
assert "roofline estimate" in p["note"]
EOF
    "$VDNN" plan "${desc[@]}" --profile "$TMP/d.json" --precision bf16 --policy none --json >"$TMP/dn.json" 2>"$TMP/err"
    "$VDNN" plan "${desc[@]}" --precision bf16 --policy none --json >"$TMP/cn.json" 2>>"$TMP/err"
    # The described CUDA op info is not the CPU's (CUDA's linear keeps no bias workspace, its attention a
    # sequence's scores): the peaks differ.
    if python3 - "$TMP/dn.json" "$TMP/cn.json" <<'EOF'; then ok; else bad "plan from the described profile: $(head -c 300 "$TMP/err")"; fi
import json, sys
d, c = (json.load(open(f)) for f in sys.argv[1:3])
assert d["feasible"] and d["precision"] == "bf16", d["precision"]
assert d["peak_device_bytes"] != c["peak_device_bytes"], (d["peak_device_bytes"], c["peak_device_bytes"])
EOF
    run "a described profile plans only its own precision" 1 "the profile's op info is for bf16 maps" -- \
        plan "${desc[@]}" --profile "$TMP/d.json" --policy none
    run "bf16 below compute capability 8.0 is refused naming the layer" 1 "layer 'wte'" "compute capability 8.0" -- \
        profile "${desc[@]}" --describe-gpu 7.0 --precision bf16 --out "$TMP/v100.json"
    if [ ! -e "$TMP/v100.json" ]; then ok; else bad "a refused description left a file"; fi
fi
run "--describe-gpu takes a compute capability" 2 "invalid value '9'" -- \
    profile "${desc[@]}" --describe-gpu 9 --out "$TMP/x.json"
run "--describe-gpu runs nothing" 2 "--iterations" "nothing runs" -- \
    profile "${desc[@]}" --describe-gpu 9.0 --iterations 2 --out "$TMP/x.json"
run "--gpu-name needs --describe-gpu" 2 "--describe-gpu" -- profile "${desc[@]}" --gpu-name X --out "$TMP/x.json"
run "--gpu-name takes no quotes" 2 "--gpu-name: quotes" -- \
    profile "${desc[@]}" --describe-gpu 9.0 --gpu-name 'H100 "SXM"' --out "$TMP/x.json"

echo "cli_profile_plan: $passed passed, $failed failed"
[ "$failed" = 0 ]
