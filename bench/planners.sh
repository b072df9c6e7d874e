#!/usr/bin/env bash
# Measured and simulated iteration time of every planner (none, all, conv, recompute, dyn, pooch, auto)
# for ResNet-50 and VGG-16 at budgets of 50% and 25% of the in-core peak, on the CPU backend with an
# emulated host link. Each row: measured median step time, the simulator's prediction from a measured
# profile, the lower bound, and the prediction error. The last line is
# `auto_overhead_vs_best_other: X`: auto's measured time over the fastest other planner's, worst case.
# Env: VDNN (binary), NETS ("model:CxHxW:batch ..."), STEPS (training steps per run), LINK (e.g. 16GB/s),
#      THREADS, FRACTIONS ("0.5 0.25"), OUT (directory for profiles, traces and the raw table).
set -euo pipefail
cd "$(dirname "$0")/.."
VDNN=${VDNN:-build/vdnn}
NETS=${NETS:-"resnet50:3x128x128:16 vgg16:3x64x64:64"}
STEPS=${STEPS:-4}
LINK=${LINK:-16GB/s}
THREADS=${THREADS:-$(nproc)}
FRACTIONS=${FRACTIONS:-"0.5 0.25"}
OUT=${OUT:-$(mktemp -d)}
POLICIES="none all conv recompute dyn pooch auto"
[ -x "$VDNN" ] || { echo "planners: $VDNN not built (run make)" >&2; exit 1; }
mkdir -p "$OUT"
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "link: $LINK emulated per direction, threads: $THREADS, steps per run: $STEPS (median step time, first excluded)"
printf '%-9s %-11s %5s %-6s %-10s %-9s %11s %11s %11s %8s\n' net input batch budget policy fits measured_ms predicted_ms bound_ms error
rows="$OUT/rows.txt"
: > "$rows"
for spec in $NETS; do
  IFS=: read -r net input batch <<<"$spec"
  common=(--input "$input" --batch "$batch" --classes 10)
  peak=$("$VDNN" plan "$net" "${common[@]}" --json | json 'd["peak_device_bytes"]')
  prof="$OUT/$net.profile.json"
  "$VDNN" profile "$net" "${common[@]}" --threads "$THREADS" --link-bandwidth "$LINK" --iterations 3 --out "$prof" \
    --device cpu >/dev/null 2>&1
  # In-core reference, unlimited budget.
  m=$("$VDNN" train --model "$net" --data synthetic "${common[@]}" --steps "$STEPS" --threads "$THREADS" \
        --link-bandwidth "$LINK" --no-eval --json --device cpu 2>/dev/null | json 'd["step_seconds"]')
  s=$("$VDNN" simulate "$net" "${common[@]}" --profile "$prof" --json | json 'd["iteration_s"]')
  printf '%-9s %-11s %5s %-6s %-10s %-9s %11.1f %11.1f %11s %7.1f%%\n' "$net" "$input" "$batch" "100%" incore yes \
    "$(python3 -c "print($m*1e3)")" "$(python3 -c "print($s*1e3)")" - "$(python3 -c "print(100*($s-$m)/$m)")"
  for frac in $FRACTIONS; do
    budget=$(python3 -c "print(int($peak*$frac))")
    pct=$(python3 -c "print(f'{100*$frac:.0f}%')")
    for pol in $POLICIES; do
      sim=$("$VDNN" simulate "$net" "${common[@]}" --profile "$prof" --policy "$pol" --budget "$budget" --json 2>/dev/null || true)
      fits=$(echo "$sim" | json '"yes" if d["feasible"] else "no"')
      pred=$(echo "$sim" | json 'd["iteration_s"]')
      bound=$(echo "$sim" | json 'd["lower_bound_s"]')
      if [ "$fits" = yes ]; then
        meas=$("$VDNN" train --model "$net" --data synthetic "${common[@]}" --steps "$STEPS" --threads "$THREADS" \
                 --policy "$pol" --budget "$budget" --profile "$prof" --link-bandwidth "$LINK" --no-eval --json \
                 --device cpu 2>/dev/null | json 'd["step_seconds"]')
        err=$(python3 -c "print(f'{100*($pred-$meas)/$meas:.1f}%')")
        echo "$net $pct $pol $meas $pred $bound" >> "$rows"
        printf '%-9s %-11s %5s %-6s %-10s %-9s %11.1f %11.1f %11.1f %8s\n' "$net" "$input" "$batch" "$pct" "$pol" yes \
          "$(python3 -c "print($meas*1e3)")" "$(python3 -c "print($pred*1e3)")" "$(python3 -c "print($bound*1e3)")" "$err"
      else
        need=$(echo "$sim" | json 'd["peak_device_bytes"]>>20')
        printf '%-9s %-11s %5s %-6s %-10s %-9s %11s %11s %11s %8s\n' "$net" "$input" "$batch" "$pct" "$pol" \
          "no(${need}MiB)" - - - -
      fi
    done
  done
done
python3 - "$rows" <<'PY'
import sys, collections
cases = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    net, pct, pol, meas, pred, bound = line.split()
    cases[(net, pct)][pol] = float(meas)
worst = None
for key, d in sorted(cases.items()):
    others = [v for p, v in d.items() if p != "auto"]
    if "auto" not in d or not others:
        continue
    r = d["auto"] / min(others)
    print(f"auto over best other, {key[0]} at {key[1]}: {r:.3f}")
    worst = r if worst is None else max(worst, r)
print(f"auto_overhead_vs_best_other: {worst:.3f}" if worst is not None else "auto_overhead_vs_best_other: n/a (no case where auto and another planner fit)")
PY
