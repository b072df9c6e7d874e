#!/usr/bin/env python3
"""One line per `vdnn plan --json` output read from stdin or the files named: feasible, peak, bytes moved per
iteration, and how many feature maps are recomputed and swapped (attention probabilities, "*.probs", counted apart).
The sequence-model figures of docs/sequence.md come from it:

    build/vdnn plan gpt2-small --seq-len 1024 --batch 8 --policy auto --budget 12GiB --optimizer adamw --json \\
        | python3 bench/plan_summary.py
"""
import json
import sys

GIB = 1 << 30


def summary(d):
    cls = {"recompute": [0, 0], "swap": [0, 0]}
    for t in d["tensors"]:
        if t["class"] in cls and t["kind"] == "fmap":
            cls[t["class"]][0] += 1
            cls[t["class"]][1] += t["name"].endswith(".probs")
    budget = d.get("budget_bytes") or 0
    return (f"{d['model']} b{d['batch']} {d['input']} {d['policy']} budget "
            f"{budget / GIB:.2f} GiB: feasible {str(d['feasible']).lower()}, peak {d['peak_device_bytes'] / GIB:.2f} GiB, "
            f"moved {d['bytes_moved'] / GIB:.2f} GiB/iteration, recomputed {cls['recompute'][0]} "
            f"({cls['recompute'][1]} probs), swapped {cls['swap'][0]} ({cls['swap'][1]} probs), offload_params "
            f"{str(d['offload_params']).lower()}, smallest budget {d['min_budget_bytes'] / GIB:.2f} GiB")


def main():
    texts = [open(p).read() for p in sys.argv[1:]] or [sys.stdin.read()]
    for t in texts:
        print(summary(json.loads(t)))


if __name__ == "__main__":
    main()
