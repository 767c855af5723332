"""Layers: the layer ops against numpy references (tests/reference.py) and their gradients
against central finite differences, and the nn modules around them (parameter shapes and
default initialisation, buffers and state dicts, train/eval behaviour, argument errors).
Module, Parameter, Sequential, Linear and state dicts in general are in test_nn.py."""

import math
import os
import sys
import zlib

import numpy as np
import ml_dtypes
import pytest

import lucid
import lucid.nn as nn
import lucid.nn.functional as F
from _helpers import T, arrays_from, numeric_grads
from reference import (
    adaptive_avg_pool2d,
    attention,
    avg_pool2d,
    conv2d,
    conv_transpose2d,
    cross_entropy,
    log_softmax,
    max_pool2d,
    softmax,
)

rng = np.random.default_rng(3)
arr = arrays_from(rng)


def close(got, want, tol=1e-4):
    np.testing.assert_allclose(np.asarray(got.numpy(), np.float64), want, rtol=tol, atol=tol)


CONV_CASES = [
    dict(),
    dict(stride=(2, 2)),
    dict(padding=(1, 2)),
    dict(dilation=(2, 1), padding=(2, 1)),
    dict(groups=2),
    dict(stride=(2, 1), padding=(1, 1), dilation=(1, 2), groups=2),
]


@pytest.mark.parametrize("kw", CONV_CASES, ids=[str(k) for k in CONV_CASES])
def test_conv2d(kw):
    g = kw.get("groups", 1)
    x, w, b = arr(2, 4, 7, 8), arr(6, 4 // g, 3, 3), arr(6)
    close(F.conv2d(T(x), T(w), T(b), **kw), conv2d(x, w, b, **kw))
    close(lucid.nn.functional.conv2d(T(x[0]), T(w), None, **kw), conv2d(x[:1], w, None, **kw)[0])


def test_conv1d():
    x, w, b = arr(2, 4, 9), arr(6, 2, 3), arr(6)
    want = conv2d(x[:, :, None], w[:, :, None], b, stride=(1, 2), padding=(0, 1), dilation=(1, 2), groups=2)[:, :, 0]
    close(F.conv1d(T(x), T(w), T(b), stride=2, padding=1, dilation=2, groups=2), want)


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(stride=(2, 2)),
        dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2)),
        dict(groups=2, dilation=(2, 1)),
    ],
)
def test_conv_transpose2d(kw):
    g = kw.get("groups", 1)
    x, w, b = arr(2, 4, 5, 4), arr(4, 6 // g, 3, 2), arr(6)
    close(F.conv_transpose2d(T(x), T(w), T(b), **kw), conv_transpose2d(x, w, b, **kw))


@pytest.mark.parametrize("device", ["cpu", "metal"])
def test_bfloat16_conv_transpose2d_and_its_gradients(device):
    x, w = arr(2, 8, 6, 5), arr(8, 3, 4, 4) * 0.2
    xb = T(x, device=device).to(lucid.bfloat16).requires_grad_()
    wb = T(w, device=device).to(lucid.bfloat16).requires_grad_()
    y = F.conv_transpose2d(xb, wb, stride=2, padding=1)
    assert y.dtype is lucid.bfloat16
    xr, wr = (np.asarray(t.float().numpy(), np.float64) for t in (xb, wb))
    want = conv_transpose2d(xr, wr, None, stride=(2, 2), padding=(1, 1))
    close(y.float(), want, 3e-2)
    g = arr(*want.shape)
    (y.float() * T(g, device=device)).sum().backward()
    # The gradients of the float32 operation on the same values, within bfloat16 rounding.
    x32, w32 = T(xr.astype(np.float32), requires_grad=True), T(wr.astype(np.float32), requires_grad=True)
    (F.conv_transpose2d(x32, w32, stride=2, padding=1) * T(g)).sum().backward()
    close(xb.grad.float(), x32.grad.numpy(), 6e-2)
    close(wb.grad.float(), w32.grad.numpy(), 2e-1)


def test_conv_errors():
    x, w = T(arr(1, 3, 5, 5)), T(arr(4, 3, 3, 3))
    with pytest.raises(ValueError, match="channels"):
        F.conv2d(T(arr(1, 2, 5, 5)), w)
    with pytest.raises(ValueError, match="smaller than the dilated kernel"):
        F.conv2d(T(arr(1, 3, 2, 2)), w)
    with pytest.raises(ValueError, match="bias"):
        F.conv2d(x, w, T(arr(3)))
    with pytest.raises(ValueError, match="stride"):
        F.conv2d(x, w, stride=0)
    with pytest.raises(TypeError, match="one dtype"):
        F.conv2d(x.half(), w)
    with pytest.raises(ValueError, match="4-D"):
        F.conv2d(T(arr(5, 5)), w)
    # groups so large that channels-per-group x groups overflows: an error, not a trap
    with pytest.raises(ValueError, match="groups"):
        F.conv2d(x, w, groups=2**62)
    with pytest.raises(ValueError, match="groups"):
        F.conv1d(T(arr(1, 3, 5)), T(arr(4, 3, 3)), groups=2**62)
    with pytest.raises(ValueError, match="groups"):
        F.conv_transpose2d(x, T(arr(3, 4, 3, 3)), groups=2**62)


@pytest.mark.parametrize("groups,channels", [(1, 1), (1, 3), (2, 4), (1, 8)])
def test_bfloat16_conv2d_rounds_once_from_exact_float32_sums(groups, channels):
    # Few input channels per group take a float32 pass on the bfloat16 operands; either way
    # the result is the exact convolution of the bfloat16 values, rounded once (within one
    # bfloat16 step of float64, and bit-equal across both paths' rounding of float32 sums).
    gen = np.random.default_rng(channels * 10 + groups)
    x = gen.standard_normal((3, channels, 9, 9)).astype(np.float32)
    w = gen.standard_normal((4, channels // groups, 3, 3)).astype(np.float32)
    xb, wb = T(x).to(lucid.bfloat16).requires_grad_(), T(w).to(lucid.bfloat16).requires_grad_()
    y = F.conv2d(xb, wb, padding=1, groups=groups)
    assert y.dtype is lucid.bfloat16
    xr, wr = (np.asarray(t.float().numpy(), np.float64) for t in (xb, wb))
    want = conv2d(xr, wr, padding=(1, 1), groups=groups)
    got = y.float().numpy()
    step = np.abs(want) * 2.0**-7 + 1e-6  # one bfloat16 rounding, plus float32 summation
    assert np.all(np.abs(got - want) <= step), np.max(np.abs(got - want) / step)
    g = gen.standard_normal(want.shape).astype(np.float32)
    (y.float() * T(g)).sum().backward()
    assert xb.grad.dtype is lucid.bfloat16 and wb.grad.dtype is lucid.bfloat16
    if groups == 1:  # d/dx: the transposed convolution of the (bfloat16-rounded) gradient
        gr = np.asarray(T(g).to(lucid.bfloat16).float().numpy(), np.float64)
        close(xb.grad.float(), conv2d(gr, np.flip(wr, (2, 3)).transpose(1, 0, 2, 3), padding=(1, 1)), 5e-2)


@pytest.mark.parametrize("dtype", [lucid.float32, lucid.bfloat16])
def test_conv2d_passes_share_reordered_inputs_without_going_stale(dtype):
    # Large enough for oneDNN's blocked layouts. The backward passes reuse the forward's
    # reordered input and each other's reordered gradient; a new tensor in a recycled
    # buffer must not pick up the old one's reordered values.
    w = arr(16, 16, 3, 3) * 0.1
    wr = np.asarray(T(w).to(dtype).float().numpy(), np.float64)
    for trial in range(3):
        wt = T(w).to(dtype).requires_grad_()
        x = arr(2, 16, 12, 12)
        leaf = T(x).to(dtype).requires_grad_()
        xr = np.asarray(leaf.float().numpy(), np.float64)
        y = F.conv2d(leaf, wt, padding=1)
        tol = 1e-4 if dtype is lucid.float32 else 5e-2
        close(y.float(), conv2d(xr, wr, padding=(1, 1)), tol)
        g = arr(2, 16, 12, 12)
        (y.float() * T(g)).sum().backward()
        gr = np.asarray(T(g).to(dtype).float().numpy(), np.float64)
        # d/dx of sum(g * conv(x, w)) is the transposed convolution of g.
        want = conv2d(gr, np.flip(wr, (2, 3)).transpose(1, 0, 2, 3), padding=(1, 1))
        close(leaf.grad.float(), want, tol * 4)
        # d/dw: the correlation of the (padded) input with g, which backward weights
        # computes from the forward's reordered input.
        xp = np.pad(xr, ((0, 0), (0, 0), (1, 1), (1, 1)))
        dw = np.stack(
            [
                np.stack([np.einsum("noyx,ncyx->oc", gr, xp[:, :, i : i + 12, j : j + 12]) for j in range(3)], -1)
                for i in range(3)
            ],
            -2,
        )
        close(wt.grad.float(), dw, tol * 20)
        del x, leaf, y


@pytest.mark.skipif(sys.platform != "linux", reason="oneDNN serves the host convolutions on Linux only")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_conv2d_backward_weights_reads_the_forwards_reordered_input(dtype):
    # oneDNN's trace lists every reorder with its dims. The input (8x16x20x20; the output
    # has 32 channels) is reordered for the forward at most once per step: backward weights
    # must find that copy staged rather than reorder the input again.
    import os
    import subprocess

    code = f"""
import numpy as np, lucid, lucid.nn.functional as F
base = lucid.tensor(np.ones((8, 16, 20, 20), np.float32))
w = lucid.tensor(np.ones((32, 16, 3, 3), np.float32)).to(lucid.{dtype}).requires_grad_()
F.conv2d(base[:1], lucid.ones(1, 16, 1, 1))  # float32: oneDNN starts, and traces the CPU's ISA
for step in range(2):
    x = base.to(lucid.{dtype}) * 1  # a new input each step, as autocast's cast makes
    print("STEP", step, flush=True)
    F.conv2d(x, w, padding=1).float().sum().backward()
    w.grad = None
"""
    env = {**os.environ, "ONEDNN_VERBOSE": "1", "DNNL_VERBOSE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    second = out.stdout.split("STEP 1", 1)[1].splitlines()
    convolutions = [ln for ln in second if ",exec," in ln and ",convolution," in ln]
    # oneDNN has bfloat16 kernels for AVX-512 and newer CPUs only (its trace names the ISA).
    isa = next((ln for ln in out.stdout.splitlines() if ",info,cpu,isa:" in ln), "")
    without_bf16 = dtype == "bfloat16" and not any(k in isa for k in ("AVX-512", "AMX"))
    if os.environ.get("LUCID_DNNL") == "0" or without_bf16:  # the im2col path: oneDNN must not run at all
        assert isa or os.environ.get("LUCID_DNNL") == "0", out.stdout[-2000:]
        assert convolutions == [], convolutions
        return
    assert len(convolutions) == 2, out.stdout[-3000:]  # the forward and backward weights (x needs no gradient)
    input_reorders = [ln for ln in second if ",exec," in ln and ",reorder," in ln and ",8x16x20x20," in ln]
    assert len(input_reorders) <= 1, input_reorders


@pytest.mark.skipif(sys.platform != "linux", reason="oneDNN serves the host products on Linux only")
def test_linear_backward_of_a_sum_runs_no_reference_kernel():
    # A sum's gradient is an expanded (stride-0) tensor. oneDNN takes such an operand only on
    # its reference matmul, a thousand times slower than its own kernels: the engine must pack
    # it (or leave the product to BLAS) instead. oneDNN's trace names each product's kernel.
    import os
    import subprocess

    code = """
import numpy as np, lucid, lucid.nn.functional as F
rng = np.random.default_rng(0)
x0, w0 = rng.standard_normal((128, 512)).astype(np.float32), rng.standard_normal((64, 512)).astype(np.float32)
x, w = lucid.tensor(x0, requires_grad=True), lucid.tensor(w0, requires_grad=True)
F.linear(x, w).sum().backward()
np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to(w0.sum(0), x0.shape), rtol=1e-5, atol=1e-4)
np.testing.assert_allclose(w.grad.numpy(), np.broadcast_to(x0.sum(0), w0.shape), rtol=1e-5, atol=1e-4)
print("GRADIENTS OK")
"""
    env = {**os.environ, "ONEDNN_VERBOSE": "1", "DNNL_VERBOSE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "GRADIENTS OK" in out.stdout, out.stderr[-2000:]
    products = [ln.split(",") for ln in out.stdout.splitlines() if ",exec," in ln and ",matmul," in ln]
    if os.environ.get("LUCID_DNNL") != "0":
        assert products, out.stdout[-2000:]  # the forward, at least, is oneDNN's
    kernels = [fields[fields.index("matmul") + 1] for fields in products]
    assert not [k for k in kernels if k.startswith("ref")], kernels


@pytest.mark.parametrize(
    "kw",
    [
        dict(k=(2, 2), s=(2, 2)),
        dict(k=(3, 3), s=(2, 2), p=(1, 1)),
        dict(k=(3, 2), s=(1, 2)),
        dict(k=(3, 3), s=(2, 2), ceil=True),
        dict(k=(2, 2), s=(1, 1), d=(2, 2)),
    ],
)
def test_max_pool2d(kw):
    x = arr(2, 3, 7, 6)
    k, s, p, d, c = kw["k"], kw["s"], kw.get("p", (0, 0)), kw.get("d", (1, 1)), kw.get("ceil", False)
    close(F.max_pool2d(T(x), k, s, p, d, ceil_mode=c), max_pool2d(x, k, s, p, d, c))


def test_max_pool2d_nan_ties_bfloat16_and_many_planes():
    x = arr(2, 3, 6, 6)
    x[0, 0, 0, 1] = np.nan
    x[0, 1, :2, :2] = 5.0  # a tie: the gradient goes to the window's first position
    x[1, 2] = -np.inf
    got = F.max_pool2d(T(x), 2)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got.numpy(), max_pool2d(x, (2, 2), (2, 2)).astype(np.float32))
    assert np.isnan(got.numpy()[0, 0, 0, 0])
    leaf = T(x, requires_grad=True)
    F.max_pool2d(leaf, 2).sum().backward()
    g = leaf.grad.numpy()
    assert g[0, 1, 0, 0] == 1 and g[0, 1, :2, :2].sum() == 1 and g[0, 0, 0, 1] == 1
    assert g[1, 2].sum() == 9  # all -inf: each window's first position
    xb = arr(4, 64, 20, 20)  # enough planes to split across threads
    want = max_pool2d(xb.astype(ml_dtypes.bfloat16).astype(np.float32), (3, 3), (2, 2), (1, 1))
    got = F.max_pool2d(T(xb).to(lucid.bfloat16), 3, 2, 1)
    assert got.dtype == lucid.bfloat16
    np.testing.assert_array_equal(got.float().numpy(), want)
    with pytest.raises(TypeError, match="floating"):
        F.max_pool2d(T(np.ones((1, 1, 4, 4), np.int64)), 2)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("ceil", [False, True])
def test_max_pool2d_halving_and_its_gradient_against_numpy(dtype, ceil):
    # MaxPool2d(2) has its own forward and, with windows that cannot overlap, a backward that
    # moves each output gradient to its input as it is; ceil_mode's overhanging last window
    # takes the general path. NaNs anywhere in a window win over numbers (the first NaN).
    x = arr(3, 40, 9, 7)
    x[0, 0, 1, 1], x[0, 0, 0, 3], x[1, 5, 4, 4] = np.nan, np.nan, np.nan
    xd = T(x).to(getattr(lucid, dtype))
    xr = xd.float().numpy()
    leaf = xd.detach().requires_grad_()
    y = F.max_pool2d(leaf, 2, ceil_mode=ceil)
    with np.errstate(invalid="ignore"):
        want = max_pool2d(xr, (2, 2), (2, 2), (0, 0), (1, 1), ceil)
    np.testing.assert_array_equal(y.float().numpy(), want.astype(np.float32))
    g = arr(*y.shape)
    gd = T(g).to(leaf.dtype)
    (y * gd).sum().backward()
    gr = gd.float().numpy()
    expect = np.zeros_like(xr)
    oh, ow = y.shape[2:]
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            for i in range(oh):
                for j in range(ow):
                    win = xr[n, c, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2]
                    nan = np.flatnonzero(np.isnan(win))
                    r, q = divmod(int(nan[0]) if len(nan) else int(np.argmax(win)), win.shape[1])
                    expect[n, c, 2 * i + r, 2 * j + q] += gr[n, c, i, j]
    np.testing.assert_array_equal(leaf.grad.float().numpy(), expect.astype(leaf.grad.float().numpy().dtype))


AVG_CASES = [
    dict(k=(2, 2), s=(2, 2)),
    dict(k=(3, 3), s=(2, 2), p=(1, 1)),
    dict(k=(3, 3), s=(2, 2), p=(1, 1), inc=False),
    dict(k=(3, 2), s=(2, 2), ceil=True),
    dict(k=(3, 3), s=(2, 2), p=(1, 1), ceil=True, inc=False),
]


@pytest.mark.parametrize("kw", AVG_CASES)
def test_avg_pool2d(kw):
    x = arr(2, 3, 7, 6)
    k, s, p, c, inc = kw["k"], kw["s"], kw.get("p", (0, 0)), kw.get("ceil", False), kw.get("inc", True)
    close(F.avg_pool2d(T(x), k, s, p, ceil_mode=c, count_include_pad=inc), avg_pool2d(x, k, s, p, c, inc))
    close(F.avg_pool2d(T(x), 2, divisor_override=3), windows_sum(x, 2) / 3)


@pytest.mark.parametrize("kw", AVG_CASES)
def test_avg_pool2d_gradient_matches_finite_differences(kw):
    x = arr(1, 2, 7, 6).astype(np.float64)
    k, s, p, c, inc = kw["k"], kw["s"], kw.get("p", (0, 0)), kw.get("ceil", False), kw.get("inc", True)
    weights = rng.standard_normal(avg_pool2d(x, k, s, p, c, inc).shape)
    t = T(x.astype(np.float32), requires_grad=True)
    (F.avg_pool2d(t, k, s, p, ceil_mode=c, count_include_pad=inc) * T(weights.astype(np.float32))).sum().backward()
    eps, num = 1e-3, np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        num[i] = ((avg_pool2d(hi, k, s, p, c, inc) - avg_pool2d(lo, k, s, p, c, inc)) * weights).sum() / (2 * eps)
    close(t.grad, num, 1e-4)


def windows_sum(x, k):
    n, c, h, w = x.shape
    return x[:, :, : h // k * k, : w // k * k].reshape(n, c, h // k, k, w // k, k).sum((3, 5))


@pytest.mark.parametrize("out", [(1, 1), (3, 2), (7, 6), (4, 5)])
def test_adaptive_avg_pool2d(out):
    x = arr(2, 3, 7, 6)
    close(F.adaptive_avg_pool2d(T(x), out), adaptive_avg_pool2d(x, out))
    assert F.adaptive_avg_pool2d(T(x), (None, 2)).shape == (2, 3, 7, 2)


def test_pool_keeps_dtype_under_autocast():
    x = T(arr(1, 2, 4, 4), device="metal")
    with lucid.amp.autocast("metal"):
        for y in (F.max_pool2d(x, 2), F.avg_pool2d(x, 2), F.adaptive_avg_pool2d(x, 1)):
            assert y.dtype == lucid.float32
        assert F.avg_pool2d(x.half(), 2).dtype == lucid.float16


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_log_softmax(dim):
    x = arr(3, 4, 5) * 10
    close(F.softmax(T(x), dim), softmax(x.astype(np.float64), dim), 1e-5)
    close(F.log_softmax(T(x), dim), log_softmax(x.astype(np.float64), dim), 1e-4)


def test_softmax_masked_rows_and_autocast():
    x = np.array([[0.0, -np.inf], [1.0, 2.0]], np.float32)
    np.testing.assert_allclose(F.softmax(T(x), 1).numpy(), [[1, 0], softmax(x[1])], rtol=1e-6)
    with lucid.amp.autocast("metal"):
        assert F.softmax(T(x, device="metal").half(), 1).dtype == lucid.float32
    with pytest.raises(TypeError, match="floating"):
        F.softmax(T(np.arange(3)), 0)


@pytest.mark.parametrize("log", [False, True])
def test_a_nan_makes_its_whole_softmax_row_nan_at_every_size(log):
    for shape in [(4, 30), (64, 1024)]:
        x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
        x[1, 5] = np.nan
        y = lucid.tensor(x).log_softmax(-1) if log else lucid.tensor(x).softmax(-1)
        assert np.isnan(y.numpy()[1]).all() and not np.isnan(np.delete(y.numpy(), 1, 0)).any(), shape


def _norm64(x, axes, eps):
    x = x.astype(np.float64)
    mu, var = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


BF16 = ml_dtypes.bfloat16


@pytest.mark.parametrize("device", ["cpu", "metal"])
def test_low_precision_layer_norm_rounds_once(device):
    # Statistics and normalisation in float32, one rounding: (nearly) every bfloat16 output is
    # the correctly rounded exact value, as in PyTorch. Rounding each step to bfloat16 gets
    # about a third of them wrong.
    x, w, b = (arr(8, 256, 96) * 3 + 1).astype(BF16), arr(96).astype(BF16), arr(96).astype(BF16)
    got = F.layer_norm(T(x, device=device), (96,), T(w, device=device), T(b, device=device)).float().numpy()
    scaled = _norm64(x, -1, 1e-5) * w.astype(np.float64)
    want = scaled + b.astype(np.float64)
    assert (got == want.astype(BF16).astype(np.float32)).mean() > 0.99
    # Within half a bfloat16 step, plus the float32 rounding of the affine's terms, which
    # outweighs that step where x̂·w + b cancels to nearly 0.
    slack = 2.0**-20 * (np.abs(scaled) + np.abs(b.astype(np.float64)))
    assert (np.abs(got - want) <= 2.0**-8 * np.abs(want) + slack).all()
    g = F.group_norm(T(x.reshape(8, 256, 8, 12), device=device), 4).float().numpy()
    want = _norm64(x.reshape(8, 4, -1), -1, 1e-5).reshape(8, 256, 8, 12)
    assert (g == want.astype(BF16).astype(np.float32)).mean() > 0.99


@pytest.mark.parametrize("device", ["cpu", "metal"])
@pytest.mark.parametrize("dtype", [lucid.float16, lucid.bfloat16])
def test_norms_take_float32_weights_with_low_precision_input(device, dtype):
    # PyTorch's mixed-precision rule: float32 weight and bias with a float16/bfloat16 input
    # give the input's dtype.
    x, w, b = arr(4, 6, 5), arr(6, 5), arr(6, 5)
    low = T(x, device=device).to(dtype)
    y = F.layer_norm(low, (6, 5), T(w, device=device), T(b, device=device))
    assert y.dtype == dtype
    xr = low.float().numpy()
    np.testing.assert_allclose(y.float().numpy(), _norm64(xr, (1, 2), 1e-5) * w + b, rtol=1e-2, atol=1e-2)
    cw, cb = arr(6), arr(6)
    y = F.group_norm(low, 3, T(cw, device=device), T(cb, device=device))
    assert y.dtype == dtype
    want = _norm64(xr.reshape(4, 3, -1), -1, 1e-5).reshape(x.shape) * cw[None, :, None] + cb[None, :, None]
    np.testing.assert_allclose(y.float().numpy(), want, rtol=1e-2, atol=1e-2)
    with pytest.raises(TypeError, match="float32 for a float16/bfloat16 input"):
        F.layer_norm(T(x, device=device), (6, 5), T(w, device=device).to(dtype))


@pytest.mark.parametrize("device", ["cpu", "metal"])
@pytest.mark.parametrize("affine", [False, True])
def test_norm_gradients_match_finite_differences(device, affine):
    x = arr(3, 4, 6)
    w, b = (arr(6), arr(6)) if affine else (None, None)
    weights = arr(3, 4, 6)

    def loss_of(xv, wv=None, bv=None):
        tx = T(xv, device=device)
        tw = None if wv is None else T(wv, device=device)
        tb = None if bv is None else T(bv, device=device)
        return (F.layer_norm(tx, (6,), tw, tb) * T(weights, device=device)).sum(), (tx, tw, tb)

    def numeric(arg, index):
        vals = [x, w, b]
        grad = np.zeros_like(vals[index])
        for i in np.ndindex(grad.shape):
            for sign in (1, -1):
                moved = [v.copy() if v is not None else None for v in vals]
                moved[index][i] += sign * 1e-2
                l, _ = loss_of(*moved)
                grad[i] += sign * l.item() / 2e-2
        return grad

    tx, tw, tb = T(x, device=device, requires_grad=True), None, None
    if affine:
        tw, tb = T(w, device=device, requires_grad=True), T(b, device=device, requires_grad=True)
    (F.layer_norm(tx, (6,), tw, tb) * T(weights, device=device)).sum().backward()
    np.testing.assert_allclose(tx.grad.numpy(), numeric(None, 0), rtol=2e-2, atol=2e-2)
    if affine:
        np.testing.assert_allclose(tw.grad.numpy(), numeric(None, 1), rtol=2e-2, atol=2e-2)
        np.testing.assert_allclose(tb.grad.numpy(), numeric(None, 2), rtol=2e-2, atol=2e-2)
    # group_norm's gradient through the same rows kernel, against layer_norm over the group.
    gx = T(x.reshape(3, 4, 2, 3), device=device, requires_grad=True)
    (F.group_norm(gx, 2) * T(weights.reshape(3, 4, 2, 3), device=device)).sum().backward()
    lx = T(x.reshape(3, 2, 12), device=device, requires_grad=True)
    (F.layer_norm(lx, (12,)) * T(weights.reshape(3, 2, 12), device=device)).sum().backward()
    np.testing.assert_allclose(gx.grad.numpy().ravel(), lx.grad.numpy().ravel(), rtol=1e-4, atol=1e-5)


def _group_norm_gradients64(x, w, g, groups, eps=1e-5):
    """dx, dweight, dbias of sum(group_norm(x, groups, w, b) * g), in float64 from the formulas."""
    n, c = x.shape[:2]
    xg = x.astype(np.float64).reshape(n, groups, -1)
    mu, var = xg.mean(-1, keepdims=True), xg.var(-1, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    xhat = ((xg - mu) * rstd).reshape(n, c, -1)
    g = np.broadcast_to(g, x.shape).astype(np.float64).reshape(n, c, -1)
    gy = (g * w.astype(np.float64)[None, :, None]).reshape(n, groups, -1)
    xh = xhat.reshape(n, groups, -1)
    dx = rstd * (gy - gy.mean(-1, keepdims=True) - xh * (gy * xh).mean(-1, keepdims=True))
    return dx.reshape(x.shape), (g * xhat).sum((0, 2)), g.sum((0, 2))


@pytest.mark.parametrize("device", ["cpu", "metal"])
@pytest.mark.parametrize("shape", [(3, 6, 5, 7), (5, 12, 4, 16), (4, 8)])
def test_group_norm_affine_forward_and_gradients_against_float64(device, shape):
    # The affine runs inside the normalisation, per channel of each group's row: odd spatial
    # sizes (vector tails), whole vectors, and no spatial dimensions at all (runs of one).
    x, w, b = arr(*shape) * 2 + 0.5, arr(shape[1]), arr(shape[1])
    weights = arr(*shape)
    groups = shape[1] // 2
    xg = x.reshape(shape[0], groups, -1)
    want = _norm64(xg, -1, 1e-5).reshape(shape) * w.reshape(1, -1, *[1] * (len(shape) - 2))
    want = want + b.reshape(1, -1, *[1] * (len(shape) - 2))
    for g in (weights, None):  # a gradient of its own, and sum()'s one value everywhere
        tx = T(x, device=device, requires_grad=True)
        tw, tb = T(w, device=device, requires_grad=True), T(b, device=device, requires_grad=True)
        y = F.group_norm(tx, groups, tw, tb)
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)
        (y if g is None else y * T(g, device=device)).sum().backward()
        dx, dw, db = _group_norm_gradients64(x, w, np.ones(shape) if g is None else g, groups)
        np.testing.assert_allclose(tx.grad.numpy(), dx, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(tw.grad.numpy(), dw, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(tb.grad.numpy(), db, rtol=1e-4, atol=1e-3)
    # bfloat16 input with float32 parameters: the affine's result rounded once.
    low = x.astype(BF16)
    y = F.group_norm(T(low, device=device), groups, T(w, device=device), T(b, device=device))
    assert y.dtype == lucid.bfloat16
    ref = _norm64(low.reshape(shape[0], groups, -1), -1, 1e-5).reshape(shape)
    ref = ref * w.reshape(1, -1, *[1] * (len(shape) - 2)) + b.reshape(1, -1, *[1] * (len(shape) - 2))
    assert (y.float().numpy() == ref.astype(BF16).astype(np.float32)).mean() > 0.97


def test_layer_norm_and_group_norm():
    x, w, b = arr(4, 6, 5), arr(6, 5), arr(6, 5)
    mu, var = x.mean((1, 2), keepdims=True), x.var((1, 2), keepdims=True)
    close(F.layer_norm(T(x), (6, 5), T(w), T(b)), (x - mu) / np.sqrt(var + 1e-5) * w + b)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    close(F.layer_norm(T(x), 5, eps=1e-3), (x - mu) / np.sqrt(var + 1e-3))
    g = x.reshape(4, 3, 10)
    y = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    gw, gb = arr(6), arr(6)
    close(F.group_norm(T(x), 3, T(gw), T(gb)), y * gw[None, :, None] + gb[None, :, None])
    with pytest.raises(ValueError, match="normalized_shape"):
        F.layer_norm(T(x), (4,))
    with pytest.raises(ValueError, match="divide"):
        F.group_norm(T(x), 4)


def test_batch_norm_training_updates_float32_running_stats():
    x = arr(8, 3, 4, 4) * 2 + 1
    bn = lucid.nn.BatchNorm2d(3)
    y = bn(T(x))
    mu, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    close(y, (x - mu[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5))
    close(bn.running_mean, 0.1 * mu, 1e-5)
    close(bn.running_var, 0.9 + 0.1 * x.var((0, 2, 3), ddof=1), 1e-5)
    assert bn.num_batches_tracked.item() == 1
    bn.eval()
    rm, rv = bn.running_mean.numpy(), bn.running_var.numpy()
    close(bn(T(x)), (x - rm[None, :, None, None]) / np.sqrt(rv[None, :, None, None] + 1e-5))
    assert set(bn.state_dict()) == {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}


def test_batch_norm_under_autocast_and_half_input():
    bn = lucid.nn.BatchNorm1d(4).to("metal")
    x = T(arr(16, 4), device="metal")
    with lucid.amp.autocast("metal"):
        y = bn(x.half())
    assert y.dtype == lucid.float16 and bn.running_mean.dtype == lucid.float32
    close(bn.running_mean, 0.1 * x.half().float().numpy().mean(0), 1e-3)
    with pytest.raises(ValueError, match="more than 1 value"):
        lucid.nn.BatchNorm1d(4)(T(arr(1, 4)))
    with pytest.raises(ValueError, match="2-D or 3-D"):
        lucid.nn.BatchNorm1d(4)(T(arr(2, 4, 2, 2)))


def test_dropout_statistics_and_gradient():
    lucid.manual_seed(0)
    x = lucid.ones(200, 100, requires_grad=True)
    y = F.dropout(x, 0.3)
    v = y.numpy()
    kept = v != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(v[kept], 1 / 0.7, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.7, rtol=1e-6)
    assert F.dropout(x, 0.3, training=False) is x
    np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), 0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, 1.5)
    m = lucid.nn.Dropout(0.5).eval()
    assert m(x) is x


@pytest.mark.parametrize("mask", ["none", "bool", "float", "causal"])
def test_scaled_dot_product_attention(mask):
    q, k, v = arr(2, 3, 4, 8), arr(2, 3, 6, 8), arr(2, 3, 6, 5)
    kw, ref = {}, {}
    if mask == "bool":
        m = rng.random((4, 6)) > 0.3
        m[:, 0] = True
        kw["attn_mask"], ref["allowed"] = T(m), m
    elif mask == "float":
        m = arr(2, 1, 4, 6)
        kw["attn_mask"], ref["additive"] = T(m), m
    elif mask == "causal":
        kw["is_causal"], ref["allowed"] = True, np.tril(np.ones((4, 6), bool))
    out = F.scaled_dot_product_attention(T(q), T(k), T(v), **kw)
    close(out, attention(q.astype(np.float64), k, v, **ref)[0], 1e-4)
    close(F.scaled_dot_product_attention(T(q), T(k), T(v), scale=0.5, **kw), attention(q, k, v, scale=0.5, **ref)[0])


@pytest.mark.parametrize("causal", [False, True])
def test_fused_attention_matches_composite_over_many_chunks(causal):
    # 12 heads of 300x280 scores span several of the fused kernel's chunks (the last one
    # partial); transposed inputs reach it as strided views.
    q, k, v = arr(3, 4, 300, 16), arr(3, 4, 16, 280), arr(3, 4, 280, 24)
    kt = T(k).transpose(-1, -2)
    allowed = np.tril(np.ones((300, 280), bool)) if causal else None
    want, p = attention(q.astype(np.float64), np.swapaxes(k, -1, -2), v, allowed=allowed)
    out = F.scaled_dot_product_attention(T(q), kt, T(v), is_causal=causal)
    close(out, want, 1e-4)
    o, w = F._attention(T(q), kt, T(v), None, 0.0, causal, None, True)
    close(o, want, 1e-4)
    close(w, p, 1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_gradients_match_the_composite_form(causal):
    # An all-true bool mask sends the same problem through the composite (unfused) graph.
    q, k, v, g = arr(2, 3, 5, 4), arr(2, 3, 6, 4), arr(2, 3, 6, 3), arr(2, 3, 5, 3)
    mask = np.tril(np.ones((5, 6), bool)) if causal else np.ones((5, 6), bool)
    grads = []
    for kw in (dict(is_causal=causal), dict(attn_mask=T(mask))):
        leaves = [T(a, requires_grad=True) for a in (q, k, v)]
        (F.scaled_dot_product_attention(*leaves, scale=0.7, **kw) * T(g)).sum().backward()
        grads.append([t.grad.numpy() for t in leaves])
    for fused, composite in zip(*grads):
        np.testing.assert_allclose(fused, composite, rtol=1e-5, atol=1e-6)


def test_attention_under_bfloat16_autocast_rounds_products_and_weights():
    q, k, v = arr(2, 64, 32), arr(2, 48, 32), arr(2, 48, 16)
    bf = [a.astype(ml_dtypes.bfloat16).astype(np.float64) for a in (q, k, v)]
    s = bf[0] @ np.swapaxes(bf[1], -1, -2) / np.sqrt(32)
    p = softmax(s).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    want = p @ bf[2]
    leaves = [T(a, requires_grad=True) for a in (q, k, v)]
    with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
        out = F.scaled_dot_product_attention(*leaves)
    assert out.dtype == lucid.bfloat16
    np.testing.assert_allclose(out.float().numpy(), want, rtol=1e-2, atol=1e-2)
    out.float().sum().backward()
    assert all(t.grad.dtype == lucid.float32 and np.isfinite(t.grad.numpy()).all() for t in leaves)


@pytest.mark.parametrize("dtype", [lucid.bfloat16, lucid.float16])
@pytest.mark.parametrize("causal", [False, True])
def test_sixteen_bit_fused_attention_over_many_chunks(dtype, causal):
    # 12 heads of 300x280 scores span several chunks. The products read the weights rounded
    # to the inputs' dtype, whether or not the caller asks for the weights. The fused kernel
    # keeps the scores in float32; the composed form (without oneDNN) rounds its product.
    np_type = ml_dtypes.bfloat16 if dtype == lucid.bfloat16 else np.float16
    q, k, v = (arr(3, 4, n, e).astype(np_type) for n, e in ((300, 16), (280, 16), (280, 24)))
    wide = [a.astype(np.float64) for a in (q, k, v)]
    s = wide[0] @ np.swapaxes(wide[1], -1, -2)
    if os.environ.get("LUCID_DNNL") == "0":
        s = s.astype(np.float32).astype(np_type).astype(np.float64)
    s /= 4.0  # exact
    if causal:
        s = np.where(np.tril(np.ones((300, 280), bool)), s, -np.inf)
    p = softmax(s)
    lq, lk, lv = (lucid.tensor(a.astype(np.float32)).to(dtype) for a in (q, k, v))
    out = F.scaled_dot_product_attention(lq, lk, lv, is_causal=causal)
    o, w = F._attention(lq, lk, lv, None, 0.0, causal, None, True)
    assert out.dtype == o.dtype == w.dtype == dtype
    # The weights are p rounded to the dtype (within its step: a weight whose float32 value
    # lies at a rounding boundary may round either way, and in a causal row's first entries
    # one step of a weight near 1 moves the output by a few thousandths), and the output is
    # the product of those rounded weights.
    rounded = w.float().numpy().astype(np.float64)
    np.testing.assert_allclose(rounded, p, rtol=1e-2, atol=1e-4)
    np.testing.assert_allclose(out.float().numpy(), rounded @ wide[2], rtol=1e-2, atol=2e-3)
    np.testing.assert_array_equal(out.float().numpy(), o.float().numpy())


def test_attention_under_autocast_and_errors():
    q = T(arr(2, 4, 8), device="metal")
    with lucid.amp.autocast("metal"):
        assert F.scaled_dot_product_attention(q, q, q).dtype == lucid.float16
    with pytest.raises(ValueError, match="embedding size"):
        F.scaled_dot_product_attention(T(arr(2, 4)), T(arr(2, 3)), T(arr(2, 3)))
    with pytest.raises(ValueError, match="not both"):
        F.scaled_dot_product_attention(
            T(arr(2, 4)), T(arr(2, 4)), T(arr(2, 4)), attn_mask=T(np.ones((2, 2), bool)), is_causal=True
        )


def test_multihead_attention_matches_manual_computation():
    mha = lucid.nn.MultiheadAttention(8, 2, batch_first=True)
    x = arr(3, 5, 8)
    pad = np.zeros((3, 5), bool)
    pad[1, 3:] = True
    out, w = mha(T(x), T(x), T(x), key_padding_mask=T(pad))
    wi, bi = mha.in_proj_weight.numpy(), mha.in_proj_bias.numpy()
    q, k, v = [
        (x @ wi[i * 8 : (i + 1) * 8].T + bi[i * 8 : (i + 1) * 8]).reshape(3, 5, 2, 4).transpose(0, 2, 1, 3)
        for i in range(3)
    ]
    o, p = attention(q, k, v, allowed=~pad[:, None, None, :])
    o = o.transpose(0, 2, 1, 3).reshape(3, 5, 8) @ mha.out_proj.weight.numpy().T + mha.out_proj.bias.numpy()
    close(out, o, 1e-4)
    close(w, p.mean(1), 1e-5)
    seq_first, _ = lucid.nn.MultiheadAttention(8, 2)(T(x).transpose(0, 1), T(x).transpose(0, 1), T(x).transpose(0, 1))
    assert seq_first.shape == (5, 3, 8)
    o2, none = mha(T(x), T(x), T(x), need_weights=False)
    assert none is None and o2.shape == (3, 5, 8)
    _, per_head = mha(T(x), T(x), T(x), average_attn_weights=False)
    assert per_head.shape == (3, 2, 5, 5)


# ---- losses -----------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_pointwise_losses(reduction):
    a, b = arr(4, 5), arr(4, 5)
    red = {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction]
    close(F.mse_loss(T(a), T(b), reduction=reduction), red((a - b) ** 2))
    close(F.l1_loss(T(a), T(b), reduction=reduction), red(np.abs(a - b)))


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(reduction="sum"),
        dict(reduction="none"),
        dict(ignore_index=2),
        dict(label_smoothing=0.2),
        dict(weight=True),
        dict(weight=True, label_smoothing=0.1, ignore_index=1),
    ],
)
def test_cross_entropy_and_nll(kw):
    logits, target = arr(6, 4) * 3, rng.integers(0, 4, 6)
    weight = np.abs(arr(4)) + 0.1 if kw.get("weight") else None
    args = dict(kw, weight=None if weight is None else T(weight))
    ref = dict(
        weight=weight,
        ignore_index=kw.get("ignore_index", -100),
        reduction=kw.get("reduction", "mean"),
        smoothing=kw.get("label_smoothing", 0.0),
    )
    close(F.cross_entropy(T(logits), T(target), **args), cross_entropy(logits.astype(np.float64), target, **ref))
    if not kw.get("label_smoothing"):
        nll_args = {k: v for k, v in args.items() if k != "label_smoothing"}
        close(
            F.nll_loss(F.log_softmax(T(logits), 1), T(target), **nll_args),
            cross_entropy(logits.astype(np.float64), target, **ref),
        )


def test_cross_entropy_spatial_and_probabilities():
    logits, target = arr(2, 3, 4, 5), rng.integers(0, 3, (2, 4, 5))
    close(F.cross_entropy(T(logits), T(target)), cross_entropy(logits, target))
    p = softmax(arr(5, 3))
    want = -(log_softmax(arr_l := arr(5, 3)) * ((1 - 0.1) * p + 0.1 / 3)).sum(1).mean()
    close(F.cross_entropy(T(arr_l), T(p.astype(np.float32)), label_smoothing=0.1), want)
    close(
        F.cross_entropy(T(logits[0, :, 0, 0]), T(np.array(target[0, 0, 0]))),
        cross_entropy(logits[:1, :, 0, 0], target[:1, 0, 0]),
    )


@pytest.mark.parametrize("low", [lucid.bfloat16, lucid.float16])
def test_losses_with_mixed_float_inputs_promote_to_the_widest(low):
    # As PyTorch's arithmetic, and as mse_loss already did: mixed inputs compute in the wider
    # dtype whatever their order, instead of narrowing the float32 one.
    x, t = arr(4, 5), rng.random((4, 5)).astype(np.float32)
    probs = (t / t.sum(1, keepdims=True)).astype(np.float32)
    for a, b in ((T(x).to(low), T(t)), (T(x), T(t).to(low))):
        for loss in (F.binary_cross_entropy_with_logits(a, b), F.mse_loss(a, b), F.l1_loss(a, b)):
            assert loss.dtype == lucid.float32, loss.dtype
    got = F.binary_cross_entropy_with_logits(T(x).to(low), T(t))
    xr = T(x).to(low).float().numpy().astype(np.float64)
    want = np.mean(np.maximum(xr, 0) - xr * t + np.log1p(np.exp(-np.abs(xr))))
    np.testing.assert_allclose(got.item(), want, rtol=1e-5)
    ce = F.cross_entropy(T(x).to(low), T(probs))
    assert ce.dtype == lucid.float32
    np.testing.assert_allclose(ce.item(), -(log_softmax(xr, 1) * probs).sum(1).mean(), rtol=1e-5)
    assert F.cross_entropy(T(x), T(probs).to(low)).dtype == lucid.float32
    w = T(rng.random(5).astype(np.float32))
    assert F.binary_cross_entropy_with_logits(T(x).to(low), T(t).to(low), pos_weight=w).dtype == lucid.float32


def test_cross_entropy_errors_and_autocast():
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(T(arr(2, 3)), T([0, 3]))
    with pytest.raises(ValueError, match="target of shape"):
        F.cross_entropy(T(arr(2, 3)), T([0, 1, 2]))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(T(arr(2, 3)), T([0, 1]), reduction="avg")
    with lucid.amp.autocast("metal"):
        assert F.cross_entropy(T(arr(2, 3), device="metal").half(), T([0, 1], device="metal")).dtype == lucid.float32


def test_bce_with_logits():
    x, y = arr(4, 3) * 4, (rng.random((4, 3)) > 0.5).astype(np.float32)
    pw, w = np.abs(arr(3)) + 0.5, np.abs(arr(4, 3))
    sig = 1 / (1 + np.exp(-x.astype(np.float64)))
    want = -(pw * y * np.log(sig) + (1 - y) * np.log(1 - sig)) * w
    close(F.binary_cross_entropy_with_logits(T(x), T(y), weight=T(w), pos_weight=T(pw)), want.mean())
    close(
        F.binary_cross_entropy_with_logits(T(x), T(y), reduction="none"), -(y * np.log(sig) + (1 - y) * np.log(1 - sig))
    )
    big = np.array([100.0, -100.0], np.float32)
    assert np.isfinite(F.binary_cross_entropy_with_logits(T(big), T(np.array([0.0, 1.0], np.float32))).item())


# ---- gradients by finite differences -----------------------------------------------------

Y = rng.integers(0, 4, 5)
Y[1] = 2
MASK = rng.random((3, 4)) > 0.4
MASK[:, 0] = True

GRADS = {
    "pow": (lambda a, b: (a.abs() + 0.5) ** b, [(3, 4), (4,)]),
    "pow_scalar": (lambda a: a**3 + 2.0**a, [(5,)]),
    "maximum": (lambda a, b: lucid.maximum(a, b) + lucid.minimum(a, b * 2), [(3, 4), (3, 4)]),
    "clamp": (lambda a: a.clamp(-0.35, 0.15), [(8,)]),
    "where": (lambda a, b: lucid.where(T(MASK), a, b), [(3, 4), (4,)]),
    "var_std": (lambda a: a.var(1) + a.std(0, correction=0).sum(), [(3, 4)]),
    "logsumexp": (lambda a: a.logsumexp((0, 1)) + a.logsumexp(1).sum(), [(3, 4)]),
    "amax": (lambda a: a.amax(1) + a.max(0).values.sum(), [(3, 4)]),
    "index": (lambda a: a[1:, ::2] * 2 + a[[0, 2]][:, :2] + a[T(MASK)].sum(), [(3, 4)]),
    "cat_split": (lambda a, b: lucid.cat([a, b * b], 1).split([2, 5], 1)[1], [(3, 2), (3, 5)]),
    "expand": (lambda a: a.unsqueeze(0).expand(2, 3, 4) * a, [(3, 4)]),
    "softmax": (lambda a: F.softmax(a, 1) + F.log_softmax(a, 0), [(3, 4)]),
    "layer_norm": (lambda a, w, b: F.layer_norm(a, (4,), w, b), [(3, 4), (4,), (4,)]),
    "group_norm": (lambda a, w: F.group_norm(a, 2, w), [(2, 4, 3), (4,)]),
    "batch_norm": (lambda a, w: F.batch_norm(a, weight=w, training=True), [(4, 3), (3,)]),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2), [(1, 4, 5, 5), (2, 2, 3, 3), (2,)]),
    "conv1d": (lambda x, w: F.conv1d(x, w, padding=1, dilation=2), [(2, 2, 6), (3, 2, 2)]),
    "conv_transpose2d": (
        lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
        [(1, 2, 3, 3), (2, 3, 3, 3)],
    ),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2, 1, padding=1), [(1, 2, 4, 4)]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False), [(1, 2, 5, 5)]),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), [(1, 2, 5, 4)]),
    "attention": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=T(MASK)), [(3, 2), (4, 2), (4, 3)]),
    "attention_causal": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        [(3, 2), (3, 2), (3, 2)],
    ),
    "cross_entropy": (lambda a: F.cross_entropy(a, T(Y), label_smoothing=0.1, ignore_index=2), [(5, 4)]),
    "nll_weighted": (lambda a, w: F.nll_loss(a, T(Y), weight=w.abs() + 0.5), [(5, 4), (4,)]),
    "mse_l1": (lambda a, b: F.mse_loss(a, b) + F.l1_loss(a, b, reduction="sum"), [(3, 4), (3, 4)]),
    "bce": (
        lambda a, b: F.binary_cross_entropy_with_logits(a, b.sigmoid(), pos_weight=T(np.array([2.0], np.float32))),
        [(4, 3), (4, 3)],
    ),
    "gather": (lambda a: a.gather(1, T(np.array([[0, 0], [1, 3], [2, 1]]))), [(3, 4)]),
    "embedding": (lambda w: F.embedding(T(np.array([[1, 0], [1, 2]])), w), [(3, 2)]),
    "index_select": (lambda a: a.index_select(1, T(np.array([3, 0, 3]))), [(2, 4)]),
    "stack_chunk": (lambda a, b: lucid.stack([a, b], 1).chunk(2, 2)[1], [(3, 4), (3, 4)]),
    "shape_views": (
        lambda a: a.unsqueeze(1).flatten(0, 1).narrow(1, 1, 2).squeeze() + a.T.reshape(4, 3)[:3, 1:],
        [(3, 4)],
    ),
    "group_norm_affine_bias": (lambda a, w, b: F.group_norm(a, 1, w, b), [(2, 3, 2), (3,), (3,)]),
    "group_norm_bias_only": (lambda a, b: F.group_norm(a, 2, None, b), [(2, 4, 3), (4,)]),
    "conv_transpose2d_groups": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 1), groups=2, dilation=(1, 2)),
        [(2, 4, 3, 3), (4, 1, 2, 3), (2,)],
    ),
    "group_norm_4d_affine": (lambda a, w, b: F.group_norm(a, 2, w, b), [(2, 4, 3, 2), (4,), (4,)]),
    "attention_fused": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.8),
        [(2, 3, 2), (2, 4, 2), (2, 4, 3)],
    ),
    "attention_float_mask": (lambda q, m: F.scaled_dot_product_attention(q, q, q, attn_mask=m), [(2, 3, 2), (3, 3)]),
}


# Max-like ops are not differentiable at ties: their inputs are distinct values spaced
# further apart than the finite-difference step.
DISTINCT = {"amax", "max_pool2d", "maximum", "clamp"}


def distinct(*shape, gen=None):
    gen = rng if gen is None else gen
    return (gen.permutation(int(np.prod(shape))).reshape(shape) * 0.1 - 0.5).astype(np.float32)


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradient_matches_finite_differences(name):
    fn, shapes = GRADS[name]
    # Each case's data comes from its own generator, so adding a case changes no other's.
    gen = np.random.default_rng(zlib.crc32(name.encode()))
    arrays = [distinct(*s, gen=gen) if name in DISTINCT else gen.standard_normal(s).astype(np.float32) for s in shapes]
    leaves = [T(a, requires_grad=True) for a in arrays]
    out = fn(*leaves)
    weights = gen.standard_normal(out.shape).astype(np.float32)
    (out * T(weights)).sum().backward()
    for t, want in zip(leaves, numeric_grads(fn, arrays, weights.astype(np.float64))):
        assert t.grad is not None and t.grad.shape == t.shape
        np.testing.assert_allclose(t.grad.numpy(), want, rtol=3e-2, atol=3e-2)


def test_huge_window_parameters_are_errors_not_overflows():
    x, w = T(arr(1, 2, 4, 4)), T(arr(1, 2, 3, 3))
    for kw in (dict(stride=2**62), dict(dilation=2**62), dict(padding=2**40)):
        with pytest.raises(ValueError, match="larger than the supported"):
            F.conv2d(x, w, **kw)
    with pytest.raises(ValueError, match="larger than the supported"):
        F.conv_transpose2d(x, T(arr(2, 1, 2, 2)), stride=2**40)
    with pytest.raises(ValueError, match="larger than the supported"):
        F.adaptive_avg_pool2d(x, 2**31)
    for pool in (F.max_pool2d, F.avg_pool2d):
        for kw in (dict(padding=2**40), dict(stride=2**62), dict(kernel_size=2**40)):
            with pytest.raises(ValueError, match="larger than the supported"):
                pool(x, **{"kernel_size": 2, **kw})
        with pytest.raises(ValueError, match="larger than the supported"):
            pool(x.half(), 2, padding=2**40)  # (the half-precision path checks the window too)
    with pytest.raises(ValueError, match="too many elements"):
        F.adaptive_avg_pool2d(x, (2**30, 2**30))


def test_empty_inputs():
    assert F.softmax(T(arr(0, 3)), 0).shape == (0, 3)
    assert F.log_softmax(T(arr(3, 0)), 1).shape == (3, 0)
    assert np.isnan(F.cross_entropy(T(arr(0, 3)), T(np.zeros(0, np.int64))).item())
    assert F.conv2d(T(arr(0, 2, 4, 4)), T(arr(3, 2, 3, 3))).shape == (0, 3, 2, 2)
    assert F.scaled_dot_product_attention(T(arr(0, 3)), T(arr(2, 3)), T(arr(2, 3))).shape == (0, 3)


def test_the_paths_without_onednn_agree(tmp_path):
    """With LUCID_DNNL=0 the engine serves GEMM from BLAS and convolution from im2col; the
    layer tests must pass on those paths too."""
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-x",
            "-p",
            "no:cacheprovider",
            os.path.join(here, "test_layers.py"),
            "-k",
            "conv or pool or attention or gradient or softmax",
            "--deselect",
            os.path.join(here, "test_layers.py") + "::test_the_paths_without_onednn_agree",
        ],
        env={**os.environ, "LUCID_DNNL": "0"},
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


@pytest.mark.parametrize("device", ["cpu", "metal"])
@pytest.mark.parametrize("dtype", [lucid.float32, lucid.bfloat16])
@pytest.mark.parametrize("n", [10, 300])  # the composed softmax, and the backend's direct kernel
def test_a_nan_makes_its_softmax_row_nan_and_infinities_follow_the_math(device, dtype, n):
    a = arr(4, n)
    a[0, 3] = np.nan  # as PyTorch: the whole row is NaN
    a[1] = -np.inf  # no finite entry: NaN
    a[2, 1] = np.inf  # NaN where the inf is, 0 (log: -inf) elsewhere
    x = T(a, device=device).to(dtype)
    y, ly = F.softmax(x, 1).float().numpy(), F.log_softmax(x, 1).float().numpy()
    assert np.isnan(y[:2]).all() and np.isnan(ly[:2]).all()
    assert np.isnan(y[2, 1]) and (np.delete(y[2], 1) == 0).all()
    assert np.isnan(ly[2, 1]) and (np.delete(ly[2], 1) == -np.inf).all()
    rounded = x.float().numpy()[3].astype(np.float64)
    np.testing.assert_allclose(y[3], softmax(rounded), rtol=1e-2 if dtype != lucid.float32 else 1e-5)


@pytest.mark.parametrize("log", [False, True])
def test_a_bfloat16_softmax_gradient_is_computed_in_float32_and_rounded_once(log):
    # Large enough for the host's direct bfloat16 kernel (with oneDNN), whose backward the host
    # has for float32 only: the gradient is y·(g - Σ g·y) (log: g - exp(y)·Σ g) computed in
    # float32 from the bfloat16 y and g and rounded once, as the GPU kernel and PyTorch compute
    # it. In bfloat16 steps, g - Σ cancels and each step rounds. Without the direct kernel the
    # softmax is composed in float32 through its graph, whose backward reads the float32 y.
    dtype, npd = lucid.bfloat16, ml_dtypes.bfloat16
    rng = np.random.default_rng(5)
    x = lucid.tensor(rng.standard_normal((8, 512)).astype(np.float32)).to(dtype).requires_grad_()
    g = rng.standard_normal((8, 512)).astype(np.float32).astype(npd)
    y = (F.log_softmax if log else F.softmax)(x, -1)
    assert y.dtype == dtype
    y.backward(lucid.tensor(g.astype(np.float32)).to(dtype))
    gv = g.astype(np.float64)
    xv = x.detach().float().numpy().astype(np.float64)
    exact = np.exp(xv - xv.max(-1, keepdims=True))
    exact /= exact.sum(-1, keepdims=True)
    got = x.grad.float().numpy().astype(np.float64)
    ok = np.zeros(got.shape, bool)
    # From the bfloat16 y the direct kernel saved, or the float32 y of the composed graph.
    for yv in (y.detach().float().numpy().astype(np.float64), exact):
        if log:
            yv = np.log(yv) if yv is exact else yv
            want = gv - np.exp(yv) * gv.sum(-1, keepdims=True)
        else:
            want = yv * (gv - (gv * yv).sum(-1, keepdims=True))
        # Within one unit in the last place (float32 sums round differently from float64 ones
        # only there); bfloat16 steps missed by up to 71 units.
        ok |= np.abs(got - want) <= np.abs(want) * 2.0**-7 + 1e-38
    assert ok.all(), np.argwhere(~ok)[:5]


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("log", [False, True])
def test_large_softmax_values_and_gradients(dim, log):
    # Large enough for the backend's direct kernel; the gradient is checked against its
    # closed form: softmax: y·(w - Σ w·y); log_softmax: w - exp(y)·Σ w.
    a = arr(40, 48, 3) * 5
    x = T(a, requires_grad=True)
    y = (F.log_softmax if log else F.softmax)(x, dim)
    ref = (log_softmax if log else softmax)(a.astype(np.float64), dim)
    close(y, ref, 1e-5)
    w = arr(*a.shape).astype(np.float64)
    (y * T(w.astype(np.float32))).sum().backward()
    if log:
        want = w - np.exp(ref) * w.sum(dim, keepdims=True)
    else:
        want = ref * (w - (w * ref).sum(dim, keepdims=True))
    close(x.grad, want, 1e-4)
    with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
        assert (F.log_softmax if log else F.softmax)(T(a).bfloat16(), dim).dtype == lucid.float32


@pytest.mark.parametrize("log", [False, True])
def test_softmax_over_the_class_axis_of_an_image(log):
    # [batch, classes, height, width] over dim 1: columns 1600 apart, in several blocks and
    # parallel parts (oneDNN, or the host's column kernel where oneDNN has only its reference
    # code or is not linked).
    a = arr(3, 21, 40, 40) * 4
    x = T(a, requires_grad=True)
    y = (F.log_softmax if log else F.softmax)(x, 1)
    ref = (log_softmax if log else softmax)(a.astype(np.float64), 1)
    close(y, ref, 1e-5)
    w = arr(*a.shape).astype(np.float64)
    (y * T(w.astype(np.float32))).sum().backward()
    if log:
        want = w - np.exp(ref) * w.sum(1, keepdims=True)
    else:
        want = ref * (w - (w * ref).sum(1, keepdims=True))
    close(x.grad, want, 1e-4)
    # A NaN makes its column NaN, a column of -inf is NaN, and +inf gives NaN where it is and 0
    # (log: -inf) elsewhere in its column, as along the last axis; the other columns are as before.
    b = a.copy()
    b[0, 3, 5, 7], b[1, 0, 0, 0], b[2, :, 1, 1] = np.inf, np.nan, -np.inf
    got = (F.log_softmax if log else F.softmax)(T(b), 1).numpy()
    assert np.isnan(got[1, :, 0, 0]).all() and np.isnan(got[2, :, 1, 1]).all() and np.isnan(got[0, 3, 5, 7])
    assert (np.delete(got[0, :, 5, 7], 3) == (-np.inf if log else 0)).all()
    hit = np.zeros(a.shape, bool)
    hit[0, :, 5, 7] = hit[1, :, 0, 0] = hit[2, :, 1, 1] = True
    np.testing.assert_allclose(got[~hit], ref[~hit], rtol=1e-5, atol=1e-5)


def _normalisation_grads(x, g, w, axes, eps=1e-5):
    """Closed-form float64 (dx, x̂) of y = (x - mean)/sqrt(var + eps)·w + b over `axes`."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    mu, var = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    xhat = (x - mu) * rstd
    gy = g * w
    return rstd * (gy - gy.mean(axes, keepdims=True) - xhat * (gy * xhat).mean(axes, keepdims=True)), xhat


@pytest.mark.parametrize("rows,n", [(2000, 100), (7, 13), (3, 384)])
def test_fused_layer_norm_backward_matches_the_closed_form(rows, n):
    # 2000×100 runs the rows on several threads, whose column sums are merged.
    x, g, w, b = arr(rows, n) * 2 + 0.5, arr(rows, n), arr(n), arr(n)
    tx, tw, tb = T(x, requires_grad=True), T(w, requires_grad=True), T(b, requires_grad=True)
    F.layer_norm(tx, (n,), tw, tb).backward(T(g))
    dx, xhat = _normalisation_grads(x, g, w[None, :], (1,))
    close(tx.grad, dx, 1e-4)
    close(tw.grad, (g * xhat).sum(0), 1e-3)
    close(tb.grad, g.astype(np.float64).sum(0), 1e-3)


@pytest.mark.parametrize("shape", [(8, 64, 16, 16), (5, 3), (4, 6, 7)])
def test_fused_batch_norm_backward_matches_the_closed_form(shape):
    c = shape[1]
    x, g = arr(*shape) * 3 + 1, arr(*shape)
    bn = lucid.nn.BatchNorm2d(c) if len(shape) == 4 else lucid.nn.BatchNorm1d(c)
    w, b = arr(c), arr(c)
    with lucid.no_grad():
        bn.weight.copy_(T(w))
        bn.bias.copy_(T(b))
    tx = T(x, requires_grad=True)
    view = (1, c) + (1,) * (len(shape) - 2)
    axes = (0,) + tuple(range(2, len(shape)))
    y = bn(tx)
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(axes, keepdims=True)) / np.sqrt(x64.var(axes, keepdims=True) + 1e-5) * w.reshape(
        view
    ) + b.reshape(view)
    close(y, want, 1e-4)
    y.backward(T(g))
    dx, xhat = _normalisation_grads(x, g, w.reshape(view), axes)
    close(tx.grad, dx, 1e-4)
    close(bn.weight.grad, (g * xhat).sum(axes), 1e-3)
    close(bn.bias.grad, g.astype(np.float64).sum(axes), 1e-3)


# ---- the modules: parameters and their initialisation, buffers, train/eval, errors --------


@pytest.mark.parametrize(
    "cls,args,wshape",
    [
        (nn.Conv2d, (4, 6, 3), (6, 4, 3, 3)),
        (nn.Conv2d, (4, 6, (3, 2), 1, 0, 1, 2), (6, 2, 3, 2)),
        (nn.Conv1d, (3, 5, 4), (5, 3, 4)),
        (nn.ConvTranspose2d, (4, 6, 3), (4, 6, 3, 3)),
    ],
)
def test_conv_modules_shapes_and_default_init(cls, args, wshape):
    m = cls(*args)
    assert m.weight.shape == wshape and m.bias.shape == (args[1],)
    bound = 1 / math.sqrt(wshape[1] * math.prod(wshape[2:]))
    w = m.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.5 * bound
    assert "kernel_size" in repr(m)


def test_conv2d_module_forward_matches_reference():
    m = nn.Conv2d(2, 3, 3, stride=2, padding=1, bias=False)
    assert m.bias is None
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(m(T(x)).numpy(), conv2d(x, m.weight.numpy(), None, (2, 2), (1, 1)), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="divisible"):
        nn.Conv2d(3, 4, 3, groups=2)


def test_buffers_state_dict_round_trip_and_device_moves():
    bn = nn.BatchNorm1d(3)
    bn(T(rng.standard_normal((8, 3))))
    state = bn.state_dict()
    fresh = nn.BatchNorm1d(3)
    fresh.load_state_dict(state)
    np.testing.assert_array_equal(fresh.running_mean.numpy(), bn.running_mean.numpy())
    assert fresh.num_batches_tracked.item() == 1
    fresh.to("metal")
    assert fresh.running_var.device == "metal" and fresh.running_var.dtype == lucid.float32
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    with pytest.raises(TypeError, match="buffer"):
        bn.running_mean = 3
    nostats = nn.BatchNorm2d(2, track_running_stats=False, affine=False)
    assert list(nostats.parameters()) == [] and list(nostats.buffers()) == []
    x = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    want = (x - x.mean((0, 2, 3), keepdims=True)) / np.sqrt(x.var((0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(nostats.eval()(T(x)).numpy(), want, rtol=1e-4, atol=1e-5)


def test_batch_norm_cumulative_momentum():
    bn = nn.BatchNorm1d(2, momentum=None)
    batches = [rng.standard_normal((5, 2)).astype(np.float32) for _ in range(3)]
    for b in batches:
        bn(T(b))
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean([b.mean(0) for b in batches], 0), rtol=1e-5, atol=1e-6)


def test_norm_modules():
    ln = nn.LayerNorm((2, 3), elementwise_affine=False)
    assert list(ln.parameters()) == []
    x = rng.standard_normal((4, 2, 3)).astype(np.float32)
    want = (x - x.mean((1, 2), keepdims=True)) / np.sqrt(x.var((1, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln(T(x)).numpy(), want, rtol=1e-4, atol=1e-5)
    gn = nn.GroupNorm(2, 4)
    assert gn.weight.shape == (4,) and np.all(gn.weight.numpy() == 1) and np.all(gn.bias.numpy() == 0)
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(3, 4)


def test_pool_and_activation_modules():
    x = T(rng.standard_normal((1, 2, 4, 4)))
    np.testing.assert_array_equal(nn.MaxPool2d(2)(x).numpy(), F.max_pool2d(x, 2).numpy())
    np.testing.assert_array_equal(nn.AvgPool2d(2, 1)(x).numpy(), F.avg_pool2d(x, 2, 1).numpy())
    assert nn.AdaptiveAvgPool2d((1, 2))(x).shape == (1, 2, 1, 2)
    np.testing.assert_allclose(nn.Softmax(dim=1)(x).numpy().sum(1), 1, rtol=1e-6)
    np.testing.assert_allclose(nn.LogSoftmax(dim=-1)(x).exp().numpy().sum(-1), 1, rtol=1e-6)
    with pytest.raises(ValueError, match="needs a dim"):
        nn.Softmax()(x)
    values, indices = nn.MaxPool2d(2, return_indices=True)(x)
    np.testing.assert_array_equal(values.numpy(), F.max_pool2d(x, 2).numpy())
    assert indices.dtype == lucid.int64 and indices.shape == values.shape


def test_loss_modules_match_functional():
    x, y = T(rng.standard_normal((4, 3))), lucid.tensor([0, 2, 1, 2])
    assert nn.CrossEntropyLoss(label_smoothing=0.1)(x, y).item() == F.cross_entropy(x, y, label_smoothing=0.1).item()
    assert nn.NLLLoss(reduction="sum")(x, y).item() == F.nll_loss(x, y, reduction="sum").item()
    assert nn.MSELoss()(x, x * 2).item() == F.mse_loss(x, x * 2).item()
    assert nn.L1Loss()(x, x * 2).item() == F.l1_loss(x, x * 2).item()
    t = (x > 0).float()
    assert nn.BCEWithLogitsLoss()(x, t).item() == F.binary_cross_entropy_with_logits(x, t).item()
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")


def test_multihead_attention_masks_follow_pytorch_semantics():
    mha = nn.MultiheadAttention(4, 1, batch_first=True, bias=False)
    x = rng.standard_normal((1, 3, 4)).astype(np.float32)
    blocked = np.triu(np.ones((3, 3), bool), 1)  # True = may not attend (PyTorch's MHA rule)
    _, w_bool = mha(T(x), T(x), T(x), attn_mask=lucid.tensor(blocked))
    _, w_float = mha(T(x), T(x), T(x), attn_mask=T(np.where(blocked, -np.inf, 0.0)))
    _, w_causal = mha(T(x), T(x), T(x), is_causal=True)
    wi = mha.in_proj_weight.numpy()
    q, k, v = (x @ wi[i * 4 : (i + 1) * 4].T for i in range(3))
    want = attention(q, k, v, allowed=~blocked)[1]
    for w in (w_bool, w_float, w_causal):
        np.testing.assert_allclose(w.numpy(), want, rtol=1e-5, atol=1e-6)
    out, _ = mha(T(x[0]), T(x[0]), T(x[0]))  # unbatched
    assert out.shape == (3, 4)
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="features"):
        mha(T(rng.standard_normal((1, 3, 5))), T(x), T(x))
    with pytest.raises(ValueError, match="key_padding_mask"):
        mha(T(x), T(x), T(x), key_padding_mask=lucid.tensor(np.zeros((2, 3), bool)))


def test_multihead_attention_under_autocast_and_backward():
    mha = nn.MultiheadAttention(8, 2).to("metal")
    x = T(rng.standard_normal((5, 2, 8)), device="metal")
    with lucid.amp.autocast("metal"):
        out, w = mha(x, x, x)
    assert out.dtype == lucid.float16 and out.shape == (5, 2, 8) and w.shape == (2, 5, 5)
    out.float().sum().backward()
    assert mha.in_proj_weight.grad.dtype == lucid.float32
    assert mha.out_proj.weight.grad is not None


def test_embedding_module_and_errors():
    e = nn.Embedding(5, 3)
    ids = lucid.tensor([[0, 4], [2, 2]])
    np.testing.assert_array_equal(e(ids).numpy(), e.weight.numpy()[[[0, 4], [2, 2]]])
    with pytest.raises(ValueError, match="padding_idx"):
        nn.Embedding(5, 3, padding_idx=5)
    with pytest.raises(TypeError, match="integer"):
        e(T([0.0]))


def test_dropout_module_train_and_eval():
    d = nn.Dropout(0.5)
    x = lucid.ones(1000)
    lucid.manual_seed(1)
    kept = (d(x).numpy() != 0).mean()
    assert 0.4 < kept < 0.6
    assert d.eval()(x) is x
    with pytest.raises(ValueError):
        nn.Dropout(2.0)
