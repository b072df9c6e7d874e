"""The package's C declarations are the headers': python/vdnn/_cdef.py is what python/gen_cdef.py makes of
include/vdnn/*.h now, and every struct's size and field offsets and every enum value cffi computes from it are
what the C compiler computes from the headers."""
import os
import shutil
import subprocess
import sys

import pytest

import vdnn
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "python"))
import gen_cdef  # noqa: E402


def test_cdef_is_generated_from_the_headers():
    with open(os.path.join(ROOT, "python", "vdnn", "_cdef.py"), encoding="utf-8") as f:
        committed = f.read()
    assert committed == gen_cdef.module_text(), \
        "python/vdnn/_cdef.py is stale: run /usr/bin/python3 python/gen_cdef.py after changing include/vdnn/*.h"


def test_generator_notices_a_header_change(tmp_path):
    # The check above can fail: a new field in a copy of the headers changes the text.
    inc = tmp_path / "vdnn"
    shutil.copytree(os.path.join(ROOT, "include", "vdnn"), inc)
    mem = (inc / "memory.h").read_text()
    (inc / "memory.h").write_text(mem.replace("    bool poison;", "    bool poison;\n    int new_option;"))
    assert "int new_option;" in gen_cdef.cdef_text(str(inc))
    assert gen_cdef.cdef_text(str(inc)) != gen_cdef.cdef_text()


def test_layouts_match_the_compiler(tmp_path):
    ffi = vdnn._lib.ffi
    cc = shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler to compare layouts with")
    structs = [t for t in ffi.list_types()[0] if ffi.typeof(t).kind == "struct" and ffi.typeof(t).fields]
    enums = [n for n in dir(vdnn._lib.lib) if n.startswith("VDNN_") and isinstance(getattr(vdnn._lib.lib, n), int)]
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include <vdnn/vdnn.h>', 'int main(void) {']
    want = []
    for t in structs:
        lines.append('printf("%%zu\\n", sizeof(%s));' % t)
        want.append(ffi.sizeof(t))
        for name, field in ffi.typeof(t).fields:
            lines.append('printf("%%zu\\n", offsetof(%s, %s));' % (t, name))
            want.append(field.offset)
    for n in enums:
        lines.append('printf("%%lld\\n", (long long)(%s));' % n)
        want.append(getattr(vdnn._lib.lib, n))
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", os.path.join(ROOT, "include"), str(src), "-o", str(exe)], check=True)
    got = [int(v) for v in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()]
    assert len(structs) >= 15 and len(enums) >= 30
    assert got == want
