"""vdnn.Dataset: labelled images by spec string, as numpy arrays, in the order the training loop visits them."""
import numpy as np

from ._lib import ffi, lib, call, text, encode, c_int
from ._errors import InvalidArgError

_SPLITS = {"train": lib.VDNN_SPLIT_TRAIN, "test": lib.VDNN_SPLIT_TEST}


def _view(owner, ptr, count, dtype, shape):
    """A read-only numpy view of count items at ptr that keeps owner (whose memory it is) alive."""
    if count == 0:
        return np.zeros(shape, dtype)
    # The gc'd pointer's destructor holds owner: the array -> the buffer -> this pointer -> owner.
    keep = ffi.gc(ffi.cast(ffi.typeof(ptr), ptr), lambda _p, _owner=owner: None)
    a = np.frombuffer(ffi.buffer(keep, count * np.dtype(dtype).itemsize), dtype=dtype).reshape(shape)
    a.flags.writeable = False
    return a


class Dataset:
    """One split of a data spec, normalised per channel with the training split's mean and deviation:
      "fashion-mnist"  Debian's dataset-fashion-mnist;   "idx:DIR"  MNIST-style IDX files in DIR;
      "cifar10:DIR"    CIFAR-10's binary batches in DIR; "synthetic"  seeded random images;
      "text:FILE"      a file's bytes as tokens (text:DIR: a directory's text files); "tokens:FILE"  llm.c's .bin,
                       in sequences of input_shape (1, T, 1)'s T tokens (the model's), one label per token.
    split: "train" or "test". For "synthetic": input_shape (c, h, w) and classes (or model, whose defaults they
    then are), seed, and batch (the train split has 1024 images, or batch if more), as `vdnn train` opens it.
    Truncated or corrupt files raise vdnn.FormatError naming the file.
    """

    def __init__(self, spec, split="train", input_shape=None, classes=0, seed=1, batch=0, model=None):
        if split not in _SPLITS:
            raise InvalidArgError("split: '%s' is neither 'train' nor 'test'" % (split,))
        if model is not None:
            from .model import Model
            input_shape, classes = Model.of(model).resolve(input_shape, classes)
        c, h, w = (int(v) for v in input_shape) if input_shape is not None else (0, 0, 0)
        out = ffi.new("vdnn_dataset_t **")
        call(lib.vdnn_dataset_open, encode(spec), _SPLITS[split], (c_int(batch, "batch"), c, h, w),
             c_int(classes, "classes"), c_int(seed, "seed", 0, 2**64 - 1), out)
        self._h = ffi.gc(out[0], lib.vdnn_dataset_free)
        self.split = split

    @property
    def shape(self):
        """(n, c, h, w): the image count and one image's shape."""
        s = lib.vdnn_dataset_shape(self._h)
        return (s.n, s.c, s.h, s.w)

    def __len__(self):
        return self.shape[0]

    @property
    def classes(self):
        return lib.vdnn_dataset_classes(self._h)

    @property
    def source(self):
        return text(lib.vdnn_dataset_source(self._h))

    @property
    def images(self):
        """All images, float32 (n, c, h, w), read-only (the dataset's own memory)."""
        n, c, h, w = self.shape
        return _view(self, lib.vdnn_dataset_images(self._h), n * c * h * w, np.float32, (n, c, h, w))

    @property
    def labels_per_image(self):
        """1, or a sequence dataset's (text:, tokens:) tokens per sequence: each token's label is the next token."""
        return lib.vdnn_dataset_labels_per_image(self._h)

    @property
    def labels(self):
        """All labels, int32 (n,), read-only; a sequence dataset's (n, tokens per sequence)."""
        per = self.labels_per_image
        shape = (len(self),) if per == 1 else (len(self), per)
        return _view(self, lib.vdnn_dataset_labels(self._h), len(self) * per, np.int32, shape)

    def order(self, seed, epoch):
        """The image indices in the order Net.train visits them in epoch `epoch` of a net seeded `seed`."""
        out = np.empty(len(self), np.int32)
        call(lib.vdnn_dataset_order, self._h, c_int(seed, "seed", 0, 2**64 - 1),
             c_int(epoch, "epoch", -2**63, 2**63 - 1), ffi.cast("int32_t *", out.ctypes.data))
        return out

    def batches(self, batch, seed, steps, start=0):
        """Yields (images, labels) of global steps start .. steps-1 as Net.train would feed them to a net seeded
        `seed` at this batch: each epoch's order drawn from (seed, epoch), its last partial batch dropped."""
        per_epoch = len(self) // batch
        if per_epoch < 1:
            raise InvalidArgError("batch: %d is more than the %d images of %s" % (batch, len(self), self.source))
        images, labels = self.images, self.labels
        order, epoch = None, -1
        for s in range(start, steps):
            if s // per_epoch != epoch:
                epoch = s // per_epoch
                order = self.order(seed, epoch)
            idx = order[(s % per_epoch) * batch:(s % per_epoch + 1) * batch]
            yield images[idx], labels[idx]

    def __repr__(self):
        return "vdnn.Dataset(%r, %s, %d images of %dx%dx%d, %d classes)" % ((self.source, self.split) + self.shape
                                                                              + (self.classes,))
