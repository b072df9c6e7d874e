#!/usr/bin/env python3
"""Writes the ONNX test models in this directory (see README.md): two small PyTorch networks exported to ONNX
with their eval-mode reference outputs, hand-built models that each exercise a group of supported ops, and a
corpus of models every one of which vdnn must refuse with a clear error.

Needs Debian's python3-onnx, python3-numpy, python3-torch and python3-torchvision (run with the system
interpreter, e.g. /usr/bin/python3 tests/data/onnx/make_models.py). The output is deterministic: the same bytes
on every run with the same package versions.
"""
import io
import os
import sys

import numpy as np
import onnx
import torch
import torchvision
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
IR_VERSION = 8  # onnx 1.12's; fixed so that the bytes do not follow the installed version


def save(model, name):
    onnx.checker.check_model(model)
    data = model.SerializeToString()
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    return data


def save_raw(data, name, out_dir=HERE):
    with open(os.path.join(out_dir, name), "wb") as f:
        f.write(data)


def values(shape, scale=0.1, offset=0.0):
    """Deterministic values a C test can recompute: element i is offset + scale * ((i % 7) - 3) / 3."""
    n = int(np.prod(shape))
    v = offset + scale * ((np.arange(n) % 7) - 3) / 3.0
    return v.astype(np.float32).reshape(shape)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def model(nodes, inits, inp, out, opset=13, name="g", extra_inputs=(), outputs=None):
    graph = helper.make_graph(nodes, name, [inp, *extra_inputs], outputs or [out], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_models.py")
    m.ir_version = IR_VERSION
    return m


def image(name="x", c=3, h=8, w=8, batch="N"):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [batch, c, h, w])


def logits(name="y", k=5):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", k])


def head(src, features, k=5, prefix="fc"):
    """Flatten -> Gemm(transB=1) to k classes; the Gemm writes 'y'."""
    nodes = [helper.make_node("Flatten", [src], [prefix + "_flat"], name=prefix + "_flatten", axis=1),
             helper.make_node("Gemm", [prefix + "_flat", prefix + ".w", prefix + ".b"], ["y"], name=prefix,
                              transB=1)]
    inits = [init(prefix + ".w", values((k, features), 0.2)), init(prefix + ".b", values((k,), 0.05))]
    return nodes, inits


# ---- supported ops, one model per group ----

def conv_model():
    """Conv with bias, a 3x1 kernel, stride 2x1, pads 1x0; a grouped 1x1 Conv without bias; Relu; GAP; head."""
    nodes = [
        helper.make_node("Conv", ["x", "c1.w", "c1.b"], ["c1"], name="c1", kernel_shape=[3, 1], strides=[2, 1],
                         pads=[1, 0, 1, 0]),
        helper.make_node("Conv", ["c1", "c2.w"], ["c2"], name="c2", group=2),
        helper.make_node("Relu", ["c2"], ["r"], name="r"),
        helper.make_node("GlobalAveragePool", ["r"], ["gap"], name="gap"),
    ]
    inits = [init("c1.w", values((6, 3, 3, 1), 0.3)), init("c1.b", values((6,), 0.1, 0.5)),
             init("c2.w", values((4, 3, 1, 1), 0.4))]
    n2, i2 = head("gap", 4)
    return model(nodes + n2, inits + i2, image(), logits(), name="conv")


def pool_model():
    """MaxPool 3 s2 p1; AveragePool 3 s1 p1 counting padding; AveragePool 2 s2; ReduceMean(H, W) without kept
    dims; Gemm; a final Softmax that vdnn drops."""
    nodes = [
        helper.make_node("MaxPool", ["x"], ["mp"], name="mp", kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["mp"], ["ap"], name="ap", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         count_include_pad=1),
        helper.make_node("AveragePool", ["ap"], ["ap2"], name="ap2", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("ReduceMean", ["ap2"], ["mean"], name="mean", axes=[-1, 2], keepdims=0),
        helper.make_node("Gemm", ["mean", "fc.w"], ["z"], name="fc", transB=1),
        helper.make_node("Softmax", ["z"], ["y"], name="prob", axis=1),
    ]
    inits = [init("fc.w", values((5, 3), 0.2))]
    return model(nodes, inits, image(), logits(), name="pool")


def bn_model():
    """Opset 10: BatchNormalization (epsilon, momentum), LRN, Dropout with its ratio attribute, Flatten, and
    MatMul + Add as one fc layer."""
    c = 3
    nodes = [
        helper.make_node("BatchNormalization", ["x", "bn.s", "bn.b", "bn.m", "bn.v"], ["bn"], name="bn",
                         epsilon=1e-3, momentum=0.8),
        helper.make_node("LRN", ["bn"], ["lrn"], name="lrn", size=3, alpha=0.5, beta=0.75, bias=2.0),
        helper.make_node("Dropout", ["lrn"], ["drop"], name="drop", ratio=0.25),
        helper.make_node("Flatten", ["drop"], ["flat"], name="flat"),
        helper.make_node("MatMul", ["flat", "mm.w"], ["mm"], name="mm"),
        helper.make_node("Add", ["mm", "mm.b"], ["y"], name="bias"),
    ]
    inits = [init("bn.s", values((c,), 0.2, 1.0)), init("bn.b", values((c,), 0.1)),
             init("bn.m", values((c,), 0.05, 0.01)), init("bn.v", values((c,), 0.2, 1.5)),
             init("mm.w", values((c * 4 * 4, 5), 0.3)), init("mm.b", values((5,), 0.1))]
    return model(nodes, inits, image(h=4, w=4), logits(), opset=10, name="bn")


def names_model():
    """Opset 13: Concat of two Conv branches, Add of a third, Identity, Reshape to (0, -1), Dropout with its
    ratio as an input; node names that are empty, clash, use '/', say 'data' or are too long."""
    long = "/stage" + "/very_long_module_name" * 4 + "/Conv"
    nodes = [
        helper.make_node("Conv", ["x", "a.w"], ["a"], name="/branch/Conv"),
        helper.make_node("Conv", ["x", "b.w"], ["b"], name=""),
        helper.make_node("Concat", ["a", "b"], ["cat"], name="/branch/Conv", axis=1),
        helper.make_node("Conv", ["x", "c.w"], ["c"], name=long),
        helper.make_node("Add", ["cat", "c"], ["sum"], name="data"),
        helper.make_node("Identity", ["sum"], ["same"], name="id"),
        helper.make_node("Reshape", ["same", "shape"], ["rows"], name="rows"),
        helper.make_node("Dropout", ["rows", "ratio"], ["drop"], name=""),
        helper.make_node("Gemm", ["drop", "fc.w", "fc.b"], ["y"], name="fc", transB=1),
    ]
    inits = [init("a.w", values((2, 3, 1, 1))), init("b.w", values((2, 3, 1, 1), 0.2)),
             init("c.w", values((4, 3, 1, 1), 0.3)), init("shape", np.array([0, -1], np.int64)),
             init("ratio", np.array(0.1, np.float32)), init("fc.w", values((5, 4 * 8 * 8), 0.05)),
             init("fc.b", values((5,), 0.1))]
    return model(nodes, inits, image(), logits(), name="names")


def act_model():
    """Opset 14: Sigmoid, HardSigmoid, HardSwish, Clip as ReLU6 (bounds as initializers) and with other bounds (a
    Constant node), Clip(0) alone (a ReLU), x * Sigmoid(x) (SiLU), HardSigmoid(x) * x (hard-swish), and a
    squeeze-and-excitation block: GlobalAveragePool, a 1x1 Conv, Sigmoid, and the maps times the gate."""
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["sig"], name="sig"),
        helper.make_node("HardSigmoid", ["sig"], ["hsig"], name="hsig", alpha=0.25, beta=0.4),
        helper.make_node("HardSwish", ["hsig"], ["hswish"], name="hswish"),
        helper.make_node("Clip", ["hswish", "zero", "six"], ["relu6"], name="relu6"),
        helper.make_node("Constant", [], ["lo"], name="lo", value=init("lo_value", np.array(-0.5, np.float32))),
        helper.make_node("Clip", ["relu6", "lo", "hi"], ["clip"], name="clip"),
        helper.make_node("Clip", ["clip", "zero"], ["clip0"], name="clip0"),
        helper.make_node("Sigmoid", ["clip0"], ["silu_gate"], name="silu_sigmoid"),
        helper.make_node("Mul", ["clip0", "silu_gate"], ["silu"], name="silu_mul"),
        helper.make_node("HardSigmoid", ["silu"], ["hs_gate"], name="hs_gate", alpha=1.0 / 6),
        helper.make_node("Mul", ["hs_gate", "silu"], ["hs"], name="hs_mul"),
        helper.make_node("GlobalAveragePool", ["hs"], ["se_pool"], name="se_pool"),
        helper.make_node("Conv", ["se_pool", "se.w", "se.b"], ["se_fc"], name="se_conv"),
        helper.make_node("Sigmoid", ["se_fc"], ["se_gate"], name="se_gate"),
        helper.make_node("Mul", ["hs", "se_gate"], ["se"], name="se_mul"),
        helper.make_node("GlobalAveragePool", ["se"], ["gap"], name="gap"),
    ]
    inits = [init("zero", np.array(0, np.float32)), init("six", np.array(6, np.float32)),
             init("hi", np.array(0.75, np.float32)), init("se.w", values((3, 3, 1, 1), 0.5)),
             init("se.b", values((3,), 0.1))]
    n2, i2 = head("gap", 3)
    return model(nodes + n2, inits + i2, image(), logits(), opset=14, name="act")


def clip10_model():
    """Opset 10: Clip with its bounds as attributes."""
    nodes = [helper.make_node("Clip", ["x"], ["o"], name="clip", min=-1.0, max=2.5),
             helper.make_node("GlobalAveragePool", ["o"], ["g"], name="gap")]
    n2, i2 = head("g", 3)
    return model(nodes + n2, i2, image(), logits(), opset=10, name="clip10")


def pool_ceil_model():
    """On 9x9: MaxPool 3/2 with ceil_mode (4x4), AveragePool 3/2/1 with ceil_mode counting padding (3x3),
    AveragePool 3/1/1 leaving padding out (count_include_pad 0, ONNX's default), AveragePool 2/2 with ceil_mode and
    no pads of its own (2x2)."""
    nodes = [
        helper.make_node("MaxPool", ["x"], ["mp"], name="mp", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        helper.make_node("AveragePool", ["mp"], ["ap"], name="ap", kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1),
        helper.make_node("AveragePool", ["ap"], ["ex"], name="ex", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["ex"], ["ap2"], name="ap2", kernel_shape=[2, 2], strides=[2, 2],
                         ceil_mode=1),
        helper.make_node("GlobalAveragePool", ["ap2"], ["gap"], name="gap"),
    ]
    n2, i2 = head("gap", 3)
    return model(nodes + n2, i2, image(h=9, w=9), logits(), name="pool_ceil")


# ---- PyTorch networks, with eval-mode outputs as the reference ----

def write_reference(name, arrays):
    """Text: per array a line 'name ndim dims...' and then its values, one per line, as %.9g."""
    lines = ["# %s: written by make_models.py (PyTorch %s, eval mode)" % (name, torch.__version__)]
    for key, a in arrays:
        a = np.asarray(a, np.float32)
        lines.append("%s %d %s" % (key, a.ndim, " ".join(str(d) for d in a.shape)))
        lines += ["%.9g" % v for v in a.reshape(-1)]
    with open(os.path.join(HERE, name), "w") as f:
        f.write("\n".join(lines) + "\n")


def load_initializers(module, data):
    """Loads the exported model's initializers back by name: a training-mode export runs the module once,
    which moves batch-norm running statistics, so the reference uses what the file holds."""
    inits = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in onnx.load_from_string(data).graph.initializer}
    state = module.state_dict()
    for key in state:
        if key.endswith("num_batches_tracked"):
            continue
        if key not in inits:
            sys.exit("make_models.py: parameter %s is not an initializer of the export" % key)
        state[key] = inits[key]
    module.load_state_dict(state)


def calibrate(module, image_shape, batches=8):
    """Running statistics from batches of random images (their cumulative average), as training would leave them:
    evaluation then normalizes each channel to about unit variance, and logits stay of order one."""
    bns = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    module.train()
    with torch.no_grad():
        for _ in range(batches):
            module(torch.randn(8, *image_shape))
    for m in bns:
        m.momentum = 0.1


def export(module, x, name, training, dynamic, output, out_dir=HERE):
    f = io.BytesIO()
    kwargs = dict(input_names=["images"], output_names=[output], opset_version=13, do_constant_folding=not training)
    if dynamic:
        kwargs["dynamic_axes"] = {"images": {0: "N"}, output: {0: "N"}}
    if training:
        kwargs["training"] = torch.onnx.TrainingMode.TRAINING
    torch.onnx.export(module, x, f, **kwargs)
    data = f.getvalue()
    save_raw(data, name, out_dir)
    return data


def torch_models():
    class TinyCNN(torch.nn.Module):
        """Conv-BN-ReLU-MaxPool, torchvision's ResNet BasicBlock, a grouped 3x1 conv branch and a padded
        average-pool branch concatenated, global average pooling, Dropout, Linear."""

        def __init__(self):
            super().__init__()
            nn = torch.nn
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.relu = nn.ReLU()
            self.pool = nn.MaxPool2d(2)
            self.block = torchvision.models.resnet.BasicBlock(8, 8)
            self.branch_a = nn.Conv2d(8, 4, (3, 1), stride=2, padding=(1, 0), groups=2)
            self.branch_b = nn.AvgPool2d(3, stride=2, padding=1)
            self.gap = nn.AdaptiveAvgPool2d(1)
            self.drop = nn.Dropout(0.2)
            self.fc = nn.Linear(12, 10)
            for m in self.modules():  # not 1 and 0, so that a parameter that is not loaded shows
                if isinstance(m, nn.BatchNorm2d):
                    with torch.no_grad():
                        m.weight.uniform_(0.5, 1.5)
                        m.bias.uniform_(-0.5, 0.5)
                        m.running_mean.uniform_(-0.2, 0.2)
                        m.running_var.uniform_(0.5, 1.5)

        def forward(self, x):
            x = self.pool(self.relu(self.bn1(self.conv1(x))))
            x = self.block(x)
            x = torch.cat([self.branch_a(x), self.branch_b(x)], 1)
            x = torch.flatten(self.gap(x), 1)
            return self.fc(self.drop(x))

    class TinyMLP(torch.nn.Module):
        """Conv, a reshape to (N, -1), x @ W + b (MatMul + Add), Linear, and a final softmax; fixed batch."""

        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 4, 3)
            self.w1 = torch.nn.Parameter(torch.randn(64, 16) * 0.1)
            self.b1 = torch.nn.Parameter(torch.randn(16) * 0.1)
            self.fc = torch.nn.Linear(16, 5)

        def forward(self, x):
            x = torch.relu(self.conv(x))
            x = x.reshape(x.shape[0], -1)
            x = torch.relu(x @ self.w1 + self.b1)
            return torch.softmax(self.fc(x), 1)

    class TinySE(torch.nn.Module):
        """Conv-BN-Hardswish, MaxPool(3, 2, ceil_mode) (8x8 where floor gives 7x7), torchvision's
        SqueezeExcitation with a Hardsigmoid gate, Conv-SiLU, Conv-ReLU6, AvgPool2d(3, 2, 1, ceil_mode) leaving
        padding out, SqueezeExcitation with a Sigmoid gate, AvgPool2d(2, 2, ceil_mode) (3x3 where floor gives
        2x2), Flatten, Linear. Opset 13, so Hardswish and SiLU come as x * HardSigmoid(x) and x * Sigmoid(x)."""

        def __init__(self):
            super().__init__()
            nn = torch.nn
            se = torchvision.ops.SqueezeExcitation
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
            self.pool = nn.MaxPool2d(3, 2, ceil_mode=True)
            self.se1 = se(8, 4, scale_activation=nn.Hardsigmoid)
            self.conv2 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.SiLU())
            self.conv3 = nn.Sequential(nn.Conv2d(8, 8, 1), nn.ReLU6())
            self.avg = nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False)
            self.se2 = se(8, 2)
            self.avg2 = nn.AvgPool2d(2, 2, ceil_mode=True)
            self.fc = nn.Linear(8 * 3 * 3, 10)

        def forward(self, x):
            x = self.se1(self.pool(self.stem(x)))
            x = self.avg(self.conv3(self.conv2(x)))
            x = self.avg2(self.se2(x))
            return self.fc(torch.flatten(x, 1))

    torch.manual_seed(20240615)
    cnn = TinyCNN()
    data = export(cnn, torch.randn(1, 3, 16, 16), "tiny_cnn.onnx", training=True, dynamic=True, output="logits")
    load_initializers(cnn, data)
    cnn.eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        write_reference("tiny_cnn.ref", [("input", x), ("logits", cnn(x)), ("conv1.weight", cnn.conv1.weight),
                                         ("block.bn2.running_mean", cnn.block.bn2.running_mean),
                                         ("block.bn2.running_var", cnn.block.bn2.running_var),
                                         ("fc.bias", cnn.fc.bias)])

    mlp = TinyMLP().eval()
    x = torch.randn(2, 1, 6, 6)
    data = export(mlp, x, "tiny_mlp.onnx", training=False, dynamic=False, output="probs")
    load_initializers(mlp, data)
    with torch.no_grad():
        write_reference("tiny_mlp.ref", [("input", x), ("probs", mlp(x))])

    torch.manual_seed(20240616)
    se = TinySE()
    calibrate(se, (3, 16, 16))
    data = export(se, torch.randn(1, 3, 16, 16), "tiny_se.onnx", training=True, dynamic=True, output="logits")
    load_initializers(se, data)
    se.eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        write_reference("tiny_se.ref", [("input", x), ("logits", se(x))])


# ---- models vdnn must refuse, each for one reason ----

def conv_then_head(**conv_attrs):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", **conv_attrs)]
    n2, i2 = head("c", 4 * 8 * 8)
    return nodes + n2, [init("w", values((4, 3, 3, 3)))] + i2


def one_op(op, attrs=None, inputs=None, inits=(), name="node", k=5):
    """x -> op -> GAP -> head."""
    nodes = [helper.make_node(op, ["x"] + list(inputs or []), ["o"], name=name, **(attrs or {})),
             helper.make_node("GlobalAveragePool", ["o"], ["g"], name="gap")]
    n2, i2 = head("g", 3, k)
    return model(nodes + n2, list(inits) + i2, image(), logits(k=k))


def bad_models():
    bad = {}
    bad["unknown_op"] = one_op("Frobnicate", name="weird")
    bad["domain"] = model([helper.make_node("Relu", ["x"], ["r"], name="ms_relu", domain="com.microsoft"),
                           *head("r", 3 * 8 * 8)[0]], head("r", 3 * 8 * 8)[1], image(), logits())
    bad["domain"].opset_import.append(helper.make_opsetid("com.microsoft", 1))
    nodes, inits = conv_then_head(pads=[1, 1, 1, 1], dilations=[2, 2])
    bad["dilation"] = model(nodes, inits, image(), logits())
    nodes, inits = conv_then_head(pads=[1, 1, 2, 2])
    bad["asym_pads"] = model(nodes, inits, image(), logits())
    nodes, inits = conv_then_head(pads=[1, 1, 1, 1], foo=3)
    bad["conv_attr"] = model(nodes, inits, image(), logits())
    # ceil_mode on 7: ONNX's formula gives 5 windows of 2 at stride 2 with pads 1, the last starting in the padding
    nodes = [helper.make_node("MaxPool", ["x"], ["o"], name="pool", kernel_shape=[2, 2], strides=[2, 2],
                              pads=[1, 1, 1, 1], ceil_mode=1),
             helper.make_node("GlobalAveragePool", ["o"], ["g"], name="gap")]
    n2, i2 = head("g", 3)
    bad["ceil_in_padding"] = model(nodes + n2, i2, image(h=7, w=7), logits())
    # count_include_pad=0 with pads of its own after a Pad, whose zeros would count
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"], name="pad"),
             helper.make_node("AveragePool", ["p"], ["o"], name="avg", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["o"], ["g"], name="gap")]
    bad["avg_pad_exclude"] = model(nodes + n2, [init("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))] + i2,
                                   image(), logits())
    bad["lrn_even"] = one_op("LRN", dict(size=4), name="lrn")
    bad["clip_no_max"] = one_op("Clip", inputs=["lo"], inits=[init("lo", np.array(-1, np.float32))], name="clip")
    # products vdnn has no layer for: two maps of the same shape, a map times a constant
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Mul", ["r", "x"], ["o"], name="product"),
             helper.make_node("GlobalAveragePool", ["o"], ["g"], name="gap")]
    bad["mul_maps"] = model(nodes + n2, i2, image(), logits())
    bad["mul_const"] = one_op("Mul", inputs=["k"], inits=[init("k", values((1, 3, 1, 1)))], name="scale")
    # x * HardSigmoid(x) with ONNX's default alpha 0.2: not hard-swish
    nodes = [helper.make_node("HardSigmoid", ["x"], ["s"], name="gate"),
             helper.make_node("Mul", ["x", "s"], ["o"], name="hswish_mul"),
             helper.make_node("GlobalAveragePool", ["o"], ["g"], name="gap")]
    bad["hardswish_alpha"] = model(nodes + n2, i2, image(), logits())
    # a Reshape whose target shape is computed from the input's shape (a dynamic batch)
    nodes = [helper.make_node("Shape", ["x"], ["shp"], name="shape_of_x"),
             helper.make_node("Gather", ["shp", "zero"], ["n"], name="batch", axis=0),
             helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="n1"),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], name="target", axis=0),
             helper.make_node("Reshape", ["x", "target"], ["rows"], name="rows"),
             helper.make_node("Gemm", ["rows", "fc.w"], ["y"], name="fc", transB=1)]
    inits = [init("zero", np.array(0, np.int64)), init("axes0", np.array([0], np.int64)),
             init("minus1", np.array([-1], np.int64)), init("fc.w", values((5, 3 * 8 * 8)))]
    bad["dynamic_reshape"] = model(nodes, inits, image(), logits())
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"], name="to3d"),
             helper.make_node("Flatten", ["r"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fc.w"], ["y"], name="fc", transB=1)]
    bad["reshape_3d"] = model(nodes, [init("shape", np.array([0, 3, -1], np.int64)),
                                      init("fc.w", values((5, 3 * 8 * 8)))], image(), logits())
    nodes = [helper.make_node("Flatten", ["x"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fc.w"], ["y"], name="fc_t", transB=0)]
    bad["gemm_transb0"] = model(nodes, [init("fc.w", values((3 * 8 * 8, 5)))], image(), logits())
    nodes = [helper.make_node("Flatten", ["x"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fc.w"], ["y"], name="fc", transB=1)]
    bad["gemm_shape"] = model(nodes, [init("fc.w", values((5, 100)))], image(), logits())
    nodes = [helper.make_node("Softmax", ["x"], ["s"], name="early_softmax", axis=1),
             helper.make_node("Flatten", ["s"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fc.w"], ["y"], name="fc", transB=1)]
    bad["softmax_middle"] = model(nodes, [init("fc.w", values((5, 3 * 8 * 8)))], image(), logits())
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "idx"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Cast", ["idx"], ["fidx"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Add", ["p", "fidx"], ["s"], name="sum"),
             helper.make_node("GlobalAveragePool", ["s"], ["g"], name="gap"), *head("g", 3)[0]]
    bad["used_indices"] = model(nodes, head("g", 3)[1], image(), logits())
    nodes = [helper.make_node("Relu", ["x"], ["dead"], name="dead_end"),
             helper.make_node("GlobalAveragePool", ["x"], ["g"], name="gap"), *head("g", 3)[0]]
    bad["dead_node"] = model(nodes, head("g", 3)[1], image(), logits())
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["g"], name="gap"), *head("g", 3)[0],
             helper.make_node("Relu", ["y"], ["y2"], name="second")]
    bad["two_outputs"] = model(nodes, head("g", 3)[1], image(), logits(),
                               outputs=[logits(), logits("y2")])
    bad["two_inputs"] = model([helper.make_node("Add", ["x", "x2"], ["s"], name="sum"),
                               helper.make_node("GlobalAveragePool", ["s"], ["g"], name="gap"), *head("g", 3)[0]],
                              head("g", 3)[1], image(), logits(), extra_inputs=[image("x2")])
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["g"], name="gap"), *head("g", 3)[0]]
    bad["symbolic_hw"] = model(nodes, head("g", 3)[1], helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["N", 3, "H", "W"]), logits())
    bad["opset6"] = model(nodes, head("g", 3)[1], image(), logits(), opset=6)
    bad["opset18"] = model(nodes, head("g", 3)[1], image(), logits(), opset=18)
    ext = model(nodes, head("g", 3)[1], image(), logits())
    w = ext.graph.initializer[0]
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="weights.bin")
    bad["external_data"] = ext
    nograph = onnx.ModelProto(ir_version=IR_VERSION, opset_import=[helper.make_opsetid("", 13)])
    for key, m in sorted(bad.items()):
        save_raw(m.SerializeToString(), "bad_%s.onnx" % key)
    save_raw(nograph.SerializeToString(), "bad_no_graph.onnx")
    good = open(os.path.join(HERE, "conv.onnx"), "rb").read()
    save_raw(good[: len(good) // 2], "bad_truncated.onnx")
    save_raw(b"[net]\nname=not_onnx\n", "bad_not_onnx.onnx")


def main():
    for name, m in [("conv", conv_model()), ("pool", pool_model()), ("bn", bn_model()), ("names", names_model()),
                    ("act", act_model()), ("clip10", clip10_model()), ("pool_ceil", pool_ceil_model())]:
        save(m, name + ".onnx")
    torch_models()
    bad_models()


if __name__ == "__main__":
    main()
