"""Random programs of views, in-place writes and autograd, run the same way on lucid and on
PyTorch, whose outcomes are recorded in ``views_reference.json.gz`` (``python -m
tests.differential.views_programs --record`` with PyTorch installed).

A program is data: a list of instructions over numbered slots, each holding a tensor (or None
once an instruction that should have made it raised). Parameters are drawn as raw integers and
resolved against the tensor they apply to when the program runs, so the same program is
meaningful in both frameworks. The outcome is what a program shows a user: which instructions
raised (and with what exception class), the shape and values of every slot at the end, and
the base leaf's gradient (or the error backward raised).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np

from . import read_reference, write_reference

SHAPE = (3, 4, 2)
PROGRAMS = 160
REFERENCE = Path(__file__).with_name("views_reference.json.gz")

VIEWS = [
    "slice",
    "select",
    "int_index",
    "tensor_index",
    "narrow",
    "view_flat",
    "reshape_flat",
    "transpose",
    "t",
    "permute",
    "unsqueeze",
    "squeeze",
    "expand",
    "flatten",
    "unflatten",
    "diagonal",
    "detach",
    "data",
    "ellipsis_none",
]
WRITES = [
    "add_",
    "sub_",
    "mul_",
    "div_",
    "pow_",
    "clamp_",
    "fill_",
    "zero_",
    "copy_",
    "copy_broadcast",
    "add_tensor",
    "add_alpha",
    "set_int",
    "set_slice",
    "set_mask",
    "set_list",
    "set_tensor0",
    "set_all",
    "set_tensor_value",
    "masked_fill_",
    "index_put_",
    "scatter_",
    "iadd",
    "imul",
    "ipow",
    "exp_",
    "neg_",
    "sigmoid_",
    "abs_",
    "no_grad_write",
]
DERIVES = ["exp", "mul_self", "sigmoid", "clone", "add_other"]


def program(seed: int) -> list:
    """The instructions of program `seed`."""
    rng = random.Random(seed)
    ops = [("base", rng.random() < 0.6)]
    slots = 2  # the leaf and the tensor made from it
    for _ in range(rng.randint(6, 18)):
        r, src = rng.random(), rng.randrange(slots)
        raw = [rng.randrange(1 << 16) for _ in range(4)]
        if r < 0.4:
            ops.append(("view", src, rng.choice(VIEWS), raw))
            slots += 1
        elif r < 0.85:
            write = rng.choice(WRITES)
            inner = rng.choice(WRITES[:-1]) if write == "no_grad_write" else None
            ops.append(("write", src, write, raw, inner))
        else:
            ops.append(("derive", src, rng.choice(DERIVES), raw))
            slots += 1
    return ops


def _values(seed, tag, shape):
    return np.random.default_rng([seed, tag]).standard_normal(shape).astype(np.float32)


class _Runner:
    def __init__(self, M, seed):
        self.M, self.seed, self.count = M, seed, 0

    def fresh(self, shape):
        """New float32 values of `shape`, the same in both frameworks."""
        self.count += 1
        return self.M.tensor(_values(self.seed, self.count, tuple(shape)))

    def view(self, t, kind, raw):
        M, nd, shape = self.M, t.dim(), tuple(t.shape)
        d = raw[0] % nd if nd else 0
        if kind == "slice" and nd:
            index = (slice(None),) * d + (slice(raw[1] % max(shape[d], 1), None, 1 + raw[2] % 3),)
            return t[index]
        if kind == "select" and nd and shape[d]:
            return t.select(d, raw[1] % shape[d])
        if kind == "int_index" and nd and shape[0]:
            return t[raw[1] % shape[0]]
        if kind == "tensor_index" and nd and shape[0]:
            return t[M.tensor(raw[1] % shape[0])]
        if kind == "narrow" and nd and shape[d]:
            start = raw[1] % shape[d]
            return t.narrow(d, start, 1 + raw[2] % (shape[d] - start))
        if kind == "view_flat":
            return t.view(-1)
        if kind == "reshape_flat":
            return t.reshape(-1)
        if kind == "transpose" and nd:
            return t.transpose(d, raw[1] % nd)
        if kind == "t" and nd <= 2:
            return t.t()
        if kind == "permute" and nd:
            order = list(range(nd))
            random.Random(raw[1]).shuffle(order)
            return t.permute(*order)
        if kind == "unsqueeze":
            return t.unsqueeze(raw[0] % (nd + 1))
        if kind == "squeeze" and nd:
            return t.squeeze(d)
        if kind == "expand":
            return t.unsqueeze(0).expand(1 + raw[1] % 3, *shape)
        if kind == "flatten":
            return t.flatten()
        if kind == "unflatten" and nd and shape[0] % 2 == 0:
            return t.unflatten(0, (2, shape[0] // 2))
        if kind == "diagonal" and nd >= 2:
            return t.diagonal(raw[1] % 3 - 1, 0, 1)
        if kind == "detach":
            return t.detach()
        if kind == "data":
            return t.data
        if kind == "ellipsis_none":
            return t[..., None]
        return None

    def write(self, t, kind, raw, inner):
        """The tensor the slot holds after the write (an augmented operator rebinds it)."""
        M, nd, shape = self.M, t.dim(), tuple(t.shape)
        v = float(np.float32((raw[1] % 200 - 100) / 37.0))
        if kind == "no_grad_write":
            with M.no_grad():
                return self.write(t, inner, raw, None)
        if kind in ("add_", "sub_", "mul_"):
            return getattr(t, kind)(v)
        if kind == "div_":
            return t.div_(v if v else 0.5)
        if kind == "pow_":
            return t.pow_(2)
        if kind == "clamp_":
            return t.clamp_(-abs(v) / 2, abs(v))
        if kind == "fill_":
            return t.fill_(v)
        if kind == "zero_":
            return t.zero_()
        if kind == "copy_":
            return t.copy_(self.fresh(shape))
        if kind == "copy_broadcast":
            return t.copy_(self.fresh(shape[-1:]))
        if kind == "add_tensor":
            return t.add_(self.fresh(shape))
        if kind == "add_alpha":
            return t.add_(self.fresh(shape), alpha=v)
        if kind == "set_int" and nd and shape[0]:
            t[raw[0] % shape[0]] = v
        elif kind == "set_slice" and nd:
            t[raw[0] % 2 :: 2] = v
        elif kind == "set_mask":
            t[self.fresh(shape) > 0] = v
        elif kind == "set_list" and nd and shape[0]:
            t[[raw[0] % shape[0], raw[2] % shape[0]]] = v
        elif kind == "set_tensor0" and nd and shape[0]:
            t[M.tensor(raw[0] % shape[0])] = v
        elif kind == "set_all":
            t[...] = v
        elif kind == "set_tensor_value" and nd and shape[0]:
            t[raw[0] % shape[0]] = self.fresh(shape[1:])
        elif kind == "masked_fill_":
            return t.masked_fill_(self.fresh(shape) > 0.5, v)
        elif kind == "index_put_" and nd and shape[0]:
            index = M.tensor([raw[0] % shape[0], raw[2] % shape[0]])
            return t.index_put_((index,), self.fresh((2,) + shape[1:]), accumulate=bool(raw[3] % 2))
        elif kind == "scatter_" and nd:  # a permutation along d: no position written twice
            index = M.tensor(np.argsort(np.random.default_rng(raw[0]).random(shape), axis=raw[1] % nd))
            return t.scatter_(raw[1] % nd, index, self.fresh(shape))
        elif kind == "iadd":
            t += self.fresh(shape)
        elif kind == "imul":
            t *= v
        elif kind == "ipow":
            t **= 2
        elif kind in ("exp_", "neg_", "sigmoid_", "abs_"):
            return getattr(t, kind)()
        return t

    def derive(self, t, kind, raw, slots):
        if kind == "exp":
            return t.exp()
        if kind == "mul_self":
            return t * t
        if kind == "sigmoid":
            return t.sigmoid()
        if kind == "clone":
            return t.clone()
        other = slots[raw[0] % len(slots)]
        return t + other if other is not None and tuple(other.shape) == tuple(t.shape) else t * 2


def run(M, seed: int) -> dict:
    """The outcome of program `seed` run with the framework module `M` (lucid or torch)."""
    ops, r = program(seed), _Runner(M, seed)
    leaf = M.tensor(_values(seed, 0, SHAPE), requires_grad=ops[0][1])
    slots = [leaf, leaf * 1.5]
    steps = []
    for op in ops[1:]:
        src = slots[op[1]]
        made = None
        try:
            if src is None:
                steps.append("skip")
            elif op[0] == "view":
                made = r.view(src, op[2], op[3])
                steps.append("ok" if made is not None else "skip")
            elif op[0] == "write":
                slots[op[1]] = r.write(src, op[2], op[3], op[4])
                steps.append("ok")
            else:
                made = r.derive(src, op[2], op[3], slots)
                steps.append("ok")
        except Exception as e:  # noqa: BLE001 - the outcome is which class was raised
            steps.append(type(e).__name__)
        if op[0] != "write":
            slots.append(made)
    final = [None if t is None else [list(t.shape), t.detach().float().numpy().ravel().tolist()] for t in slots]
    grad = None
    if ops[0][1]:
        try:
            loss = sum(
                (t.float() * M.tensor(_values(seed, 1000 + i, tuple(t.shape)))).sum()
                for i, t in enumerate(slots)
                if t is not None and t.requires_grad
            )
            if not isinstance(loss, int):
                loss.backward()
            grad = None if leaf.grad is None else leaf.grad.numpy().ravel().tolist()
        except Exception as e:  # noqa: BLE001
            grad = type(e).__name__
    return {"steps": steps, "final": final, "grad": grad}


def record():
    import torch

    torch.set_num_threads(1)
    write_reference(REFERENCE, torch, {"outcomes": [run(torch, seed) for seed in range(PROGRAMS)]})


def reference() -> list:
    return read_reference(REFERENCE)["outcomes"]


if __name__ == "__main__":
    if sys.argv[1:] == ["--record"]:
        record()
