"""vdnn.plan() is `vdnn plan --json`: the same JSON text, and a summary and tensor classes that say the same;
the memory options mirror the C struct and its defaults; the layers are `vdnn info`'s."""
import json

import pytest

import vdnn
from conftest import LENET, ROOT, run_cli

CASES = [  # (model, batch, CLI flags, MemoryOptions fields)
    ("lenet", 16, ["--policy", "auto", "--budget", "11MiB"], dict(policy="auto", budget="11MiB")),
    ("lenet", 32, ["--policy", "all"], dict(policy="all")),
    ("lenet", 8, ["--policy", "none"], dict(policy="none")),
    ("alexnet", 4, ["--policy", "dyn", "--budget", "200MiB"], dict(policy="dyn", budget=200 << 20)),
    ("resnet18", 2, ["--policy", "recompute", "--offload-params"], dict(policy="recompute", offload_params=True)),
    ("vgg16", 2, ["--policy", "pooch", "--budget", "300MiB", "--conv-algo", "lean"],
     dict(policy="pooch", budget="300MiB", conv_algo="lean")),
]


@pytest.mark.parametrize("model,batch,flags,fields", CASES, ids=[c[0] + "-" + c[3]["policy"] for c in CASES])
def test_plan_is_the_commands(model, batch, flags, fields):
    path = "%s/models/%s.cfg" % (ROOT, model)
    p = run_cli("plan", path, "--batch", batch, "--json", *flags, check=False)
    assert p.returncode in (0, 3), p.stderr  # 3: infeasible, still printed
    # The command's default lets planners choose convolution algorithms; the library's keeps the defaults.
    fields = dict(dict(conv_algo="choose"), **fields)
    plan = vdnn.plan(path, batch=batch, **fields)
    assert plan.json() == p.stdout
    want = json.loads(p.stdout)
    s = plan.summary
    for key in ("model", "policy", "feasible", "peak_device_bytes", "avg_device_bytes", "persistent_bytes",
                "host_bytes", "managed_bytes", "bytes_moved", "min_budget_bytes", "offload_params",
                "streamed_layers", "home_bytes", "steps"):
        assert s[key] == want[key], key
    assert plan.feasible == (p.returncode == 0)
    assert "x".join(map(str, s["input"][1:])) == want["input"] and s["input"][0] == want["batch"]
    tensors = plan.tensors
    assert len(tensors) == len(want["tensors"]) == s["tensors"]
    for t, w in zip(tensors, want["tensors"]):
        assert (t.name, t.kind, t.bytes, t.cls) == (w["name"], w["kind"], w["bytes"], w["class"])
    assert plan.classes == {w["name"]: w["class"] for w in want["tensors"]}
    assert plan.table().startswith(run_cli("plan", path, "--batch", batch, *flags, check=False).stdout[:40])


def test_plan_accepts_a_backend_and_options_object(lenet, cpu):
    opts = vdnn.MemoryOptions(policy="auto", budget="11MiB", conv_algo="choose")
    a = vdnn.plan(lenet, cpu, batch=16, options=opts)
    b = vdnn.plan(LENET, batch=16, input=(1, 28, 28), classes=10, options=opts)
    assert a.json() == b.json()
    # A keyword overrides the options' field, on a copy: the caller's object is left as it was.
    c = vdnn.plan(lenet, batch=16, options=opts, policy="all")
    assert c.policy == "all" and opts.policy == "auto"
    sim = a.simulate()
    assert sim["iteration_s"] == pytest.approx(a.simulated_s) and sim["peak_live_bytes"] > 0


def test_memory_options_mirror_the_struct():
    o = vdnn.MemoryOptions()
    fields = [name for name, _ in vdnn._lib.ffi.typeof("vdnn_memory_options").fields]
    assert list(o.to_dict()) == fields
    d = vdnn._lib.lib.vdnn_memory_options_default()
    for name in fields:
        v = getattr(d, name)
        want = vdnn.POLICIES[v] if name == "policy" else vdnn.PRECISIONS[v] if name == "precision" else v
        assert getattr(o, name) == want, name
    assert o.budget == vdnn.UNLIMITED and o.policy == "none" and o.micro_batches == 1
    assert o.precision == "fp32"
    o.precision = "bf16"
    assert o.precision == "bf16" and o._c.precision == vdnn._lib.lib.VDNN_PRECISION_BF16
    with pytest.raises(vdnn.InvalidArgError, match="memory.precision: unknown precision 'fp8'"):
        o.precision = "fp8"
    o.precision = "fp32"
    o.budget = "3MiB"
    o.host_budget = None
    o.conv_algo = "lean"
    assert (o.budget, o.host_budget, o.conv_algo) == (3 << 20, vdnn.UNLIMITED, vdnn._lib.lib.VDNN_ALGO_LEANEST)
    assert o.copy() == o and o != vdnn.MemoryOptions()
    with pytest.raises(AttributeError, match="no field 'budgett'"):
        o.budgett = 1
    o.micro_batches = 0
    with pytest.raises(vdnn.InvalidArgError, match="memory.micro_batches"):
        o.check()


def test_layers_are_vdnn_infos(lenet):
    info = json.loads(run_cli("info", LENET, "--batch", 8, "--json").stdout)
    layers = lenet.layers(batch=8)
    assert len(layers) == len(lenet) == len(info["layers"]) + 1  # the command leaves out the data input
    for got, want in zip(layers[1:], info["layers"]):
        assert (got.name, got.type, "x".join(map(str, got.out[1:]))) == (want["name"], want["type"], want["output"])
        assert (got.weights + got.biases, got.flops_fwd, got.flops_bwd) == (want["params"], want["flops_fwd"],
                                                                            want["flops_bwd"])
    assert layers[0].type == "input" and layers[1].inputs == ["data"] and layers[1].out[0] == 8
    assert lenet.defaults == ((1, 28, 28), 10)
