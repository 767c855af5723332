"""PyTorch's aten-level functions (lucid.native_layer_norm …, lucid.ops.aten): values against
numpy, gradients against central differences (in float64), and wrong arguments raising."""

import numpy as np
import pytest

import lucid
import lucid.nn.functional as F
from _helpers import numeric_grads

aten = lucid.ops.aten


def _arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def check_grads(fn, arrays, atol=1e-5):
    """Autograd's gradients of sum(w * fn(...)) (float64) against central differences."""
    ts = [lucid.tensor(a, dtype=lucid.float64, requires_grad=True) for a in arrays]
    out = fn(*ts)
    w = np.random.default_rng(7).standard_normal(tuple(out.shape))
    (out * lucid.tensor(w, dtype=lucid.float64)).sum().backward()
    want = numeric_grads(fn, [a.astype(np.float64) for a in arrays], w, eps=1e-6, dtype=lucid.float64)
    for t, g in zip(ts, want):
        got = np.zeros_like(g) if t.grad is None else t.grad.numpy()  # (no gradient: zero)
        np.testing.assert_allclose(got, g, atol=atol, rtol=1e-4)


# ---- normalisations with statistics -----------------------------------------------------------


def test_native_layer_norm_returns_the_output_mean_and_rstd_as_numpy():
    x, w, b = _arr(2, 3, 4), _arr(3, 4, seed=1), _arr(3, 4, seed=2)
    out, mean, rstd = lucid.native_layer_norm(lucid.tensor(x), (3, 4), lucid.tensor(w), lucid.tensor(b), 1e-5)
    m = x.mean((1, 2), keepdims=True)
    r = 1 / np.sqrt(x.var((1, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(mean.numpy(), m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd.numpy(), r, rtol=1e-4)
    np.testing.assert_allclose(out.numpy(), (x - m) * r * w + b, rtol=1e-4, atol=1e-5)
    assert mean.shape == (2, 1, 1) and not mean.requires_grad


def test_native_layer_norm_gradients():
    check_grads(
        lambda x, w, b: lucid.native_layer_norm(x, (4,), w, b, 1e-5)[0], [_arr(3, 4), _arr(4, seed=1), _arr(4, seed=2)]
    )


def test_native_layer_norm_refuses_a_shape_that_is_not_trailing():
    with pytest.raises(ValueError, match="normalized_shape"):
        lucid.native_layer_norm(lucid.randn(2, 3), (2,), None, None, 1e-5)
    with pytest.raises(ValueError, match="weight"):
        lucid.native_layer_norm(lucid.randn(2, 3), (3,), lucid.randn(2), None, 1e-5)


def test_native_group_norm_returns_statistics_per_sample_and_group():
    x, w, b = _arr(2, 6, 5), _arr(6, seed=1), _arr(6, seed=2)
    out, mean, rstd = lucid.native_group_norm(lucid.tensor(x), lucid.tensor(w), lucid.tensor(b), 2, 6, 5, 3, 1e-5)
    g = x.reshape(2, 3, 10)
    m, r = g.mean(2), 1 / np.sqrt(g.var(2) + 1e-5)
    np.testing.assert_allclose(mean.numpy(), m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd.numpy(), r, rtol=1e-4)
    y = ((g - m[..., None]) * r[..., None]).reshape(2, 6, 5) * w[:, None] + b[:, None]
    np.testing.assert_allclose(out.numpy(), y, rtol=1e-4, atol=1e-5)


def test_native_group_norm_gradients_of_all_three_results():
    for k in range(3):
        check_grads(
            lambda x, w, b, k=k: lucid.native_group_norm(x, w, b, 2, 4, 3, 2, 1e-5)[k],
            [_arr(2, 4, 3), _arr(4, seed=1), _arr(4, seed=2)],
        )


def test_native_group_norm_refuses_inconsistent_sizes():
    with pytest.raises(ValueError, match="divisible"):
        lucid.native_group_norm(lucid.randn(2, 6, 3), None, None, 2, 6, 3, 4, 1e-5)
    with pytest.raises(ValueError, match="not \\[N=2, C=6"):
        lucid.native_group_norm(lucid.randn(2, 6, 3), None, None, 2, 6, 4, 2, 1e-5)


@pytest.mark.parametrize("fn", ["native_batch_norm", "_native_batch_norm_legit"])
def test_native_batch_norm_in_training_updates_the_running_statistics(fn):
    x, w, b = _arr(4, 3, 5), _arr(3, seed=1), _arr(3, seed=2)
    rm, rv = lucid.zeros(3), lucid.ones(3)
    out, mean, invstd = getattr(lucid, fn)(lucid.tensor(x), lucid.tensor(w), lucid.tensor(b), rm, rv, True, 0.1, 1e-5)
    m, v = x.mean((0, 2)), x.var((0, 2))
    np.testing.assert_allclose(mean.numpy(), m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(invstd.numpy(), 1 / np.sqrt(v + 1e-5), rtol=1e-4)
    y = (x - m[:, None]) / np.sqrt(v[:, None] + 1e-5) * w[:, None] + b[:, None]
    np.testing.assert_allclose(out.numpy(), y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(rm.numpy(), 0.1 * m, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(rv.numpy(), 0.9 + 0.1 * x.var((0, 2), ddof=1), rtol=1e-4)


def test_native_batch_norm_in_evaluation_uses_the_running_statistics_and_saves_nothing():
    x = _arr(4, 3)
    rm, rv = lucid.tensor(_arr(3, seed=1)), lucid.tensor(np.abs(_arr(3, seed=2)) + 0.5)
    out, mean, invstd = lucid.native_batch_norm(lucid.tensor(x), None, None, rm, rv, False, 0.1, 1e-5)
    np.testing.assert_allclose(out.numpy(), (x - rm.numpy()) / np.sqrt(rv.numpy() + 1e-5), rtol=1e-4, atol=1e-5)
    assert mean.shape == (0,) and invstd.shape == (0,)


def test_native_batch_norm_legit_without_statistics_and_with_update():
    x = _arr(4, 2, 3)
    out, _, _ = lucid._native_batch_norm_legit(lucid.tensor(x), None, None, True, 0.1, 1e-5)
    want = (x - x.mean((0, 2), keepdims=True)) / np.sqrt(x.var((0, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        aten._native_batch_norm_legit.no_stats(lucid.tensor(x), None, None, True, 0.1, 1e-5)[0].numpy(),
        want,
        rtol=1e-4,
        atol=1e-5,
    )
    rm, rv = lucid.zeros(2), lucid.ones(2)
    res = aten._batch_norm_with_update(lucid.tensor(x), None, None, rm, rv, 0.5, 1e-5)
    assert len(res) == 4 and res[3].dtype == lucid.uint8 and res[3].shape == (0,)
    np.testing.assert_allclose(res[0].numpy(), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rm.numpy(), 0.5 * x.mean((0, 2)), rtol=1e-4, atol=1e-6)


def test_native_batch_norm_gradients():
    check_grads(
        lambda x, w, b: lucid.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)[0],
        [_arr(4, 2, 3), _arr(2, seed=1), _arr(2, seed=2)],
        atol=1e-4,
    )


def test_native_batch_norm_refuses_wrong_arguments():
    x = lucid.randn(4, 3)
    with pytest.raises(ValueError, match="evaluation mode"):
        lucid.native_batch_norm(x, None, None, None, None, False, 0.1, 1e-5)
    with pytest.raises(ValueError, match="running_mean"):
        lucid.native_batch_norm(x, None, None, lucid.zeros(2), lucid.ones(3), True, 0.1, 1e-5)
    with pytest.raises(TypeError, match="training"):
        lucid.native_batch_norm(x, None, None, None, None, 1, 0.1, 1e-5)
    with pytest.raises(TypeError, match="arguments"):
        lucid._native_batch_norm_legit(x, None, None, True, 0.1)
    with pytest.raises(TypeError, match="running_mean"):
        aten._batch_norm_with_update(x, None, None, None, lucid.ones(3), 0.1, 1e-5)


# ---- backward helpers ---------------------------------------------------------------------------


def test_softmax_backward_data_is_softmaxs_gradient():
    x, g = _arr(3, 5), _arr(3, 5, seed=1)
    t = lucid.tensor(x, requires_grad=True)
    y = t.softmax(1)
    (y * lucid.tensor(g, dtype=lucid.float32)).sum().backward()
    got = lucid._softmax_backward_data(lucid.tensor(g, dtype=lucid.float32), y.detach(), 1, lucid.float32)
    np.testing.assert_allclose(got.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
    s = np.exp(x) / np.exp(x).sum(1, keepdims=True)
    np.testing.assert_allclose(got.numpy(), s * (g - (g * s).sum(1, keepdims=True)), rtol=1e-4, atol=1e-6)
    check_grads(lambda go, out: lucid._softmax_backward_data(go, out, -1, lucid.float64), [g, np.abs(x)])
    with pytest.raises(ValueError, match="one shape"):
        lucid._softmax_backward_data(lucid.randn(3), lucid.randn(4), 0, lucid.float32)


def test_native_dropout_backward_scales_the_kept_entries():
    g = _arr(4, 5)
    mask = np.random.default_rng(2).random((4, 5)) > 0.5
    got = aten.native_dropout_backward.default(lucid.tensor(g), lucid.tensor(mask), 2.0)
    np.testing.assert_allclose(got.numpy(), g * mask * 2.0, rtol=1e-6)
    with pytest.raises(TypeError, match="bool"):
        aten.native_dropout_backward(lucid.tensor(g), lucid.tensor(mask.astype(np.float32)), 2.0)


def test_max_pool2d_with_indices_backward_is_max_pool2ds_gradient():
    x = lucid.tensor(_arr(2, 3, 6, 5), dtype=lucid.float32, requires_grad=True)
    out, idx = F.max_pool2d(x, 3, 2, 1, 1, True, return_indices=True)
    g = _arr(*out.shape, seed=3)
    (out * lucid.tensor(g, dtype=lucid.float32)).sum().backward()
    got = aten.max_pool2d_with_indices_backward(lucid.tensor(g, dtype=lucid.float32), x, 3, 2, 1, 1, True, idx)
    np.testing.assert_allclose(got.numpy(), x.grad.numpy(), rtol=1e-6)
    # numpy: every gradient entry added at its argmax within the plane
    want = np.zeros((6, 30))
    np.add.at(want, (np.arange(6)[:, None], idx.numpy().reshape(6, -1)), g.reshape(6, -1))
    np.testing.assert_allclose(got.numpy(), want.reshape(2, 3, 6, 5), rtol=1e-5, atol=1e-6)
    x.grad = None
    (got * 1.0).sum().backward()  # in self's graph with a zero gradient, as PyTorch's
    assert not x.grad.numpy().any()
    with pytest.raises(ValueError, match="pooled shape"):
        aten.max_pool2d_with_indices_backward(lucid.tensor(g, dtype=lucid.float32), x, 2, 2, 0, 1, False, idx)


# ---- samplers, padding ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("padding", [0, 1, 2])
def test_grid_sampler_2d_is_grid_sample_with_coded_modes(mode, padding):
    x = lucid.tensor(_arr(1, 2, 4, 5), dtype=lucid.float32)
    grid = lucid.tensor(_arr(1, 3, 2, 2, seed=1) * 0.8, dtype=lucid.float32)
    want = F.grid_sample(
        x, grid, ("bilinear", "nearest", "bicubic")[mode], ("zeros", "border", "reflection")[padding], True
    )
    np.testing.assert_array_equal(lucid.grid_sampler_2d(x, grid, mode, padding, True).numpy(), want.numpy())


def test_grid_sampler_bilinear_against_numpy_and_3d():
    x = _arr(1, 1, 3, 4)
    grid = np.array([[[[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]]]])  # corners and centre, align_corners
    got = lucid.grid_sampler_2d(lucid.tensor(x), lucid.tensor(grid), 0, 0, True).numpy()
    centre = (x[0, 0, 1, 1] + x[0, 0, 1, 2]) / 2
    np.testing.assert_allclose(got[0, 0, 0], [x[0, 0, 0, 0], x[0, 0, 2, 3], centre], rtol=1e-5)
    v = _arr(1, 1, 2, 2, 2)
    got3 = lucid.grid_sampler_3d(lucid.tensor(v), lucid.tensor(np.zeros((1, 1, 1, 1, 3))), 0, 0, True)
    np.testing.assert_allclose(got3.numpy().ravel(), [v.mean()], rtol=1e-5)
    with pytest.raises(ValueError, match="interpolation_mode"):
        lucid.grid_sampler_3d(lucid.tensor(v), lucid.tensor(np.zeros((1, 1, 1, 1, 3))), 2, 0, True)
    with pytest.raises(ValueError, match="4-D"):
        lucid.grid_sampler_2d(lucid.tensor(v), lucid.tensor(np.zeros((1, 1, 1, 1, 3))), 0, 0, True)


def test_constant_pad_nd_as_numpy_with_crops_and_gradients():
    x = _arr(2, 3, 4).astype(np.float32)
    got = lucid.constant_pad_nd(lucid.tensor(x), (1, 2, 0, 1), 1.5)
    np.testing.assert_array_equal(got.numpy(), np.pad(x, ((0, 0), (0, 1), (1, 2)), constant_values=1.5))
    cropped = lucid.constant_pad_nd(lucid.tensor(x), (-1, 1))
    np.testing.assert_array_equal(cropped.numpy(), np.pad(x[..., 1:], ((0, 0), (0, 0), (0, 1))))
    check_grads(lambda t: lucid.constant_pad_nd(t, (2, -1, 1, 1), -3.0), [x.astype(np.float64)])
    with pytest.raises(TypeError, match="value"):
        lucid.constant_pad_nd(lucid.tensor(x), (1, 1), "zero")
    with pytest.raises(ValueError, match="even"):
        lucid.constant_pad_nd(lucid.tensor(x), (1,))


# ---- softmax and attention -------------------------------------------------------------------------


def test_safe_softmax_gives_zeros_for_fully_masked_rows():
    x = _arr(3, 4)
    x[1] = -np.inf
    x[2, :2] = -np.inf
    t = lucid.tensor(x, dtype=lucid.float32, requires_grad=True)
    got = aten._safe_softmax.default(t, 1)
    e = np.exp(x - np.max(np.where(np.isinf(x), -1e30, x), 1, keepdims=True))
    with np.errstate(invalid="ignore"):  # (the fully masked row: 0/0, set below)
        want = np.nan_to_num(e / e.sum(1, keepdims=True))
    want[1] = 0
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-7)
    (got * lucid.tensor(_arr(3, 4, seed=1), dtype=lucid.float32)).sum().backward()
    assert np.isfinite(t.grad.numpy()).all() and not t.grad.numpy()[1].any()
    check_grads(lambda a: aten._safe_softmax(a, 0), [_arr(4, 3)])
    with pytest.raises(TypeError, match="floating"):
        aten._safe_softmax(lucid.tensor([1, 2]), 0)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_for_cpu_as_numpy(causal):
    q, k, v = _arr(1, 2, 3, 4), _arr(1, 2, 5, 4, seed=1), _arr(1, 2, 5, 6, seed=2)
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(
        lucid.tensor(q), lucid.tensor(k), lucid.tensor(v), is_causal=causal
    )
    s = q @ k.swapaxes(-1, -2) / 2.0
    if causal:
        s = np.where(np.tril(np.ones((3, 5), bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    want_lse = (m + np.log(np.exp(s - m).sum(-1, keepdims=True)))[..., 0]
    np.testing.assert_allclose(lse.numpy(), want_lse, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.numpy(), np.exp(s - want_lse[..., None]) @ v, rtol=1e-4, atol=1e-5)
    check_grads(
        lambda a, b, c: aten._scaled_dot_product_flash_attention_for_cpu(a, b, c, is_causal=causal)[0], [q, k, v]
    )
    with pytest.raises(ValueError, match="4-D"):
        aten._scaled_dot_product_flash_attention_for_cpu(
            lucid.randn(2, 3, 4), lucid.randn(2, 3, 4), lucid.randn(2, 3, 4)
        )


# ---- segment reductions, hashing --------------------------------------------------------------------


def _segments_numpy(data, lengths, reduce, initial, axis):
    data = np.moveaxis(data, axis, 0) if axis == 0 else data
    out = []
    start = 0
    for n in lengths:
        part = data[start : start + n]
        start += n
        ident = {"max": -np.inf, "min": np.inf, "sum": 0.0, "mean": 0.0, "prod": 1.0}[reduce]
        acc = np.full(part.shape[1:], ident if initial is None else float(initial))
        for row in part:
            acc = {"max": np.maximum, "min": np.minimum, "sum": np.add, "mean": np.add, "prod": np.multiply}[reduce](
                acc, row
            )
        if reduce == "mean":
            acc = acc / n if n else (acc if initial is not None else np.full_like(acc, np.nan))
        out.append(acc)
    return np.stack(out)


@pytest.mark.parametrize("reduce", ["max", "min", "sum", "mean", "prod"])
@pytest.mark.parametrize("initial", [None, 2])
def test_segment_reduce_with_lengths_and_offsets_as_numpy(reduce, initial):
    data = _arr(6, 3)
    lengths = [2, 0, 3, 1]
    want = _segments_numpy(data, lengths, reduce, initial, 0)
    got = lucid._segment_reduce(lucid.tensor(data), reduce, lengths=lucid.tensor(lengths), initial=initial)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    offsets = lucid.tensor(np.concatenate([[0], np.cumsum(lengths)]))
    got = lucid._segment_reduce(lucid.tensor(data), reduce, offsets=offsets, initial=initial)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_segment_reduce_along_axis_1_with_per_row_lengths():
    data = _arr(2, 5, 3)
    lengths = np.array([[2, 0, 3], [1, 4, 0]])
    got = lucid._segment_reduce(lucid.tensor(data), "sum", lengths=lucid.tensor(lengths), axis=1, initial=1)
    want = np.stack([_segments_numpy(data[i], lengths[i], "sum", 1, 0) for i in range(2)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduce", ["max", "sum", "mean", "prod"])
def test_segment_reduce_gradients(reduce):
    lengths = lucid.tensor([2, 0, 3, 1])
    check_grads(lambda d: lucid._segment_reduce(d, reduce, lengths=lengths, initial=0.5), [_arr(6, 2)])


def test_segment_reduce_refuses_wrong_segments():
    data = lucid.randn(5)
    with pytest.raises(ValueError, match="cover"):
        lucid._segment_reduce(data, "sum", lengths=lucid.tensor([1, 2]))
    with pytest.raises(ValueError, match="reduce"):
        lucid._segment_reduce(data, "median", lengths=lucid.tensor([5]))
    with pytest.raises(TypeError, match="integer"):
        lucid._segment_reduce(data, "sum", lengths=lucid.tensor([5.0]))
    with pytest.raises(ValueError, match="exactly one"):
        lucid._segment_reduce(data, "sum")


def test_hash_tensor_is_the_xor_of_the_float64_bit_patterns():
    x = _arr(3, 4).astype(np.float32)
    bits = x.astype(np.float64).view(np.uint64)
    got = lucid.hash_tensor(lucid.tensor(x))
    assert got.dtype == lucid.int64 and got.shape == ()
    assert np.int64(got.item()).view(np.uint64) == np.bitwise_xor.reduce(bits.ravel())
    rows = lucid.hash_tensor(lucid.tensor(x), 1, keepdim=True)
    np.testing.assert_array_equal(rows.numpy().view(np.uint64), np.bitwise_xor.reduce(bits, axis=1, keepdims=True))
    ints = lucid.hash_tensor(lucid.tensor([3, 5, 6]))
    assert ints.item() == 3 ^ 5 ^ 6
    with pytest.raises(ValueError, match="mode"):
        lucid.hash_tensor(lucid.tensor(x), mode=1)
    with pytest.raises(IndexError, match="out of range"):
        lucid.hash_tensor(lucid.tensor(x), 2)


def test_the_aten_namespace_names_what_it_lacks():
    assert aten.native_layer_norm.default is lucid.native_layer_norm
    assert "default" in aten._native_batch_norm_legit.overloads()
    with pytest.raises(AttributeError, match="no operator 'not_an_op'"):
        aten.not_an_op
    with pytest.raises(AttributeError, match="no overload 'out'"):
        aten.constant_pad_nd.out
