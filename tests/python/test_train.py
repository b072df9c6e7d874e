"""Training through Python writes the checkpoint `vdnn train` writes, byte for byte, for the same seed and data:
from numpy batches fed to Net.train_step in the loop's order, and through Net.train (the library's loop)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import vdnn
from conftest import LENET, ROOT, THREADS, run_cli

STEPS, BATCH, SEED, LR = 5, 16, 7, 0.05


def cli_checkpoint(tmp_path, data, steps=STEPS, extra=()):
    path = tmp_path / "cli.ckpt"
    run_cli("train", "--model", LENET, "--data", data, "--batch", BATCH, "--steps", steps, "--lr", LR,
            "--lr-schedule", "constant", "--seed", SEED, "--device", "cpu", "--threads", THREADS, "--no-eval",
            "--log-every", 1000, "--save", path, *extra)
    return path.read_bytes()


def new_net(lenet, cpu):
    # The command's memory options: the library's defaults, but planners choose convolution algorithms.
    return vdnn.Net(lenet, cpu, batch=BATCH, seed=SEED, conv_algo="choose")


def fashion_mnist_present():
    try:
        vdnn.Dataset("fashion-mnist", "test")
        return True
    except vdnn.Error:
        return False


@pytest.mark.parametrize("data", ["synthetic", "fashion-mnist"])
def test_train_steps_write_the_commands_checkpoint(tmp_path, lenet, cpu, data):
    if data == "fashion-mnist" and not fashion_mnist_present():
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    want = cli_checkpoint(tmp_path, data)
    net = new_net(lenet, cpu)
    ds = vdnn.Dataset(data, "train", model=lenet, seed=SEED, batch=BATCH)
    losses = [net.train_step(x, y, LR) for x, y in ds.batches(BATCH, SEED, STEPS)]
    assert all(np.isfinite(losses)) and len(losses) == STEPS
    net.save(tmp_path / "py.ckpt")
    got = (tmp_path / "py.ckpt").read_bytes()
    assert len(got) == len(want)
    assert got == want, "first difference at byte %d" % next(i for i in range(len(got)) if got[i] != want[i])


def test_train_loop_writes_the_commands_checkpoint(tmp_path, lenet, cpu):
    want = cli_checkpoint(tmp_path, "synthetic")
    net = new_net(lenet, cpu)
    ds = vdnn.Dataset("synthetic", "train", model=lenet, seed=SEED, batch=BATCH)
    reports = []
    r = net.train(ds, steps=STEPS, lr=LR, lr_schedule="constant", log_every=2, evaluate=False,
                  save=tmp_path / "loop.ckpt", progress=reports.append)
    assert r["steps"] == STEPS and r["steps_run"] == STEPS and r["test_accuracy"] == -1
    assert [p["step"] for p in reports] == [2, 4, 5]
    assert all(p["total"] == STEPS and p["lr"] == pytest.approx(LR) for p in reports)
    assert (tmp_path / "loop.ckpt").read_bytes() == want


def test_a_different_seed_gives_another_checkpoint(tmp_path, lenet, cpu):
    # The comparison above can fail: one more step, or another seed, changes the bytes.
    want = cli_checkpoint(tmp_path, "synthetic")
    net = vdnn.Net(lenet, cpu, batch=BATCH, seed=SEED + 1, conv_algo="choose")
    ds = vdnn.Dataset("synthetic", "train", model=lenet, seed=SEED, batch=BATCH)
    for x, y in ds.batches(BATCH, SEED + 1, STEPS):
        net.train_step(x, y, LR)
    net.save(tmp_path / "other.ckpt")
    assert (tmp_path / "other.ckpt").read_bytes() != want


def test_resume_continues_where_the_loop_stopped(tmp_path, lenet, cpu):
    ds = vdnn.Dataset("synthetic", "train", model=lenet, seed=SEED, batch=BATCH)
    test = vdnn.Dataset("synthetic", "test", model=lenet, seed=SEED, batch=BATCH)
    whole = new_net(lenet, cpu)
    r = whole.train(ds, test, steps=4, lr=LR, lr_schedule="constant", save=tmp_path / "whole.ckpt")
    assert 0 <= r["test_accuracy"] <= 1 and np.isfinite(r["test_loss"])
    half = new_net(lenet, cpu)
    half.train(ds, steps=2, lr=LR, lr_schedule="constant", evaluate=False, save=tmp_path / "half.ckpt")
    resumed = new_net(lenet, cpu)
    resumed.load(tmp_path / "half.ckpt")
    assert resumed.step == 2
    resumed.train(ds, steps=4, lr=LR, lr_schedule="constant", evaluate=False, save=tmp_path / "resumed.ckpt")
    assert (tmp_path / "resumed.ckpt").read_bytes() == (tmp_path / "whole.ckpt").read_bytes()
    acc, loss = resumed.evaluate(test)
    assert acc == pytest.approx(r["test_accuracy"]) and loss == pytest.approx(r["test_loss"])


def test_progress_exception_is_raised_after_the_loop(lenet, cpu):
    ds = vdnn.Dataset("synthetic", "train", model=lenet, seed=SEED, batch=BATCH)
    net = new_net(lenet, cpu)

    def stop(p):
        raise KeyboardInterrupt("stop at %d" % p["step"])

    with pytest.raises(KeyboardInterrupt, match="stop at 1"):
        net.train(ds, steps=2, log_every=1, evaluate=False, progress=stop)


def test_evaluate_and_predict_agree(lenet, cpu):
    net = new_net(lenet, cpu)
    ds = vdnn.Dataset("synthetic", "test", model=lenet, seed=SEED, batch=BATCH)
    x, y = ds.images[:40], ds.labels[:40]  # more than a batch: run in chunks
    acc, loss = net.evaluate(x, y)
    p = net.predict(x)
    assert p.shape == (40, 10) and np.allclose(p.sum(axis=1), 1, atol=1e-5)
    assert acc == pytest.approx(np.mean(p.argmax(axis=1) == y))
    assert loss == pytest.approx(-np.mean(np.log(p[np.arange(40), y])), rel=1e-4)
    st = net.stats
    assert st["batch"] == BATCH and st["step"] == 0 and st["peak_device_bytes"] > 0
    assert os.path.basename(lenet.source) == "lenet.cfg"


def test_loss_scaling_counts_skipped_steps(lenet, cpu):
    # Asked for on fp32 maps (fp16's is CUDA only): a power of two changes no float, and no step is skipped.
    net = vdnn.Net(lenet, cpu, batch=BATCH, seed=SEED, loss_scale=1024)
    ds = vdnn.Dataset("synthetic", "train", model=lenet, seed=SEED, batch=BATCH)
    for x, y in ds.batches(BATCH, SEED, 2):
        assert np.isfinite(net.train_step(x, y, LR))
    st = net.stats
    assert st["loss_scaling"] and st["loss_scale"] == 1024 and st["skipped_steps"] == 0 and st["step"] == 2
    plain = new_net(lenet, cpu).stats
    assert not plain["loss_scaling"] and plain["skipped_steps"] == 0
    with pytest.raises(vdnn.Error, match="loss_scale"):
        vdnn.Net(lenet, cpu, batch=BATCH, loss_scale=3)


def test_clipped_training_writes_the_commands_checkpoint(tmp_path, lenet, cpu):
    """Net(clip_grad_norm=X) is --clip-grad-norm X: the same bytes; and the clipping acts (another checkpoint)."""
    want = cli_checkpoint(tmp_path, "synthetic", extra=("--clip-grad-norm", 0.01))
    net = vdnn.Net(lenet, cpu, batch=BATCH, seed=SEED, conv_algo="choose", clip_grad_norm=0.01)
    ds = vdnn.Dataset("synthetic", "train", model=lenet, seed=SEED, batch=BATCH)
    for x, y in ds.batches(BATCH, SEED, STEPS):
        net.train_step(x, y, LR)
    net.save(tmp_path / "clipped.ckpt")
    assert (tmp_path / "clipped.ckpt").read_bytes() == want
    assert cli_checkpoint(tmp_path, "synthetic") != want
    with pytest.raises(vdnn.Error, match="clip_grad_norm"):
        vdnn.Net(lenet, cpu, batch=BATCH, clip_grad_norm=-1.0)


def test_adamw_training_writes_the_commands_checkpoint(tmp_path, lenet, cpu):
    """Net(optimizer="adamw", betas, eps, weight_decay) is --optimizer adamw with the same flags: the same bytes."""
    flags = ("--optimizer", "adamw", "--beta1", 0.8, "--beta2", 0.99, "--eps", 1e-6, "--weight-decay", 0.01)
    want = cli_checkpoint(tmp_path, "synthetic", extra=flags)
    net = vdnn.Net(lenet, cpu, batch=BATCH, seed=SEED, conv_algo="choose", optimizer="adamw", betas=(0.8, 0.99),
                   eps=1e-6, weight_decay=0.01)
    ds = vdnn.Dataset("synthetic", "train", model=lenet, seed=SEED, batch=BATCH)
    for x, y in ds.batches(BATCH, SEED, STEPS):
        net.train_step(x, y, LR)
    net.save(tmp_path / "adamw.ckpt")
    assert (tmp_path / "adamw.ckpt").read_bytes() == want
    assert cli_checkpoint(tmp_path, "synthetic", extra=flags[:2]) != want  # betas, eps and decay act
    with pytest.raises(vdnn.InvalidArgError, match="optimizer: 'adam' is none of sgd, adamw"):
        vdnn.Net(lenet, cpu, batch=BATCH, optimizer="adam")


def test_text_training_writes_the_commands_checkpoint(tmp_path, cpu):
    """A sequence model from a text dataset's batches (labels: the next token of every position) trains as
    `vdnn train --data text:FILE` does: the same bytes."""
    text = tmp_path / "words.txt"
    text.write_text("".join("line %d: the quick brown fox jumps over the lazy dog %d times.\n" % (i, i * i)
                            for i in range(200)))
    gpt = os.path.join(os.path.dirname(LENET), "gpt-mini.cfg")
    path = tmp_path / "cli.ckpt"
    run_cli("train", "--model", gpt, "--data", "text:%s" % text, "--batch", 4, "--steps", 3, "--lr", 0.001,
            "--lr-schedule", "constant", "--seed", SEED, "--device", "cpu", "--threads", THREADS, "--no-eval",
            "--optimizer", "adamw", "--save", path)
    ds = vdnn.Dataset("text:%s" % text, "train", model=gpt, seed=SEED, batch=4)
    assert ds.labels_per_image == 64 and ds.labels.shape == (len(ds), 64)
    # Each position's label is the token at the next position.
    assert (ds.labels[:, :-1] == ds.images[:, 0, 1:, 0]).all()
    net = vdnn.Net(gpt, cpu, batch=4, seed=SEED, conv_algo="choose", optimizer="adamw")
    for x, y in ds.batches(4, SEED, 3):
        net.train_step(x, y, 0.001)
    net.save(tmp_path / "py.ckpt")
    assert (tmp_path / "py.ckpt").read_bytes() == path.read_bytes()
    assert vdnn.Dataset("synthetic", "train", model=LENET).labels_per_image == 1


def test_nets_outlive_a_released_backend(tmp_path, lenet):
    """Python frees cyclic garbage (a script's globals at exit) in no set order: a backend released before its
    nets closes with the last of them, and the nets train on meanwhile; the process exits cleanly."""
    script = tmp_path / "order.py"
    script.write_text(
        "import numpy as np, vdnn\n"
        "be = vdnn.Backend('cpu', threads=1)\n"
        "nets = [vdnn.Net(%r, be, batch=4, seed=1) for _ in range(3)]\n"
        "x, y = np.zeros((4, 1, 28, 28), np.float32), np.arange(4, dtype=np.int32)\n"
        "def step(n):\n"  # a function: globals -> function -> globals, a cycle the collector breaks at exit
        "    return n.train_step(x, y, 0.1)\n"
        "vdnn._lib.ffi.release(be._h)\n"
        "losses = [step(n) for n in nets]\n"
        "assert losses[0] == losses[1] == losses[2], losses\n"
        "print('trained', losses[0])\n" % LENET)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0 and p.stdout.startswith("trained"), (p.returncode, p.stdout, p.stderr)


def test_bf16_sequence_model_on_a_cpu_without_avx512_bf16(monkeypatch, lenet):
    """A transformer's bf16 maps run on any CPU (widened to its fp32 code): on a backend acting as a CPU without
    AVX-512 BF16, gpt-mini takes a bf16 step whose loss is fp32's within bf16 rounding, in less memory; a CNN in bf16
    is refused there, naming its first convolution."""
    monkeypatch.setenv("VDNN_CPU_ISA", "no-bf16")
    cpu = vdnn.Backend("cpu", threads=THREADS)
    gpt = vdnn.Model.load(os.path.join(ROOT, "models", "gpt-mini.cfg"))
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, size=(4, 1, 32, 1)).astype(np.float32)
    y = rng.integers(0, 256, size=(4, 32)).astype(np.int32)
    nets = {p: vdnn.Net(gpt, cpu, batch=4, input_shape=(1, 32, 1), classes=256, seed=5, precision=p)
            for p in ("fp32", "bf16")}
    loss = {p: n.train_step(x, y, lr=0.01) for p, n in nets.items()}
    assert abs(loss["bf16"] - loss["fp32"]) < 0.02 and loss["bf16"] != loss["fp32"]
    assert nets["bf16"].stats["peak_device_bytes"] < nets["fp32"].stats["peak_device_bytes"]
    with pytest.raises(vdnn.UnsupportedError, match="layer 'conv1': bf16 needs AVX-512 BF16"):
        vdnn.Net(lenet, cpu, batch=4, precision="bf16")
