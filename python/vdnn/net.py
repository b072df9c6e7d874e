"""vdnn.Net: a model trained on a backend under a memory plan, fed numpy batches or a vdnn.Dataset."""
import collections

import numpy as np

from ._lib import ffi, lib, call, check, new_error, encode, struct_dict, c_int
from .memory import MemoryOptions, POLICIES
from .model import Model, Backend
from .plan import Plan
from .profile import handle_of
from .data import Dataset
from ._errors import InvalidArgError

OPTIMIZERS = {"sgd": lib.VDNN_OPTIMIZER_SGD, "adamw": lib.VDNN_OPTIMIZER_ADAMW}
ParamInfo = collections.namedtuple("ParamInfo", "name layer kind count")
ParamInfo.__doc__ = """One parameter or buffer a checkpoint holds: name ("conv1.weight", "bn1.stats",
"fc.bias.momentum", ...), its layer, kind ("weight", "bias", "stats", "wmom", "bmom") and float count."""


def _images(images, arg, shape_tail, n=None):
    """images as a C-contiguous float32 (n, c, h, w) array, or ValueError naming arg and the shape expected."""
    want = "(%s, %d, %d, %d)" % ((("N" if n is None else str(n)),) + tuple(shape_tail))
    if not isinstance(images, np.ndarray):
        raise ValueError("%s: a numpy array of float32 %s, not %s" % (arg, want, type(images).__name__))
    if images.dtype != np.float32:
        raise ValueError("%s: dtype float32 expected (shape %s), got %s" % (arg, want, images.dtype))
    if images.ndim != 4 or tuple(images.shape[1:]) != tuple(shape_tail) or (n is not None and images.shape[0] != n) \
            or images.shape[0] < 1:
        raise ValueError("%s: shape %s expected, got %s" % (arg, want, tuple(images.shape)))
    return np.ascontiguousarray(images)


def _labels(labels, arg, n, classes, per=1):
    """labels as a C-contiguous int32 (n,) array of 0 .. classes-1 ((n, per) for a sequence model's per-token
    labels), or ValueError naming arg."""
    shape = (n,) if per == 1 else (n, per)
    if not isinstance(labels, np.ndarray):
        raise ValueError("%s: a numpy array of integers %s, not %s" % (arg, shape, type(labels).__name__))
    if labels.dtype.kind not in "iu":
        raise ValueError("%s: an integer dtype expected (shape %s), got %s" % (arg, shape, labels.dtype))
    if labels.shape != shape:
        raise ValueError("%s: shape %s expected, got %s" % (arg, shape, tuple(labels.shape)))
    if n and (labels.min() < 0 or labels.max() >= classes):
        raise ValueError("%s: labels must lie in 0 .. %d (%d classes), got %d .. %d"
                         % (arg, classes - 1, classes, labels.min(), labels.max()))
    return np.ascontiguousarray(labels, dtype=np.int32)


def _ptr(ctype, a):
    return ffi.cast(ctype, a.ctypes.data)


class Net:
    """A model trained on a backend under a memory plan.

    Net(model, backend=None, batch=64, input_shape=None, classes=0, seed=1, momentum=0.9, weight_decay=5e-4,
        options=None, loss_scale=None, clip_grad_norm=None, optimizer="sgd", betas=(0.9, 0.999), eps=1e-8,
        profile=None, **memory)
    model: a vdnn.Model or a path; backend: a vdnn.Backend, a name ("cpu", "cuda", "auto") or None (the CPU);
    input_shape (c, h, w) and classes: None/0 take the model's; clip_grad_norm X: gradients clipped to global norm X
    before each update (PyTorch's clip_grad_norm_); options: a vdnn.MemoryOptions (or dict), and/or its
    fields as keywords (policy="auto", budget="11MiB", ...). Defaults are vdnn_net_options_default()'s.
    A budget too small raises vdnn.BudgetError naming the smallest budget that works.
    loss_scale: dynamic loss scaling's first scale, a power of two (None or 0: 65536 with fp16 maps, off otherwise;
    negative: off); stats["skipped_steps"] counts the steps it skipped for inf or NaN gradients.
    optimizer: "sgd" (momentum and weight decay, PyTorch's rule) or "adamw" (torch.optim.AdamW with betas, eps and
    weight_decay as its decoupled decay; its two moments are state the plan counts). profile: a vdnn.Profile whose
    costs the plan is made with (None: the default estimate).
    """

    def __init__(self, model, backend=None, batch=None, input_shape=None, classes=0, seed=None, momentum=None,
                 weight_decay=None, options=None, loss_scale=None, clip_grad_norm=None, optimizer=None, betas=None,
                 eps=None, profile=None, **memory):
        self.model = Model.of(model)
        self.backend = Backend.of(backend)
        o = ffi.new("vdnn_net_options *")
        o[0] = lib.vdnn_net_options_default()
        if batch is not None:
            o.batch = c_int(batch, "batch")
        if input_shape is not None:
            (o.in_c, o.in_h, o.in_w), _ = self.model.resolve(input_shape, 0)
        o.classes = c_int(classes, "classes")
        if seed is not None:
            o.seed = c_int(seed, "seed", 0, 2**64 - 1)
        if momentum is not None:
            o.momentum = momentum
        if weight_decay is not None:
            o.weight_decay = weight_decay
        if loss_scale is not None:
            o.loss_scale = loss_scale
        if clip_grad_norm is not None:
            o.clip_grad_norm = clip_grad_norm
        if optimizer is not None:
            if optimizer not in OPTIMIZERS:
                raise InvalidArgError("optimizer: '%s' is none of %s" % (optimizer, ", ".join(OPTIMIZERS)))
            o.optimizer = OPTIMIZERS[optimizer]
        if betas is not None:
            o.beta1, o.beta2 = betas
        if eps is not None:
            o.eps = eps
        o.profile = handle_of(profile)
        self.profile = profile
        o.memory = MemoryOptions.of(options, **memory)._c[0]
        out = ffi.new("vdnn_net_t **")
        call(lib.vdnn_net_create, self.model._h, self.backend._h, o, out)
        # The library keeps the backend open while the net lives, and read the profile while creating it: Python
        # may free them in any order.
        self._h = ffi.gc(out[0], lib.vdnn_net_free)
        st = self.stats
        self.batch = st["batch"]
        self.seed = st["seed"]
        self.micro_batches = st["micro_batches"]
        i = st["input"]
        self.input_shape = (i["c"], i["h"], i["w"])
        self.classes = st["classes"]

    # ---- steps on numpy batches ----

    def train_step(self, images, labels, lr=0.05):
        """One optimizer step on images (float32, (batch, c, h, w)) and labels (integers, (batch,)); returns the mean
        training loss."""
        x = _images(images, "images", self.input_shape, self.batch)
        y = _labels(labels, "labels", self.batch, self.classes, self._per)
        loss = ffi.new("float *")
        call(lib.vdnn_net_train_step, self._h, _ptr("float *", x), _ptr("int32_t *", y), lr, loss)
        return float(loss[0])

    @property
    def _per(self):
        """Labels per sample: 1, or a sequence model's tokens per sequence."""
        return lib.vdnn_net_labels_per_sample(self._h)

    def _eval_chunk(self):
        return max(1, self.batch // max(1, self.micro_batches))

    def evaluate(self, images, labels=None):
        """Accuracy and mean loss, as (accuracy, loss): of images (float32 (n, c, h, w)) and labels (n,), run in
        chunks of the net's micro-batch; or of a whole vdnn.Dataset split (labels not given)."""
        if isinstance(images, Dataset):
            if labels is not None:
                raise TypeError("evaluate: a Dataset carries its labels; give no labels with it")
            acc = ffi.new("double *")
            loss = ffi.new("double *")
            call(lib.vdnn_net_evaluate, self._h, images._h, acc, loss)
            return float(acc[0]), float(loss[0])
        x = _images(images, "images", self.input_shape)
        n = x.shape[0]
        y = _labels(labels, "labels", n, self.classes, self._per)
        chunk = self._eval_chunk()
        correct, loss_sum = 0, 0.0
        ok = ffi.new("int *")
        ls = ffi.new("double *")
        for a in range(0, n, chunk):
            k = min(chunk, n - a)
            call(lib.vdnn_net_eval_batch, self._h, _ptr("float *", x[a:a + k]), _ptr("int32_t *", y[a:a + k]), k,
                 ok, ls)
            correct += ok[0]
            loss_sum += ls[0]
        return correct / n, loss_sum / n

    def predict(self, images):
        """Softmax probabilities, float32 (n, classes), of images (float32 (n, c, h, w))."""
        x = _images(images, "images", self.input_shape)
        n = x.shape[0]
        out = np.empty((n, self.classes) if self._per == 1 else (n, self._per, self.classes), np.float32)
        chunk = self._eval_chunk()
        for a in range(0, n, chunk):
            k = min(chunk, n - a)
            call(lib.vdnn_net_predict, self._h, _ptr("float *", x[a:a + k]), k, _ptr("float *", out[a:a + k]))
        return out

    def forward(self, images):
        """Evaluation-mode logits, float32 (n, classes), of images (float32 (n, c, h, w)): the values vdnn's
        softmax loss starts from."""
        x = _images(images, "images", self.input_shape)
        n = x.shape[0]
        out = np.empty((n, self.classes) if self._per == 1 else (n, self._per, self.classes), np.float32)
        chunk = self._eval_chunk()
        for a in range(0, n, chunk):
            k = min(chunk, n - a)
            call(lib.vdnn_net_forward, self._h, _ptr("float *", x[a:a + k]), k, _ptr("float *", out[a:a + k]))
        return out

    # ---- parameters ----

    def param_info(self):
        """Every parameter and buffer a checkpoint holds, as vdnn.ParamInfo rows."""
        out = []
        pi = ffi.new("vdnn_param_info *")
        for i in range(lib.vdnn_net_param_count(self._h)):
            call(lib.vdnn_net_param_info, self._h, i, pi)
            d = struct_dict(pi[0])
            out.append(ParamInfo(d["name"], d["layer"], d["kind"], d["count"]))
        return out

    def _info(self, name):
        info = {p.name: p for p in self.param_info()}
        if name not in info:
            raise InvalidArgError("no parameter named '%s' (the net has %s)" % (name, ", ".join(info)))
        return info

    def get(self, name):
        """One parameter or buffer by name ("conv1.weight", ...), as a new float32 array of its count."""
        info = self._info(name)
        a = np.empty(info[name].count, np.float32)
        call(lib.vdnn_net_get, self._h, encode(name), _ptr("float *", a), a.size)
        return a

    def set(self, name, values):
        """Writes one parameter or buffer by name from a float32 array of its count (any shape)."""
        info = self._info(name)
        if not isinstance(values, np.ndarray) or values.dtype != np.float32:
            raise ValueError("%s: a float32 numpy array expected, got %s" % (
                name, values.dtype if isinstance(values, np.ndarray) else type(values).__name__))
        if values.size != info[name].count:
            raise ValueError("%s: %d values expected, got %d (shape %s)" % (name, info[name].count, values.size,
                                                                            tuple(values.shape)))
        a = np.ascontiguousarray(values).reshape(-1)
        call(lib.vdnn_net_set, self._h, encode(name), _ptr("float *", a), a.size)

    def params(self, layer=None, momentum=False):
        """{name: float32 array} of the weights, biases and batch-norm statistics (and, with momentum=True, the
        optimizer's momentum buffers); of one layer only when layer names it (params("conv1"))."""
        info = self.param_info()
        if layer is not None and not any(p.layer == layer for p in info):
            raise InvalidArgError("no layer named '%s' with parameters (layers: %s)"
                                  % (layer, ", ".join(dict.fromkeys(p.layer for p in info))))
        return {p.name: self.get(p.name) for p in info
                if (momentum or p.kind not in ("wmom", "bmom")) and (layer is None or p.layer == layer)}

    def set_params(self, params):
        """Writes each {name: float32 array} entry (any subset of params(momentum=True))."""
        for name, values in params.items():
            self.set(name, values)

    # ---- checkpoints, plan, statistics ----

    def save(self, path):
        """Writes a checkpoint (parameters, momentum, statistics, step, seed), atomically."""
        call(lib.vdnn_net_save, self._h, encode(str(path)))

    def export_onnx(self, path):
        """Writes the ONNX model the net was loaded from with its current parameters and batch-norm statistics as
        initializers (atomically); vdnn.Error for a net whose model is not an ONNX file."""
        call(lib.vdnn_net_export_onnx, self._h, encode(str(path)))

    def load(self, path):
        """Reads a checkpoint back: vdnn.FormatError for a damaged file, vdnn.MismatchError for another model's."""
        call(lib.vdnn_net_load, self._h, encode(str(path)))

    @property
    def plan(self):
        """The training plan the net runs (a vdnn.Plan)."""
        return Plan(lib.vdnn_net_plan(self._h), owner=self)

    @property
    def stats(self):
        """The fields of vdnn_net_stats as a dict: step, epoch, peak_device_bytes (measured), device_bytes,
        host_bytes, bytes_moved, last_step_s, policy, batch, input, classes, ..."""
        s = ffi.new("vdnn_net_stats *")
        lib.vdnn_net_get_stats(self._h, s)
        d = struct_dict(s[0])
        d["policy"] = POLICIES[d["policy"]]
        return d

    @property
    def step(self):
        return self.stats["step"]

    # ---- the training loop ----

    def train(self, data, test=None, epochs=None, steps=None, lr=None, lr_schedule=None, log_every=None,
              save=None, evaluate=None, progress=None):
        """Runs the library's training loop (what `vdnn train` runs) on a vdnn.Dataset: shuffled batches, the
        learning-rate schedule ("constant", "step:N:GAMMA", "cosine[:MIN_LR]", each with ",warmup=N"; default
        cosine), a checkpoint after every epoch and at the end when save is a path, evaluation on test at the end.
        epochs / steps count from the start of training, so a net loaded from a checkpoint continues.
        progress(p) is called every log_every steps, at each epoch's end and at the last step with a dict of
        step, total, epoch, loss, lr, images_per_sec, elapsed_s; an exception it raises is raised again here
        after the loop ends. Returns the result as a dict (steps, final_loss, test_accuracy (-1: not evaluated),
        test_loss, images_per_sec, step_seconds, peak_device_bytes, ...)."""
        if not isinstance(data, Dataset):
            raise TypeError("data: a vdnn.Dataset, not %s" % type(data).__name__)
        if test is not None and not isinstance(test, Dataset):
            raise TypeError("test: a vdnn.Dataset or None, not %s" % type(test).__name__)
        o = ffi.new("vdnn_train_options *")
        o[0] = lib.vdnn_train_options_default()
        keep = []  # C strings and the callback live until the loop returns
        if epochs is not None:
            o.epochs = c_int(epochs, "epochs")
        if steps is not None:
            o.steps = c_int(steps, "steps", -2**63, 2**63 - 1)
        if lr is not None:
            o.lr = lr
        if lr_schedule is not None:
            keep.append(ffi.new("char[]", encode(lr_schedule)))
            o.lr_schedule = keep[-1]
        if log_every is not None:
            o.log_every = c_int(log_every, "log_every")
        if save is not None:
            keep.append(ffi.new("char[]", encode(str(save))))
            o.save_path = keep[-1]
        if evaluate is not None:
            o.evaluate = bool(evaluate)
        raised = []
        if progress is not None:
            @ffi.callback("void(void *, const vdnn_progress *)")
            def on_progress(_ctx, p):
                if raised:
                    return
                try:
                    progress(struct_dict(p[0]))
                except BaseException as e:  # C cannot unwind Python: kept, raised when the loop returns
                    raised.append(e)
            keep.append(on_progress)
            o.progress = on_progress
        r = ffi.new("vdnn_train_result *")
        err = new_error()
        status = lib.vdnn_train_run(self._h, data._h, test._h if test is not None else ffi.NULL, o, r, err)
        if raised:
            raise raised[0]
        check(status, err)
        return struct_dict(r[0])

    def __repr__(self):
        return "vdnn.Net(%s, %s, batch %d, policy %s)" % (self.model.name, self.backend.name, self.batch,
                                                          self.stats["policy"])
