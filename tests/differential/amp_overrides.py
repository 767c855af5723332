"""Per-op and per-module autocast policies against PyTorch: the same small program, under CPU
bfloat16 autocast, written for lucid with ``autocast(overrides=...)`` and a module's
``autocast_policy``, and for PyTorch with the casts done by hand (``autocast(enabled=False)``
around the changed ops, their inputs cast first), as a PyTorch user has to. PyTorch's
outcomes are recorded in ``amp_overrides_reference.json.gz`` (``python -m
tests.differential.amp_overrides --record`` with PyTorch installed).

The outcome is every intermediate's dtype and values and every leaf's gradient.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from . import read_reference, write_reference

REFERENCE = Path(__file__).with_name("amp_overrides_reference.json.gz")
SHAPES = {"x": (6, 16), "w1": (16, 16), "w2": (8, 16), "b2": (8,), "w3": (4, 8), "b3": (4,)}


def _leaves(M):
    return {
        name: M.tensor(np.random.default_rng(i + 1).standard_normal(shape).astype(np.float32), requires_grad=True)
        for i, (name, shape) in enumerate(SHAPES.items())
    }


def lucid_program(lucid, t):
    """matmul overridden to float32, softmax to bfloat16; linear keeps its bfloat16; the head (a
    module with a linear layer) runs in float32 by its module policy."""
    F = lucid.nn.functional

    class Head(lucid.nn.Module):
        def forward(self, z):
            return F.linear(z, t["w3"], t["b3"])

    head = Head()
    head.autocast_policy = "float32"
    with lucid.amp.autocast("cpu", dtype=lucid.bfloat16, overrides={"matmul": "float32", "softmax": "lower"}):
        h = t["x"] @ t["w1"]
        s = F.softmax(h, -1)
        z = F.linear(s, t["w2"], t["b2"])
        o = head(z)
    return {"h": h, "s": s, "z": z, "o": o}


def torch_program(torch, t):
    """The same with PyTorch's levers: autocast(enabled=False) and manual casts."""
    F = torch.nn.functional
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with torch.autocast("cpu", enabled=False):
            h = t["x"] @ t["w1"]
            s = F.softmax(h.to(torch.bfloat16), -1)
        z = F.linear(s, t["w2"], t["b2"])
        with torch.autocast("cpu", enabled=False):
            o = F.linear(z.float(), t["w3"], t["b3"])
    return {"h": h, "s": s, "z": z, "o": o}


def outcome(M, program) -> dict:
    t = _leaves(M)
    out = program(M, t)
    weights = M.tensor(np.random.default_rng(99).standard_normal(SHAPES["x"][:1] + (4,)).astype(np.float32))
    (out["o"] * weights).sum().backward()
    return {
        "outputs": {
            k: {"dtype": str(v.dtype).split(".")[-1], "values": v.detach().float().numpy().ravel().tolist()}
            for k, v in out.items()
        },
        "grads": {k: v.grad.numpy().ravel().tolist() for k, v in t.items()},
    }


def record():
    import torch

    torch.set_num_threads(1)
    write_reference(REFERENCE, torch, {"outcome": outcome(torch, torch_program)})


def reference() -> dict:
    return read_reference(REFERENCE)


if __name__ == "__main__":
    if sys.argv[1:] == ["--record"]:
        record()
