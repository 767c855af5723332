"""Kernel families: a backend provides the families it has and declines the rest. A declined
family's kernels run on the host kernels over the device's own memory and are counted per op
(`lucid.metal.host_fallback_counts()`); a declined softmax, attention or direct convolution
is composed from other kernels instead.

A GPU backend grows one family at a time; `LUCID_METAL_DECLINE` makes the host fallback that
serves "metal" here decline families the same way, so these paths run without a GPU. Each
case runs in a fresh interpreter, since the backend is made once per process.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from ctypes import byref, c_char_p, c_int64

import lucid
from lucid import _C

ROOT = Path(__file__).resolve().parents[1]

# LUCID_METAL_DECLINE acts on the host fallback. Where the Metal backend serves "metal" (a Mac,
# the emulated check build) its own declined families are what counts; test_metal_backend.py
# checks those.
on_host_fallback = pytest.mark.skipif(
    lucid.metal.is_available(), reason="the Metal backend serves 'metal'; LUCID_METAL_DECLINE acts on the host fallback"
)
FAMILIES = [
    "elementwise",
    "reduction",
    "matmul",
    "convolution",
    "pooling",
    "softmax",
    "normalization",
    "attention",
    "indexing",
    "optimizers",
    "amp",
]
# Declined, these are composed from other kernels rather than run on the host.
COMPOSED = ("softmax", "normalization", "attention")

# The ops each family's fallbacks are counted under (elementwise: every other name).
FAMILY_OPS = {
    "reduction": {"sum", "mean", "argmax", "argmin"},
    "matmul": {"matmul", "linear"},
    "convolution": {"im2col", "col2im"},
    "pooling": {"max_pool2d", "max_pool2d_backward"},
    "indexing": {"gather", "scatter_add", "nonzero"},
    "optimizers": {"sgd_step", "adam_step"},
    "amp": {"unscale", "update_scale"},
}

# A little of everything on "metal": conv, pooling, group and layer norm, linear, attention,
# softmax, a loss with class indices, GradScaler, Adam and SGD, boolean-mask indexing,
# comparisons and arg-reductions.
WORKLOAD = """
import json, warnings
warnings.simplefilter("ignore")
import numpy as np
import lucid, lucid.nn as nn, lucid.nn.functional as F

lucid.manual_seed(0)
rng = np.random.default_rng(0)
conv = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.GroupNorm(2, 4), nn.GELU(), nn.MaxPool2d(2), nn.Flatten(),
                     nn.LayerNorm(4 * 4 * 4), nn.Linear(4 * 4 * 4, 3))
conv.to("metal")
head = nn.Linear(8, 3).to("metal")
opt = lucid.optim.Adam(conv.parameters(), lr=1e-2)
sgd = lucid.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)
scaler = lucid.amp.GradScaler("metal")
x = lucid.tensor(rng.standard_normal((6, 2, 8, 8)).astype(np.float32)).to("metal")
labels = lucid.tensor(rng.integers(0, 3, 6)).to("metal")
seq = lucid.tensor(rng.standard_normal((2, 5, 8)).astype(np.float32)).to("metal").requires_grad_()
losses = []
for step in range(2):
    opt.zero_grad(); sgd.zero_grad()
    with lucid.amp.autocast():
        logits = conv(x)
        attn = F.scaled_dot_product_attention(seq, seq, seq, is_causal=True)
        logits2 = head(attn.mean(1))
        loss = F.cross_entropy(logits.float(), labels) + logits2.float().softmax(-1).max()
        loss = loss + F.mse_loss(logits2.float(), logits.float()[:2])
    scaler.scale(loss).backward()
    scaler.step(opt); scaler.step(sgd); scaler.update()
    losses.append(loss.item())
picked = x[x > 1.0]
out = {
    "losses": losses,
    "params": [p.float().numpy().ravel().tolist() for p in list(conv.parameters()) + list(head.parameters())],
    "seq_grad": seq.grad.float().numpy().ravel().tolist(),
    "picked": picked.numpy().tolist(),
    "argmax": logits.float().argmax(-1).numpy().tolist(),
    "counts": lucid.metal.host_fallback_counts(),
}
print(json.dumps(out))
"""


def run_workload(decline=None):
    env = {k: v for k, v in os.environ.items() if k not in ("LUCID_METAL_DECLINE", "LUCID_METAL_FALLBACK")}
    if decline is not None:
        env["LUCID_METAL_DECLINE"] = decline
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WORKLOAD)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def reference():
    return run_workload()


def assert_same_results(got, want):
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=2e-3, atol=1e-4)
    for g, w in zip(got["params"], want["params"]):
        np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(got["seq_grad"], want["seq_grad"], rtol=2e-2, atol=2e-3)
    assert got["picked"] == want["picked"]
    assert got["argmax"] == want["argmax"]


@on_host_fallback
def test_a_backend_with_every_family_falls_back_for_nothing(reference):
    assert reference["counts"] == {}
    assert len(reference["losses"]) == 2 and all(np.isfinite(reference["losses"]))


@on_host_fallback
def test_declining_every_family_runs_everything_on_the_host_kernels(reference):
    got = run_workload("all")
    assert_same_results(got, reference)
    counts = got["counts"]
    for family, ops in FAMILY_OPS.items():
        assert set(counts) & ops, f"no {family} op was counted: {counts}"
    for op in ("add", "mul", "gelu", "gelu_backward", "where", "exp"):
        assert counts.get(op, 0) > 0, f"{op} not counted: {counts}"
    # Composed, not fallen back: softmax, the norms and attention have no host-fallback entry.
    assert not {"softmax", "attention", "layer_norm", "group_norm"} & set(counts), counts
    assert all(isinstance(v, int) and v > 0 for v in counts.values())


@on_host_fallback
@pytest.mark.parametrize("family", FAMILIES)
def test_declining_one_family_counts_only_its_ops(family, reference):
    got = run_workload(family)
    assert_same_results(got, reference)
    counts = got["counts"]
    if family in COMPOSED:
        assert counts == {}, f"a declined {family} is composed from other kernels, not run on the host: {counts}"
        return
    assert counts, f"declining {family} made nothing fall back"
    others = set().union(*(ops for f, ops in FAMILY_OPS.items() if f != family))
    if family == "elementwise":
        assert not set(counts) & others, counts
    else:
        assert set(counts) <= FAMILY_OPS[family], counts


@on_host_fallback
def test_an_unknown_family_is_a_clear_error():
    env = {**os.environ, "LUCID_METAL_DECLINE": "matmul,gemmm", "PYTHONPATH": str(ROOT)}
    code = "import lucid\ntry:\n    lucid.ones(2, device='metal')\nexcept ValueError as e:\n    print(e)\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "LUCID_METAL_DECLINE: unknown kernel family 'gemmm'" in r.stdout and "optimizers, amp, linalg" in r.stdout, (
        r.stdout
    )


def test_counts_through_the_c_abi_reject_bad_arguments():
    lib = _C.lib
    n = c_int64()
    assert lib.lucid_metal_fallback_entries(byref(n)) == 0
    name, count = c_char_p(), c_int64(7)
    for index in (n.value, -1, 2**62):
        assert lib.lucid_metal_fallback_entry(index, byref(name), byref(count)) == 3  # LUCID_ERR_INDEX
        assert b"out of range" in lib.lucid_last_error()
    assert count.value == 7
    assert lib.lucid_metal_fallback_entries(None) == 1  # LUCID_ERR_VALUE
    assert lib.lucid_metal_fallback_entry(0, None, byref(count)) == 1
    counts = lucid.metal.host_fallback_counts()
    assert len(counts) == n.value and all(isinstance(k, str) and v > 0 for k, v in counts.items())
    if not lucid.metal.is_available():
        assert counts == {}  # the host fallback has every family


# nll_loss on "metal": the host fallback's weighted-gather kernel, or (indexing declined) the
# composed gather and scatter. Bits of the losses and gradients, per dtype and reduction.
NLL_WORKLOAD = """
import json
import numpy as np
import lucid, lucid.nn.functional as F

rng = np.random.default_rng(3)
out = {}
for dtype in ("float32", "bfloat16"):
    for reduction in ("none", "mean", "sum"):
        for weighted in (False, True):
            dt = getattr(lucid, dtype)
            base = lucid.tensor(rng.standard_normal((6, 3, 5)).astype(np.float32), device="metal").to(dt)
            base.requires_grad_()
            x = base.permute(0, 2, 1)  # [N, C, d], strided
            t = rng.integers(0, 5, (6, 3))
            t[1, 2] = t[4, 0] = -100
            w = lucid.tensor(rng.random(5).astype(np.float32) + 0.5, device="metal").to(dt) if weighted else None
            loss = F.nll_loss(x, lucid.tensor(t, device="metal"), weight=w, reduction=reduction)
            g = lucid.tensor(rng.standard_normal(tuple(loss.shape)).astype(np.float32), device="metal").to(dt)
            (loss * g).sum().backward()
            bits = lambda a: a.float().numpy().ravel().view(np.uint32).tolist()
            out[f"{dtype} {reduction} {weighted}"] = [bits(loss), bits(base.grad)]
try:
    F.nll_loss(lucid.zeros(2, 3, device="metal"), lucid.tensor([1, 7], device="metal"))
except IndexError as e:
    out["error"] = str(e)
out["counts"] = lucid.metal.host_fallback_counts()
print(json.dumps(out))
"""


@on_host_fallback
def test_the_nll_kernel_and_its_composed_form_agree():
    runs = []
    for decline in (None, "indexing"):
        env = {k: v for k, v in os.environ.items() if k not in ("LUCID_METAL_DECLINE", "LUCID_METAL_FALLBACK")}
        if decline:
            env["LUCID_METAL_DECLINE"] = decline
        env["PYTHONPATH"] = str(ROOT)
        r = subprocess.run(
            [sys.executable, "-c", NLL_WORKLOAD], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
        )
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    fused, composed = runs
    assert fused.pop("counts") == {}
    assert {"gather", "scatter_add"} <= set(composed.pop("counts"))  # the composed form ran
    for msg in (fused.pop("error"), composed.pop("error")):
        assert "target out of bounds: class indices must be in [0, 3) or equal ignore_index=-100" in msg
    assert fused.keys() == composed.keys()

    def as_float(bits):
        return np.array(bits, np.uint32).view(np.float32)

    for key, (loss, grad) in fused.items():
        want_loss, want_grad = composed[key]
        # The forward rounds once either way; an ignored target's loss is 0 (the composed
        # form's -(x·0) may be -0).
        np.testing.assert_array_equal(as_float(loss), as_float(want_loss), err_msg=key)
        if key.startswith("float32"):
            assert grad == want_grad, key
        else:  # the composed backward rounds each step to bfloat16, the kernel once
            np.testing.assert_allclose(as_float(grad), as_float(want_grad), rtol=1e-2, atol=1e-3, err_msg=key)
