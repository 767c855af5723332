"""The fused and view-reading backward passes: activations whose gradient arrives as one value
spread over the input (a full sum's or mean's), the losses recorded as one node (nll_loss,
cross_entropy, binary_cross_entropy_with_logits, l1_loss), and the embedding's scatter-add,
against numpy references in float64, finite differences, and ml_dtypes for bfloat16."""

import math

import ml_dtypes
import numpy as np
import pytest

import lucid
import lucid.nn.functional as F

RNG = np.random.default_rng(7)
BF16 = ml_dtypes.bfloat16


def _phi(x):
    return np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _cdf(x):
    from math import erf

    return 0.5 * (1 + np.vectorize(erf)(x / math.sqrt(2)))


def _sig(x):
    return 1 / (1 + np.exp(-x))


# (lucid function, d f / dx on float64 x)
ACTIVATIONS = {
    "relu": (F.relu, lambda x: (x > 0).astype(np.float64)),
    "leaky_relu": (lambda t: F.leaky_relu(t, 0.2), lambda x: np.where(x > 0, 1.0, 0.2)),
    "sigmoid": (lucid.sigmoid, lambda x: _sig(x) * (1 - _sig(x))),
    "tanh": (lucid.tanh, lambda x: 1 - np.tanh(x) ** 2),
    "silu": (F.silu, lambda x: _sig(x) * (1 + x * (1 - _sig(x)))),
    "gelu": (F.gelu, lambda x: _cdf(x) + x * _phi(x)),
    "abs": (lucid.abs, np.sign),
    "exp": (lucid.exp, np.exp),
}

# Above the parallel loops' threshold, and not a multiple of the kernels' blocks.
SHAPES = [(3, 70001), (5, 37)]


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_activation_gradient_of_a_full_reduction_float32(name, shape, reduce):
    fn, deriv = ACTIVATIONS[name]
    x = RNG.standard_normal(shape).astype(np.float32) * 2
    x.flat[:4] = [0.0, -0.0, 1e-3, -30.0]
    t = lucid.tensor(x, requires_grad=True)
    y = fn(t)
    (y.sum() if reduce == "sum" else y.mean()).backward()
    want = deriv(x.astype(np.float64)) / (1 if reduce == "sum" else x.size)
    # (tanh and sigmoid read their output: 1 - y² and y(1 - y) lose ~1e-7 absolutely)
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=2e-5, atol=3e-7 / (1 if reduce == "sum" else x.size))
    # The same gradient as one given in full (the kernels' contiguous path).
    t2 = lucid.tensor(x, requires_grad=True)
    g = np.full(shape, 1 if reduce == "sum" else np.float32(1) / np.float32(x.size), np.float32)
    fn(t2).backward(lucid.tensor(g))
    # (a full float32 gelu gradient runs on oneDNN, within 2e-6 of the host loop's)
    atol = 2e-6 * g.flat[0] if name == "gelu" else 1e-12
    np.testing.assert_allclose(t.grad.numpy(), t2.grad.numpy(), rtol=1e-6, atol=atol)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_gradient_of_a_full_sum_non_contiguous_and_broadcast(name):
    fn, deriv = ACTIVATIONS[name]
    base = RNG.standard_normal((300, 500)).astype(np.float32)
    t = lucid.tensor(base, requires_grad=True)
    fn(t.t()[:, ::3]).sum().backward()  # a transposed, strided view
    want = np.zeros_like(base, dtype=np.float64)
    want.T[:, ::3] = deriv(base.T[:, ::3].astype(np.float64))
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=2e-5, atol=3e-7)
    row = RNG.standard_normal((1, 700)).astype(np.float32)
    r = lucid.tensor(row, requires_grad=True)
    fn(r.expand(400, 700)).sum().backward()  # a broadcast input: its gradient sums 400 rows
    np.testing.assert_allclose(r.grad.numpy(), 400 * deriv(row.astype(np.float64)), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh", "silu", "abs"])
def test_activation_gradient_of_a_full_sum_bfloat16(name):
    fn, deriv = ACTIVATIONS[name]
    x = (RNG.standard_normal((3, 70001)) * 2).astype(BF16)
    t = lucid.tensor(x.astype(np.float32)).to(lucid.bfloat16).requires_grad_()
    y = fn(t)
    assert y.dtype == lucid.bfloat16
    y.sum().backward()  # outside autocast the sum stays bfloat16: its gradient is a bfloat16 1
    got = t.grad.float().numpy()
    want = deriv(x.astype(np.float64)).astype(BF16).astype(np.float64)
    # (tanh's 1 - y² reads y rounded to bfloat16: off by up to 2·2^-8 where y is near ±1)
    np.testing.assert_allclose(got, want, rtol=2**-7, atol=2**-6 if name == "tanh" else 2**-9)
    # and as one given in full
    t2 = lucid.tensor(x.astype(np.float32)).to(lucid.bfloat16).requires_grad_()
    fn(t2).backward(lucid.ones(x.shape, dtype=lucid.bfloat16))
    np.testing.assert_array_equal(got, t2.grad.float().numpy())


@pytest.mark.parametrize("name", ["relu", "leaky_relu", "silu", "sigmoid", "gelu"])
def test_activation_gradient_under_bfloat16_autocast(name):
    fn, deriv = ACTIVATIONS[name]
    x = RNG.standard_normal((64, 512)).astype(np.float32)
    w = (RNG.standard_normal((512, 512)) / 20).astype(np.float32)
    t, tw = lucid.tensor(x, requires_grad=True), lucid.tensor(w)
    with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
        h = t @ tw  # bfloat16
        y = fn(h)
    y.float().sum().backward()
    hb = (x.astype(BF16).astype(np.float64) @ w.astype(BF16).astype(np.float64)).astype(BF16).astype(np.float64)
    dh = deriv(hb).astype(BF16).astype(np.float64)
    want = dh @ w.astype(BF16).astype(np.float64).T
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_l1_loss_gradients(reduction):
    a = RNG.standard_normal((40, 30)).astype(np.float32)
    b = RNG.standard_normal((30, 40)).astype(np.float32)
    x = lucid.tensor(a, requires_grad=True)
    y = lucid.tensor(b, requires_grad=True)
    loss = F.l1_loss(x, y.t(), reduction=reduction)  # the target a transposed view
    g = RNG.standard_normal(a.shape).astype(np.float32)
    (loss * lucid.tensor(g)).sum().backward() if reduction == "none" else loss.backward()
    scale = g.astype(np.float64) if reduction == "none" else (1 / a.size if reduction == "mean" else 1.0)
    s = np.sign(a.astype(np.float64) - b.T)
    np.testing.assert_allclose(x.grad.numpy(), s * scale, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(y.grad.numpy(), (-s * scale).T, rtol=1e-6, atol=1e-9)


def _nll_reference(logp, target, weight, ignore, reduction):
    """Loss and d loss / d logp, for logp [N, C, M] and target [N, M]."""
    n, c, m = logp.shape
    w = np.ones(c) if weight is None else weight.astype(np.float64)
    keep = target != ignore
    safe = np.where(keep, target, 0)
    wsel = w[safe] * keep
    picked = np.take_along_axis(logp, safe[:, None, :], 1)[:, 0, :]
    loss = -picked * wsel
    coef = -wsel
    if reduction == "mean":
        out, coef = loss.sum() / wsel.sum(), coef / wsel.sum()
    elif reduction == "sum":
        out = loss.sum()
    else:
        out = loss
    grad = np.zeros_like(logp, dtype=np.float64)
    idx_n, idx_m = np.meshgrid(np.arange(n), np.arange(m), indexing="ij")
    np.add.at(grad, (idx_n, safe, idx_m), coef if reduction != "none" else coef)
    return out, grad


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("spatial", [False, True])
def test_nll_loss_forward_and_backward(reduction, weighted, spatial):
    n, c, m = 12, 7, (5 if spatial else 1)
    logp = RNG.standard_normal((n, c, m)).astype(np.float32)
    target = RNG.integers(0, c, (n, m))
    target[0, 0] = target[3, -1] = -100  # ignored
    weight = RNG.random(c).astype(np.float32) + 0.5 if weighted else None
    # a non-contiguous input: [N, M, C] permuted
    base = lucid.tensor(np.ascontiguousarray(logp.transpose(0, 2, 1)), requires_grad=True)
    x = base.permute(0, 2, 1)
    if not spatial:
        x = x[:, :, 0]
    tt = lucid.tensor(target if spatial else target[:, 0])
    out = F.nll_loss(x, tt, weight=None if weight is None else lucid.tensor(weight), reduction=reduction)
    want, grad = _nll_reference(logp.astype(np.float64), target, weight, -100, reduction)
    if reduction == "none":
        g = RNG.standard_normal(target.shape).astype(np.float32)
        gl = g if spatial else g[:, 0]
        np.testing.assert_allclose(out.numpy(), want if spatial else want[:, 0], rtol=1e-6, atol=1e-7)
        (out * lucid.tensor(gl)).sum().backward()
        grad = grad * g[:, None, :]
    else:
        np.testing.assert_allclose(out.item(), want, rtol=1e-5)
        out.backward()
    np.testing.assert_allclose(base.grad.numpy(), grad.transpose(0, 2, 1), rtol=1e-5, atol=1e-7)


def test_nll_loss_with_a_weight_that_requires_grad_keeps_its_gradient():
    logp = RNG.standard_normal((9, 4)).astype(np.float32)
    target = RNG.integers(0, 4, 9)
    w = lucid.tensor(RNG.random(4).astype(np.float32) + 0.5, requires_grad=True)
    x = lucid.tensor(logp, requires_grad=True)
    F.nll_loss(x, lucid.tensor(target), weight=w, reduction="sum").backward()
    want = np.zeros(4)
    np.add.at(want, target, -logp[np.arange(9), target].astype(np.float64))
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_with_weights_and_ignore_index(reduction):
    logits = RNG.standard_normal((16, 10)).astype(np.float32)
    target = RNG.integers(0, 10, 16)
    target[2] = 3
    weight = RNG.random(10).astype(np.float32) + 0.5
    x = lucid.tensor(logits, requires_grad=True)
    F.cross_entropy(
        x, lucid.tensor(target), weight=lucid.tensor(weight), ignore_index=3, reduction=reduction
    ).backward()
    z = logits.astype(np.float64)
    logp = z - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True)) - z.max(1, keepdims=True)
    _, dlogp = _nll_reference(logp[:, :, None], target[:, None], weight, 3, reduction)
    dlogp = dlogp[:, :, 0]
    want = dlogp - np.exp(logp) * dlogp.sum(1, keepdims=True)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("fn", [F.nll_loss, F.cross_entropy])
def test_every_target_ignored_gives_a_nan_mean_and_a_zero_gradient(fn):
    # PyTorch's behaviour: the mean over a total weight of 0 is NaN, and an ignored target
    # takes no gradient.
    x = lucid.tensor(RNG.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    out = fn(x, lucid.tensor(np.array([-100, -100, -100])))
    assert np.isnan(out.item())
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((3, 4), np.float32))


def _bce_logits_reference(x, y, w, pw):
    sp = np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0)
    coef = 1 + (pw - 1) * y if pw is not None else 1
    loss = (1 - y) * x + coef * sp
    return loss * (w if w is not None else 1)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("pos", [False, True])
def test_bce_with_logits_gradients_against_finite_differences(reduction, weighted, pos):
    shape = (6, 5)
    x = RNG.standard_normal(shape) * 3
    y = RNG.random(shape)
    w = RNG.random((1, 5)) + 0.5 if weighted else None  # broadcast over the batch
    pw = RNG.random(5) + 0.5 if pos else None
    tx = lucid.tensor(x, dtype=lucid.float64, requires_grad=True)
    ty = lucid.tensor(y, dtype=lucid.float64, requires_grad=True)
    kw = {"reduction": reduction}
    if w is not None:
        kw["weight"] = lucid.tensor(w, dtype=lucid.float64)
    if pw is not None:
        kw["pos_weight"] = lucid.tensor(pw, dtype=lucid.float64)
    out = F.binary_cross_entropy_with_logits(tx, ty, **kw)
    ref = _bce_logits_reference(x, y, w, pw)
    g = RNG.standard_normal(shape)

    def total(xv, yv):
        r = _bce_logits_reference(xv, yv, w, pw)
        return (r * g).sum() if reduction == "none" else (r.mean() if reduction == "mean" else r.sum())

    if reduction == "none":
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12)
        (out * lucid.tensor(g, dtype=lucid.float64)).sum().backward()
    else:
        np.testing.assert_allclose(out.item(), ref.mean() if reduction == "mean" else ref.sum(), rtol=1e-12)
        out.backward()
    eps = 1e-6
    for arr, t, which in ((x, tx, 0), (y, ty, 1)):
        fd = np.zeros(shape)
        for i in np.ndindex(shape):
            up, down = arr.copy(), arr.copy()
            up[i] += eps
            down[i] -= eps
            args_up = (up, y) if which == 0 else (x, up)
            args_down = (down, y) if which == 0 else (x, down)
            fd[i] = (total(*args_up) - total(*args_down)) / (2 * eps)
        np.testing.assert_allclose(t.grad.numpy(), fd, rtol=1e-6, atol=1e-8)


def test_bce_with_logits_float32_and_bfloat16_autocast():
    x = (RNG.standard_normal((128, 10)) * 4).astype(np.float32)
    y = (RNG.random((128, 10)) > 0.5).astype(np.float32)
    want = (_sig(x.astype(np.float64)) - y) / x.size
    for amp in (False, True):
        tx = lucid.tensor(x, requires_grad=True)
        with lucid.amp.autocast("cpu", dtype=lucid.bfloat16, enabled=amp):
            loss = F.binary_cross_entropy_with_logits(tx, lucid.tensor(y))
        assert loss.dtype == lucid.float32
        loss.backward()
        np.testing.assert_allclose(tx.grad.numpy(), want, rtol=1e-5, atol=1e-9)


def test_bce_with_logits_weight_that_requires_grad_keeps_its_gradient():
    x = RNG.standard_normal((4, 3))
    y = RNG.random((4, 3))
    w = lucid.tensor(RNG.random(3) + 0.5, dtype=lucid.float64, requires_grad=True)
    F.binary_cross_entropy_with_logits(
        lucid.tensor(x, dtype=lucid.float64), lucid.tensor(y, dtype=lucid.float64), weight=w, reduction="sum"
    ).backward()
    np.testing.assert_allclose(w.grad.numpy(), _bce_logits_reference(x, y, None, None).sum(0), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("padding_idx", [None, 3])
@pytest.mark.parametrize("full_sum", [False, True])
def test_embedding_gradient_is_a_scatter_add(dtype, padding_idx, full_sum):
    num, dim = 50, 24
    w = RNG.standard_normal((num, dim))
    ids = RNG.integers(0, num, (6, 40))
    ids[0, :5] = 3  # repeats, and the padding row
    tw = lucid.tensor(w, dtype=getattr(lucid, dtype), requires_grad=True)
    out = F.embedding(lucid.tensor(ids), tw, padding_idx=padding_idx)
    np.testing.assert_array_equal(out.numpy(), w[ids].astype(np.dtype(dtype)))
    g = np.ones(ids.shape + (dim,)) if full_sum else RNG.standard_normal(ids.shape + (dim,))
    if full_sum:
        out.sum().backward()
    else:
        (out * lucid.tensor(g, dtype=getattr(lucid, dtype))).sum().backward()
    want = np.zeros((num, dim))
    np.add.at(want, ids.reshape(-1), g.astype(np.dtype(dtype)).reshape(-1, dim))
    if padding_idx is not None:
        want[padding_idx] = 0
    np.testing.assert_allclose(
        tw.grad.numpy(), want, rtol=1e-6 if dtype == "float32" else 1e-12, atol=1e-5 if dtype == "float32" else 1e-12
    )


def test_gather_backward_scatter_adds_in_float32_and_bfloat16():
    a = RNG.standard_normal((8, 9)).astype(np.float32)
    idx = RNG.integers(0, 9, (8, 20))
    for dt in (lucid.float32, lucid.bfloat16):
        t = lucid.tensor(a).to(dt).requires_grad_()
        lucid.gather(t, 1, lucid.tensor(idx)).sum().backward()
        want = np.zeros((8, 9))
        for r in range(8):
            np.add.at(want[r], idx[r], 1.0)
        np.testing.assert_array_equal(t.grad.float().numpy(), want)


# A leaf's first gradient is the backward's own result when nothing else holds it (as
# PyTorch's AccumulateGrad); whatever the program can still reach stays a separate tensor.


def test_leaf_gradient_does_not_alias_a_gradient_the_program_holds():
    a, b = (
        lucid.tensor(np.ones(5, np.float32), requires_grad=True),
        lucid.tensor(np.ones(5, np.float32), requires_grad=True),
    )
    seed = lucid.tensor(np.arange(5, dtype=np.float32))
    (a + b).backward(seed)  # both gradients are the seed itself
    a.grad.mul_(10)
    np.testing.assert_array_equal(seed.numpy(), np.arange(5))
    np.testing.assert_array_equal(b.grad.numpy(), np.arange(5))
    np.testing.assert_array_equal(a.grad.numpy(), 10 * np.arange(5))


def test_leaf_gradients_of_one_shared_result_are_separate_tensors():
    a = lucid.tensor(RNG.standard_normal((4, 6)).astype(np.float32), requires_grad=True)
    b = lucid.tensor(RNG.standard_normal((4, 6)).astype(np.float32), requires_grad=True)
    (a * 2 + b).backward(lucid.ones(4, 6))  # b's gradient is the incoming one, a's a new one
    b.grad.add_(1)
    a.grad.add_(5)
    np.testing.assert_array_equal(b.grad.numpy(), np.full((4, 6), 2.0))
    np.testing.assert_array_equal(a.grad.numpy(), np.full((4, 6), 7.0))
    (a + b).sum().backward()  # a gradient of one value spread (a view): copied into each
    np.testing.assert_array_equal(a.grad.numpy(), np.full((4, 6), 8.0))
    np.testing.assert_array_equal(b.grad.numpy(), np.full((4, 6), 3.0))


def test_leaf_gradient_does_not_alias_what_a_hook_keeps():
    x = lucid.tensor(RNG.standard_normal(8).astype(np.float32), requires_grad=True)
    kept = []

    def hook(g):
        h = g * 3
        kept.append(h)
        return h

    x.register_hook(hook)
    (x * x).sum().backward()
    x.grad.zero_()
    np.testing.assert_allclose(kept[0].numpy(), 6 * x.detach().numpy(), rtol=1e-6)


def test_leaf_gradient_taken_without_a_copy_accumulates_and_is_replaced():
    x = lucid.tensor(RNG.standard_normal((3, 5)).astype(np.float32), requires_grad=True)
    lucid.relu(x).sum().backward()
    first = x.grad
    lucid.relu(x).sum().backward()  # accumulates in place into the same tensor
    assert first is x.grad or np.array_equal(first.numpy(), x.grad.numpy())
    np.testing.assert_array_equal(x.grad.numpy(), 2 * (x.detach().numpy() > 0))
    out = lucid.relu(x)
    x.grad = None
    out.backward(lucid.ones(3, 5))
    np.testing.assert_array_equal(x.grad.numpy(), (x.detach().numpy() > 0).astype(np.float32))
