"""Parameters and buffers round-trip through numpy by name, and what is written is what the net computes with."""
import numpy as np
import pytest

import vdnn

BATCH = 8


def test_params_round_trip(lenet, cpu):
    a = vdnn.Net(lenet, cpu, batch=BATCH, seed=1)
    b = vdnn.Net(lenet, cpu, batch=BATCH, seed=2)
    info = a.param_info()
    names = [p.name for p in info]
    assert "conv1.weight" in names and "bn1.stats" in names and "fc2.bias.momentum" in names
    got = a.params()
    assert set(got) == {p.name for p in info if p.kind not in ("wmom", "bmom")}
    for p in info:
        assert a.get(p.name).shape == (p.count,) and a.get(p.name).dtype == np.float32
    assert not np.array_equal(got["fc1.weight"], b.get("fc1.weight"))  # the seeds differ
    b.set_params(a.params(momentum=True))
    for p in info:
        assert np.array_equal(a.get(p.name), b.get(p.name)), p.name
    # Same parameters, same predictions; then one changed weight changes them.
    ds = vdnn.Dataset("synthetic", "test", model=lenet, seed=3, batch=BATCH)
    x = np.array(ds.images[:BATCH])
    assert np.array_equal(a.predict(x), b.predict(x))
    w = b.get("fc2.weight")
    w[:] = 0
    b.set("fc2.weight", w.reshape(10, -1))  # any shape with the right count
    b.set("fc2.bias", np.arange(10, dtype=np.float32))
    assert np.array_equal(b.get("fc2.weight"), np.zeros_like(w))
    assert (b.predict(x).argmax(axis=1) == 9).all()


def test_values_survive_a_checkpoint(tmp_path, lenet, cpu):
    a = vdnn.Net(lenet, cpu, batch=BATCH, seed=1)
    rng = np.random.default_rng(0)
    want = {name: rng.standard_normal(v.size).astype(np.float32) for name, v in a.params(momentum=True).items()}
    a.set_params(want)
    a.save(tmp_path / "a.ckpt")
    b = vdnn.Net(lenet, cpu, batch=BATCH, seed=5)
    b.load(str(tmp_path / "a.ckpt"))
    for name, v in want.items():
        assert np.array_equal(b.get(name), v), name


def test_param_errors_name_the_parameter(lenet, cpu):
    net = vdnn.Net(lenet, cpu, batch=BATCH)
    with pytest.raises(vdnn.InvalidArgError, match="no parameter named 'conv9.weight'"):
        net.get("conv9.weight")
    with pytest.raises(ValueError, match=r"conv1.weight: 800 values expected, got 799"):
        net.set("conv1.weight", np.zeros(799, np.float32))
    with pytest.raises(ValueError, match="conv1.weight: a float32 numpy array expected, got float64"):
        net.set("conv1.weight", np.zeros(800))


def test_params_of_one_layer(lenet, cpu):
    net = vdnn.Net(lenet, cpu, batch=BATCH)
    assert set(net.params("bn1")) == {"bn1.weight", "bn1.bias", "bn1.stats"}
    assert set(net.params("fc2", momentum=True)) == {"fc2.weight", "fc2.bias", "fc2.weight.momentum",
                                                     "fc2.bias.momentum"}
    with pytest.raises(vdnn.InvalidArgError, match="no layer named 'relu1' with parameters"):
        net.params("relu1")


def test_dataset_arrays_keep_their_dataset_alive(lenet):
    import gc
    import weakref
    ds = vdnn.Dataset("synthetic", "test", model=lenet, seed=3, batch=BATCH)
    ref = weakref.ref(ds)
    images, labels, n = ds.images, ds.labels, len(ds)
    want = np.array(images)
    del ds
    gc.collect()
    assert ref() is not None  # the arrays are views of its memory
    assert not images.flags.writeable and images.shape == (n, 1, 28, 28) and np.array_equal(images, want)
    del images, labels
    gc.collect()
    assert ref() is None
