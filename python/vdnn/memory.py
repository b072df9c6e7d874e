"""vdnn.MemoryOptions: the C struct vdnn_memory_options as a Python object, its defaults from the library."""
from ._lib import ffi, lib, call, encode
from ._errors import InvalidArgError

UNLIMITED = int(ffi.cast("size_t", -1))  # SIZE_MAX: the budgets' "no limit"

POLICIES = tuple(ffi.string(lib.vdnn_policy_name(i)).decode() for i in range(lib.VDNN_POLICY_COUNT))
PRECISIONS = tuple(ffi.string(lib.vdnn_precision_name(i)).decode() for i in range(lib.VDNN_PRECISION_COUNT))

# conv_algo: besides a candidate index k >= 0, these names (the command's --conv-algo words).
CONV_ALGOS = {"default": lib.VDNN_ALGO_DEFAULT, "choose": lib.VDNN_ALGO_CHOOSE, "lean": lib.VDNN_ALGO_LEANEST,
              "leanest": lib.VDNN_ALGO_LEANEST}

FIELDS = tuple(name for name, _ in ffi.typeof("vdnn_memory_options").fields)


def parse_size(value, field):
    """Bytes from an int, a size string ("11MiB", "1.5GiB", "unlimited") or None (unlimited)."""
    if value is None:
        return UNLIMITED
    if isinstance(value, bool):
        raise InvalidArgError("%s: a byte count or a size such as '11MiB', not %r" % (field, value))
    if isinstance(value, int):
        if not 0 <= value <= UNLIMITED:
            raise InvalidArgError("%s: %d is out of range (0 .. %d bytes)" % (field, value, UNLIMITED))
        return value
    if isinstance(value, str):
        out = ffi.new("size_t *")
        if not lib.vdnn_parse_size(encode(value), out):
            raise InvalidArgError("%s: '%s' is not a size (such as 123, 64KiB, 3MiB, 1.5GiB, 2GB or unlimited)"
                                  % (field, value))
        return int(out[0])
    raise InvalidArgError("%s: a byte count or a size such as '11MiB', not %r" % (field, value))


def policy_number(value):
    if isinstance(value, str):
        out = ffi.new("vdnn_policy *")
        if not lib.vdnn_policy_parse(encode(value), out):
            raise InvalidArgError("memory.policy: unknown policy '%s' (one of %s)" % (value, ", ".join(POLICIES)))
        return int(out[0])
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < lib.VDNN_POLICY_COUNT:
        return value
    raise InvalidArgError("memory.policy: %r is not a policy (one of %s)" % (value, ", ".join(POLICIES)))


def precision_number(value):
    if isinstance(value, str):
        out = ffi.new("vdnn_precision *")
        if not lib.vdnn_precision_parse(encode(value), out):
            raise InvalidArgError("memory.precision: unknown precision '%s' (one of %s)"
                                  % (value, ", ".join(PRECISIONS)))
        return int(out[0])
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < lib.VDNN_PRECISION_COUNT:
        return value
    raise InvalidArgError("memory.precision: %r is not a precision (one of %s)" % (value, ", ".join(PRECISIONS)))


class MemoryOptions:
    """How a plan keeps, swaps or recomputes feature maps: the fields of C's vdnn_memory_options.

    Unset fields take vdnn_memory_options_default()'s values. Fields:
      policy            "none", "all", "conv", "recompute", "dyn", "pooch", "auto", "um" (default "none")
      budget            device bytes the plan may use: int, "11MiB", or None/"unlimited" (the default)
      host_budget       bytes of the pinned host pool (likewise)
      conv_algo         "default", "choose", "lean" or a candidate index k >= 0 (read back as the number)
      offload_params, stream_inputs, pipelined, poison, allow_oversubscribe   bools
      micro_batches     a step's batch in this many micro-batches (default 1)
      link_bandwidth_d2h, link_bandwidth_h2d   CPU backend: copies throttled to bytes/s (0: unthrottled)
      precision         "fp32" (the default), "bf16" (AVX-512 BF16 CPUs; transformers on any CPU; recent GPUs) or "fp16" (CUDA): the maps' type
      clip_grads        training clips gradients by their global norm (updates wait for backward's end); a Net
                        sets it from its clip_grad_norm
    Ranges are checked by the library when the options are used (or by check()), with messages naming the field.
    """

    __slots__ = ("_c",)

    def __init__(self, **fields):
        c = ffi.new("vdnn_memory_options *")
        c[0] = lib.vdnn_memory_options_default()
        object.__setattr__(self, "_c", c)
        for k, v in fields.items():
            setattr(self, k, v)

    @classmethod
    def of(cls, options=None, **overrides):
        """options (a MemoryOptions, a dict of fields or None) with the fields in overrides set on a copy."""
        if options is None:
            out = cls()
        elif isinstance(options, MemoryOptions):
            out = options.copy()
        elif isinstance(options, dict):
            out = cls(**options)
        else:
            raise TypeError("options: a vdnn.MemoryOptions or a dict of its fields, not %s" % type(options).__name__)
        for k, v in overrides.items():
            setattr(out, k, v)
        return out

    def copy(self):
        out = MemoryOptions()
        out._c[0] = self._c[0]
        return out

    def __getattr__(self, name):
        if name not in FIELDS:
            raise AttributeError("MemoryOptions has no field '%s' (fields: %s)" % (name, ", ".join(FIELDS)))
        v = getattr(self._c, name)
        if name == "policy":
            return POLICIES[int(v)]
        if name == "precision":
            return PRECISIONS[int(v)] if 0 <= int(v) < len(PRECISIONS) else int(v)
        return v

    def __setattr__(self, name, value):
        if name not in FIELDS:
            raise AttributeError("MemoryOptions has no field '%s' (fields: %s)" % (name, ", ".join(FIELDS)))
        field = "memory." + name
        if name == "policy":
            value = policy_number(value)
        elif name == "precision":
            value = precision_number(value)
        elif name in ("budget", "host_budget"):
            value = parse_size(value, field)
        elif name == "conv_algo" and isinstance(value, str):
            if value not in CONV_ALGOS:
                raise InvalidArgError("%s: unknown '%s' (default, choose, lean or a candidate index)" % (field, value))
            value = CONV_ALGOS[value]
        ctype = dict(ffi.typeof("vdnn_memory_options").fields)[name].type.cname
        if ctype == "_Bool" or ctype == "bool":
            value = bool(value)
        try:
            setattr(self._c, name, value)
        except (OverflowError, TypeError) as e:
            raise InvalidArgError("%s: %r does not fit the field (%s: %s)" % (field, value, ctype, e)) from None

    def check(self):
        """Raises vdnn.InvalidArgError naming the field when one is out of its range."""
        call(lib.vdnn_memory_options_check, self._c)
        return self

    def to_dict(self):
        return {k: getattr(self, k) for k in FIELDS}

    def __eq__(self, other):
        return isinstance(other, MemoryOptions) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return "vdnn.MemoryOptions(%s)" % ", ".join("%s=%r" % kv for kv in self.to_dict().items())
