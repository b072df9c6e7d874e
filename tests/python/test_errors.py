"""Failures raise vdnn.Error subclasses carrying the library's message (or ValueError naming the argument before
any C call), and nothing crashes: a malformed model, a budget too small, wrong arrays, bad options and files."""
import numpy as np
import pytest

import vdnn
from conftest import ROOT

BATCH = 4


def test_every_status_has_its_class():
    lib = vdnn._lib.lib
    names = [n for n in dir(lib) if n.startswith("VDNN_ERR_")]
    assert len(names) == len(vdnn._errors.CLASSES)
    for n in names:
        cls = vdnn._errors.BY_STATUS[getattr(lib, n)]
        assert issubclass(cls, vdnn.Error) and cls.c_name == n


def test_malformed_model_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.cfg"
    bad.write_text("[net]\ninput=1x28x28\nclasses=10\n[conv1]\ntype=convv\n")
    with pytest.raises(vdnn.ParseError) as e:
        vdnn.Model.load(str(bad))
    assert str(bad) in str(e.value) and ":5:" in str(e.value) and "convv" in str(e.value)
    assert e.value.status == vdnn._lib.lib.VDNN_ERR_PARSE and e.value.status_name == "parse error"
    with pytest.raises(vdnn.ParseError, match=r"mine.cfg:6: outputs=-3 is out of range"):
        vdnn.Model.load("[net]\ninput=1x8x8\nclasses=3\n[fc]\ntype=fc\noutputs=-3\n", source="mine.cfg")
    with pytest.raises(vdnn.FileError, match="nothere.cfg"):
        vdnn.Model.load(str(tmp_path / "nothere.cfg"))
    with pytest.raises(TypeError):
        vdnn.Model.load(42)


def test_budget_too_small(lenet, cpu):
    plan = vdnn.plan(lenet, batch=16, policy="none", budget="1MiB")
    assert not plan.feasible and plan.min_budget_bytes > 1 << 20
    with pytest.raises(vdnn.BudgetError) as e:
        vdnn.Net(lenet, cpu, batch=16, policy="none", budget="1MiB")
    # The message names the smallest budget that works, as the plan made alone does.
    assert "needs at least" in str(e.value) and "(%d bytes)" % plan.min_budget_bytes in str(e.value)


def test_wrong_arrays_raise_value_errors_naming_them(lenet, cpu):
    net = vdnn.Net(lenet, cpu, batch=BATCH)
    x = np.zeros((BATCH, 1, 28, 28), np.float32)
    y = np.zeros(BATCH, np.int64)
    with pytest.raises(ValueError, match=r"images: shape \(4, 1, 28, 28\) expected, got \(4, 1, 28, 29\)"):
        net.train_step(np.zeros((BATCH, 1, 28, 29), np.float32), y)
    with pytest.raises(ValueError, match=r"images: shape \(4, 1, 28, 28\) expected, got \(3, 1, 28, 28\)"):
        net.train_step(x[:3], y)
    with pytest.raises(ValueError, match=r"images: dtype float32 expected \(shape \(4, 1, 28, 28\)\), got float64"):
        net.train_step(x.astype(np.float64), y)
    with pytest.raises(ValueError, match=r"images: a numpy array of float32 \(4, 1, 28, 28\), not list"):
        net.train_step(x.tolist(), y)
    with pytest.raises(ValueError, match=r"labels: shape \(4,\) expected, got \(4, 1\)"):
        net.train_step(x, y.reshape(4, 1))
    with pytest.raises(ValueError, match="labels: an integer dtype expected"):
        net.train_step(x, y.astype(np.float32))
    with pytest.raises(ValueError, match=r"labels: labels must lie in 0 .. 9 \(10 classes\), got 0 .. 10"):
        net.train_step(x, np.array([0, 1, 2, 10]))
    with pytest.raises(ValueError, match=r"images: shape \(N, 1, 28, 28\) expected, got \(2, 3, 28, 28\)"):
        net.evaluate(np.zeros((2, 3, 28, 28), np.float32), y[:2])
    with pytest.raises(ValueError, match=r"images: shape \(N, 1, 28, 28\)"):
        net.predict(np.zeros((0, 1, 28, 28), np.float32))
    # Nothing reached C: the net has taken no step, and a good batch still trains.
    assert net.step == 0
    assert np.isfinite(net.train_step(x, y)) and net.step == 1
    # A strided (non-contiguous) batch is copied, not refused.
    wide = np.zeros((BATCH, 1, 28, 56), np.float32)
    assert np.isfinite(net.train_step(wide[:, :, :, ::2], y))


def test_bad_options_name_the_field(lenet, cpu):
    with pytest.raises(vdnn.InvalidArgError, match="memory.policy: unknown policy 'fastest'"):
        vdnn.plan(lenet, policy="fastest")
    with pytest.raises(vdnn.InvalidArgError, match="memory.budget: 'lots' is not a size"):
        vdnn.MemoryOptions(budget="lots")
    with pytest.raises(vdnn.InvalidArgError, match="memory.micro_batches"):
        vdnn.Net(lenet, cpu, batch=BATCH, micro_batches=-1)
    with pytest.raises(vdnn.InvalidArgError, match="batch"):
        vdnn.plan(lenet, batch=100000000)
    with pytest.raises(vdnn.InvalidArgError, match=r"batch: 4294967296 is out of range"):
        vdnn.Net(lenet, cpu, batch=2**32)
    with pytest.raises(vdnn.InvalidArgError, match="lr_schedule"):
        net = vdnn.Net(lenet, cpu, batch=BATCH)
        net.train(vdnn.Dataset("synthetic", model=lenet, batch=BATCH), steps=1, lr_schedule="zigzag")
    with pytest.raises(vdnn.NoDeviceError if vdnn.Backend("auto").name == "cpu" else vdnn.Error):
        vdnn.Backend("cuda:99")
    with pytest.raises(vdnn.Error):
        vdnn.Backend("tpu")


def test_bad_files_and_data(tmp_path, lenet, cpu):
    net = vdnn.Net(lenet, cpu, batch=BATCH)
    net.save(tmp_path / "ok.ckpt")
    blob = (tmp_path / "ok.ckpt").read_bytes()
    (tmp_path / "cut.ckpt").write_bytes(blob[:len(blob) // 2])
    with pytest.raises(vdnn.FormatError, match="cut.ckpt"):
        net.load(tmp_path / "cut.ckpt")
    other = vdnn.Model.load(ROOT + "/models/alexnet.cfg")
    with pytest.raises(vdnn.MismatchError):
        vdnn.Net(other, cpu, batch=1, input_shape=(3, 67, 67)).load(tmp_path / "ok.ckpt")
    with pytest.raises(vdnn.FileError, match="missing.ckpt"):
        net.load(tmp_path / "missing.ckpt")
    with pytest.raises(vdnn.Error, match="nodir"):
        vdnn.Dataset("idx:" + str(tmp_path / "nodir"))
    with pytest.raises(vdnn.InvalidArgError, match="split: 'validation'"):
        vdnn.Dataset("synthetic", "validation", model=lenet)
    wrong = vdnn.Dataset("synthetic", input_shape=(3, 28, 28), classes=10, batch=BATCH)
    with pytest.raises(vdnn.ShapeError, match="3x28x28 but the net takes 1x28x28"):
        net.train(wrong, steps=1)
