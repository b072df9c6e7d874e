#!/usr/bin/env python3
"""Writes lstm-tiny.cfg, lstm-tiny-chunks.cfg and lstm-tiny.bin: a tiny LSTM language model (embedding 6, an LSTM of
5 cells projected to 3 as PyTorch's proj_size, an LSTM of 4 cells, a linear head, vocabulary 20) computed by PyTorch's
nn.LSTM in float32 on one thread, for tests/test_lstm_reference.c (docs/sequence.md, "LSTM"). The two model files
are the same net, each LSTM layer as one node (lstm-tiny.cfg) or in chunks of 3 steps, the last one of 2
(lstm-tiny-chunks.cfg).

Recorded (VDNNREF1, see README.md): the tokens and next-token labels of a batch of 3 sequences of 8 tokens, the initial
parameters under vdnn's storage names, the logits ("head.out") and the loss at step 0, every parameter gradient
(".weight.grad", ".bias.grad"), 3 SGD steps (lr, momentum 0.9): the losses and the final parameters
("final.<name>"), and 3 AdamW steps from the same start ("meta.adamw", "adamw.losses", "adamw.final.<name>").
An LSTM layer's parameters are one weight and one bias storage in vdnn, shared by its chunks: "<layer>.params.weight"
is nn.LSTM's weight_ih_l0, weight_hh_l0 and (with a projection) weight_hr_l0 flattened one after another,
"<layer>.params.bias" its bias_ih_l0 then bias_hh_l0.

Run with Debian's interpreter (python3-torch): /usr/bin/python3 tests/reference/make_lstm_reference.py
"""
import os
import sys

import torch
import torch.nn.functional as Fn

from vdnnref import Writer, add_adamw, add_sgd, add_start, sequences

HERE = os.path.dirname(os.path.abspath(__file__))
B, T, V, E, H1, P1, H2, CHUNK = 3, 8, 20, 6, 5, 3, 4, 3
LR, MOMENTUM, STEPS = 0.5, 0.9, 3
ADAM_LR, ADAM_BETAS, ADAM_EPS, ADAM_WD = 0.01, (0.9, 0.999), 1e-8, 0.01


def write_cfg(path, chunk):
    name = os.path.basename(path)[:-4]
    extra = [f"chunk={chunk}"] if chunk else []
    out = [f"# {name}: the net of make_lstm_reference.py (written by it): tests/test_lstm_reference.c.",
           "[net]", f"name={name}", f"input=1x{T}x1", f"classes={V}", "",
           "[wte]", "type=embed", f"outputs={E}", "",
           "[lstm1]", "type=lstm", f"hidden={H1}", f"proj={P1}"] + extra + [""] + [
           "[lstm2]", "type=lstm", f"hidden={H2}"] + extra + [""] + [
           "[head]", "type=linear", "outputs=classes", "", "[loss]", "type=softmax", ""]
    with open(path, "w") as f:
        f.write("\n".join(out))


def make_params(gen):
    """vdnn's storage name -> tensor. The LSTMs as nn.LSTM draws them (+-1/sqrt(hidden)), spread a little wider so
    that every gate does some work."""
    def u(*shape, bound):
        return (torch.rand(*shape, generator=gen) * 2 - 1) * bound

    p = {"wte.weight": torch.randn(V, E, generator=gen) * 0.8}
    b1, b2 = 1.5 / H1 ** 0.5, 1.5 / H2 ** 0.5
    p["lstm1.params.weight"] = torch.cat([u(4 * H1, E, bound=b1).flatten(), u(4 * H1, P1, bound=b1).flatten(),
                                          u(P1, H1, bound=b1).flatten()])
    p["lstm1.params.bias"] = u(8 * H1, bound=b1)
    p["lstm2.params.weight"] = torch.cat([u(4 * H2, P1, bound=b2).flatten(), u(4 * H2, H2, bound=b2).flatten()])
    p["lstm2.params.bias"] = u(8 * H2, bound=b2)
    p["head.weight"] = u(V, H2, bound=1 / H2 ** 0.5)
    p["head.bias"] = u(V, bound=0.1)
    return {k: v.clone().requires_grad_(True) for k, v in p.items()}


def lstm_module(p, name, inputs, hidden, proj):
    """An nn.LSTM holding vdnn's parameter tensor (views of it, so its gradient is the tensor's)."""
    m = torch.nn.LSTM(inputs, hidden, batch_first=True, proj_size=proj)
    w, b = p[name + ".params.weight"], p[name + ".params.bias"]
    hp = proj or hidden
    at = 0
    parts = {}
    for key, shape in (("weight_ih_l0", (4 * hidden, inputs)), ("weight_hh_l0", (4 * hidden, hp))) + (
            (("weight_hr_l0", (proj, hidden)),) if proj else ()):
        n = shape[0] * shape[1]
        parts[key] = w[at:at + n].view(shape)
        at += n
    assert at == w.numel()
    parts["bias_ih_l0"], parts["bias_hh_l0"] = b[:4 * hidden], b[4 * hidden:]
    for key in parts:
        delattr(m, key)
        setattr(m, key, parts[key])
    return m


def forward(p, tokens, labels):
    """The net: the logits and the mean loss over tokens."""
    x = Fn.embedding(tokens, p["wte.weight"])
    x, _ = lstm_module(p, "lstm1", E, H1, P1)(x)
    x, _ = lstm_module(p, "lstm2", P1, H2, 0)(x)
    logits = Fn.linear(x, p["head.weight"], p["head.bias"])
    return logits, Fn.cross_entropy(logits.reshape(B * T, V), labels.reshape(B * T))


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(23)
    write_cfg(os.path.join(HERE, "lstm-tiny.cfg"), 0)
    write_cfg(os.path.join(HERE, "lstm-tiny-chunks.cfg"), CHUNK)
    tokens, labels = sequences(gen, B, T, V)
    p = make_params(gen)
    w = Writer()
    init = add_start(w, STEPS, tokens, labels, p, sgd=(LR, MOMENTUM, 0.0))
    kept = {}

    def loss_of(p):
        kept["logits"], loss = forward(p, tokens, labels)
        return loss

    def at_step0(loss):
        w.add("loss.value", loss.detach().reshape(1))
        w.add("head.out", kept["logits"])

    sgd_losses = add_sgd(w, p, loss_of, STEPS, LR, MOMENTUM, at_step0)
    losses = add_adamw(w, init, loss_of, STEPS, ADAM_LR, ADAM_BETAS, ADAM_EPS, ADAM_WD)
    path = os.path.join(HERE, "lstm-tiny.bin")
    w.write(path)
    print(f"wrote {path}: {len(w.arrays)} arrays; SGD losses {', '.join(f'{l:.6f}' for l in sgd_losses)}; AdamW losses "
          f"{', '.join(f'{l:.6f}' for l in losses)}", file=sys.stderr)


if __name__ == "__main__":
    main()
