"""vdnn from Python: plan and train networks whose memory exceeds the device's, over libvdnn.so (cffi, numpy).

    import vdnn
    model = vdnn.Model.load("models/lenet.cfg")
    plan = vdnn.plan(model, batch=16, policy="auto", budget="11MiB")
    print(plan.feasible, plan.peak_device_bytes, plan.classes)
    net = vdnn.Net(model, vdnn.Backend("cpu"), batch=16, policy="auto", budget="11MiB")
    loss = net.train_step(images, labels)          # float32 (16, 1, 28, 28), integers (16,)

The library is found through VDNN_LIBRARY (its path), else the install prefix or source tree this package lies
in, else the system's loader path. Every library failure raises a vdnn.Error subclass carrying its message.
"""
from ._lib import path as library_path, lib as _clib, text as _text
from ._errors import (Error, InvalidArgError, ParseError, ShapeError, FileError, FormatError, NoMemoryError,
                      BudgetError, BackendError, NoDeviceError, UnsupportedError, MismatchError)
from .memory import MemoryOptions, UNLIMITED, POLICIES, PRECISIONS
from .model import Model, Layer, Backend
from .plan import Plan, Tensor, plan, fit_head_groups, fit_attention
from .profile import Profile
from .data import Dataset
from .net import Net, ParamInfo


def version():
    """The loaded library's version, "MAJOR.MINOR.PATCH"."""
    return _text(_clib.vdnn_version())


__all__ = ["version", "library_path", "Error", "InvalidArgError", "ParseError", "ShapeError", "FileError",
           "FormatError", "NoMemoryError", "BudgetError", "BackendError", "NoDeviceError", "UnsupportedError",
           "MismatchError", "MemoryOptions", "UNLIMITED", "POLICIES", "PRECISIONS", "Model", "Layer", "Backend", "Plan",
           "Tensor", "plan", "fit_head_groups", "fit_attention", "Profile", "Dataset", "Net", "ParamInfo"]
