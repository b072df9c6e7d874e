"""vdnn.Model (a parsed model file and its layers) and vdnn.Backend (a compute device opened by name)."""
import collections
import os

from ._lib import ffi, lib, call, text, encode, struct_dict, c_int
from .memory import MemoryOptions

Layer = collections.namedtuple(
    "Layer", "name type inputs out weights biases stats flops_fwd flops_bwd aux_bytes fwd_ws_bytes bwd_ws_bytes")
Layer.__doc__ = """One layer at a batch and input: inputs are the names of the layers it reads, out its output shape
(n, c, h, w); weights, biases and stats count floats; flops count multiply-adds as 2; the byte sizes of the state
forward leaves for backward and of the op's scratch come from a backend (0 without one)."""


def _is_text(s):
    # A model file's text has lines or a section; a path has neither.
    return "\n" in s or s.lstrip().startswith("[")


class Model:
    """A parsed model (layers as a DAG); immutable, shared by any number of plans and nets."""

    def __init__(self, handle):
        self._h = ffi.gc(handle, lib.vdnn_model_free)

    @classmethod
    def load(cls, path_or_text, source=None):
        """Reads a .cfg or .onnx file, or parses .cfg text given as a string (source names it in messages); a
        string with a newline or starting with '[' is text, any other a path.

        Errors (vdnn.ParseError, vdnn.FileError, ...) carry the library's message naming the file and line.
        """
        out = ffi.new("vdnn_model_t **")
        if isinstance(path_or_text, bytes):
            path_or_text = path_or_text.decode("utf-8")
        if isinstance(path_or_text, os.PathLike):
            path_or_text = os.fspath(path_or_text)
        if not isinstance(path_or_text, str):
            raise TypeError("path_or_text: a path or the text of a .cfg model, not %s" % type(path_or_text).__name__)
        if _is_text(path_or_text):
            call(lib.vdnn_model_parse, encode(path_or_text), encode(source or "<string>"), out)
        else:
            call(lib.vdnn_model_load, encode(path_or_text), out)
        return cls(out[0])

    @classmethod
    def of(cls, model):
        """model itself, or the model a path or text names."""
        return model if isinstance(model, Model) else cls.load(model)

    @property
    def name(self):
        return text(lib.vdnn_model_name(self._h))

    @property
    def source(self):
        """The file (or source name) the model was read from."""
        return text(lib.vdnn_model_source(self._h))

    def __len__(self):
        """The layer count, the data input (layer 0) included."""
        return lib.vdnn_model_layer_count(self._h)

    @property
    def defaults(self):
        """The model's own input (c, h, w) and class count; zeros where the file gives none."""
        shape = ffi.new("vdnn_shape *")
        classes = ffi.new("int *")
        lib.vdnn_model_defaults(self._h, shape, classes)
        return (shape.c, shape.h, shape.w), classes[0]

    def with_context(self, context):
        """A copy of this sequence model with a context of `context` tokens (its position table's rows and its
        default sequence length)."""
        out = ffi.new("vdnn_model_t **")
        call(lib.vdnn_model_with_context, self._h, int(context), out)
        return Model(out[0])

    def with_steps(self, steps):
        """A copy of this LSTM model cut for sequences of `steps` steps: each lstm layer of its file in chunks of its
        chunk= steps, the last one shorter, and the default input (1, steps, 1); the same parameter names and sizes
        (`--seq-len` does this on the command line)."""
        out = ffi.new("vdnn_model_t **")
        call(lib.vdnn_model_with_steps, self._h, c_int(steps, "steps"), out)
        return Model(out[0])

    @property
    def lstm_count(self):
        """The lstm layers, as the model file gives them (however many chunks each is cut into)."""
        return lib.vdnn_model_lstm_count(self._h)

    def with_head_groups(self, groups):
        """A copy of this transformer whose every attention computes its heads in `groups` groups, each group's
        probabilities a tensor of their own that a plan keeps, swaps or recomputes alone (long contexts); the
        same numbers."""
        out = ffi.new("vdnn_model_t **")
        call(lib.vdnn_model_with_head_groups, self._h, int(groups), out)
        return Model(out[0])

    @property
    def attention_count(self):
        """The attentions (attn_probs layers) not fused yet; 0 for a model without attention."""
        return lib.vdnn_model_attention_count(self._h)

    def with_fused_attention(self, which=None):
        """A copy of this transformer whose attentions are each one op that never holds its probabilities (a block of
        query rows at a time, recomputed in backward): no B x H x T x T tensor for a plan to keep, swap or recompute.
        which: None fuses every attention, else one bool per attention in layer order (attention_count of them).
        The same parameters to start; the numbers equal the unfused model's up to float sums."""
        out = ffi.new("vdnn_model_t **")
        if which is None:
            call(lib.vdnn_model_with_fused_attention, self._h, out)
            return Model(out[0])
        which = [bool(w) for w in which]
        call(lib.vdnn_model_with_fused_attentions, self._h, ffi.new("bool[]", which) if which else ffi.NULL,
             len(which), out)
        return Model(out[0])

    def resolve(self, input_shape=None, classes=0):
        """(c, h, w) and the class count: those given, else the model's defaults."""
        din, dcls = self.defaults
        if input_shape is None:
            input_shape = din
        input_shape = tuple(int(v) for v in input_shape)
        if len(input_shape) != 3:
            raise ValueError("input_shape: (channels, height, width), not %r" % (input_shape,))
        return input_shape, int(classes or dcls)

    def layers(self, batch=1, input_shape=None, classes=0, backend=None):
        """Every layer (a list of vdnn.Layer) at this batch, input (c, h, w) and class count (defaults: the
        model's). With a backend, each op's state and scratch sizes too."""
        (c, h, w), classes = self.resolve(input_shape, classes)
        n = len(self)
        out = ffi.new("vdnn_layer_info[]", n)
        call(lib.vdnn_model_layers, self._h, (batch, c, h, w), classes, backend._h if backend else ffi.NULL, out)
        names = [text(out[i].name) for i in range(n)]
        layers = []
        for i in range(n):
            d = struct_dict(out[i])
            o = d["out"]
            layers.append(Layer(d["name"], d["type"], [names[j] for j in d["inputs"][:d["n_inputs"]]],
                                (o["n"], o["c"], o["h"], o["w"]), d["weights"], d["biases"], d["stats"],
                                d["flops_fwd"], d["flops_bwd"], d["aux_bytes"], d["fwd_ws_bytes"], d["bwd_ws_bytes"]))
        return layers

    def __repr__(self):
        return "vdnn.Model(%r, %d layers, from %s)" % (self.name, len(self), self.source)


class Backend:
    """A compute device: "cpu", "cuda" (GPU 0), "cuda:N", or "auto" (CUDA when a GPU is usable, else the CPU;
    fallback says why). threads: host threads (0: every core). tf32 / deterministic: None takes the environment's
    setting (VDNN_NO_TF32, VDNN_DETERMINISTIC), True or False forces it (CUDA only). memory: the MemoryOptions the
    device honours when opened (the CPU's emulated link bandwidth). A missing GPU raises vdnn.NoDeviceError."""

    def __init__(self, name="auto", threads=0, tf32=None, deterministic=None, memory=None):
        o = ffi.new("vdnn_backend_options *")
        o[0] = lib.vdnn_backend_options_default()
        o.threads = threads
        if tf32 is not None:
            o.tf32 = int(bool(tf32))
        if deterministic is not None:
            o.deterministic = int(bool(deterministic))
        mem = MemoryOptions.of(memory)
        out = ffi.new("vdnn_backend_t **")
        call(lib.vdnn_backend_open_ex, encode(name), o, mem._c, out)
        self._h = ffi.gc(out[0], lib.vdnn_backend_free)

    @classmethod
    def of(cls, backend):
        """backend itself, a backend opened by that name, or (None) the CPU backend."""
        if isinstance(backend, Backend):
            return backend
        return cls("cpu" if backend is None else backend)

    @property
    def name(self):
        return text(lib.vdnn_backend_name(self._h))

    @property
    def threads(self):
        return lib.vdnn_backend_threads(self._h)

    @property
    def memory(self):
        """(free, total) device bytes (UNLIMITED on the CPU, whose limits are the plans' budgets)."""
        f = ffi.new("size_t *")
        t = ffi.new("size_t *")
        lib.vdnn_backend_memory(self._h, f, t)
        return int(f[0]), int(t[0])

    @property
    def fallback(self):
        """For a backend opened as "auto" that is not CUDA: why CUDA was not used; else None."""
        return text(lib.vdnn_backend_fallback(self._h))

    def __repr__(self):
        return "vdnn.Backend(%r, threads=%d)" % (self.name, self.threads)
