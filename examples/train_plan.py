#!/usr/bin/env python3
"""vdnn from Python: load a model, print its memory plan under a budget, train a few steps on synthetic data
from numpy arrays (examples/train_plan.c in Python).  Run from the repository root after `make`:
    /usr/bin/python3 examples/train_plan.py [MODEL] [BUDGET]
(the package is python/vdnn; it finds build/libvdnn.so, or set VDNN_LIBRARY)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))
import vdnn  # noqa: E402

model = vdnn.Model.load(sys.argv[1] if len(sys.argv) > 1 else "models/lenet.cfg")
cpu = vdnn.Backend("cpu")
# Keep, swap or recompute: whatever fits fastest.
memory = vdnn.MemoryOptions(policy="auto", budget=sys.argv[2] if len(sys.argv) > 2 else "11MiB")
batch = 16
plan = vdnn.plan(model, cpu, batch=batch, options=memory)
print("plan: %s, policy %s, peak %d bytes under a %d byte budget (%s), %d bytes moved per step"
      % (plan.model, plan.policy, plan.peak_device_bytes, plan.budget, "fits" if plan.feasible else "does not fit",
         plan.bytes_moved))
data = vdnn.Dataset("synthetic", "train", model=model, seed=1)
net = vdnn.Net(model, cpu, batch=batch, options=memory)
for step in range(3):
    images = data.images[step * batch:(step + 1) * batch]  # float32 (16, 1, 28, 28): any numpy batch will do
    labels = data.labels[step * batch:(step + 1) * batch]
    print("step %d: loss %.4f" % (step + 1, net.train_step(images, labels, lr=0.05)))
measured = net.stats["peak_device_bytes"]
print("measured peak %d bytes, planned %d" % (measured, plan.peak_device_bytes))
sys.exit(0 if measured == plan.peak_device_bytes else 1)
