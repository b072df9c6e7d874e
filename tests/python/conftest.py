"""Shared by the Python package's tests: the package from this source tree, the vdnn command, the models.

CTest sets VDNN_LIBRARY (this build's libvdnn.so), VDNN_CLI (its vdnn command) and PYTHONPATH; run by hand,
the tests take the package from python/ and the command from build/ (where `make` puts both).
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import vdnn  # noqa: E402  (after the path above)

CLI = os.environ.get("VDNN_CLI") or os.path.join(ROOT, "build", "vdnn")
LENET = os.path.join(ROOT, "models", "lenet.cfg")
# The same thread count for the command and the package: a training run's floating-point sums may depend on it.
THREADS = 2


def run_cli(*args, check=True):
    """Runs the vdnn command from the source tree; returns the CompletedProcess (text)."""
    p = subprocess.run([CLI] + [str(a) for a in args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    if check and p.returncode != 0:
        raise AssertionError("vdnn %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p


@pytest.fixture(scope="session")
def lenet():
    return vdnn.Model.load(LENET)


@pytest.fixture(scope="session")
def cpu():
    return vdnn.Backend("cpu", threads=THREADS)
