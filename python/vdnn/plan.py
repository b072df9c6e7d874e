"""vdnn.plan() and vdnn.Plan: the memory plan of one training iteration, made by the call `vdnn plan` makes."""
import collections

from ._lib import ffi, lib, call, struct_dict, c_int
from .memory import MemoryOptions, POLICIES
from .model import Model, Backend
from .profile import handle_of

Tensor = collections.namedtuple("Tensor", "name kind cls class_id layer bytes out_after back_from first_use")
Tensor.__doc__ = """One feature map, state or offloaded parameter of a plan (a row of `vdnn plan`). cls: "keep",
"swap", "recompute", "stream", "offloaded" or "managed"; class_id: "keep", "swap" or "recompute" as the planner
chose; out_after / back_from / first_use: the steps it leaves, returns and is first used in backward ("-": none)."""

_CLASS_IDS = {int(lib.VDNN_CLASS_KEEP): "keep", int(lib.VDNN_CLASS_SWAP): "swap",
              int(lib.VDNN_CLASS_RECOMPUTE): "recompute"}


def _text_of(fn, handle):
    n = ffi.new("size_t *")
    call(fn, handle, ffi.NULL, 0, n)
    buf = ffi.new("char[]", n[0] + 1)
    call(fn, handle, buf, n[0] + 1, ffi.NULL)
    return ffi.string(buf).decode("utf-8")


class Plan:
    """A training plan: summary (a dict), tensors, classes, json(), table(), simulate().

    Every summary field is also an attribute: plan.feasible, plan.peak_device_bytes, plan.min_budget_bytes, ...
    (sizes in bytes; budget and host_budget are vdnn.UNLIMITED when unlimited).
    """

    def __init__(self, handle, owner=None, keep=()):
        # A net's plan belongs to the net (owner keeps it alive); a plan made alone is freed with this object,
        # before what it was made from (keep: the model and backend, held by the destructor).
        self._h = handle if owner is not None else ffi.gc(handle, lambda h, _keep=keep: lib.vdnn_plan_free(h))
        self._owner = owner
        self._summary = None

    @property
    def summary(self):
        """The summary as a dict: model, policy (its name), feasible, input (n, c, h, w), classes, budget,
        peak_device_bytes, avg_device_bytes, host_bytes, bytes_moved, min_budget_bytes, lower_bound_s,
        simulated_s, ..., the fields of C's vdnn_plan_summary."""
        if self._summary is None:
            s = ffi.new("vdnn_plan_summary *")
            call(lib.vdnn_plan_summarize, self._h, s)
            d = struct_dict(s[0])
            d["policy"] = POLICIES[d["policy"]]
            i = d["input"]
            d["input"] = (i["n"], i["c"], i["h"], i["w"])
            self._summary = d
        return dict(self._summary)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        s = self.summary
        if name in s:
            return s[name]
        raise AttributeError("Plan has no attribute '%s' (summary fields: %s)" % (name, ", ".join(s)))

    @property
    def tensors(self):
        """Every tensor of the plan, as vdnn.Tensor rows."""
        out = []
        t = ffi.new("vdnn_tensor_info *")
        for i in range(self.summary["tensors"]):
            call(lib.vdnn_plan_tensor, self._h, i, t)
            d = struct_dict(t[0])
            out.append(Tensor(d["name"], d["kind"], d["cls"], _CLASS_IDS.get(d["class_id"], str(d["class_id"])),
                              d["layer"], d["bytes"], d["out_after"], d["back_from"], d["first_use"]))
        return out

    @property
    def classes(self):
        """{tensor name: its class} ("keep", "swap", "recompute", "stream", "offloaded", "managed")."""
        return {t.name: t.cls for t in self.tensors}

    def json(self):
        """The plan as one JSON object: what `vdnn plan --json` prints."""
        return _text_of(lib.vdnn_plan_json, self._h)

    def table(self):
        """The table `vdnn plan` prints (its advice names option fields, such as memory.budget)."""
        return _text_of(lib.vdnn_plan_table, self._h)

    def simulate(self, profile=None):
        """Replays the plan on the model of the device it was made with (profile: a vdnn.Profile's costs
        instead): a dict of iteration_s, compute_s, stall_s, d2h_s, h2d_s and peak_live_bytes."""
        out = ffi.new("vdnn_timeline_t **")
        call(lib.vdnn_plan_simulate, self._h, handle_of(profile), out)
        tl = ffi.gc(out[0], lib.vdnn_timeline_free)
        s = ffi.new("vdnn_timeline_summary *")
        lib.vdnn_timeline_summarize(tl, s)
        return struct_dict(s[0])

    def __repr__(self):
        s = self.summary
        return "vdnn.Plan(%s, policy %s, %s, peak %d bytes)" % (s["model"], s["policy"],
                                                              "feasible" if s["feasible"] else "infeasible",
                                                              s["peak_device_bytes"])


def _planning_args(who, model, backend, input_shape, input, classes, batch, options, memory):
    """The model, backend (None: the library's CPU sizes, with no device opened, what `vdnn plan` sees on the
    CPU), input shape with the batch, class count and memory options a planning call takes."""
    if input is not None:
        if input_shape is not None:
            raise TypeError("%s: give input_shape or input, not both" % who)
        input_shape = input
    model = Model.of(model)
    be = Backend.of(backend) if backend is not None else None
    (c, h, w), classes = model.resolve(input_shape, classes)
    return model, be, (c_int(batch, "batch"), c, h, w), classes, MemoryOptions.of(options, **memory)


def plan(model, backend=None, input_shape=None, classes=0, batch=64, options=None, input=None, profile=None,
         **memory):
    """Plans one training iteration of model at batch images of input_shape (c, h, w) and classes (defaults:
    the model's) under the memory options: a MemoryOptions (or dict), and/or its fields as keywords
    (policy="auto", budget="11MiB", ...). backend: a Backend, a name, or None for the CPU's sizes (no device
    needed). input is another name for input_shape. A budget too small is no error: plan.feasible is False and
    plan.min_budget_bytes names the smallest budget known to work. profile: a vdnn.Profile whose costs the
    planners see (None: the default estimate); one measured on a device also gives that device's op info, so
    with no backend the plan is the one a net on that device makes. Returns a vdnn.Plan.
    """
    model, be, shape, classes, mem = _planning_args("plan", model, backend, input_shape, input, classes, batch,
                                                   options, memory)
    out = ffi.new("vdnn_plan_t **")
    call(lib.vdnn_plan_create, model._h, be._h if be else ffi.NULL, handle_of(profile), shape, classes, mem._c, out)
    return Plan(out[0], keep=(model, be, profile))


def fit_head_groups(model, backend=None, input_shape=None, classes=0, batch=64, options=None, input=None,
                    flops_per_s=0.0, mem_bytes_per_s=0.0, link_bytes_per_s=0.0, **memory):
    """The fewest attention head groups whose plan fits (vdnn_model_fit_head_groups): plans the transformer in
    1, 2, 3, ... groups (every count dividing its heads) under the memory options, as vdnn.plan would, with a
    roofline estimate at the given rates (0: the default estimate's), and stops at the first that fits. Returns
    (model in those groups, groups, fits); fits False: no grouping fits, and the model is in the grouping that
    needs the least budget. The numbers a net computes are the same in any grouping."""
    model, be, shape, classes, mem = _planning_args("fit_head_groups", model, backend, input_shape, input, classes,
                                                   batch, options, memory)
    out = ffi.new("vdnn_model_t **")
    groups = ffi.new("int *")
    fits = ffi.new("bool *")
    link = float(link_bytes_per_s)
    call(lib.vdnn_model_fit_head_groups, model._h, be._h if be else ffi.NULL, shape, classes, mem._c,
         float(flops_per_s), float(mem_bytes_per_s), link, link, out, groups, fits)
    return Model(out[0]), groups[0], bool(fits[0])


def fit_attention(model, backend=None, input_shape=None, classes=0, batch=64, options=None, input=None,
                  flops_per_s=0.0, mem_bytes_per_s=0.0, link_bytes_per_s=0.0, profiles=None, **memory):
    """Which attentions to fuse for the fastest plan that fits (vdnn_model_fit_attention, `--attention auto`): plans
    the transformer as it is and with 1, 2, ..., all of its attentions fused (those whose probabilities the unfused
    plan recomputes first, then those it swaps, then those it keeps), as vdnn.plan would, with a roofline estimate
    at the given rates (0: the default estimate's), or, with profiles=(unfused, fused), from measured profiles of
    the model as it is and with every attention fused (vdnn_model_fit_attention_measured: each choice's profile
    composed of the two). Returns (model, fused, fits): fused one bool per attention in layer order; fits False:
    nothing fits, and the model is the choice that needs the least budget."""
    model, be, shape, classes, mem = _planning_args("fit_attention", model, backend, input_shape, input, classes,
                                                   batch, options, memory)
    out = ffi.new("vdnn_model_t **")
    n = model.attention_count
    fused = ffi.new("bool[]", max(n, 1))
    k = ffi.new("int *")
    fits = ffi.new("bool *")
    link = float(link_bytes_per_s)
    if profiles is not None:
        if len(profiles) != 2:
            raise ValueError("fit_attention: profiles: (the model's profile unfused, its profile with every attention "
                             "fused); got %d" % len(profiles))
        if flops_per_s or mem_bytes_per_s or link_bytes_per_s:
            raise ValueError("fit_attention: profiles and the estimate's rates exclude each other")
        call(lib.vdnn_model_fit_attention_measured, model._h, be._h if be else ffi.NULL, shape, classes, mem._c,
             handle_of(profiles[0]), handle_of(profiles[1]), out, fused, k, fits)
    else:
        call(lib.vdnn_model_fit_attention, model._h, be._h if be else ffi.NULL, shape, classes, mem._c,
             float(flops_per_s), float(mem_bytes_per_s), link, link, out, fused, k, fits)
    return Model(out[0]), [bool(fused[i]) for i in range(n)], bool(fits[0])
