#!/usr/bin/env python3
"""Builds a PyTorch module from a vdnn model file, so benchmarks compare the very same network,
and times training steps of it. Usage:
  cfg_torch.py MODEL.cfg --input CxHxW --classes N --batch B --steps S --threads T [--warmup W] [--autocast bf16]
--autocast bf16 runs forward (and so backward) under torch.autocast("cpu", dtype=torch.bfloat16): PyTorch's
mixed precision, fp32 weights and optimizer, bf16 convolutions and matrix products, fp32 losses.
Prints one JSON object: {"images_per_sec": ..., "seconds": ..., "steps": ...}.
"""
import argparse
import json
import re
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_cfg(path):
    """Sections in file order: (name, {key: value}); [net] is returned separately."""
    net, layers, cur = {}, [], None
    with open(path) as f:
        for raw in f:
            line = re.split(r"[#;]", raw, maxsplit=1)[0].strip()
            if not line:
                continue
            m = re.fullmatch(r"\[(.+)\]", line)
            if m:
                cur = {} if m.group(1) == "net" else {"__name__": m.group(1)}
                if m.group(1) == "net":
                    net = cur
                else:
                    layers.append(cur)
                continue
            k, v = (s.strip() for s in line.split("=", 1))
            cur[k] = v
    return net, layers


def pair(d, key, default):
    v = int(d.get(key, default))
    return int(d.get(key + "_h", v)), int(d.get(key + "_w", v))


class CfgNet(nn.Module):
    def __init__(self, path, in_shape, classes):
        super().__init__()
        _, layers = parse_cfg(path)
        self.order, self.inputs, self.kinds = [], {}, {}
        self.mods = nn.ModuleDict()
        shapes = {"data": tuple(in_shape)}
        prev = "data"
        for d in layers:
            name, kind = d["__name__"], d["type"]
            ins = d.get("input", prev).split(",")
            ins = [s.strip() for s in ins]
            c, h, w = shapes[ins[0]]
            key = name.replace(".", "_")
            if kind == "conv":
                kh, kw = pair(d, "size", 1)
                sh, sw = pair(d, "stride", 1)
                ph, pw = pair(d, "pad", 0)
                f = int(d["filters"])
                self.mods[key] = nn.Conv2d(c, f, (kh, kw), (sh, sw), (ph, pw), groups=int(d.get("groups", 1)),
                                           bias=d.get("bias", "1") != "0")
                out = (f, (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1)
            elif kind in ("maxpool", "avgpool"):
                kh, kw = pair(d, "size", 1)
                sh, sw = int(d.get("stride", kh)), int(d.get("stride", kw))
                if "stride_h" in d or "stride_w" in d:
                    sh, sw = pair(d, "stride", kh)
                ph, pw = pair(d, "pad", 0)
                cls = nn.MaxPool2d if kind == "maxpool" else nn.AvgPool2d
                self.mods[key] = cls((kh, kw), (sh, sw), (ph, pw))
                out = (c, (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1)
            elif kind == "relu":
                self.mods[key] = nn.ReLU(inplace=True)
                out = (c, h, w)
            elif kind == "lrn":
                self.mods[key] = nn.LocalResponseNorm(int(d.get("size", 5)), float(d.get("alpha", 1e-4)),
                                                      float(d.get("beta", 0.75)), float(d.get("k", 1)))
                out = (c, h, w)
            elif kind == "batchnorm":
                self.mods[key] = nn.BatchNorm2d(c, float(d.get("eps", 1e-5)), float(d.get("momentum", 0.1)))
                out = (c, h, w)
            elif kind == "dropout":
                self.mods[key] = nn.Dropout(float(d.get("p", 0.5)))
                out = (c, h, w)
            elif kind == "fc":
                o = classes if d["outputs"] == "classes" else int(d["outputs"])
                self.mods[key] = nn.Linear(c * h * w, o, bias=d.get("bias", "1") != "0")
                out = (o, 1, 1)
            elif kind == "concat":
                out = (sum(shapes[i][0] for i in ins), h, w)
            elif kind in ("add",):
                out = (c, h, w)
            elif kind == "gap":
                out = (c, 1, 1)
            elif kind == "flatten":
                out = (c * h * w, 1, 1)
            elif kind == "softmax":
                out = (c, 1, 1)
            else:
                raise ValueError(f"{path}: unknown layer type {kind}")
            shapes[name] = out
            self.order.append(name)
            self.inputs[name] = ins
            self.kinds[name] = kind
            prev = name

    def forward(self, x, labels):
        vals = {"data": x}
        for name in self.order:
            kind, ins = self.kinds[name], self.inputs[name]
            a = vals[ins[0]]
            key = name.replace(".", "_")
            if kind in ("conv", "maxpool", "avgpool", "relu", "lrn", "batchnorm", "dropout"):
                y = self.mods[key](a)
            elif kind == "fc":
                y = self.mods[key](a.flatten(1))
            elif kind == "concat":
                y = torch.cat([vals[i] for i in ins], 1)
            elif kind == "add":
                y = sum(vals[i] for i in ins)
            elif kind == "gap":
                y = F.adaptive_avg_pool2d(a, 1)
            elif kind == "flatten":
                y = a.flatten(1)
            elif kind == "softmax":
                return F.cross_entropy(a.flatten(1), labels)
            vals[name] = y
        raise ValueError("the model has no softmax layer")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--input", required=True)
    ap.add_argument("--classes", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--autocast", choices=["bf16"], default=None)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    shape = tuple(int(v) for v in a.input.split("x"))
    net = CfgNet(a.model, shape, a.classes)
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(a.batch, *shape)
    y = torch.randint(0, a.classes, (a.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        if a.autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = net(x, y)
        else:
            loss = net(x, y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    dt = time.perf_counter() - t0
    print(json.dumps({"images_per_sec": a.batch * a.steps / dt, "seconds": dt, "steps": a.steps,
                      "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "mkldnn": torch.backends.mkldnn.is_available(), "autocast": a.autocast or "none"}))


if __name__ == "__main__":
    main()
