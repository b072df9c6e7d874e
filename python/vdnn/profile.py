"""vdnn.Profile: the costs planners and the simulator see a device through (`vdnn profile`'s), measured on a
backend, read from a file or estimated."""
from ._lib import ffi, lib, call, struct_dict, encode, c_int
from .memory import MemoryOptions, precision_number
from .model import Model, Backend
from ._errors import InvalidArgError


# The header's VDNN_ESTIMATE_* (floating-point macros, which cffi does not read): the estimate plans make alone.
ESTIMATE_FLOPS_PER_S = 1e13
ESTIMATE_MEM_BYTES_PER_S = 5e11
ESTIMATE_LINK_BYTES_PER_S = 16e9


def _shape(model, batch, input_shape, classes):
    (c, h, w), classes = model.resolve(input_shape, classes)
    return (c_int(batch, "batch"), c, h, w), classes


def handle_of(profile):
    """The C handle of a vdnn.Profile argument (None: NULL, the default estimate), or InvalidArgError."""
    if profile is None:
        return ffi.NULL
    if not isinstance(profile, Profile):
        raise InvalidArgError("profile: a vdnn.Profile, not %r" % (profile,))
    return profile._h


class Profile:
    """Per-layer forward and backward times, the copy link alone and beside compute, and (when measured) the
    device's op info, for one model at one batch, input and class count.

      Profile.measure(model, backend, batch=64, iterations=3, ...)   what `vdnn profile` measures
      Profile.load(path, model, batch=64, ...)                       a file `vdnn profile` or save() wrote
      Profile.estimate(model, batch=64, ...)                         the roofline estimate plans use by default
      Profile.describe_gpu(model, "9.0", batch=64, ...)              a GPU's op info and an estimate, no GPU needed

    Pass it as profile= to vdnn.plan(), Plan.simulate() and vdnn.Net(). A file of another model, batch or input
    raises vdnn.MismatchError; a malformed one vdnn.FormatError naming the file, line and column.
    """

    def __init__(self, handle, model, batch, input_shape, classes, link_busy_measured=None):
        self._h = ffi.gc(handle, lib.vdnn_profile_free)
        self.model = model
        self.batch = batch
        self.input_shape = input_shape
        self.classes = classes
        self.link_busy_measured = link_busy_measured

    @classmethod
    def measure(cls, model, backend=None, batch=64, input_shape=None, classes=0, iterations=3, options=None,
                **memory):
        """Measures `iterations` training steps of random data (learning rate 0) under the memory options
        (a MemoryOptions or dict, and/or its fields as keywords), every convolution algorithm, and the link.
        backend: a Backend, a name, or None for the CPU (its emulated link is the backend's memory options)."""
        model = Model.of(model)
        be = Backend.of(backend)
        shape, classes = _shape(model, batch, input_shape, classes)
        mem = MemoryOptions.of(options, **memory)
        out = ffi.new("vdnn_profile_t **")
        busy = ffi.new("bool *")
        call(lib.vdnn_profile_measure_model, model._h, be._h, shape, classes, mem._c,
             c_int(iterations, "iterations"), out, busy)
        return cls(out[0], model, shape[0], shape[1:], classes, bool(busy[0]))

    @classmethod
    def load(cls, path, model, batch=64, input_shape=None, classes=0):
        """Reads a profile file, checked against the model at that batch, input (c, h, w) and class count."""
        model = Model.of(model)
        shape, classes = _shape(model, batch, input_shape, classes)
        out = ffi.new("vdnn_profile_t **")
        call(lib.vdnn_profile_load, encode(str(path)), model._h, shape, classes, out)
        return cls(out[0], model, shape[0], shape[1:], classes)

    @classmethod
    def estimate(cls, model, batch=64, input_shape=None, classes=0, flops_per_s=ESTIMATE_FLOPS_PER_S,
                 mem_bytes_per_s=ESTIMATE_MEM_BYTES_PER_S, link_bytes_per_s=ESTIMATE_LINK_BYTES_PER_S):
        """The roofline estimate: every op max(flops / flops_per_s, bytes / mem_bytes_per_s), copies at
        link_bytes_per_s each way (a number, or a (device-to-host, host-to-device) pair)."""
        model = Model.of(model)
        shape, classes = _shape(model, batch, input_shape, classes)
        d2h, h2d = link_bytes_per_s if isinstance(link_bytes_per_s, (tuple, list)) else (link_bytes_per_s,) * 2
        out = ffi.new("vdnn_profile_t **")
        call(lib.vdnn_profile_estimate_model, model._h, shape, classes, float(flops_per_s), float(mem_bytes_per_s),
             float(d2h), float(h2d), out)
        return cls(out[0], model, shape[0], shape[1:], classes)

    @classmethod
    def describe_gpu(cls, model, compute_capability, batch=64, input_shape=None, classes=0, precision="fp32",
                     name=None, tf32=None, flops_per_s=0.0, mem_bytes_per_s=0.0, link_bytes_per_s=0.0):
        """A GPU's profile without the GPU (`vdnn profile --describe-gpu`): every layer's op info from the CUDA
        backend's own rules for that compute capability ("9.0" or (9, 0)) and precision ("fp32", "bf16", "fp16"),
        times a roofline estimate (rates 0: the defaults; link a number or a (device-to-host, host-to-device)
        pair). Plans made with it are that GPU's, on any machine. vdnn.UnsupportedError in builds without the CUDA
        backend, or where the GPU lacks the precision (bf16 below 8.0)."""
        model = Model.of(model)
        shape, classes = _shape(model, batch, input_shape, classes)
        if isinstance(compute_capability, str):
            major, _, minor = compute_capability.partition(".")
            if not (major.isdigit() and minor.isdigit() and len(minor) == 1):
                raise InvalidArgError("compute_capability: '%s' is not like '9.0'" % compute_capability)
            cc = (int(major), int(minor))
        else:
            cc = tuple(compute_capability)
            if len(cc) != 2:
                raise InvalidArgError("compute_capability: %r is not (major, minor)" % (compute_capability,))
        d2h, h2d = link_bytes_per_s if isinstance(link_bytes_per_s, (tuple, list)) else (link_bytes_per_s,) * 2
        keep = ffi.new("char[]", encode(name)) if name else ffi.NULL  # alive until the call returns
        gpu = ffi.new("vdnn_gpu_description *", {
            "name": keep, "cc_major": c_int(cc[0], "compute_capability"), "cc_minor": c_int(cc[1], "compute_capability"),
            "tf32": -1 if tf32 is None else int(bool(tf32)), "flops_per_s": float(flops_per_s),
            "mem_bytes_per_s": float(mem_bytes_per_s), "link_d2h_bytes_per_s": float(d2h),
            "link_h2d_bytes_per_s": float(h2d)})
        out = ffi.new("vdnn_profile_t **")
        call(lib.vdnn_profile_describe_gpu_model, model._h, shape, classes, precision_number(precision), gpu, out)
        return cls(out[0], model, shape[0], shape[1:], classes)

    @classmethod
    def compose(cls, profiles, model):
        """The profile of model, a variant of the model the profiles measure (its attentions fused or not, as
        vdnn.fit_attention(profiles=...) chose): each layer's costs from the first profile with a layer of its name
        and kind, the link's from the first (vdnn_profile_compose). Pass it with that model to vdnn.Net or vdnn.plan,
        as `vdnn train --attention auto --fused-profile` does. vdnn.MismatchError where the profiles are not of one
        model, device, batch and precision, or a layer of model is in none of them."""
        model = Model.of(model)
        profiles = list(profiles)
        if not profiles:
            raise InvalidArgError("Profile.compose: profiles: at least one vdnn.Profile")
        handles = ffi.new("vdnn_profile_t *[]", [handle_of(p) for p in profiles])
        out = ffi.new("vdnn_profile_t **")
        call(lib.vdnn_profile_compose, handles, len(profiles), model._h, out)
        first = profiles[0]
        return cls(out[0], model, first.batch, first.input_shape, first.classes)

    def save(self, path):
        """Writes it as `vdnn profile --out` does (JSON, to PATH.tmp then renamed)."""
        call(lib.vdnn_profile_save, self._h, encode(str(path)))

    @property
    def summary(self):
        """A dict: device, measured, forward_s, backward_s (sums over the layers), the link's bytes_per_s and
        latencies alone and busy, copy_slowdown, op_info, device_info, op_info_source, version."""
        s = ffi.new("vdnn_profile_summary *")
        lib.vdnn_profile_summarize(self._h, s)
        return struct_dict(s[0])

    def check_backend(self, backend):
        """Raises vdnn.MismatchError, naming the first layer and field, when the backend's op info for the model
        is not the one this profile recorded (another device or other settings)."""
        call(lib.vdnn_profile_check_backend, self._h, self.model._h, Backend.of(backend)._h)

    def __repr__(self):
        s = self.summary
        return "vdnn.Profile(%s, %s, batch %d, forward %.4g s, backward %.4g s)" % (
            self.model.name, s["device"] if s["measured"] else "estimate", self.batch, s["forward_s"],
            s["backward_s"])
