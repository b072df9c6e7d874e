#!/usr/bin/env python3
"""Runs the measurements of bench/gpu-vs-pytorch.sh and writes its report; needs no torch itself (the
PyTorch side runs in bench/gpu_torch.py subprocesses, one per model, so no CUDA state is shared).

  gpu_bench.py bench  --vdnn BIN --py PYTHON --work DIR --outdir DIR [settings, see --help]
  gpu_bench.py report RESULTS.json --outdir DIR   (writes the report again from a run's results.json)

Per model (NAME:BATCH in --models, at --input, --classes):
  vdnn profile (measured costs and the device's op info for the planners and the simulator)
  vdnn plan --profile (policy none): the in-core peak P with that op info; budgets are 50% and 25% of P
  vdnn train --policy none                         -> in-core images/s
  gpu_torch.py run: eager (no limit), save_on_cpu and checkpoint at each budget
  vdnn plan/train --policy auto --budget B --profile -> images/s at each budget (skipped when `vdnn plan`
                                                        says the budget is short by more than 5%)
  vdnn simulate --policy auto --budget B --profile -> predicted iteration time, against the measured step
Then the largest batch of --maxb-model: vdnn by `vdnn plan --policy auto` feasibility with the device's free
memory (less --maxb-margin) as budget, doubling then bisection, confirmed by training --maxb-confirm-steps
steps (stepping down if that fails); PyTorch in-core by gpu_torch.py maxbatch.
Every stage has a time limit and the whole run a deadline (--deadline, epoch seconds): what does not fit
is reported as skipped. The report is rewritten after every stage, so a run cut short still leaves one.
The last lines on stdout are the six ratios (n/a where a side has no figure).
"""
import argparse
import datetime
import json
import math
import os
import re
import subprocess
import sys

from batch_search import largest_batch
import time

RATIO_KEYS = ("incore_ratio", "budget50_vs_pytorch", "budget25_vs_pytorch", "budget50_vs_incore", "max_batch_ratio",
              "sim_error")
FRACTIONS = (("50", 0.5), ("25", 0.25))
VARIANTS = ("save_on_cpu", "checkpoint")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def gib(b):
    return "-" if b is None else f"{b / 2**30:.2f} GiB"


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def tail(text, n=3):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])[-600:]


class Bench:
    def __init__(self, a):
        self.a = a
        self.work = a.work
        os.makedirs(os.path.join(self.work, "logs"), exist_ok=True)
        self.R = {"meta": dict(kv.split("=", 1) for kv in a.meta), "config": {}, "models": {}, "maxbatch": {},
                  "stages": []}
        self.seq = 0

    # ---- running things ----
    def left(self):
        return self.a.deadline - time.time() - 5

    def run(self, name, argv, limit, env=None):
        """Runs argv with a time limit inside the deadline; returns (rc, stdout, stderr); rc None: skipped,
        124: timed out."""
        budget = min(limit, self.left())
        self.seq += 1
        base = os.path.join(self.work, "logs", f"{self.seq:02d}-{name}")
        with open(base + ".cmd", "w") as f:
            f.write(" ".join(argv) + "\n")
        if budget < 5:
            log(f"{name}: skipped (deadline)")
            self.R["stages"].append({"name": name, "rc": None, "seconds": 0, "skipped": True})
            return None, "", "skipped: no time left before the deadline"
        t0 = time.time()
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=budget,
                               env=dict(os.environ, **(env or {})))
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc = 124
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = (e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")) + \
                f"\ntimed out after {budget:.0f} s"
        dt = time.time() - t0
        with open(base + ".out", "w") as f:
            f.write(out)
        with open(base + ".err", "w") as f:
            f.write(err)
        log(f"{name}: rc {rc} in {dt:.1f} s" + ("" if rc == 0 else f" ({tail(err, 2)})"))
        self.R["stages"].append({"name": name, "rc": rc, "seconds": round(dt, 1)})
        return rc, out, err

    def save(self):
        with open(os.path.join(self.work, "results.json"), "w") as f:
            json.dump(self.R, f, indent=1)
        write_report(self.R, self.a.outdir, quiet=True)

    # ---- vdnn ----
    def dev_flags(self):
        f = ["--device", self.a.device]
        if self.a.device == "cpu":
            f += ["--threads", str(self.a.threads)]
        return f

    def shape_flags(self, batch, inp=None):
        f = ["--batch", str(batch), "--input", inp or self.a.input, "--classes", str(self.a.classes)]
        return f + (["--precision", self.a.precision] if self.a.precision != "fp32" else [])

    def vdnn_train(self, name, model, batch, steps, extra, limit, inp=None, env=None):
        argv = [self.a.vdnn, "train", "--model", model, "--data", "synthetic", *self.shape_flags(batch, inp),
                "--steps", str(steps), "--lr", str(self.a.lr), "--lr-schedule", "constant", "--momentum", "0.9",
                "--weight-decay", "5e-4", "--no-eval", "--json", *self.dev_flags(), *extra]
        bench = (env or {}).get("VDNN_CUDNN_BENCHMARK", os.environ.get("VDNN_CUDNN_BENCHMARK", ""))
        rc, out, err = self.run(name, argv, limit, env=env)
        res = {"benchmark": bench}
        if (rc not in (0, None, 124) and self.a.device == "cuda" and bench not in ("", "0") and
                "budget" not in err):
            # A failure in cuDNN's benchmark mode should not hide the figure: once more with heuristics.
            rc, out, err = self.run(name + "-nobench", argv, limit, env={"VDNN_CUDNN_BENCHMARK": "0"})
            res["benchmark"] = "0 (retried: failed with cuDNN benchmark mode)"
        d = last_json(out) if rc == 0 else None
        if rc is None:
            res.update(status="skipped", error="deadline")
        elif d is None:
            res.update(status="failed", error=f"rc {rc}: {tail(err)}")
        else:
            res.update(status="ok", json=d)
            if d.get("step_seconds"):
                res["images_per_sec"] = batch / d["step_seconds"]
        return res

    def vdnn_plan(self, name, model, batch, policy, budget=None, host_budget=None, profile=None, inp=None, env=None):
        # Planned with the op info of the device that trains (cuDNN workspaces, CUDA aux state): with a profile
        # recorded on it, the op info it recorded (no --device: the plan is the one any machine makes from the
        # file, the one train and simulate make with it); without one, the live backend's (--device).
        argv = [self.a.vdnn, "plan", model, *self.shape_flags(batch, inp), "--policy", policy, "--json",
                *([] if profile else self.dev_flags())]
        if budget:
            argv += ["--budget", str(budget)]
        if host_budget:
            argv += ["--host-budget", str(host_budget)]
        if profile:
            argv += ["--profile", profile]
        rc, out, err = self.run(name, argv, 120, env=env)
        d = last_json(out) if rc in (0, 3) else None
        if d is None:
            return {"status": "failed", "error": f"rc {rc}: {tail(err)}"}
        d = {k: v for k, v in d.items() if not isinstance(v, (list, dict))}
        return {"status": "ok", "json": d}

    # ---- stages ----
    def model_stages(self, model, batch, inp):
        a = self.a
        M = self.R["models"].setdefault(model, {"batch": batch, "input": inp, "vdnn": {}, "plan_auto": {}, "sim": {}})
        steps = a.warmup + a.steps
        rc, out, err = self.run(f"{model}-info", [a.vdnn, "info", model, *self.shape_flags(1, inp), "--json"], 60)
        d = last_json(out) if rc == 0 else None
        M["vdnn_params"] = d.get("params") if d else None
        # Profile first: the budgets are fractions of the in-core peak planned with the op info it records on
        # this device.
        prof = os.path.join(self.work, f"{model}.profile.json")
        rc, out, err = self.run(f"{model}-profile", [a.vdnn, "profile", model, *self.shape_flags(batch, inp), *self.dev_flags(),
                                                     "--out", prof, "--json"], 180)
        M["profile"] = {"status": "ok", "json": last_json(out)} if rc == 0 and os.path.exists(prof) else \
            {"status": "failed", "error": f"rc {rc}: {tail(err)}"}
        have_prof = M["profile"]["status"] == "ok"
        if have_prof:
            M["profile_kinds"] = layer_kinds(prof)
        self.save()

        p = self.vdnn_plan(f"{model}-plan-none", model, batch, "none", profile=prof if have_prof else None, inp=inp)
        M["plan_none"] = p
        peak = p["json"]["peak_device_bytes"] if p["status"] == "ok" else None
        M["budgets"] = {k: int(peak * f) for k, f in FRACTIONS} if peak else {}
        self.save()

        M["vdnn"]["none"] = self.vdnn_train(f"{model}-vdnn-none", model, batch, steps, ["--policy", "none"], 240, inp=inp)
        self.save()

        runs = ["eager:0"] + [f"{v}:{M['budgets'][k]}" for k, _ in FRACTIONS if k in M["budgets"] for v in VARIANTS]
        argv = [a.py, os.path.join(a.bench_dir, "gpu_torch.py"), "run", model, "--batch", str(batch), "--input", inp,
                "--classes", str(a.classes), "--device", a.device, "--steps", str(a.steps), "--warmup", str(a.warmup),
                "--lr", str(a.lr), "--runs", ",".join(runs), "--op-profile", "3", "--conv-layers", "10", "--precision", a.precision]
        if a.segments:
            argv += ["--segments", str(a.segments)]
        rc, out, err = self.run(f"{model}-torch", argv, 360)
        d = last_json(out) if rc == 0 else None
        M["torch"] = {"status": "ok", "json": d} if d else {"status": "failed" if rc is not None else "skipped",
                                                            "error": f"rc {rc}: {tail(err)}"}
        self.save()

        for key, _ in FRACTIONS:
            budget = M["budgets"].get(key)
            if not budget:
                M["vdnn"]["auto" + key] = {"status": "failed", "error": "no in-core peak from vdnn plan"}
                continue
            pf = prof if have_prof else None
            pa = self.vdnn_plan(f"{model}-plan-auto{key}", model, batch, "auto", budget, profile=pf, inp=inp)
            M["plan_auto"][key] = pa
            need = pa["json"].get("min_budget_bytes") if pa["status"] == "ok" else None
            if pa["status"] == "ok" and not pa["json"]["feasible"] and need and need > 1.05 * budget:
                M["vdnn"]["auto" + key] = {"status": "infeasible",
                                           "error": f"vdnn plan: policy auto needs at least {gib(need)}, "
                                                    f"the budget is {gib(budget)}"}
                log(f"{model}-vdnn-auto{key}: not run, {M['vdnn']['auto' + key]['error']}")
            else:
                extra = ["--policy", "auto", "--budget", str(budget)] + (["--profile", prof] if have_prof else [])
                M["vdnn"]["auto" + key] = self.vdnn_train(f"{model}-vdnn-auto{key}", model, batch, steps, extra, 300, inp=inp)
                M["vdnn"]["auto" + key]["profile"] = have_prof
            self.save()
            if have_prof:
                rc, out, err = self.run(f"{model}-simulate-auto{key}",
                                        [a.vdnn, "simulate", model, *self.shape_flags(batch, inp), "--policy", "auto",
                                         "--budget", str(budget), "--profile", prof, "--json"], 120)
                d = last_json(out) if rc in (0, 3) else None
                M["sim"][key] = {"status": "ok", "json": d} if d else {"status": "failed", "error": f"rc {rc}: {tail(err)}"}
                self.save()

    def free_bytes(self):
        if self.a.maxb_free_bytes:
            return self.a.maxb_free_bytes, "given"
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits", "-i", "0"],
                                 capture_output=True, text=True, timeout=30).stdout
            return int(out.split()[0]) << 20, "nvidia-smi memory.free"
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            pass
        rc, out, err = self.run("free-memory", [self.a.py, "-c", "import torch; print(torch.cuda.mem_get_info()[0])"], 60)
        return (int(out.split()[-1]), "torch.cuda.mem_get_info") if rc == 0 else (None, "unknown")

    def maxbatch(self):
        a = self.a
        model, inp = a.maxb_model, a.maxb_input
        X = self.R["maxbatch"]
        X.update({"model": model, "input": inp})
        free, how = self.free_bytes()
        host = a.maxb_host_budget or int(0.6 * meminfo_total())
        X.update({"free_bytes": free, "free_from": how, "margin_bytes": a.maxb_margin, "host_budget_bytes": host,
                  "host_memtotal_bytes": meminfo_total()})
        V = X.setdefault("vdnn", {"plans": [], "confirm": []})
        if not free:
            V["status"] = "failed"
            V["error"] = "could not read the device's free memory"
        else:
            budget = free - a.maxb_margin
            X["budget_bytes"] = budget
            cache = {}

            def feasible(b):
                if b not in cache:
                    p = self.vdnn_plan(f"maxb-plan-{b}", model, b, "auto", budget, host, inp=inp,
                                       env={"VDNN_CUDNN_BENCHMARK": "0"})
                    ok = p["status"] == "ok" and p["json"]["feasible"]
                    V["plans"].append({"batch": b, "feasible": ok, "status": p["status"],
                                       "peak_device_bytes": p.get("json", {}).get("peak_device_bytes"),
                                       "host_bytes": p.get("json", {}).get("host_bytes")})
                    cache[b] = ok
                return cache[b]

            g = a.maxb_granularity
            good, bad = largest_batch(a.maxb_start, g, feasible, lambda: self.left() > 30, cap=a.maxb_cap)
            V["plan_max_batch"] = good
            self.save()
        # PyTorch's search before vdnn's confirmation runs, which are the slow part (pinned host memory).
        self.torch_maxbatch(model, inp)
        if free:
            # Confirm by training; step down if the device disagrees with the plan. cuDNN heuristics (no
            # benchmark mode), as PyTorch's search.
            confirmed = 0
            good = V["plan_max_batch"]
            cands = [good, good * 9 // 10, good // 2] if good else []
            cands = sorted({c - c % g if c >= g else c for c in cands if c > 0}, reverse=True)
            for c in cands[:a.maxb_confirm_tries]:
                r = self.vdnn_train(f"maxb-vdnn-train-{c}", model, c, a.maxb_confirm_steps,
                                    ["--policy", "auto", "--budget", str(budget), "--host-budget", str(host)],
                                    a.maxb_confirm_timeout, inp=inp, env={"VDNN_CUDNN_BENCHMARK": "0"})
                r["batch"] = c
                V["confirm"].append(r)
                self.save()
                if r["status"] == "ok":
                    confirmed = c
                    break
                if r["status"] == "skipped":
                    break
            V["max_batch"] = confirmed
            V["status"] = "ok" if confirmed else "failed"
        self.save()

    def torch_maxbatch(self, model, inp):
        a = self.a
        X = self.R["maxbatch"]
        argv = [a.py, os.path.join(a.bench_dir, "gpu_torch.py"), "maxbatch", model, "--input", inp, "--classes",
                str(a.classes), "--device", a.device, "--start", str(a.maxb_start), "--granularity", str(a.maxb_granularity),
                "--max-trials", str(a.maxb_torch_trials), "--max-seconds", str(a.maxb_torch_seconds),
                "--steps", str(a.maxb_torch_steps), "--precision", a.precision]
        if a.maxb_torch_fake_oom_above:
            argv += ["--fake-oom-above", str(a.maxb_torch_fake_oom_above)]
        rc, out, err = self.run("maxb-torch", argv, a.maxb_torch_seconds + 120)
        d = last_json(out) if rc == 0 else None
        X["torch"] = {"status": "ok", "json": d} if d else {"status": "failed" if rc is not None else "skipped",
                                                            "error": f"rc {rc}: {tail(err)}"}
        self.save()

    def main(self):
        a = self.a
        self.R["config"] = {k: v for k, v in vars(a).items() if k not in ("meta", "cmd")}
        self.save()
        for spec in a.models.split():
            name, batch, inp = (spec.split(":") + [a.input])[:3]
            if self.left() < 20:
                self.R["models"].setdefault(name, {"batch": int(batch), "input": inp, "skipped": "deadline"})
                continue
            self.model_stages(name, int(batch), inp)
        if a.maxb_model and a.maxb_model != "none":
            self.maxbatch()
        self.save()
        return write_report(self.R, a.outdir, quiet=False)


def meminfo_total():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


# ---- report ----
def layer_kinds(path):
    """vdnn's profile summed by layer kind: forward and backward milliseconds per step, and the update and upload."""
    with open(path) as f:
        p = json.load(f)
    kinds = {}
    for l in p.get("layers", []):
        k = kinds.setdefault(l.get("kind", "?"), {"layers": 0, "fwd_ms": 0.0, "bwd_ms": 0.0})
        k["layers"] += 1
        k["fwd_ms"] += 1000.0 * (l.get("fwd_s") or 0.0)
        k["bwd_ms"] += 1000.0 * (l.get("bwd_s") or 0.0)
    # The slowest convolutions with every candidate's algorithms and times: what to look at when they lag.
    convs = []
    for l in p.get("layers", []):
        if l.get("kind") != "conv":
            continue
        fs, bs = l.get("algo_fwd_s") or [], l.get("algo_bwd_s") or []
        cands = [{"algo": o.get("algo", "?"), "detail": o.get("detail", ""),
                  "fwd_ms": 1000.0 * fs[i] if i < len(fs) else None, "bwd_ms": 1000.0 * bs[i] if i < len(bs) else None}
                 for i, o in enumerate(l.get("ops") or [])]
        convs.append({"name": l.get("name"), "out": l.get("out"), "fwd_ms": 1000.0 * (l.get("fwd_s") or 0.0),
                      "bwd_ms": 1000.0 * (l.get("bwd_s") or 0.0), "candidates": cands})
    convs.sort(key=lambda c: -(c["fwd_ms"] + c["bwd_ms"]))
    return {"kinds": kinds, "update_ms": 1000.0 * (p.get("update_s") or 0.0),
            "load_ms": 1000.0 * (p.get("load_s") or 0.0), "convs": convs[:8],
            "all_convs": [{k: c[k] for k in ("out", "fwd_ms", "bwd_ms")} for c in convs]}


def ok(x):
    return isinstance(x, dict) and x.get("status") == "ok"


def ips(r):
    return r.get("images_per_sec") if ok(r) else None


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt(x, spec=".3f"):
    return "n/a" if x is None else format(x, spec)


def why(r):
    if not isinstance(r, dict) or not r:
        return "not run"
    if r.get("status") == "ok":
        return "ok"
    st, e = r.get("status", "not run"), r.get("error")
    return f"{st}: {e}" if e else st


def torch_runs(M):
    t = M.get("torch") or {}
    return (t.get("json") or {}).get("runs", []) if ok(t) else []


def torch_run(M, variant, budget):
    for r in torch_runs(M):
        if r["variant"] == variant and (budget is None or r["budget_bytes"] == budget):
            return r
    return None


def compute(R):
    """Per-model figures and the six ratios."""
    rows, ratios = {}, {}
    inc, b50, b25, b50i, sims = [], [], [], [], []
    for name, M in R.get("models", {}).items():
        v = M.get("vdnn", {})
        row = {"vdnn_incore": ips(v.get("none", {}))}
        te = torch_run(M, "eager", 0)
        row["torch_eager"] = te.get("images_per_sec") if te and te.get("status") == "ok" else None
        row["incore_ratio"] = row["vdnn_incore"] / row["torch_eager"] if row["vdnn_incore"] and row["torch_eager"] else None
        inc.append(row["incore_ratio"])
        for key, _ in FRACTIONS:
            bud = M.get("budgets", {}).get(key)
            va = ips(v.get("auto" + key, {}))
            tv = {var: torch_run(M, var, bud) for var in VARIANTS} if bud else {}
            tbest, tbest_var = None, None
            for var, r in tv.items():
                x = r.get("images_per_sec") if r and r.get("status") == "ok" else None
                if x and (tbest is None or x > tbest):
                    tbest, tbest_var = x, var
            row[f"auto{key}"] = va
            row[f"torch_best{key}"] = (tbest, tbest_var)
            row[f"ratio{key}"] = va / tbest if va and tbest else None
            (b50 if key == "50" else b25).append(row[f"ratio{key}"])
            if key == "50":
                # A slowdown (step time over in-core's), so that the goal reads "<= 1.10".
                row["auto50_vs_incore"] = row["vdnn_incore"] / va if va and row["vdnn_incore"] else None
                b50i.append(row["auto50_vs_incore"])
            s = (M.get("sim") or {}).get(key)
            meas = (v.get("auto" + key) or {}).get("json", {}).get("step_seconds") if ok(v.get("auto" + key)) else None
            pred = s["json"].get("iteration_s") if ok(s) and s.get("json") and s["json"].get("feasible") else None
            row[f"sim{key}"] = (pred, meas, abs(pred - meas) / meas if pred and meas else None)
            if key == "50":
                sims.append(row["sim50"][2])
        rows[name] = row
    ratios["incore_ratio"] = geomean(inc)
    ratios["budget50_vs_pytorch"] = geomean(b50)
    ratios["budget25_vs_pytorch"] = geomean(b25)
    ratios["budget50_vs_incore"] = geomean(b50i)
    X = R.get("maxbatch", {})
    vm = (X.get("vdnn") or {}).get("max_batch")
    tm = ((X.get("torch") or {}).get("json") or {}).get("max_batch") if ok(X.get("torch")) else None
    ratios["max_batch_ratio"] = vm / tm if vm and tm else None
    sims = [s for s in sims if s is not None]
    ratios["sim_error"] = max(sims) if sims else None
    return rows, ratios


def slug(s):
    s = re.sub(r"(?i)\bnvidia\b", "", s or "unknown")
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-") or "unknown"


def report_name(R):
    meta = R.get("meta", {})
    date = meta.get("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"))[:10]
    dev = meta.get("device_slug") or slug(meta.get("gpu"))
    prec = R.get("config", {}).get("precision", "fp32")
    return f"gpu-vs-pytorch-{dev}{'' if prec == 'fp32' else '-' + prec}-{date}.md"


def write_conv_shapes(pk, convs, add):
    """Convolutions by output shape (CxHxW): vdnn's profile summed over its layers of that shape, against PyTorch's
    distinct convolutions of that shape each timed alone, times the layers that share it; ms per step."""
    rows = {}
    for l in pk.get("all_convs", []):
        r = rows.setdefault(l["out"].split("x", 1)[1], {"vdnn": [0.0, 0.0], "torch": [0.0, 0.0], "layers": 0})
        r["vdnn"][0] += l["fwd_ms"]
        r["vdnn"][1] += l["bwd_ms"]
        r["layers"] += 1
    for c in convs:
        r = rows.setdefault(c["out"], {"vdnn": [0.0, 0.0], "torch": [0.0, 0.0], "layers": 0})
        r["torch"][0] += c["fwd_ms"] * c["count"]
        r["torch"][1] += c["bwd_ms"] * c["count"]
    add("Convolutions by output shape: vdnn's profile (its layers of that shape) against PyTorch's convolutions of "
        "that shape timed alone (`gpu_torch.py --conv-layers`, times the layers sharing each); ms per step:")
    add("")
    add("| output CxHxW | vdnn layers | vdnn fwd / bwd | PyTorch fwd / bwd | vdnn / PyTorch |")
    add("|---|---|---|---|---|")
    tv = tt = 0.0
    for out, r in sorted(rows.items(), key=lambda kv: -sum(kv[1]["vdnn"]))[:12]:
        v, t = sum(r["vdnn"]), sum(r["torch"])
        tv, tt = tv + v, tt + t
        add(f"| {out} | {r['layers']} | {r['vdnn'][0]:.2f} / {r['vdnn'][1]:.2f} | {r['torch'][0]:.2f} / "
            f"{r['torch'][1]:.2f} | {fmt(v / t if t > 0 else None, '.2f')} |")
    add("")
    add(f"These shapes: vdnn {tv:.2f} ms, PyTorch {tt:.2f} ms.")
    add("")


def write_step_breakdown(R, add):
    """Where each side's in-core step goes: vdnn's profile by layer kind, PyTorch's top operators."""
    for name, M in R.get("models", {}).items():
        pk = M.get("profile_kinds")
        te = torch_run(M, "eager", 0) or {}
        if not pk and not te.get("ops"):
            continue
        add(f"### Where the in-core step goes: {name}")
        add("")
        if pk:
            v = (M.get("vdnn") or {}).get("none", {})
            step = v.get("json", {}).get("step_seconds") if ok(v) else None
            rows = sorted(pk["kinds"].items(), key=lambda kv: -(kv[1]["fwd_ms"] + kv[1]["bwd_ms"]))
            total = sum(k["fwd_ms"] + k["bwd_ms"] for _, k in rows) + pk["update_ms"] + pk["load_ms"]
            add("vdnn (`vdnn profile`, medians per layer, summed by kind; ms per step):")
            add("")
            add("| kind | layers | forward | backward | total |")
            add("|---|---|---|---|---|")
            for kind, k in rows:
                add(f"| {kind} | {k['layers']} | {k['fwd_ms']:.2f} | {k['bwd_ms']:.2f} | {k['fwd_ms'] + k['bwd_ms']:.2f} |")
            add(f"| parameter update | | | | {pk['update_ms']:.2f} |")
            add(f"| batch upload | | | | {pk['load_ms']:.2f} |")
            add("")
            add(f"Sum {total:.2f} ms" + (f"; measured step {1000 * step:.2f} ms" if step else "") + ".")
            add("")
            if pk.get("convs"):
                add("vdnn's slowest convolutions: each candidate the profile timed, with what it runs (cuDNN's "
                    "algorithm per pass, `+tc` tensor-core math; ms forward / backward):")
                add("")
                add("| layer | output | ms fwd / bwd | candidates |")
                add("|---|---|---|---|")
                for c in pk["convs"]:
                    cs = "; ".join(f"{x['algo']}" + (f" ({x['detail']})" if x["detail"] else "")
                                   + (f" {x['fwd_ms']:.2f} / {x['bwd_ms']:.2f}" if x["fwd_ms"] is not None
                                      and x["bwd_ms"] is not None else "") for x in c["candidates"])
                    add(f"| {c['name']} | {c['out']} | {c['fwd_ms']:.2f} / {c['bwd_ms']:.2f} | {cs or '-'} |")
                add("")
        if pk and te.get("convs"):
            write_conv_shapes(pk, te["convs"], add)
        if te.get("ops"):
            add("PyTorch (torch.profiler over 3 steps, aten operators by their own device time; ms per step):")
            add("")
            add("| operator | ms | calls |")
            add("|---|---|---|")
            for o in te["ops"][:15]:
                add(f"| {o['op']} | {o['ms_per_step']:.2f} | {o['calls_per_step']:.0f} |")
            add("")
            if te.get("step_seconds"):
                add(f"Measured step {1000 * te['step_seconds']:.2f} ms.")
                add("")


def write_report(R, outdir, quiet):
    rows, ratios = compute(R)
    meta, cfg = R.get("meta", {}), R.get("config", {})
    L = []
    add = L.append
    add(f"# vdnn vs PyTorch on {meta.get('gpu', cfg.get('device', '?'))}")
    add("")
    if cfg.get("device") == "cpu":
        add("**CPU TEST MODE**: tiny sizes on the CPU backend, to exercise the bench's flow; no figure here is a "
            "GPU measurement, and PyTorch's memory budgets are not enforced on the CPU.")
        add("")
    add(f"- date: {meta.get('date', '?')}")
    add(f"- device: {meta.get('gpu', '?')} (driver {meta.get('driver', '?')}, {meta.get('gpu_memory', '?')}); "
        f"host: {meta.get('host', '?')}")
    add(f"- command: `{meta.get('command', '?')}`")
    add(f"- vdnn: commit {meta.get('commit', '?')}, build {meta.get('build', '?')}; "
        f"cuDNN benchmark mode for vdnn: VDNN_CUDNN_BENCHMARK={meta.get('vdnn_cudnn_benchmark', '?')}")
    env = {}
    for M in R.get("models", {}).values():
        j = (M.get("torch") or {}).get("json") or {}
        env = env or j.get("env", {})
    if env:
        add(f"- PyTorch {env.get('torch')}, torchvision {env.get('torchvision')}"
            + (f", CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}" if env.get("cuda") else ""))
    prec = cfg.get("precision", "fp32")
    maps = "fp32 NCHW" if prec == "fp32" else (f"{prec}: vdnn --precision {prec} (fp32 master weights), PyTorch "
                                              f"torch.autocast({prec})" + (" with a GradScaler" if prec == "fp16" else ""))
    add(f"- settings: batch and input per model below, {cfg.get('classes')} classes, synthetic data, {maps}, SGD lr "
        f"{cfg.get('lr')} momentum 0.9 weight decay 5e-4; TF32 on both sides (vdnn's default; PyTorch "
        "allow_tf32 for cuDNN and cuBLAS); PyTorch cudnn.benchmark=True; "
        f"{cfg.get('warmup')} warm-up + {cfg.get('steps')} timed steps; images/s = batch / median step time "
        "(vdnn: step_seconds, its first step excluded; PyTorch: each step between torch.cuda.synchronize() calls, "
        "the batch copied from pinned host memory each step)")
    add("- models: PyTorch builds torchvision's vgg16 / resnet50; vdnn reads models/vgg16.cfg / models/resnet50.cfg "
        "(same layers; parameter counts below)")
    add("")

    add("## In-core (vdnn `--policy none` vs PyTorch eager)")
    add("")
    add("| model | batch, input | params vdnn / torch | vdnn img/s | PyTorch img/s | vdnn / PyTorch | vdnn peak: plan / measured | "
        "PyTorch peak allocated / reserved |")
    add("|---|---|---|---|---|---|---|---|")
    notes = []
    for name, M in R.get("models", {}).items():
        r = rows.get(name, {})
        v = (M.get("vdnn") or {}).get("none", {})
        te = torch_run(M, "eager", 0) or {}
        tp = ((M.get("torch") or {}).get("json") or {}).get("params")
        vpk = v.get("json", {}).get("peak_device_bytes") if ok(v) else None
        ppk = (M.get("plan_none") or {}).get("json", {}).get("peak_device_bytes") if ok(M.get("plan_none")) else None
        if tp and M.get("vdnn_params") and tp != M["vdnn_params"]:
            notes.append(f"{name}: the parameter counts differ at {M.get('input')}"
                         + (" (torchvision's VGG pools adaptively to 7x7 before its classifier, so away from 224x224 "
                            "its fc6 is larger; the models match at 224x224)" if name.startswith("vgg") else ""))
        add(f"| {name} | {M.get('batch')}, {M.get('input')} | {M.get('vdnn_params', '?')} / {tp or '?'} | "
            f"{fmt(r.get('vdnn_incore'), '.1f') if r.get('vdnn_incore') else why(v)} | "
            f"{fmt(r.get('torch_eager'), '.1f') if r.get('torch_eager') else why(te or M.get('torch'))} | "
            f"{fmt(r.get('incore_ratio'))} | {gib(ppk)} / {gib(vpk)} | "
            f"{gib(te.get('peak_allocated_bytes'))} / {gib(te.get('peak_reserved_bytes'))} |")
    add("")
    for n in notes:
        add(f"- {n}")
    if notes:
        add("")
    write_step_breakdown(R, add)

    add("## Under a memory budget (vdnn `--policy auto` vs PyTorch save_on_cpu / checkpoint)")
    add("")
    add("Budgets are 50% and 25% of vdnn's in-core peak (`vdnn plan --json` peak_device_bytes, policy none); "
        "PyTorch gets torch.cuda.set_per_process_memory_fraction(budget / total memory). The ratio is vdnn over "
        "the faster PyTorch variant that ran; a variant that ran out of memory counts as not running.")
    add("")
    add("| model | budget | vdnn auto img/s | PyTorch save_on_cpu img/s | PyTorch checkpoint img/s | vdnn / best PyTorch | "
        "vdnn auto step time / in-core's |")
    add("|---|---|---|---|---|---|---|")
    for name, M in R.get("models", {}).items():
        r = rows.get(name, {})
        for key, f in FRACTIONS:
            bud = (M.get("budgets") or {}).get(key)
            va = (M.get("vdnn") or {}).get("auto" + key, {})
            cells = []
            for var in VARIANTS:
                tr = torch_run(M, var, bud) if bud else None
                if tr and tr.get("status") == "ok":
                    cells.append(f"{tr['images_per_sec']:.1f}")
                elif tr:
                    cells.append(f"{tr.get('status')} ({tr.get('error', '')[:120]})")
                else:
                    cells.append(why(M.get("torch")))
            vi = f"{r.get('auto' + key):.1f}" if r.get("auto" + key) else why(va)
            rel = fmt(r.get("auto50_vs_incore")) if key == "50" else "-"
            tb = r.get(f"torch_best{key}", (None, None))
            if r.get("ratio" + key):
                best = f"{r['ratio' + key]:.3f} (vs {tb[1]})"
            else:
                best = "n/a (" + "; ".join(x for x in (
                    "vdnn has no figure" if not r.get("auto" + key) else "",
                    "no PyTorch variant ran" if not tb[0] else "") if x) + ")"
            add(f"| {name} | {int(f * 100)}% = {gib(bud)} | {vi} | {cells[0]} | {cells[1]} | {best} | {rel} |")
    add("")

    add("## Simulator (vdnn profile + vdnn simulate, policy auto)")
    add("")
    add("| model | budget | predicted ms | measured ms (median step) | error |")
    add("|---|---|---|---|---|")
    for name, M in R.get("models", {}).items():
        r = rows.get(name, {})
        for key, f in FRACTIONS:
            pred, meas, err = r.get("sim" + key, (None, None, None))
            s = (M.get("sim") or {}).get(key)
            ps = fmt(pred and pred * 1e3, '.1f')
            if ok(s) and s.get("json") and not s["json"].get("feasible"):
                ps = "infeasible"
            elif not ok(s):
                ps = why(s) if s else "not run (no profile)"
            va = (M.get("vdnn") or {}).get("auto" + key, {})
            ms = fmt(meas * 1e3, '.1f') if meas else why(va)
            add(f"| {name} | {int(f * 100)}% | {ps} | {ms} | "
                f"{fmt(err and err * 100, '.1f')}{'%' if err is not None else ''} |")
    add("")

    X = R.get("maxbatch", {})
    if X:
        add(f"## Largest batch of {X.get('model')} at {X.get('input')}")
        add("")
        V = X.get("vdnn") or {}
        add(f"- device memory free: {gib(X.get('free_bytes'))} ({X.get('free_from')}); vdnn budget = free - "
            f"{gib(X.get('margin_bytes'))} = {gib(X.get('budget_bytes'))}; host budget {gib(X.get('host_budget_bytes'))} "
            f"(MemTotal {gib(X.get('host_memtotal_bytes'))})")
        plans = ", ".join(f"{p['batch']}:{'fits' if p['feasible'] else 'no'}" for p in V.get("plans", []))
        add(f"- vdnn `plan --policy auto` feasibility: {plans or '-'} -> {V.get('plan_max_batch', 'n/a')}")
        for c in V.get("confirm", []):
            add(f"- vdnn train --policy auto, batch {c.get('batch')}, cuDNN heuristics: {why(c)}"
                + (f", {c['images_per_sec']:.1f} img/s, measured peak {gib(c['json'].get('peak_device_bytes'))}"
                   if ok(c) and c.get("images_per_sec") else ""))
        T = X.get("torch") or {}
        tj = T.get("json") or {}
        trials = ", ".join(f"{t['batch']}:{'ok' if t['ok'] else 'fail'}" for t in tj.get("trials", []))
        add(f"- PyTorch in-core tries ({tj.get('steps_per_try', '?')} steps each, cudnn.benchmark off): {trials or why(T)}"
            + (f"; converged to granularity {tj.get('granularity')}" if tj.get("converged") else
               ("; not converged (trial or time cap)" if tj else "")))
        fails = [t for t in tj.get("trials", []) if not t["ok"]]
        if fails:
            add(f"- PyTorch's first failure: {fails[0].get('error')}")
        add("")
        add("| | vdnn | PyTorch | vdnn / PyTorch |")
        add("|---|---|---|---|")
        add(f"| largest batch | {V.get('max_batch') or 'n/a'} | {tj.get('max_batch') or 'n/a'} | "
            f"{fmt(ratios['max_batch_ratio'], '.2f')} |")
        add("")

    skipped = [f"{n} (all of it)" for n, M in R.get("models", {}).items() if M.get("skipped")]
    skipped += [s["name"] for s in R.get("stages", []) if s.get("skipped")]
    failed = [f"{s['name']} (rc {s['rc']})" for s in R.get("stages", []) if s.get("rc") not in (0, None, 3)]
    if skipped or failed:
        add("## Not measured")
        add("")
        if skipped:
            add(f"- skipped at the deadline: {', '.join(skipped)}")
        if failed:
            add(f"- failed: {', '.join(failed)} (logs in work.tar.gz)")
        add("")

    add("## Ratios")
    add("")
    add("Geometric means over the models where both sides have a figure; sim_error is the worst model's "
        "|predicted - measured| / measured at the 50% budget; max_batch_ratio is for the model above.")
    add("")
    add("```")
    lines = [f"{k}: {fmt(ratios[k])}" for k in RATIO_KEYS]
    L.extend(lines)
    add("```")
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, report_name(R))
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump({"ratios": ratios, "results": R}, f, indent=1)
    if not quiet:
        print(f"report: {path}", flush=True)
        for ln in lines:
            print(ln, flush=True)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--vdnn", required=True)
    b.add_argument("--py", required=True, help="the python with torch and torchvision")
    b.add_argument("--work", required=True)
    b.add_argument("--outdir", required=True)
    b.add_argument("--bench-dir", default=os.path.dirname(os.path.abspath(__file__)))
    b.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    b.add_argument("--threads", type=int, default=os.cpu_count())
    b.add_argument("--deadline", type=float, default=time.time() + 540)
    b.add_argument("--models", default="vgg16:64 resnet50:128", help="NAME:BATCH[:CxHxW] ...")
    b.add_argument("--input", default="3x224x224")
    b.add_argument("--classes", type=int, default=1000)
    b.add_argument("--steps", type=int, default=10)
    b.add_argument("--warmup", type=int, default=3)
    b.add_argument("--lr", type=float, default=0.001)
    b.add_argument("--segments", type=int, default=0)
    b.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    b.add_argument("--maxb-model", default="vgg16")
    b.add_argument("--maxb-input", default="3x224x224")
    b.add_argument("--maxb-start", type=int, default=64)
    b.add_argument("--maxb-cap", type=int, default=16384)
    b.add_argument("--maxb-granularity", type=int, default=8)
    b.add_argument("--maxb-free-bytes", type=int, default=0, help="0: ask nvidia-smi")
    b.add_argument("--maxb-margin", type=int, default=2 << 30)
    b.add_argument("--maxb-host-budget", type=int, default=0, help="0: 60%% of MemTotal")
    b.add_argument("--maxb-confirm-steps", type=int, default=3)
    b.add_argument("--maxb-confirm-tries", type=int, default=3)
    b.add_argument("--maxb-confirm-timeout", type=int, default=200)
    b.add_argument("--maxb-torch-trials", type=int, default=14)
    b.add_argument("--maxb-torch-seconds", type=int, default=150)
    b.add_argument("--maxb-torch-steps", type=int, default=2)
    b.add_argument("--maxb-torch-fake-oom-above", type=int, default=0)
    b.add_argument("--meta", action="append", default=[], help="KEY=VALUE for the report's header")
    r = sub.add_parser("report")
    r.add_argument("results", help="results.json, from the work directory or the output directory")
    r.add_argument("--outdir", required=True)
    a = ap.parse_args()
    if a.cmd == "report":
        with open(a.results) as f:
            d = json.load(f)
        write_report(d.get("results", d), a.outdir, quiet=False)
        return
    Bench(a).main()


if __name__ == "__main__":
    main()
