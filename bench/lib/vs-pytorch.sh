# Sourced by the CPU benchmarks against PyTorch (cpu-vs-pytorch.sh, sequence-vs-pytorch.sh, precision.sh) so that
# they set up, measure and summarize alike: each side's best of REPEATS alternating runs, the geometric mean ratio.
# shellcheck shell=bash

# vs_setup NAME: VDNN (default build/vdnn) and THREADS (default: all cores) defaulted, OpenMP barriers passive unless
# OMP_WAIT_POLICY says otherwise (see cpu-vs-pytorch.sh for why), and PY a python3 with torch (the caller's PY, else
# the first on PATH or Debian's); exits, naming NAME, when vdnn is not built or there is no torch.
vs_setup() {
  local name=$1 p
  VDNN=${VDNN:-build/vdnn}
  THREADS=${THREADS:-$(nproc)}
  export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
  [ -x "$VDNN" ] || { echo "$name: $VDNN not built (run make)" >&2; exit 1; }
  if [ -n "${PY:-}" ]; then
    "$PY" -c "import torch" 2>/dev/null || { echo "$name: $PY has no torch (apt-get install python3-torch)" >&2; exit 1; }
    return
  fi
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c "import torch" 2>/dev/null; then PY=$p; return; fi
  done
  echo "$name: no python3 with torch (apt-get install python3-torch)" >&2
  exit 1
}

# vs_host: the first line of every report, when and where it ran.
vs_host() {
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
}

# vs_header LINE: vs_host, the caller's LINE (what is measured), then how the runs are taken and the load at start.
vs_header() {
  vs_host
  echo "$1"
  echo "runs: best of $REPEATS per side, alternating; OMP_WAIT_POLICY=$OMP_WAIT_POLICY; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# vs_best RATE...: the highest of the runs' rates.
vs_best() {
  "$PY" -c "import sys; print(max(float(a) for a in sys.argv[1:]))" "$@"
}

VS_RUNS=()
VS_LOGSUM=0
VS_N=0

# vs_case ROWFMT RUNFMT UNIT FIELD...: REPEATS rounds of the caller's run_vdnn then run_torch (each prints one rate,
# higher is better), alternating so that both meet the same load from other processes; a side's figure is its best
# run (other load only ever slows a run down). Prints a row, printf ROWFMT of the FIELDs, both figures and their
# ratio, and keeps every run (printf RUNFMT, in UNIT, headed by the first FIELD) and the ratio for vs_summary.
vs_case() {
  local rowfmt=$1 runfmt=$2 unit=$3 i v t r
  shift 3
  local vs=() ts=()
  for ((i = 0; i < REPEATS; i++)); do
    vs+=("$(run_vdnn)")
    ts+=("$(run_torch)")
  done
  v=$(vs_best "${vs[@]}")
  t=$(vs_best "${ts[@]}")
  r=$("$PY" -c "print(f'{$v/$t:.3f}')")
  # shellcheck disable=SC2059 # the format is the caller's
  printf "$rowfmt" "$@" "$v" "$t" "$r"
  # shellcheck disable=SC2059
  VS_RUNS+=("$1 runs ($unit): vdnn $(printf "$runfmt " "${vs[@]}")| torch $(printf "$runfmt " "${ts[@]}")")
  VS_LOGSUM=$("$PY" -c "import math; print($VS_LOGSUM + math.log($r))")
  VS_N=$((VS_N + 1))
}

# vs_runs: every case's runs, one line a case.
vs_runs() {
  printf '%s\n' "${VS_RUNS[@]}"
}

# vs_ratio: the last line, `ratio: X`, the geometric mean over the cases of vdnn's figure over PyTorch's.
vs_ratio() {
  "$PY" -c "import math; print(f'ratio: {math.exp($VS_LOGSUM / $VS_N):.3f}')"
}
