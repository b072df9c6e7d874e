#!/usr/bin/env python3
"""Writes the PyTorch reference for the runtime tests: allops.cfg (a net using every layer type)
and allops.bin (its inputs, parameters, step-0 outputs and gradients, and 3 SGD steps).

Needs PyTorch (Debian: python3-torch). Run from anywhere: python3 tests/reference/make_reference.py
The output is deterministic; README.md documents the binary format and the names in it.
After writing, the script reads the file back and checks the step-0 forward pass against a
float64 numpy recomputation written independently of torch.nn.
"""
import os
import struct

import torch
import torch.nn.functional as F

from vdnnref import F32, I32, U64, Writer

HERE = os.path.dirname(os.path.abspath(__file__))

NAME = "allops"
BATCH = 4
INPUT = (3, 12, 12)
CLASSES = 5
STEPS = 3
LR, MOMENTUM, WEIGHT_DECAY = 0.1, 0.9, 5e-4
DROPOUT_SEED = 1000  # step t uses seed DROPOUT_SEED + t
TORCH_SEED = 20240601


def f32(v):
    """The value a C float holds for v (the runtime stores layer parameters as float)."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


# The net, in model-file order. Every layer names its input(s) explicitly.
LAYERS = [
    ("conv1", "conv", ["data"], dict(filters=8, size=3, stride=1, pad=1, groups=1, bias=1)),
    ("bn1", "batchnorm", ["conv1"], dict(eps="0.001", momentum="0.2")),
    # maxpool before relu: batchnorm outputs have no ties, so the arg-max is unambiguous
    ("pool1", "maxpool", ["bn1"], dict(size=2, stride=2, pad=0)),
    ("relu1", "relu", ["pool1"], {}),
    ("conv2", "conv", ["relu1"], dict(filters=8, size=3, stride=1, pad=1, groups=4, bias=0)),
    ("relu2", "relu", ["conv2"], {}),
    ("res", "add", ["relu2", "relu1"], {}),
    ("b1", "conv", ["res"], dict(filters=6, size=3, stride=2, pad=1, groups=2, bias=1)),
    ("b2", "avgpool", ["res"], dict(size=3, stride=2, pad=1)),
    ("lrn", "lrn", ["b2"], dict(size=3, alpha="0.5", beta="0.75", k="2")),
    ("cat", "concat", ["b1", "lrn"], {}),
    ("drop", "dropout", ["cat"], dict(p="0.25")),
    ("gap", "gap", ["drop"], {}),
    ("flat", "flatten", ["drop"], {}),
    ("head", "concat", ["gap", "flat"], {}),
    ("fc", "fc", ["head"], dict(outputs="classes", bias=1)),
    ("loss", "softmax", ["fc"], {}),
]


def write_cfg(path):
    lines = ["# Written by make_reference.py: a small net that uses every layer type.",
             "[net]", f"name={NAME}", "input={}x{}x{}".format(*INPUT), f"classes={CLASSES}"]
    for name, kind, inputs, params in LAYERS:
        lines += ["", f"[{name}]", f"type={kind}", "input=" + ",".join(inputs)]
        lines += [f"{k}={v}" for k, v in params.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


# ---- the dropout mask, ported from vdnn_dropout_keep in src/backend/backend.h ----
M64 = (1 << 64) - 1


def mix64(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def dropout_keep(seed, i, p):
    r = mix64((seed ^ mix64(i)) & M64)
    u = (r >> 11) * (1.0 / 9007199254740992.0)  # exact in a double, as in C
    return u >= f32(p)  # C compares against (double)p with p a float


# Values printed by a C program calling vdnn_mix64 / vdnn_dropout_keep, so a drift in the port is caught.
assert mix64(0) == 16294208416658607535
assert mix64(12345) == 2454886589211414944
assert mix64(1000 ^ mix64(7)) == 6785964006689842358
assert "".join("1" if dropout_keep(1000, i, 0.25) else "0" for i in range(40)) == \
    "1101011111110010011101110101010100111111"


def dropout_mask(seed, shape, p):
    n = 1
    for d in shape:
        n *= d
    keep = [1.0 if dropout_keep(seed, i, p) else 0.0 for i in range(n)]
    return torch.tensor(keep, dtype=torch.float32).view(shape)


# ---- the net in PyTorch ----
def build():
    mods = {}
    chans = {"data": INPUT[0]}
    flat = {"data": INPUT[0] * INPUT[1] * INPUT[2]}
    hw = {"data": INPUT[1:]}
    for name, kind, inputs, p in LAYERS:
        c, (h, w) = chans[inputs[0]], hw[inputs[0]]
        if kind == "conv":
            mods[name] = torch.nn.Conv2d(c, p["filters"], p["size"], p["stride"], p["pad"], groups=p["groups"],
                                         bias=bool(p["bias"]))
            c = p["filters"]
            h = (h + 2 * p["pad"] - p["size"]) // p["stride"] + 1
            w = (w + 2 * p["pad"] - p["size"]) // p["stride"] + 1
        elif kind == "batchnorm":
            bn = torch.nn.BatchNorm2d(c, eps=f32(float(p["eps"])), momentum=f32(float(p["momentum"])))
            # non-trivial gamma, beta and running statistics, so that a swap or a missed update shows
            with torch.no_grad():
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.5, 0.5)
                bn.running_mean.uniform_(-0.1, 0.1)
                bn.running_var.uniform_(0.5, 1.5)
            mods[name] = bn
        elif kind in ("maxpool", "avgpool"):
            h = (h + 2 * p["pad"] - p["size"]) // p["stride"] + 1
            w = (w + 2 * p["pad"] - p["size"]) // p["stride"] + 1
        elif kind == "concat":
            c = sum(chans[i] for i in inputs)
        elif kind in ("gap",):
            h = w = 1
        elif kind == "flatten":
            c, h, w = flat[inputs[0]], 1, 1
        elif kind == "fc":
            mods[name] = torch.nn.Linear(flat[inputs[0]], CLASSES, bias=bool(p["bias"]))
            c, h, w = CLASSES, 1, 1
        chans[name], hw[name], flat[name] = c, (h, w), c * h * w
    return mods


def forward(mods, x, labels, step):
    """Runs the net in training mode; returns every layer's output (NCHW) and the mean loss."""
    out = {"data": x}
    for name, kind, inputs, p in LAYERS:
        xs = [out[i] for i in inputs]
        a = xs[0]
        if kind in ("conv", "batchnorm"):
            y = mods[name](a)
        elif kind == "maxpool":
            y = F.max_pool2d(a, p["size"], p["stride"], p["pad"])
        elif kind == "avgpool":
            y = F.avg_pool2d(a, p["size"], p["stride"], p["pad"], count_include_pad=True)
        elif kind == "relu":
            y = F.relu(a)
        elif kind == "lrn":
            y = F.local_response_norm(a, p["size"], alpha=f32(float(p["alpha"])), beta=f32(float(p["beta"])),
                                      k=f32(float(p["k"])))
        elif kind == "concat":
            y = torch.cat(xs, 1)
        elif kind == "add":
            y = xs[0] + xs[1]
        elif kind == "dropout":
            pr = f32(float(p["p"]))
            y = a * dropout_mask(DROPOUT_SEED + step, tuple(a.shape), pr) / f32(1.0 - pr)
        elif kind == "gap":
            y = a.mean((2, 3), keepdim=True)
        elif kind == "flatten":
            y = a.reshape(a.shape[0], -1, 1, 1)
        elif kind == "fc":
            y = mods[name](a.reshape(a.shape[0], -1)).reshape(a.shape[0], -1, 1, 1)
        elif kind == "softmax":
            logits = a.reshape(a.shape[0], -1)
            loss = F.cross_entropy(logits, labels)
            y = F.softmax(logits, 1).reshape(a.shape)
        else:
            raise ValueError(kind)
        if y.requires_grad and kind != "softmax":
            y.retain_grad()
        out[name] = y
    return out, loss


def param_items(mods):
    """(name, tensor) for every learned parameter, in layer order: weight then bias."""
    for name, kind, _, _ in LAYERS:
        if name in mods:
            m = mods[name]
            yield f"{name}.weight", m.weight
            if m.bias is not None:
                yield f"{name}.bias", m.bias


def stat_items(mods):
    for name, kind, _, _ in LAYERS:
        if kind == "batchnorm":
            yield f"{name}.running_mean", mods[name].running_mean
            yield f"{name}.running_var", mods[name].running_var


# ---- an independent check: read the file back as README.md describes it and redo the ----
# ---- step-0 forward pass in float64 numpy, written out by hand for this net            ----
def read_ref(path):
    import numpy as np
    b = open(path, "rb").read()
    assert b[:8] == b"VDNNREF1"
    (n,), o, d = struct.unpack_from("<I", b, 8), 12, {}
    for _ in range(n):
        (ln,) = struct.unpack_from("<I", b, o)
        name = b[o + 4:o + 4 + ln].decode("ascii")
        o += 4 + ln
        dtype, nd = struct.unpack_from("<II", b, o)
        shape = struct.unpack_from(f"<{nd}I", b, o + 8)
        o += 8 + 4 * nd
        npt = np.dtype({F32: "<f4", I32: "<i4", U64: "<u8"}[dtype])
        cnt = int(np.prod(shape))
        d[name] = np.frombuffer(b, npt, cnt, o).reshape(shape)
        o += cnt * npt.itemsize
    assert o == len(b)
    return d


def verify(path):
    import numpy as np
    r = read_ref(path)
    g = {k: v.astype(np.float64) for k, v in r.items() if v.dtype == np.float32}

    def check(what, got):
        want = g[what]
        err = np.max(np.abs(got - want))
        assert err <= 1e-5 * (1 + np.max(np.abs(want))), f"{what}: off by {err}"

    def conv(x, w, b, s, p, groups):
        n, _, h, wd = x.shape
        f, cg, kh, kw = w.shape
        xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
        ho, wo = (h + 2 * p - kh) // s + 1, (wd + 2 * p - kw) // s + 1
        y = np.zeros((n, f, ho, wo))
        for o in range(f):
            gi = o // (f // groups)
            for i in range(ho):
                for j in range(wo):
                    win = xp[:, gi * cg:(gi + 1) * cg, i * s:i * s + kh, j * s:j * s + kw]
                    y[:, o, i, j] = np.sum(win * w[o], axis=(1, 2, 3))
            if b is not None:
                y[:, o] += b[o]
        return y

    x = conv(g["data.out"], g["conv1.weight"], g["conv1.bias"], 1, 1, 1)
    check("conv1.out", x)
    m, v = x.mean((0, 2, 3)), x.var((0, 2, 3))
    check("bn1.batch_mean", m)
    check("bn1.batch_var", v)
    c = lambda a: a[None, :, None, None]
    bn = (x - c(m)) / np.sqrt(c(v) + f32(0.001)) * c(g["bn1.weight"]) + c(g["bn1.bias"])
    check("bn1.out", bn)
    mo, cnt = f32(0.2), x.shape[0] * x.shape[2] * x.shape[3]
    check("step0.bn1.running_mean", (1 - mo) * g["bn1.running_mean"] + mo * m)
    check("step0.bn1.running_var", (1 - mo) * g["bn1.running_var"] + mo * v * cnt / (cnt - 1))
    pool = bn.reshape(4, 8, 6, 2, 6, 2).max((3, 5))
    check("pool1.out", pool)
    r1 = np.maximum(pool, 0)
    res = np.maximum(conv(r1, g["conv2.weight"], None, 1, 1, 4), 0) + r1
    check("res.out", res)
    check("b1.out", conv(res, g["b1.weight"], g["b1.bias"], 2, 1, 2))
    rp = np.pad(res, ((0, 0), (0, 0), (1, 1), (1, 1)))
    avg = np.zeros((4, 8, 3, 3))
    for i in range(3):
        for j in range(3):
            avg[:, :, i, j] = rp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].sum((2, 3)) / 9
    check("b2.out", avg)
    sq = np.pad(avg ** 2, ((0, 0), (1, 1), (0, 0), (0, 0)))
    check("lrn.out", avg / (2 + 0.5 / 3 * (sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:])) ** 0.75)
    keep = np.array([dropout_keep(int(r["meta.dropout_seed"][0]), i, 0.25) for i in range(4 * 14 * 9)])
    assert (keep.reshape(4, 14, 3, 3) == (r["drop.mask"][0] == 1)).all()
    drop = np.concatenate([g["b1.out"], g["lrn.out"]], 1) * keep.reshape(4, 14, 3, 3) / 0.75
    check("drop.out", drop)
    head = np.concatenate([drop.mean((2, 3)), drop.reshape(4, -1)], 1)
    logits = head @ g["fc.weight"].T + g["fc.bias"]
    check("fc.out", logits.reshape(4, 5, 1, 1))
    prob = np.exp(logits - logits.max(1, keepdims=True))
    prob /= prob.sum(1, keepdims=True)
    check("loss.out", prob.reshape(4, 5, 1, 1))
    rows = np.arange(4)
    check("loss.value", np.array([-np.log(prob[rows, r["labels"]]).mean()]))
    dlogits = prob.copy()
    dlogits[rows, r["labels"]] -= 1
    dlogits /= 4
    check("fc.out.grad", dlogits.reshape(4, 5, 1, 1))
    check("fc.weight.grad", dlogits.T @ head)
    check("fc.bias.grad", dlogits.sum(0))


def main():
    torch.manual_seed(TORCH_SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    write_cfg(os.path.join(HERE, f"{NAME}.cfg"))

    mods = build()
    x = torch.randn(BATCH, *INPUT).requires_grad_(True)
    labels = torch.randint(0, CLASSES, (BATCH,))
    params = [t for _, t in param_items(mods)]
    opt = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)

    w = Writer()
    w.add("meta.batch", [BATCH], I32)
    w.add("meta.steps", [STEPS], I32)
    w.add("meta.sgd", [LR, MOMENTUM, WEIGHT_DECAY])
    w.add("meta.dropout_seed", [DROPOUT_SEED + t for t in range(STEPS)], U64)
    w.add("data.out", x)
    w.add("labels", labels, I32)
    for name, t in param_items(mods):
        w.add(name, t)
    for name, t in stat_items(mods):
        w.add(name, t)

    losses, masks = [], {}
    for step in range(STEPS):
        opt.zero_grad()
        out, loss = forward(mods, x, labels, step)
        loss.backward()
        losses.append(loss.item())
        if step == 0:
            for name, kind, inputs, p in LAYERS:
                w.add(f"{name}.out", out[name])
                if kind == "batchnorm":
                    a = out[inputs[0]]
                    w.add(f"{name}.batch_mean", a.mean((0, 2, 3)))
                    w.add(f"{name}.batch_var", a.var((0, 2, 3), unbiased=False))
            w.add("loss.value", [loss.item()])
            for name, kind, _, _ in LAYERS:
                if kind != "softmax":
                    w.add(f"{name}.out.grad", out[name].grad)
            w.add("data.out.grad", x.grad)
            for name, t in param_items(mods):
                w.add(f"{name}.grad", t.grad)
            for name, t in stat_items(mods):
                w.add(f"step0.{name}", t)
        for name, kind, _, p in LAYERS:
            if kind == "dropout":
                masks.setdefault(name, []).append(dropout_mask(DROPOUT_SEED + step, tuple(out[name].shape), f32(float(p["p"]))))
        opt.step()

    w.add("train.loss", losses)
    for name, m in masks.items():
        w.add(f"{name}.mask", torch.stack(m))
    for name, t in param_items(mods):
        w.add(f"final.{name}", t)
        w.add(f"final.{name}.momentum", opt.state[t]["momentum_buffer"])
    for name, t in stat_items(mods):
        w.add(f"final.{name}", t)
    w.write(os.path.join(HERE, f"{NAME}.bin"))
    verify(os.path.join(HERE, f"{NAME}.bin"))
    print(f"{NAME}: {len(w.arrays)} arrays, losses " + ", ".join(f"{v:.6f}" for v in losses))


if __name__ == "__main__":
    main()
