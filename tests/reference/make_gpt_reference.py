#!/usr/bin/env python3
"""Writes gpt-tiny.cfg and gpt-tiny.bin: a tiny GPT (2 pre-norm blocks, width 16, 2 heads, context 8, vocabulary 20)
computed by PyTorch in float32 on one thread, for tests/test_gpt_reference.c (docs/sequence.md).

Recorded (VDNNREF1, see README.md): the tokens and next-token labels of a batch of 3 sequences of 6 tokens, the initial
parameters under vdnn's storage names, every layer's output (".out") and its gradient (".out.grad") at step 0, the
loss, every parameter gradient (".weight.grad", ".bias.grad"), 3 SGD steps (lr, momentum 0.9): the losses and the
final parameters ("final.<name>"), and 3 AdamW steps from the same start ("meta.adamw" lr, beta1, beta2, eps, weight
decay; "adamw.losses", "adamw.final.<name>"), and 3 SGD steps with gradient clipping by global norm
(torch.nn.utils.clip_grad_norm_ before each step; "meta.clip" the limit, set below every step's norm so that clipping
acts, "clip.norms" each step's norm before clipping, "clip.losses", "clip.final.<name>"). Tensors B x T x F are laid out as vdnn's Bx1xTxF; the attention probabilities are
B x heads x T x T; qkv holds q, k and v side by side, head h at columns h*D .. h*D+D-1 of each.

Also gpt-tiny-tied.cfg and gpt-tiny-tied.bin: the net with its output projection tied to the token embedding
(tied_reference below).

Run with Debian's interpreter (python3-torch): /usr/bin/python3 tests/reference/make_gpt_reference.py
"""
import math
import os
import sys

import torch
import torch.nn.functional as Fn

from vdnnref import Writer, add_adamw, add_sgd, add_start, fresh, run_steps, sequences

HERE = os.path.dirname(os.path.abspath(__file__))
B, T, CONTEXT, F, H, V, LAYERS = 3, 6, 8, 16, 2, 20, 2
LR, MOMENTUM, STEPS = 0.1, 0.9, 3
ADAM_LR, ADAM_BETAS, ADAM_EPS, ADAM_WD = 0.01, (0.9, 0.999), 1e-8, 0.01
CLIP = 0.5
TIED_CLIP = 1.0


def write_cfg(path, tied=False):
    name = "gpt-tiny-tied" if tied else "gpt-tiny"
    out = [f"# {name}: the net of make_gpt_reference.py (written by it): tests/test_gpt_reference.c.",
           "[net]", f"name={name}", f"input=1x{T}x1", f"classes={V}", "",
           "[wte]", "type=embed", f"outputs={F}", "", "[wpe]", "type=pos_embed", f"context={CONTEXT}", ""]
    prev = "wpe"
    for i in range(LAYERS):
        b = f"h{i}"
        out += [f"[{b}.ln1]", "type=layernorm", f"input={prev}", "",
                f"[{b}.qkv]", "type=linear", f"outputs={3 * F}", "",
                f"[{b}.probs]", "type=attn_probs", f"heads={H}", "",
                f"[{b}.mix]", "type=attn_mix", f"input={b}.probs,{b}.qkv", "",
                f"[{b}.proj]", "type=linear", f"outputs={F}", "",
                f"[{b}.res1]", "type=add", f"input={prev},{b}.proj", "",
                f"[{b}.ln2]", "type=layernorm", "",
                f"[{b}.fc]", "type=linear", f"outputs={4 * F}", "",
                f"[{b}.gelu]", "type=gelu", "",
                f"[{b}.fc2]", "type=linear", f"outputs={F}", "",
                f"[{b}.res2]", "type=add", f"input={b}.res1,{b}.fc2", ""]
        prev = f"{b}.res2"
    head = ["tie=wte", "bias=0"] if tied else []
    out += ["[lnf]", "type=layernorm", "", "[head]", "type=linear", "outputs=classes"] + head + ["", "[loss]",
                                                                                               "type=softmax", ""]
    with open(path, "w") as f:
        f.write("\n".join(out))


def make_params(gen, tied=False):
    """vdnn's storage name -> tensor, drawn with spreads that keep every layer's signal well away from zero."""
    p = {"wte.weight": torch.randn(V, F, generator=gen) * 0.5, "wpe.weight": torch.randn(CONTEXT, F, generator=gen) * 0.3}

    def lin(name, fin, fout):
        p[name + ".weight"] = (torch.rand(fout, fin, generator=gen) * 2 - 1) / math.sqrt(fin)
        p[name + ".bias"] = (torch.rand(fout, generator=gen) * 2 - 1) * 0.1

    def ln(name):
        p[name + ".weight"] = 1 + 0.2 * torch.randn(F, generator=gen)
        p[name + ".bias"] = 0.1 * torch.randn(F, generator=gen)

    for i in range(LAYERS):
        ln(f"h{i}.ln1")
        lin(f"h{i}.qkv", F, 3 * F)
        lin(f"h{i}.proj", F, F)
        ln(f"h{i}.ln2")
        lin(f"h{i}.fc", F, 4 * F)
        lin(f"h{i}.fc2", 4 * F, F)
    ln("lnf")
    if not tied:
        lin("head", F, V)
    return {k: v.clone().requires_grad_(True) for k, v in p.items()}


def forward(p, tokens, labels, outs):
    """The net; outs[name] = each layer's output (kept for its gradient). Returns the mean loss over tokens."""
    def keep(name, t):
        t.retain_grad()
        outs[name] = t
        return t

    x = keep("wte", Fn.embedding(tokens, p["wte.weight"]))
    x = keep("wpe", x + p["wpe.weight"][:T])
    for i in range(LAYERS):
        b = f"h{i}"
        a = keep(f"{b}.ln1", Fn.layer_norm(x, (F,), p[f"{b}.ln1.weight"], p[f"{b}.ln1.bias"], 1e-5))
        qkv = keep(f"{b}.qkv", Fn.linear(a, p[f"{b}.qkv.weight"], p[f"{b}.qkv.bias"]))
        q, k, v = qkv.split(F, dim=2)
        q, k, v = (t.view(B, T, H, F // H).transpose(1, 2) for t in (q, k, v))
        s = q @ k.transpose(-2, -1) / math.sqrt(F // H)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        probs = keep(f"{b}.probs", torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1))
        mix = keep(f"{b}.mix", (probs @ v).transpose(1, 2).contiguous().view(B, T, F))
        proj = keep(f"{b}.proj", Fn.linear(mix, p[f"{b}.proj.weight"], p[f"{b}.proj.bias"]))
        r1 = keep(f"{b}.res1", x + proj)
        a2 = keep(f"{b}.ln2", Fn.layer_norm(r1, (F,), p[f"{b}.ln2.weight"], p[f"{b}.ln2.bias"], 1e-5))
        fc = keep(f"{b}.fc", Fn.linear(a2, p[f"{b}.fc.weight"], p[f"{b}.fc.bias"]))
        g = keep(f"{b}.gelu", Fn.gelu(fc, approximate="tanh"))
        fc2 = keep(f"{b}.fc2", Fn.linear(g, p[f"{b}.fc2.weight"], p[f"{b}.fc2.bias"]))
        x = keep(f"{b}.res2", r1 + fc2)
    lnf = keep("lnf", Fn.layer_norm(x, (F,), p["lnf.weight"], p["lnf.bias"], 1e-5))
    if "head.weight" in p:
        logits = keep("head", Fn.linear(lnf, p["head.weight"], p["head.bias"]))
    else:  # tied: the token embedding's table is the output projection (GPT-2), no bias
        logits = keep("head", Fn.linear(lnf, p["wte.weight"]))
    outs["loss"] = torch.softmax(logits, dim=-1)
    return Fn.cross_entropy(logits.reshape(B * T, V), labels.reshape(B * T))


def tied_reference():
    """gpt-tiny-tied.cfg and .bin: the same net with the output projection tied to the token embedding (GPT-2's
    weight tying, no output bias): the step-0 logits ("head.out"), loss, every parameter gradient (the table's the sum
    of both uses), and 3 AdamW steps with clipping by global norm (meta.adamw, meta.clip, adamw.losses,
    adamw.final.<name>)."""
    gen = torch.Generator().manual_seed(29)
    write_cfg(os.path.join(HERE, "gpt-tiny-tied.cfg"), tied=True)
    tokens, labels = sequences(gen, B, T, V)
    p = make_params(gen, tied=True)
    w = Writer()
    add_start(w, STEPS, tokens, labels, p)
    outs = {}

    def loss_of(p):
        outs.clear()
        return forward(p, tokens, labels, outs)

    def at_step0(loss):
        w.add("head.out", outs["head"])
        w.add("loss.value", loss.detach().reshape(1))

    opt = torch.optim.AdamW(p.values(), lr=ADAM_LR, betas=ADAM_BETAS, eps=ADAM_EPS, weight_decay=ADAM_WD)
    losses, norms = run_steps(w, p, opt, loss_of, STEPS, at_step0, clip=TIED_CLIP)
    assert min(norms) > TIED_CLIP, norms
    w.add("meta.adamw", torch.tensor([ADAM_LR, ADAM_BETAS[0], ADAM_BETAS[1], ADAM_EPS, ADAM_WD]))
    w.add("meta.clip", torch.tensor([TIED_CLIP]))
    w.add("adamw.losses", torch.tensor(losses))
    for k, v in p.items():
        w.add("adamw.final." + k, v)
    path = os.path.join(HERE, "gpt-tiny-tied.bin")
    w.write(path)
    print(f"wrote {path}: {len(w.arrays)} arrays; tied AdamW losses {', '.join(f'{l:.6f}' for l in losses)}, norms "
          f"{', '.join(f'{n:.4f}' for n in norms)}", file=sys.stderr)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(17)
    write_cfg(os.path.join(HERE, "gpt-tiny.cfg"))
    tokens, labels = sequences(gen, B, T, V)
    p = make_params(gen)
    w = Writer()
    init = add_start(w, STEPS, tokens, labels, p, sgd=(LR, MOMENTUM, 0.0))
    outs = {}

    def loss_of(p):
        outs.clear()
        return forward(p, tokens, labels, outs)

    def at_step0(loss):
        w.add("loss.value", loss.detach().reshape(1))
        for name, t in outs.items():
            w.add(name + ".out", t)
            if name != "loss":
                w.add(name + ".out.grad", t.grad)

    sgd_losses = add_sgd(w, p, loss_of, STEPS, LR, MOMENTUM, at_step0)
    # AdamW from the same initial parameters (the generator is not drawn from again: same start).
    losses = add_adamw(w, init, loss_of, STEPS, ADAM_LR, ADAM_BETAS, ADAM_EPS, ADAM_WD)
    # SGD with the gradients clipped to a global norm of CLIP (below every step's: the clipping acts each time).
    p = fresh(init)
    opt = torch.optim.SGD(p.values(), lr=LR, momentum=MOMENTUM)
    clip_losses, norms = run_steps(w, p, opt, loss_of, STEPS, clip=CLIP)
    assert min(norms) > CLIP, norms
    w.add("meta.clip", torch.tensor([CLIP]))
    w.add("clip.norms", torch.tensor(norms))
    w.add("clip.losses", torch.tensor(clip_losses))
    for k, v in p.items():
        w.add("clip.final." + k, v)
    path = os.path.join(HERE, "gpt-tiny.bin")
    w.write(path)
    tied_reference()
    print(f"wrote {path}: {len(w.arrays)} arrays; SGD losses {', '.join(f'{l:.6f}' for l in sgd_losses)}; AdamW losses "
          f"{', '.join(f'{l:.6f}' for l in losses)}", file=sys.stderr)


if __name__ == "__main__":
    main()
