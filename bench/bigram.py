#!/usr/bin/env python3
"""The baselines of docs/sequence.md for a byte-level text: the validation loss of a bigram and a unigram model
(add-one counts of the training part) on the split and sequences of `vdnn train --data text:FILE`.

vdnn's split (src/train/data_text.c): the first len - len // 10 bytes train, the rest validate; the validation part is
cut into (m - 1) // T sequences of T bytes, each byte's target the byte after it. The losses are the mean over those
targets, in nats and bits per token, as vdnn train prints them.

usage: python3 bench/bigram.py FILE|DIR [--seq-len T]   (T defaults to 64, gpt-mini's context)
A directory is read as text:DIR reads it: its regular files without NUL bytes (symlinks left out), in name order.
"""
import argparse
import math
import os


def read_text(path):
    if not os.path.isdir(path):
        return open(path, "rb").read()
    parts = []
    for name in sorted(os.listdir(path)):
        p = os.path.join(path, name)
        if os.path.islink(p) or not os.path.isfile(p):
            continue
        b = open(p, "rb").read()
        if b and b"\0" not in b:
            parts.append(b)
    return b"".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--seq-len", type=int, default=64)
    a = ap.parse_args()
    data = read_text(a.file)
    cut = len(data) - len(data) // 10
    train, val = data[:cut], data[cut:]
    t = a.seq_len
    n_seq = (len(val) - 1) // t
    pairs = [(val[i], val[i + 1]) for s in range(n_seq) for i in range(s * t, s * t + t)]

    uni = [1] * 256
    big = [[1] * 256 for _ in range(256)]
    for b in train:
        uni[b] += 1
    for x, y in zip(train, train[1:]):
        big[x][y] += 1
    uni_total = sum(uni)
    rows = [sum(r) for r in big]
    nll_big = -sum(math.log(big[x][y] / rows[x]) for x, y in pairs) / len(pairs)
    nll_uni = -sum(math.log(uni[y] / uni_total) for _, y in pairs) / len(pairs)
    print(f"{a.file}: {len(data)} bytes, {len(train)} training, {n_seq} validation sequences of {t} ({len(pairs)} targets)")
    for name, v in (("bigram", nll_big), ("unigram", nll_uni)):
        print(f"{name}: {v:.4f} nats/token, {v / math.log(2):.4f} bits/token")


if __name__ == "__main__":
    main()
