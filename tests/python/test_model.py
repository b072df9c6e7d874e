"""vdnn.Model.load reads .cfg and .onnx files and .cfg text; its layers are `vdnn info`'s; ONNX errors name the
file; a model is shared by nets and plans at different sizes."""
import json
import os

import numpy as np
import pytest

import vdnn
from conftest import ROOT, run_cli

ONNX = os.path.join(ROOT, "tests", "data", "onnx")


def test_onnx_model_is_the_commands():
    path = os.path.join(ONNX, "tiny_cnn.onnx")
    m = vdnn.Model.load(path)
    assert m.name == "tiny_cnn" and m.defaults == ((3, 16, 16), 10) and m.source == path
    info = json.loads(run_cli("info", path, "--batch", 4, "--json").stdout)
    layers = m.layers(batch=4)
    assert [(l.name, l.type, "x".join(map(str, l.out[1:]))) for l in layers[1:]] == \
        [(l["name"], l["type"], l["output"]) for l in info["layers"]]
    assert any(len(l.inputs) == 2 for l in layers)  # the residual join reads two layers
    p = vdnn.plan(m, batch=8, policy="all", conv_algo="choose")
    assert p.json() == run_cli("plan", path, "--batch", 8, "--policy", "all", "--json").stdout
    net = vdnn.Net(m, vdnn.Backend("cpu", threads=2), batch=4)
    x = np.random.default_rng(1).standard_normal((4, 3, 16, 16)).astype(np.float32)
    assert np.isfinite(net.train_step(x, np.array([0, 1, 2, 9])))


@pytest.mark.parametrize("name,cls,text", [
    ("bad_dilation.onnx", vdnn.UnsupportedError, "dilations [2, 2]"),
    ("bad_truncated.onnx", vdnn.FormatError, "not a valid ONNX model"),
])
def test_bad_onnx_names_the_file(name, cls, text):
    with pytest.raises(cls) as e:
        vdnn.Model.load(os.path.join(ONNX, name))
    assert name in str(e.value) and text in str(e.value)


def test_model_from_text_serves_several_sizes():
    text = ("[net]\nname=tiny\ninput=1x8x8\nclasses=3\n[conv1]\ntype=conv\nfilters=4\nsize=3\npad=1\n"
            "[relu1]\ntype=relu\n[fc]\ntype=fc\noutputs=classes\n[loss]\ntype=softmax\n")
    m = vdnn.Model.load(text, source="tiny.cfg")
    assert (m.name, m.source, len(m)) == ("tiny", "tiny.cfg", 5)
    assert m.layers(batch=2)[1].out == (2, 4, 8, 8)
    assert m.layers(batch=5, input_shape=(1, 12, 10))[1].out == (5, 4, 12, 10)
    small = vdnn.plan(m, batch=4)
    big = vdnn.plan(m, batch=64, input_shape=(1, 16, 16))
    assert big.peak_device_bytes > small.peak_device_bytes
    assert vdnn.Model.load(text.encode()).name == "tiny"


def test_forward_and_export(tmp_path):
    """forward gives the logits predict's probabilities come from; a trained net exported to ONNX loads again and
    computes the same logits bit for bit."""
    path = os.path.join(ONNX, "tiny_cnn.onnx")
    net = vdnn.Net(vdnn.Model.load(path), vdnn.Backend("cpu", threads=2), batch=4)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 16, 16)).astype(np.float32)
    for _ in range(2):
        net.train_step(x, np.array([3, 1, 4, 1]))
    z = net.forward(x)
    assert z.shape == (4, 10) and z.dtype == np.float32
    e = np.exp(z.astype(np.float64) - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(net.predict(x), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    out = tmp_path / "trained.onnx"
    net.export_onnx(out)
    again = vdnn.Net(vdnn.Model.load(str(out)), vdnn.Backend("cpu", threads=2), batch=4)
    assert np.array_equal(again.forward(x), z)
    with pytest.raises(ValueError, match="images"):
        net.forward(x[:, :2])


def test_export_needs_an_onnx_model(tmp_path):
    net = vdnn.Net(vdnn.Model.load(os.path.join(ROOT, "models", "lenet.cfg")), vdnn.Backend("cpu", threads=2), batch=4)
    out = tmp_path / "x.onnx"
    with pytest.raises(vdnn.Error):
        net.export_onnx(out)
    assert not out.exists()


def test_sequence_model_takes_labels_per_token():
    """A sequence model's labels and outputs are per token: (n, seq_len) labels, (n, seq_len, classes) logits;
    labels shaped as an image model's are refused before the library reads past them."""
    m = vdnn.Model.load(os.path.join(ROOT, "models", "gpt-mini.cfg"))
    net = vdnn.Net(m, vdnn.Backend("cpu", threads=2), batch=2)
    (c, t, w), k = net.input_shape, net.classes
    rng = np.random.default_rng(3)
    x = rng.integers(0, k, size=(2, c, t, w)).astype(np.float32)
    y = rng.integers(0, k, size=(2, t))
    assert np.isfinite(net.train_step(x, y))
    z = net.forward(x)
    assert z.shape == (2, t, k)
    p = net.predict(x)
    e = np.exp(z.astype(np.float64) - z.max(axis=2, keepdims=True))
    np.testing.assert_allclose(p, e / e.sum(axis=2, keepdims=True), rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match=r"\(2, %d\)" % t):
        net.train_step(x, y[:, 0])


def test_context_and_head_groups():
    """with_context and with_head_groups copy a transformer: a longer context, and every attention in groups of
    heads (their probabilities tensors of their own) with the same numbers; counts that do not divide the heads,
    and models without attention, are refused naming the layer or model."""
    m = vdnn.Model.load(os.path.join(ROOT, "models", "gpt-mini.cfg"))
    longer = m.with_context(128)
    assert longer.defaults[0] == (1, 128, 1)
    g = m.with_head_groups(2)
    names = [ly.name for ly in g.layers(batch=2)]
    assert names[names.index("h0.qkv") + 1:names.index("h0.proj")] == [
        "h0.probs.g0", "h0.mix.g0", "h0.probs.g1", "h0.mix.g1", "h0.mix"]
    probs = [ly for ly in g.layers(batch=2) if ly.type == "attn_probs"]
    assert len(probs) == 8 and all(ly.out == (2, 2, 64, 64) for ly in probs)
    be = vdnn.Backend("cpu", threads=2)
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, size=(2, 1, 64, 1)).astype(np.float32)
    whole, grouped = vdnn.Net(m, be, batch=2), vdnn.Net(g, be, batch=2)
    np.testing.assert_array_equal(whole.forward(x), grouped.forward(x))
    with pytest.raises(vdnn.InvalidArgError, match="3 does not divide the 4 heads of 'h0.probs'"):
        m.with_head_groups(3)
    with pytest.raises(vdnn.InvalidArgError, match="has no attention"):
        vdnn.Model.load(os.path.join(ROOT, "models", "lenet.cfg")).with_head_groups(2)


def test_fused_attention():
    """with_fused_attention: every attention one op under the mix's name (no probabilities layer), the same numbers up
    to float sums from the same parameters, an in-core peak at context 1024 under 0.4 of the unfused one (77.95 against 231.68 MiB at batch 2); grouped attention and models
    without attention are refused."""
    m = vdnn.Model.load(os.path.join(ROOT, "models", "gpt-mini.cfg"))
    f = m.with_fused_attention()
    layers = f.layers(batch=2)
    names = [ly.name for ly in layers]
    assert names[names.index("h0.qkv") + 1:names.index("h0.proj")] == ["h0.mix"]
    assert [ly.type for ly in layers].count("attention") == 4 and "attn_probs" not in [ly.type for ly in layers]
    be = vdnn.Backend("cpu", threads=2)
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, size=(2, 1, 64, 1)).astype(np.float32)
    np.testing.assert_allclose(vdnn.Net(f, be, batch=2).forward(x), vdnn.Net(m, be, batch=2).forward(x),
                               rtol=1e-4, atol=1e-5)
    long_m, long_f = m.with_context(1024), m.with_context(1024).with_fused_attention()
    assert vdnn.plan(long_f, batch=2).peak_device_bytes < 0.4 * vdnn.plan(long_m, batch=2).peak_device_bytes
    with pytest.raises(vdnn.UnsupportedError, match="head groups"):
        m.with_head_groups(2).with_fused_attention()
    with pytest.raises(vdnn.InvalidArgError, match="has no attention"):
        vdnn.Model.load(os.path.join(ROOT, "models", "lenet.cfg")).with_fused_attention()


def test_fit_head_groups():
    """vdnn.fit_head_groups is `--head-groups auto`: gpt-mini (4 heads) at context 1024, batch 2, policy auto needs
    79.4 MiB whole, 55.5 MiB in 2 groups and 38.8 MiB in 4: at 50 MiB it takes 4 (the plan of with_head_groups(4)),
    at 100 MiB 1, at 30 MiB none fits (the grouping that needs the least, 4); an image model is refused."""
    m = vdnn.Model.load(os.path.join(ROOT, "models", "gpt-mini.cfg")).with_context(1024)
    g, groups, fits = vdnn.fit_head_groups(m, batch=2, policy="auto", budget="50MiB")
    assert (groups, fits) == (4, True)
    assert vdnn.plan(g, batch=2, policy="auto", budget="50MiB").json() == \
        vdnn.plan(m.with_head_groups(4), batch=2, policy="auto", budget="50MiB").json()
    assert vdnn.fit_head_groups(m, batch=2, policy="auto", budget="100MiB")[1:] == (1, True)
    assert vdnn.fit_head_groups(m, batch=2, policy="auto", budget="30MiB")[1:] == (4, False)
    with pytest.raises(vdnn.InvalidArgError, match="has no attention"):
        vdnn.fit_head_groups(os.path.join(ROOT, "models", "lenet.cfg"), batch=2, policy="auto", budget="50MiB")


def test_fit_attention():
    """vdnn.fit_attention is `--attention auto`: gpt-mini at context 1024, batch 2, default estimate: every attention
    fused is the fastest plan at 50 MiB (the plan of with_fused_attention()); with_fused_attention(which) fuses the
    ones named; a wrong count of choices and an image model are refused."""
    m = vdnn.Model.load(os.path.join(ROOT, "models", "gpt-mini.cfg")).with_context(1024)
    assert m.attention_count == 4
    f, fused, fits = vdnn.fit_attention(m, batch=2, policy="auto", budget="50MiB")
    assert (fused, fits) == ([True] * 4, True) and f.attention_count == 0
    assert vdnn.plan(f, batch=2, policy="auto", budget="50MiB").json() == \
        vdnn.plan(m.with_fused_attention(), batch=2, policy="auto", budget="50MiB").json()
    some = m.with_fused_attention([False, True, False, True])
    types = [ly.type for ly in some.layers(batch=2)]
    assert some.attention_count == 2 and types.count("attention") == 2 and types.count("attn_probs") == 2
    with pytest.raises(vdnn.InvalidArgError, match="3 choices given"):
        m.with_fused_attention([True, False, True])
    with pytest.raises(vdnn.InvalidArgError, match="has no attention"):
        vdnn.fit_attention(os.path.join(ROOT, "models", "lenet.cfg"), batch=2, policy="auto", budget="50MiB")


def test_fit_attention_from_profiles():
    """fit_attention(profiles=(unfused, all fused)) plans each choice from the two profiles composed: with the
    default estimate for both, every composed profile is the choice's own estimate, so it chooses as the estimate
    search does; profiles of another batch, or one missing, are refused."""
    m = vdnn.Model.load(os.path.join(ROOT, "models", "gpt-mini.cfg")).with_context(1024)
    pu = vdnn.Profile.estimate(m, batch=2, input_shape=(1, 1024, 1), classes=256)
    pf = vdnn.Profile.estimate(m.with_fused_attention(), batch=2, input_shape=(1, 1024, 1), classes=256)
    for budget in ("50MiB", "80MiB", "1GiB"):
        got = vdnn.fit_attention(m, batch=2, policy="auto", budget=budget, profiles=(pu, pf))
        want = vdnn.fit_attention(m, batch=2, policy="auto", budget=budget)
        assert got[1:] == want[1:]
    other = vdnn.Profile.estimate(m.with_fused_attention(), batch=4, input_shape=(1, 1024, 1), classes=256)
    with pytest.raises(vdnn.Error, match="are not of one model, device, batch and precision"):
        vdnn.fit_attention(m, batch=2, policy="auto", budget="50MiB", profiles=(pu, other))
    with pytest.raises(vdnn.InvalidArgError, match="are needed"):
        vdnn.fit_attention(m, batch=2, policy="auto", budget="50MiB", profiles=(pu, None))
    with pytest.raises(ValueError, match="got 1"):
        vdnn.fit_attention(m, batch=2, policy="auto", budget="50MiB", profiles=(pu,))


def test_profile_compose():
    """Profile.compose gives the chosen variant its costs from the two profiles: from the default estimates, the
    chosen model's own estimate, so the plan vdnn.plan makes with it is the one the estimate makes; a profile of a
    model without one of the variant's layers is refused, naming the layer."""
    m = vdnn.Model.load(os.path.join(ROOT, "models", "gpt-mini.cfg"))
    shape = dict(batch=8, input_shape=(1, 64, 1), classes=256)
    pu = vdnn.Profile.estimate(m, **shape)
    pf = vdnn.Profile.estimate(m.with_fused_attention(), **shape)
    chosen, fused, fits = vdnn.fit_attention(m, batch=8, policy="auto", budget="6MiB", profiles=(pu, pf))
    assert fits and fused == [False, False, False, True]
    composed = vdnn.Profile.compose((pu, pf), chosen)
    assert composed.batch == 8 and composed.model is chosen
    got = vdnn.plan(chosen, batch=8, policy="auto", budget="6MiB", profile=composed).json()
    want = vdnn.plan(chosen, batch=8, policy="auto", budget="6MiB",
                     profile=vdnn.Profile.estimate(chosen, **shape)).json()
    assert got == want
    with pytest.raises(vdnn.MismatchError, match="layer .h0.mix. .attention. of gpt-mini is in none of the 1 profiles"):
        vdnn.Profile.compose((pu,), m.with_fused_attention())
    with pytest.raises(vdnn.InvalidArgError, match="at least one"):
        vdnn.Profile.compose((), chosen)


def test_with_steps():
    """Model.with_steps cuts an LSTM model's chunks for another length (lstm-lm: chunk=32 steps): 64 steps in two
    chunks a layer, 200 in seven, the parameters the same; the file's model refuses lengths its chunks cannot cut,
    pointing to it; a transformer, or steps out of range, are refused."""
    m = vdnn.Model.load(os.path.join(ROOT, "models", "lstm-lm.cfg"))
    assert m.lstm_count == 2
    with pytest.raises(vdnn.ShapeError, match="does not fill 4 chunks .* vdnn_model_with_steps cuts it"):
        m.layers(batch=2, input_shape=(1, 64, 1))

    def chunks(model, steps):
        return sorted(l.name for l in model.layers(batch=2, input_shape=(1, steps, 1)) if l.type == "lstm")

    short = m.with_steps(64)
    assert short.resolve(None, 0)[0] == (1, 64, 1)
    assert chunks(short, 64) == ["lstm1.t0", "lstm1.t1", "lstm2.t0", "lstm2.t1"]
    assert len(chunks(m.with_steps(200), 200)) == 14
    assert m.with_steps(200).lstm_count == 2
    params = lambda model, steps: sum(l.weights + l.biases for l in model.layers(batch=2, input_shape=(1, steps, 1)))
    assert params(short, 64) == params(m, 128) == 1020160
    with pytest.raises(vdnn.InvalidArgError, match="has no lstm layer to cut"):
        vdnn.Model.load(os.path.join(ROOT, "models", "gpt-mini.cfg")).with_steps(32)
    with pytest.raises(vdnn.InvalidArgError, match="steps: 0 is out of range"):
        m.with_steps(0)
