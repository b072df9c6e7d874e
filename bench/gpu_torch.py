#!/usr/bin/env python3
"""The PyTorch side of bench/gpu-vs-pytorch.sh: torchvision's VGG-16 / ResNet-50 trained on synthetic
data with SGD + momentum, the way vdnn trains them, under the memory-saving schemes PyTorch offers.

  gpu_torch.py run MODEL --batch B --input CxHxW --classes N --runs VARIANT:BUDGET[,VARIANT:BUDGET...]
                   [--steps S] [--warmup W] [--device cuda|cpu] [--segments K]
      VARIANT is eager, save_on_cpu (torch.autograd.graph.save_on_cpu(pin_memory=True)) or checkpoint
      (torch.utils.checkpoint: checkpoint_sequential over K segments of VGG's features, one checkpoint per
      bottleneck block of ResNet). BUDGET is device bytes (0: no limit), enforced with
      torch.cuda.set_per_process_memory_fraction(BUDGET / total memory). All runs share one process, model
      and optimizer; between runs the caching allocator is emptied and the limit set anew. A run that runs
      out of memory is reported as "oom", not raised.
  gpu_torch.py maxbatch MODEL --input CxHxW --classes N [--start B] [--steps S] [--max-trials N]
                   [--max-seconds T] [--granularity G] [--device cuda|cpu] [--fake-oom-above B]
      The largest batch that trains in-core (no memory saving): doubling from --start until a batch fails,
      then bisection down to --granularity; each try runs S training steps, and torch.cuda.empty_cache()
      runs between tries. --fake-oom-above (for tests on the CPU) fails every batch above B.

Each prints one JSON object on stdout; progress goes to stderr. Timing: --warmup steps, then --steps steps
each bracketed by torch.cuda.synchronize(); images/s is batch / the median step time (as vdnn's
step_seconds: median, warm-up excluded). Every step copies its batch from pinned host memory to the device
(vdnn uploads each batch too). TF32 is on for cuDNN and cuBLAS (vdnn's default), cudnn.benchmark=True for
`run` (False for `maxbatch`, where each try is a new shape and autotuning's workspaces would only lower
PyTorch's figure).
"""
import argparse
import contextlib
import gc
import inspect
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from batch_search import largest_batch


def log(*a):
    print("gpu_torch:", *a, file=sys.stderr, flush=True)


def parse_shape(s):
    c, h, w = (int(v) for v in s.split("x"))
    return c, h, w


def build_model(name, classes):
    import torchvision

    ctor = getattr(torchvision.models, name)
    try:
        return ctor(weights=None, num_classes=classes)
    except TypeError:  # torchvision before 0.13
        return ctor(pretrained=False, num_classes=classes)


def set_tf32(on):
    # The flags PyTorch documents for TF32 (newer releases also read them; fp32_precision is the new spelling).
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def oom_types():
    return tuple(t for t in (getattr(torch, "OutOfMemoryError", None), getattr(torch.cuda, "OutOfMemoryError", None)) if t)


def is_oom(e):
    if isinstance(e, oom_types()):
        return True
    s = str(e)
    return "out of memory" in s or "ALLOC_FAILED" in s or "FakeOOM" in s


class FakeOOM(RuntimeError):
    pass


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


class Trainer:
    """One model and optimizer; a step under a variant."""

    def __init__(self, name, classes, dev, lr, segments, precision="fp32"):
        self.name, self.dev = name, dev
        # vdnn --precision bf16|fp16 against autocast to that type (fp16 with dynamic loss scaling, as vdnn's).
        self.autocast = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self.scaler = None
        if precision == "fp16":  # torch.amp.GradScaler from PyTorch 2.3 on, CUDA's before
            gs = getattr(torch.amp, "GradScaler", None)
            self.scaler = gs(dev.type) if gs else torch.cuda.amp.GradScaler()
        self.model = build_model(name, classes).to(dev)
        self.model.train()
        self.params = sum(p.numel() for p in self.model.parameters())
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
        self.segments = segments
        if name.startswith("vgg"):
            n = len(self.model.features)
            self.segments = segments or max(1, round(math.sqrt(n)))
        self._seq_fallback = None

    # ---- checkpointed forward passes ----
    def _ckpt_sequential(self, seq, x):
        from torch.utils.checkpoint import checkpoint, checkpoint_sequential

        if "use_reentrant" in inspect.signature(checkpoint_sequential).parameters:
            return checkpoint_sequential(seq, self.segments, x, use_reentrant=False)
        # PyTorch before 2.0: checkpoint_sequential's split, with non-reentrant checkpoints (the reentrant
        # ones give the first segment no weight gradients when the input needs none).
        if self._seq_fallback is None:
            mods = list(seq.children())
            size = len(mods) // self.segments
            parts, end = [], -1
            for start in range(0, size * (self.segments - 1), size):
                end = start + size - 1
                parts.append(nn.Sequential(*mods[start:end + 1]))
            self._seq_fallback = (parts, nn.Sequential(*mods[end + 1:]))
        parts, last = self._seq_fallback
        for p in parts:
            x = checkpoint(p, x, use_reentrant=False)
        return last(x)

    def forward(self, x, variant):
        m = self.model
        if variant != "checkpoint":
            return m(x)
        from torch.utils.checkpoint import checkpoint

        if self.name.startswith("vgg"):
            h = self._ckpt_sequential(m.features, x)
            h = torch.flatten(m.avgpool(h), 1)
            return m.classifier(h)
        if self.name.startswith("resnet"):
            h = m.maxpool(m.relu(m.bn1(m.conv1(x))))
            for layer in (m.layer1, m.layer2, m.layer3, m.layer4):
                for block in layer:
                    h = checkpoint(block, h, use_reentrant=False)
            return m.fc(torch.flatten(m.avgpool(h), 1))
        raise ValueError(f"no checkpointing scheme for {self.name}")

    def step(self, x, y, variant):
        self.opt.zero_grad(set_to_none=True)
        cast = torch.autocast(self.dev.type, dtype=self.autocast) if self.autocast else contextlib.nullcontext()
        if variant == "save_on_cpu":
            with torch.autograd.graph.save_on_cpu(pin_memory=self.dev.type == "cuda"), cast:
                loss = F.cross_entropy(self.forward(x, variant), y)
        else:
            with cast:
                loss = F.cross_entropy(self.forward(x, variant), y)
        if self.scaler:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        return loss

    def cleanup(self):
        self.opt.zero_grad(set_to_none=True)
        gc.collect()
        if self.dev.type == "cuda":
            torch.cuda.empty_cache()


def env_info(dev):
    import torchvision

    d = {"torch": torch.__version__, "torchvision": torchvision.__version__, "device": str(dev)}
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        d.update({"gpu": p.name, "total_memory": p.total_memory, "cuda": torch.version.cuda,
                  "cudnn": torch.backends.cudnn.version(), "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
                  "tf32_cudnn": torch.backends.cudnn.allow_tf32, "cudnn_benchmark": torch.backends.cudnn.benchmark})
    return d


def setup(a):
    dev = torch.device("cuda", 0) if a.device == "cuda" else torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_torch: --device cuda but torch.cuda.is_available() is False")
    torch.manual_seed(1)
    if dev.type == "cuda":
        set_tf32(True)
    return dev


def start(a, benchmark):
    """setup's device with cuDNN's autotuner on or off, the input's shape and a Trainer of the model."""
    dev = setup(a)
    if dev.type == "cuda":
        torch.backends.cudnn.benchmark = benchmark
    return dev, parse_shape(a.input), Trainer(a.model, a.classes, dev, a.lr, a.segments, a.precision)


def op_profile(tr, x_host, y_host, dev, variant, k):
    """The top operators of k training steps by their own device time (CPU time on the CPU), per step: where
    PyTorch's step goes, next to vdnn's per-layer profile."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=acts) as prof:
        for _ in range(k):
            tr.step(x_host.to(dev, non_blocking=True), y_host.to(dev, non_blocking=True), variant)
            sync(dev)
    rows = []
    for e in prof.key_averages():
        if not e.key.startswith("aten::"):
            continue  # kernels and Python frames: their time is also an aten operator's
        if dev.type == "cuda":
            t = getattr(e, "self_device_time_total", None)
            t = getattr(e, "self_cuda_time_total", 0) if t is None else t
        else:
            t = e.self_cpu_time_total
        if t > 0:
            rows.append({"op": e.key, "ms_per_step": t / 1000.0 / k, "calls_per_step": e.count / k})
    rows.sort(key=lambda r: -r["ms_per_step"])
    return rows[:30]


def conv_layers(tr, x_host, y_host, dev, reps):
    """Every distinct convolution of the model (input shape, kernel, stride, padding, groups) timed alone, forward and
    forward + backward (dx and dw) under the step's precision, reps calls each after one warm-up: ms per call and
    how many layers share it. Next to vdnn's per-layer profile it shows whether a gap is every convolution's or a
    few shapes'."""
    seen = {}

    def hook(mod, inp, out):
        key = (tuple(inp[0].shape), tuple(out.shape), mod.kernel_size, mod.stride, mod.padding, mod.groups)
        seen.setdefault(key, [mod, 0])[1] += 1

    hooks = [m.register_forward_hook(hook) for m in tr.model.modules() if isinstance(m, nn.Conv2d)]
    try:
        tr.step(x_host.to(dev), y_host.to(dev), "eager")
        sync(dev)
    finally:
        for h in hooks:
            h.remove()
    ac = dict(device_type=dev.type, dtype=tr.autocast or torch.bfloat16, enabled=tr.autocast is not None)

    def timed(fn):
        fn()
        sync(dev)
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        sync(dev)
        return 1000.0 * (time.perf_counter() - t0) / reps

    rows = []
    for (ish, osh, k, st, pad, groups), (mod, count) in seen.items():
        x = torch.randn(ish, device=dev, requires_grad=True)
        with torch.autocast(**ac):
            gy = torch.randn_like(mod(x))

        def fwd():
            with torch.no_grad(), torch.autocast(**ac):
                mod(x)

        def both():
            with torch.autocast(**ac):
                y = mod(x)
            y.backward(gy)

        f, fb = timed(fwd), timed(both)
        mod.zero_grad(set_to_none=True)
        rows.append({"in": "x".join(map(str, ish[1:])), "out": "x".join(map(str, osh[1:])), "kernel": list(k),
                     "stride": list(st), "padding": list(pad), "groups": groups, "count": count,
                     "fwd_ms": f, "bwd_ms": max(0.0, fb - f)})
    rows.sort(key=lambda r: -(r["fwd_ms"] + r["bwd_ms"]) * r["count"])
    return rows


def cmd_run(a):
    dev, (c, h, w), tr = start(a, True)
    total = torch.cuda.get_device_properties(dev).total_memory if dev.type == "cuda" else None
    x_host = torch.randn(a.batch, c, h, w)
    y_host = torch.randint(0, a.classes, (a.batch,))
    if dev.type == "cuda":
        x_host, y_host = x_host.pin_memory(), y_host.pin_memory()
    out = {"model": a.model, "batch": a.batch, "input": a.input, "classes": a.classes, "params": tr.params,
           "steps": a.steps, "warmup": a.warmup, "segments": tr.segments if a.model.startswith("vgg") else None,
           "env": env_info(dev), "runs": []}
    for spec in a.runs.split(","):
        variant, budget = spec.split(":")
        budget = int(budget)
        r = {"variant": variant, "budget_bytes": budget}
        tr.cleanup()
        if dev.type == "cuda":
            frac = min(1.0, budget / total) if budget > 0 else 1.0
            torch.cuda.set_per_process_memory_fraction(frac, dev)
            torch.cuda.reset_peak_memory_stats(dev)
            r["fraction"] = frac
        elif budget > 0:
            r["note"] = "budget not enforced on the CPU"
        times, loss = [], None
        try:
            for i in range(a.warmup + a.steps):
                sync(dev)
                t0 = time.perf_counter()
                x = x_host.to(dev, non_blocking=True)
                y = y_host.to(dev, non_blocking=True)
                loss = tr.step(x, y, variant)
                sync(dev)
                if i >= a.warmup:
                    times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            r.update({"status": "ok", "step_seconds": med, "step_seconds_mean": statistics.mean(times),
                      "images_per_sec": a.batch / med, "loss": float(loss)})
            if a.op_profile and variant == "eager" and budget == 0:
                r["ops"] = op_profile(tr, x_host, y_host, dev, variant, a.op_profile)
            if a.conv_layers and variant == "eager" and budget == 0:
                r["convs"] = conv_layers(tr, x_host, y_host, dev, a.conv_layers)
        except Exception as e:  # noqa: BLE001 - an OOM (or any failure) is a result here
            r.update({"status": "oom" if is_oom(e) else "error", "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}",
                      "steps_done": len(times)})
        x = y = loss = None
        if dev.type == "cuda":
            r["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(dev)
            r["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(dev)
        log(a.model, variant, budget, r.get("status"), f"{r.get('images_per_sec', 0):.1f} img/s")
        out["runs"].append(r)
    print(json.dumps(out))


def cmd_maxbatch(a):
    dev, (c, h, w), tr = start(a, False)
    t_start = time.perf_counter()
    trials = []

    def attempt(b):
        t0 = time.perf_counter()
        err = None
        try:
            if a.fake_oom_above and b > a.fake_oom_above:
                raise FakeOOM(f"FakeOOM: batch {b} above --fake-oom-above {a.fake_oom_above}")
            x = torch.randn(b, c, h, w, device=dev)
            y = torch.randint(0, a.classes, (b,), device=dev)
            for _ in range(a.steps):
                tr.step(x, y, "eager")
            sync(dev)
            ok = True
        except Exception as e:  # noqa: BLE001
            ok = False
            err = f"{'oom' if is_oom(e) else 'error'}: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        x = y = None
        peak = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None
        tr.cleanup()
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        trials.append({"batch": b, "ok": ok, "seconds": round(time.perf_counter() - t0, 2), "error": err,
                       "peak_allocated_bytes": peak})
        log(f"maxbatch {a.model} batch {b}: {'ok' if ok else err}")
        return ok

    def budget_left():
        return len(trials) < a.max_trials and time.perf_counter() - t_start < a.max_seconds

    g = max(1, a.granularity)
    good, bad = largest_batch(a.start, g, attempt, budget_left)
    done = bad is not None and bad - good <= g
    print(json.dumps({"model": a.model, "input": a.input, "classes": a.classes, "params": tr.params,
                      "max_batch": good, "first_failing_batch": bad, "converged": done, "granularity": g,
                      "steps_per_try": a.steps, "trials": trials, "seconds": round(time.perf_counter() - t_start, 1),
                      "env": env_info(dev)}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "maxbatch"):
        p = sub.add_parser(name)
        p.add_argument("model", choices=["vgg16", "resnet50", "vgg19", "resnet18", "resnet101", "resnet152"])
        p.add_argument("--input", default="3x224x224")
        p.add_argument("--classes", type=int, default=1000)
        p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
        p.add_argument("--lr", type=float, default=0.001)
        p.add_argument("--segments", type=int, default=0, help="checkpoint_sequential segments (default sqrt(len))")
        p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"],
                       help="bf16/fp16: the step under torch.autocast to that type (fp16 with a GradScaler)")
        p.add_argument("--steps", type=int, default=10 if name == "run" else 2)
    r = sub.choices["run"]
    r.add_argument("--batch", type=int, required=True)
    r.add_argument("--warmup", type=int, default=3)
    r.add_argument("--runs", default="eager:0")
    r.add_argument("--op-profile", type=int, default=0, metavar="K",
                   help="after the unlimited eager run, profile K more steps and report the top operators")
    r.add_argument("--conv-layers", type=int, default=0, metavar="R",
                   help="after the unlimited eager run, time every distinct convolution alone, R calls each")
    m = sub.choices["maxbatch"]
    m.add_argument("--start", type=int, default=64)
    m.add_argument("--max-trials", type=int, default=14)
    m.add_argument("--max-seconds", type=float, default=150)
    m.add_argument("--granularity", type=int, default=8)
    m.add_argument("--fake-oom-above", type=int, default=0)
    a = ap.parse_args()
    for spec in getattr(a, "runs", "eager:0").split(","):
        v, _, b = spec.partition(":")
        if v not in ("eager", "save_on_cpu", "checkpoint") or not b.isdigit():
            ap.error(f"--runs: bad entry '{spec}' (VARIANT:BYTES, VARIANT eager|save_on_cpu|checkpoint)")
    {"run": cmd_run, "maxbatch": cmd_maxbatch}[a.cmd](a)


if __name__ == "__main__":
    main()
