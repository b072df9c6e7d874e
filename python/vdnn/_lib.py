"""Finds and opens libvdnn.so through cffi's ABI mode (no compiler needed), and turns C statuses into exceptions.

Where the library is looked for, first hit wins:
  1. the environment variable VDNN_LIBRARY: the path of libvdnn.so (or of a directory holding it);
  2. an install prefix this package lies in (PREFIX/lib/python3/dist-packages/vdnn -> PREFIX/lib*/libvdnn.so);
  3. the source tree this package lies in: python/vdnn -> build/libvdnn.so (the Makefile's build directory);
  4. the system's loader path (libvdnn.so.MAJOR.MINOR, then libvdnn.so).
"""
import glob
import os
import re

import cffi

from ._cdef import CDEF
from . import _errors

ffi = cffi.FFI()
ffi.cdef(CDEF)

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("VDNN_LIBRARY")
    if env:
        # An explicit choice is never second-guessed: a wrong path fails here rather than loading another copy.
        return [os.path.join(env, "libvdnn.so") if os.path.isdir(env) else env], True
    repo = os.path.dirname(os.path.dirname(_HERE))
    if os.path.exists(os.path.join(repo, "CMakeLists.txt")):  # the source tree
        return [p for p in [os.path.join(repo, "build", "libvdnn.so")] if os.path.exists(p)], False
    up = _HERE
    for _ in range(4):  # vdnn -> dist-packages -> python3 -> lib -> PREFIX
        up = os.path.dirname(up)
        found = sorted(glob.glob(os.path.join(up, "lib*", "libvdnn.so"))) + \
            sorted(glob.glob(os.path.join(up, "lib", "*", "libvdnn.so")))
        if found:
            return found, False
    return [], False


def _open():
    paths, explicit = _candidates()
    tried = []
    for p in paths:
        try:
            return ffi.dlopen(os.path.abspath(p)), os.path.abspath(p)
        except OSError as e:
            tried.append("%s (%s)" % (p, e))
    if not explicit:
        ver = dict(re.findall(r"#define VDNN_VERSION_(MAJOR|MINOR) (\d+)", CDEF))
        soname = "libvdnn.so.%s.%s" % (ver["MAJOR"], ver["MINOR"])
        for name in (soname, "libvdnn.so"):
            try:
                return ffi.dlopen(name), name
            except OSError as e:
                tried.append("%s (%s)" % (name, e))
    raise ImportError("vdnn: cannot load libvdnn.so; set VDNN_LIBRARY to its path. Tried: " +
                      ("; ".join(tried) if tried else "nothing (VDNN_LIBRARY names no file)"))


lib, path = _open()
# Resolve every symbol now: cffi resolves a lib attribute on first use under a lock that is not re-entrant, and
# a destructor run by the garbage collector inside such a resolution would wait on that lock for ever.
for _name in dir(lib):
    try:
        getattr(lib, _name)
    except AttributeError:  # declared but not exported by this build: fails when called, as C would not link
        pass
_errors.bind(lib)


def new_error():
    err = ffi.new("vdnn_error *")
    err.status = lib.VDNN_OK
    return err


def check(status, err):
    """Raises the vdnn.Error subclass of a failed call's status, with the library's message."""
    if status != lib.VDNN_OK:
        msg = ffi.string(err.msg).decode("utf-8", "replace")
        name = ffi.string(lib.vdnn_status_name(status)).decode()
        raise _errors.from_status(int(status), name, msg)


def call(fn, *args):
    """Calls a fallible C function whose last argument is a vdnn_error *, raising on failure."""
    err = new_error()
    check(fn(*args, err), err)


def text(p):
    """A C string (char * or char array) as str; None for NULL."""
    if p == ffi.NULL:
        return None
    return ffi.string(p).decode("utf-8", "replace")


def struct_dict(cdata):
    """The fields of a C struct as a dict of Python values (char arrays as str, nested structs as dicts)."""
    out = {}
    for name, field in ffi.typeof(cdata).fields:
        v = getattr(cdata, name)
        t = field.type
        if t.kind == "array" and t.item.cname == "char":
            v = ffi.string(v).decode("utf-8", "replace")
        elif t.kind == "array":
            v = list(v)
        elif t.kind == "struct":
            v = struct_dict(v)
        out[name] = v
    return out


def encode(s):
    return s.encode("utf-8") if isinstance(s, str) else s


def c_int(value, field, lo=-2**31, hi=2**31 - 1):
    """value as a C int, or vdnn.InvalidArgError naming the field and its range (cffi's own would not)."""
    if isinstance(value, bool) or not isinstance(value, (int, _integer_types())):
        raise _errors.InvalidArgError("%s: an integer, not %r" % (field, value))
    value = int(value)
    if not lo <= value <= hi:
        raise _errors.InvalidArgError("%s: %d is out of range (%d .. %d)" % (field, value, lo, hi))
    return value


def _integer_types():
    import numpy
    return numpy.integer
