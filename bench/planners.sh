#!/usr/bin/env bash
# Measured and simulated iteration time of every planner (none, all, conv, recompute, dyn, pooch, auto)
# for ResNet-50 and VGG-16 at budgets of 50% and 25% of the in-core peak, on the CPU backend with an
# emulated host link. Each row: measured median step time, the simulator's prediction from a measured
# profile, the lower bound, and the prediction error. The last line is
# `auto_overhead_vs_best_other: X`: auto's measured time over the fastest other planner's, worst case.
# Env: VDNN (binary), NETS ("model:CxHxW:batch[:classes[:text]] ..."; classes default 10; `text` trains a sequence
#      model such as gpt-mini (input 1xTx1, classes = its vocabulary 256) on English text instead of synthetic
#      images), STEPS (training steps per run), LINK (e.g. 16GB/s),
#      THREADS, FRACTIONS ("0.5 0.25"), ROUNDS (runs of each plan, interleaved; default 2), POLICIES (default
#      all seven), PROFILES (profiling processes, default 3; the median one is simulated), OUT (directory for
#      profiles and the raw table).
set -euo pipefail
cd "$(dirname "$0")/.."
VDNN=${VDNN:-build/vdnn}
NETS=${NETS:-"resnet50:3x128x128:16 vgg16:3x64x64:64"}
STEPS=${STEPS:-4}
LINK=${LINK:-16GB/s}
THREADS=${THREADS:-$(nproc)}
FRACTIONS=${FRACTIONS:-"0.5 0.25"}
ROUNDS=${ROUNDS:-2}
OUT=${OUT:-$(mktemp -d)}
POLICIES=${POLICIES:-"none all conv recompute dyn pooch auto"}
PROFILES=${PROFILES:-3}
[ -x "$VDNN" ] || { echo "planners: $VDNN not built (run make)" >&2; exit 1; }
mkdir -p "$OUT"
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "link: $LINK emulated per direction, threads: $THREADS, steps per run: $STEPS (median step time, first excluded)"
echo "rounds: $ROUNDS (every plan that fits runs once per round, the order reversed each round; measured = median of the rounds)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
# The text a sequence model trains on (only step times are measured; any English text serves).
cat /usr/share/common-licenses/* > "$OUT/text.txt"
rows="$OUT/rows.txt"
: > "$rows"
ms() { python3 -c "print(f'{$1*1e3:.1f}')"; }
train_s() { # policy budget -> median step seconds
  "$VDNN" train --model "$net" --data "$data" "${common[@]}" --steps "$STEPS" --threads "$THREADS" --policy "$1" \
    --budget "$2" --profile "$prof" --link-bandwidth "$LINK" --no-eval --json --device cpu 2>/dev/null | json 'd["step_seconds"]'
}
for spec in $NETS; do
  IFS=: read -r net input batch classes kind <<<"$spec"
  common=(--input "$input" --batch "$batch" --classes "${classes:-10}")
  data=synthetic
  [ "${kind:-}" = text ] && data="text:$OUT/text.txt"
  peak=$("$VDNN" plan "$net" "${common[@]}" --json | json 'd["peak_device_bytes"]')
  # PROFILES separate profiling processes; the simulator uses the one whose layer time is their median. On a small
  # shared machine a whole process can run fast or slow, and the measured side is a median over ROUNDS processes.
  prof="$OUT/$net.profile.json"
  sums=()
  for ((k = 0; k < PROFILES; k++)); do
    "$VDNN" profile "$net" "${common[@]}" --threads "$THREADS" --link-bandwidth "$LINK" --iterations 3 \
      --out "$OUT/$net.profile.$k.json" --device cpu > "$OUT/$net.profile.$k.txt" 2>&1
    sed -e "s/^/# $net profile $k: /" -e "s|$OUT/|\$OUT/|g" "$OUT/$net.profile.$k.txt"
    sums+=("$(json 'sum(l["fwd_s"] + l["bwd_s"] for l in d["layers"])' < "$OUT/$net.profile.$k.json") $k")
  done
  pick=$(printf '%s\n' "${sums[@]}" | sort -g | sed -n "$(((PROFILES + 1) / 2))p" | cut -d' ' -f2)
  cp "$OUT/$net.profile.$pick.json" "$prof"
  echo "# $net profiles' layer time (s, profile): ${sums[*]}; simulating with profile $pick (the median)"
  # The runs: in-core first (unlimited budget), then every planner and budget that fits.
  runs=("incore 100% none $peak")
  declare -A sim=()
  sim["incore 100%"]=$("$VDNN" simulate "$net" "${common[@]}" --profile "$prof" --json | json 'd["iteration_s"]')
  for frac in $FRACTIONS; do
    budget=$(python3 -c "print(int($peak*$frac))")
    pct=$(python3 -c "print(f'{100*$frac:.0f}%')")
    for pol in $POLICIES; do
      out=$("$VDNN" simulate "$net" "${common[@]}" --profile "$prof" --policy "$pol" --budget "$budget" --json 2>/dev/null || true)
      if [ "$(echo "$out" | json '"yes" if d["feasible"] else "no"')" = yes ]; then
        sim["$pol $pct"]="$(echo "$out" | json 'd["iteration_s"], d["lower_bound_s"]')"
        runs+=("$pol $pct $pol $budget")
      else
        sim["$pol $pct"]="no($(echo "$out" | json 'd["peak_device_bytes"]>>20')MiB)"
      fi
    done
  done
  declare -A meas=()
  for ((r = 0; r < ROUNDS; r++)); do
    order=("${runs[@]}")
    if ((r % 2)); then for ((i = 0, j = ${#runs[@]} - 1; i < ${#runs[@]}; i++, j--)); do order[i]=${runs[j]}; done; fi
    for run in "${order[@]}"; do
      read -r name pct pol budget <<<"$run"
      meas["$name $pct"]+="$(train_s "$pol" "$budget") "
    done
  done
  printf '%-9s %-11s %5s %-6s %-10s %-9s %11s %11s %11s %8s %8s %8s  %s\n' net input batch budget policy fits measured_ms \
    predicted_ms bound_ms error best_ms best_err "runs_ms"
  for key in "incore 100%" $(for frac in $FRACTIONS; do pct=$(python3 -c "print(f'{100*$frac:.0f}%')"); for pol in $POLICIES; do echo "$pol:$pct"; done; done); do
    key=${key/:/ }
    read -r name pct <<<"$key"
    if [[ "${sim[$key]}" == no* ]]; then
      printf '%-9s %-11s %5s %-6s %-10s %-9s %11s %11s %11s %8s %8s %8s\n' "$net" "$input" "$batch" "$pct" "$name" \
        "${sim[$key]}" - - - - - -
      continue
    fi
    read -r pred bound <<<"${sim[$key]}"
    vals=${meas[$key]}
    m=$(python3 -c "import statistics; print(statistics.median([$(echo $vals | tr ' ' ',')]))")
    runs_ms=$(python3 -c "print(' '.join(f'{v*1e3:.0f}' for v in [$(echo $vals | tr ' ' ',')]))")
    best=$(python3 -c "print(min([$(echo $vals | tr ' ' ',')]))")
    err=$(python3 -c "print(f'{100*($pred-$m)/$m:.1f}%')")
    best_err=$(python3 -c "print(f'{100*($pred-$best)/$best:.1f}%')")
    echo "$net $pct $name $m $pred ${bound:--} $best" >> "$rows"
    printf '%-9s %-11s %5s %-6s %-10s %-9s %11s %11s %11s %8s %8s %8s  %s\n' "$net" "$input" "$batch" "$pct" "$name" yes \
      "$(ms "$m")" "$(ms "$pred")" "$( [ -n "$bound" ] && ms "$bound" || echo -)" "$err" "$(ms "$best")" "$best_err" "$runs_ms"
  done
  unset sim meas
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$rows" <<'PY'
import sys, collections
# Two readings of the same runs: the median of the rounds, and each plan's fastest run (on a small shared machine a
# whole process runs fast or slow, and other load only ever slows a run down). Simulator errors over every row.
med, fast, errs = collections.defaultdict(dict), collections.defaultdict(dict), {"median": [], "fastest": []}
for line in open(sys.argv[1]):
    net, pct, pol, meas, pred, bound, best = line.split()
    errs["median"].append(abs(float(pred) / float(meas) - 1))
    errs["fastest"].append(abs(float(pred) / float(best) - 1))
    if pol != "incore":
        med[(net, pct)][pol] = float(meas)
        fast[(net, pct)][pol] = float(best)
for what, e in errs.items():
    if e:
        print(f"simulator error, largest over every plan, against the {what} run: {100 * max(e):.1f}%")
def overhead(cases, label):
    worst = None
    for key, d in sorted(cases.items()):
        others = [v for p, v in d.items() if p != "auto"]
        if "auto" not in d or not others:
            continue
        r = d["auto"] / min(others)
        print(f"auto over best other ({label}), {key[0]} at {key[1]}: {r:.3f}")
        worst = r if worst is None else max(worst, r)
    return worst
wf = overhead(fast, "fastest runs")
wm = overhead(med, "medians")
print(f"auto_overhead_vs_best_other_fastest_runs: {wf:.3f}" if wf is not None else "auto_overhead_vs_best_other_fastest_runs: n/a")
print(f"auto_overhead_vs_best_other: {wm:.3f}" if wm is not None else "auto_overhead_vs_best_other: n/a (no case where auto and another planner fit)")
PY
