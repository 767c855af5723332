"""float64 ops and their gradients, and the result dtype of mixed-dtype arithmetic, run the
same way on lucid and on PyTorch, whose outcomes are recorded in ``float64_reference.json.gz``
(``python -m tests.differential.float64_ops --record`` with PyTorch installed).

Each case builds float64 leaves from seeded values, runs one op (or a short composition) and
back-propagates a fixed random weighting of its output. The outcome is the output's dtype,
shape and values and every leaf's gradient, which lucid must match to float64's precision
(a float32 computation anywhere on the way misses by many orders of magnitude).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from . import read_reference, write_reference

REFERENCE = Path(__file__).with_name("float64_reference.json.gz")
DTYPES = ["float64", "float32", "float16", "bfloat16", "int64", "int32", "bool"]


def _values(seed, shape, positive=False):
    v = np.random.default_rng(seed).standard_normal(shape)
    return np.abs(v) + 0.5 if positive else v


def _cases(M, F):
    """name -> (leaf shapes, positive leaves?, fn(leaves) -> tensor)."""
    return {
        "add_mul_div": ([(3, 4), (4,)], False, lambda a, b: (a + b) * a / (b * b + 1)),
        "pow_sqrt_exp_log": ([(3, 4), (3, 4)], True, lambda a, b: a.pow(b) + a.sqrt() * b.exp() - a.log()),
        "unary_math": ([(3, 5)], False, lambda a: a.sin() + a.cos() * a.tanh() + a.sigmoid() - a.atan() + a.expm1()),
        "activations": (
            [(4, 6)],
            False,
            lambda a: (
                F.gelu(a)
                + F.gelu(a, approximate="tanh") * F.silu(a)
                + F.softplus(a)
                - F.elu(a)
                + F.leaky_relu(a, 0.2)
                + F.relu(a)
            ),
        ),
        "matmul": ([(5, 7), (7, 3)], False, lambda a, b: a @ b),
        "batched_matmul": ([(2, 3, 4), (2, 4, 5)], False, lambda a, b: M.matmul(a, b.transpose(1, 2).transpose(1, 2))),
        "linear": ([(6, 5), (4, 5), (4,)], False, lambda x, w, b: F.linear(x, w, b)),
        "reductions": (
            [(4, 5)],
            False,
            lambda a: a.sum(1) + a.mean(0).sum() + a.var(1) + a.std(0).sum() + a.amax(1) + a.norm(),
        ),
        "softmax": ([(3, 7)], False, lambda a: F.softmax(a * 3, dim=-1) + F.log_softmax(a, dim=0)),
        "cross_entropy": ([(5, 4)], False, lambda a: F.cross_entropy(a, M.tensor([0, 3, 1, 2, 3]))),
        "mse_bce": (
            [(3, 4), (3, 4)],
            False,
            lambda a, b: F.mse_loss(a, b) + F.binary_cross_entropy_with_logits(a, b.sigmoid()),
        ),
        "layer_norm": ([(4, 6), (6,), (6,)], False, lambda x, w, b: F.layer_norm(x, (6,), w, b)),
        "group_norm": ([(2, 4, 5), (4,), (4,)], False, lambda x, w, b: F.group_norm(x, 2, w, b)),
        "batch_norm": (
            [(5, 3, 4), (3,), (3,)],
            False,
            lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        ),
        "conv2d": ([(2, 3, 6, 5), (4, 3, 3, 3), (4,)], False, lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1)),
        "conv1d": ([(2, 2, 7), (3, 2, 3)], False, lambda x, w: F.conv1d(x, w, padding=2, dilation=2)),
        "pools": ([(2, 3, 6, 6)], False, lambda x: F.max_pool2d(x, 2) + F.avg_pool2d(x, 3, stride=2, padding=1)),
        "attention": (
            [(2, 4, 3), (2, 5, 3), (2, 5, 2)],
            False,
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
        ),
        "causal_attention": (
            [(2, 4, 3), (2, 4, 3), (2, 4, 3)],
            False,
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        ),
        "shape_and_index": (
            [(4, 5)],
            False,
            lambda a: (
                M.cat([a[1:3], a[[0, 3]].flip(0)]).t().reshape(2, 10).cumsum(1)
                + a.gather(1, M.tensor([[0], [4], [2], [1]])).sum()
            ),
        ),
        "where_clamp": ([(4, 5), (4, 5)], False, lambda a, b: M.where(a > b, a, b * 2).clamp(-0.5, 0.7)),
        "precision": ([(3,)], False, lambda a: ((a + 1e8) - 1e8) * 1e6 + (a * 1e-9).exp() - 1),
        "lstm": ([(4, 2, 3)], False, lambda x: _lstm(M, x)),
    }


def _lstm(M, x):
    M.manual_seed(0)
    lstm = M.nn.LSTM(3, 4).double()
    for i, p in enumerate(lstm.parameters()):
        with M.no_grad():
            p.copy_(M.tensor(_values(100 + i, tuple(p.shape)) * 0.5))
    return lstm(x)[0]


def run_case(M, F, name) -> dict:
    shapes, positive, fn = _cases(M, F)[name]
    leaves = [M.tensor(_values(i + 1, s, positive), dtype=M.float64, requires_grad=True) for i, s in enumerate(shapes)]
    out = fn(*leaves)
    weights = M.tensor(_values(99, tuple(out.shape)), dtype=M.float64)
    (out * weights).sum().backward()
    return {
        "dtype": str(out.dtype).split(".")[-1],
        "shape": list(out.shape),
        "values": out.detach().numpy().ravel().tolist(),
        "grads": [leaf.grad.numpy().ravel().tolist() for leaf in leaves],
    }


def _tensor(M, name, zero_dim):
    dtype = getattr(M, name)
    shape = () if zero_dim else (2,)
    return M.ones(shape, dtype=dtype)


def promotions(M) -> dict:
    """The result dtype of `a + b` for every pair of dtypes, dimensioned or 0-d, and of a
    tensor with a Python float and int."""
    out = {}
    for a in DTYPES:
        for b in DTYPES:
            for za, zb in ((False, False), (True, False), (False, True)):
                if a == "bool" and b == "bool":
                    continue
                r = _tensor(M, a, za) * _tensor(M, b, zb)
                out[f"{a}{'[]' if za else ''}*{b}{'[]' if zb else ''}"] = str(r.dtype).split(".")[-1]
        out[f"{a}*float"] = str((_tensor(M, a, False) * 2.5).dtype).split(".")[-1]
        out[f"{a}*int"] = str((_tensor(M, a, False) * 2).dtype).split(".")[-1]
    return out


def names() -> list:
    class _Stub:
        def __getattr__(self, _):
            return self

    return list(_cases(_Stub(), _Stub()))


def record():
    import torch

    torch.set_num_threads(1)
    torch.bfloat16  # noqa: B018
    cases = {name: run_case(torch, torch.nn.functional, name) for name in names()}
    write_reference(REFERENCE, torch, {"cases": cases, "promotions": promotions(torch)})


def reference() -> dict:
    return read_reference(REFERENCE)


if __name__ == "__main__":
    if sys.argv[1:] == ["--record"]:
        record()
