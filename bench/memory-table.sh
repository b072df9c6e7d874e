#!/usr/bin/env bash
# The memory table of docs/memory.md, made by `vdnn plan`: in-core (policy none), vDNN_all and vDNN_conv
# peak and time-averaged device memory for AlexNet, OverFeat, GoogLeNet and VGG-16 at batch 128 and VGG-16
# at batch 256, beside the vDNN paper's average-memory cuts, and vDNN_all with the parameters and momentum homed
# in host memory (--offload-params); then VGG-16 at batch 256 under a 12 GiB budget.
# Prints a Markdown table. Env: VDNN (binary).
set -euo pipefail
cd "$(dirname "$0")/.."
VDNN=${VDNN:-build/vdnn}
[ -x "$VDNN" ] || { echo "memory-table: $VDNN not built (run make)" >&2; exit 1; }
gib() { python3 -c "print(f'{$1/2**30:.2f}')"; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

echo "| net | batch | input | all tensors held (GiB) | none peak | none avg | all peak | all avg | conv peak | conv avg | avg cut all vs none | avg cut all vs all-held | all+offloaded params peak | all+offloaded params avg | avg cut all+offloaded vs all-held | paper (vDNN_all avg cut) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
while read -r net batch input paper; do
  held=$("$VDNN" info "$net" --batch "$batch" --input "$input" --json | field incore_all_held_bytes)
  declare -A pk av
  for p in none all conv all-off; do
    if [ "$p" = all-off ]; then
      j=$("$VDNN" plan "$net" --batch "$batch" --input "$input" --policy all --offload-params --json)
    else
      j=$("$VDNN" plan "$net" --batch "$batch" --input "$input" --policy "$p" --json)
    fi
    pk[$p]=$(echo "$j" | field peak_device_bytes)
    av[$p]=$(echo "$j" | field avg_device_bytes)
  done
  cut_none=$(python3 -c "print(f'{100*(1-${av[all]}/${av[none]}):.0f}%')")
  cut_held=$(python3 -c "print(f'{100*(1-${av[all]}/$held):.0f}%')")
  cut_off=$(python3 -c "print(f'{100*(1-${av[all-off]}/$held):.0f}%')")
  echo "| $net | $batch | $input | $(gib "$held") | $(gib "${pk[none]}") | $(gib "${av[none]}") | $(gib "${pk[all]}") | $(gib "${av[all]}") | $(gib "${pk[conv]}") | $(gib "${av[conv]}") | $cut_none | $cut_held | $(gib "${pk[all-off]}") | $(gib "${av[all-off]}") | $cut_off | $paper |"
done <<'NETS'
alexnet 128 3x227x227 89%
overfeat 128 3x231x231 91%
googlenet 128 3x224x224 95%
vgg16 128 3x224x224 -
vgg16 256 3x224x224 -
NETS
echo
j=$("$VDNN" plan vgg16 --batch 256 --input 3x224x224 --policy all --budget 12GiB --json || true)
echo "VGG-16, batch 256, 3x224x224, policy all, budget 12 GiB: feasible=$(echo "$j" | field feasible)," \
     "peak $(gib "$(echo "$j" | field peak_device_bytes)") GiB, host pool $(gib "$(echo "$j" | field host_bytes)") GiB," \
     "moved per iteration $(gib "$(echo "$j" | field bytes_moved)") GiB"
