#!/usr/bin/env python3
"""Exports torchvision's resnet18, resnet50, vgg16, googlenet, mobilenet_v2 and mobilenet_v3_small to ONNX with
random weights from a fixed seed, each with PyTorch's reference for test_torchvision: the eval-mode logits of a
fixed batch and the parameters after one plain SGD step on it. The files are too large to commit (vgg16 alone is
553 MB), so the test runs this script into the build directory; a net whose files are there from the same
script and PyTorch is not written again.

    /usr/bin/python3 tests/data/onnx/make_torchvision.py OUT_DIR [NET...]     (default: all six)

Needs Debian's python3-torch, python3-torchvision and python3-onnx (the system interpreter); exits 77, saying
so, when they are missing. Per net, OUT_DIR gets NET.onnx, NET.ref (the VDNNREF1 format of
tests/reference/README.md) and NET.stamp:

    input        f32 [N, 3, H, W]  the batch
    labels       i32 [N]           its classes
    meta.lr      f32 [1]           the SGD step's learning rate (no momentum, no weight decay)
    meta.kink_margin f32 [1]       how close the step's forward comes to an activation's kink (see pick_batch)
    logits       f32 [N, 1000]     eval mode (running statistics), from the exported parameters
    logits64     f32 [N, 1000]     the same in float64
    step.loss    f32 [1]           the step's mean cross-entropy (training mode, dropout off)
    step.NAME    f32               initializer NAME after the step; for a BatchNormalization's running mean,
                                   its running mean then its running variance after the step's forward (vdnn's
                                   statistics layout)
    step64.loss, step64.NAME       the same step in float64 from the same float32 start, as float32: for a
                                   parameter its update (after - before), for statistics their values. How far
                                   PyTorch's own float32 results are from the float64 ones measures how well
                                   float32 can do on this net at all

Exports are training-mode (BatchNormalization and Dropout kept, as vdnn trains them), opset 13, batch symbolic.
Batch-norm statistics are first calibrated on random images, so that eval-mode logits are of the size a
trained net's are. Dropout is off for the step (vdnn's masks come from its own generator); googlenet is built
without its auxiliary classifiers (eval mode does not run them; transform_input is off, as without pretrained
weights). vgg16 runs at 224x224: its AdaptiveAvgPool2d((7, 7)) exports only where 7 divides the feature map.
"""
import copy
import hashlib
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import onnx
    import torch
    import torch.nn.functional as F
    import torchvision
    from torch.overrides import TorchFunctionMode

    sys.path.insert(0, os.path.join(HERE, "..", "..", "reference"))
    import make_models
    import vdnnref
    from vdnnref import I32, Writer
except ImportError as e:
    print("make_torchvision.py: %s (install Debian's python3-torch, python3-torchvision and python3-onnx and run "
          "with the system interpreter)" % e, file=sys.stderr)
    sys.exit(77)

BATCH = 2
LR = 0.1
MARGIN = 1e-6
# Constructor, input side, and how many batches pick_batch may draw (vgg16's float64 forward takes seconds, and
# without batch norm its float32 forward rounds less).
NETS = {
    "resnet18": (lambda: torchvision.models.resnet18(), 64, 16),
    "resnet50": (lambda: torchvision.models.resnet50(), 64, 16),
    "vgg16": (lambda: torchvision.models.vgg16(), 224, 1),
    "googlenet": (lambda: torchvision.models.googlenet(aux_logits=False, init_weights=True), 64, 16),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(), 64, 16),
    "mobilenet_v3_small": (lambda: torchvision.models.mobilenet_v3_small(), 64, 16),
}


def stamp():
    """What the files depend on: these scripts and the installed PyTorch and torchvision."""
    h = hashlib.sha256()
    for f in (__file__, make_models.__file__, vdnnref.__file__):
        with open(f, "rb") as fh:
            h.update(fh.read())
    h.update((torch.__version__ + torchvision.__version__).encode())
    return h.hexdigest()


def state_arrays(module, graph):
    """The module's parameters by initializer name, and each BatchNormalization's running mean then running
    variance (vdnn's statistics layout) under its running mean's name."""
    state = module.state_dict()
    out, var_names = {}, set()
    for node in graph.node:
        if node.op_type == "BatchNormalization":
            mean, var = node.input[3], node.input[4]
            out[mean] = torch.cat([state[mean], state[var]])
            var_names.add(var)
    for t in graph.initializer:
        if t.name in state and t.name not in out and t.name not in var_names and "num_batches_tracked" not in t.name:
            out[t.name] = state[t.name]
    return out


def sgd_step(net, x, labels):
    """One plain SGD step in training mode, dropout off; the loss."""
    for m in net.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    loss = torch.nn.functional.cross_entropy(net(x), labels)
    loss.backward()
    opt.step()
    return loss.detach().reshape(1)


# Activations with kinks, where they are: an input within float32 rounding of a kink lands on either side depending
# on summation order, and a value on the other side changes the gradient of every layer below it by percents.
KINKS = {F.relu: (0.0,), torch.relu: (0.0,), torch.relu_: (0.0,), F.hardswish: (-3.0, 3.0),
         F.hardsigmoid: (-3.0, 3.0), F.hardtanh: None}


class KinkMargin(TorchFunctionMode):
    """The smallest distance of an activation's input from one of its kinks, over everything a forward pass runs."""

    def __init__(self):
        super().__init__()
        self.margin = math.inf

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in KINKS:
            kinks = KINKS[func] or (kwargs.get("min_val", args[1] if len(args) > 1 else -1.0),
                                    kwargs.get("max_val", args[2] if len(args) > 2 else 1.0))
            for k in kinks:
                self.margin = min(self.margin, (args[0].detach() - k).abs().min().item())
        return func(*args, **kwargs)


def pick_batch(net, side, seed, tries):
    """A batch whose training-mode forward (float64) keeps every activation input at least MARGIN from its kinks,
    from up to `tries` draws (else the draw that comes closest): then rounding in PyTorch or vdnn does not decide
    which side of a kink a value is on. Deep nets may have no such batch (resnet50's float32 forward is noisier
    than that anyway); the test's tolerances follow from PyTorch's own float32 error there."""
    exact = copy.deepcopy(net).double().train()
    best = None
    for attempt in range(tries):
        g = torch.Generator().manual_seed(seed * 1000 + attempt)
        x = torch.randn(BATCH, 3, side, side, generator=g)
        labels = torch.randint(0, 1000, (BATCH,), generator=g)
        mode = KinkMargin()
        with mode, torch.no_grad():
            exact(x.double())
        if best is None or mode.margin > best[2]:
            best = (x, labels, mode.margin)
        if mode.margin >= MARGIN:
            break
    return best


def make(name, out_dir):
    ctor, side, tries = NETS[name]
    torch.manual_seed(20240700 + sorted(NETS).index(name))
    net = ctor()
    make_models.calibrate(net, (3, side, side))
    data = make_models.export(net, torch.randn(BATCH, 3, side, side), name + ".onnx", training=True, dynamic=True,
                              output="logits", out_dir=out_dir)
    make_models.load_initializers(net, data)
    graph = onnx.load_from_string(data).graph
    x, labels, margin = pick_batch(net, side, 20240700 + sorted(NETS).index(name), tries)
    w = Writer()
    w.add("input", x)
    w.add("labels", labels, I32)
    w.add("meta.lr", torch.tensor([LR]))
    w.add("meta.kink_margin", torch.tensor([margin]))
    net.eval()
    exact = copy.deepcopy(net).double()
    with torch.no_grad():
        w.add("logits", net(x))
        w.add("logits64", exact(x.double()))
    start = {k: v.double() for k, v in state_arrays(net, graph).items()}
    w.add("step.loss", sgd_step(net, x, labels))
    w.add("step64.loss", sgd_step(exact, x.double(), labels))
    for key, t in state_arrays(net, graph).items():
        w.add("step." + key, t)
    for key, t in state_arrays(exact, graph).items():
        w.add("step64." + key, t if key in bn_stats(graph) else t - start[key])
    w.write(os.path.join(out_dir, name + ".ref"))


def bn_stats(graph):
    return {node.input[3] for node in graph.node if node.op_type == "BatchNormalization"}


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: make_torchvision.py OUT_DIR [NET...] (nets: %s)" % ", ".join(NETS))
    out_dir, names = sys.argv[1], sys.argv[2:] or list(NETS)
    for name in names:
        if name not in NETS:
            sys.exit("make_torchvision.py: no net '%s' (nets: %s)" % (name, ", ".join(NETS)))
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    want = stamp()
    for name in names:
        path = os.path.join(out_dir, name + ".stamp")
        if os.path.exists(path) and open(path).read() == want:
            continue
        make(name, out_dir)
        with open(path, "w") as f:
            f.write(want)
        print("make_torchvision.py: wrote %s.onnx and %s.ref" % (name, name), file=sys.stderr)


if __name__ == "__main__":
    main()
