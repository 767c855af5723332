"""lucid's benchmark suite: every case runs lucid, numpy and (when importable) PyTorch side
by side in one process and prints their times and the ratios lucid/peer, plus the engine's
peak memory. Timings are best-of-repeats wall-clock times on the "cpu" device.

    python bench/suite.py [--quick] [--write bench/RESULTS.md] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import subprocess
import sys
import time
import warnings

import numpy as np

import lucid
import lucid.nn as nn
import lucid.nn.functional as F

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # PyTorch is optional: only the numpy columns are printed then
    torch = None

RNG = np.random.default_rng(0)


def _calls_for(fn, min_time):
    """How many calls of `fn` make one timing round of about `min_time / 4` or more."""
    fn()  # warm-up: first-touch allocations, lazy initialisation
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 >= min_time / 4 or n >= 1 << 20:
            return n
        n *= 4


# Each library's idle OpenMP threads spin for a while after its last op (PyTorch's, at their
# default, for milliseconds): timed right after another library, a library would share the
# cores with them. Each timing round starts after this pause, so each runs as it does alone.
SETTLE = 0.02


# Rounds for a call of a few microseconds: one round of it moves with the machine by more than
# the margins its targets leave (a 4x4 add ranged 1.1-1.65x PyTorch's time over runs of 7), so
# it takes more rounds, as the shape read does, and its best comes from more chances alike.
MICRO_ROUNDS = 25


def timed_together(fns, min_time=0.2, repeats=7):
    """The best per-call time of each of `fns` (None entries stay None), over `repeats`
    rounds that take turns between them: on a shared machine a slow spell then hits every
    library of a case alike instead of one of them."""
    counts = [_calls_for(f, min_time) if f else 0 for f in fns]
    best = [None if f is None else float("inf") for f in fns]
    for _ in range(repeats):
        for i, (f, n) in enumerate(zip(fns, counts)):
            if f is None:
                continue
            time.sleep(SETTLE)
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            best[i] = min(best[i], (time.perf_counter() - t0) / n)
    return best


class Case:
    def __init__(self, name, lucid_fn, numpy_fn=None, torch_fn=None, target="", rounds=7):
        self.name, self.lucid_fn, self.numpy_fn, self.torch_fn, self.target = name, lucid_fn, numpy_fn, torch_fn, target
        self.rounds = rounds


def arr(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ---- cases ----------------------------------------------------------------------------------


def dispatch_cases():
    a, b = arr(4, 4), arr(4, 4)
    la, lb = lucid.tensor(a), lucid.tensor(b)
    ta, tb = (torch.from_numpy(a), torch.from_numpy(b)) if torch else (None, None)

    def lucid_scope():  # a new object each time, as programs write it
        with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
            pass

    def torch_scope():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pass

    return [
        Case(
            "autocast enter+exit (new object)",
            lucid_scope,
            None,
            torch_scope if torch else None,
            "<= 0.5x torch",
            MICRO_ROUNDS,
        ),
        Case(
            "4x4 add",
            lambda: la + lb,
            lambda: a + b,
            (lambda: ta + tb) if torch else None,
            "<= 1.3x torch",
            MICRO_ROUNDS,
        ),
        Case(
            "4x4 matmul",
            lambda: la @ lb,
            lambda: a @ b,
            (lambda: ta @ tb) if torch else None,
            "<= 1.3x torch",
            MICRO_ROUNDS,
        ),
    ]


def elementwise_cases(n):
    a, b = arr(n), arr(n)
    la, lb = lucid.tensor(a), lucid.tensor(b)
    ta, tb = (torch.from_numpy(a), torch.from_numpy(b)) if torch else (None, None)
    c = math.sqrt(2 / math.pi)
    cases = [
        ("add", lambda: la + lb, lambda: a + b, lambda: ta + tb),
        ("mul", lambda: la * lb, lambda: a * b, lambda: ta * tb),
        ("exp", lambda: la.exp(), lambda: np.exp(a), lambda: ta.exp()),
        (
            "gelu (tanh)",
            lambda: F.gelu(la, "tanh"),
            lambda: 0.5 * a * (1 + np.tanh(c * (a + 0.044715 * a**3))),
            lambda: TF.gelu(ta, approximate="tanh"),
        ),
    ]
    label = f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n}"
    return [Case(f"{label} {name}", lf, nf, tf if torch else None, "<= 1.1x numpy") for name, lf, nf, tf in cases]


def matmul_cases(sizes):
    out = []
    for n in sizes:
        a, b = arr(n, n), arr(n, n)
        la, lb = lucid.tensor(a), lucid.tensor(b)
        ta, tb = (torch.from_numpy(a), torch.from_numpy(b)) if torch else (None, None)
        out.append(
            Case(
                f"matmul f32 {n}",
                lambda la=la, lb=lb: la @ lb,
                lambda a=a, b=b: a @ b,
                (lambda ta=ta, tb=tb: ta @ tb) if torch else None,
                ">= 0.95x numpy speed",
            )
        )
    for n in sizes:
        a, b = arr(n, n), arr(n, n)
        la, lb = lucid.tensor(a), lucid.tensor(b)

        def lucid_bf16(la=la, lb=lb):
            with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
                return la @ lb

        torch_fn = None
        if torch:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)

            def torch_fn(ta=ta, tb=tb):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return ta @ tb

        out.append(Case(f"matmul bf16 autocast {n}", lucid_bf16, None, torch_fn, ">= 1x torch speed"))
    return out


def conv_cases(batch=8, channels=64, size=56):
    x, w = arr(batch, channels, size, size), arr(channels, channels, 3, 3) * 0.05
    cases = []
    for amp in (False, True):
        lx, lw = lucid.tensor(x), lucid.tensor(w, requires_grad=True)

        def lucid_step(lx=lx, lw=lw, amp=amp):
            with lucid.amp.autocast("cpu", dtype=lucid.bfloat16, enabled=amp):
                y = F.conv2d(lx, lw, padding=1)
            y.float().sum().backward()
            lw.grad = None

        torch_fn = None
        if torch:
            tx, tw = torch.from_numpy(x), torch.from_numpy(w).requires_grad_()

            def torch_fn(tx=tx, tw=tw, amp=amp):
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                    y = TF.conv2d(tx, tw, padding=1)
                y.float().sum().backward()
                tw.grad = None

        name = f"conv2d fwd+bwd {'bf16 autocast' if amp else 'f32'}"
        cases.append(Case(name, lucid_step, None, torch_fn, ">= 1x torch speed" if amp else ""))
    return cases


def attention_cases(batch=4, heads=8, tokens=512, dim=64):
    q, k, v = arr(batch, heads, tokens, dim), arr(batch, heads, tokens, dim), arr(batch, heads, tokens, dim)
    lq, lk, lv = lucid.tensor(q), lucid.tensor(k), lucid.tensor(v)

    def lucid_fn():
        with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
            return F.scaled_dot_product_attention(lq, lk, lv)

    torch_fn = None
    if torch:
        tq, tk, tv = torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v)

        def torch_fn():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return TF.scaled_dot_product_attention(tq, tk, tv)

    return [Case("attention bf16 autocast", lucid_fn, None, torch_fn, ">= 1x torch speed")]


def _layer_step(lib, layer, inputs, amp):
    """Forward+backward of `layer` on `inputs` (the floating ones require grad), under bf16
    autocast if `amp`; a tuple output (RNNs, attention) counts by its first element."""
    autocast = lib.amp.autocast if lib is lucid else torch.autocast
    params = list(layer.parameters()) if hasattr(layer, "parameters") else []

    def step():
        with autocast("cpu", dtype=lib.bfloat16, enabled=amp):
            y = layer(*inputs)
        if isinstance(y, tuple):
            y = y[0]
        y.float().sum().backward()
        for t in list(inputs) + params:
            t.grad = None

    return step


def _tensor(lib, a, grad):
    if lib is lucid:
        return lucid.tensor(a, requires_grad=grad)
    t = torch.from_numpy(a)
    return t.requires_grad_() if grad else t


# The per-layer table: (name, constructor on a module namespace, input arrays); floating inputs
# require grad, integer ones (indices, class targets) do not. The first three are the layers
# that made real programs slow, at those programs' sizes (nanoGPT's LayerNorm and exact GELU,
# DCGAN's BatchNorm2d in training); the rest are every other layer and loss at a typical size.
def _layer_specs(quick):
    b = 2 if quick else 8
    ids = RNG.integers(0, 1000, (b, 64))
    classes = RNG.integers(0, 10, (b * 16,))
    pixels = RNG.integers(0, 21, (b, 32, 32))  # a class per pixel, as in segmentation
    probs = 1 / (1 + np.exp(-arr(b * 16, 10)))
    targets = (RNG.random((b * 16, 10)) > 0.5).astype(np.float32)
    seq = arr(b, 32, 64)
    return [
        ("layer_norm", lambda m: m.LayerNorm(384), [arr(b, 256 if not quick else 16, 384)]),
        ("gelu (exact)", lambda m: m.GELU(), [arr(b, 256 if not quick else 16, 1536)]),
        (
            "BatchNorm2d train",
            lambda m: m.BatchNorm2d(64),
            [arr(b, 64, 32 if not quick else 8, 32 if not quick else 8)],
        ),
        ("Linear 512->512", lambda m: m.Linear(512, 512), [arr(b * 16, 512)]),
        ("ReLU", lambda m: m.ReLU(), [arr(b, 64, 32, 32)]),
        ("LeakyReLU", lambda m: m.LeakyReLU(0.2), [arr(b, 64, 32, 32)]),
        ("GELU (tanh)", lambda m: m.GELU("tanh"), [arr(b, 64, 32, 32)]),
        ("SiLU", lambda m: m.SiLU(), [arr(b, 64, 32, 32)]),
        ("Tanh", lambda m: m.Tanh(), [arr(b, 64, 32, 32)]),
        ("Sigmoid", lambda m: m.Sigmoid(), [arr(b, 64, 32, 32)]),
        ("Softmax", lambda m: m.Softmax(dim=-1), [arr(b * 64, 1024)]),
        ("LogSoftmax", lambda m: m.LogSoftmax(dim=-1), [arr(b * 64, 1024)]),
        ("Dropout(0.1) train", lambda m: m.Dropout(0.1), [arr(b, 64, 32, 32)]),
        ("Conv1d 64->64 k3", lambda m: m.Conv1d(64, 64, 3, padding=1), [arr(b, 64, 256)]),
        ("Conv2d 64->64 k3", lambda m: m.Conv2d(64, 64, 3, padding=1), [arr(b, 64, 32, 32)]),
        ("Conv2d 1->16 k3", lambda m: m.Conv2d(1, 16, 3), [arr(b * 8, 1, 28, 28)]),
        ("ConvTranspose2d 64->32 k4 s2", lambda m: m.ConvTranspose2d(64, 32, 4, 2, 1), [arr(b, 64, 16, 16)]),
        ("MaxPool2d 2", lambda m: m.MaxPool2d(2), [arr(b, 64, 32, 32)]),
        ("AvgPool2d 2", lambda m: m.AvgPool2d(2), [arr(b, 64, 32, 32)]),
        ("AdaptiveAvgPool2d 1", lambda m: m.AdaptiveAvgPool2d(1), [arr(b * 8, 32, 14, 14)]),
        ("BatchNorm1d train", lambda m: m.BatchNorm1d(256), [arr(b * 16, 256)]),
        ("GroupNorm 8", lambda m: m.GroupNorm(8, 64), [arr(b, 64, 32, 32)]),
        ("Embedding 1000x128", lambda m: m.Embedding(1000, 128), [ids]),
        ("MultiheadAttention 64x4", lambda m: m.MultiheadAttention(64, 4, batch_first=True), [seq, seq, seq]),
        ("RNN 64->64", lambda m: m.RNN(64, 64, batch_first=True), [seq]),
        ("LSTM 64->64", lambda m: m.LSTM(64, 64, batch_first=True), [seq]),
        ("GRU 64->64", lambda m: m.GRU(64, 64, batch_first=True), [seq]),
        (
            "TransformerEncoderLayer 64x4",
            lambda m: m.TransformerEncoderLayer(64, 4, 256, dropout=0.0, batch_first=True),
            [seq],
        ),
        ("MSELoss", lambda m: m.MSELoss(), [arr(b * 16, 256), arr(b * 16, 256)]),
        ("L1Loss", lambda m: m.L1Loss(), [arr(b * 16, 256), arr(b * 16, 256)]),
        ("CrossEntropyLoss", lambda m: m.CrossEntropyLoss(), [arr(b * 16, 10), classes]),
        ("NLLLoss", lambda m: m.NLLLoss(), [arr(b * 16, 10), classes]),
        ("CrossEntropyLoss per pixel 21x32x32", lambda m: m.CrossEntropyLoss(), [arr(b, 21, 32, 32), pixels]),
        ("BCEWithLogitsLoss", lambda m: m.BCEWithLogitsLoss(), [arr(b * 16, 10), targets]),
        ("BCELoss", lambda m: m.BCELoss(), [probs.astype(np.float32), targets]),
    ]


def layer_cases(quick=False):
    """Forward+backward of every layer and loss, float32 and under bf16 autocast, beside PyTorch."""
    cases = []
    for name, make, arrays in _layer_specs(quick):
        for amp in (False, True):
            if amp and name == "BCELoss":
                continue  # refused under autocast, in PyTorch and in lucid (use BCEWithLogitsLoss)
            grads = [a.dtype.kind == "f" and not (name.endswith("Loss") and i == 1) for i, a in enumerate(arrays)]
            lucid_fn = _layer_step(lucid, make(nn).train(), [_tensor(lucid, a, g) for a, g in zip(arrays, grads)], amp)
            torch_fn = None
            if torch:
                torch_fn = _layer_step(
                    torch, make(torch.nn).train(), [_tensor(torch, a, g) for a, g in zip(arrays, grads)], amp
                )
            tag = "bf16 autocast" if amp else "f32"
            cases.append(Case(f"{name} fwd+bwd {tag}", lucid_fn, None, torch_fn, "<= 1.2x torch"))
    return cases


def _lucid_trainer(model, x, y, amp):
    opt = lucid.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        with lucid.amp.autocast("cpu", dtype=lucid.bfloat16, enabled=amp):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def _torch_trainer(model, x, y, amp):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = TF.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def _char_models(lib):
    """makemore's MLP language model (embedding 64, hidden 64, 16 characters of context, 27
    symbols) and a 2-layer LSTM language model (embedding 64, hidden 128, 65 symbols), built
    from `lib` (lucid or torch) alike."""
    nn_ = lib.nn

    class CharMLP(nn_.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn_.Embedding(28, 64)
            self.mlp = nn_.Sequential(nn_.Linear(16 * 64, 64), nn_.Tanh(), nn_.Linear(64, 27))

        def forward(self, idx):
            return self.mlp(self.wte(idx).view(idx.shape[0], -1))

    class CharLSTM(nn_.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn_.Embedding(65, 64)
            self.lstm = nn_.LSTM(64, 128, num_layers=2, batch_first=True)
            self.head = nn_.Linear(128, 65)

        def forward(self, idx):
            h, _ = self.lstm(self.emb(idx))
            return self.head(h).reshape(-1, 65)

    return CharMLP(), CharLSTM()


def _mlp(lib):
    return lib.nn.Sequential(lib.nn.Linear(784, 256), lib.nn.ReLU(), lib.nn.Linear(256, 10))


def _cnn(lib):
    n = lib.nn
    return n.Sequential(
        n.Conv2d(1, 16, 3, padding=1),
        n.ReLU(),
        n.MaxPool2d(2),
        n.Conv2d(16, 32, 3, padding=1),
        n.ReLU(),
        n.MaxPool2d(2),
        n.Flatten(),
        n.Linear(32 * 7 * 7, 10),
    )


def training_cases():
    cases = []
    mlp_x, mlp_y = RNG.integers(0, 28, (32, 16)), RNG.integers(0, 27, 32)
    lstm_x, lstm_y = RNG.integers(0, 65, (16, 32)), RNG.integers(0, 65, 16 * 32)
    for amp in (False, True):
        tag = "bf16 autocast" if amp else "f32"
        models = _char_models(lucid)
        torch_models = _char_models(torch) if torch else (None, None)
        for name, model, torch_model, (x, y) in (
            ("char MLP LM", models[0], torch_models[0], (mlp_x, mlp_y)),
            ("char LSTM LM", models[1], torch_models[1], (lstm_x, lstm_y)),
        ):
            cases.append(
                Case(
                    f"{name} train step {tag}",
                    _lucid_trainer(model, lucid.tensor(x), lucid.tensor(y), amp),
                    None,
                    _torch_trainer(torch_model, torch.from_numpy(x), torch.from_numpy(y), amp) if torch else None,
                    "<= 0.9x torch",
                )
            )
    x, y = arr(64, 784), RNG.integers(0, 10, 64)
    xi, yi = arr(32, 1, 28, 28), RNG.integers(0, 10, 32)
    for amp in (False, True):
        tag = "bf16 autocast" if amp else "f32"
        mlp, torch_mlp = _mlp(lucid), _mlp(torch) if torch else None
        cases.append(
            Case(
                f"MLP train step {tag}",
                _lucid_trainer(mlp, lucid.tensor(x), lucid.tensor(y), amp),
                None,
                _torch_trainer(torch_mlp, torch.from_numpy(x), torch.from_numpy(y), amp) if torch else None,
                "<= 1x torch",
            )
        )
        cnn, torch_cnn = _cnn(lucid), _cnn(torch) if torch else None
        cases.append(
            Case(
                f"CNN train step {tag}",
                _lucid_trainer(cnn, lucid.tensor(xi), lucid.tensor(yi), amp),
                None,
                _torch_trainer(torch_cnn, torch.from_numpy(xi), torch.from_numpy(yi), amp) if torch else None,
                "<= 1x torch",
            )
        )
    return cases


def inplace_cases(n=1_000_000):
    """Writes into existing tensors: single elements, and a parameter update under no_grad."""
    a, g = np.zeros(n, np.float32), arr(n)
    la, lg = lucid.tensor(a), lucid.tensor(g)
    ta, tg = (torch.from_numpy(a.copy()), torch.from_numpy(g)) if torch else (None, None)
    positions = [int(i) * 997 % n for i in range(1000)]

    def element_writes(t):
        def run():
            for i in positions:
                t[i] = 1.0

        return run

    def lucid_add():
        with lucid.no_grad():
            la.add_(lg, alpha=-0.1)

    def torch_add():
        with torch.no_grad():
            ta.add_(tg, alpha=-0.1)

    index = np.array(positions, np.int64)
    values = arr(len(positions))
    lidx, lval = lucid.tensor(index), lucid.tensor(values)
    tidx, tval = (torch.from_numpy(index), torch.from_numpy(values)) if torch else (None, None)
    nb = a.copy()

    def index_write(t, i, v):
        def run():
            t[i] = v

        return run

    na = a.copy()
    return [
        Case(
            "1000 element writes into 1M",
            element_writes(la),
            element_writes(na),
            element_writes(ta) if torch else None,
            "<= 2x torch",
        ),
        Case(
            "x[idx] = v, 1000 indices into 1M",
            index_write(la, lidx, lval),
            index_write(nb, index, values),
            index_write(ta, tidx, tval) if torch else None,
        ),
        Case(
            "1M p.add_(g, alpha) under no_grad",
            lucid_add,
            lambda: np.add(na, g * np.float32(-0.1), out=na),
            torch_add if torch else None,
            "<= 1.2x torch",
        ),
    ]


def optimizer_step_memory():
    """Bytes an optimizer step and a zero_grad allocate (new engine memory at their peak) on an
    MLP in steady state, for SGD with momentum and for Adam; and the peak a whole training
    step holds above the model and its state."""
    results = {}
    x, y = lucid.tensor(arr(64, 784)), lucid.tensor(RNG.integers(0, 10, 64))
    for name, make in (
        ("SGD momentum", lambda ps: lucid.optim.SGD(ps, lr=0.01, momentum=0.9)),
        ("Adam", lambda ps: lucid.optim.Adam(ps, lr=1e-3)),
    ):
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
        opt = make(model.parameters())
        for _ in range(3):  # the state exists, gradients are allocated
            opt.zero_grad(set_to_none=False)
            F.cross_entropy(model(x), y).backward()
            opt.step()
        base = lucid.memory_allocated()
        lucid.reset_peak_memory_stats()
        opt.step()
        opt.zero_grad(set_to_none=False)
        step_bytes = lucid.max_memory_allocated() - base
        lucid.reset_peak_memory_stats()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        results[name] = (step_bytes, lucid.max_memory_allocated() - base)
    return results


def shape_read_ratio(min_time):
    """The time of ``(a + b).shape`` over that of ``a + b`` (4x4), taking turns between the two:
    what reading a fresh result's shape adds to the op. The two times differ by a tenth, less
    than one round's noise on a shared machine, so this takes MICRO_ROUNDS, as the dispatch cases do."""
    a = lucid.tensor(arr(4, 4))
    op, with_shape = timed_together([lambda: a + a, lambda: (a + a).shape], min_time, MICRO_ROUNDS)
    return with_shape / op


def inspect_cost(min_time):
    """Training steps under autocast with and without ``lucid.amp.inspect()`` around each (the
    scope's start, the counting and the read-back at its end all included), timed together:
    {case: (plain, inspected)}."""
    out = {}
    x, y = arr(64, 784), RNG.integers(0, 10, 64)
    xi, yi = arr(32, 1, 28, 28), RNG.integers(0, 10, 32)
    lm = _char_models(lucid)[0]
    for name, model, (a, b) in (
        ("MLP train step bf16 autocast", _mlp(lucid), (x, y)),
        ("CNN train step bf16 autocast", _cnn(lucid), (xi, yi)),
        ("char MLP LM train step bf16 autocast", lm, (RNG.integers(0, 28, (32, 16)), RNG.integers(0, 27, 32))),
    ):
        step = _lucid_trainer(model, lucid.tensor(a), lucid.tensor(b), True)

        def inspected(step=step):
            with lucid.amp.inspect():
                step()

        out[name] = tuple(timed_together([step, inspected], min_time))
    return out


def activation_memory():
    """Engine bytes a training forward pass holds for backward (a 4-layer MLP, 1024 wide,
    batch 4096): in float32 and under bfloat16 autocast, parameters and input excluded."""
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(1024, 1024), nn.GELU())])
    x = lucid.randn(4096, 1024)
    held = []
    for amp in (False, True):
        base = lucid.memory_allocated()
        with lucid.amp.autocast("cpu", dtype=lucid.bfloat16, enabled=amp):
            y = model(x).float().sum()
        held.append(lucid.memory_allocated() - base)  # the graph's saved tensors
        del y
    return held


# ---- two processes at once -------------------------------------------------------------------

CONTENTION_SECONDS = 3.0


def _contention_workload(library, name):
    """One op of workload `name` for `library` ("lucid" or "torch"), as a function."""
    lib = lucid if library == "lucid" else torch
    if name in ("1M add", "1M exp"):
        a, b = lib.tensor(arr(1_000_000)), lib.tensor(arr(1_000_000))
        return (lambda: a + b) if name == "1M add" else (lambda: a.exp())
    if name == "matmul 256":
        a, b = lib.tensor(arr(256, 256)), lib.tensor(arr(256, 256))
        return lambda: a @ b
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(256, 512), lib.nn.ReLU(), lib.nn.Linear(512, 10))
    opt = lib.optim.SGD(model.parameters(), lr=0.01)
    x, y = lib.tensor(arr(64, 256)), lib.tensor(RNG.integers(0, 10, 64))

    def step():
        opt.zero_grad()
        lib.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def contention_worker(library, name, seconds):
    """Runs workload `name` for `seconds` and prints the mean time per op in seconds."""
    fn = _contention_workload(library, name)
    for _ in range(20):
        fn()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    print(f"{(time.perf_counter() - start) / n!r}")


def _timed_processes(library, name, count, seconds):
    cmd = [sys.executable, os.path.abspath(__file__), "--contention-worker", library, name, str(seconds)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(count)]
    times = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"the {library} {name!r} worker failed")
        times.append(float(out.strip().splitlines()[-1]))
    return max(times)


def contention_rows(seconds):
    """Per workload and library: time per op alone, each of two processes running it at once,
    and the ratio."""
    rows = []
    for name in ("1M add", "1M exp", "matmul 256", "MLP step"):
        row = [name]
        for library in ("lucid", "torch"):
            if library == "torch" and torch is None:
                row += ["—", "—", "—"]
                continue
            alone = _timed_processes(library, name, 1, seconds)
            both = _timed_processes(library, name, 2, seconds)
            row += [fmt_time(alone), fmt_time(both), f"{both / alone:.2f}x"]
        rows.append(row + ["<= 2.5x alone"])
        print("  ".join(f"{c:>12}" for c in rows[-1]), flush=True)
    return rows


# ---- report ---------------------------------------------------------------------------------

NOTES = """Notes: one run on a shared 2-core VM whose speed drifts by up to 2-3x over minutes;
each case takes turns between the libraries for seven rounds and keeps each one's best,
so ratios hold up better than absolute times (the calls of a few microseconds, the
dispatch cases and the shape read, take 25 rounds). Both libraries run with their default
settings; each round starts after a pause in which the other library's idle threads stop
spinning.
The two-process table runs each workload in fresh processes, alone and then two at once,
for several seconds each. The target column is the performance issues'."""


def _metal_time(fn, min_time):
    """Seconds per call of `fn` on "metal", the GPU's queued work included (best of 5)."""
    fn()
    lucid.metal.synchronize()
    best = float("inf")
    for _ in range(5):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            if time.perf_counter() - start >= min_time / 5:
                break
        lucid.metal.synchronize()
        best = min(best, (time.perf_counter() - start) / n)
    return best


def metal_rows(quick, min_time):
    """The GPU's own numbers, where the Metal backend serves "metal" (a Mac): matrix-product
    TFLOP/s per dtype (square and skinny), a float32 Linear with a bias, a 7×7 stem's forward
    and backward, conv2d and attention forward+backward, and a CNN and a GPT-style training
    step in float32 and under float16 autocast. Rows: case, time, rate, note."""
    rows = []
    # Square products (64×64 tiles for bfloat16, and float16 where MPS sums in float16), a
    # skinny one (few rows: 32×32 tiles), and a float32 Linear with a bias (MPS, then the bias).
    shapes = [(n, n, n) for n in ([32, 64] if quick else [1024, 2048, 4096])] + [
        (8, 64, 64) if quick else (16, 4096, 4096)
    ]
    for m, k, n in shapes:
        for dt in (lucid.float32, lucid.float16, lucid.bfloat16):
            a = lucid.randn(m, k, device="metal").to(dt)
            b = lucid.randn(k, n, device="metal").to(dt)
            t = _metal_time(lambda: a @ b, min_time)
            name = f"metal matmul {dt.name} {n}" if m == k == n else f"metal matmul {dt.name} {m}x{k}x{n}"
            rows.append([name, fmt_time(t), f"{2 * m * k * n / t / 1e12:.2f} TFLOP/s", ""])
    rows_in, features_in, features_out = (16, 32, 64) if quick else (4096, 1024, 4096)
    linear = nn.Linear(features_in, features_out).to("metal")
    xl = lucid.randn(rows_in, features_in, device="metal")
    t = _metal_time(lambda: linear(xl), min_time)
    rows.append(
        [
            f"metal linear float32 {rows_in}x{features_in}->{features_out} +bias",
            fmt_time(t),
            f"{2 * rows_in * features_in * features_out / t / 1e12:.2f} TFLOP/s",
            "MPS product, bias added after",
        ]
    )
    # A ResNet stem's backward: its weight gradient sums over every image's pixels into only
    # 64×147 outputs (split along that sum).
    stem = nn.Conv2d(3, 64, 7, stride=2, padding=3).to("metal")
    image = lucid.randn(2 if quick else 32, 3, 32 if quick else 224, 32 if quick else 224, device="metal")
    grad = lucid.randn(*stem(image).shape, device="metal")

    def stem_forward(amp):
        with lucid.amp.autocast("metal", enabled=amp):
            return stem(image)

    def stem_backward(amp):
        y = stem_forward(amp)
        y.backward(grad.to(y.dtype))

    for what, fn in (("fwd", stem_forward), ("fwd+bwd", stem_backward)):
        t32, t16 = _metal_time(lambda: fn(False), min_time), _metal_time(lambda: fn(True), min_time)
        rows.append(
            [
                f"metal conv2d stem 3->64 k7 s2 {tuple(image.shape)} {what}",
                f"{fmt_time(t32)} / {fmt_time(t16)}",
                f"{t16 / t32:.2f}x",
                "float32 / float16 autocast" + ("; weight gradient split along n·h·w" if what != "fwd" else ""),
            ]
        )
    c, side, heads, length, width = (4, 8, 2, 16, 32) if quick else (64, 56, 8, 512, 256)
    x = lucid.randn(2 if quick else 8, c, side, side, device="metal", requires_grad=True)
    conv = nn.Conv2d(c, c, 3, padding=1).to("metal")
    q = lucid.randn(1 if quick else 4, heads, length, 64 // heads if quick else 64, device="metal", requires_grad=True)

    def conv_step(amp):
        with lucid.amp.autocast("metal", enabled=amp):
            conv(x).float().sum().backward()

    def attention_step(amp):
        with lucid.amp.autocast("metal", enabled=amp):
            F.scaled_dot_product_attention(q, q, q, is_causal=True).float().sum().backward()

    cnn = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 10),
    ).to("metal")
    gpt = nn.TransformerEncoder(nn.TransformerEncoderLayer(width, 8, 4 * width, batch_first=True), 1 if quick else 4)
    gpt = gpt.to("metal")
    batch = 2 if quick else 64
    images = lucid.randn(batch, 1, 28, 28, device="metal")
    labels = lucid.tensor(RNG.integers(0, 10, batch), device="metal")
    tokens = lucid.randn(2 if quick else 16, length, width, device="metal")

    def train_step(model, opt, data, loss_fn, amp):
        def step():
            with lucid.amp.autocast("metal", enabled=amp):
                loss = loss_fn(model(data))
            opt.zero_grad()
            loss.backward()
            opt.step()

        return step

    models = {
        "CNN": (cnn, images, lambda out: F.cross_entropy(out, labels)),
        f"GPT ({len(gpt.layers)} layers of {width})": (gpt, tokens, lambda out: out.float().pow(2).mean()),
    }
    for name, fn in (
        (f"conv2d {c}->{c} k3 fwd+bwd", conv_step),
        (f"causal attention {heads}x{length} fwd+bwd", attention_step),
    ):
        t32, t16 = _metal_time(lambda: fn(False), min_time), _metal_time(lambda: fn(True), min_time)
        rows.append(
            [f"metal {name}", f"{fmt_time(t32)} / {fmt_time(t16)}", f"{t16 / t32:.2f}x", "float32 / float16 autocast"]
        )
    for name, (model, data, loss_fn) in models.items():
        opt = lucid.optim.Adam(model.parameters(), lr=1e-3)
        t32 = _metal_time(train_step(model, opt, data, loss_fn, False), min_time)
        t16 = _metal_time(train_step(model, opt, data, loss_fn, True), min_time)
        rows.append(
            [
                f"metal {name} train step",
                f"{fmt_time(t32)} / {fmt_time(t16)}",
                f"{t16 / t32:.2f}x",
                "float32 / float16 autocast (target: autocast faster)",
            ]
        )
    return rows


def metal_kernel_rows(quick, min_time):
    """The GPU kernels the review of the Metal backend named, each on its own: fused attention
    forward at head dimensions 64 and 80 (a fixed-head variant each) in float32 and float16;
    an add with a transposed operand (the strided kernel with 32-bit indices); and sums and
    maxima over the rows of a tall matrix (a SIMD group per row). Rows: case, time, rate, note."""
    rows = []
    batch, heads, length = (1, 2, 40) if quick else (4, 8, 1024)
    for dim in (64, 80):
        for dt in (lucid.float32, lucid.float16):
            q, k, v = (lucid.randn(batch, heads, length, dim, device="metal").to(dt) for _ in range(3))
            t = _metal_time(lambda: F.scaled_dot_product_attention(q, k, v), min_time)
            flops = 4 * batch * heads * length * length * dim
            rows.append(
                [f"metal attention head {dim} {dt.name} fwd", fmt_time(t), f"{flops / t / 1e12:.2f} TFLOP/s", ""]
            )
    n = 64 if quick else 4096
    a = lucid.randn(n, n, device="metal")
    b = lucid.randn(n, n, device="metal")
    t = _metal_time(lambda: a.t() + b, min_time)
    rows.append([f"metal add transposed {n}x{n} float32", fmt_time(t), f"{3 * n * n * 4 / t / 1e9:.1f} GB/s", ""])
    m, w = (500, 100) if quick else (262_144, 100)
    x = lucid.randn(m, w, device="metal")
    for name, fn in (("sum", lambda: x.sum(1)), ("max", lambda: x.max(1).values)):
        t = _metal_time(fn, min_time)
        rows.append([f"metal {name} over rows {m}x{w} float32", fmt_time(t), f"{m * w * 4 / t / 1e9:.1f} GB/s", ""])
    return rows


def working_peer(fn, what, failures):
    """`fn`, or None when one call of it raises: a peer's failure on this machine (PyTorch's
    oneDNN declines some bfloat16 primitives on CPUs without AVX-512) leaves its column empty
    and is reported under the table instead of ending the run."""
    if fn is None:
        return None
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - any failure of the peer is reported as it is
        failures.append(f"{what}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        print(failures[-1], flush=True)
        return None
    return fn


def fmt_time(t):
    if t is None:
        return "—"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
        if t >= scale:
            return f"{t / scale:.3g} {unit}"
    return f"{t / 1e-9:.3g} ns"


def ratio(a, b):
    return "—" if a is None or b is None else f"{a / b:.2f}x"


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    peers = f"numpy {np.__version__}" + (
        f", PyTorch {torch.__version__} ({torch.get_num_threads()} threads)" if torch else ""
    )
    system = f"{platform.system()} {platform.release()}"
    return f"{cpu}, {os.cpu_count()} cores, {system}; Python {platform.python_version()}, {peers}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and shorter timings (a smoke run)")
    parser.add_argument("--write", metavar="FILE", help="also write the table as Markdown to FILE")
    parser.add_argument("--only", metavar="TEXT", help="run only the cases whose name contains TEXT")
    parser.add_argument(
        "--contention-worker", nargs=3, metavar=("LIBRARY", "WORKLOAD", "SECONDS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.contention_worker:
        library, name, seconds = args.contention_worker
        return contention_worker(library, name, float(seconds))
    warnings.simplefilter("ignore", lucid.metal.MetalFallbackWarning)
    min_time = 0.05 if args.quick else 0.3

    cases = dispatch_cases() + elementwise_cases(100_000 if args.quick else 1_000_000)
    cases += matmul_cases([64, 128] if args.quick else [256, 1024, 2048])
    cases += conv_cases(2, 16, 28) if args.quick else conv_cases()
    cases += attention_cases(1, 2, 128, 32) if args.quick else attention_cases()
    cases += layer_cases(args.quick)
    cases += training_cases()
    cases += inplace_cases(100_000 if args.quick else 1_000_000)
    if args.only:
        cases = [c for c in cases if args.only in c.name]

    header = ["case", "lucid", "numpy", "torch", "lucid/numpy", "lucid/torch", "target"]
    rows = []
    print(f"lucid {lucid.__version__} on {machine()}\n")
    print(f"{header[0]:<42}{header[1]:>11}{header[2]:>11}{header[3]:>11}{header[4]:>13}{header[5]:>13}  {header[6]}")
    peer_failures = []
    for c in cases:
        torch_fn = working_peer(c.torch_fn, f"PyTorch fails on {c.name}", peer_failures)
        t_l, t_n, t_t = timed_together([c.lucid_fn, c.numpy_fn, torch_fn], min_time, c.rounds)
        row = [c.name, fmt_time(t_l), fmt_time(t_n), fmt_time(t_t), ratio(t_l, t_n), ratio(t_l, t_t), c.target]
        rows.append(row)
        print(f"{row[0]:<42}{row[1]:>11}{row[2]:>11}{row[3]:>11}{row[4]:>13}{row[5]:>13}  {row[6]}", flush=True)

    shape = f"(a + b).shape on a 4x4 result: {shape_read_ratio(min_time):.2f}x the time of a + b (target <= 1.1x)"
    print(f"\n{shape}")
    fp32, amp = activation_memory()
    mem = (
        f"activation memory held by a training forward pass: float32 {fp32 / 2**20:.1f} MiB, bf16 autocast "
        f"{amp / 2**20:.1f} MiB ({amp / fp32:.2f}x; target <= 0.55x)"
    )
    steps = optimizer_step_memory()
    opt_mem = "; ".join(
        f"{name}: a step and zero_grad allocate {a} bytes (target 0), a whole training step "
        f"peaks {peak / 2**20:.2f} MiB above its model and state"
        for name, (a, peak) in steps.items()
    )
    print(f"\n{mem}\n{opt_mem}\npeak engine memory over the run: {lucid.max_memory_allocated() / 2**20:.1f} MiB")
    inspect = ""
    if not args.only or "inspect" in args.only:
        costs = inspect_cost(min_time)
        inspect = (
            "lucid.amp.inspect() around a training step (counting every cast input and result, and reading "
            "the counts back at the scope's end), against the same step without it: "
            + "; ".join(f"{name} {fmt_time(t)} / {fmt_time(ti)} = {ti / t:.2f}x" for name, (t, ti) in costs.items())
            + " (target <= 2x)"
        )
        print(f"\n{inspect}")
    metal = []
    if lucid.metal.is_available() and (not args.only or "metal" in args.only):
        print("\nthe Metal backend (this Mac's GPU): time, rate or autocast/float32 ratio")
        for r in metal_rows(args.quick, min_time) + metal_kernel_rows(args.quick, min_time):
            metal.append(r)
            print(f"{r[0]:<42}{r[1]:>24}{r[2]:>16}  {r[3]}", flush=True)
    contention = []
    if not args.only or "two processes" in args.only:
        print("\ntwo processes at once: per op, alone / each of two / ratio, for lucid then torch")
        contention = contention_rows(0.5 if args.quick else CONTENTION_SECONDS)

    if args.write:
        with open(args.write, "w") as f:
            f.write("# Benchmark results\n\n")
            f.write(
                f"`make bench` on {machine()}, {time.strftime('%Y-%m-%d')}. Ratios are lucid's time over the "
                "peer's (below 1 is faster); \"speed\" targets are met when the time ratio is at most 1/target.\n\n"
            )
            f.write("| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n")
            for r in rows:
                f.write("| " + " | ".join(r) + " |\n")
            f.write("".join(f"\n{failure}.\n" for failure in peer_failures))
            f.write(f"\n{shape}.\n\n{mem}.\n\n{opt_mem}.\n\n")
            if inspect:
                f.write(f"{inspect}.\n\n")
            if metal:
                f.write(
                    "The Metal backend on this Mac's GPU (float16 products run on MPS where the self-test finds "
                    "it sums in float32, the others on lucid's SIMD-group kernel):\n\n"
                )
                f.write("| case | time | rate or autocast/float32 | note |\n|---|---|---|---|\n")
                for r in metal:
                    f.write("| " + " | ".join(r) + " |\n")
                f.write("\n")
            if contention:
                cols = [
                    "workload",
                    "lucid alone",
                    "lucid, each of two",
                    "lucid ratio",
                    "torch alone",
                    "torch, each of two",
                    "torch ratio",
                    "target",
                ]
                f.write("Two processes running the same workload at once on the machine's cores:\n\n")
                f.write("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n")
                for r in contention:
                    f.write("| " + " | ".join(r) + " |\n")
                f.write("\n")
            f.write(f"{NOTES}\n")
        print(f"wrote {args.write}")


if __name__ == "__main__":
    sys.exit(main())
