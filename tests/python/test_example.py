"""examples/train_plan.py runs as a user would run it and prints what examples/train_plan.c prints."""
import os
import re
import subprocess
import sys

from conftest import ROOT, run_cli


def test_python_example_runs():
    p = subprocess.run([sys.executable, os.path.join("examples", "train_plan.py"), "models/lenet.cfg"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    m = re.match(r"plan: lenet, policy auto, peak (\d+) bytes under a 11534336 byte budget \(fits\)", lines[0])
    assert m, p.stdout
    # The peak is the command's for the same request (the example keeps the library's convolution algorithms).
    want = run_cli("plan", "models/lenet.cfg", "--batch", 16, "--policy", "auto", "--budget", "11MiB",
                   "--conv-algo", "default", "--json").stdout
    assert '"peak_device_bytes": %s,' % m.group(1) in want
    assert len([ln for ln in lines if re.fullmatch(r"step [1-3]: loss \d+\.\d{4}", ln)]) == 3
    assert re.fullmatch(r"measured peak (\d+) bytes, planned \1", lines[-1])


def test_python_example_reports_a_bad_budget():
    p = subprocess.run([sys.executable, os.path.join("examples", "train_plan.py"), "models/lenet.cfg", "1KiB"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode != 0 and "does not fit" in p.stdout
    assert "vdnn.BudgetError: memory budget too small" in p.stderr
