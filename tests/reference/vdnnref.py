"""The VDNNREF1 writer (README.md, "Binary format") that make_reference.py, make_gpt_reference.py and
make_lstm_reference.py share, and the parts of a sequence model's reference both sequence scripts record alike."""
import struct

import torch

F32, I32, U64 = 1, 2, 3


class Writer:
    """Named arrays, in the order added, written as one VDNNREF1 file."""

    def __init__(self):
        self.arrays = []

    def add(self, name, t, dtype=F32):
        t = torch.as_tensor(t).detach()
        shape = list(t.shape)
        if dtype == F32:
            data = t.to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        elif dtype == I32:
            data = t.to(torch.int32).contiguous().numpy().astype("<i4").tobytes()
        else:
            data = b"".join(struct.pack("<Q", int(v)) for v in t.reshape(-1).tolist())
        assert name not in (a[0] for a in self.arrays), name
        self.arrays.append((name, dtype, shape, data))

    def write(self, path):
        with open(path, "wb") as f:
            f.write(b"VDNNREF1")
            f.write(struct.pack("<I", len(self.arrays)))
            for name, dtype, shape, data in self.arrays:
                nb = name.encode("ascii")
                f.write(struct.pack("<I", len(nb)) + nb)
                f.write(struct.pack("<II", dtype, len(shape)))
                f.write(struct.pack(f"<{len(shape)}I", *shape))
                f.write(data)


def sequences(gen, batch, length, vocab):
    """A batch of token sequences drawn from gen as one text, and the next token of each (the labels)."""
    text = torch.randint(0, vocab, (batch * length + 1,), generator=gen)
    return text[:-1].view(batch, length), text[1:].view(batch, length)


def add_start(w, steps, tokens, labels, params, sgd=None):
    """A sequence model's start: meta.batch, meta.steps, meta.sgd (lr, momentum, weight decay) where given, the tokens
    ("data.out", as floats), the next-token labels flattened, and the initial parameters under their names. Returns a
    copy of those parameters, for later runs from the same start."""
    w.add("meta.batch", torch.tensor([tokens.shape[0]]), I32)
    w.add("meta.steps", torch.tensor([steps]), I32)
    if sgd is not None:
        w.add("meta.sgd", torch.tensor(list(sgd)))
    w.add("data.out", tokens.float())
    w.add("labels", labels.reshape(-1), I32)
    for k, v in params.items():
        w.add(k, v)
    return {k: v.detach().clone() for k, v in params.items()}


def run_steps(w, p, opt, loss_of, steps, at_step0=None, clip=None):
    """`steps` steps of opt over the parameters p, loss_of(p) giving each step's loss. After step 0's backward pass,
    at_step0(loss) (where given) adds what it records, then every parameter gradient follows ("<name>.grad"); with
    clip, the gradients are clipped to that global norm before each step. Returns the losses and each step's norm
    before clipping (empty without clip)."""
    losses, norms = [], []
    for step in range(steps):
        opt.zero_grad()
        loss = loss_of(p)
        loss.backward()
        losses.append(loss.item())
        if step == 0 and at_step0 is not None:
            at_step0(loss)
            for k, v in p.items():
                w.add(k + ".grad", v.grad)
        if clip is not None:
            norms.append(torch.nn.utils.clip_grad_norm_(list(p.values()), clip).item())
        opt.step()
    return losses, norms


def fresh(init):
    """Trainable copies of the initial parameters init: every run starts from the same values."""
    return {k: v.detach().clone().requires_grad_(True) for k, v in init.items()}


def add_sgd(w, p, loss_of, steps, lr, momentum, at_step0):
    """torch.optim.SGD (no weight decay) for `steps` steps over p, recording step 0 as run_steps does: "meta.losses"
    and the final parameters ("final.<name>"). Returns the losses."""
    opt = torch.optim.SGD(p.values(), lr=lr, momentum=momentum)
    losses, _ = run_steps(w, p, opt, loss_of, steps, at_step0)
    w.add("meta.losses", torch.tensor(losses))
    for k, v in p.items():
        w.add("final." + k, v)
    return losses


def add_adamw(w, init, loss_of, steps, lr, betas, eps, weight_decay):
    """torch.optim.AdamW for `steps` steps from the parameters init (copied), loss_of(params) giving each step's loss:
    "meta.adamw" (lr, beta1, beta2, eps, weight decay), "adamw.losses" and "adamw.final.<name>". Returns the losses."""
    p = fresh(init)
    opt = torch.optim.AdamW(p.values(), lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    losses, _ = run_steps(w, p, opt, loss_of, steps)
    w.add("meta.adamw", torch.tensor([lr, betas[0], betas[1], eps, weight_decay]))
    w.add("adamw.losses", torch.tensor(losses))
    for k, v in p.items():
        w.add("adamw.final." + k, v)
    return losses
