"""More of lucid.nn.functional: the activations (hardtanh, relu6, hardsigmoid, hardswish, mish,
softsign, tanhshrink, threshold, softshrink, hardshrink, celu, selu, logsigmoid, glu, softmin,
rrelu, softplus with beta and threshold), softmax's dtype, the distances, the losses, the
normalisations and the alpha dropouts. Values against numpy references, gradients against
central finite differences (in float64), errors by type and message."""

import math

import ml_dtypes
import numpy as np
import pytest

import lucid
import lucid.nn.functional as F
from _helpers import numeric_grads

rng = np.random.default_rng(23)


def arr(*shape, offset=0.0):
    return rng.standard_normal(shape) + offset


def close(got, want, tol=1e-5):
    assert isinstance(got, lucid.Tensor)
    np.testing.assert_allclose(np.asarray(got.detach().numpy(), np.float64), want, rtol=tol, atol=tol)


def f32(a):
    return lucid.tensor(np.asarray(a, np.float32))


def check_grads(fn, *arrays, tol=1e-5, eps=1e-6):
    """The gradients of sum(fn(*inputs) * w), w random, against central differences (float64)."""
    arrays = [np.asarray(a, np.float64) for a in arrays]
    leaves = [lucid.tensor(a, dtype=lucid.float64).requires_grad_() for a in arrays]
    out = fn(*leaves)
    weights = rng.standard_normal(tuple(out.shape))
    (out * lucid.tensor(weights, dtype=lucid.float64)).sum().backward()
    for t, want in zip(leaves, numeric_grads(fn, [a.copy() for a in arrays], weights, eps, dtype=lucid.float64)):
        assert t.grad is not None and tuple(t.grad.shape) == tuple(t.shape)
        np.testing.assert_allclose(t.grad.numpy(), want, rtol=tol, atol=tol)


def away(*shape, points=(0.0,), gap=0.05):
    """Standard normal values (times 3) kept at least `gap` from each of `points` (the kinks)."""
    a = rng.standard_normal(shape) * 3
    for p in points:
        near = np.abs(a - p) < gap
        a = np.where(near, p + np.where(a >= p, gap, -gap) * 2, a)
    return a


# ---- activations ---------------------------------------------------------------------------------


def np_softplus(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.log1p(np.exp(np.minimum(beta * x, 50))) / beta)


SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

ACTIVATIONS = [
    ("hardtanh", lambda x: F.hardtanh(x), lambda x: np.clip(x, -1, 1), (-1, 1)),
    ("hardtanh_args", lambda x: F.hardtanh(x, -0.5, 2.0), lambda x: np.clip(x, -0.5, 2), (-0.5, 2)),
    ("relu6", F.relu6, lambda x: np.clip(x, 0, 6), (0, 6)),
    ("hardsigmoid", F.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6, (-3, 3)),
    ("hardswish", F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6, (-3, 3)),
    ("mish", F.mish, lambda x: x * np.tanh(np.log1p(np.exp(x))), ()),
    ("softsign", F.softsign, lambda x: x / (1 + np.abs(x)), ()),
    ("tanhshrink", F.tanhshrink, lambda x: x - np.tanh(x), ()),
    ("threshold", lambda x: F.threshold(x, 0.3, -2.0), lambda x: np.where(x > 0.3, x, -2.0), (0.3,)),
    ("softshrink", F.softshrink, lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0)), (-0.5, 0.5)),
    (
        "softshrink_1",
        lambda x: F.softshrink(x, 1.0),
        lambda x: np.where(x > 1, x - 1, np.where(x < -1, x + 1, 0)),
        (-1, 1),
    ),
    ("hardshrink", F.hardshrink, lambda x: np.where(np.abs(x) > 0.5, x, 0), (-0.5, 0.5)),
    ("celu", lambda x: F.celu(x, 2.0), lambda x: np.where(x > 0, x, 2.0 * np.expm1(x / 2.0)), (0,)),
    ("selu", F.selu, lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(np.minimum(x, 0))), (0,)),
    ("logsigmoid", F.logsigmoid, lambda x: -np.log1p(np.exp(-x)), ()),
    ("softplus_beta", lambda x: F.softplus(x, beta=3, threshold=0.2), lambda x: np_softplus(x, 3, 0.2), (0.2 / 3,)),
    ("softplus_default", F.softplus, np_softplus, ()),
    ("rrelu_eval", F.rrelu, lambda x: np.where(x >= 0, x, x * (1 / 8 + 1 / 3) / 2), (0,)),
]


@pytest.mark.parametrize("name,fn,ref,kinks", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_values_and_gradients(name, fn, ref, kinks):
    x = away(4, 6, points=kinks)
    y = fn(f32(x))
    assert y.dtype is lucid.float32 and tuple(y.shape) == (4, 6)
    close(y, ref(x.astype(np.float32).astype(np.float64)), tol=2e-5)
    check_grads(fn, x)


@pytest.mark.parametrize("name,fn,ref,kinks", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_bfloat16_and_empty(name, fn, ref, kinks):
    x = away(3, 5, points=kinks, gap=0.1).astype(ml_dtypes.bfloat16)
    y = fn(lucid.tensor(x.astype(np.float32)).to(lucid.bfloat16))
    assert y.dtype is lucid.bfloat16
    np.testing.assert_allclose(y.float().numpy(), ref(x.astype(np.float64)), rtol=1e-2, atol=2e-2)
    assert tuple(fn(lucid.zeros(1, 0, 3)).shape) == (1, 0, 3)


def test_hardtanh_and_relu6_inplace_update_the_input():
    x = f32([-3.0, 0.5, 7.0])
    assert F.hardtanh(x, inplace=True) is x
    close(x, [-1.0, 0.5, 1.0])
    y = f32([-3.0, 0.5, 7.0])
    F.relu6(y, inplace=True)
    close(y, [0.0, 0.5, 6.0])
    z = f32([-3.0, 0.5])
    F.threshold_(z, 0.0, 9.0)
    close(z, [9.0, 0.5])


def test_integer_inputs_as_pytorch():
    x = lucid.tensor([1, 7, -3])
    for got, want in ((F.hardtanh(x), [1, 1, -1]), (F.relu6(x), [1, 6, 0]), (F.threshold(x, 2.5, 0.5), [0, 7, 0])):
        assert got.dtype is lucid.int64
        np.testing.assert_array_equal(got.numpy(), want)
    close(F.softsign(x), np.array([1, 7, -3]) / (1 + np.abs([1, 7, -3])))
    for fn in (F.hardshrink, F.glu, F.selu):
        with pytest.raises(TypeError, match="floating-point"):
            fn(lucid.tensor([1, 2]))


def test_hardswish_gradient_is_pytorchs_at_the_pieces():
    x = lucid.tensor([-4.0, -1.0, 2.0, 4.0], dtype=lucid.float64).requires_grad_()
    F.hardswish(x).sum().backward()
    close(x.grad, [0.0, -1 / 3 + 0.5, 2 / 3 + 0.5, 1.0])


def test_activation_errors():
    with pytest.raises(ValueError, match="min_val"):
        F.hardtanh(f32([1.0]), 2.0, 1.0)
    with pytest.raises(TypeError, match="input must be a lucid.Tensor"):
        F.relu6(np.ones(3))
    with pytest.raises(TypeError, match="threshold must be a number"):
        F.threshold(f32([1.0]), "a", 0.0)
    with pytest.raises(RuntimeError, match="lambd"):
        F.softshrink(f32([1.0]), -1.0)
    with pytest.raises(TypeError, match="floating-point"):
        F.mish(lucid.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="alpha"):
        F.celu(f32([1.0]), 0.0)
    with pytest.raises(ValueError, match="lower bound"):
        F.rrelu(f32([1.0]), 0.5, 0.1)
    with pytest.raises(TypeError, match="beta must be a number"):
        F.softplus(f32([1.0]), beta="x")


@pytest.mark.parametrize("shape,dim", [((6,), 0), ((3, 8), 1), ((2, 4, 6), 2), ((2, 4, 6), 0), ((4, 2, 3), 1)])
def test_glu_matches_numpy(shape, dim):
    x = arr(*shape)
    a, b = np.split(x, 2, axis=dim)
    close(F.glu(f32(x), dim), a / (1 + np.exp(-b)))
    check_grads(lambda t: F.glu(t, dim), x)


def test_glu_errors():
    with pytest.raises(RuntimeError, match="even"):
        F.glu(f32(arr(3, 5)))
    with pytest.raises(RuntimeError, match="scalars"):
        F.glu(f32(1.0))
    with pytest.raises(IndexError, match="out of range"):
        F.glu(f32(arr(2, 4)), 2)


def np_softmax(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmin_matches_numpy(dim):
    x = arr(4, 5)
    close(F.softmin(f32(x), dim), np_softmax(-x, dim))
    check_grads(lambda t: F.softmin(t, dim), x)


def test_softmax_dtype_casts_first():
    x = arr(3, 4)
    for fn in (
        lambda t: lucid.softmax(t, 1, dtype=lucid.float64),
        lambda t: t.softmax(1, lucid.float64),
        lambda t: F.softmax(t, 1, dtype=lucid.float64),
    ):
        y = fn(f32(x))
        assert y.dtype is lucid.float64
        close(y, np_softmax(x.astype(np.float32).astype(np.float64), 1), tol=1e-12)
    for fn in (
        lambda t: lucid.log_softmax(t, 0, dtype=lucid.float64),
        lambda t: t.log_softmax(0, dtype=lucid.float64),
        lambda t: F.log_softmax(t, 0, dtype=lucid.float64),
    ):
        y = fn(f32(x))
        assert y.dtype is lucid.float64
        close(y, np.log(np_softmax(x.astype(np.float32).astype(np.float64), 0)), tol=1e-12)
    y = F.softmin(f32(x), 1, dtype=lucid.float64)
    assert y.dtype is lucid.float64
    close(y, np_softmax(-x.astype(np.float32).astype(np.float64), 1), tol=1e-12)
    # the gradient reaches the float32 input through the cast
    t = f32(x).requires_grad_()
    lucid.softmax(t, 1, dtype=lucid.float64)[:, 0].sum().backward()
    assert t.grad.dtype is lucid.float32
    s = np_softmax(x, 1)
    close(t.grad, s[:, :1] * ((np.arange(4) == 0) - s), tol=1e-5)


def test_softmax_dtype_errors_and_implicit_dim():
    with pytest.raises(TypeError, match="floating-point"):
        lucid.softmax(f32([1.0, 2.0]), 0, dtype=lucid.int64)
    x = arr(3, 4)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        y = F.softmax(f32(x))
    close(y, np_softmax(x, 1))


def test_rrelu_training_draws_slopes_between_the_bounds():
    x = -np.abs(arr(2000)) - 0.1
    t = f32(x).requires_grad_()
    y = F.rrelu(t, 0.1, 0.3, training=True)
    slope = y.detach().numpy() / x.astype(np.float32)
    assert slope.min() >= 0.1 - 1e-6 and slope.max() <= 0.3 + 1e-6 and slope.std() > 0.03
    y.sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), slope, rtol=1e-5)
    pos = f32(np.abs(arr(10)))
    close(F.rrelu(pos, training=True), pos.numpy())


# ---- distances -----------------------------------------------------------------------------------


def np_norm(a, p, axis, keepdims=False):
    a = np.abs(a)
    if p == np.inf:
        return a.max(axis=axis, keepdims=keepdims)
    if p == 0:
        return (a != 0).sum(axis=axis, keepdims=keepdims).astype(np.float64)
    return (a**p).sum(axis=axis, keepdims=keepdims) ** (1 / p)


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 2), (3.0, 0), (0.5, -1)])
def test_normalize_matches_numpy(p, dim):
    x = arr(2, 3, 4)
    close(F.normalize(f32(x), p, dim), x / np.maximum(np_norm(x, p, dim, True), 1e-12))
    check_grads(lambda t: F.normalize(t, p, dim), x)


def test_normalize_eps_floor_and_out():
    x = np.zeros((2, 3))
    x[0] = [3e-5, 0, 4e-5]
    close(F.normalize(f32(x), eps=1e-3), x / 1e-3)
    out = lucid.empty(2, 3)
    assert F.normalize(f32(x), dim=0, out=out) is out
    close(out, x / np.maximum(np_norm(x, 2, 0, True), 1e-12))


@pytest.mark.parametrize(
    "s1,s2,dim",
    [((5, 4), (5, 4), 1), ((4, 6), (4, 6), -1), ((1, 2, 3), (2, 1, 3), -1), ((6,), (6,), 0), ((2, 3), (2, 1, 3), -1)],
)
def test_cosine_similarity_matches_numpy(s1, s2, dim):
    a, b = arr(*s1), arr(*s2)
    a2, b2 = np.broadcast_arrays(a, b)
    na = np.maximum(np.sqrt((a2 * a2).sum(dim, keepdims=True)), 1e-8)
    nb = np.maximum(np.sqrt((b2 * b2).sum(dim, keepdims=True)), 1e-8)
    close(F.cosine_similarity(f32(a), f32(b), dim), ((a2 / na) * (b2 / nb)).sum(dim))
    check_grads(lambda x, y: F.cosine_similarity(x, y, dim), a, b)


def test_cosine_similarity_eps_floors_small_norms():
    a, b = np.array([[1e-3, 0.0]]), np.array([[1.0, 1.0]])
    close(F.cosine_similarity(f32(a), f32(b), eps=0.5), (a / 0.5 * b / np.sqrt(2)).sum(1))


@pytest.mark.parametrize("p", [2.0, 1.0, 5.0, np.inf])
def test_pairwise_distance_matches_numpy(p):
    a, b = arr(4, 5), arr(4, 5)
    close(F.pairwise_distance(f32(a), f32(b), p), np_norm(a - b + 1e-6, p, -1), tol=1e-4)
    close(F.pairwise_distance(f32(a), f32(b), p, keepdim=True), np_norm(a - b + 1e-6, p, -1, True), tol=1e-4)
    check_grads(lambda x, y: F.pairwise_distance(x, y, p), a, b)
    assert tuple(F.pairwise_distance(f32(a[0]), f32(b[0])).shape) == ()


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, np.inf])
def test_pdist_matches_numpy(p):
    x = arr(5, 3)
    i, j = np.triu_indices(5, 1)
    close(F.pdist(f32(x), p), np_norm(x[i] - x[j], p, 1), tol=1e-4)
    check_grads(lambda t: F.pdist(t, p), x)
    assert tuple(F.pdist(f32(arr(1, 4))).shape) == (0,)


def test_distance_errors():
    with pytest.raises(RuntimeError, match="2D"):
        F.pdist(f32(arr(2, 3, 4)))
    with pytest.raises(RuntimeError, match="non-negative p"):
        F.pdist(f32(arr(3, 2)), -1.0)
    with pytest.raises(TypeError, match="x2 must be a lucid.Tensor"):
        F.cosine_similarity(f32(arr(3)), [1.0, 2.0, 3.0], 0)
    with pytest.raises(TypeError, match="p must be a number"):
        F.normalize(f32(arr(2, 3)), "fro")
    with pytest.raises(ValueError, match=r"cannot be broadcast"):
        F.cosine_similarity(f32(arr(3, 4)), f32(arr(2, 5)))
    with pytest.raises(IndexError, match="out of range"):
        F.cosine_similarity(f32(arr(3, 4)), f32(arr(3, 4)), 5)


def test_one_hot_matches_numpy():
    idx = rng.integers(0, 7, (4, 5))
    got = F.one_hot(lucid.tensor(idx))
    assert got.dtype is lucid.int64 and tuple(got.shape) == (4, 5, idx.max() + 1)
    np.testing.assert_array_equal(got.numpy(), np.eye(idx.max() + 1, dtype=np.int64)[idx])
    np.testing.assert_array_equal(F.one_hot(lucid.tensor(3), 5).numpy(), [0, 0, 0, 1, 0])
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        F.one_hot(lucid.tensor([1, 5]), 3)
    with pytest.raises(RuntimeError, match="non-negative"):
        F.one_hot(lucid.tensor([1, -1]))
    with pytest.raises(TypeError, match="index tensors"):
        F.one_hot(f32([1.0]))
    with pytest.raises(RuntimeError, match="empty"):
        F.one_hot(lucid.tensor(np.zeros(0, np.int64)))


# ---- losses --------------------------------------------------------------------------------------


def reduce_np(loss, reduction):
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


REDUCTIONS = ["none", "mean", "sum"]


@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_matches_numpy(reduction, log_target):
    x = np.log(rng.random((3, 4)) + 0.1)
    t = np.log(rng.random((3, 4)) + 0.1) if log_target else rng.random((3, 4)) + 0.1
    loss = np.exp(t) * (t - x) if log_target else t * (np.log(t) - x)
    want = loss.sum() / 3 if reduction == "batchmean" else reduce_np(loss, reduction)
    fn = lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target)  # noqa: E731
    if reduction == "mean":
        with pytest.warns(UserWarning, match="batchmean"):
            close(fn(f32(x), f32(t)), want)
    else:
        close(fn(f32(x), f32(t)), want)
    if reduction != "mean":
        check_grads(fn, x, t)


def test_kl_div_zero_target_contributes_nothing():
    close(F.kl_div(f32([-1.0, -2.0]), f32([0.0, 0.5]), reduction="sum"), 0.5 * (np.log(0.5) + 2.0))
    with pytest.raises(ValueError, match="batchmean"):
        F.kl_div(f32([0.0]), f32([1.0]), reduction="avg")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_ranking_hinge_and_soft_margin_losses(reduction):
    a, b = away(6, 3), away(6, 3)
    y = np.where(rng.random((6, 3)) > 0.5, 1.0, -1.0)
    for m in (0.0, 0.7):
        z = -y * (a - b) + m
        z = np.where(np.abs(z) < 0.05, z + 0.2, z)  # keep clear of the hinge for the differences
        b2 = a + (z - m) / y
        close(
            F.margin_ranking_loss(f32(a), f32(b2), f32(y), m, reduction=reduction),
            reduce_np(np.maximum(-y * (a - b2) + m, 0), reduction),
            tol=1e-5,
        )
        check_grads(
            lambda p, q: F.margin_ranking_loss(p, q, lucid.tensor(y, dtype=p.dtype), m, reduction=reduction), a, b2
        )
    margin = 1.5
    x = away(6, 3, points=(margin,))
    want = np.where(y == 1, x, np.maximum(margin - x, 0))
    close(F.hinge_embedding_loss(f32(x), f32(y), margin, reduction=reduction), reduce_np(want, reduction))
    check_grads(lambda p: F.hinge_embedding_loss(p, lucid.tensor(y, dtype=p.dtype), margin, reduction=reduction), x)
    close(F.soft_margin_loss(f32(x), f32(y), reduction=reduction), reduce_np(np.log1p(np.exp(-y * x)), reduction))
    check_grads(lambda p, q: F.soft_margin_loss(p, q, reduction=reduction), x, y)


def test_legacy_size_average_and_reduce_flags():
    x, y = arr(4), np.ones(4)
    with pytest.warns(UserWarning, match="deprecated"):
        close(F.soft_margin_loss(f32(x), f32(y), size_average=False), np.log1p(np.exp(-x)).sum())
    with pytest.warns(UserWarning, match="deprecated"):
        close(F.soft_margin_loss(f32(x), f32(y), reduce=False), np.log1p(np.exp(-x)))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cosine_embedding_loss_matches_numpy(reduction):
    a, b = arr(5, 4), arr(5, 4)
    y = np.array([1.0, -1.0, 1.0, -1.0, -1.0])
    cos = (a * b).sum(1) / np.sqrt(((a * a).sum(1) + 1e-12) * ((b * b).sum(1) + 1e-12))
    m = 0.1
    want = np.where(y == 1, 1 - cos, np.maximum(cos - m, 0))
    close(F.cosine_embedding_loss(f32(a), f32(b), f32(y), m, reduction=reduction), reduce_np(want, reduction))
    check_grads(
        lambda p, q: F.cosine_embedding_loss(p, q, lucid.tensor(y, dtype=p.dtype), m, reduction=reduction), a, b
    )
    close(F.cosine_embedding_loss(f32(a[0]), f32(b[0]), f32(1.0)), 1 - cos[0])
    with pytest.raises(RuntimeError, match="2-D inputs with a 1-D"):
        F.cosine_embedding_loss(f32(a), f32(b), f32(y[:, None]))


@pytest.mark.parametrize("log_input", [True, False])
@pytest.mark.parametrize("full", [False, True])
def test_poisson_nll_loss_matches_numpy(log_input, full):
    x = rng.random((4, 5)) + 0.2
    t = rng.random((4, 5)) * 3
    loss = np.exp(x) - t * x if log_input else x - t * np.log(x + 1e-8)
    if full:
        st = t * np.log(np.maximum(t, 1e-30)) - t + 0.5 * np.log(2 * np.pi * np.maximum(t, 1e-30))
        loss = loss + np.where(t > 1, st, 0)
    for reduction in REDUCTIONS:
        close(
            F.poisson_nll_loss(f32(x), f32(t), log_input, full, reduction=reduction),
            reduce_np(loss, reduction),
            tol=1e-5,
        )
    check_grads(lambda p: F.poisson_nll_loss(p, lucid.tensor(t, dtype=p.dtype), log_input, full, reduction="sum"), x)


@pytest.mark.parametrize("xs,vs", [((4, 3), (4, 3)), ((4, 3), (4, 1)), ((4, 3), (4,)), ((4, 3), (1, 3))])
def test_gaussian_nll_loss_matches_numpy(xs, vs):
    x, t = arr(*xs), arr(*xs)
    v = rng.random(vs) + 0.1
    vb = v.reshape(vs + (1,)) if len(vs) < len(xs) else v
    loss = 0.5 * (np.log(vb) + (x - t) ** 2 / vb)
    for reduction in REDUCTIONS:
        close(F.gaussian_nll_loss(f32(x), f32(t), f32(v), reduction=reduction), reduce_np(loss, reduction))
    close(F.gaussian_nll_loss(f32(x), f32(t), f32(v), full=True), (loss + 0.5 * np.log(2 * np.pi)).mean())
    check_grads(lambda a, b, c: F.gaussian_nll_loss(a, b, c, reduction="sum"), x, t, v)


def test_gaussian_nll_loss_clamps_var_and_checks_it():
    x, t = arr(3), arr(3)
    v = np.array([1e-9, 0.5, 2.0])
    want = 0.5 * (np.log(np.maximum(v, 1e-3)) + (x - t) ** 2 / np.maximum(v, 1e-3))
    close(F.gaussian_nll_loss(f32(x), f32(t), f32(v), eps=1e-3, reduction="none"), want, tol=1e-4)
    close(F.gaussian_nll_loss(f32(x), f32(t), 0.5, reduction="none"), 0.5 * (np.log(0.5) + (x - t) ** 2 / 0.5))
    # the clamp passes the gradient, as PyTorch's
    vt = lucid.tensor(v, dtype=lucid.float64).requires_grad_()
    F.gaussian_nll_loss(lucid.tensor(x), lucid.tensor(t), vt, eps=1e-3, reduction="sum").backward()
    vc = np.maximum(v, 1e-3)
    close(vt.grad, 0.5 * (1 / vc - (x - t) ** 2 / vc**2), tol=1e-4)
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(f32(x), f32(t), f32([-1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="incorrect size"):
        F.gaussian_nll_loss(f32(arr(4, 3)), f32(arr(4, 3)), f32(np.ones((2, 3))))


@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_soft_margin_loss_matches_numpy(weighted):
    x, t = arr(4, 5), (rng.random((4, 5)) > 0.5).astype(np.float64)
    w = rng.random(5) + 0.5
    ls = lambda z: -np.log1p(np.exp(-z))  # noqa: E731
    loss = -(t * ls(x) + (1 - t) * ls(-x)) * (w if weighted else 1)
    per = loss.sum(1) / 5
    for reduction in REDUCTIONS:
        close(
            F.multilabel_soft_margin_loss(f32(x), f32(t), f32(w) if weighted else None, reduction=reduction),
            reduce_np(per, reduction),
        )
    check_grads(
        lambda a: F.multilabel_soft_margin_loss(
            a, lucid.tensor(t, dtype=a.dtype), lucid.tensor(w, dtype=a.dtype) if weighted else None
        ),
        x,
    )


def np_multi_margin(x, y, p=1, margin=1.0, w=None):
    n, c = x.shape
    out = np.zeros(n)
    for i in range(n):
        for j in range(c):
            if j != y[i]:
                z = max(margin - x[i, y[i]] + x[i, j], 0) ** p
                out[i] += z * (w[y[i]] if w is not None else 1)
    return out / c


@pytest.mark.parametrize("p,margin,weighted", [(1, 1.0, False), (2, 0.5, False), (1, 2.0, True), (2, 1.0, True)])
def test_multi_margin_loss_matches_numpy(p, margin, weighted):
    x = arr(6, 4)
    y = rng.integers(0, 4, 6)
    w = rng.random(4) + 0.5 if weighted else None
    want = np_multi_margin(x, y, p, margin, w)
    for reduction in REDUCTIONS:
        close(
            F.multi_margin_loss(f32(x), lucid.tensor(y), p, margin, f32(w) if weighted else None, reduction=reduction),
            reduce_np(want, reduction),
        )
    check_grads(
        lambda a: F.multi_margin_loss(
            a, lucid.tensor(y), p, margin, lucid.tensor(w, dtype=a.dtype) if weighted else None
        ),
        x,
        tol=1e-4,
    )
    close(F.multi_margin_loss(f32(x[0]), lucid.tensor(y[0])), np_multi_margin(x[:1], y[:1])[0])


def test_multi_margin_loss_errors():
    with pytest.raises(ValueError, match="p == 1 and p == 2"):
        F.multi_margin_loss(f32(arr(2, 3)), lucid.tensor([0, 1]), p=3)
    with pytest.raises(IndexError, match=r"\[0, 3\)"):
        F.multi_margin_loss(f32(arr(2, 3)), lucid.tensor([0, 3]))
    with pytest.raises(TypeError, match="integer class indices"):
        F.multi_margin_loss(f32(arr(2, 3)), f32([0.0, 1.0]))


def np_multilabel_margin(x, t):
    n, c = x.shape
    out = np.zeros(n)
    for i in range(n):
        targets = []
        for v in t[i]:
            if v < 0:
                break
            targets.append(v)
        for j in targets:
            for k in range(c):
                if k not in targets:
                    out[i] += max(0, 1 - (x[i, j] - x[i, k]))
    return out / c


def test_multilabel_margin_loss_matches_numpy():
    x = arr(5, 4)
    t = np.array([[3, 0, -1, 1], [1, 2, 3, -1], [-1, 0, 0, 0], [0, 1, 2, 3], [2, 2, -1, 0]])
    want = np_multilabel_margin(x, t)
    for reduction in REDUCTIONS:
        close(F.multilabel_margin_loss(f32(x), lucid.tensor(t), reduction=reduction), reduce_np(want, reduction))
    check_grads(lambda a: F.multilabel_margin_loss(a, lucid.tensor(t)), x, tol=1e-4)
    close(F.multilabel_margin_loss(f32(x[0]), lucid.tensor(t[0])), want[0])
    with pytest.raises(ValueError, match="input's shape"):
        F.multilabel_margin_loss(f32(x), lucid.tensor(t[:, :2]))
    with pytest.raises(IndexError, match="target values"):
        F.multilabel_margin_loss(f32(x), lucid.tensor(np.full((5, 4), 4)))


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("p", [2.0, 1.0])
def test_triplet_margin_losses_match_numpy(swap, p):
    a, pos, neg = arr(6, 4), arr(6, 4), arr(6, 4)
    d = lambda u, v: np_norm(u - v + 1e-6, p, -1)  # noqa: E731
    dn = np.minimum(d(a, neg), d(pos, neg)) if swap else d(a, neg)
    want = np.maximum(1.0 + d(a, pos) - dn, 0)
    for reduction in REDUCTIONS:
        close(
            F.triplet_margin_loss(f32(a), f32(pos), f32(neg), p=p, swap=swap, reduction=reduction),
            reduce_np(want, reduction),
            tol=1e-5,
        )
    check_grads(lambda x, y, z: F.triplet_margin_loss(x, y, z, p=p, swap=swap), a, pos, neg, tol=1e-4)
    if p == 2.0:
        close(F.triplet_margin_with_distance_loss(f32(a), f32(pos), f32(neg), swap=swap), want.mean(), tol=1e-5)
    l1 = lambda u, v: (u - v).abs().sum(-1)  # noqa: E731
    dn = np.minimum(np.abs(a - neg).sum(-1), np.abs(pos - neg).sum(-1)) if swap else np.abs(a - neg).sum(-1)
    close(
        F.triplet_margin_with_distance_loss(
            f32(a), f32(pos), f32(neg), distance_function=l1, margin=2.0, swap=swap, reduction="none"
        ),
        np.maximum(2.0 + np.abs(a - pos).sum(-1) - dn, 0),
    )


def test_triplet_errors():
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        F.triplet_margin_loss(f32(arr(2, 3)), f32(arr(3)), f32(arr(2, 3)))
    with pytest.raises(TypeError, match="callable"):
        F.triplet_margin_with_distance_loss(f32(arr(2, 3)), f32(arr(2, 3)), f32(arr(2, 3)), distance_function=3)


# ---- cross_entropy with class probabilities ------------------------------------------------------


def np_log_softmax(x, dim):
    m = x.max(axis=dim, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=dim, keepdims=True))


def test_cross_entropy_probabilities_mean_over_every_position():
    # [N, C, d1, d2]: the mean divides by N·d1·d2, not by N (a regression)
    x = arr(2, 3, 4, 5)
    t = rng.random((2, 3, 4, 5))
    t /= t.sum(1, keepdims=True)
    per = -(np_log_softmax(x, 1) * t).sum(1)
    close(F.cross_entropy(f32(x), f32(t)), per.sum() / (2 * 4 * 5))
    close(F.cross_entropy(f32(x), f32(t), reduction="sum"), per.sum())
    close(F.cross_entropy(f32(x), f32(t), reduction="none"), per)
    w = rng.random(3) + 0.5
    perw = -(np_log_softmax(x, 1) * t * w.reshape(3, 1, 1)).sum(1)
    close(F.cross_entropy(f32(x), f32(t), f32(w)), perw.sum() / (2 * 4 * 5))
    ts = t * 0.8 + 0.2 / 3
    close(F.cross_entropy(f32(x), f32(t), label_smoothing=0.2), -(np_log_softmax(x, 1) * ts).sum(1).mean())
    check_grads(lambda a, b: F.cross_entropy(a, b), x[:, :, :2, :2], t[:, :, :2, :2])
    close(F.cross_entropy(f32(x[0, :, 0, 0]), f32(t[0, :, 0, 0])), per[0, 0, 0])
    with pytest.raises(ValueError, match="input's shape"):
        F.cross_entropy(f32(x), f32(t[:, :2]))


def test_cross_entropy_takes_pytorchs_positional_arguments():
    x, y = arr(4, 3), rng.integers(0, 3, 4)
    want = -np_log_softmax(x, 1)[np.arange(4), y]
    keep = y != 1
    close(F.cross_entropy(f32(x), lucid.tensor(y), None, None, 1), want[keep].mean())
    close(
        F.nll_loss(lucid.tensor(np_log_softmax(x, 1).astype(np.float32)), lucid.tensor(y), None, None, 1),
        want[keep].mean(),
    )


# ---- CTC -----------------------------------------------------------------------------------------


def np_ctc(lp, target, length, blank=0):
    """-log p(target | lp[:length]) by enumerating the recursion in float64 (lp [T, C])."""
    ext = [blank]
    for c in target:
        ext += [c, blank]
    L = len(ext)
    alpha = np.full(L, -np.inf)
    alpha[0] = lp[0, blank]
    if L > 1:
        alpha[1] = lp[0, ext[1]]
    for t in range(1, length):
        new = np.full(L, -np.inf)
        for s in range(L):
            cands = [alpha[s]]
            if s >= 1:
                cands.append(alpha[s - 1])
            if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                cands.append(alpha[s - 2])
            new[s] = np.logaddexp.reduce(cands) + lp[t, ext[s]]
        alpha = new
    return -np.logaddexp(alpha[-1], alpha[-2] if L > 1 else -np.inf)


def ctc_case():
    T, N, C = 12, 3, 5
    lp = np_log_softmax(arr(T, N, C), 2)
    targets = np.array([[1, 2, 2, 0], [3, 1, 4, 2], [4, 0, 0, 0]])
    il, tl = [12, 10, 7], [3, 4, 1]
    return lp, targets, il, tl


def test_ctc_loss_matches_the_recursion():
    lp, targets, il, tl = ctc_case()
    want = np.array([np_ctc(lp[:, n], targets[n, : tl[n]], il[n]) for n in range(3)])
    close(F.ctc_loss(f32(lp), lucid.tensor(targets), il, tl, reduction="none"), want, tol=1e-4)
    close(F.ctc_loss(f32(lp), lucid.tensor(targets), il, tl, reduction="sum"), want.sum(), tol=1e-4)
    close(
        F.ctc_loss(f32(lp), lucid.tensor(targets), lucid.tensor(il), lucid.tensor(tl)),
        (want / np.array(tl)).mean(),
        tol=1e-4,
    )
    # the targets one after the other, and an unbatched input
    flat = np.concatenate([targets[n, : tl[n]] for n in range(3)])
    close(F.ctc_loss(f32(lp), lucid.tensor(flat), il, tl, reduction="none"), want, tol=1e-4)
    close(F.ctc_loss(f32(lp[:, 1]), lucid.tensor(targets[1]), [10], [4], reduction="none"), want[1], tol=1e-4)


def test_ctc_loss_gradient_is_pytorchs():
    # PyTorch's gradient is the exact one plus exp(log_probs) over each input length (the
    # gradient with respect to the logits when log_probs is their log_softmax).
    lp, targets, il, tl = ctc_case()
    fn = lambda x: F.ctc_loss(x, lucid.tensor(targets), il, tl, reduction="sum")  # noqa: E731
    x = lucid.tensor(lp, dtype=lucid.float64).requires_grad_()
    fn(x).backward()
    exact = numeric_grads(fn, [lp.copy()], np.ones(()), 1e-6, dtype=lucid.float64)[0]
    frames = (np.arange(12)[:, None] < np.array(il)[None, :])[:, :, None]
    np.testing.assert_allclose(x.grad.numpy(), exact + np.exp(lp) * frames, rtol=1e-5, atol=1e-6)


def test_ctc_loss_impossible_alignments_and_errors():
    lp = np_log_softmax(arr(3, 1, 4), 2)
    tg = lucid.tensor([[1, 1, 1]])  # needs 5 frames (blanks between the repeats)
    assert math.isinf(F.ctc_loss(f32(lp), tg, [3], [3], reduction="sum").item())
    x = f32(lp).requires_grad_()
    loss = F.ctc_loss(x, tg, [3], [3], reduction="sum", zero_infinity=True)
    assert loss.item() == 0.0
    loss.backward()
    assert float(np.abs(x.grad.numpy()).max()) == 0.0
    with pytest.raises(ValueError, match="blank"):
        F.ctc_loss(f32(lp), lucid.tensor([[0, 1]]), [3], [2])
    with pytest.raises(ValueError, match="one length per batch"):
        F.ctc_loss(f32(lp), tg, [3, 3], [3])
    with pytest.raises(ValueError, match=r"\[T, N, C\]"):
        F.ctc_loss(f32(arr(2)), tg, [3], [3])


# ---- linear, bilinear and linear_cross_entropy ---------------------------------------------------


def test_linear_with_a_1d_weight_drops_the_output_dimension():
    x, w = arr(2, 3, 4), arr(4)
    close(F.linear(f32(x), f32(w)), x @ w)
    close(F.linear(f32(x), f32(w), f32(0.5)), x @ w + 0.5)
    check_grads(lambda a, b: F.linear(a, b), x, w)
    with pytest.raises(ValueError, match="does not match weight"):
        F.linear(f32(x), f32(arr(3)))


@pytest.mark.parametrize("lead", [(), (5,), (2, 3), (0,)])
def test_bilinear_matches_numpy(lead):
    x1, x2 = arr(*lead, 3), arr(*lead, 4)
    w, b = arr(2, 3, 4), arr(2)
    want = np.einsum("...i,oij,...j->...o", x1, w, x2)
    close(F.bilinear(f32(x1), f32(x2), f32(w)), want)
    close(F.bilinear(f32(x1), f32(x2), f32(w), f32(b)), want + b)
    if lead != (0,):
        check_grads(lambda a, c, d, e: F.bilinear(a, c, d, e), x1, x2, w, b)


def test_bilinear_errors():
    with pytest.raises(ValueError, match="last dimensions must be 3 and 4"):
        F.bilinear(f32(arr(5, 4)), f32(arr(5, 4)), f32(arr(2, 3, 4)))
    with pytest.raises(ValueError, match="leading dimensions"):
        F.bilinear(f32(arr(5, 3)), f32(arr(6, 4)), f32(arr(2, 3, 4)))
    with pytest.raises(ValueError, match="3-D"):
        F.bilinear(f32(arr(5, 3)), f32(arr(5, 4)), f32(arr(3, 4)))
    with pytest.raises(ValueError, match="bias must have shape"):
        F.bilinear(f32(arr(5, 3)), f32(arr(5, 4)), f32(arr(2, 3, 4)), f32(arr(3)))


def np_cross_entropy(logits, target, weight=None, ignore_index=-100, reduction="mean", smoothing=0.0):
    """Class-index cross-entropy over dimension 1 of [N, C, *] logits (or [C])."""
    if logits.ndim == 1:
        logits, target = logits[None], np.asarray(target)[None]
    lsm = np.moveaxis(np_log_softmax(logits, 1), 1, -1).reshape(-1, logits.shape[1])
    t = np.asarray(target).reshape(-1)
    c = logits.shape[1]
    w = np.ones(c) if weight is None else weight
    keep = t != ignore_index
    tc = np.where(keep, t, 0)
    nll = -lsm[np.arange(len(t)), tc] * w[tc]
    smooth = -(lsm * w).sum(1) / c
    loss = np.where(keep, (1 - smoothing) * nll + smoothing * smooth, 0)
    if reduction == "none":
        return loss.reshape(np.asarray(target).shape)
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (w[tc] * keep).sum()


def test_linear_cross_entropy_matches_the_composition():
    x = arr(6, 5)
    w = arr(4, 3, 5)  # 4 classes, out_features (3,)
    b = arr(4, 3)
    y = rng.integers(0, 4, (6, 3))
    logits = np.einsum("ni,cdi->ncd", x, w) + b
    for reduction in REDUCTIONS:
        close(
            F.linear_cross_entropy(f32(x), f32(w), lucid.tensor(y), linear_bias=f32(b), reduction=reduction),
            np_cross_entropy(logits, y, reduction=reduction),
            tol=1e-4,
        )
    cw = rng.random(4) + 0.5
    close(
        F.linear_cross_entropy(
            f32(x), f32(w), lucid.tensor(y), linear_bias=f32(b), weight=f32(cw), ignore_index=2, label_smoothing=0.1
        ),
        np_cross_entropy(logits, y, cw, 2, "mean", 0.1),
        tol=1e-4,
    )
    p = rng.random((6, 4, 3))
    p /= p.sum(1, keepdims=True)
    close(
        F.linear_cross_entropy(f32(x), f32(w), f32(p), linear_bias=f32(b)),
        -(np_log_softmax(logits, 1) * p).sum(1).mean(),
        tol=1e-4,
    )
    check_grads(lambda a, c, d: F.linear_cross_entropy(a, c, lucid.tensor(y), linear_bias=d), x, w, b, tol=1e-4)
    opts = lucid.nn.LinearCrossEntropyOptions(batch_chunk_size=2)
    close(
        F.linear_cross_entropy(f32(x), f32(w), lucid.tensor(y), options=opts),
        np_cross_entropy(np.einsum("ni,cdi->ncd", x, w), y),
        tol=1e-4,
    )
    # unbatched
    close(
        F.linear_cross_entropy(f32(x[0]), f32(w[:, 0]), lucid.tensor(1)),
        np_cross_entropy(x[0] @ w[:, 0].T, 1),
        tol=1e-4,
    )


def test_linear_cross_entropy_errors():
    x, w = f32(arr(6, 5)), f32(arr(4, 3, 5))
    with pytest.raises(RuntimeError, match="dimensionality 1 or 2"):
        F.linear_cross_entropy(f32(arr(2, 6, 5)), w, lucid.tensor(np.zeros((2, 6, 3), np.int64)))
    with pytest.raises(RuntimeError, match="in_features"):
        F.linear_cross_entropy(x, f32(arr(4, 3, 4)), lucid.tensor(np.zeros((6, 3), np.int64)))
    with pytest.raises(RuntimeError, match="linear_bias shape"):
        F.linear_cross_entropy(x, w, lucid.tensor(np.zeros((6, 3), np.int64)), linear_bias=f32(arr(4)))
    with pytest.raises(RuntimeError, match="ignore_index cannot"):
        F.linear_cross_entropy(x, w, f32(np.ones((6, 4, 3))), ignore_index=1)
    with pytest.raises(RuntimeError, match="batched input"):
        F.linear_cross_entropy(f32(arr(5)), w, lucid.tensor(0))


# ---- normalisation -------------------------------------------------------------------------------


def np_lrn(x, size, alpha=1e-4, beta=0.75, k=1.0):
    c = x.shape[1]
    sq = x * x
    div = np.zeros_like(x)
    for ch in range(c):
        lo, hi = ch - size // 2, ch + (size - 1) // 2
        div[:, ch] = sq[:, max(lo, 0) : min(hi, c - 1) + 1].sum(1)
    return x / (k + alpha * div / size) ** beta


@pytest.mark.parametrize("shape,size", [((2, 6, 3), 2), ((1, 5, 3, 4), 3), ((2, 4, 2, 2, 3), 1), ((1, 3, 4), 5)])
def test_local_response_norm_matches_numpy(shape, size):
    x = arr(*shape)
    close(F.local_response_norm(f32(x), size), np_lrn(x, size))
    close(F.local_response_norm(f32(x), size, 0.5, 0.6, 2.0), np_lrn(x, size, 0.5, 0.6, 2.0))
    check_grads(lambda t: F.local_response_norm(t, size, 0.5, 0.6, 2.0), x)
    with pytest.raises(ValueError, match="3D or higher"):
        F.local_response_norm(f32(arr(3, 4)), 2)
    assert tuple(F.local_response_norm(lucid.zeros(0, 2, 3), 2).shape) == (0, 2, 3)


def test_layer_and_group_norm_take_any_eps():
    x = arr(2, 6, 3)
    w, b = arr(6), arr(6)
    # a negative eps: 1/sqrt(var + eps), NaN where that is negative, as PyTorch
    var = x.var(axis=(1, 2), keepdims=True)
    want = (x - x.mean(axis=(1, 2), keepdims=True)) / np.sqrt(np.where(var - 0.1 > 0, var - 0.1, np.nan))
    close(F.layer_norm(f32(x), (6, 3), eps=-0.1), want, tol=1e-4)
    g = x.reshape(2, 2, 9)
    gv = g.var(-1, keepdims=True)
    gwant = ((g - g.mean(-1, keepdims=True)) / np.sqrt(np.where(gv - 0.05 > 0, gv - 0.05, np.nan))).reshape(x.shape)
    close(F.group_norm(f32(x), 2, f32(w), f32(b), eps=-0.05), gwant * w[:, None] + b[:, None], tol=1e-4)
    # an empty batch
    assert tuple(F.group_norm(lucid.zeros(0, 2), 1, f32(np.ones(2)), f32(np.zeros(2))).shape) == (0, 2)
    with pytest.raises(TypeError, match="eps must be a number"):
        F.layer_norm(f32(x), (3,), eps="a")


def test_batch_norm_of_an_empty_batch_keeps_the_statistics():
    rm, rv = lucid.zeros(5), lucid.ones(5)
    x = lucid.zeros(0, 5, 9).requires_grad_()
    y = F.batch_norm(x, rm, rv, f32(np.ones(5)), f32(np.zeros(5)), training=True)
    assert tuple(y.shape) == (0, 5, 9)
    close(rm, np.zeros(5))
    close(rv, np.ones(5))
    assert tuple(F.batch_norm(lucid.zeros(0), lucid.zeros(0), lucid.ones(0), training=True).shape) == (0,)


# ---- dropouts ------------------------------------------------------------------------------------


def test_alpha_dropout_keeps_mean_and_variance():
    x = rng.standard_normal(200_000)
    y = F.alpha_dropout(f32(x), 0.3, training=True).numpy()
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1) < 0.02
    # dropped entries all take one value: a·sat + b
    sat = -SELU_A * SELU_S
    a = ((1 - 0.3) * (1 + 0.3 * sat * sat)) ** -0.5
    dropped = np.isclose(y, a * sat - a * sat * 0.3, atol=1e-5)
    assert abs(dropped.mean() - 0.3) < 0.01
    kept = ~dropped
    np.testing.assert_allclose(y[kept], a * x[kept] - a * sat * 0.3, rtol=1e-5, atol=1e-5)


def test_alpha_dropouts_identity_and_edges():
    x = f32(arr(3, 4))
    assert F.alpha_dropout(x, 0.5) is x  # training=False by default
    assert F.feature_alpha_dropout(x, 0.5, training=False) is x
    assert F.alpha_dropout(x, 0.0, training=True) is x
    close(F.alpha_dropout(x, 1.0, training=True), np.zeros((3, 4)))
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.alpha_dropout(x, 1.5, training=True)


def test_feature_alpha_dropout_drops_whole_channels():
    x = arr(8, 16, 5, 5)
    y = F.feature_alpha_dropout(f32(x), 0.5, training=True).numpy()
    sat = -SELU_A * SELU_S
    a = ((1 - 0.5) * (1 + 0.5 * sat * sat)) ** -0.5
    const = np.isclose(y, a * sat - a * sat * 0.5, atol=1e-5).all(axis=(2, 3))
    kept = np.isclose(y, a * x - a * sat * 0.5, atol=1e-4).all(axis=(2, 3))
    assert (const | kept).all() and const.any() and kept.any()


def test_dropout3d_zeroes_whole_channels():
    x = np.abs(arr(4, 6, 2, 3, 3)) + 0.1
    t = f32(x).requires_grad_()
    y = F.dropout3d(t, 0.5)
    yn = y.detach().numpy()
    zero = (yn == 0).all(axis=(2, 3, 4))
    scaled = np.isclose(yn, 2 * x, rtol=1e-6).all(axis=(2, 3, 4))
    assert (zero | scaled).all() and zero.any() and scaled.any()
    y.sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), np.where(zero[:, :, None, None, None], 0.0, 2.0) * np.ones_like(x))
    assert F.dropout3d(t, 0.5, training=False) is t
    assert tuple(F.dropout3d(f32(x[0]), 0.5).shape) == x[0].shape  # unbatched [C, D, H, W]
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout3d(t, -0.1)


def test_ctc_loss_target_rows_must_match_the_batch():
    lp = np_log_softmax(arr(5, 2, 4), 2)
    with pytest.raises(ValueError, match="one row per batch element"):
        F.ctc_loss(f32(lp), lucid.tensor([[1, 2]]), [5, 5], [2, 2])


def test_pointwise_and_binary_losses_take_pytorchs_arguments():
    a, b, w = arr(3, 4), arr(3, 4), rng.random((3, 4))
    close(F.mse_loss(f32(a), f32(b), weight=f32(w)), ((a - b) ** 2 * w).mean())
    close(F.l1_loss(f32(a), f32(b), reduction="sum", weight=f32(w)), (np.abs(a - b) * w).sum())
    check_grads(lambda x, y: F.mse_loss(x, y, weight=lucid.tensor(w, dtype=x.dtype)), a, b)
    with pytest.warns(UserWarning, match="deprecated"):
        close(F.mse_loss(f32(a), f32(b), None, False), (a - b) ** 2)
    p, t = 1 / (1 + np.exp(-a)), rng.random((3, 4))
    bce = -(t * np.log(p) + (1 - t) * np.log(1 - p))
    with pytest.warns(UserWarning, match="deprecated"):
        close(F.binary_cross_entropy(f32(p), f32(t), None, False), bce.sum(), tol=1e-4)
    with pytest.warns(UserWarning, match="deprecated"):
        close(F.binary_cross_entropy_with_logits(f32(a), f32(t), None, None, False), bce, tol=1e-4)
    close(F.binary_cross_entropy_with_logits(f32(a), f32(t), reduction="sum"), bce.sum(), tol=1e-4)


# ---- autocast ------------------------------------------------------------------------------------


def sgn(c):
    return (c > 0).to(c.dtype) * 2 - 1


AUTOCAST_FP32 = {
    "kl_div": lambda a, b, c: F.kl_div(a, b, reduction="sum"),
    "margin_ranking_loss": lambda a, b, c: F.margin_ranking_loss(a, b, sgn(c)),
    "hinge_embedding_loss": lambda a, b, c: F.hinge_embedding_loss(a, sgn(c)),
    "soft_margin_loss": lambda a, b, c: F.soft_margin_loss(a, sgn(c)),
    "cosine_embedding_loss": lambda a, b, c: F.cosine_embedding_loss(a, b, sgn(c[:, 0])),
    "poisson_nll_loss": lambda a, b, c: F.poisson_nll_loss(a, b.abs()),
    "gaussian_nll_loss": lambda a, b, c: F.gaussian_nll_loss(a, b, c.abs()),
    "multilabel_soft_margin_loss": lambda a, b, c: F.multilabel_soft_margin_loss(a, (b > 0).to(b.dtype)),
    "multi_margin_loss": lambda a, b, c: F.multi_margin_loss(a, lucid.tensor([0, 1, 2, 3])),
    "triplet_margin_loss": lambda a, b, c: F.triplet_margin_loss(a, b, c),
    "normalize": lambda a, b, c: F.normalize(a),
    "cosine_similarity": lambda a, b, c: F.cosine_similarity(a, b),
    "pairwise_distance": lambda a, b, c: F.pairwise_distance(a, b),
    "pdist": lambda a, b, c: F.pdist(a),
    "huber_loss": lambda a, b, c: F.huber_loss(a, b),
    "smooth_l1_loss": lambda a, b, c: F.smooth_l1_loss(a, b),
}


@pytest.mark.parametrize("name", sorted(AUTOCAST_FP32))
def test_composed_losses_and_distances_run_in_float32_under_autocast(name):
    fn = AUTOCAST_FP32[name]
    xs = [arr(4, 5) for _ in range(3)]
    leaves = [f32(x).to(lucid.bfloat16).requires_grad_() for x in xs]
    with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
        y = fn(*leaves)
    assert y.dtype is lucid.float32
    want = fn(*[t.detach().float() for t in leaves])
    close(y, want.numpy(), tol=1e-5)
    y.sum().backward()
    assert leaves[0].grad is not None and leaves[0].grad.dtype is lucid.bfloat16
    outside = fn(*[t.detach() for t in leaves])  # outside a scope: the input's dtype
    assert outside.dtype is lucid.bfloat16


# ---- metal ---------------------------------------------------------------------------------------


def _on(device, a, dtype=None):
    return lucid.tensor(a, device=device) if dtype is None else lucid.tensor(a, dtype=dtype, device=device)


@pytest.mark.filterwarnings("ignore::lucid.metal.MetalFallbackWarning")
@pytest.mark.parametrize(
    "name,fn,shapes",
    [
        ("hardswish", lambda x: F.hardswish(x * 3), [(2, 3, 4)]),
        ("mish", F.mish, [(2, 3, 4)]),
        ("selu", F.selu, [(2, 3, 4)]),
        ("softplus", lambda x: F.softplus(x, 2.0, 1.0), [(2, 3, 4)]),
        ("glu", lambda x: F.glu(x, 1), [(2, 4, 3)]),
        ("softmin", lambda x: F.softmin(x, 1), [(2, 4, 3)]),
        ("normalize", F.normalize, [(2, 4, 3)]),
        ("cosine_similarity", F.cosine_similarity, [(2, 4, 3), (2, 4, 3)]),
        ("pdist", F.pdist, [(5, 3)]),
        ("bilinear", F.bilinear, [(4, 3), (4, 2), (5, 3, 2)]),
        ("local_response_norm", lambda x: F.local_response_norm(x, 3), [(2, 5, 4)]),
        ("kl_div", lambda x, y: F.kl_div(x, y, reduction="batchmean", log_target=True), [(3, 4), (3, 4)]),
        ("triplet", F.triplet_margin_loss, [(4, 5), (4, 5), (4, 5)]),
        ("multi_margin", lambda x: F.multi_margin_loss(x, _on(x.device, np.array([0, 2, 1]))), [(3, 4)]),
        (
            "multilabel_margin",
            lambda x: F.multilabel_margin_loss(x, _on(x.device, np.array([[0, 2, -1, 0]] * 3))),
            [(3, 4)],
        ),
        (
            "ctc",
            lambda x: F.ctc_loss(x.log_softmax(2), _on(x.device, np.array([[1, 2], [3, 3]])), [6, 5], [2, 2]),
            [(6, 2, 4)],
        ),
        ("cross_entropy_probs", lambda x, y: F.cross_entropy(x, y.softmax(1)), [(2, 3, 4), (2, 3, 4)]),
    ],
)
def test_metal_matches_cpu_values_and_gradients(name, fn, shapes):
    arrays = [arr(*s).astype(np.float32) for s in shapes]
    results = {}
    for device in ("cpu", "metal"):
        leaves = [_on(device, a).requires_grad_() for a in arrays]
        out = fn(*leaves)
        assert out.device == device
        (out * out).sum().backward()
        results[device] = (out.detach().numpy(), [t.grad.numpy() for t in leaves])
    np.testing.assert_allclose(results["metal"][0], results["cpu"][0], rtol=1e-4, atol=1e-4)
    for g_metal, g_cpu in zip(results["metal"][1], results["cpu"][1]):
        np.testing.assert_allclose(g_metal, g_cpu, rtol=1e-3, atol=1e-3)


def test_inplace_functional_forms():
    cases = [
        (F.hardtanh_, F.hardtanh, ()),
        (F.threshold_, F.threshold, (0.2, -1.0)),
        (F.celu_, F.celu, (0.5,)),
        (F.selu_, F.selu, ()),
        (F.leaky_relu_, F.leaky_relu, (0.2,)),
        (F.rrelu_, F.rrelu, ()),
    ]
    for inplace, fn, args in cases:
        x = arr(3, 4) * 2
        t = f32(x)
        assert inplace(t, *args) is t
        close(t, fn(f32(x), *args).numpy())


def test_ctc_loss_of_an_empty_target_is_all_blanks():
    lp = np_log_softmax(arr(4, 2, 3), 2)
    got = F.ctc_loss(f32(lp), lucid.zeros(2, 0, dtype=lucid.int64), [4, 3], [0, 0], reduction="none")
    close(got, [-lp[:, 0, 0].sum(), -lp[:3, 1, 0].sum()], tol=1e-5)
    with pytest.raises(RuntimeError, match="must not be empty"):
        F.ctc_loss(lucid.zeros(0, 1, 3), lucid.tensor([[1]]), [0], [1])


def test_losses_refuse_an_unknown_reduction():
    x, y, s, i = f32(arr(3, 4)), f32(arr(3, 4)), f32(np.ones(3)), lucid.tensor([0, 1, 2])
    calls = [
        lambda r: F.margin_ranking_loss(x, y, x, reduction=r),
        lambda r: F.hinge_embedding_loss(x, y, reduction=r),
        lambda r: F.soft_margin_loss(x, y, reduction=r),
        lambda r: F.cosine_embedding_loss(x, y, s, reduction=r),
        lambda r: F.poisson_nll_loss(x, y, reduction=r),
        lambda r: F.gaussian_nll_loss(x, y, y.abs(), reduction=r),
        lambda r: F.multilabel_soft_margin_loss(x, y, reduction=r),
        lambda r: F.multi_margin_loss(x, i, reduction=r),
        lambda r: F.multilabel_margin_loss(x, lucid.zeros(3, 4, dtype=lucid.int64), reduction=r),
        lambda r: F.triplet_margin_loss(x, y, x, reduction=r),
        lambda r: F.triplet_margin_with_distance_loss(x, y, x, reduction=r),
        lambda r: F.ctc_loss(F.log_softmax(f32(arr(5, 1, 3)), 2), lucid.tensor([[1]]), [5], [1], reduction=r),
        lambda r: F.cross_entropy(x, y.softmax(1), reduction=r),
        lambda r: F.linear_cross_entropy(x, f32(arr(5, 4)), i, reduction=r),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="reduction must be 'none', 'mean' or 'sum', got 'bad'"):
            call("bad")
