#!/usr/bin/env python3
"""Builds the PyTorch twin of a vdnn sequence model file (gpt-mini, lstm-lm, ...) and times its training
steps, so bench/sequence-vs-pytorch.sh compares the very same network, batch, sequence length, threads and
optimizer. Usage:
  seq_torch.py MODEL.cfg --seq-len T --batch B --steps S --threads N [--optimizer adamw|sgd] [--warmup W]
               [--device cpu|cuda] [--autocast bf16|fp16]
Prints one JSON object: {"tokens_per_sec": ..., "step_seconds": (median), "steps": ...}. On CUDA each step is
bracketed by torch.cuda.synchronize(), TF32 is on for matrix products (vdnn's default), and fp16 autocast scales the
loss with a GradScaler (vdnn's dynamic loss scaling).
Attention is written out as vdnn computes it (scores, causal softmax, probabilities times values), not
with a fused kernel, so both sides do the same arithmetic.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from cfg_torch import parse_cfg


class SeqNet(nn.Module):
    """The cfg's layers in file order; each reads its `input=` (default: the previous layer)."""

    def __init__(self, path, seq_len):
        super().__init__()
        net, layers = parse_cfg(path)
        vocab = int(net["classes"])
        self.order, self.inputs, self.kinds, self.heads = [], {}, {}, {}
        self.mods = nn.ModuleDict()
        width = {"data": 1}
        prev = "data"
        for d in layers:
            name, kind = d["__name__"], d["type"]
            ins = [s.strip() for s in d.get("input", prev).split(",")]
            f = width[ins[0]]
            key = name.replace(".", "_")
            out = f
            if kind == "embed":
                out = int(d["outputs"])
                self.mods[key] = nn.Embedding(vocab, out)
            elif kind == "pos_embed":
                self.mods[key] = nn.Embedding(int(d["context"]), f)
            elif kind == "layernorm":
                self.mods[key] = nn.LayerNorm(f, eps=float(d.get("eps", 1e-5)))
            elif kind == "linear":
                out = vocab if d["outputs"] == "classes" else int(d["outputs"])
                self.mods[key] = nn.Linear(f, out, bias=d.get("bias", "1") != "0")
                if d.get("tie"):  # the output projection shares the embedding's table (GPT-2's weight tying)
                    self.mods[key].weight = self.mods[d["tie"].replace(".", "_")].weight
            elif kind == "attn_probs":
                self.heads[name] = int(d["heads"])
                out = None
            elif kind == "attn_mix":
                out = width[ins[1]] // 3
                self.heads[name] = self.heads[ins[0]]
            elif kind == "lstm":
                hidden = int(d["hidden"])
                proj = int(d.get("proj", 0))
                self.mods[key] = nn.LSTM(f, hidden, num_layers=int(d.get("layers", 1)), batch_first=True,
                                         proj_size=proj)
                out = proj or hidden
            elif kind in ("gelu", "add", "dropout", "softmax"):
                if kind == "dropout":
                    self.mods[key] = nn.Dropout(float(d.get("p", 0.5)))
            else:
                raise ValueError(f"{path}: layer [{name}]: type {kind} has no PyTorch twin here")
            width[name] = out
            self.order.append(name)
            self.inputs[name] = ins
            self.kinds[name] = kind
            prev = name
        mask = torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, tokens, targets):
        vals = {"data": tokens}
        for name in self.order:
            kind, ins = self.kinds[name], self.inputs[name]
            a = vals[ins[0]]
            key = name.replace(".", "_")
            if kind in ("embed", "layernorm", "linear", "dropout"):
                y = self.mods[key](a)
            elif kind == "pos_embed":
                y = a + self.mods[key].weight[: a.shape[1]]
            elif kind == "gelu":
                y = F.gelu(a, approximate="tanh")
            elif kind == "add":
                y = sum(vals[i] for i in ins)
            elif kind == "attn_probs":
                b, t, f3 = a.shape
                h = self.heads[name]
                q, k, _ = a.split(f3 // 3, dim=2)
                q = q.reshape(b, t, h, -1).transpose(1, 2)
                k = k.reshape(b, t, h, -1).transpose(1, 2)
                s = (q @ k.transpose(2, 3)) / math.sqrt(q.shape[-1])
                y = s.masked_fill(self.mask[:t, :t], float("-inf")).softmax(-1)
            elif kind == "attn_mix":
                qkv = vals[ins[1]]
                b, t, f3 = qkv.shape
                h = self.heads[name]
                v = qkv[:, :, 2 * f3 // 3:].reshape(b, t, h, -1).transpose(1, 2)
                y = (a @ v).transpose(1, 2).reshape(b, t, f3 // 3)
            elif kind == "lstm":
                y, _ = self.mods[key](a)
            elif kind == "softmax":
                return F.cross_entropy(a.reshape(-1, a.shape[-1]), targets.reshape(-1))
            vals[name] = y
        raise ValueError("the model has no softmax layer")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--autocast", choices=["bf16", "fp16"],
                    help="forward under torch.autocast(device, bfloat16 or float16); fp16 on CUDA only")
    a = ap.parse_args()
    if a.autocast == "fp16" and a.device != "cuda":
        ap.error("--autocast fp16 needs --device cuda")
    if a.threads:
        torch.set_num_threads(a.threads)
    cuda = a.device == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(1)
    net = SeqNet(a.model, a.seq_len).to(a.device)
    vocab = int(parse_cfg(a.model)[0]["classes"])
    if a.optimizer == "adamw":
        opt = torch.optim.AdamW(net.parameters(), lr=a.lr, weight_decay=0.01)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=0.9)
    tokens = torch.randint(0, vocab, (a.batch, a.seq_len), device=a.device)
    targets = torch.randint(0, vocab, (a.batch, a.seq_len), device=a.device)
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.autocast)
    scaler = None
    if a.autocast == "fp16":  # torch.amp.GradScaler from PyTorch 2.3 on, CUDA's before
        gs = getattr(torch.amp, "GradScaler", None)
        scaler = gs("cuda") if gs else torch.cuda.amp.GradScaler()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(a.device, dtype=half or torch.bfloat16, enabled=half is not None):
            loss = net(tokens, targets)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        if cuda:
            torch.cuda.synchronize()

    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(json.dumps({"tokens_per_sec": a.batch * a.seq_len / med, "step_seconds": med, "steps": a.steps,
                      "torch": torch.__version__, "threads": torch.get_num_threads(), "optimizer": a.optimizer,
                      "autocast": a.autocast, "device": a.device,
                      "gpu": torch.cuda.get_device_name() if cuda else None}))


if __name__ == "__main__":
    main()
