#!/usr/bin/env python3
"""The Python half of test_torchvision's export round trip: vdnn imported a torchvision net, trained it a step and
exported it (vdnn_net_export_onnx); this checks the exported file with onnx.checker, loads its initializers into
the torchvision model by name (parameters and batch-norm running statistics), and writes PyTorch's eval-mode
logits on the batch vdnn used, for the test to compare with vdnn's own (vdnn_net_forward).

    /usr/bin/python3 tests/data/onnx/check_torchvision_export.py OUT_DIR NET

Reads OUT_DIR/NET.exported.onnx and OUT_DIR/NET.exported_input.f32 (the batch, raw little-endian float32,
N x 3 x side x side); writes OUT_DIR/NET.exported.ref (VDNNREF1) with `logits` (float32) and `logits64` (the same
net in float64, as float32). Exits 77 without Debian's python3-torch, python3-torchvision and python3-onnx.
"""
import copy
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_torchvision  # exits 77, saying why, without torch, torchvision or onnx

import numpy as np
import onnx
import torch

from make_models import load_initializers
from vdnnref import Writer


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in make_torchvision.NETS:
        sys.exit("usage: check_torchvision_export.py OUT_DIR NET (nets: %s)" % ", ".join(make_torchvision.NETS))
    out_dir, name = sys.argv[1:]
    ctor, side, _ = make_torchvision.NETS[name]
    path = os.path.join(out_dir, name + ".exported.onnx")
    onnx.checker.check_model(path, full_check=True)
    with open(path, "rb") as f:
        data = f.read()
    torch.manual_seed(0)  # the constructor's random weights are all replaced; any seed does
    net = ctor()
    load_initializers(net, data)  # fails naming a parameter the export lacks
    x = torch.from_numpy(np.fromfile(os.path.join(out_dir, name + ".exported_input.f32"), "<f4").copy())
    x = x.reshape(-1, 3, side, side)
    net.eval()
    exact = copy.deepcopy(net).double()
    w = Writer()
    with torch.no_grad():
        w.add("logits", net(x))
        w.add("logits64", exact(x.double()))
    w.write(os.path.join(out_dir, name + ".exported.ref"))


if __name__ == "__main__":
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    main()
