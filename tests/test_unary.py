"""Unary math ops: values against numpy, dtype rules, autocast policy and gradients."""

import math

import ml_dtypes
import numpy as np
import pytest

import lucid
import lucid.nn as nn
import lucid.nn.functional as F

_erfc = np.vectorize(math.erfc)

REFERENCE = {
    "exp": (np.exp, lambda t: t.exp()),
    "log": (np.log, lambda t: t.log()),
    "log1p": (np.log1p, lambda t: t.log1p()),
    "sqrt": (np.sqrt, lambda t: t.sqrt()),
    "rsqrt": (lambda x: 1 / np.sqrt(x), lambda t: t.rsqrt()),
    "abs": (np.abs, abs),
    "tanh": (np.tanh, lambda t: t.tanh()),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), lambda t: t.sigmoid()),
    "silu": (lambda x: x / (1 + np.exp(-x)), F.silu),
    # Written without 1 + erf / 1 + tanh, which cancel to 0 in the negative tail.
    "gelu": (lambda x: 0.5 * x * _erfc(-x / np.sqrt(2)), F.gelu),
    "gelu_tanh": (lambda x: x / (1 + np.exp(-2 * np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
                  lambda t: F.gelu(t, approximate="tanh")),
    "softplus": (lambda x: np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20)))), F.softplus),
    "sin": (np.sin, lambda t: t.sin()),
    "cos": (np.cos, lucid.cos),
    "expm1": (np.expm1, lambda t: t.expm1()),
}
POSITIVE = {"log", "log1p", "sqrt", "rsqrt"}


def inputs(name, n=257):
    x = np.random.default_rng(3).standard_normal(n) * 3
    if name in POSITIVE:
        x = np.abs(x) + 0.05
    if name == "softplus":
        x = np.concatenate([x, [25.0, -30.0]])
    return x.astype(np.float32)


def test_every_unary_op_of_the_engine_is_a_function_a_method_and_an_in_place_method_checked_here():
    codes = lucid._C.codes("lucid_unary_op")
    assert set(codes) == set(REFERENCE) | {"neg", "relu"}  # (neg and relu: tests/test_ops.py)
    for name in codes:
        doc = lucid._C._abi.DOCS[f"LUCID_{name.upper()}"]
        assert getattr(lucid, name).__doc__.startswith(doc) and getattr(lucid.Tensor, name) is getattr(lucid, name)
        x = lucid.tensor([0.5, 2.0])
        want = getattr(lucid, name)(x).numpy()
        assert getattr(x, f"{name}_")() is x
        np.testing.assert_array_equal(x.numpy(), want)


@pytest.mark.parametrize("device", ["cpu", "metal"])
@pytest.mark.parametrize("name", REFERENCE)
def test_values_match_numpy(device, name):
    ref, op = REFERENCE[name]
    x = inputs(name)
    got = op(lucid.tensor(x, device=device))
    assert got.dtype == lucid.float32 and got.device == device
    np.testing.assert_allclose(got.numpy(), ref(x.astype(np.float64)), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("dtype,np_dtype", [(lucid.float16, np.float16), (lucid.bfloat16, ml_dtypes.bfloat16)])
@pytest.mark.parametrize("name", REFERENCE)
def test_low_precision_computes_in_float32_and_rounds_once(dtype, np_dtype, name):
    ref, op = REFERENCE[name]
    x = inputs(name).astype(np_dtype)
    got = op(lucid.tensor(x))
    assert got.dtype == dtype
    want = ref(x.astype(np.float64)).astype(np.float32).astype(np_dtype)
    diff = np.abs(got.numpy().astype(np.float64) - want.astype(np.float64))
    spacing = np.abs(want.astype(np.float64)) * (2.0 ** -10 if np_dtype is np.float16 else 2.0 ** -7) + 1e-6
    assert (diff <= spacing).all(), name  # within one unit of the correctly rounded value


def test_integers_promote_except_for_abs():
    i = lucid.tensor([-2, 0, 3])
    assert i.exp().dtype == lucid.float32 and i.sigmoid().dtype == lucid.float32
    np.testing.assert_allclose(i.exp().numpy(), np.exp([-2.0, 0.0, 3.0]), rtol=1e-6)
    assert abs(i).dtype == lucid.int64
    np.testing.assert_array_equal(abs(i).numpy(), [2, 0, 3])
    np.testing.assert_array_equal(lucid.tensor([True, False]).exp().numpy(), np.exp([1.0, 0.0]).astype(np.float32))
    with pytest.raises(TypeError, match="bool"):
        abs(lucid.tensor([True]))


def test_special_values():
    x = lucid.tensor([0.0, -1.0, np.inf, np.nan])
    r = x.log().numpy()
    assert r[0] == -np.inf and np.isnan(r[1]) and r[2] == np.inf and np.isnan(r[3])
    assert np.isnan(x.sqrt().numpy()[1]) and x.rsqrt().numpy()[0] == np.inf
    assert x.exp().numpy()[2] == np.inf and np.isnan(x.tanh().numpy()[3])


def test_sigmoid_and_silu_across_the_range_and_at_special_values():
    x = np.array([-np.inf, -120, -103.5, -88, -20, -1, -1e-30, -0.0, 0.0, 1e-30, 1, 20, 88, 120, np.inf, np.nan],
                 np.float32)
    wide = np.concatenate([x, np.linspace(-30, 30, 4001, dtype=np.float32)])
    x64 = wide.astype(np.float64)
    with np.errstate(over="ignore"):
        sig = 1 / (1 + np.exp(-x64))
    t = lucid.tensor(wide, requires_grad=True)
    with np.errstate(over="ignore", invalid="ignore"):
        silu = x64 / (1 + np.exp(-x64))  # PyTorch's form: silu(-inf) is NaN there too
    for got, want in ((t.sigmoid(), sig), (F.silu(t), silu)):
        got = got.detach().numpy()
        assert np.array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        # A few ulp; below float32's normal range (x < -87) only absolutely, as there a
        # subnormal sigmoid has few significant bits left.
        np.testing.assert_allclose(got[ok], want[ok], rtol=4e-7, atol=2e-43)
    F.silu(t).sum().backward()
    finite = np.isfinite(x64)
    with np.errstate(invalid="ignore"):  # (inf · 0 at the infinities, which are left out)
        dsilu = sig * (1 + x64 * (1 - sig))
    np.testing.assert_allclose(t.grad.numpy()[finite], dsilu[finite], rtol=2e-6, atol=1e-7)  # O(1) values
    # The strided kernel computes what the contiguous fast path does, bit for bit.
    grid = lucid.tensor(np.linspace(-12, 12, 64 * 33, dtype=np.float32).reshape(64, 33))
    for op in (lambda v: v.sigmoid(), F.silu):
        np.testing.assert_array_equal(op(grid.T).numpy(), op(grid).numpy().T)


def test_float32_policy_under_autocast():
    h = lucid.randn(8, device="metal").half()
    for name in ("exp", "expm1", "log1p", "softplus"):
        assert lucid.amp.policy(name) is lucid.amp.CastPolicy.FLOAT32
    assert lucid.amp.policy("tanh") is lucid.amp.CastPolicy.NONE
    with lucid.amp.autocast():
        assert h.exp().dtype == lucid.float32
        assert F.softplus(h).dtype == lucid.float32
        assert h.tanh().dtype == lucid.float16
        assert F.gelu(h).dtype == lucid.float16


def test_module_functions_and_layers():
    x = lucid.tensor(inputs("tanh", 16))
    for name in ("exp", "tanh", "sigmoid", "abs", "relu"):
        np.testing.assert_array_equal(getattr(lucid, name)(x).numpy(), getattr(x, name)().numpy())
    np.testing.assert_array_equal(nn.GELU()(x).numpy(), F.gelu(x).numpy())
    np.testing.assert_array_equal(nn.GELU("tanh")(x).numpy(), F.gelu(x, approximate="tanh").numpy())
    np.testing.assert_array_equal(nn.SiLU()(x).numpy(), F.silu(x).numpy())
    np.testing.assert_array_equal(nn.Tanh()(x).numpy(), x.tanh().numpy())
    np.testing.assert_array_equal(nn.Sigmoid()(x).numpy(), x.sigmoid().numpy())
    with pytest.raises(ValueError):
        F.gelu(x, approximate="fast")
    with pytest.raises(TypeError):
        lucid.exp(np.ones(2))


@pytest.mark.parametrize("name", REFERENCE)
def test_gradients_match_finite_differences(name):
    _, op = REFERENCE[name]
    x = inputs(name, 24).astype(np.float64)
    x = x[np.abs(x) > 0.05]  # away from abs's kink
    t = lucid.tensor(x.astype(np.float32), requires_grad=True)
    w = np.random.default_rng(9).standard_normal(t.shape).astype(np.float32)
    (op(t) * lucid.tensor(w)).sum().backward()
    eps = 1e-3
    num = np.array([((op(lucid.tensor(np.float32(v + eps))).item() - op(lucid.tensor(np.float32(v - eps))).item())
                     / (2 * eps)) for v in x]) * w
    np.testing.assert_allclose(t.grad.numpy(), num, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype,np_dtype", [(lucid.float32, np.float32), (lucid.bfloat16, ml_dtypes.bfloat16)])
@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_large_tensors_take_the_vectorised_kernels_at_the_same_accuracy(dtype, np_dtype, name):
    # 100k elements: big enough for the vectorised library kernels where they apply.
    ref, op = REFERENCE[name]
    x = np.tile(inputs(name), 400).astype(np_dtype)
    got = op(lucid.tensor(x))
    assert got.dtype == dtype
    want = ref(x.astype(np.float64))
    if dtype == lucid.float32:
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-6, atol=2e-6)
    else:  # one rounding to bfloat16, at most one step off the correctly rounded value
        rounded = want.astype(np.float32).astype(np_dtype).astype(np.float64)
        step = np.abs(rounded) * 2.0 ** -7 + 1e-30
        assert (np.abs(got.numpy().astype(np.float64) - rounded) <= step).all()


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_nan_and_infinities_give_the_same_result_in_large_and_small_tensors(name):
    # Large tensors may take a vectorised library kernel: special values must not notice.
    _, op = REFERENCE[name]
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0], np.float32)
    big = np.zeros(40000, np.float32)
    big[:6] = specials
    with np.errstate(all="ignore"):
        small = op(lucid.tensor(specials)).numpy()
        large = op(lucid.tensor(big)).numpy()[:6]
    np.testing.assert_array_equal(large, small)
    assert np.isnan(large[0])  # NaN propagates


@pytest.mark.parametrize("log", [False, True])
def test_a_nan_makes_its_whole_softmax_row_nan_at_every_size(log):
    for shape in [(4, 30), (64, 1024)]:
        x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
        x[1, 5] = np.nan
        y = lucid.tensor(x).log_softmax(-1) if log else lucid.tensor(x).softmax(-1)
        assert np.isnan(y.numpy()[1]).all() and not np.isnan(np.delete(y.numpy(), 1, 0)).any(), shape


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu", "tanh", "sigmoid", "exp"])
def test_gradients_at_special_values_agree_in_large_and_small_tensors(name):
    _, op = REFERENCE[name]
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 30.0, -30.0], np.float32)
    big = np.zeros(40000, np.float32)
    big[:8] = specials
    grads = []
    for a in (specials, big):
        t = lucid.tensor(a, requires_grad=True)
        with np.errstate(all="ignore"):
            op(t).sum().backward()
        grads.append(t.grad.numpy()[:8])
    np.testing.assert_array_equal(np.isnan(grads[1]), np.isnan(grads[0]))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6, atol=1e-30)
