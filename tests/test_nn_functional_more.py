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
    ("softshrink_1", lambda x: F.softshrink(x, 1.0),
     lambda x: np.where(x > 1, x - 1, np.where(x < -1, x + 1, 0)), (-1, 1)),
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


@pytest.mark.parametrize("name,fn,ref,kinks", ACTIVATIONS[:5], ids=[a[0] for a in ACTIVATIONS[:5]])
def test_activation_bfloat16_and_empty(name, fn, ref, kinks):
    x = away(3, 5, points=kinks).astype(ml_dtypes.bfloat16)
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
    for fn in (lambda t: lucid.softmax(t, 1, dtype=lucid.float64), lambda t: t.softmax(1, lucid.float64),
               lambda t: F.softmax(t, 1, dtype=lucid.float64)):
        y = fn(f32(x))
        assert y.dtype is lucid.float64
        close(y, np_softmax(x.astype(np.float32).astype(np.float64), 1), tol=1e-12)
    for fn in (lambda t: lucid.log_softmax(t, 0, dtype=lucid.float64), lambda t: t.log_softmax(0, dtype=lucid.float64),
               lambda t: F.log_softmax(t, 0, dtype=lucid.float64)):
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
