"""One exception class per vdnn_status, all under vdnn.Error, carrying the library's message.

A caller catches vdnn.Error for any library failure or one subclass (vdnn.BudgetError, ...) for one kind; the
invalid-argument and shape errors are also ValueErrors, as Python code expects of a bad value.
"""


class Error(Exception):
    """A libvdnn call failed. status: the vdnn_status number; status_name: its name; message: the library's text."""

    status = None   # the number, bound from the loaded library (its enum, not a copy of it)
    c_name = None   # the enum constant's name

    def __init__(self, message, status=None, status_name=None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.status_name = status_name


class InvalidArgError(Error, ValueError):
    """VDNN_ERR_INVALID_ARG: a bad value or option (the message names the field and its range)."""
    c_name = "VDNN_ERR_INVALID_ARG"


class ParseError(Error):
    """VDNN_ERR_PARSE: a malformed model file (the message names the file and line)."""
    c_name = "VDNN_ERR_PARSE"


class ShapeError(Error, ValueError):
    """VDNN_ERR_SHAPE: shapes do not fit together."""
    c_name = "VDNN_ERR_SHAPE"


class FileError(Error):
    """VDNN_ERR_IO: a file could not be opened, read or written."""
    c_name = "VDNN_ERR_IO"


class FormatError(Error):
    """VDNN_ERR_FORMAT: a data or checkpoint file is truncated or corrupt."""
    c_name = "VDNN_ERR_FORMAT"


class NoMemoryError(Error, MemoryError):
    """VDNN_ERR_NO_MEMORY: the system allocator failed."""
    c_name = "VDNN_ERR_NO_MEMORY"


class BudgetError(Error):
    """VDNN_ERR_BUDGET: the plan does not fit the memory budget (the message names the smallest that works)."""
    c_name = "VDNN_ERR_BUDGET"


class BackendError(Error):
    """VDNN_ERR_BACKEND: a compute library reported a failure."""
    c_name = "VDNN_ERR_BACKEND"


class NoDeviceError(Error):
    """VDNN_ERR_NO_DEVICE: the requested device is not present."""
    c_name = "VDNN_ERR_NO_DEVICE"


class UnsupportedError(Error):
    """VDNN_ERR_UNSUPPORTED: a valid request this build cannot serve."""
    c_name = "VDNN_ERR_UNSUPPORTED"


class MismatchError(Error):
    """VDNN_ERR_MISMATCH: a checkpoint or profile does not belong to this model."""
    c_name = "VDNN_ERR_MISMATCH"


CLASSES = (InvalidArgError, ParseError, ShapeError, FileError, FormatError, NoMemoryError, BudgetError, BackendError,
           NoDeviceError, UnsupportedError, MismatchError)
BY_STATUS = {}
for _c in (Error,) + CLASSES:
    _c.__module__ = "vdnn"  # tracebacks name them as a caller spells them: vdnn.BudgetError


def bind(lib):
    """Gives each class its status number as the loaded library's enum has it."""
    for c in CLASSES:
        c.status = int(getattr(lib, c.c_name))
        BY_STATUS[c.status] = c


def from_status(status, name, message):
    """The exception for a status; one the package does not know yet is a plain Error, still carrying it."""
    cls = BY_STATUS.get(status, Error)
    return cls(message or name, status, name)
