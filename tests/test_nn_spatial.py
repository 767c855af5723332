"""lucid.nn's spatial functions and layers: convolutions (1-, 2-, 3-D and transposed, padding
'same'), pooling (max with indices, average, adaptive, LP, fractional), max-unpooling, unfold and
fold, channel shuffle, padding layers, resampling and attention. Values against numpy loops,
gradients against central finite differences, errors by type and message."""

import itertools
import math

import numpy as np
import pytest

import lucid
import lucid.nn as nn
import lucid.nn.functional as F
from _helpers import DEVICES, T, numeric_grads

pytestmark = pytest.mark.filterwarnings("ignore::lucid.metal.MetalFallbackWarning")

rng = np.random.default_rng(7)


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


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


def distinct(*shape):
    """Values far enough apart that a max over a window has one clear winner (for finite
    differences of max pooling)."""
    n = math.prod(shape)
    return (rng.permutation(n).astype(np.float32) * 0.1).reshape(shape)


# ---- numpy references ----------------------------------------------------------------------------


def np_conv(x, w, b, stride, pad, dil, groups):
    """Direct cross-correlation of x [N, C, *S] by w [O, C/g, *k] (float64 loops)."""
    k = x.ndim - 2
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p, p) for p in pad])
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    ks = w.shape[2:]
    outs = [(x.shape[2 + d] - dil[d] * (ks[d] - 1) - 1) // stride[d] + 1 for d in range(k)]
    y = np.zeros((n, o, *outs))
    for oc in range(o):
        g = oc // (o // groups)
        for pos in np.ndindex(*outs):
            sl = tuple(
                slice(pos[d] * stride[d], pos[d] * stride[d] + dil[d] * (ks[d] - 1) + 1, dil[d]) for d in range(k)
            )
            patch = x[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            y[(slice(None), oc) + pos] = (patch * w[oc]).reshape(n, -1).sum(1)
        if b is not None:
            y[:, oc] += b[oc]
    return y


def np_conv_transpose(x, w, b, stride, pad, outpad, dil, groups):
    """The transpose of a convolution by its definition: every input value spreads its kernel."""
    k = x.ndim - 2
    n, c = x.shape[:2]
    og = w.shape[1]
    ks = w.shape[2:]
    full = [(x.shape[2 + d] - 1) * stride[d] + dil[d] * (ks[d] - 1) + 1 + outpad[d] for d in range(k)]
    y = np.zeros((n, og * groups, *full))
    for ic in range(c):
        g = ic // (c // groups)
        for pos in np.ndindex(*x.shape[2:]):
            for kp in np.ndindex(*ks):
                at = tuple(pos[d] * stride[d] + kp[d] * dil[d] for d in range(k))
                y[(slice(None), slice(g * og, (g + 1) * og)) + at] += (
                    x[(slice(None), ic) + pos][:, None] * w[(ic, slice(None)) + kp]
                )
    crop = tuple(slice(p, f - p) for p, f in zip(pad, full))
    y = y[(slice(None), slice(None)) + crop]
    if b is not None:
        y = y + b.reshape(-1, *([1] * k))
    return y


def np_pool(x, kernel, stride, pad, dil, ceil_mode, kind, count_include_pad=True, divisor=None):
    """Max (value, flat index) or average pooling by loops over the windows."""
    k = x.ndim - 2
    sizes = x.shape[2:]
    outs = []
    for n, kk, s, p, d in zip(sizes, kernel, stride, pad, dil):
        span = n + 2 * p - d * (kk - 1) - 1
        o = (span + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (o - 1) * s >= n + p:
            o -= 1
        outs.append(o)
    y = np.zeros(x.shape[:2] + tuple(outs))
    idx = np.zeros(x.shape[:2] + tuple(outs), np.int64)
    for nc in np.ndindex(*x.shape[:2]):
        for pos in np.ndindex(*outs):
            best, at, total, count = -np.inf, None, 0.0, 1
            for d in range(k):
                start = pos[d] * stride[d] - pad[d]
                end = min(start + kernel[d], sizes[d] + pad[d])
                count *= (end - start) if count_include_pad else (min(end, sizes[d]) - max(start, 0))
            for kp in np.ndindex(*kernel):
                q = tuple(pos[d] * stride[d] - pad[d] + kp[d] * dil[d] for d in range(k))
                if all(0 <= q[d] < sizes[d] for d in range(k)):
                    v = x[nc + q]
                    total += v
                    if v > best:
                        best, at = v, int(np.ravel_multi_index(q, sizes))
            y[nc + pos] = best if kind == "max" else total / (divisor or count)
            idx[nc + pos] = at if at is not None else 0
    return (y, idx) if kind == "max" else y


def np_adaptive(x, outs, kind):
    sizes = x.shape[2:]
    y = np.zeros(x.shape[:2] + tuple(outs))
    idx = np.zeros(x.shape[:2] + tuple(outs), np.int64)
    for pos in np.ndindex(*outs):
        sl = tuple(
            slice(pos[d] * sizes[d] // outs[d], -(-(pos[d] + 1) * sizes[d] // outs[d])) for d in range(len(outs))
        )
        for nc in np.ndindex(*x.shape[:2]):
            win = x[nc + sl]
            if kind == "max":
                j = np.unravel_index(int(np.argmax(win)), win.shape)
                y[nc + pos] = win[j]
                idx[nc + pos] = np.ravel_multi_index(tuple(s.start + jj for s, jj in zip(sl, j)), sizes)
            else:
                y[nc + pos] = win.astype(np.float64).mean()
    return (y, idx) if kind == "max" else y


# ---- convolution ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stride,pad,dil,groups", [(1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 2), ((1, 2, 1), (1, 0, 2), 1, 2)]
)
def test_conv3d_matches_numpy_and_gradients(stride, pad, dil, groups):
    x, w, b = arr(2, 4, 5, 6, 5), arr(6, 4 // groups, 2, 3, 2), arr(6)
    st, pd, dl = ((v,) * 3 if isinstance(v, int) else v for v in (stride, pad, dil))
    close(F.conv3d(T(x), T(w), T(b), stride, pad, dil, groups), np_conv(x, w, b, st, pd, dl, groups), 1e-4)
    xs, ws = arr(1, 2, 3, 4, 3), arr(2, 2 // groups if groups == 1 else 1, 2, 2, 2)
    check_grads(lambda a, c: F.conv3d(a, c, None, stride, pad, dil, 1 if ws.shape[1] == 2 else 2), xs, ws)


@pytest.mark.parametrize("fn,k", [(F.conv1d, 1), (F.conv2d, 2), (F.conv3d, 3)])
@pytest.mark.parametrize("kernel,dil", [(3, 1), (4, 1), (2, 3)])
def test_conv_padding_same_keeps_the_size(fn, k, kernel, dil):
    x, w = arr(2, 3, *([7] * k)), arr(4, 3, *([kernel] * k))
    total = dil * (kernel - 1)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(total // 2, total - total // 2)] * k)
    want = np_conv(xp, w, None, (1,) * k, (0,) * k, (dil,) * k, 1)
    got = fn(T(x), T(w), None, 1, "same", dil)
    assert got.shape == x.shape[:1] + (4,) + x.shape[2:]
    close(got, want, 1e-4)
    close(fn(T(x), T(w), None, 1, "valid", dil), np_conv(x, w, None, (1,) * k, (0,) * k, (dil,) * k, 1), 1e-4)
    if k < 3:
        check_grads(lambda a, c: fn(a, c, None, 1, "same", dil), arr(1, 3, *([5] * k)), arr(2, 3, *([kernel] * k)))


def test_conv_padding_same_refuses_strides():
    with pytest.raises(ValueError, match="strided"):
        F.conv3d(T(arr(1, 1, 4, 4, 4)), T(arr(1, 1, 2, 2, 2)), None, 2, "same")
    with pytest.raises(ValueError, match="strided"):
        F.conv1d(T(arr(1, 1, 4)), T(arr(1, 1, 2)), None, 2, "same")


@pytest.mark.parametrize("fn,k", [(F.conv_transpose1d, 1), (F.conv_transpose3d, 3)])
@pytest.mark.parametrize(
    "stride,pad,outpad,dil,groups", [(1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (2, 0, 0, 2, 2), (3, 2, 2, 1, 2)]
)
def test_conv_transpose_matches_numpy_and_gradients(fn, k, stride, pad, outpad, dil, groups):
    x, w, b = arr(2, 4, *([3] * k)), arr(4, 3, *([2] * k)), arr(3 * groups)
    want = np_conv_transpose(x, w, b, (stride,) * k, (pad,) * k, (outpad,) * k, (dil,) * k, groups)
    close(fn(T(x), T(w), T(b), stride, pad, outpad, groups, dil), want, 1e-4)
    check_grads(
        lambda a, c, d: fn(a, c, d, stride, pad, outpad, groups, dil),
        arr(1, 2, *([2] * k)),
        arr(2, 1, *([2] * k)),
        arr(groups),
    )


def test_conv_unbatched_inputs():
    x, w = arr(3, 4, 4, 4), arr(2, 3, 2, 2, 2)
    close(F.conv3d(T(x), T(w)), np_conv(x[None], w, None, (1,) * 3, (0,) * 3, (1,) * 3, 1)[0], 1e-4)
    x1, w1 = arr(4, 5), arr(4, 2, 3)
    close(F.conv_transpose1d(T(x1), T(w1)), np_conv_transpose(x1[None], w1, None, (1,), (0,), (0,), (1,), 1)[0], 1e-4)


def test_conv_errors():
    with pytest.raises(RuntimeError, match="channels"):
        F.conv3d(T(arr(1, 3, 4, 4, 4)), T(arr(2, 2, 2, 2, 2)))
    with pytest.raises(RuntimeError, match="5-D weight"):
        F.conv3d(T(arr(1, 3, 4, 4, 4)), T(arr(2, 3, 2, 2)))
    with pytest.raises(ValueError, match="4-D .* or 5-D"):
        F.conv3d(T(arr(3, 4, 4)), T(arr(2, 3, 2, 2, 2)))
    with pytest.raises(RuntimeError, match="dtype"):
        F.conv3d(T(arr(1, 3, 4, 4, 4)), T(arr(2, 3, 2, 2, 2)).double())
    with pytest.raises(RuntimeError, match="larger than"):
        F.conv3d(T(arr(1, 3, 2, 2, 2)), T(arr(2, 3, 3, 3, 3)))
    with pytest.raises(ValueError, match="output_padding"):
        F.conv_transpose3d(T(arr(1, 2, 2, 2, 2)), T(arr(2, 1, 2, 2, 2)), stride=1, output_padding=1)
    with pytest.raises(ValueError, match="padding must be"):
        F.conv3d(T(arr(1, 3, 4, 4, 4)), T(arr(2, 3, 2, 2, 2)), padding="full")
    with pytest.raises(TypeError, match="stride"):
        F.conv3d(T(arr(1, 3, 4, 4, 4)), T(arr(2, 3, 2, 2, 2)), stride="2")


# ---- pooling -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn,k", [(F.max_pool1d, 1), (F.max_pool2d, 2), (F.max_pool3d, 3)])
@pytest.mark.parametrize(
    "kernel,stride,pad,dil,ceil", [(2, None, 0, 1, False), (3, 2, 1, 1, True), (2, 1, 1, 2, False), (3, 2, 0, 1, True)]
)
def test_max_pool_values_indices_and_gradients(fn, k, kernel, stride, pad, dil, ceil):
    x = distinct(2, 3, *([7, 6, 5][:k]))
    st = kernel if stride is None else stride
    want, want_idx = np_pool(x, (kernel,) * k, (st,) * k, (pad,) * k, (dil,) * k, ceil, "max")
    got, idx = fn(T(x), kernel, stride, pad, dil, ceil, return_indices=True)
    close(got, want)
    assert idx.dtype == lucid.int64
    np.testing.assert_array_equal(idx.numpy(), want_idx)
    close(fn(T(x), kernel, stride, pad, dil, ceil), want)
    check_grads(lambda a: fn(a, kernel, stride, pad, dil, ceil), distinct(1, 2, *([5, 4, 4][:k])))


def test_max_pool_unbatched_and_padding_limit():
    x = distinct(3, 6, 5)
    got, idx = F.max_pool2d(T(x), 2, return_indices=True)
    want, want_idx = np_pool(x[None], (2, 2), (2, 2), (0, 0), (1, 1), False, "max")
    close(got, want[0])
    np.testing.assert_array_equal(idx.numpy(), want_idx[0])
    with pytest.raises(ValueError, match="at most half"):
        F.max_pool3d(T(arr(1, 1, 4, 4, 4)), 2, padding=2)
    with pytest.raises(RuntimeError, match="too small"):
        F.max_pool1d(T(arr(1, 1, 2)), 3)
    with pytest.raises(ValueError, match="2-D .* or 3-D"):
        F.max_pool1d(T(arr(4)), 2)


@pytest.mark.parametrize("fn,k", [(F.avg_pool1d, 1), (F.avg_pool2d, 2), (F.avg_pool3d, 3)])
@pytest.mark.parametrize(
    "kernel,stride,pad,ceil,include",
    [(2, None, 0, False, True), (3, 2, 1, True, True), (3, 2, 1, True, False), (2, 3, 1, False, False)],
)
def test_avg_pool_values_and_gradients(fn, k, kernel, stride, pad, ceil, include):
    x = arr(2, 3, *([7, 6, 5][:k]))
    st = kernel if stride is None else stride
    want = np_pool(x, (kernel,) * k, (st,) * k, (pad,) * k, (1,) * k, ceil, "avg", include)
    close(fn(T(x), kernel, stride, pad, ceil, include), want)
    check_grads(lambda a: fn(a, kernel, stride, pad, ceil, include), arr(1, 2, *([5, 4, 4][:k])))


def test_avg_pool_divisor_override():
    x = arr(1, 2, 5, 5, 4)
    want = np_pool(x, (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False, "avg", True, -3)
    close(F.avg_pool3d(T(x), 2, divisor_override=-3), want)
    close(
        F.avg_pool2d(T(x[0]), 2, divisor_override=-3),
        np_pool(x[0], (2, 2), (2, 2), (0, 0), (1, 1), False, "avg", True, -3),
    )
    with pytest.raises(ValueError, match="divisor_override"):
        F.avg_pool3d(T(x), 2, divisor_override=0)


@pytest.mark.parametrize("k,out", [(1, (3,)), (1, (7,)), (2, (3, 2)), (2, (4, None)), (3, (2, 3, 1)), (3, (5, 4, 3))])
def test_adaptive_pools(k, out):
    x = distinct(2, 3, *([7, 6, 5][:k]))
    outs = tuple(n if o is None else o for n, o in zip(x.shape[2:], out))
    avg = getattr(F, f"adaptive_avg_pool{k}d")
    mx = getattr(F, f"adaptive_max_pool{k}d")
    arg = out[0] if k == 1 else out
    close(avg(T(x), arg), np_adaptive(x, outs, "avg"))
    want, want_idx = np_adaptive(x, outs, "max")
    got, idx = mx(T(x), arg, return_indices=True)
    close(got, want)
    np.testing.assert_array_equal(idx.numpy(), want_idx)
    small = distinct(1, 2, *([5, 4, 4][:k]))
    check_grads(lambda a: avg(a, arg if k == 1 else tuple(2 if o is None else min(o, 3) for o in out)), small)
    check_grads(lambda a: mx(a, 3 if k == 1 else (3,) * k), small)


def test_adaptive_pool_errors():
    with pytest.raises(ValueError, match="output_size"):
        F.adaptive_max_pool3d(T(arr(1, 1, 4, 4, 4)), (2, 2))
    with pytest.raises(RuntimeError, match="non-zero"):
        F.adaptive_avg_pool1d(T(arr(1, 2, 0)), 2)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("p", [2.0, 3.0])
def test_lp_pool(k, p):
    x = np.abs(arr(2, 3, *([6, 5, 4][:k]))) + 0.1
    fn = getattr(F, f"lp_pool{k}d")
    kernel = (2, 3, 2)[:k]
    summed = np_pool(x.astype(np.float64) ** p, kernel, kernel, (0,) * k, (1,) * k, False, "avg") * math.prod(kernel)
    close(fn(T(x), p, kernel), summed ** (1 / p), 1e-4)
    check_grads(lambda a: fn(a, p, kernel), np.abs(arr(1, 2, *([4, 4, 4][:k]))) + 0.5)


def np_fractional_starts(u, n, o, k):
    alpha = np.float32(n - k) / np.float32(o - 1) if o > 1 else np.float32(0)
    seq = [
        int(np.float32((np.float32(i) + np.float32(u)) * alpha)) - int(np.float32(np.float32(u) * alpha))
        for i in range(o - 1)
    ]
    return seq + [n - k]


@pytest.mark.parametrize("k", [2, 3])
def test_fractional_max_pool_with_samples(k):
    x = distinct(2, 3, *([9, 8, 7][:k]))
    kernel = (2, 3, 2)[:k]
    outs = (4, 3, 3)[:k]
    u = rng.random((2, 3, k)).astype(np.float32)
    fn = getattr(F, f"fractional_max_pool{k}d")
    got, idx = fn(T(x), kernel, output_size=outs, return_indices=True, _random_samples=T(u))
    assert got.shape == (2, 3) + outs and idx.dtype == lucid.int64
    for b, c in itertools.product(range(2), range(3)):
        # 2-D samples are (w, h); 3-D ones (t, h, w)
        order = [1, 0] if k == 2 else [0, 1, 2]
        starts = [np_fractional_starts(u[b, c, order[d]], x.shape[2 + d], outs[d], kernel[d]) for d in range(k)]
        for pos in np.ndindex(*outs):
            sl = tuple(slice(starts[d][pos[d]], starts[d][pos[d]] + kernel[d]) for d in range(k))
            win = x[(b, c) + sl]
            assert got.numpy()[(b, c) + pos] == win.max()
            j = np.unravel_index(int(np.argmax(win)), win.shape)
            assert idx.numpy()[(b, c) + pos] == np.ravel_multi_index(
                tuple(s.start + jj for s, jj in zip(sl, j)), x.shape[2:]
            )
    ratio = fn(T(x), kernel, output_ratio=0.5)
    assert ratio.shape == (2, 3) + tuple(int(n * 0.5) for n in x.shape[2:])
    check_grads(lambda a: fn(a, 2, output_size=(2,) * k, _random_samples=T(u[:1, :2])), distinct(1, 2, *([5] * k)))


def test_fractional_max_pool_errors():
    with pytest.raises(ValueError, match="exactly one"):
        F.fractional_max_pool2d(T(arr(1, 1, 6, 6)), 2)
    with pytest.raises(ValueError, match="too large"):
        F.fractional_max_pool2d(T(arr(1, 1, 6, 6)), 3, output_size=5)
    with pytest.raises(ValueError, match="_random_samples"):
        F.fractional_max_pool3d(T(arr(1, 1, 6, 6, 6)), 2, output_size=3, _random_samples=T(arr(1, 1, 2)))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_max_unpool_inverts_max_pool(k):
    x = distinct(2, 3, *([6, 4, 4][:k]))
    pool, unpool = getattr(F, f"max_pool{k}d"), getattr(F, f"max_unpool{k}d")
    v, i = pool(T(x), 2, return_indices=True)
    y = unpool(v, i, 2)
    want = np.zeros(x.shape[:2] + tuple((n // 2) * 2 for n in x.shape[2:]), np.float64).reshape(2, 3, -1)
    np.put_along_axis(want, i.numpy().reshape(2, 3, -1), v.numpy().reshape(2, 3, -1), 2)
    close(y, want.reshape(y.shape))
    bigger = unpool(v, i, 2, output_size=tuple(n + 1 for n in y.shape[2:]))
    assert bigger.shape == y.shape[:2] + tuple(n + 1 for n in y.shape[2:])
    idx = i.numpy()
    check_grads(lambda a: unpool(a, lucid.tensor(idx), 2), v.numpy())


def test_max_unpool_repeated_indices_take_the_gradient_at_each():
    v = T(np.array([[[1.0, 2.0, 3.0]]], np.float32)).requires_grad_()
    idx = lucid.tensor(np.array([[[1, 1, 3]]]))
    y = F.max_unpool1d(v, idx, 2, output_size=(5,))
    close(y, np.array([[[0, 2, 0, 3, 0]]]))
    (y * T(np.array([[[1.0, 5.0, 7.0, 11.0, 13.0]]], np.float32))).sum().backward()
    close(v.grad, np.array([[[5, 5, 11]]]))


def test_max_unpool_errors():
    v, i = F.max_pool2d(T(arr(1, 1, 4, 4)), 2, return_indices=True)
    with pytest.raises(IndexError, match="invalid max index"):
        F.max_unpool2d(v, i + 100, 2)
    with pytest.raises(ValueError, match="output_size"):
        F.max_unpool2d(v, i, 2, output_size=(9, 9))
    with pytest.raises(TypeError, match="int64"):
        F.max_unpool2d(v, i.to(lucid.int32), 2)


# ---- unfold, fold, channel shuffle ----------------------------------------------------------------


def np_unfold(x, kernel, dil, pad, stride):
    n, c = x.shape[:2]
    xp = np.pad(x, [(0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])])
    oh = (xp.shape[2] - dil[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    ow = (xp.shape[3] - dil[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    cols = np.zeros((n, c, kernel[0], kernel[1], oh, ow))
    for i, j, a, b in np.ndindex(kernel[0], kernel[1], oh, ow):
        cols[:, :, i, j, a, b] = xp[:, :, a * stride[0] + i * dil[0], b * stride[1] + j * dil[1]]
    return cols.reshape(n, c * kernel[0] * kernel[1], oh * ow)


def np_fold(cols, size, kernel, dil, pad, stride):
    n, ck, _ = cols.shape
    c = ck // (kernel[0] * kernel[1])
    hp, wp = size[0] + 2 * pad[0], size[1] + 2 * pad[1]
    oh = (hp - dil[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    ow = (wp - dil[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    cols = cols.reshape(n, c, kernel[0], kernel[1], oh, ow)
    y = np.zeros((n, c, hp, wp))
    for i, j, a, b in np.ndindex(kernel[0], kernel[1], oh, ow):
        y[:, :, a * stride[0] + i * dil[0], b * stride[1] + j * dil[1]] += cols[:, :, i, j, a, b]
    return y[:, :, pad[0] : pad[0] + size[0], pad[1] : pad[1] + size[1]]


@pytest.mark.parametrize(
    "kernel,dil,pad,stride",
    [((2, 2), (1, 1), (0, 0), (1, 1)), ((3, 2), (1, 2), (1, 1), (2, 1)), ((2, 3), (2, 1), (2, 0), (1, 2))],
)
def test_unfold_and_fold(kernel, dil, pad, stride):
    x = arr(2, 3, 6, 7)
    want = np_unfold(x, kernel, dil, pad, stride)
    close(F.unfold(T(x), kernel, dil, pad, stride), want)
    close(nn.Unfold(kernel, dil, pad, stride)(T(x)), want)
    cols = arr(*want.shape)
    close(F.fold(T(cols), (6, 7), kernel, dil, pad, stride), np_fold(cols, (6, 7), kernel, dil, pad, stride))
    close(nn.Fold((6, 7), kernel, dil, pad, stride)(T(cols[0])), np_fold(cols[:1], (6, 7), kernel, dil, pad, stride)[0])
    check_grads(lambda a: F.unfold(a, kernel, dil, pad, stride), arr(1, 2, 5, 5))
    small = np_unfold(arr(1, 2, 5, 5), kernel, dil, pad, stride).astype(np.float32)
    check_grads(lambda a: F.fold(a, (5, 5), kernel, dil, pad, stride), small)


def test_fold_errors():
    with pytest.raises(RuntimeError, match="divisible"):
        F.fold(T(arr(1, 5, 9)), (4, 4), 2)
    with pytest.raises(RuntimeError, match="blocks"):
        F.fold(T(arr(1, 4, 8)), (4, 4), 2)
    with pytest.raises(ValueError, match="3-D"):
        F.fold(T(arr(4)), (4, 4), 2)


def test_channel_shuffle():
    x = arr(2, 6, 3, 2)
    want = x.reshape(2, 2, 3, 3, 2).transpose(0, 2, 1, 3, 4).reshape(2, 6, 3, 2)
    close(F.channel_shuffle(T(x), 2), want)
    close(nn.ChannelShuffle(2)(T(x)), want)
    check_grads(lambda a: F.channel_shuffle(a, 3), arr(1, 6, 2))
    with pytest.raises(RuntimeError, match="divisible"):
        F.channel_shuffle(T(x), 4)
    with pytest.raises(ValueError, match="positive"):
        F.channel_shuffle(T(x), 0)


# ---- layers --------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls,k", [(nn.Conv3d, 3), (nn.Conv1d, 1)])
def test_conv_layers_and_padding_modes(cls, k):
    layer = cls(2, 3, 3, padding="same", padding_mode="circular")
    x = arr(2, 2, *([5] * k))
    xp = np.pad(x, [(0, 0), (0, 0)] + [(1, 1)] * k, mode="wrap")
    want = np_conv(xp, layer.weight.numpy(), layer.bias.numpy(), (1,) * k, (0,) * k, (1,) * k, 1)
    close(layer(T(x)), want, 1e-4)
    assert layer.weight.shape == (3, 2) + (3,) * k
    with pytest.raises(ValueError, match="padding_mode"):
        cls(2, 3, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="strided"):
        cls(2, 3, 3, stride=2, padding="same")


def test_conv_transpose_layers_output_size():
    layer = nn.ConvTranspose3d(2, 4, 3, stride=2, padding=1)
    x = arr(1, 2, 3, 3, 3)
    assert layer(T(x)).shape == (1, 4, 5, 5, 5)
    y = layer(T(x), output_size=(6, 6, 6))
    want = np_conv_transpose(x, layer.weight.numpy(), layer.bias.numpy(), (2,) * 3, (1,) * 3, (1,) * 3, (1,) * 3, 1)
    close(y, want, 1e-4)
    with pytest.raises(ValueError, match="not reachable"):
        layer(T(x), output_size=(9, 9, 9))
    t1 = nn.ConvTranspose1d(2, 3, 2, stride=2)
    assert t1.weight.shape == (2, 3, 2) and t1(T(arr(1, 2, 4))).shape == (1, 3, 8)


@pytest.mark.parametrize(
    "lazy,plain,k",
    [
        (nn.LazyConv1d, nn.Conv1d, 1),
        (nn.LazyConv2d, nn.Conv2d, 2),
        (nn.LazyConv3d, nn.Conv3d, 3),
        (nn.LazyConvTranspose1d, nn.ConvTranspose1d, 1),
        (nn.LazyConvTranspose2d, nn.ConvTranspose2d, 2),
        (nn.LazyConvTranspose3d, nn.ConvTranspose3d, 3),
    ],
)
def test_lazy_convolutions_take_in_channels_from_the_input(lazy, plain, k):
    layer = lazy(4, 2)
    assert layer.weight is None and not list(layer.parameters())
    x = T(arr(2, 3, *([4] * k)))
    y = layer(x)
    assert type(layer) is plain and layer.in_channels == 3
    wshape = (3, 4) if plain.__name__.startswith("ConvT") else (4, 3)
    assert layer.weight.shape == wshape + (2,) * k and layer.bias.shape == (4,)
    close(
        y,
        getattr(F, ("conv_transpose" if "T" in plain.__name__[4:] else "conv") + f"{k}d")(
            x, layer.weight, layer.bias
        ).numpy(),
    )


def test_pool_layers():
    x = distinct(2, 3, 6, 6, 4)
    v, i = nn.MaxPool3d(2, return_indices=True)(T(x))
    w, wi = np_pool(x, (2,) * 3, (2,) * 3, (0,) * 3, (1,) * 3, False, "max")
    close(v, w)
    np.testing.assert_array_equal(i.numpy(), wi)
    close(nn.MaxUnpool3d(2)(v, i), F.max_unpool3d(v, i, 2).numpy())
    close(
        nn.AvgPool1d(3, 2, 1)(T(x[0, :, :, 0, 0])), np_pool(x[0:1, :, :, 0, 0], (3,), (2,), (1,), (1,), False, "avg")[0]
    )
    close(
        nn.AvgPool3d(2, divisor_override=3)(T(x)),
        np_pool(x, (2,) * 3, (2,) * 3, (0,) * 3, (1,) * 3, False, "avg", True, 3),
    )
    close(nn.AdaptiveAvgPool3d((2, 3, 1))(T(x)), np_adaptive(x, (2, 3, 1), "avg"))
    close(nn.AdaptiveMaxPool2d(3)(T(x[:, :, 0])), np_adaptive(x[:, :, 0], (3, 3), "max")[0])
    close(
        nn.LPPool2d(2, 2)(T(x[:, :, 0])),
        np.sqrt(np_pool(x[:, :, 0].astype(np.float64) ** 2, (2, 2), (2, 2), (0, 0), (1, 1), False, "avg") * 4),
        1e-4,
    )
    frac = nn.FractionalMaxPool2d(2, output_ratio=0.5, return_indices=True)
    v, i = frac(T(x[:, :, 0]))
    assert v.shape == (2, 3, 3, 2) and i.shape == (2, 3, 3, 2)
    with pytest.raises(ValueError, match="exactly one"):
        nn.FractionalMaxPool3d(2)


@pytest.mark.parametrize(
    "cls,mode,n",
    [
        (nn.ConstantPad3d, "constant", 3),
        (nn.ZeroPad3d, "constant", 3),
        (nn.ReflectionPad3d, "reflect", 3),
        (nn.ReplicationPad3d, "edge", 3),
        (nn.CircularPad1d, "wrap", 1),
        (nn.CircularPad2d, "wrap", 2),
        (nn.CircularPad3d, "wrap", 3),
    ],
)
def test_padding_layers(cls, mode, n):
    x = arr(2, 3, 4, 5, 4)[(slice(None),) * 2 + (0,) * (3 - n)]
    pads = (1, 2, 2, 1, 0, 1)[: 2 * n]
    layer = cls(pads, 1.5) if cls is nn.ConstantPad3d else cls(pads)
    widths = [(0, 0), (0, 0)] + [(pads[2 * i], pads[2 * i + 1]) for i in range(n)][::-1]
    kw = {"constant_values": 1.5} if cls is nn.ConstantPad3d else {}
    close(layer(T(x)), np.pad(x, widths, mode=mode, **kw))
    assert cls(1, 0.0)(T(x)).shape if cls is nn.ConstantPad3d else cls(1)(T(x)).shape
    with pytest.raises(TypeError, match="padding"):
        cls((1, 2, 3), 0.0) if cls is nn.ConstantPad3d else cls((1, 2, 3))


# ---- resampling ----------------------------------------------------------------------------------


def np_resize_axis(x, axis, out, mode, align):
    """One axis of x resized by loops: linear or cubic convolution (a = -0.75), taps clamped."""
    n = x.shape[axis]
    scale = ((n - 1) / (out - 1) if out > 1 else 0.0) if align else n / out
    moved = np.moveaxis(x.astype(np.float64), axis, -1)
    y = np.zeros(moved.shape[:-1] + (out,))
    a = -0.75
    for j in range(out):
        src = j * scale if align else (j + 0.5) * scale - 0.5
        if mode == "linear":
            src = max(src, 0.0)
            i0 = min(int(np.floor(src)), n - 1)
            lam = src - i0
            y[..., j] = moved[..., i0] * (1 - lam) + moved[..., min(i0 + 1, n - 1)] * lam
        else:
            i0 = min(int(np.floor(src)), n - 1)
            t = min(max(src - i0, 0.0), 1.0)
            for tap, u in zip(range(-1, 3), (t + 1, t, 1 - t, 2 - t)):
                u = abs(u)
                w = ((a + 2) * u - (a + 3)) * u * u + 1 if u <= 1 else ((a * u - 5 * a) * u + 8 * a) * u - 4 * a
                y[..., j] += w * moved[..., min(max(i0 + tap, 0), n - 1)]
    return np.moveaxis(y, -1, axis)


@pytest.mark.parametrize("size", [(3, 7), (9, 2), (6, 5)])
@pytest.mark.parametrize("align", [False, True])
def test_interpolate_bicubic(size, align):
    x = arr(2, 3, 6, 5)
    want = np_resize_axis(np_resize_axis(x, 2, size[0], "cubic", align), 3, size[1], "cubic", align)
    close(F.interpolate(T(x), size=size, mode="bicubic", align_corners=align), want, 1e-4)
    check_grads(lambda a: F.interpolate(a, size=(5, 3), mode="bicubic", align_corners=align), arr(1, 2, 3, 4))


@pytest.mark.parametrize("align", [False, True])
def test_interpolate_trilinear(align):
    x = arr(2, 2, 4, 3, 5)
    want = x
    for axis, n in zip((2, 3, 4), (7, 2, 5)):
        want = np_resize_axis(want, axis, n, "linear", align)
    close(F.interpolate(T(x), size=(7, 2, 5), mode="trilinear", align_corners=align), want, 1e-5)
    check_grads(lambda a: F.interpolate(a, scale_factor=1.5, mode="trilinear", align_corners=align), arr(1, 1, 2, 3, 2))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_interpolate_area_and_nearest_in_every_rank(k):
    x = arr(2, 3, *([6, 5, 4][:k]))
    size = (4, 7, 3)[:k]
    close(F.interpolate(T(x), size=size, mode="area"), np_adaptive(x, size, "avg"))
    want = x
    for d, o in enumerate(size):
        n = x.shape[2 + d]
        want = np.take(want, [min(int(np.floor(j * np.float32(n / o))), n - 1) for j in range(o)], axis=2 + d)
    close(F.interpolate(T(x), size=size, mode="nearest"), want)
    check_grads(lambda a: F.interpolate(a, size=(3, 2, 3)[:k], mode="area"), arr(1, 2, *([5, 4, 4][:k])))


def test_upsample_nearest_and_bilinear():
    x = arr(1, 2, 3, 4)
    close(F.upsample_nearest(T(x), scale_factor=2), x.repeat(2, 2).repeat(2, 3))
    want = np_resize_axis(np_resize_axis(x, 2, 5, "linear", True), 3, 6, "linear", True)
    close(F.upsample_bilinear(T(x), size=(5, 6)), want)


def test_interpolate_errors():
    with pytest.raises(ValueError, match="'trilinear' needs a 5-D"):
        F.interpolate(T(arr(1, 1, 4, 4)), size=2, mode="trilinear")
    with pytest.raises(ValueError, match="'bicubic' needs a 4-D"):
        F.interpolate(T(arr(1, 1, 4, 4, 4)), size=2, mode="bicubic")
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(T(arr(1, 1, 4, 4)), size=2, mode="area", align_corners=True)
    with pytest.raises(ValueError, match="3-D .* 4-D .* 5-D"):
        F.interpolate(T(arr(1, 1, 1, 4, 4, 4)), size=2)


# ---- attention -----------------------------------------------------------------------------------


def np_softmax(a):
    a = a - a.max(-1, keepdims=True)
    e = np.exp(a)
    return e / e.sum(-1, keepdims=True)


def np_mha(q, k, v, h, wq, wk, wv, b, bias_k, bias_v, zero_attn, wo, bo, mask=None):
    """Multi-head attention of [L, N, E] inputs by its definition, in float64."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    bq, bk, bv = (None, None, None) if b is None else np.split(b, 3)
    q, k, v = q @ wq.T, k @ wk.T, v @ wv.T
    if bq is not None:
        q, k, v = q + bq, k + bk, v + bv
    l, n, e = q.shape
    if bias_k is not None:
        k = np.concatenate([k, np.broadcast_to(bias_k.reshape(1, 1, e), (1, n, e))])
        v = np.concatenate([v, np.broadcast_to(bias_v.reshape(1, 1, e), (1, n, e))])
        mask = None if mask is None else np.pad(mask, [(0, 0), (0, 1)])
    hd = e // h
    heads = lambda a: a.reshape(a.shape[0], n, h, hd).transpose(1, 2, 0, 3)  # noqa: E731 [N, H, S, hd]
    qh, kh, vh = heads(q), heads(k), heads(v)
    if zero_attn:
        kh = np.concatenate([kh, np.zeros((n, h, 1, hd))], 2)
        vh = np.concatenate([vh, np.zeros((n, h, 1, hd))], 2)
        mask = None if mask is None else np.pad(mask, [(0, 0), (0, 1)])
    scores = qh @ kh.transpose(0, 1, 3, 2) / np.sqrt(hd)
    if mask is not None:
        scores = scores + mask
    w = np_softmax(scores)
    out = (w @ vh).transpose(2, 0, 1, 3).reshape(l, n, e) @ wo.T
    if bo is not None:
        out = out + bo
    return out, w


@pytest.mark.parametrize(
    "bias_kv,zero_attn,kdim,vdim,bias",
    [(True, True, None, None, True), (False, True, 5, 3, True), (True, False, 5, 3, False)],
)
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_options(bias_kv, zero_attn, kdim, vdim, bias, batch_first):
    lucid.manual_seed(3)
    m = nn.MultiheadAttention(
        6, 2, bias=bias, add_bias_kv=bias_kv, add_zero_attn=zero_attn, kdim=kdim, vdim=vdim, batch_first=batch_first
    )
    names = set(dict(m.named_parameters()))
    assert ("in_proj_weight" in names) == (kdim is None)
    assert ("k_proj_weight" in names) == (kdim is not None)
    assert ("bias_k" in names) == bias_kv
    if bias:  # PyTorch starts the projection biases at zero; give them values to check
        with lucid.no_grad():
            m.in_proj_bias.copy_(T(arr(18)))
            m.out_proj.bias.copy_(T(arr(6)))
    q, k, v = arr(4, 3, 6), arr(5, 3, kdim or 6), arr(5, 3, vdim or 6)
    mask = arr(4, 5)
    if kdim is None:
        wq, wk, wv = np.split(m.in_proj_weight.numpy(), 3)
    else:
        wq, wk, wv = m.q_proj_weight.numpy(), m.k_proj_weight.numpy(), m.v_proj_weight.numpy()
    want, w = np_mha(
        q,
        k,
        v,
        2,
        wq,
        wk,
        wv,
        None if not bias else m.in_proj_bias.numpy(),
        None if not bias_kv else m.bias_k.numpy(),
        None if not bias_kv else m.bias_v.numpy(),
        zero_attn,
        m.out_proj.weight.numpy(),
        None if not bias else m.out_proj.bias.numpy(),
        mask,
    )
    tr = (lambda a: a.transpose(1, 0, 2)) if batch_first else (lambda a: a)  # noqa: E731
    out, weights = m(T(tr(q)), T(tr(k)), T(tr(v)), attn_mask=T(mask))
    close(out, tr(want), 1e-4)
    close(weights, w.mean(1), 1e-5)
    _, per_head = m(T(tr(q)), T(tr(k)), T(tr(v)), attn_mask=T(mask), average_attn_weights=False)
    close(per_head, w, 1e-5)
    out1, none = m(
        T(tr(q))[(0,) if batch_first else (slice(None), 0)],
        T(tr(k))[(0,) if batch_first else (slice(None), 0)],
        T(tr(v))[(0,) if batch_first else (slice(None), 0)],
        attn_mask=T(mask),
        need_weights=False,
    )
    assert none is None
    close(out1, want[:, 0], 1e-4)


def test_multi_head_attention_forward_gradients_and_masks():
    e, h = 4, 2
    w_in, w_out, b_in = arr(3 * e, e), arr(e, e), arr(3 * e)
    bk, bv = arr(1, 1, e), arr(1, 1, e)
    kpm = np.array([[False, True, False], [False, False, False]])

    def f(q, k, v, wi, wo):
        return F.multi_head_attention_forward(
            q, k, v, e, h, wi, T(b_in), T(bk), T(bv), True, 0.0, wo, None, key_padding_mask=lucid.tensor(kpm)
        )[0]

    q, k, v = arr(2, 2, e), arr(3, 2, e), arr(3, 2, e)
    want, _ = np_mha(q, k, v, h, *np.split(w_in, 3), b_in, bk, bv, True, w_out, None)
    got = F.multi_head_attention_forward(
        T(q), T(k), T(v), e, h, T(w_in), T(b_in), T(bk), T(bv), True, 0.0, T(w_out), None
    )[0]
    close(got, want, 1e-4)
    # The padded key gets no weight; the learnt bias and zero positions stay open.
    want_w = np_mha(q, k, v, h, *np.split(w_in, 3), b_in, bk, bv, True, w_out, None, np.zeros((2, 3)))[1]
    _, got_w = F.multi_head_attention_forward(
        T(q),
        T(k),
        T(v),
        e,
        h,
        T(w_in),
        T(b_in),
        T(bk),
        T(bv),
        True,
        0.0,
        T(w_out),
        None,
        key_padding_mask=lucid.tensor(kpm),
        average_attn_weights=False,
    )
    assert got_w.shape == want_w.shape
    assert (got_w.numpy()[0, :, :, 1] == 0).all() and (got_w.numpy()[1] > 0).all()
    close(got_w[1], want_w[1], 1e-5)  # the unpadded sample: the unmasked weights
    check_grads(f, q, k, v, w_in, w_out, tol=3e-2)


def test_multi_head_attention_forward_errors():
    e = 4
    args = (T(arr(3 * e, e)), None, None, None, False, 0.0, T(arr(e, e)), None)
    q = T(arr(2, 1, e))
    with pytest.raises(ValueError, match="embed_dim_to_check"):
        F.multi_head_attention_forward(q, q, q, 5, 2, *args)
    with pytest.raises(ValueError, match="divisible"):
        F.multi_head_attention_forward(q, q, q, e, 3, *args)
    with pytest.raises(ValueError, match="attn_mask"):
        F.multi_head_attention_forward(q, q, q, e, 2, *args, attn_mask=T(arr(3, 3)))
    with pytest.raises(RuntimeError, match="is_causal"):
        F.multi_head_attention_forward(q, q, q, e, 2, *args, is_causal=True)
    with pytest.raises(TypeError, match="bool or float"):
        F.multi_head_attention_forward(q, q, q, e, 2, *args, key_padding_mask=lucid.tensor(np.zeros((1, 2), np.int64)))
    with pytest.raises(ValueError, match="kdim"):
        nn.MultiheadAttention(4, 2, kdim=3)(q, q, q)


def test_scaled_dot_product_attention_groups_of_query_heads():
    q, k, v = arr(2, 6, 5, 4), arr(2, 2, 3, 4), arr(2, 2, 3, 4)
    kk, vv = np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1)
    want = np_softmax(q.astype(np.float64) @ kk.transpose(0, 1, 3, 2) / 2.0) @ vv
    close(F.scaled_dot_product_attention(T(q), T(k), T(v), enable_gqa=True), want, 1e-5)
    check_grads(
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, enable_gqa=True),
        arr(1, 4, 2, 3),
        arr(1, 2, 3, 3),
        arr(1, 2, 3, 3),
    )
    with pytest.raises(RuntimeError, match="multiple"):
        F.scaled_dot_product_attention(T(arr(1, 5, 2, 4)), T(k[:1]), T(v[:1]), enable_gqa=True)


# ---- grid sampling -------------------------------------------------------------------------------


def np_reflect(x, lo2, hi2):
    if lo2 == hi2:
        return 0.0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    a = abs(x - lo)
    flips, extra = math.floor(a / span), math.fmod(a, span)
    return extra + lo if flips % 2 == 0 else span - extra + lo


def np_grid_sample(x, grid, mode, padding_mode, align):
    """grid_sample by loops: x [N, C, *S], grid [N, *O, k] of (x, y[, z])."""
    k = x.ndim - 2
    sizes = x.shape[2:]
    out = np.zeros(x.shape[:2] + grid.shape[1:-1])

    def unnorm(g, n):
        return (g + 1) / 2 * (n - 1) if align else ((g + 1) * n - 1) / 2

    def pad(c, n):
        if padding_mode == "border":
            return min(max(c, 0), n - 1)
        if padding_mode == "reflection":
            c = np_reflect(c, 0, 2 * (n - 1)) if align else np_reflect(c, -1, 2 * n - 1)
            return min(max(c, 0), n - 1)
        return c

    def read(b, pos):  # pos in (d, h, w) order
        if all(0 <= p < n for p, n in zip(pos, sizes)):
            return x[(b, slice(None)) + tuple(pos)]
        return 0.0

    def cubic(t):
        a = -0.75
        t = abs(t)
        return (
            ((a + 2) * t - (a + 3)) * t * t + 1
            if t <= 1
            else (((a * t - 5 * a) * t + 8 * a) * t - 4 * a if t < 2 else 0.0)
        )

    for b in range(x.shape[0]):
        for o in np.ndindex(*grid.shape[1:-1]):
            g = grid[(b,) + o][::-1]  # (z,) y, x: in the order of the dimensions
            u = [unnorm(float(g[d]), sizes[d]) for d in range(k)]
            if mode == "bicubic":
                base = [math.floor(c) for c in u]
                for taps in np.ndindex(*([4] * k)):
                    pos = [base[d] + taps[d] - 1 for d in range(k)]
                    w = math.prod(cubic(u[d] - pos[d]) for d in range(k))
                    moved = [int(pad(float(p), n)) for p, n in zip(pos, sizes)]
                    out[(b, slice(None)) + o] += w * read(b, moved)
                continue
            c = [pad(v, n) for v, n in zip(u, sizes)]
            if mode == "nearest":
                out[(b, slice(None)) + o] = read(b, [int(np.rint(v)) for v in c])
                continue
            lo = [math.floor(v) for v in c]
            for corner in np.ndindex(*([2] * k)):
                pos = [lo[d] + corner[d] for d in range(k)]
                w = math.prod((c[d] - lo[d]) if corner[d] else (1 - (c[d] - lo[d])) for d in range(k))
                out[(b, slice(None)) + o] += w * read(b, pos)
    return out


def grid_away_from_integers(n, outs, sizes, align):
    """A grid whose unnormalised positions have fractions in [0.2, 0.8] (finite differences stay
    on one side of each floor), some of them outside the input."""
    k = len(sizes)
    g = np.zeros((n, *outs, k), np.float32)
    for j in range(k):
        size = sizes[k - 1 - j]
        u = rng.integers(-2, size + 1, (n, *outs)) + rng.uniform(0.2, 0.8, (n, *outs))
        g[..., j] = (2 * u / (size - 1) - 1) if align else ((2 * u + 1) / size - 1)
    return g


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("k", [2, 3])
def test_grid_sample_matches_loops(mode, padding_mode, align, k):
    x = arr(2, 3, *([4, 5, 3][:k]))
    grid = (rng.uniform(-1.4, 1.4, (2, 3, 2, *([2] * (k - 2)), k))).astype(np.float32)
    want = np_grid_sample(x, grid, mode, padding_mode, align)
    close(F.grid_sample(T(x), T(grid), mode, padding_mode, align), want, 1e-4)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_gradients(mode, padding_mode):
    x = arr(1, 2, 3, 4)
    grid = grid_away_from_integers(1, (2, 2), (3, 4), False)
    check_grads(lambda a, g: F.grid_sample(a, g, mode, padding_mode), x, grid, eps=1e-2, tol=3e-2)
    x3 = arr(1, 1, 2, 3, 3)
    grid3 = grid_away_from_integers(1, (2, 1, 2), (2, 3, 3), True)
    check_grads(lambda a, g: F.grid_sample(a, g, "bilinear", padding_mode, True), x3, grid3, eps=1e-2, tol=3e-2)


def test_grid_sample_outside_everywhere_and_errors():
    x = T(arr(1, 2, 3, 3)).requires_grad_()
    y = F.grid_sample(x, T(np.full((1, 2, 2, 2), 9.0, np.float32)))
    close(y, np.zeros((1, 2, 2, 2)))
    y.sum().backward()
    close(x.grad, np.zeros((1, 2, 3, 3)))
    with pytest.raises(ValueError, match="mode"):
        F.grid_sample(T(arr(1, 1, 3, 3)), T(arr(1, 2, 2, 2)), mode="area")
    with pytest.raises(ValueError, match="padding_mode"):
        F.grid_sample(T(arr(1, 1, 3, 3)), T(arr(1, 2, 2, 2)), padding_mode="wrap")
    with pytest.raises(ValueError, match="grid must have shape"):
        F.grid_sample(T(arr(1, 1, 3, 3)), T(arr(1, 2, 2, 3)))
    with pytest.raises(TypeError, match="one dtype"):
        F.grid_sample(T(arr(1, 1, 3, 3)), T(arr(1, 2, 2, 2)).double())


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 2, 3, 1, 4), (1, 1, 1, 3)])
@pytest.mark.parametrize("align", [False, True])
def test_affine_grid(size, align):
    k = len(size) - 2
    theta = arr(size[0], k, k + 1)

    def axis(n):
        if n <= 1:
            return np.zeros(n)
        r = np.linspace(-1, 1, n)
        return r if align else r * (n - 1) / n

    axes = [axis(n) for n in size[2:]]  # (d,) h, w
    mesh = list(np.meshgrid(*axes, indexing="ij"))
    base = np.stack(mesh[::-1] + [np.ones_like(mesh[0])], -1)  # x, y(, z), 1
    want = np.einsum("...i,nji->n...j", base, theta.astype(np.float64))
    got = F.affine_grid(T(theta), size, align_corners=align)
    assert got.shape == (size[0], *size[2:], k)
    close(got, want, 1e-5)
    check_grads(lambda t: F.affine_grid(t, size, align_corners=align), theta)


def test_affine_grid_errors():
    with pytest.raises(ValueError, match=r"\(2, 2, 3\)"):
        F.affine_grid(T(arr(2, 3, 4)), (2, 1, 3, 3))
    with pytest.raises(TypeError, match="floating-point"):
        F.affine_grid(lucid.zeros(1, 2, 3, dtype=lucid.int64), (1, 1, 3, 3))
    with pytest.raises(NotImplementedError, match="4-D or 5-D"):
        F.affine_grid(T(arr(1, 2, 3)), (1, 1, 3))


# ---- devices and dtypes --------------------------------------------------------------------------


def _spatial_ops(x5, w5, wt5, grid):
    x4 = x5[:, :, 0]
    v, i = F.max_pool3d(x5, 2, return_indices=True)
    return [
        F.conv3d(x5, w5, padding=1),
        F.conv_transpose3d(x5, wt5, stride=2, padding=1),
        v,
        i,
        F.max_unpool3d(v, i, 2, output_size=(5, 5, 5)),
        F.avg_pool3d(x5, 3, 2, 1),
        F.adaptive_max_pool3d(x5, 2),
        F.lp_pool3d(x5.abs(), 2.0, 2),
        F.interpolate(x4, (7, 3), mode="bicubic"),
        F.interpolate(x5, (3, 6, 4), mode="trilinear"),
        F.grid_sample(x5, grid),
        F.fold(F.unfold(x4, 2), (5, 5), 2),
        F.channel_shuffle(x5, 3),
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_the_spatial_ops_agree_on_every_device(device):
    x5, w5, wt5 = arr(2, 3, 5, 5, 5), arr(4, 3, 2, 2, 2), arr(3, 2, 2, 2, 2)
    grid = rng.uniform(-1.2, 1.2, (2, 3, 3, 3, 3)).astype(np.float32)
    want = _spatial_ops(T(x5), T(w5), T(wt5), T(grid))
    got = _spatial_ops(*(T(a, device=device) for a in (x5, w5, wt5, grid)))
    for g, w in zip(got, want):
        assert g.device == device and g.dtype == w.dtype and g.shape == w.shape
        close(g.cpu(), w.numpy().astype(np.float64), 1e-4)


def test_the_spatial_ops_in_bfloat16_follow_float32():
    x5, w5, wt5 = arr(2, 3, 5, 5, 5), arr(4, 3, 2, 2, 2), arr(3, 2, 2, 2, 2)
    grid = rng.uniform(-1.2, 1.2, (2, 3, 3, 3, 3)).astype(np.float32)
    bf = [T(a).to(lucid.bfloat16) for a in (x5, w5, wt5, grid)]
    # The float32 results of the bfloat16-rounded inputs: what bfloat16 arithmetic approaches.
    want = _spatial_ops(*(t.float() for t in bf))
    for g, w in zip(_spatial_ops(*bf), want):
        assert g.dtype == (lucid.bfloat16 if w.dtype == lucid.float32 else w.dtype) and g.shape == w.shape
        scale = max(1.0, float(np.abs(w.numpy()).max()))
        np.testing.assert_allclose(g.float().numpy(), w.numpy(), rtol=3e-2, atol=3e-2 * scale)


def np_antialias_axis(x, axis, out, mode, align):
    """One axis downsampled (or upsampled) with PIL's widened filter, weights normalised."""
    n = x.shape[axis]
    scale = ((n - 1) / (out - 1) if out > 1 else 0.0) if align else n / out
    size = 2 if mode == "bilinear" else 4
    support = size / 2 * scale if scale >= 1 else size / 2
    inv = 1 / scale if scale >= 1 else 1.0

    def filt(u):
        u, a = abs(u), -0.5
        if mode == "bilinear":
            return max(0.0, 1 - u)
        return ((a + 2) * u - (a + 3)) * u * u + 1 if u < 1 else ((((u - 5) * u + 8) * u - 4) * a if u < 2 else 0.0)

    moved = np.moveaxis(x.astype(np.float64), axis, -1)
    y = np.zeros(moved.shape[:-1] + (out,))
    for j in range(out):
        centre = scale * (j + 0.5)
        lo, hi = max(int(centre - support + 0.5), 0), min(int(centre + support + 0.5), n)
        w = np.array([filt((i - centre + 0.5) * inv) for i in range(lo, hi)])
        y[..., j] = moved[..., lo:hi] @ (w / w.sum())
    return np.moveaxis(y, -1, axis)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("size", [(3, 4), (7, 25), (12, 6)])
@pytest.mark.parametrize("align", [False, True])
def test_interpolate_antialias(mode, size, align):
    x = arr(2, 3, 10, 20)
    want = np_antialias_axis(np_antialias_axis(x, 2, size[0], mode, align), 3, size[1], mode, align)
    close(F.interpolate(T(x), size=size, mode=mode, align_corners=align, antialias=True), want, 1e-5)
    check_grads(
        lambda a: F.interpolate(a, size=(2, 3), mode=mode, align_corners=align, antialias=True), arr(1, 1, 5, 7)
    )
    with pytest.raises(ValueError, match="antialias"):
        F.interpolate(T(x), size=size, mode="nearest", antialias=True)


@pytest.mark.parametrize("device", DEVICES)
def test_composed_convolutions_follow_conv2d_under_autocast(device):
    x, w, wt, b = arr(1, 2, 4, 4, 4), arr(3, 2, 2, 2, 2), arr(3, 2, 2, 2, 2), arr(3)
    with lucid.amp.autocast(device):
        y2 = F.conv2d(T(x[:, :, 0], device=device), T(w[:, :, 0], device=device), T(b, device=device))
        y3 = F.conv3d(T(x, device=device), T(w, device=device), T(b, device=device))
        # A lower-precision activation meets a float32 weight: autocast casts, as PyTorch's.
        z = F.conv_transpose3d(y3, T(wt, device=device))
    assert y3.dtype == y2.dtype and z.dtype == y2.dtype
    tol = 1e-4 if y3.dtype == lucid.float32 else 2e-2
    close(y3.cpu().float(), np_conv(x, w, b, (1,) * 3, (0,) * 3, (1,) * 3, 1), tol * 5)
    with pytest.raises(RuntimeError, match="one dtype"):
        F.conv3d(T(x, device=device).half(), T(w, device=device))


# ---- embedding -----------------------------------------------------------------------------------


@pytest.mark.parametrize("max_norm,norm_type", [(1.0, 2.0), (1.5, 1.0), (0.5, 3.0)])
def test_embedding_max_norm_rescales_the_rows_looked_up(max_norm, norm_type):
    w = arr(6, 3) * 2
    idx = np.array([[0, 2, 2], [5, 2, 1]])
    want_w = w.astype(np.float64).copy()
    for r in np.unique(idx):
        norm = (np.abs(want_w[r]) ** norm_type).sum() ** (1 / norm_type)
        if norm > max_norm:
            want_w[r] *= max_norm / (norm + 1e-7)
    weight = T(w)
    out = F.embedding(lucid.tensor(idx), weight, max_norm=max_norm, norm_type=norm_type)
    close(weight, want_w, 1e-5)  # in place, rows 3 and 4 untouched
    close(out, want_w[idx], 1e-5)
    layer = nn.Embedding(6, 3, max_norm=max_norm, norm_type=norm_type, _weight=T(w))
    close(layer(lucid.tensor(idx)), want_w[idx], 1e-5)


def test_embedding_scale_grad_by_freq_and_padding():
    w = arr(5, 2)
    idx = np.array([[1, 1, 3], [1, 4, 0]])
    g = arr(2, 3, 2)
    weight = T(w).requires_grad_()
    out = F.embedding(lucid.tensor(idx), weight, padding_idx=-1, scale_grad_by_freq=True)
    close(out, w[idx])
    (out * T(g)).sum().backward()
    want = np.zeros((5, 2))
    counts = np.bincount(idx.reshape(-1), minlength=5)
    for pos in np.ndindex(idx.shape):
        want[idx[pos]] += g[pos] / counts[idx[pos]]
    want[4] = 0  # padding_idx -1 is row 4
    close(weight.grad, want)
    frozen = nn.Embedding(5, 2, _weight=T(w), _freeze=True)
    assert not frozen.weight.requires_grad
    with pytest.raises(NotImplementedError, match="sparse"):
        F.embedding(lucid.tensor(idx), T(w), sparse=True)
    with pytest.raises(ValueError, match="padding_idx"):
        F.embedding(lucid.tensor(idx), T(w), padding_idx=5)
    with pytest.raises(ValueError, match="_weight"):
        nn.Embedding(5, 3, _weight=T(w))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_max_norm_and_scale_grad_by_freq(mode):
    w = arr(6, 3) * 2
    idx, offs = np.array([0, 2, 2, 5, 2, 1, 3]), np.array([0, 3, 5])
    bags = np.split(idx, offs[1:])
    renormed = w.astype(np.float64).copy()
    for r in np.unique(idx):
        norm = np.sqrt((renormed[r] ** 2).sum())
        if norm > 1.0:
            renormed[r] *= 1.0 / (norm + 1e-7)
    reduce = {"sum": np.sum, "mean": np.mean, "max": np.max}[mode]
    weight = T(w)
    out = F.embedding_bag(lucid.tensor(idx), weight, lucid.tensor(offs), max_norm=1.0, mode=mode)
    close(out, np.stack([reduce(renormed[b], 0) for b in bags]), 1e-5)
    close(weight, renormed, 1e-5)
    layer = nn.EmbeddingBag(6, 3, max_norm=1.0, mode=mode, _weight=T(w))
    close(layer(lucid.tensor(idx), lucid.tensor(offs)), np.stack([reduce(renormed[b], 0) for b in bags]), 1e-5)
    if mode == "max":
        return
    weight = T(w).requires_grad_()
    out = F.embedding_bag(lucid.tensor(idx), weight, lucid.tensor(offs), mode=mode, scale_grad_by_freq=True)
    g = arr(*out.shape)
    (out * T(g)).sum().backward()
    counts = np.bincount(idx, minlength=6)
    want = np.zeros((6, 3))
    for bag, gb in zip(bags, g):
        for i in bag:
            want[i] += gb / (len(bag) if mode == "mean" else 1) / counts[i]
    close(weight.grad, want)


@pytest.mark.parametrize("k", [2, 3])
def test_fractional_max_pool_uses_the_first_rows_of_larger_samples_and_keeps_them_as_a_buffer(k):
    x = distinct(2, 3, *([6] * k))
    u = rng.random((4, 3, k)).astype(np.float32)
    fn = getattr(F, f"fractional_max_pool{k}d")
    want = fn(T(x), 2, output_size=(3,) * k, _random_samples=T(u[:2]))
    np.testing.assert_array_equal(fn(T(x), 2, output_size=(3,) * k, _random_samples=T(u)).numpy(), want.numpy())
    unbatched = fn(T(x[1]), 2, output_size=(3,) * k, _random_samples=T(u[[1]]))  # one plane: row 0 of the samples
    np.testing.assert_array_equal(
        unbatched.numpy(), fn(T(x[1]), 2, output_size=(3,) * k, _random_samples=T(u[[1, 0]])).numpy()
    )
    layer = getattr(nn, f"FractionalMaxPool{k}d")(2, output_size=(3,) * k, _random_samples=T(u))
    assert list(layer.state_dict()) == ["_random_samples"]
    other = getattr(nn, f"FractionalMaxPool{k}d")(2, output_size=(3,) * k, _random_samples=T(np.zeros_like(u)))
    other.load_state_dict(layer.state_dict())
    np.testing.assert_array_equal(other(T(x)).numpy(), want.numpy())
    assert list(getattr(nn, f"FractionalMaxPool{k}d")(2, output_ratio=0.5).state_dict()) == []
    with pytest.raises(ValueError, match="at least the batch size 2"):
        fn(T(x), 2, output_size=(3,) * k, _random_samples=T(u[:1]))
    with pytest.raises(ValueError, match="_random_samples"):
        fn(T(x), 2, output_size=(3,) * k, _random_samples=T(u[:, :2]))
