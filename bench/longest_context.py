#!/usr/bin/env python3
"""The longest context (a multiple of STEP tokens) for which `vdnn plan MODEL --context N` finds a feasible plan
within a budget under a policy: a bisection over N on the plan's "feasible" (docs/sequence.md).

usage: python3 bench/longest_context.py [--vdnn build/vdnn] [--model gpt2-small] [--batch 1] [--budget 16GiB]
                                        [--policy auto] [--step 256] [--max 65536] [-- extra vdnn plan flags]
"""
import argparse
import json
import subprocess
import sys


def feasible(a, n):
    cmd = [a.vdnn, "plan", a.model, "--context", str(n), "--batch", str(a.batch), "--policy", a.policy,
           "--budget", a.budget, "--json"] + a.extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 1 and "is empty or too large" in r.stderr:
        # A tensor beyond the graph's per-sample limit (2^31 values): that context does not fit either.
        print(f"  context {n}: refused by the graph: {r.stderr.strip().splitlines()[-1]}", file=sys.stderr)
        return False, None
    if r.returncode not in (0, 3):
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    d = json.loads(r.stdout)
    print(f"  context {n}: feasible {d['feasible']}, peak {d['peak_device_bytes'] / 2**30:.2f} GiB", file=sys.stderr)
    return d["feasible"], d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vdnn", default="build/vdnn")
    ap.add_argument("--model", default="gpt2-small")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--budget", default="16GiB")
    ap.add_argument("--policy", default="auto")
    ap.add_argument("--step", type=int, default=256)
    ap.add_argument("--max", type=int, default=65536)
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    lo, hi = 0, a.max // a.step + 1  # lo feasible (0: none yet), hi infeasible, in units of step
    best = None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ok, d = feasible(a, mid * a.step)
        if ok:
            lo, best = mid, d
        else:
            hi = mid
    if not best:
        sys.exit(f"no context of {a.step} or more fits {a.budget}")
    print(f"{a.model} batch {a.batch} policy {a.policy} within {a.budget}: longest context {lo * a.step} "
          f"(peak {best['peak_device_bytes'] / 2**30:.2f} GiB, moved {best['bytes_moved'] / 2**30:.2f} GiB/iteration, "
          f"offload_params {str(best['offload_params']).lower()})")


if __name__ == "__main__":
    main()
