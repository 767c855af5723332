"""More of lucid.nn: RMSNorm, InstanceNorm, Dropout1d/2d, PReLU, ELU, padding, interpolate and
Upsample, SmoothL1Loss and HuberLoss, EmbeddingBag, and Module hooks, add_module, cpu,
share_memory and load_state_dict(assign=True). Values against small numpy references, gradients
against central finite differences."""

import ml_dtypes
import numpy as np
import pytest

import lucid
import lucid.nn as nn
import lucid.nn.functional as F
from _helpers import T, arrays_from, numeric_grads

rng = np.random.default_rng(11)
arr = arrays_from(rng)


def close(got, want, tol=1e-5):
    np.testing.assert_allclose(np.asarray(got.numpy(), np.float64), want, rtol=tol, atol=tol)


def check_grads(fn, *arrays, tol=2e-2, eps=1e-2):
    """The gradients of sum(fn(*inputs) * w) for random w, against central differences."""
    leaves = [T(a).requires_grad_() for a in arrays]
    out = fn(*leaves)
    weights = rng.standard_normal(out.shape).astype(np.float32)
    (out * T(weights)).sum().backward()
    for t, want in zip(leaves, numeric_grads(fn, [a.copy() for a in arrays], weights.astype(np.float64), eps)):
        assert t.grad is not None and t.grad.shape == t.shape
        np.testing.assert_allclose(t.grad.numpy(), want, rtol=tol, atol=tol)


def away_from_zero(*shape, gap=0.1):
    """Standard normal values with none closer to 0 than `gap` (clear of activation kinks)."""
    a = arr(*shape)
    return np.where(np.abs(a) < gap, np.sign(a + 1e-9) * (gap + np.abs(a)), a).astype(np.float32)


# ---- RMSNorm -------------------------------------------------------------------------------------


def np_rms_norm(x, k, weight=None, eps=np.finfo(np.float32).eps):
    x = x.astype(np.float64)
    axes = tuple(range(-k, 0))
    y = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    return y if weight is None else y * weight


@pytest.mark.parametrize("shape,k", [((3, 5), 1), ((2, 3, 4, 5), 2), ((4,), 1), ((2, 3, 4), 3)])
def test_rms_norm_matches_numpy(shape, k):
    x, w = arr(*shape), arr(*shape[len(shape) - k :])
    ns = shape[len(shape) - k :]
    close(F.rms_norm(T(x), ns), np_rms_norm(x, k))
    close(F.rms_norm(T(x), ns, T(w)), np_rms_norm(x, k, w))
    close(F.rms_norm(T(x), ns, T(w), eps=0.5), np_rms_norm(x, k, w, eps=0.5))
    if k == 1:
        close(F.rms_norm(T(x), ns[0]), np_rms_norm(x, 1))


def test_rms_norm_default_eps_is_the_float32_machine_epsilon():
    x = np.full((1, 4), 1e-4, np.float32)  # mean square 1e-8, comparable with eps = 2**-23
    close(F.rms_norm(T(x), (4,)), np_rms_norm(x, 1, eps=2.0**-23), tol=1e-6)
    assert not np.allclose(F.rms_norm(T(x), (4,)).numpy(), np_rms_norm(x, 1, eps=1e-5), rtol=1e-3)
    assert not np.allclose(F.rms_norm(T(x), (4,)).numpy(), np_rms_norm(x, 1, eps=0.0), rtol=1e-3)


def test_rms_norm_16_bit_input_is_normalised_in_float32():
    x = arr(3, 8) * 100
    for dt, npt in ((lucid.float16, np.float16), (lucid.bfloat16, ml_dtypes.bfloat16)):
        xs = x.astype(npt)
        y = F.rms_norm(T(xs).to(dt) if dt is lucid.bfloat16 else T(xs), (8,))
        assert y.dtype is dt
        want = np_rms_norm(xs.astype(np.float32), 1).astype(np.float32).astype(npt).astype(np.float64)
        np.testing.assert_allclose(y.float().numpy(), want, rtol=1e-2, atol=1e-2)
        # the weight multiplies in float32, before the one rounding to the input's dtype
        w = np.full(8, 1 + 2.0**-6, np.float32).astype(npt)
        wt = T(w.astype(np.float32)).to(dt)
        got = F.rms_norm(T(xs.astype(np.float32)).to(dt), (8,), wt)
        assert got.dtype is dt
        want = (np_rms_norm(xs.astype(np.float32), 1) * w.astype(np.float64)).astype(np.float32).astype(npt)
        np.testing.assert_array_equal(got.float().numpy(), want.astype(np.float32))


def test_rms_norm_gradients():
    check_grads(lambda x, w: F.rms_norm(x, (3, 4), w), arr(2, 3, 4), arr(3, 4))


def test_rms_norm_errors():
    with pytest.raises(RuntimeError, match="trailing"):
        F.rms_norm(T(arr(2, 3)), (4,))
    with pytest.raises(RuntimeError, match="trailing"):
        F.rms_norm(T(arr(3)), (2, 3))
    with pytest.raises(RuntimeError, match="weight"):
        F.rms_norm(T(arr(2, 3)), (3,), T(arr(4)))
    with pytest.raises(TypeError, match="input"):
        F.rms_norm(arr(2, 3), (3,))


def test_rms_norm_module():
    m = nn.RMSNorm([3, 4])
    assert m.normalized_shape == (3, 4) and m.eps is None
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    np.testing.assert_array_equal(m.weight.numpy(), np.ones((3, 4), np.float32))
    x = arr(2, 3, 4)
    with lucid.no_grad():
        m.weight.copy_(T(arr(3, 4)))
    close(m(T(x)), np_rms_norm(x, 2, m.weight.numpy()))
    m2 = nn.RMSNorm(4, eps=1e-3, elementwise_affine=False, dtype=lucid.float16)
    assert m2.weight is None and list(m2.parameters()) == [] and m2.eps == 1e-3
    close(m2(T(x)), np_rms_norm(x, 1, eps=1e-3))
    assert nn.RMSNorm(4, dtype=lucid.float16).weight.dtype is lucid.float16
    with pytest.raises(ValueError, match="normalized_shape"):
        nn.RMSNorm(0)


# ---- InstanceNorm --------------------------------------------------------------------------------


def np_instance_norm(x, weight=None, bias=None, eps=1e-5):
    x = x.astype(np.float64)
    axes = tuple(range(2, x.ndim))
    y = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 2, 6), (1, 4, 2, 2)])
def test_instance_norm_matches_numpy(shape):
    x, w, b = arr(*shape), arr(shape[1]), arr(shape[1])
    close(F.instance_norm(T(x)), np_instance_norm(x), tol=1e-4)
    close(F.instance_norm(T(x), weight=T(w), bias=T(b)), np_instance_norm(x, w, b), tol=1e-4)
    close(F.instance_norm(T(x), eps=0.3), np_instance_norm(x, eps=0.3), tol=1e-4)


def test_instance_norm_gradients():
    check_grads(lambda x, w, b: F.instance_norm(x, weight=w, bias=b), arr(2, 2, 3, 3), arr(2), arr(2))


def test_instance_norm_running_statistics():
    x = arr(4, 3, 5, 6)
    rm, rv = T(np.zeros(3, np.float32)), T(np.ones(3, np.float32))
    y = F.instance_norm(T(x), rm, rv, momentum=0.2)
    close(y, np_instance_norm(x), tol=1e-4)
    per_mean = x.astype(np.float64).mean(axis=(2, 3))
    per_var = x.astype(np.float64).var(axis=(2, 3), ddof=1)
    close(rm, 0.8 * 0 + 0.2 * per_mean.mean(0), tol=1e-5)
    close(rv, 0.8 * 1 + 0.2 * per_var.mean(0), tol=1e-5)
    # without the input's statistics, the running ones normalise
    m, v = rm.numpy().astype(np.float64), rv.numpy().astype(np.float64)
    want = (x - m.reshape(1, 3, 1, 1)) / np.sqrt(v.reshape(1, 3, 1, 1) + 1e-5)
    close(F.instance_norm(T(x), rm, rv, use_input_stats=False), want, tol=1e-4)


def test_instance_norm2d_module():
    m = nn.InstanceNorm2d(3)
    assert list(m.parameters()) == [] and m.running_mean is None
    x = arr(2, 3, 4, 4)
    close(m(T(x)), np_instance_norm(x), tol=1e-4)
    close(m(T(x[0])), np_instance_norm(x[:1])[0], tol=1e-4)  # unbatched [C, H, W]
    a = nn.InstanceNorm2d(3, affine=True)
    assert a.weight.shape == (3,) and a.bias.shape == (3,)
    with lucid.no_grad():
        a.weight.copy_(T(arr(3)))
        a.bias.copy_(T(arr(3)))
    close(a(T(x)), np_instance_norm(x, a.weight.numpy(), a.bias.numpy()), tol=1e-4)
    with pytest.raises(ValueError, match="3-D .* or 4-D"):
        m(T(arr(3, 4)))
    with pytest.raises(ValueError, match="channels"):
        a(T(arr(2, 4, 3, 3)))
    with pytest.warns(UserWarning, match="num_features"):
        z = arr(2, 4, 3, 3)
        close(m(T(z)), np_instance_norm(z), tol=1e-4)
    with pytest.raises(ValueError, match="spatial"):
        m(T(arr(2, 3, 1, 1)))
    with pytest.raises(ValueError, match="at least 3"):
        F.instance_norm(T(arr(2, 3)))


def test_instance_norm2d_tracks_running_statistics_and_uses_them_in_eval():
    m = nn.InstanceNorm2d(2, track_running_stats=True, momentum=0.5)
    assert {n for n, _ in m.named_buffers()} == {"running_mean", "running_var", "num_batches_tracked"}
    x = arr(3, 2, 4, 4, offset=2.0)
    m(T(x))
    assert m.num_batches_tracked.item() == 0  # as PyTorch's: instance norm does not count batches
    close(m.running_mean, 0.5 * x.astype(np.float64).mean(axis=(2, 3)).mean(0), tol=1e-5)
    close(m.running_var, 0.5 + 0.5 * x.astype(np.float64).var(axis=(2, 3), ddof=1).mean(0), tol=1e-5)
    m.eval()
    rm, rv = m.running_mean.numpy().astype(np.float64), m.running_var.numpy().astype(np.float64)
    z = arr(1, 2, 3, 3)
    close(m(T(z)), (z - rm.reshape(1, 2, 1, 1)) / np.sqrt(rv.reshape(1, 2, 1, 1) + 1e-5), tol=1e-4)
    assert m.num_batches_tracked.item() == 0
    nn.InstanceNorm1d(2)(T(arr(2, 2, 5)))


# ---- Dropout1d / Dropout2d -----------------------------------------------------------------------


def test_dropout2d_zeroes_whole_channels():
    lucid.manual_seed(0)
    x = np.abs(arr(16, 32, 3, 4)) + 0.5
    y = F.dropout2d(T(x), p=0.25).numpy()
    kept = y != 0
    per_channel = kept.reshape(16, 32, -1)
    assert np.all(per_channel.all(axis=2) | ~per_channel.any(axis=2)), "a channel was partly zeroed"
    chan = per_channel.all(axis=2)
    np.testing.assert_allclose(y[chan], (x / 0.75)[chan], rtol=1e-6)
    assert 0.15 < 1 - chan.mean() < 0.35
    # the masks of two calls differ
    assert not np.array_equal(chan, F.dropout2d(T(x), p=0.25).numpy().reshape(16, 32, -1).all(axis=2))


def test_dropout2d_gradient_is_the_mask():
    lucid.manual_seed(1)
    x = T(arr(4, 6, 2, 2)).requires_grad_()
    y = F.dropout2d(x, 0.5)
    y.sum().backward()
    ratio = np.where(x.numpy() != 0, y.numpy() / x.numpy(), 0)
    np.testing.assert_allclose(x.grad.numpy(), ratio, rtol=1e-5, atol=1e-6)
    assert set(np.unique(np.round(x.grad.numpy(), 5))) <= {0.0, 2.0}


def test_dropout2d_modes_and_errors():
    x = arr(2, 3, 4, 4)
    np.testing.assert_array_equal(F.dropout2d(T(x), 0.5, training=False).numpy(), x)
    np.testing.assert_array_equal(F.dropout2d(T(x), 1.0).numpy(), np.zeros_like(x))
    np.testing.assert_array_equal(F.dropout2d(T(x), 0.0).numpy(), x)
    for p in (-0.1, 1.5):
        with pytest.raises(ValueError, match="between 0 and 1"):
            F.dropout2d(T(x), p)
        with pytest.raises(ValueError, match="between 0 and 1"):
            nn.Dropout2d(p)
    m = nn.Dropout2d(0.5)
    m.eval()
    np.testing.assert_array_equal(m(T(x)).numpy(), x)
    m.train()
    lucid.manual_seed(5)
    with pytest.warns(UserWarning, match=r"3-D input .*\[N, C, L\]"):
        y = m(T(np.ones((8, 8, 3), np.float32))).numpy()  # 3-D is [N, C, L]
    assert set(np.unique(y)) <= {0.0, 2.0} and np.all((y == y[:, :, :1]))
    t = T(np.ones((4, 8, 2, 2), np.float32))
    out = nn.Dropout2d(0.5, inplace=True)(t)
    np.testing.assert_array_equal(t.numpy(), out.numpy())
    with pytest.raises(RuntimeError, match="at least 2"):
        F.dropout2d(T(arr(5)), 0.5)


def test_dropout1d():
    lucid.manual_seed(2)
    y = nn.Dropout1d(0.5)(T(np.ones((6, 10, 7), np.float32))).numpy()
    assert np.all(y == y[:, :, :1]) and set(np.unique(y)) <= {0.0, 2.0}
    y2 = F.dropout1d(T(np.ones((10, 7), np.float32)), 0.5).numpy()
    assert y2.shape == (10, 7) and np.all(y2 == y2[:, :1])
    with pytest.raises(RuntimeError, match="2-D or 3-D"):
        F.dropout1d(T(arr(2, 3, 4, 5)))


# ---- PReLU and ELU -------------------------------------------------------------------------------


def np_prelu(x, w):
    w = np.asarray(w, np.float64)
    if w.size > 1:
        w = w.reshape((-1,) + (1,) * (x.ndim - 2))
    return np.where(x > 0, x, w * x)


@pytest.mark.parametrize("shape", [(2, 3, 4, 4), (5, 3), (2, 3, 7)])
def test_prelu_matches_numpy(shape):
    x = arr(*shape)
    close(F.prelu(T(x), T(np.array([0.3], np.float32))), np_prelu(x, [0.3]))
    w = arr(3)
    close(F.prelu(T(x), T(w)), np_prelu(x, w))


def test_prelu_gradients():
    check_grads(lambda x, w: F.prelu(x, w), away_from_zero(2, 3, 2, 2), arr(3))
    check_grads(lambda x, w: F.prelu(x, w), away_from_zero(4, 2), np.array([0.2], np.float32))


def test_prelu_module_and_errors():
    m = nn.PReLU()
    assert m.weight.shape == (1,) and float(m.weight.numpy()[0]) == 0.25
    m3 = nn.PReLU(3, init=0.1)
    np.testing.assert_allclose(m3.weight.numpy(), [0.1] * 3, rtol=1e-7)
    x = arr(2, 3, 4)
    close(m3(T(x)), np_prelu(x, [0.1] * 3))
    x1 = arr(5)
    close(m(T(x1)), np_prelu(x1, [0.25]))  # 1-D input, one slope
    close(m(T(np.float32(-2.0))), -0.5)  # 0-D input
    y = m3(T(x))
    y.sum().backward()
    want = np.where(x > 0, 0, x).sum(axis=(0, 2))
    np.testing.assert_allclose(m3.weight.grad.numpy(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="channel"):
        m3(T(arr(2, 4, 5)))
    with pytest.raises(ValueError, match="num_parameters"):
        nn.PReLU(0)
    assert nn.PReLU(2, dtype=lucid.float16).weight.dtype is lucid.float16


def np_elu(x, alpha=1.0):
    x = x.astype(np.float64)
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def test_elu():
    x = np.concatenate([arr(30) * 3, [0.0, 100.0, -100.0]]).astype(np.float32)
    close(F.elu(T(x)), np_elu(x))
    close(F.elu(T(x), alpha=0.5), np_elu(x, 0.5))
    close(nn.ELU(alpha=2.0)(T(x)), np_elu(x, 2.0))
    check_grads(lambda t: F.elu(t, 1.3), away_from_zero(3, 4))
    big = T(np.array([100.0, -100.0], np.float32)).requires_grad_()
    F.elu(big).sum().backward()
    np.testing.assert_allclose(big.grad.numpy(), [1.0, 0.0], atol=1e-7)
    t = T(x.copy())
    out = F.elu(t, inplace=True)
    close(t, np_elu(x))
    close(out, np_elu(x))
    with pytest.raises(TypeError, match="alpha"):
        F.elu(T(x), alpha="1")
    assert "alpha=2.0" in repr(nn.ELU(2.0))


# ---- padding ------------------------------------------------------------------------------------


def np_pad(x, pad, mode="constant", value=0.0):
    """numpy's np.pad with torch's pad order (last dimension first) and negative pads cropping."""
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    crop = tuple(slice(max(-l, 0), x.shape[d] - max(-r, 0)) for d, (l, r) in enumerate(widths))
    x = x[crop]
    widths = [(max(l, 0), max(r, 0)) for l, r in widths]
    np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    kw = {"constant_values": value} if mode == "constant" else {}
    return np.pad(x, widths, mode=np_mode, **kw)


@pytest.mark.parametrize(
    "pad", [(1, 2), (0, 1, 2, 0), (1, 1, 1, 1, 1, 1), (2, -1), (-1, 0, 1, -2), (1, 0, 0, 0, 0, 0, 1, 1)]
)
def test_constant_pad(pad):
    x = arr(2, 3, 4, 5)
    close(F.pad(T(x), pad), np_pad(x, pad))
    close(F.pad(T(x), list(pad), "constant", 2.5), np_pad(x, pad, value=2.5))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize(
    "shape,pad",
    [
        ((2, 3, 6), (2, 3)),
        ((3, 6), (1, 0)),
        ((2, 3, 4, 5), (1, 2, 3, 0)),
        ((3, 4, 5), (2, 2, 1, 1)),
        ((1, 2, 3, 4, 5), (1, 1, 2, 1, 1, 2)),
        ((2, 3, 5, 6), (-1, 2, 1, -1)),
    ],
)
def test_reflect_replicate_circular_pad(mode, shape, pad):
    x = arr(*shape)
    close(F.pad(T(x), pad, mode), np_pad(x, pad, mode))


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_gradients(mode):
    check_grads(lambda t: F.pad(t, (2, 1, 1, 2), mode), arr(1, 2, 3, 4))


def test_pad_errors():
    x = T(arr(1, 2, 3, 3))
    with pytest.raises(ValueError, match="even"):
        F.pad(x, (1, 2, 3))
    with pytest.raises(ValueError, match="less than"):
        F.pad(x, (3, 0, 0, 0), "reflect")
    with pytest.raises(NotImplementedError, match="last 1, 2 or 3"):
        F.pad(x, (1, 1), "reflect")  # as PyTorch: a 1-D pad is for 2-D or 3-D input
    with pytest.raises(ValueError, match="value"):
        F.pad(x, (1, 1), "reflect", value=1.0)
    with pytest.raises(NotImplementedError, match="'constant', 'reflect'"):
        F.pad(x, (1, 1), "mirror")
    with pytest.raises(NotImplementedError, match="last 1, 2 or 3"):
        F.pad(T(arr(4, 4)), (1, 1, 1, 1), "reflect")
    with pytest.raises(ValueError, match="dimensions"):
        F.pad(T(arr(3)), (1, 1, 1, 1))
    with pytest.raises(ValueError, match="at most"):
        F.pad(x, (4, 0, 0, 0), "circular")
    with pytest.raises(TypeError, match="tuple"):
        F.pad(x, 2)


def test_padding_modules():
    x = arr(2, 3, 4, 5)
    close(nn.ZeroPad2d(2)(T(x)), np_pad(x, (2, 2, 2, 2)))
    close(nn.ZeroPad2d((1, 0, 2, 3))(T(x)), np_pad(x, (1, 0, 2, 3)))
    close(nn.ConstantPad2d((1, 2, 0, 1), -3.0)(T(x)), np_pad(x, (1, 2, 0, 1), value=-3.0))
    close(nn.ReflectionPad2d(2)(T(x)), np_pad(x, (2, 2, 2, 2), "reflect"))
    close(nn.ReflectionPad2d((3, 1, 0, 2))(T(x)), np_pad(x, (3, 1, 0, 2), "reflect"))
    close(nn.ReplicationPad2d((3, 1, 0, 2))(T(x)), np_pad(x, (3, 1, 0, 2), "replicate"))
    y = arr(2, 3, 6)
    close(nn.ReflectionPad1d((2, 3))(T(y)), np_pad(y, (2, 3), "reflect"))
    close(nn.ReplicationPad1d(2)(T(y)), np_pad(y, (2, 2), "replicate"))
    close(nn.ConstantPad1d(1, 4.0)(T(y)), np_pad(y, (1, 1), value=4.0))
    close(nn.ZeroPad1d((0, 2))(T(y)), np_pad(y, (0, 2)))
    assert nn.ReflectionPad2d(1).padding == (1, 1, 1, 1)
    with pytest.raises(TypeError, match="ReflectionPad2d: padding"):
        nn.ReflectionPad2d((1, 2))
    with pytest.raises(ValueError, match="less than"):
        nn.ReflectionPad2d(4)(T(x))


# ---- interpolate and Upsample -------------------------------------------------------------------


def np_nearest_index(n_in, n_out, scale=None, exact=False):
    s = np.float32(1.0 / scale) if scale is not None else np.float32(n_in / n_out)
    j = np.arange(n_out, dtype=np.float32)
    src = np.floor((j + np.float32(0.5)) * s if exact else j * s).astype(np.int64)
    return np.minimum(src, n_in - 1)


def np_linear_weights(n_in, n_out, align_corners, scale=None):
    """The interpolation matrix [n_out, n_in] of 1-D linear resampling."""
    m = np.zeros((n_out, n_in))
    for j in range(n_out):
        if align_corners:
            src = j * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            step = 1.0 / scale if scale is not None else n_in / n_out
            src = max((j + 0.5) * step - 0.5, 0.0)
        i0 = min(int(np.floor(src)), n_in - 1)
        i1 = min(i0 + 1, n_in - 1)
        lam = src - i0
        m[j, i0] += 1 - lam
        m[j, i1] += lam
    return m


def test_bilinear_known_values():
    x = T(np.array([[[[1.0, 2.0], [3.0, 4.0]]]], np.float32))
    close(
        F.interpolate(x, scale_factor=2, mode="bilinear")[0, 0],
        np.array([[1.0, 1.25, 1.75, 2.0], [1.5, 1.75, 2.25, 2.5], [2.5, 2.75, 3.25, 3.5], [3.0, 3.25, 3.75, 4.0]]),
    )
    close(
        F.interpolate(x, size=3, mode="bilinear", align_corners=True)[0, 0],
        np.array([[1.0, 1.5, 2.0], [2.0, 2.5, 3.0], [3.0, 3.5, 4.0]]),
    )
    close(F.interpolate(x, scale_factor=2)[0, 0], np.array([[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4.0]]))


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize(
    "kw",
    [
        dict(size=(7, 3)),
        dict(size=5),
        dict(scale_factor=2),
        dict(scale_factor=(1.5, 0.5)),
        dict(size=(1, 1)),
        dict(scale_factor=0.7),
    ],
)
def test_bilinear_matches_numpy(align, kw):
    x = arr(2, 3, 4, 6)
    y = F.interpolate(T(x), mode="bilinear", align_corners=align, **kw)
    oh, ow = y.shape[2:]
    sf = kw.get("scale_factor")
    sh, sw = (sf if isinstance(sf, tuple) else (sf, sf)) if sf is not None else (None, None)
    if sf is not None:
        assert (oh, ow) == (int(4 * sh), int(6 * sw))
    mh, mw = np_linear_weights(4, oh, align, sh), np_linear_weights(6, ow, align, sw)
    close(y, np.einsum("ah,nchw,bw->ncab", mh, x.astype(np.float64), mw))


@pytest.mark.parametrize("kw", [dict(size=(7, 3)), dict(scale_factor=3), dict(scale_factor=0.35), dict(size=(10, 2))])
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest_matches_numpy(kw, mode):
    x = arr(2, 3, 10, 6)
    y = F.interpolate(T(x), mode=mode, **kw)
    oh, ow = y.shape[2:]
    sf = kw.get("scale_factor")
    ih = np_nearest_index(10, oh, sf, mode == "nearest-exact")
    iw = np_nearest_index(6, ow, sf, mode == "nearest-exact")
    close(y, x[:, :, ih][:, :, :, iw])


def test_nearest_scale_factor_uses_the_factor_unless_recomputed():
    x = T(np.arange(10, dtype=np.float32).reshape(1, 1, 10))
    close(F.interpolate(x, scale_factor=0.35), [[[0, 2, 5]]])  # floor(j / 0.35)
    close(F.interpolate(x, scale_factor=0.35, recompute_scale_factor=True), [[[0, 3, 6]]])  # floor(j * 10 / 3)
    close(F.interpolate(x, size=3), [[[0, 3, 6]]])
    # an output of the input's size, or of twice it, takes PyTorch's shortcuts whatever the factor
    close(F.interpolate(x, scale_factor=1.05), x.numpy())
    y = T(np.arange(3, dtype=np.float32).reshape(1, 1, 3))
    close(F.interpolate(y, scale_factor=2.2), [[[0, 0, 1, 1, 2, 2]]])  # not floor(j / 2.2)
    close(F.interpolate(y, scale_factor=2.2, mode="nearest-exact"), [[[0, 0, 1, 1, 2, 2]]])


@pytest.mark.parametrize("align", [False, True])
def test_linear_3d(align):
    x = arr(2, 3, 5)
    y = F.interpolate(T(x), size=8, mode="linear", align_corners=align)
    close(y, np.einsum("ah,nch->nca", np_linear_weights(5, 8, align), x.astype(np.float64)))


@pytest.mark.parametrize(
    "kw", [dict(mode="bilinear", align_corners=False), dict(mode="bilinear", align_corners=True), dict(mode="nearest")]
)
def test_interpolate_gradients(kw):
    check_grads(lambda t: F.interpolate(t, size=(5, 3), **kw), arr(1, 2, 3, 4))
    check_grads(lambda t: F.interpolate(t, scale_factor=0.5, **kw), arr(1, 1, 4, 4))


def test_interpolate_errors():
    x = T(arr(1, 2, 4, 4))
    with pytest.raises(NotImplementedError, match="'nearest', 'nearest-exact', 'linear', 'bilinear'"):
        F.interpolate(x, scale_factor=2, mode="lanczos")
    with pytest.raises(ValueError, match="antialias"):
        F.interpolate(x, scale_factor=2, mode="nearest", antialias=True)
    with pytest.raises(ValueError, match="exactly one"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="exactly one"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(ValueError, match="4-D"):
        F.interpolate(T(arr(1, 2, 4)), scale_factor=2, mode="bilinear")
    with pytest.raises(ValueError, match="3-D"):
        F.interpolate(x, scale_factor=2, mode="linear")
    with pytest.raises(ValueError, match="3-D"):
        F.interpolate(T(arr(1, 2, 2, 2, 2, 2)), scale_factor=2)
    with pytest.raises(ValueError, match="2 element"):
        F.interpolate(x, size=(2, 3, 4))
    with pytest.raises(ValueError, match="positive"):
        F.interpolate(x, scale_factor=0.1)


def test_upsample_modules():
    x = arr(1, 2, 3, 4)
    close(nn.Upsample(scale_factor=2)(T(x)), x.repeat(2, axis=2).repeat(2, axis=3))
    mh, mw = np_linear_weights(3, 5, False), np_linear_weights(4, 6, False)
    close(nn.Upsample(size=(5, 6), mode="bilinear")(T(x)), np.einsum("ah,nchw,bw->ncab", mh, x, mw))
    mh, mw = np_linear_weights(3, 6, True), np_linear_weights(4, 8, True)
    close(nn.UpsamplingBilinear2d(scale_factor=2)(T(x)), np.einsum("ah,nchw,bw->ncab", mh, x, mw))
    close(nn.UpsamplingNearest2d(size=(6, 8))(T(x)), x.repeat(2, axis=2).repeat(2, axis=3))
    assert "scale_factor=2.0" in repr(nn.Upsample(scale_factor=2))


# ---- SmoothL1Loss and HuberLoss -----------------------------------------------------------------


def np_smooth_l1(x, y, beta):
    d = np.abs(x.astype(np.float64) - y)
    return np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta) if beta > 0 else d


def np_huber(x, y, delta):
    d = np.abs(x.astype(np.float64) - y)
    return np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta))


@pytest.mark.parametrize("beta", [1.0, 0.3, 2.0, 0.0])
def test_smooth_l1_loss(beta):
    x, y = arr(4, 5) * 2, arr(4, 5)
    want = np_smooth_l1(x, y, beta)
    close(F.smooth_l1_loss(T(x), T(y), beta=beta), want.mean())
    close(F.smooth_l1_loss(T(x), T(y), reduction="sum", beta=beta), want.sum(), tol=1e-4)
    close(F.smooth_l1_loss(T(x), T(y), reduction="none", beta=beta), want)
    close(nn.SmoothL1Loss(beta=beta)(T(x), T(y)), want.mean())
    close(nn.SmoothL1Loss(reduction="none", beta=beta)(T(x), T(y)), want)


@pytest.mark.parametrize("delta", [1.0, 0.3, 2.5])
def test_huber_loss(delta):
    x, y = arr(4, 5) * 2, arr(4, 5)
    want = np_huber(x, y, delta)
    close(F.huber_loss(T(x), T(y), delta=delta), want.mean())
    close(F.huber_loss(T(x), T(y), reduction="sum", delta=delta), want.sum(), tol=1e-4)
    close(nn.HuberLoss(reduction="none", delta=delta)(T(x), T(y)), want)
    close(nn.HuberLoss(delta=delta)(T(x), T(y)), np_smooth_l1(x, y, delta).mean() * delta)


def test_smooth_l1_and_huber_gradients():
    x = arr(3, 4) * 2
    y = x + np.where(rng.random((3, 4)) < 0.5, -1, 1) * (0.2 + rng.random((3, 4)) * 2).astype(np.float32)
    y = y.astype(np.float32)
    # |x - y| is kept clear of beta = delta = 1 and of 0
    y = np.where(np.abs(np.abs(x - y) - 1.0) < 0.1, y + 0.3, y).astype(np.float32)
    check_grads(lambda a, b: F.smooth_l1_loss(a, b, reduction="sum"), x, y)
    check_grads(lambda a, b: F.huber_loss(a, b, reduction="none", delta=1.0), x, y)
    check_grads(lambda a, b: F.smooth_l1_loss(a, b, beta=0.0), x, y)


def test_smooth_l1_and_huber_errors():
    x = T(arr(3))
    with pytest.raises(ValueError, match="beta"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(ValueError, match="beta"):
        nn.SmoothL1Loss(beta=-1.0)
    with pytest.raises(ValueError, match="delta"):
        F.huber_loss(x, x, delta=0.0)
    with pytest.raises(ValueError, match="delta"):
        nn.HuberLoss(delta=-2)
    with pytest.raises(ValueError, match="reduction"):
        F.smooth_l1_loss(x, x, reduction="avg")
    with pytest.raises(TypeError, match="target"):
        F.huber_loss(x, np.zeros(3))


def test_smooth_l1_loss_legacy_reduction_flags():
    x, y = arr(3, 4), arr(3, 4)
    want = np_smooth_l1(x, y, 1.0)
    with pytest.warns(UserWarning, match="deprecated"):
        close(F.smooth_l1_loss(T(x), T(y), size_average=False), want.sum(), tol=1e-4)
    with pytest.warns(UserWarning, match="deprecated"):
        close(F.smooth_l1_loss(T(x), T(y), None, False), want)
    with pytest.warns(UserWarning, match="deprecated"):
        close(nn.SmoothL1Loss(size_average=True)(T(x), T(y)), want.mean())
    with pytest.warns(UserWarning, match="deprecated"):
        assert nn.SmoothL1Loss(reduce=False).reduction == "none"


# ---- EmbeddingBag --------------------------------------------------------------------------------


def np_bags(weight, idx, starts, ends, mode, psw=None, padding_idx=None):
    out = []
    for s, e in zip(starts, ends):
        members = [i for i in range(s, e) if idx[i] != padding_idx]
        rows = weight[idx[members]].astype(np.float64)
        if psw is not None:
            rows = rows * psw[members, None]
        if not members:
            out.append(np.zeros(weight.shape[1]))
        elif mode == "sum":
            out.append(rows.sum(0))
        elif mode == "mean":
            out.append(rows.mean(0))
        else:
            out.append(rows.max(0))
    return np.array(out)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_with_offsets(mode):
    w = arr(10, 4)
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0])
    offs = np.array([0, 2, 2, 6])
    close(F.embedding_bag(T(idx), T(w), T(offs), mode=mode), np_bags(w, idx, offs, [2, 2, 6, 9], mode))
    close(
        F.embedding_bag(T(idx), T(w), T(np.append(offs, 9)), mode=mode, include_last_offset=True),
        np_bags(w, idx, offs, [2, 2, 6, 9], mode),
    )
    close(
        F.embedding_bag(T(idx), T(w), T(offs), mode=mode, padding_idx=4),
        np_bags(w, idx, offs, [2, 2, 6, 9], mode, padding_idx=4),
    )


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_and_module(mode):
    lucid.manual_seed(3)
    m = nn.EmbeddingBag(7, 3, mode=mode)
    assert m.weight.shape == (7, 3)
    idx = rng.integers(0, 7, (4, 5))
    w = m.weight.numpy()
    close(m(T(idx)), np_bags(w, idx.reshape(-1), range(0, 20, 5), range(5, 21, 5), mode))
    flat = idx.reshape(-1)
    close(m(T(flat), T(np.array([0, 3, 11]))), np_bags(w, flat, [0, 3, 11], [3, 11, 20], mode))


def test_embedding_bag_per_sample_weights_and_gradients():
    w = arr(6, 3)
    idx = np.array([0, 2, 2, 5, 1])
    offs = np.array([0, 3])
    psw = arr(5)
    close(
        F.embedding_bag(T(idx), T(w), T(offs), mode="sum", per_sample_weights=T(psw)),
        np_bags(w, idx, offs, [3, 5], "sum", psw),
    )
    for mode in ("sum", "mean", "max"):
        check_grads(lambda t: F.embedding_bag(T(idx), t, T(offs), mode=mode), w)
    check_grads(lambda t, p: F.embedding_bag(T(idx), t, T(offs), mode="sum", per_sample_weights=p), w, psw)


def test_embedding_bag_errors():
    w = T(arr(5, 2))
    with pytest.raises(ValueError, match="mode"):
        F.embedding_bag(T(np.array([0, 1])), w, T(np.array([0])), mode="median")
    with pytest.raises(ValueError, match="offsets"):
        F.embedding_bag(T(np.array([0, 1])), w)
    with pytest.raises(ValueError, match="offsets"):
        F.embedding_bag(T(np.array([[0, 1]])), w, T(np.array([0])))
    with pytest.raises(ValueError, match="offsets must start at 0"):
        F.embedding_bag(T(np.array([0, 1])), w, T(np.array([1])))
    with pytest.raises(IndexError, match=r"\[0, 5\)"):
        F.embedding_bag(T(np.array([0, 5])), w, T(np.array([0])))
    with pytest.raises(NotImplementedError, match="per_sample_weights"):
        F.embedding_bag(T(np.array([0, 1])), w, T(np.array([0])), mode="mean", per_sample_weights=T(arr(2)))
    with pytest.raises(NotImplementedError, match="sparse"):
        nn.EmbeddingBag(5, 2, sparse=True)
    with pytest.raises(ValueError, match="max mode"):
        F.embedding_bag(T(np.array([0, 1])), w, T(np.array([0])), mode="max", scale_grad_by_freq=True)
    with pytest.raises(ValueError, match="mode"):
        nn.EmbeddingBag(5, 2, mode="min")


# ---- Module hooks and the rest ------------------------------------------------------------------


class Affine(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(T(np.array([2.0], np.float32)))

    def forward(self, x, shift=0.0):
        return x * self.scale + shift


def test_forward_pre_hook_can_replace_the_input():
    m = Affine()
    seen = []
    h = m.register_forward_pre_hook(lambda mod, args: seen.append((mod, args)) or (args[0] + 1,))
    x = T(np.array([1.0, 2.0], np.float32))
    close(m(x), [4.0, 6.0])
    assert seen[0][0] is m and isinstance(seen[0][1], tuple) and seen[0][1][0] is x
    h2 = m.register_forward_pre_hook(lambda mod, args: args[0] * 10)  # a non-tuple is the one argument
    close(m(x), [40.0, 60.0])
    h.remove()
    close(m(x), [20.0, 40.0])
    h2.remove()
    h2.remove()  # a second remove does nothing
    close(m(x), [2.0, 4.0])


def test_forward_hook_can_replace_the_output_and_hooks_run_in_order():
    m = Affine()
    order = []
    h1 = m.register_forward_hook(lambda mod, args, out: order.append("a"))
    h2 = m.register_forward_hook(lambda mod, args, out: (order.append("b"), out + 100)[1])
    h3 = m.register_forward_hook(lambda mod, args, out: order.append("c"), prepend=True)
    x = T(np.array([1.0], np.float32))
    close(m(x), [102.0])
    assert order == ["c", "a", "b"]
    for h in (h1, h2, h3):
        h.remove()
    order.clear()
    close(m(x), [2.0])
    assert order == []
    with m.register_forward_hook(lambda mod, args, out: out * 0):
        close(m(x), [0.0])
    close(m(x), [2.0])


def test_hooks_with_kwargs_and_gradients_through_hooks():
    m = Affine()
    m.register_forward_pre_hook(
        lambda mod, args, kwargs: (args, {"shift": kwargs.get("shift", 0.0) + 1.0}), with_kwargs=True
    )
    got = []
    m.register_forward_hook(lambda mod, args, kwargs, out: got.append(dict(kwargs)), with_kwargs=True)
    x = T(np.array([1.0], np.float32))
    close(m(x, shift=3.0), [6.0])
    assert got == [{"shift": 4.0}]
    m.register_forward_hook(lambda mod, args, out: out * out)
    y = m(x)
    y.sum().backward()
    # y = (2x + 1)**2 with scale = 2: dy/dscale = 2 (scale x + 1) x = 6
    np.testing.assert_allclose(m.scale.grad.numpy(), [6.0])
    with pytest.raises(TypeError, match="callable"):
        m.register_forward_hook(3)
    with pytest.raises(TypeError, match="callable"):
        m.register_forward_pre_hook(None)


def test_always_call_forward_hooks_run_when_forward_raises():
    m = Affine()
    calls = []
    m.register_forward_hook(lambda mod, args, out: calls.append(("always", out)), always_call=True)
    m.register_forward_hook(lambda mod, args, out: calls.append(("normal", out)))
    with pytest.raises(TypeError):
        m("not a tensor", "nor a shift")
    assert calls == [("always", None)]
    calls.clear()
    x = T(np.array([1.0], np.float32))
    m(x)
    assert [c[0] for c in calls] == ["always", "normal"]


def test_hooks_in_sequential_submodules():
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    shapes = []
    for layer in seq:
        layer.register_forward_hook(lambda mod, args, out: shapes.append(tuple(out.shape)))
    seq(T(arr(5, 3)))
    assert shapes == [(5, 4), (5, 4), (5, 2)]


def test_hooks_on_a_module_whose_state_predates_them():
    m = nn.Linear(2, 2)
    for name in ("_forward_pre_hooks", "_forward_hooks", "_hooks_with_kwargs"):
        del m.__dict__[name]
    x = T(arr(1, 2))
    close(m(x), x.numpy() @ m.weight.numpy().T + m.bias.numpy())
    m.register_forward_hook(lambda mod, args, out: out * 0)
    close(m(x), np.zeros((1, 2)))


def test_add_module():
    m = nn.Module()
    lin = nn.Linear(2, 3)
    m.add_module("fc", lin)
    assert m.fc is lin and [n for n, _ in m.named_parameters()] == ["fc.weight", "fc.bias"]
    m.register_module("act", nn.ReLU())
    assert [n for n, _ in m.named_children()] == ["fc", "act"]
    m.add_module("empty", None)
    assert m.empty is None and [n for n, _ in m.named_modules()] == ["", "fc", "act"]
    assert list(m.state_dict()) == ["fc.weight", "fc.bias"]
    m.train(False)
    assert not lin.training
    with pytest.raises(KeyError, match="already exists"):
        m.add_module("training", nn.ReLU())
    with pytest.raises(KeyError, match="'.'"):
        m.add_module("a.b", nn.ReLU())
    with pytest.raises(TypeError, match="not a Module"):
        m.add_module("x", 3)
    with pytest.raises(TypeError, match="string"):
        m.add_module(1, nn.ReLU())


def test_cpu_and_share_memory():
    m = nn.Linear(3, 2)
    assert m.cpu() is m and m.weight.device == "cpu"
    assert m.share_memory() is m


def test_load_state_dict_assign():
    src, dst = nn.Linear(3, 2), nn.Linear(3, 2)
    sd = {k: v.clone() for k, v in src.state_dict().items()}
    old_weight = dst.weight
    assert dst.load_state_dict(sd, assign=True) == ([], [])
    assert isinstance(dst.weight, nn.Parameter) and dst.weight is not old_weight and dst.weight.requires_grad
    np.testing.assert_array_equal(dst.weight.numpy(), src.weight.numpy())
    with lucid.no_grad():
        sd["weight"].fill_(7.0)
    assert float(dst.weight.numpy()[0, 0]) == 7.0  # the module holds the given tensor itself
    # without assign the values are copied into the module's own tensors
    own = nn.Linear(3, 2)
    w = own.weight
    own.load_state_dict(src.state_dict())
    assert own.weight is w
    np.testing.assert_array_equal(w.numpy(), src.weight.numpy())
    # buffers are assigned too, and a frozen parameter stays frozen
    bn = nn.BatchNorm1d(2)
    bn.weight.requires_grad_(False)
    state = {k: v.clone() for k, v in nn.BatchNorm1d(2).state_dict().items()}
    bn.load_state_dict(state, assign=True)
    assert bn.running_mean is state["running_mean"] and not bn.weight.requires_grad
    with pytest.raises(ValueError, match="shape"):
        dst.load_state_dict({"weight": T(arr(2, 2)), "bias": T(arr(2))}, assign=True)


def test_new_names_are_exported():
    names = [
        "RMSNorm",
        "InstanceNorm1d",
        "InstanceNorm2d",
        "Dropout1d",
        "Dropout2d",
        "PReLU",
        "ELU",
        "Upsample",
        "UpsamplingNearest2d",
        "UpsamplingBilinear2d",
        "ConstantPad1d",
        "ConstantPad2d",
        "ZeroPad1d",
        "ZeroPad2d",
        "ReflectionPad1d",
        "ReflectionPad2d",
        "ReplicationPad1d",
        "ReplicationPad2d",
        "SmoothL1Loss",
        "HuberLoss",
        "EmbeddingBag",
    ]
    for n in names:
        assert n in nn.__all__ and issubclass(getattr(nn, n), nn.Module)
    for f in (
        "rms_norm",
        "dropout1d",
        "dropout2d",
        "instance_norm",
        "prelu",
        "pad",
        "elu",
        "smooth_l1_loss",
        "huber_loss",
        "interpolate",
        "embedding_bag",
    ):
        assert callable(getattr(F, f))


@pytest.mark.filterwarnings("ignore::lucid.metal.MetalFallbackWarning")
@pytest.mark.parametrize(
    "name,fn,shapes",
    [
        ("rms_norm", lambda x, w: F.rms_norm(x, (5,), w), [(2, 3, 4, 5), (5,)]),
        ("instance_norm", lambda x, w: F.instance_norm(x, weight=w), [(2, 3, 4, 5), (3,)]),
        ("prelu", lambda x, w: F.prelu(x, w), [(2, 3, 4, 5), (3,)]),
        ("pad", lambda x: F.pad(x, (2, 1, 1, 3), "reflect"), [(2, 3, 4, 5)]),
        ("pad_constant", lambda x: F.pad(x, (2, 1, 1, 3), value=1.5), [(2, 3, 4, 5)]),
        ("bilinear", lambda x: F.interpolate(x, size=(7, 3), mode="bilinear"), [(2, 3, 4, 5)]),
        ("nearest", lambda x: F.interpolate(x, scale_factor=1.5), [(2, 3, 4, 5)]),
        ("elu", lambda x: F.elu(x), [(2, 3, 4, 5)]),
        ("huber", lambda x, y: F.huber_loss(x, y, reduction="none"), [(2, 3, 4, 5), (2, 3, 4, 5)]),
        (
            "embedding_bag",
            lambda w: F.embedding_bag(
                T(np.array([0, 2, 1, 4, 4]), device=w.device), w, T(np.array([0, 2]), device=w.device)
            ),
            [(5, 3)],
        ),
    ],
)
def test_metal_matches_cpu_values_and_gradients(name, fn, shapes):
    arrays = [arr(*s) for s in shapes]
    results = {}
    for device in ("cpu", "metal"):
        leaves = [T(a, device=device).requires_grad_() for a in arrays]
        out = fn(*leaves)
        assert out.device == device
        (out * out).sum().backward()
        results[device] = (out.numpy(), [t.grad.numpy() for t in leaves])
    np.testing.assert_allclose(results["metal"][0], results["cpu"][0], rtol=1e-4, atol=1e-4)
    for g_metal, g_cpu in zip(results["metal"][1], results["cpu"][1]):
        np.testing.assert_allclose(g_metal, g_cpu, rtol=1e-3, atol=1e-3)
