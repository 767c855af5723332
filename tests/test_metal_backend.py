"""The Metal backend's kernels, where it serves "metal": on a Mac, and in the check build
(`make check-metal`), where the same Swift and MSL sources run against the emulated Metal
API. Elsewhere the host fallback serves "metal" and these tests do not apply.

Every kernel family the backend has must run on the GPU (no host fallback counted) and agree
with numpy and with the CPU device; a case its kernels do not cover must run on the host and
be counted under its op's name.
"""

import ast
import gc
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import lucid

pytestmark = pytest.mark.skipif(
    not lucid.metal.is_available(), reason="the host fallback serves 'metal' here; the Metal backend is not built in"
)

ROOT = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(3)
FLOATS = [lucid.float32, lucid.float16, lucid.bfloat16]
NP = {
    lucid.float32: np.float32,
    lucid.float16: np.float16,
    lucid.bfloat16: ml_dtypes.bfloat16,
    lucid.int32: np.int32,
    lucid.int64: np.int64,
}


def counts_during(fn):
    before = lucid.metal.host_fallback_counts()
    result = fn()
    after = lucid.metal.host_fallback_counts()
    return result, {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def metal(a, dtype=None):
    t = lucid.tensor(a, device="metal")
    return t if dtype is None else t.to(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv", "pow", "maximum", "minimum"])
def test_binary_float_ops_run_on_the_gpu_and_match_numpy(dtype, op):
    a = RNG.standard_normal((5, 1, 7)).astype(np.float32)
    b = np.abs(RNG.standard_normal((1, 6, 7)).astype(np.float32)) + 0.5
    a[0, 0, :3] = [np.nan, np.inf, -0.0]
    fn = {"maximum": lucid.maximum, "minimum": lucid.minimum}.get(op) or (lambda x, y: getattr(x, f"__{op}__")(y))
    ma, mb = metal(a, dtype), metal(b, dtype)
    got, counts = counts_during(lambda: fn(ma, mb).numpy())
    assert counts == {}, counts
    na, nb = a.astype(NP[dtype]).astype(np.float32), b.astype(NP[dtype]).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        ref = {
            "truediv": np.divide,
            "add": np.add,
            "sub": np.subtract,
            "mul": np.multiply,
            "pow": np.power,
            "maximum": np.maximum,
            "minimum": np.minimum,
        }[op](na, nb).astype(NP[dtype])
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(
            got.astype(np.float32),
            ref.astype(np.float32),
            rtol=1e-6 if dtype == lucid.float32 else 0,
            atol=0,
            equal_nan=True,
        )


@pytest.mark.parametrize("dtype", [lucid.int32, lucid.int64])
def test_integer_arithmetic_wraps_on_the_gpu(dtype):
    info = np.iinfo(NP[dtype])
    a = np.array([info.max, info.min, 7, -7, 3], NP[dtype])
    b = np.array([1, -1, 2, 2, 4], NP[dtype])
    (s, p, mx), counts = counts_during(
        lambda: (
            (metal(a) + metal(b)).numpy(),
            (metal(a) * metal(b)).numpy(),
            lucid.maximum(metal(a), metal(b)).numpy(),
        )
    )
    assert counts == {}, counts
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(s, a + b)
        np.testing.assert_array_equal(p, a * b)
    np.testing.assert_array_equal(mx, np.maximum(a, b))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs", "neg"])
def test_unary_ops_run_on_the_gpu_and_match_the_cpu(dtype, op):
    x = RNG.standard_normal((3, 40)).astype(np.float32) * 3
    if op in ("log", "sqrt"):
        x = np.abs(x) + 1e-3
    fn = (lambda t: -t) if op == "neg" else (lambda t: getattr(t, op)())
    mx = metal(x, dtype)
    got, counts = counts_during(lambda: fn(mx).float().numpy())
    assert counts == {}, counts
    want = fn(lucid.tensor(x).to(dtype)).float().numpy()
    tol = 2e-6 if dtype == lucid.float32 else 1e-2
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_gelu_and_its_gradient_on_the_gpu_match_the_cpu():
    x = np.linspace(-9, 9, 301).astype(np.float32)
    for approximate in ("none", "tanh"):
        xm = metal(x).requires_grad_()
        xc = lucid.tensor(x).requires_grad_()
        ym, yc = (
            lucid.nn.functional.gelu(xm, approximate=approximate),
            lucid.nn.functional.gelu(xc, approximate=approximate),
        )
        (ym * ym).sum().backward()
        (yc * yc).sum().backward()
        np.testing.assert_allclose(ym.numpy(), yc.numpy(), rtol=2e-6, atol=1e-7)
        np.testing.assert_allclose(xm.grad.numpy(), xc.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [lucid.int32, lucid.int64])
def test_integer_unary_bool_arithmetic_and_empty_reductions_run_on_the_gpu(dtype):
    info = np.iinfo(NP[dtype])
    a = np.array([info.min, -7, 0, 5, info.max], NP[dtype])
    ma = metal(a)
    mask = RNG.standard_normal((3, 4)) > 0
    other = RNG.standard_normal((3, 4)) > 0
    empty = np.zeros((0, 3), np.float32)
    (neg, relu, absolute, bool_sum, bool_product, sums), counts = counts_during(
        lambda: (
            (-ma).numpy(),
            lucid.relu(ma).numpy(),
            ma.abs().numpy(),
            (metal(mask) + metal(other)).numpy(),
            (metal(mask) * metal(other)).numpy(),
            (metal(empty).sum(0).numpy(), metal(empty).mean(0).numpy(), metal(empty.astype(np.int64)).sum(0).numpy()),
        )
    )
    assert counts == {}, counts
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(neg, -a)  # wraps: -min == min
    np.testing.assert_array_equal(relu, np.maximum(a, 0))
    np.testing.assert_array_equal(absolute, np.where(a == info.min, a, np.abs(a)))
    np.testing.assert_array_equal(bool_sum, mask | other)
    np.testing.assert_array_equal(bool_product, mask & other)
    np.testing.assert_array_equal(sums[0], [0, 0, 0])
    assert np.isnan(sums[1]).all()
    np.testing.assert_array_equal(sums[2], [0, 0, 0])


@pytest.mark.parametrize("dtype", FLOATS + [lucid.int32, lucid.int64])
def test_comparisons_and_where_run_on_the_gpu(dtype):
    a = RNG.integers(-3, 3, (4, 5)).astype(NP[dtype])
    b = RNG.integers(-3, 3, (1, 5)).astype(NP[dtype])
    ma, mb = metal(a), metal(b)
    (lt, eq, w), counts = counts_during(
        lambda: ((ma < mb).numpy(), (ma == mb).numpy(), lucid.where(ma > 0, ma, mb).float().numpy())
    )
    assert counts == {}, counts
    np.testing.assert_array_equal(lt, a < b)
    np.testing.assert_array_equal(eq, a == b)
    np.testing.assert_array_equal(w, np.where(a > 0, a, b).astype(np.float32))


def test_strided_views_and_many_dimensions():
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    t = metal(x)
    got, counts = counts_during(lambda: (t.permute(3, 1, 0, 2) * 2.0 + t.permute(3, 1, 0, 2)).numpy())
    assert counts == {}, counts
    np.testing.assert_allclose(got, 3 * x.transpose(3, 1, 0, 2), rtol=1e-6)
    # Nine dimensions that no merge can reduce to eight (a permuted operand beside a
    # contiguous one): the host runs it, counted.
    y = RNG.standard_normal((2,) * 9).astype(np.float32)
    z = RNG.standard_normal((2,) * 9).astype(np.float32)
    perm = (8, 0, 7, 1, 6, 2, 5, 4, 3)
    my, mz = metal(y), metal(z)
    got, counts = counts_during(lambda: (my.permute(*perm) + mz).numpy())
    np.testing.assert_allclose(got, y.transpose(perm) + z, rtol=1e-6)
    assert counts == {"add": 1}, counts


def test_nonzero_runs_on_the_host_and_is_counted():
    a = RNG.standard_normal((4, 6)).astype(np.float32)
    ma = metal(a)
    got, counts = counts_during(lambda: ma[ma > 0].numpy())
    np.testing.assert_array_equal(got, a[a > 0])
    assert counts == {"nonzero": 1}, counts


@pytest.mark.parametrize("dtype", FLOATS + [lucid.int32, lucid.int64])
def test_gather_and_its_gradient_scatter_add_run_on_the_gpu(dtype):
    a = (RNG.standard_normal((5, 6, 7)) * 10).astype(np.float32)
    idx = RNG.integers(0, 6, (5, 9, 4))
    ref = a.astype(NP[dtype])
    x = metal(a, dtype)
    if dtype.is_floating_point:
        x.requires_grad_()
    y, counts = counts_during(lambda: lucid.gather(x[:, :, ::2], 1, metal(idx)))
    np.testing.assert_array_equal(y.numpy(), np.take_along_axis(ref[:, :, ::2], idx, 1))
    if dtype.is_floating_point:
        w = (RNG.standard_normal(idx.shape) * 10).astype(np.float32)
        _, more = counts_during(lambda: (y * metal(w, dtype)).sum().backward())
        counts.update(more)
        # Each gradient entry sums, in float32 and rounding once, the products routed to it.
        gw = (w.astype(NP[dtype]).astype(np.float32) * 1).astype(NP[dtype]).astype(np.float64)
        want = np.zeros((5, 6, 7), np.float64)
        for i, j, k in np.ndindex(idx.shape):
            want[i, idx[i, j, k], 2 * k] += gw[i, j, k]
        tol = 1e-6 if dtype == lucid.float32 else 1e-2
        np.testing.assert_allclose(x.grad.float().numpy(), want, rtol=tol, atol=tol)
    assert not {"gather", "scatter_add"} & set(counts), counts


def test_an_index_out_of_range_on_the_gpu_is_raised_at_the_next_read():
    # As with asynchronous CUDA errors: the op returns, and the program's next synchronisation
    # (a read, lucid.metal.synchronize()) raises, naming the op and the first bad index.
    x = metal(RNG.standard_normal((5, 6, 7)).astype(np.float32))
    lucid.metal.synchronize()
    waits = lucid.metal.stats()["host_waits"]
    y = lucid.gather(x, 1, metal(np.array([[[0], [6], [-7]]] * 5)))
    z = lucid.index_select(x, 2, metal(np.array([1, 9])))
    assert lucid.metal.stats()["host_waits"] == waits  # the checks did not wait
    other = metal(np.arange(4.0, dtype=np.float32)) * 2
    with pytest.raises(IndexError, match=r"^gather: index 6 is out of bounds for dimension 1 with size 6"):
        other.numpy()
    np.testing.assert_array_equal(other.numpy(), np.arange(4.0) * 2)  # raised once; the rest goes on
    del y, z
    lucid.index_select(x, 2, metal(np.array([1, 9])))
    with pytest.raises(IndexError, match=r"index_select: index 9 is out of bounds for dimension 2 with size 7"):
        lucid.metal.synchronize()
    lucid.metal.synchronize()


@pytest.mark.parametrize("tokens", [3, 80])  # a thread per embedding column; a thread per token, adding atomically
def test_an_embeddings_backward_skips_an_index_out_of_range_and_raises_the_hosts_error(tokens):
    # The forward's check is raised only at the next synchronisation, so the backward runs
    # first with the bad index: its scatter-add must write nothing outside the gradient (one
    # row past its end is the emulated buffer's guard, which fails the command buffer when
    # written) and raise what the host raises at the forward.
    import re
    import warnings

    idx = np.arange(tokens) % 16
    idx[1] = 16
    w_host = np.ones((16, 16), np.float32)
    with pytest.raises(IndexError) as on_host:
        lucid.nn.functional.embedding(lucid.tensor(idx), lucid.tensor(w_host, requires_grad=True))
    w = metal(w_host).requires_grad_()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = lucid.nn.functional.embedding(metal(idx), w)
        (y * 2.0).sum().backward()
        with pytest.raises(IndexError, match=f"^{re.escape(str(on_host.value))}$"):
            lucid.metal.synchronize()
        grad = w.grad.numpy()
    assert not [str(c.message) for c in caught]
    want = np.zeros((16, 16), np.float32)
    for i in idx[idx < 16]:
        want[i] += 2.0
    np.testing.assert_array_equal(grad, want)


AT_ONCE = """
import numpy as np
import lucid
x = lucid.tensor(np.zeros((3, 4), np.float32), device="metal")
try:
    lucid.gather(x, 1, lucid.tensor(np.array([[0], [4], [1]]), device="metal"))
    print("no error")
except IndexError as e:
    print("IndexError", e)
"""


def test_lucid_metal_sync_raises_an_index_out_of_range_at_the_op():
    (line,) = _run_emulated(AT_ONCE, LUCID_METAL_SYNC="1")
    assert line == "IndexError gather: index 4 is out of bounds for dimension 1 with size 4", line


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kernel,stride,padding,dilation", [(2, 2, 0, 1), (3, 1, 1, 1), (3, 2, 1, 2)])
def test_max_pooling_and_its_gradient_run_on_the_gpu_like_the_cpu(dtype, kernel, stride, padding, dilation):
    a = RNG.standard_normal((2, 3, 9, 8)).astype(np.float32)
    a[0, 0, 1, 1] = np.nan
    a[1, 2, :3, :3] = 0.5  # ties
    out = {}
    for device in ("cpu", "metal"):
        x = lucid.tensor(a, device=device).to(dtype).requires_grad_()

        def run(x=x):
            return lucid.nn.functional.max_pool2d(x, kernel, stride=stride, padding=padding, dilation=dilation)

        y, counts = counts_during(run)
        (
            y.float() * lucid.tensor(np.arange(y.numel(), dtype=np.float32).reshape(y.shape), device=device)
        ).sum().backward()
        out[device] = (y.float().numpy(), x.grad.float().numpy(), counts)
    assert "max_pool2d" not in out["metal"][2] and "max_pool2d_backward" not in out["metal"][2], out["metal"][2]
    np.testing.assert_array_equal(out["metal"][0], out["cpu"][0])
    np.testing.assert_array_equal(out["metal"][1], out["cpu"][1])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 2), (1, 2, 2, 1)])
def test_convolution_runs_as_implicit_gemm_on_the_gpu(dtype, stride, padding, dilation, groups):
    x = RNG.standard_normal((2, 4, 9, 8)).astype(np.float32)
    w = RNG.standard_normal((6, 4 // groups, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    out = {}
    for device in ("cpu", "metal"):
        tx, tw, tb = (lucid.tensor(v, device=device).to(dtype).requires_grad_() for v in (x, w, b))

        def run():
            y = lucid.nn.functional.conv2d(tx, tw, tb, stride=stride, padding=padding, dilation=dilation, groups=groups)
            (
                y.float()
                * lucid.tensor(np.cos(np.arange(y.numel())).reshape(y.shape).astype(np.float32), device=device)
            ).sum().backward()
            return y.float().numpy()

        kernels = {}
        y, counts = counts_during(lambda: kernels.update(dispatches_during(lambda: kernels.setdefault("y", run()))))
        out[device] = (
            kernels.pop("y"),
            tx.grad.float().numpy(),
            tw.grad.float().numpy(),
            tb.grad.float().numpy(),
            counts,
            kernels,
        )
    assert not {"im2col", "col2im", "conv2d", "matmul"} & set(out["metal"][4]), out["metal"][4]
    # Each pass on its implicit-GEMM kernel, once; no window gathers and no separate product.
    dispatched = out["metal"][5]
    for kernel in ("conv_forward", "conv_backward_data", "conv_backward_weights"):
        assert dispatched.get(f"{kernel}_{dtype.name}") == 1, dispatched
    assert not [k for k in dispatched if k.startswith(("im2col", "col2im", "gemm", "mps"))], dispatched
    tol = {lucid.float32: 1e-5}.get(dtype, 2e-2)
    for got, want in zip(out["metal"][:4], out["cpu"][:4]):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def _conv2d_reference(x, w, stride, padding, dilation, groups, grad=None):
    """conv2d in float64 by plain loops over the kernel's taps; with `grad` (an output
    gradient), the weight's gradient instead."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow)) if grad is None else np.zeros(w.shape)
    og = o // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = xp[
                    :,
                    g * cg : (g + 1) * cg,
                    i * dilation : i * dilation + stride * (oh - 1) + 1 : stride,
                    j * dilation : j * dilation + stride * (ow - 1) + 1 : stride,
                ]
                if grad is None:
                    out[:, g * og : (g + 1) * og] += np.einsum(
                        "nchw,oc->nohw", patch, w[g * og : (g + 1) * og, :, i, j]
                    )
                else:
                    out[g * og : (g + 1) * og, :, i, j] = np.einsum(
                        "nchw,nohw->oc", patch, grad[:, g * og : (g + 1) * og]
                    )
    return out


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_stems_weight_gradient_is_split_along_its_sum_and_matches_float64(dtype):
    # A 7×7 stem from 3 to 64 channels: its weight gradient sums over 2 · 17 · 17 = 578 output
    # positions into 64 × 147 outputs (2 × 5 tiles), so it runs as two chunks of partial sums
    # (the second shorter) and one pass that adds them.
    x = RNG.standard_normal((2, 3, 33, 33)).astype(NP[dtype]).astype(np.float32)
    w = (RNG.standard_normal((64, 3, 7, 7)) / 8).astype(NP[dtype]).astype(np.float32)
    tx, tw = metal(x, dtype), metal(w, dtype).requires_grad_()
    y = lucid.nn.functional.conv2d(tx, tw, stride=2, padding=3)
    assert tuple(y.shape) == (2, 64, 17, 17)
    gy = RNG.standard_normal(tuple(y.shape)).astype(NP[dtype]).astype(np.float32)
    counts = dispatches_during(lambda: (y * metal(gy, dtype)).sum().backward())
    partial = (
        "conv_backward_weights_float32" if dtype == lucid.float32 else f"conv_backward_weights_partial_{dtype.name}"
    )
    assert counts.get(partial) == 1 and counts.get(f"conv_backward_weights_sum_{dtype.name}") == 1, counts
    assert not [k for k in counts if k.startswith(("im2col", "col2im", "gemm", "mps"))], counts
    want = _conv2d_reference(x, w, 2, 3, 1, 1, grad=gy)
    tol = {lucid.float32: 1e-5}.get(dtype, 2**-7)
    np.testing.assert_allclose(tw.grad.float().numpy(), want, rtol=tol, atol=tol * np.abs(want).max())
    np.testing.assert_allclose(y.float().numpy(), _conv2d_reference(x, w, 2, 3, 1, 1), rtol=tol, atol=tol * 8)


@pytest.mark.parametrize("dtype", FLOATS)
def test_transposed_convolution_runs_its_passes_on_the_implicit_gemm_kernels(dtype):
    # conv_transpose2d's forward is a convolution's backward-data pass, its input gradient that
    # convolution's forward and its weight gradient the backward-weights pass; checked against
    # float64 loops (the transposed convolution as the adjoint of conv2d, by finite sums).
    x = RNG.standard_normal((2, 6, 4, 5)).astype(NP[dtype]).astype(np.float32)
    w = RNG.standard_normal((6, 2, 3, 2)).astype(NP[dtype]).astype(np.float32)
    tx, tw = (metal(v, dtype).requires_grad_() for v in (x, w))
    got = {}
    counts = dispatches_during(
        lambda: got.update(y=lucid.nn.functional.conv_transpose2d(tx, tw, stride=2, padding=1, groups=2))
    )
    y = got["y"]
    # The adjoint identity <conv_transpose(x), z> = <x, conv(z)> for every z, with the
    # convolution of the same weight, stride, padding and groups.
    z = RNG.standard_normal(tuple(y.shape)).astype(np.float32)
    conv_z = _conv2d_reference(z, w, 2, 1, 1, 2)
    assert conv_z.shape == x.shape
    tol = {lucid.float32: 1e-5}.get(dtype, 2e-2)
    np.testing.assert_allclose(np.sum(y.float().numpy() * z), np.sum(x * conv_z), rtol=tol)
    assert counts.get(f"conv_backward_data_{dtype.name}") == 1, counts
    grads = dispatches_during(lambda: (y.float() * lucid.tensor(z, device="metal")).sum().backward())
    assert grads.get(f"conv_forward_{dtype.name}") == 1 and grads.get(f"conv_backward_weights_{dtype.name}") == 1, grads
    assert not [k for k in {**counts, **grads} if k.startswith(("im2col", "col2im"))], (counts, grads)
    # d<y, z>/dx = conv(z); d<y, z>/dw = d<x, conv(z)>/dw, conv's weight gradient with z as
    # its input and x as its output gradient.
    np.testing.assert_allclose(tx.grad.float().numpy(), conv_z, rtol=tol, atol=tol * np.abs(conv_z).max())
    dw = _conv2d_reference(z, w, 2, 1, 1, 2, grad=x)
    np.testing.assert_allclose(tw.grad.float().numpy(), dw, rtol=tol, atol=tol * np.abs(dw).max())


@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_and_group_norm_run_on_the_gpu_like_the_cpu(dtype):
    x = (RNG.standard_normal((4, 6, 10, 10)) * 2 + 1).astype(np.float32)
    w, b = RNG.standard_normal(100).astype(np.float32), RNG.standard_normal(100).astype(np.float32)
    out = {}
    for device in ("cpu", "metal"):
        tx = lucid.tensor(x, device=device).to(dtype).requires_grad_()
        tw, tb = (lucid.tensor(v, device=device).requires_grad_() for v in (w, b))

        def run():
            y = lucid.nn.functional.layer_norm(tx, (10, 10), tw.reshape(10, 10), tb.reshape(10, 10))
            z = lucid.nn.functional.group_norm(tx, 3)
            (
                (y.float() + z.float())
                * lucid.tensor(np.cos(np.arange(x.size)).reshape(x.shape).astype(np.float32), device=device)
            ).sum().backward()
            return y.float().numpy(), z.float().numpy()

        (y, z), counts = counts_during(run)
        out[device] = (y, z, tx.grad.float().numpy(), tw.grad.numpy(), tb.grad.numpy(), counts)
    assert out["metal"][5] == {}, out["metal"][5]
    tol = 1e-4 if dtype == lucid.float32 else 2e-2
    for got, want in zip(out["metal"][:5], out["cpu"][:5]):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def _softmax64(a, axis, log):
    z = a.astype(np.float64) - a.max(axis=axis, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=axis, keepdims=True))
    return z - lse if log else np.exp(z - lse)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,axis", [((40, 300), 1), ((6, 700, 3), 1), ((5000,), 0)])
def test_softmax_runs_in_one_gpu_kernel_rounding_once(dtype, log, shape, axis):
    # The direct kernel works in float32 and rounds once into the dtype: nearly every 16-bit
    # element is the correctly rounded value (a composed softmax rounds at every step).
    a = RNG.standard_normal(shape).astype(np.float32) * 4
    a = a.astype(NP[dtype]).astype(np.float32)
    fn = lucid.nn.functional.log_softmax if log else lucid.nn.functional.softmax
    got, counts = counts_during(lambda: fn(metal(a, dtype), dim=axis).float().numpy())
    assert counts == {}, counts
    want = _softmax64(a, axis, log)
    if dtype != lucid.float32:
        exact = got == want.astype(NP[dtype]).astype(np.float32)
        assert exact.mean() > 0.99, exact.mean()
    np.testing.assert_allclose(got, want, rtol={lucid.float32: 1e-5}.get(dtype, 1e-2), atol=1e-6)


def test_softmax_rows_with_infinities_and_nan_follow_the_cpu():
    a = RNG.standard_normal((8, 200)).astype(np.float32)
    a[0] = -np.inf
    a[1, 3] = np.inf
    a[2, 5] = np.nan
    a[3, :100] = -np.inf
    for log in (False, True):
        fn = lucid.nn.functional.log_softmax if log else lucid.nn.functional.softmax
        np.testing.assert_allclose(fn(metal(a), dim=1).numpy(), fn(lucid.tensor(a), dim=1).numpy(), rtol=1e-6)


@pytest.mark.parametrize("n", [5, 3000])  # a thread per output, and a threadgroup per output
def test_sums_with_infinities_stay_infinite(n):
    a = np.ones((2, n), np.float32)
    a[0, 1] = np.inf
    a[1, 1], a[1, 2] = np.inf, -np.inf
    got = metal(a).sum(1).numpy()
    assert got[0] == np.inf and np.isnan(got[1]), got


@pytest.mark.parametrize("dtype", FLOATS)
def test_sums_and_means_run_on_the_gpu(dtype):
    a = RNG.standard_normal((6, 5, 300)).astype(np.float32)
    ma = metal(a, dtype)
    (s_all, s_01, m_2, m_t), counts = counts_during(
        lambda: (
            ma.sum().float().numpy(),
            ma.sum((0, 1)).float().numpy(),
            ma.mean(2, keepdim=True).float().numpy(),
            ma.transpose(0, 2).mean(1).float().numpy(),
        )
    )
    assert counts == {}, counts
    x = a.astype(NP[dtype]).astype(np.float64)
    tol = 1e-6 if dtype == lucid.float32 else 1e-2
    np.testing.assert_allclose(s_all, x.sum(), rtol=tol)
    np.testing.assert_allclose(s_01, x.sum((0, 1)), rtol=tol, atol=tol)
    np.testing.assert_allclose(m_2, x.mean(2, keepdims=True), rtol=tol, atol=tol)
    np.testing.assert_allclose(m_t, x.transpose(2, 1, 0).mean(1), rtol=tol, atol=tol)


def test_integer_sums_and_arg_reductions_run_on_the_gpu():
    a = RNG.integers(-1000, 1000, (7, 9)).astype(np.int32)
    f = RNG.standard_normal((5, 8)).astype(np.float32)
    f[1, 3] = np.nan
    f[2, :] = 1.0  # ties: the first index
    ma, mf = metal(a), metal(f)
    (s, amax, amin, vmax), counts = counts_during(
        lambda: (ma.sum(1).numpy(), mf.argmax(1).numpy(), mf.argmin(0).numpy(), mf.max(1)[0].numpy())
    )
    assert counts == {}, counts
    np.testing.assert_array_equal(s, a.astype(np.int64).sum(1))
    np.testing.assert_array_equal(amax, np.argmax(f, 1))
    np.testing.assert_array_equal(amin, np.argmin(f, 0))
    np.testing.assert_array_equal(vmax, np.max(f, 1))


@pytest.mark.parametrize("dtype", FLOATS)
def test_matmul_and_linear_run_on_the_gpu_like_the_cpu(dtype):
    a = RNG.standard_normal((3, 5, 7)).astype(np.float32)
    b = RNG.standard_normal((7, 4)).astype(np.float32)  # broadcast over the batch
    w = RNG.standard_normal((6, 7)).astype(np.float32)
    bias = RNG.standard_normal(6).astype(np.float32)
    ma, mb, mw, mbias = metal(a, dtype), metal(b, dtype), metal(w, dtype), metal(bias, dtype)
    (p, lin, pt), counts = counts_during(
        lambda: (
            (ma @ mb).float().numpy(),
            lucid.nn.functional.linear(ma, mw, mbias).float().numpy(),
            (ma.transpose(1, 2) @ ma).float().numpy(),
        )
    )
    assert counts == {}, counts
    ca, cb, cw, cbias = (lucid.tensor(x).to(dtype) for x in (a, b, w, bias))
    # The same float32 arithmetic and one rounding: equal to the host's up to the order of
    # the float32 sums (exact for float16/bfloat16 outputs but for rare ties).
    tol = 1e-5 if dtype == lucid.float32 else 1e-2
    np.testing.assert_allclose(p, (ca @ cb).float().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(lin, lucid.nn.functional.linear(ca, cw, cbias).float().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(pt, (ca.transpose(1, 2) @ ca).float().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,k,n", [(16, 16, 16), (40, 33, 35), (17, 70, 64)])
def test_products_of_whole_and_partial_tiles_match_numpy(dtype, m, k, n):
    a = RNG.standard_normal((2, m, k)).astype(np.float32)
    w = RNG.standard_normal((n, k)).astype(np.float32)
    bias = RNG.standard_normal(n).astype(np.float32)
    a, w, bias = (x.astype(NP[dtype]).astype(np.float32) for x in (a, w, bias))
    got, counts = counts_during(
        lambda: lucid.nn.functional.linear(metal(a, dtype), metal(w, dtype), metal(bias, dtype)).float().numpy()
    )
    assert counts == {}, counts
    want = a.astype(np.float64) @ w.T.astype(np.float64) + bias
    tol = 1e-5 if dtype == lucid.float32 else 1e-2
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,k,n", [(1, 257, 63), (63, 65, 130), (65, 1, 257), (130, 63, 1), (257, 130, 65)])
def test_simd_products_of_odd_sizes_and_strided_operands_match_numpy(dtype, m, k, n):
    # Every other column of a (a layout Metal Performance Shaders cannot read, so float32 runs
    # lucid's kernel too), a transposed weight shared by the batch, with and without a bias:
    # sizes that end inside a tile, or are smaller than one, in each of m, n and k.
    wide = RNG.standard_normal((2, m, 2 * k)).astype(NP[dtype]).astype(np.float32)
    w = RNG.standard_normal((n, k)).astype(NP[dtype]).astype(np.float32)
    bias = RNG.standard_normal(n).astype(NP[dtype]).astype(np.float32)
    a = wide[:, :, ::2]
    ma, mw, mbias = metal(wide, dtype)[:, :, ::2], metal(w, dtype), metal(bias, dtype)
    got = {}
    counts = dispatches_during(
        lambda: got.update(
            plain=(ma @ mw.t()).float().numpy(), linear=lucid.nn.functional.linear(ma, mw, mbias).float().numpy()
        )
    )
    # (With k = 1 the reshaped input of the float32 Linear is one MPS reads: it may serve that.)
    assert counts.get(f"gemm_simd_{dtype.name}", 0) >= 1 + (dtype != lucid.float32 or k > 1), counts
    assert not [k for k in counts if k.startswith(("gemm_float", "gemm_bfloat"))], counts
    product = a.astype(np.float64) @ w.T.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(w.T).astype(np.float64) + np.abs(bias)
    tol = {lucid.float32: 2**-24, lucid.float16: 2**-11, lucid.bfloat16: 2**-8}[dtype]
    for name, want in (("plain", product), ("linear", product + bias)):
        # One rounding of a float32 sum: within the dtype's half-ulp of the exact sum (or half
        # float16's subnormal spacing), plus the float32 sum's own error over k + 1 terms (a
        # missing or repeated term is far more).
        err = np.abs(got[name] - want) - (tol * np.abs(want) + 2.0**-25 + (k + 2) * 2.0**-24 * scale)
        assert got[name].shape == want.shape and err.max() <= 0, (name, float(err.max()))


@pytest.mark.parametrize("shape", [(3, 65, 63), (130,), (1, 257)])
def test_a_float32_linear_with_a_bias_runs_on_mps_and_adds_the_bias_after(shape):
    # The product on Metal Performance Shaders (emulated here: float32 sums), then the bias
    # added in float32 by one broadcast kernel: as the host, one add after the sum.
    features_in, features_out = shape[-1], 33 if shape[-1] != 63 else 130
    x = RNG.standard_normal(shape).astype(np.float32)
    w = RNG.standard_normal((features_out, features_in)).astype(np.float32)
    bias = RNG.standard_normal(features_out).astype(np.float32)
    got = {}
    counts = dispatches_during(
        lambda: got.update(y=lucid.nn.functional.linear(metal(x), metal(w), metal(bias)).numpy())
    )
    assert counts.get("mps_matmul") == 1 and counts.get("gemm_add_bias_float32") == 1, counts
    assert not [k for k in counts if k.startswith("gemm_simd") or k.startswith("gemm_float")], counts
    want = x.astype(np.float64) @ w.T.astype(np.float64) + bias
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    # Its gradients are products without a bias (MPS) and a sum.
    tx, tw, tb = (metal(v).requires_grad_() for v in (x, w, bias))
    gy = RNG.standard_normal(want.shape).astype(np.float32)
    (lucid.nn.functional.linear(tx, tw, tb) * metal(gy)).sum().backward()
    x2, g2 = x.reshape(-1, features_in).astype(np.float64), gy.reshape(-1, features_out).astype(np.float64)
    np.testing.assert_allclose(tw.grad.numpy(), g2.T @ x2, rtol=1e-5, atol=1e-5 * np.abs(g2.T @ x2).max())
    np.testing.assert_allclose(tb.grad.numpy(), g2.sum(0), rtol=1e-5, atol=1e-5)


def dispatches_during(fn):
    before = lucid.metal.stats()["dispatches"]
    fn()
    after = lucid.metal.stats()["dispatches"]
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


@pytest.mark.parametrize("dtype", [lucid.float16, lucid.bfloat16])
def test_every_product_and_attention_of_an_autocast_training_step_runs_on_the_gpu_kernels(dtype):
    # Two attention layers (multi-head, and causal self-attention) and an MLP under autocast:
    # every product, forward and backward (with and without a bias, transposed operands, a
    # batch), is served by MPS (float16 without a bias, where MPS sums in float32, as the
    # emulated MPS does) or by the SIMD-group kernel, none by the thread-per-output one; every
    # attention by the fused kernel.
    lucid.manual_seed(0)
    model = lucid.nn.Sequential(lucid.nn.Linear(24, 48), lucid.nn.GELU(), lucid.nn.Linear(48, 24)).to("metal")
    attn = lucid.nn.MultiheadAttention(24, 4, batch_first=True).to("metal")
    x = lucid.tensor(RNG.standard_normal((2, 9, 24)).astype(np.float32), device="metal")

    def step():
        with lucid.amp.autocast("metal", dtype=dtype):
            h, _ = attn(x, x, x, need_weights=False)
            h = lucid.nn.functional.scaled_dot_product_attention(
                h.view(2, 9, 4, 6).transpose(1, 2),
                h.view(2, 9, 4, 6).transpose(1, 2),
                h.view(2, 9, 4, 6).transpose(1, 2),
                is_causal=True,
            )
            loss = model(h.transpose(1, 2).reshape(2, 9, 24)).float().pow(2).mean()
        loss.backward()
        return loss.item()

    counts = dispatches_during(step)
    products = {k: v for k, v in counts.items() if k.startswith("gemm") or k.startswith("mps")}
    want = {f"gemm_simd_{dtype.name}"} | ({"mps_matmul"} if dtype == lucid.float16 else set())
    assert set(products) == want, products
    assert sum(products.values()) >= 12, products
    # Both attentions run the fused kernel, and their backward the softmax derivative in the
    # half dtype: no float32 score matrix, forward or backward.
    assert counts.get(f"attention_64_{dtype.name}") == 2, counts
    assert counts.get(f"softmax_backward_{dtype.name}") == 2, counts
    assert not [k for k in counts if k.startswith("softmax") and "float32" in k], counts


@pytest.mark.parametrize("dtype", [lucid.float16, lucid.bfloat16])
def test_an_inspected_step_counts_on_the_gpu_and_waits_once(dtype):
    # lucid.amp.inspect()'s counts are kept by the cast_stats kernels on the device: the step
    # inside the scope makes no host wait and no host fallback; ending it reads them back.
    lucid.manual_seed(0)
    model = lucid.nn.Sequential(lucid.nn.Linear(16, 32), lucid.nn.ReLU(), lucid.nn.Linear(32, 4)).to("metal")
    x = lucid.tensor(RNG.standard_normal((8, 16)).astype(np.float32), device="metal")
    lucid.metal.synchronize()
    before = lucid.metal.stats()
    with lucid.amp.inspect() as ins:
        with lucid.amp.autocast("metal", dtype=dtype):
            model(x)
        during = lucid.metal.stats()
    counts = {
        k: v - before["dispatches"].get(k, 0)
        for k, v in during["dispatches"].items()
        if v != before["dispatches"].get(k, 0)
    }
    assert during["host_waits"] == before["host_waits"] and during["host_fallbacks"] == before["host_fallbacks"]
    # Two linears (three inputs and a result each; the second's input is already in `dtype`)
    # and a ReLU (an input and a result).
    assert counts.get("cast_stats_float32") == 5 and counts.get(f"cast_stats_{dtype.name}") == 5, counts
    assert {r.module for r in ins.report.ops} == {"0", "1", "2"} and ins.report.findings == []


@pytest.mark.parametrize("dtype", [lucid.float16, lucid.bfloat16])
def test_every_convolution_and_product_of_an_autocast_cnn_step_runs_on_the_gpu_kernels(dtype):
    # A small CNN under autocast: every convolution pass (forward, input and weight gradients,
    # a strided and a grouped layer) runs on its implicit-GEMM kernel, which reads the image's
    # windows in place; no im2col or col2im runs (so no column buffer is made); the classifier's
    # products run on the matrix units.
    lucid.manual_seed(0)
    model = lucid.nn.Sequential(
        lucid.nn.Conv2d(3, 8, 3, padding=1),
        lucid.nn.ReLU(),
        lucid.nn.MaxPool2d(2),
        lucid.nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2),
        lucid.nn.ReLU(),
        lucid.nn.Flatten(),
        lucid.nn.Linear(16 * 2 * 2, 10),
    ).to("metal")
    x = lucid.tensor(RNG.standard_normal((4, 3, 8, 8)).astype(np.float32), device="metal")
    y = lucid.tensor(RNG.integers(0, 10, 4), device="metal")

    def step():
        with lucid.amp.autocast("metal", dtype=dtype):
            loss = lucid.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss.item()

    counts = dispatches_during(step)
    convs = {k: v for k, v in counts.items() if k.startswith("conv_")}
    assert convs == {
        f"conv_forward_{dtype.name}": 2,
        f"conv_backward_data_{dtype.name}": 1,
        f"conv_backward_weights_{dtype.name}": 2,
    }, counts  # the first layer's input needs no gradient
    assert not [k for k in counts if k.startswith(("im2col", "col2im", "gemm_float", "gemm_bfloat"))], counts
    products = {k for k in counts if k.startswith(("gemm", "mps"))}
    assert products and products <= {f"gemm_simd_{dtype.name}", "mps_matmul"}, counts
    for p in model.parameters():
        assert p.grad is not None and np.isfinite(p.grad.numpy()).all()


def _attention_reference(q, k, v, g, scale, causal, allowed):
    """Attention and its gradients in float64: (out, dq, dk, dv); `allowed` is a bool [L, S]."""
    q, k, v, g = (x.astype(np.float64) for x in (q, k, v, g))
    s = q @ np.swapaxes(k, -1, -2) * scale
    l, n = s.shape[-2:]
    keep = np.tril(np.ones((l, n), bool)) if causal else (allowed if allowed is not None else np.ones((l, n), bool))
    s = np.where(keep, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) * scale
    return p @ v, ds @ k, np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ g


def _attention_variant(e, ev, dtype):
    """The fused attention kernel for heads e (queries, keys) and ev (values): a common head's
    own, with fixed loop bounds, else the generic one for heads up to 64 or 128."""
    if e == ev and e in (32, 64, 80, 96, 128):
        return f"attention_h{e}_{dtype.name}"
    return f"attention_{64 if max(e, ev) <= 64 else 128}_{dtype.name}"


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("head,masking", [(16, "none"), (16, "causal"), (16, "mask"), (80, "causal")])
def test_attention_runs_fused_on_the_gpu_and_its_backward_keeps_the_dtype(dtype, head, masking):
    # Forward: one fused kernel (online softmax, no score matrix), a generic or a fixed-head variant.
    # Backward: the products and the softmax derivative's kernel in the inputs' dtype, so a
    # half-precision attention makes no float32 tensor (no kernel of a float32 name runs).
    shape = (2, 3, 37, head)
    q, k, v, g = (RNG.standard_normal(shape).astype(NP[dtype]).astype(np.float32) for _ in range(4))
    allowed = RNG.random((37, 37)) > 0.3
    allowed[:, 0] = True
    tq, tk, tv = (metal(x, dtype).requires_grad_() for x in (q, k, v))
    mask = metal(allowed) if masking == "mask" else None
    got = {}
    fwd = dispatches_during(
        lambda: got.update(
            y=lucid.nn.functional.scaled_dot_product_attention(
                tq, tk, tv, attn_mask=mask, is_causal=masking == "causal"
            )
        )
    )
    tg = metal(g, dtype)
    bwd = dispatches_during(lambda: got["y"].backward(tg))
    assert fwd == {_attention_variant(head, head, dtype): 1}, fwd
    assert bwd.get(f"softmax_backward_{dtype.name}") == 1, bwd
    if dtype != lucid.float32:
        assert not [name for name in bwd if "float32" in name], bwd
    want = _attention_reference(q, k, v, g, head**-0.5, masking == "causal", allowed if masking == "mask" else None)
    tol = {lucid.float32: 1e-5, lucid.float16: 4e-3}.get(dtype, 3e-2)
    for got_, want_ in zip((got["y"], tq.grad, tk.grad, tv.grad), want):
        np.testing.assert_allclose(got_.float().numpy(), want_, rtol=tol, atol=tol * np.abs(want_).max())


def test_mps_sums_float16_products_in_float32_and_serves_them():
    # The self-test's probe (2048 then 4096 halves, dotted with ones) finds float32 sums in the
    # emulated MPS, and reports where float16 products run.
    probe = [c for c in lucid.metal.self_test() if c["op"] == "mps_float16_sums"]
    assert len(probe) == 1 and probe[0]["max_error"] == 0, probe
    assert "run on Metal Performance Shaders" in probe[0]["detail"], probe
    a = RNG.standard_normal((4, 33, 70)).astype(np.float16)
    b = RNG.standard_normal((4, 70, 21)).astype(np.float16)
    got = {}
    counts = dispatches_during(lambda: got.setdefault("v", (metal(a) @ metal(b)).float().numpy()))
    assert counts.get("mps_matmul") == 1 and not any(k.startswith("gemm") for k in counts), (
        counts
    )  # one call, 4 batches
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(got["v"], want.astype(np.float16).astype(np.float32), rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("dtype", [lucid.int32, lucid.int64])
def test_integer_matmul_runs_on_the_gpu_and_wraps_like_the_cpu(dtype):
    a = RNG.integers(-5, 5, (2, 3, 4))
    big = np.full((4, 2), 2**62 if dtype == lucid.int64 else 2**30, np.int64)  # sums that wrap
    ma, mbig = metal(a, dtype), metal(big, dtype)
    (got, wrapped), counts = counts_during(lambda: ((ma @ ma.transpose(1, 2)).numpy(), (ma @ mbig).numpy()))
    np.testing.assert_array_equal(got, a @ a.transpose(0, 2, 1))
    np.testing.assert_array_equal(wrapped, (lucid.tensor(a).to(dtype) @ lucid.tensor(big).to(dtype)).numpy())
    assert counts == {}, counts


def test_fills_and_conversions_on_the_gpu_keep_the_host_rounding():
    bits = np.array(
        [0x7F800001, 0xFF800001, 0x7FC00000, 0x477FF000, 0x477FEFFF, 0x33000000, 0x33000001, 0x00000001], np.uint32
    )
    x = bits.view(np.float32)
    (h, b), counts = counts_during(lambda: (metal(x).to(lucid.float16).numpy(), metal(x).to(lucid.bfloat16).numpy()))
    assert counts == {}, counts
    np.testing.assert_array_equal(h.view(np.uint16), lucid.tensor(x).to(lucid.float16).numpy().view(np.uint16))
    np.testing.assert_array_equal(b.view(np.uint16), lucid.tensor(x).to(lucid.bfloat16).numpy().view(np.uint16))
    full, counts = counts_during(lambda: lucid.full((3,), 0.1, dtype=lucid.float16, device="metal").numpy())
    assert counts == {}, counts
    np.testing.assert_array_equal(full, np.full(3, 0.1, np.float16))


# ---- the self-test ---------------------------------------------------------------------------


def test_the_self_test_passes_and_checks_every_gpu_kernel():
    report = lucid.metal.self_test()
    failed = [c for c in report if not c["passed"]]
    assert not failed, failed
    ops = {c["op"] for c in report}
    for op in (
        "fill",
        "copy",
        "add",
        "add_contig",
        "mul_strided",
        "pow",
        "add_scalar",
        "exp",
        "gelu",
        "gelu_tanh",
        "gelu_tanh_backward",
        "where",
        "lt",
        "matmul",
        "linear",
        "sum",
        "mean",
        "argmax",
        "sgd_step",
        "adam_step",
        "adam_skip",
        "adam_count",
        "unscale",
        "unscale_found",
        "update_scale",
        "max_pool2d",
        "max_pool2d_backward",
        "softmax",
        "log_softmax",
        "sum_long_rows",
        "gather",
        "scatter_add",
        "cast_to_int32",
        "cast_to_bool",
        "matmul_simd",
        "matmul_simd64",
        "sum_split",
        "argmax_long",
        "scatter_add_long",
        "im2col",
        "col2im",
        "conv_forward",
        "conv_backward_data",
        "conv_backward_weights",
        "conv_backward_weights_split",
        "softmax_backward",
        "log_softmax_backward",
        "attention",
        "attention_weights",
        "attention_causal",
        "attention_mask",
        "attention_causal_128",
        "attention_h32",
        "attention_weights_h32",
        "attention_mask_h64",
        "attention_causal_h80",
        "mean_rows_simd",
        "argmax_rows_simd",
        "normalize_rows",
        "normalize_rows_to_float32",
        "cast_from_int64",
    ):
        assert op in ops, f"{op} is not checked: {sorted(ops)}"
    assert {c["dtype"] for c in report} >= {lucid.float32, lucid.float16, lucid.bfloat16, lucid.int32, lucid.int64}
    assert all(0 <= c["max_error"] <= c["tolerance"] for c in report)


def _run_emulated(code, **env):
    """Runs `code` in a fresh interpreter on the emulated GPU with `env` set; its stdout lines.
    The self-test's cache is off unless `env` sets LUCID_CACHE_DIR: a pass remembered from a
    run without the fault would skip the checks that find it."""
    import os
    import subprocess
    import sys
    from lucid import _C

    if "metal-emulated" not in str(_C._library._find_library()):
        pytest.skip("the fault is injected through the emulated GPU of the check build")
    base = {k: v for k, v in os.environ.items() if not k.startswith("LUCID_METAL_EMULATION_")}
    if "LUCID_CACHE_DIR" not in env:
        base["LUCID_METAL_SELF_TEST_CACHE"] = "0"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**base, **env}, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()


SELF_TEST_FAULT = """
import warnings
import numpy as np
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import lucid
    x = lucid.tensor([1.5, -2.0, 4.0], device="metal")
    y = (x + x).numpy().tolist()
    before = dict(lucid.metal.stats()["dispatches"])
    m = lucid.tensor(np.eye(20, dtype=np.float32), device="metal")
    s = (m @ m).sum().numpy().tolist()
    after = lucid.metal.stats()["dispatches"]
messages = [str(w.message) for w in caught]
print(len(messages))
print(messages[0] if messages else "")
print(y, s, lucid.metal.is_available(), lucid.metal.host_fallback_counts())
print(sorted(k for k in after if after[k] != before.get(k, 0)))
print(sorted({c["op"] for c in lucid.metal.self_test() if not c["passed"]}))
"""


def test_a_family_whose_kernels_compute_wrong_results_runs_on_the_host():
    # The emulated GPU skips the float32 broadcast binary kernel: its outputs stay unwritten,
    # as a broken kernel's would. The self-test must catch it before "metal" is served, and
    # send the elementwise family (only) to the host.
    count, message, values, gpu_kernels, failed = _run_emulated(
        SELF_TEST_FAULT, LUCID_METAL_EMULATION_FAULT="binary_grid_float32"
    )
    assert count == "1", message
    assert "kernel families elementwise run on the host" in message, message
    assert "self-test found kernels that disagree" in message and "add (float32)" in message, message
    # right values: the sum from the host kernels (counted), the add on the host, the rest on the GPU
    assert values == "[3.0, -4.0, 8.0] 20.0 True {'add': 1}", values
    gpu_kernels = ast.literal_eval(gpu_kernels)
    assert "mps_matmul" in gpu_kernels and any(k.startswith("reduce") for k in gpu_kernels), gpu_kernels
    assert failed == (
        "['add', 'atan2', 'copysign', 'div', 'floorDivide', 'fmax', 'fmin', 'fmod', 'heaviside', "
        "'maximum', 'minimum', 'mul', 'pow', 'remainder', 'sub', 'truncDivide']"
    ), failed


COMPILE_FAULT = """
import warnings
import numpy as np
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import lucid
    x = lucid.tensor([1.5, -2.0, 4.0], device="metal")
    values = [((x + x) * x).numpy().tolist() for _ in range(20)]
    m = lucid.tensor(np.eye(20, dtype=np.float32), device="metal")
    (m @ m).numpy()
messages = [str(w.message) for w in caught]
report = lucid.metal.self_test()
print(len(messages))
print(messages[0].replace(chr(10), " ") if messages else "")
print(values[0], values[-1], lucid.metal.is_available())
print(sorted({(c["op"], c["passed"]) for c in report}), len(report))
print(report[0]["detail"].replace(chr(10), " "))
print(lucid.metal.stats()["library_compiles"])
"""


def test_kernels_that_do_not_compile_warn_once_with_the_compilers_message():
    # The emulated compiler refuses every kernel source: lucid must compile each library once,
    # keep the compiler's message, warn with it once, and serve "metal" on the host fallback
    # (the fills and copies are among the failed kernels).
    count, message, values, report, detail, compiles = _run_emulated(
        COMPILE_FAULT, LUCID_METAL_EMULATION_FAULT="compile"
    )
    assert count == "1", message
    assert "did not compile" in message and "injected by LUCID_METAL_EMULATION_FAULT=compile" in message, message
    assert "host fallback" in message, message
    assert values == "[4.5, 8.0, 32.0] [4.5, 8.0, 32.0] False", values
    families = len(list((ROOT / "Sources/LucidEngine/Backends/Metal/Kernels").glob("*.metal"))) - 1
    assert report == f"[('compile_library', False)] {families}", report
    assert "program_source:1:1: error: injected" in detail, detail
    assert compiles == str(families)


ONE_FAMILY = """
import warnings
import numpy as np
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import lucid
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 1, 6, 6)).astype(np.float32)
    x = lucid.tensor(a, device="metal")
    before = dict(lucid.metal.stats()["dispatches"])
    pooled = lucid.nn.functional.max_pool2d(x, 2).numpy()
    total = x.sum(dim=1).numpy()
    y = (x * 2 + 1).numpy()
    after = lucid.metal.stats()["dispatches"]
messages = [str(w.message).replace(chr(10), " ") for w in caught]
want_pool = a.reshape(4, 1, 3, 2, 3, 2).max(axis=(3, 5))
print(len(messages))
print(messages[0] if messages else "")
print(lucid.metal.is_available(), sorted(lucid.metal.host_fallback_counts()))
errors = [pooled - want_pool, total - a.sum(axis=1), y - (a * 2 + 1)]
print(*(float(np.abs(e).max()) for e in errors))
print(sorted(k for k in after if after[k] != before.get(k, 0)))
print(sorted({c["op"] for c in lucid.metal.self_test() if not c["passed"]}))
"""


def test_a_family_that_does_not_compile_runs_on_the_host_and_the_others_on_the_gpu():
    # Only Pooling.metal's library fails to compile: max pooling runs on the host kernels (with
    # the right values), reductions and elementwise ops on the GPU, and one warning carries the
    # compiler's message.
    count, message, state, errors, gpu_kernels, failed = _run_emulated(
        ONE_FAMILY, LUCID_METAL_EMULATION_FAULT="compile:Pooling"
    )
    assert count == "1", message
    assert "kernel families pooling run on the host" in message, message
    assert "program_source:12:5: error: use of undeclared identifier 'broken'" in message, message
    assert state == "True ['max_pool2d']", state
    assert errors == "0.0 0.0 0.0", errors
    gpu_kernels = ast.literal_eval(gpu_kernels)
    assert not any(k.startswith("max_pool") for k in gpu_kernels), gpu_kernels
    assert any(k.startswith("reduce") for k in gpu_kernels) and any(k.startswith("binary") for k in gpu_kernels)
    assert failed == "['compile_library']", failed


def test_a_pipeline_that_does_not_build_sends_its_family_to_the_host_not_an_unwritten_output():
    # Building the pipeline of the float32 max-pooling kernel fails: its op must run (on the
    # host), never leave its output unwritten.
    count, message, state, errors, gpu_kernels, failed = _run_emulated(
        ONE_FAMILY, LUCID_METAL_EMULATION_FAULT="pipeline:max_pool2d_float32"
    )
    assert count == "1", message
    assert "kernel families pooling run on the host" in message, message
    assert "the pipeline of kernel max_pool2d_float32 (Pooling.metal) did not build" in message, message
    assert "injected by LUCID_METAL_EMULATION_FAULT=pipeline:max_pool2d_float32" in message, message
    assert state == "True ['max_pool2d']", state
    assert errors == "0.0 0.0 0.0", errors
    gpu_kernels = ast.literal_eval(gpu_kernels)
    assert not any(k.startswith("max_pool") for k in gpu_kernels), gpu_kernels
    assert failed == "['compile_library']", failed


DEVICE_GATE = """
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import lucid
    x = lucid.tensor([1.5, -2.0, 4.0], device="metal")
    y = (x * x).numpy().tolist()
messages = [str(w.message) for w in caught]
print(len(messages))
print(messages[0] if messages else "")
print(y, lucid.metal.is_available())
try:
    lucid.metal.self_test()
    print("self_test ran")
except RuntimeError as e:
    print("self_test:", e)
"""


@pytest.mark.parametrize(
    "env, why",
    [
        # An Intel or AMD GPU of a Mac: Metal 3, and no Apple family.
        ({"LUCID_METAL_EMULATION_FAMILIES": "mac2,common1,common2,common3,metal3"}, "lacks the Apple7 GPU family"),
        # An A13 (Apple6): no Apple7 and no Metal 3.
        (
            {"LUCID_METAL_EMULATION_FAMILIES": "apple1,apple2,apple3,apple4,apple5,apple6,common3"},
            "lacks the Apple7 GPU family (Apple silicon: M1, A14 or later) and Metal 3",
        ),
        # Apple7 without Metal 3 (an older system).
        ({"LUCID_METAL_EMULATION_FAMILIES": "apple7,common3"}, "lacks Metal 3"),
        # SIMD groups of 64 threads.
        ({"LUCID_METAL_EMULATION_EXECUTION_WIDTH": "64"}, "runs SIMD groups of 64 threads"),
    ],
)
def test_a_gpu_the_kernels_are_not_written_for_runs_metal_on_the_host_fallback(env, why):
    count, message, values, self_test = _run_emulated(DEVICE_GATE, **env)
    assert count == "1", message
    assert why in message and "host fallback" in message, message
    assert values == "[2.25, 4.0, 16.0] False", values
    if "LUCID_METAL_EMULATION_FAMILIES" in env:
        assert self_test.startswith("self_test:") and why in self_test, self_test
    else:
        assert self_test == "self_test ran", self_test


SELF_TEST_CACHE = """
import lucid
x = lucid.tensor([1.5, -2.0, 4.0], device="metal")
(x + x).numpy()
d = lucid.metal.stats()["dispatches"]
print(sum(v for k, v in d.items() if k != "mps_matmul"))
print(lucid.metal.is_available())
"""


def test_the_self_test_is_remembered_per_library_source_and_device(tmp_path):
    # A first start runs every library's checks and remembers the passes; the next start on the
    # same device runs none (only the user's one dispatch); another device checks again.
    first, available = _run_emulated(SELF_TEST_CACHE, LUCID_CACHE_DIR=str(tmp_path))
    assert available == "True"
    assert int(first) > 100, first
    keys = (tmp_path / "metal-self-test").read_text().split()
    families = len(list((ROOT / "Sources/LucidEngine/Backends/Metal/Kernels").glob("*.metal"))) - 1
    assert len(keys) == families, keys
    assert _run_emulated(SELF_TEST_CACHE, LUCID_CACHE_DIR=str(tmp_path)) == ["1", "True"]
    other = _run_emulated(SELF_TEST_CACHE, LUCID_CACHE_DIR=str(tmp_path), LUCID_METAL_EMULATION_DEVICE_NAME="M9")
    assert other == [first, "True"], other
    assert len((tmp_path / "metal-self-test").read_text().split()) == 2 * families
    # A library that fails is not remembered: it is checked, and declined, at every start.
    for _ in range(2):
        count, message, *_ = _run_emulated(
            SELF_TEST_FAULT, LUCID_CACHE_DIR=str(tmp_path / "fault"), LUCID_METAL_EMULATION_FAULT="binary_grid_float32"
        )
        assert "kernel families elementwise run on the host" in message, message
    assert len((tmp_path / "fault" / "metal-self-test").read_text().split()) == families - 1


# ---- kernel libraries compiled ahead of time (the emulation's stand-ins) ----------------------

PREBUILT = """
import json
import warnings
import numpy as np
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import lucid
    a = np.arange(-12, 12, dtype=np.float32).reshape(1, 1, 4, 6) / 4
    x = lucid.tensor(a, device="metal")
    before = dict(lucid.metal.stats()["dispatches"])
    pooled = lucid.nn.functional.max_pool2d(x, 2).numpy()
    soft = lucid.softmax(x, dim=-1).numpy()
    y = (x * x + x).numpy()
    after = lucid.metal.stats()["dispatches"]
want_soft = np.exp(a - a.max(-1, keepdims=True))
want_soft /= want_soft.sum(-1, keepdims=True)
errors = [pooled - a.reshape(1, 1, 2, 2, 3, 2).max(axis=(3, 5)), soft - want_soft, y - (a * a + a)]
print(json.dumps({
    "messages": [str(w.message) for w in caught],
    "available": lucid.metal.is_available(),
    "libraries": lucid.metal.kernel_libraries(),
    "compiles": lucid.metal.stats()["library_compiles"],
    "dispatches": sum(v for k, v in after.items() if k != "mps_matmul"),
    "ours": sum(after[k] - before.get(k, 0) for k in after if k != "mps_matmul"),
    "fallbacks": lucid.metal.host_fallback_counts(),
    "error": max(float(np.abs(e).max()) for e in errors),
}))
"""


def _families():
    return sorted(
        p.stem.lower()
        for p in (ROOT / "Sources/LucidEngine/Backends/Metal/Kernels").glob("*.metal")
        if p.stem != "Common"
    )


def _emulated_metallibs(out):
    """tools/build_metallibs.py --emulated: the emulation's stand-in for each family's .metallib, and manifest.json."""
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_metallibs.py"), "--emulated", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _run_prebuilt(**env):
    import json

    (line,) = _run_emulated(PREBUILT, **{"LUCID_METALLIB_DIR": "", **env})
    result = json.loads(line)
    assert result["available"] and result["error"] < 1e-6 and result["fallbacks"] == {}, result
    assert sorted(result["libraries"]) == _families(), result["libraries"]
    return result


def _engine_beside(folder):
    """A copy of the check build's engine in `folder`, so that its own folder's metal/ can be set up."""
    import shutil

    from lucid import _C

    folder.mkdir()
    engine = folder / _C._library._find_library().name
    shutil.copy(_C._library._find_library(), engine)
    return engine


def test_the_libraries_compiled_ahead_of_time_beside_the_engine_are_loaded_not_compiled(tmp_path):
    # A wheel's layout: <the engine's folder>/metal/<family>.metallib and manifest.json. Every
    # family's library is loaded from there (none compiled), self-tested, and computes right.
    engine = _engine_beside(tmp_path / "lib")
    _emulated_metallibs(engine.parent / "metal")
    result = _run_prebuilt(LUCID_ENGINE_LIBRARY=str(engine))
    assert result["messages"] == [] and result["compiles"] == 0, result
    for family, library in result["libraries"].items():
        assert library == {
            "origin": "prebuilt",
            "detail": str(engine.parent / "metal" / f"{family}.metallib"),
            "error": "",
        }
    assert result["dispatches"] - result["ours"] > 100, result  # the self-test ran on the loaded libraries


def test_the_self_test_of_a_prebuilt_library_is_remembered_by_its_file(tmp_path):
    # The cache keys a library compiled ahead of time by its file, not by its source: a pass of
    # the libraries compiled from source does not stand for them, and theirs is remembered.
    libs = _emulated_metallibs(tmp_path / "metallib")
    cache = {"LUCID_CACHE_DIR": str(tmp_path / "cache")}
    source = _run_prebuilt(**cache)
    assert source["compiles"] == len(_families()) and source["dispatches"] - source["ours"] > 100, source
    first = _run_prebuilt(LUCID_METALLIB_DIR=str(libs), **cache)
    assert first["compiles"] == 0 and first["dispatches"] == source["dispatches"], (first, source)
    again = _run_prebuilt(LUCID_METALLIB_DIR=str(libs), **cache)
    assert again["compiles"] == 0 and again["dispatches"] == again["ours"] == source["ours"], (again, source)
    assert len((tmp_path / "cache" / "metal-self-test").read_text().split()) == 2 * len(_families())


def test_a_library_made_from_other_sources_is_compiled_from_source_with_one_warning(tmp_path):
    import json

    libs = _emulated_metallibs(tmp_path / "metallib")
    manifest = json.loads((libs / "manifest.json").read_text())
    manifest["families"]["softmax"]["sha256"] = "0" * 64
    (libs / "manifest.json").write_text(json.dumps(manifest))
    result = _run_prebuilt(LUCID_METALLIB_DIR=str(libs))
    (message,) = result["messages"]
    assert f"compiled ahead of time in {libs} were not used for softmax, which are compiled from source" in message, (
        message
    )
    assert "softmax.metallib was made from other sources than this engine's (SHA-256 000000000000" in message, message
    assert result["compiles"] == 1, result
    softmax = result["libraries"].pop("softmax")
    assert softmax["origin"] == "source" and "made from other sources" in softmax["detail"] and softmax["error"] == ""
    assert {v["origin"] for v in result["libraries"].values()} == {"prebuilt"}


@pytest.mark.parametrize(
    "damage, why",
    [
        (
            lambda f: f.write_bytes(b"\xcf\xfa\xed\xfe not a library"),
            "pooling.metallib did not load: Invalid library file",
        ),
        (lambda f: f.unlink(), "pooling.metallib did not load: Error reading library file"),
        # Made with fast math on: the emulation refuses it, as the engine's own compile options do.
        (
            lambda f: f.write_text(f.read_text().replace(" -fno-fast-math", "")),
            "pooling.metallib did not load: lucid's kernels must be compiled with -std=metal3.1 and -fno-fast-math",
        ),
    ],
)
def test_a_library_that_does_not_load_is_compiled_from_source_with_one_warning(tmp_path, damage, why):
    libs = _emulated_metallibs(tmp_path / "metallib")
    damage(libs / "pooling.metallib")
    result = _run_prebuilt(LUCID_METALLIB_DIR=str(libs))
    (message,) = result["messages"]
    assert "were not used for pooling, which are compiled from source instead: pooling: " + why in message, message
    assert result["compiles"] == 1, result
    pooling = result["libraries"].pop("pooling")
    assert pooling["origin"] == "source" and pooling["detail"].startswith(why) and pooling["error"] == ""
    assert {v["origin"] for v in result["libraries"].values()} == {"prebuilt"}


def test_a_folder_without_a_manifest_sends_every_family_to_source_with_one_warning(tmp_path):
    libs = _emulated_metallibs(tmp_path / "metallib")
    (libs / "manifest.json").unlink()
    result = _run_prebuilt(LUCID_METALLIB_DIR=str(libs))
    (message,) = result["messages"]
    assert "were not used for any kernel family" in message and "the folder has no manifest.json" in message, message
    assert result["compiles"] == len(_families())


def test_without_a_folder_of_prebuilt_libraries_every_family_is_compiled_from_source_silently(tmp_path):
    # Neither beside the engine (an editable install) nor where LUCID_METALLIB_DIR points.
    engine = _engine_beside(tmp_path / "lib")
    for env in ({"LUCID_ENGINE_LIBRARY": str(engine)}, {"LUCID_METALLIB_DIR": str(tmp_path / "missing")}):
        result = _run_prebuilt(**env)
        assert result["messages"] == [] and result["compiles"] == len(_families()), result
        assert {(v["origin"], v["detail"]) for v in result["libraries"].values()} == {("source", "")}, result


FEW_THREADS = """
import numpy as np
import lucid
rng = np.random.default_rng(0)
a = rng.standard_normal((3, 40, 24)).astype(np.float16)
w = rng.standard_normal((33, 24)).astype(np.float16)
bias = rng.standard_normal(33).astype(np.float16)
ma, mw, mb = (lucid.tensor(t, device="metal") for t in (a, w, bias))  # after the self-test
before = lucid.metal.stats()["dispatches"]
got = lucid.nn.functional.linear(ma, mw, mb).float().numpy()  # (a bias: never MPS)
after = lucid.metal.stats()["dispatches"]
want = (a.astype(np.float32) @ w.T.astype(np.float32) + bias).astype(np.float16).astype(np.float32)
print(float(np.abs(got - want).max()))
print(sorted(k for k in after if after[k] != before.get(k, 0) and k.startswith("gemm")))
print(lucid.metal.is_available())
"""


def test_products_on_a_pipeline_that_allows_fewer_than_128_threads_stay_right():
    # The SIMD-group product needs four SIMD groups (128 threads) per threadgroup; a pipeline
    # that allows fewer must not run it with fewer (a quarter of each tile would be missing).
    err, kernels, available = _run_emulated(FEW_THREADS, LUCID_METAL_EMULATION_MAX_THREADS="64")
    assert float(err) <= 0.02, err
    assert kernels == "['gemm_float16']", kernels
    assert available == "True"


# ---- the command queue: commits without waiting, buffers back from completion handlers -----


def _delta(before, after):
    return {k: after[k] - before[k] for k in before if k != "dispatches"}


def test_each_kernel_library_is_compiled_once():
    x = metal(RNG.standard_normal(64).astype(np.float32))
    for _ in range(3):
        ((x * 2).exp() @ x).numpy()
    families = len(list((ROOT / "Sources/LucidEngine/Backends/Metal/Kernels").glob("*.metal"))) - 1
    assert lucid.metal.stats()["library_compiles"] == families
    # No folder of libraries compiled ahead of time beside the check build: all from source.
    libraries = lucid.metal.kernel_libraries()
    assert len(libraries) == families and {(v["origin"], v["detail"], v["error"]) for v in libraries.values()} == {
        ("source", "", "")
    }


def test_queued_work_is_committed_without_waiting_and_a_read_waits_once():
    x = metal(RNG.standard_normal(1000).astype(np.float32))
    y = x
    lucid.metal.synchronize()
    before = lucid.metal.stats()
    for _ in range(200):
        y = y * 0.5 + x
    during = lucid.metal.stats()
    result = y.numpy()
    after = lucid.metal.stats()
    d = _delta(before, during)
    assert d["host_waits"] == 0, d
    assert d["command_buffers"] >= 400 // 32, d  # committed along the way, not at the read
    assert sum(during["dispatches"].values()) - sum(before["dispatches"].values()) == 400
    assert _delta(during, after)["host_waits"] == 1
    want = x.numpy()
    expect = want.copy()
    for _ in range(200):
        expect = (expect * np.float32(0.5)).astype(np.float32) + want
    np.testing.assert_allclose(result, expect, rtol=1e-5, atol=1e-5)


def test_a_loop_that_never_reads_keeps_memory_bounded():
    w = metal(RNG.standard_normal((32, 32)).astype(np.float32) * 0.1)
    x = metal(RNG.standard_normal((8, 32)).astype(np.float32))
    for _ in range(300):  # fill the cache with what a window of queued work holds
        y = (x @ w).tanh()
    lucid.metal.synchronize()
    before = lucid.metal.stats()
    for _ in range(10_000):
        y = (x @ w).tanh()
    after = lucid.metal.stats()
    d = _delta(before, after)
    assert d["new_buffers"] == 0, d
    assert d["host_waits"] == 0, d
    assert after["cached_bytes"] <= before["cached_bytes"] + (1 << 20), (before, after)
    np.testing.assert_allclose(y.numpy(), np.tanh(x.numpy() @ w.numpy()), rtol=1e-5, atol=1e-6)


def test_a_steady_state_training_step_makes_no_buffers_and_never_waits():
    # An embedding and a cross-entropy loss: both gather, and neither waits for its index check.
    lucid.manual_seed(0)
    model = lucid.nn.Sequential(
        lucid.nn.Embedding(50, 16), lucid.nn.Linear(16, 32), lucid.nn.ReLU(), lucid.nn.Linear(32, 10)
    ).to("metal")
    opt = lucid.optim.Adam(model.parameters(), lr=1e-3)
    tokens = metal(RNG.integers(0, 50, 8))
    target = metal(RNG.integers(0, 10, 8))

    def step():
        opt.zero_grad()
        loss = lucid.nn.functional.cross_entropy(model(tokens), target)
        loss.backward()
        opt.step()
        return loss

    # A step is about 76 dispatches and a command buffer 32, so a step starts at each of the
    # places of a command buffer it can start at within 8 steps: the cache then holds what
    # every one needs. Measured straight on: a synchronize starts the command buffers over,
    # and the first steps after one may need a buffer (a flag) more.
    for _ in range(40):
        loss = step()
    before = lucid.metal.stats()
    for _ in range(40):
        loss = step()
    after = lucid.metal.stats()
    d = _delta(before, after)
    assert d["new_buffers"] == 0, d
    assert d["host_waits"] == 0, d
    assert d["host_fallbacks"] == 0, d
    assert np.isfinite(loss.item())


class _TinyGPT(lucid.nn.Module):
    """A one-block causal transformer, nanoGPT's shape: token and position embeddings, fused
    QKV, causal attention, a GELU MLP and a tied language-model head."""

    def __init__(self, vocab=40, dim=32, heads=4, block=16):
        super().__init__()
        nn = lucid.nn
        self.heads = heads
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
        self.ln1, self.ln2, self.ln_f = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        b, t = idx.shape
        x = self.tok(idx) + self.pos(lucid.arange(t, device=idx.device))
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=2)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        y = lucid.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, -1))
        x = x + self.mlp(self.ln2(x))
        return self.head(self.ln_f(x))


def _cnn_step():
    nn = lucid.nn
    lucid.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(4 * 4 * 4, 10),
    ).to("metal")
    opt = lucid.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x = metal(RNG.standard_normal((4, 1, 8, 8)).astype(np.float32))
    y = metal(RNG.integers(0, 10, 4))
    return model, opt, lambda: lucid.nn.functional.cross_entropy(model(x), y)


def _gpt_step():
    lucid.manual_seed(0)
    model = _TinyGPT().to("metal")
    opt = lucid.optim.AdamW(model.parameters(), lr=1e-3)
    idx = metal(RNG.integers(0, 40, (2, 16)))
    target = metal(RNG.integers(0, 40, (2, 16)))
    return model, opt, lambda: lucid.nn.functional.cross_entropy(model(idx).view(-1, 40), target.view(-1))


@pytest.mark.parametrize("make", [_cnn_step, _gpt_step], ids=["cnn", "gpt"])
def test_a_float16_autocast_step_with_a_grad_scaler_never_waits(make):
    # GradScaler's scale, found-inf flag and growth tracker stay on the device, and SGD and
    # AdamW skip on it: a step waits for nothing the program does not read itself. Every
    # fourth loss is infinite, so that step is skipped and the scale backs off; the three clean
    # steps between grow it back.
    # What earlier tests left (tensors, cached buffers) would make the cache's history theirs.
    gc.collect()
    lucid.metal.synchronize()
    lucid.empty_cache()
    model, opt, loss_fn = make()
    scaler = lucid.amp.GradScaler("metal", init_scale=2.0**10, growth_interval=3)

    def step(i):
        opt.zero_grad()
        with lucid.amp.autocast("metal", dtype=lucid.float16):
            loss = loss_fn()
        if i % 4 == 3:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    # What a step needs from the cache depends on where it starts in a command buffer (32
    # dispatches), in the batch of deferred handle releases (256) and in the cycle of skipped
    # steps (4): all powers of two, so 256 steps see every combination, and the cache then
    # holds what each needs.
    for i in range(256):
        step(i)
    lucid.metal.synchronize()
    before = lucid.metal.stats()
    for i in range(256, 296):
        step(i)
    after = lucid.metal.stats()
    d = _delta(before, after)
    assert d["host_waits"] == 0, d
    assert d["new_buffers"] == 0, d
    assert d["host_fallbacks"] == 0, d
    assert np.isfinite(step(296).item())
    assert scaler.get_scale() == 2.0**10  # grown after each three clean steps, halved after each skip


# ---- optimizers --------------------------------------------------------------------------


def _train(device, opt_factory, steps=3):
    lucid.manual_seed(5)
    model = lucid.nn.Linear(6, 4)
    model.to(device)
    opt = opt_factory(model.parameters())
    x = lucid.tensor(np.random.default_rng(11).standard_normal((5, 6)).astype(np.float32), device=device)
    for _ in range(steps):
        opt.zero_grad()
        (model(x) ** 2).mean().backward()
        opt.step()
    return [p.float().numpy() for p in model.parameters()]


@pytest.mark.parametrize(
    "name,factory",
    [
        ("sgd", lambda ps: lucid.optim.SGD(ps, lr=0.1)),
        (
            "sgd momentum nesterov wd",
            lambda ps: lucid.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
        ),
        ("adam", lambda ps: lucid.optim.Adam(ps, lr=0.01)),
        ("adamw maximize", lambda ps: lucid.optim.AdamW(ps, lr=0.01, weight_decay=0.1, maximize=True)),
    ],
)
def test_optimizer_steps_run_on_the_gpu_like_the_cpu(name, factory):
    want = _train("cpu", factory)
    got, counts = counts_during(lambda: _train("metal", factory))
    assert not {k for k in counts if k in ("sgd_step", "adam_step")}, counts
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
def test_unscale_runs_on_the_gpu_and_finds_infinities(dtype):
    g = RNG.standard_normal((4, 33)).astype(np.float32) * 100
    clean = metal(g, dtype)
    bad = g.copy()
    bad[2, 7] = np.inf
    dirty = metal(bad, dtype)
    p1 = lucid.nn.Parameter(metal(np.zeros((4, 33), np.float32), dtype))
    p2 = lucid.nn.Parameter(metal(np.zeros((4, 33), np.float32), dtype))
    p1.grad, p2.grad = clean, dirty
    opt = lucid.optim.SGD([p1, p2], lr=0.1)
    scaler = lucid.amp.GradScaler("metal", init_scale=4.0)
    _, counts = counts_during(lambda: scaler.unscale_(opt))
    assert "unscale" not in counts, counts
    np.testing.assert_allclose(p1.grad.float().numpy(), (g.astype(NP[dtype]).astype(np.float32) / 4), rtol=1e-2)
    # The infinity was found: the step is skipped (the parameters stay zero) and the scale
    # backs off.
    scaler.step(opt)
    scaler.update()
    np.testing.assert_array_equal(p1.float().numpy(), 0)
    assert scaler.get_scale() == 2.0


def test_freed_buffers_are_reused_only_after_the_gpu_is_done_with_them():
    # Each product is queued, not run, when it is freed; the new tensor written from the host
    # right after must not get its buffer (the emulation stops the process if the host
    # touches memory an unfinished command buffer uses).
    x = metal(np.arange(4096, dtype=np.float32))
    kept = []
    for i in range(20):
        y = x * 2.0
        kept.append(y + 1.0)  # queued work reading y
        del y
        z = metal(np.full(4096, float(i), np.float32))
        kept.append(z * 1.0)
    for i in range(20):
        np.testing.assert_array_equal(kept[2 * i].numpy(), np.arange(4096) * 2.0 + 1.0)
        np.testing.assert_array_equal(kept[2 * i + 1].numpy(), np.full(4096, float(i)))
    del kept, x
    lucid.metal.synchronize()
    before = lucid.memory_allocated("metal")
    a = metal(np.ones(4096, np.float32))  # a cached buffer serves it
    assert lucid.memory_allocated("metal") - before == 4096 * 4
    del a
    assert lucid.empty_cache() >= 4096 * 4


OUT_OF_ORDER = """
import gc
import warnings
import numpy as np
import lucid

warnings.simplefilter("error")  # a failed command buffer's warning fails the run
x = lucid.tensor(np.arange(4096, dtype=np.float32), device="metal")
sums, written = [], []
for i in range(160):
    y = x * 2.0
    sums.append(y + 1.0)  # queued work reading y, which is freed at once
    del y
    gc.collect()
    # Host writes into new tensors: none may get a buffer that a queued kernel still reads.
    written += [lucid.tensor(np.full(4096, float(i + k), np.float32), device="metal") for k in range(3)]
    if i == 40:
        # A flag set in one command buffer, read only once that one has completed.
        lucid.gather(x.reshape(64, 64), 1, lucid.tensor(np.array([[64]] * 64), device="metal"))
try:
    lucid.metal.synchronize()
    print("no error")
except IndexError as e:
    print(e)
print(all(np.array_equal(s.numpy(), np.arange(4096) * 2.0 + 1.0) for s in sums))
print(all(np.array_equal(w.numpy(), np.full(4096, float(i // 3 + i % 3))) for i, w in enumerate(written)))
print(lucid.metal.stats()["command_buffers"] > 8)
"""


def test_command_buffers_that_complete_out_of_order_free_nothing_early():
    # Metal promises only that a command buffer starts after the ones committed before it: a
    # later one may complete first. The emulated GPU then holds completions back and delivers
    # them shuffled; it stops the process if the host touches memory (a recycled buffer, a
    # flag, a result) that a command buffer which has not completed still uses.
    error, first, second, committed = _run_emulated(OUT_OF_ORDER, LUCID_METAL_EMULATION_COMPLETION="shuffled")
    assert error == "gather: index 64 is out of bounds for dimension 1 with size 64", error
    assert first == second == committed == "True"


ROWS = """
import numpy as np
import lucid

rng = np.random.default_rng(5)
x = lucid.tensor(rng.standard_normal((37, 41)).astype(np.float32), device="metal", requires_grad=True)
idx = lucid.tensor(rng.integers(0, 37, (29, 41)), device="metal")
y = lucid.gather(x, 0, idx)
z = (y[:, ::2].exp() * 3.0 - x[:29, ::2]).sum(1)
z.sum().backward()
outs = [y, z, x.grad, x.t().contiguous(), (x > 0.5).int().sum(0), x.argmax(1), x.half().float()]
print(repr([o.numpy().tolist() for o in outs]))
print([c["op"] for c in lucid.metal.self_test() if not c["passed"]])
"""


def test_dispatches_split_into_rows_compute_what_one_row_does():
    # A thread's position in the grid is 32-bit: the 1-D kernels take a 64-bit index from a
    # 2-D grid of rows, so that a count of 2^32 or more does not wrap. Rows of 2^30 threads
    # need tensors of many GiB; LUCID_METAL_ROW_THREADS makes them 7 threads long here.
    one_row, _ = _run_emulated(ROWS)
    rows, failed = _run_emulated(ROWS, LUCID_METAL_ROW_THREADS="7")
    assert rows == one_row
    assert failed == "[]", failed  # every kernel the self-test checks, in rows


def test_synchronize_between_queued_ops_keeps_results_right():
    x = metal(RNG.standard_normal((64, 64)).astype(np.float32))
    y = (x * 2.0 + 1.0).exp()
    lucid.metal.synchronize()  # the queued kernels finish here...
    lucid.metal.synchronize()  # ...and a second call finds nothing to wait for
    np.testing.assert_allclose(y.numpy(), np.exp(x.numpy() * 2 + 1), rtol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
def test_contiguous_elementwise_ops_take_the_contiguous_kernels_and_agree_with_the_strided_ones(dtype):
    # Same-shape contiguous operands run the four-elements-a-thread kernels (including a tail
    # that is not a multiple of four); a broadcast or a transposed operand, the strided ones.
    a = RNG.standard_normal((7, 37)).astype(np.float32)
    b = RNG.standard_normal((7, 37)).astype(np.float32)
    ma, mb = metal(a, dtype), metal(b, dtype)
    got = {}
    counts = dispatches_during(
        lambda: got.update(
            add=(ma * mb).float().numpy(), scalar=(ma - 0.5).float().numpy(), exp=ma.exp().float().numpy()
        )
    )
    name = dtype.name
    ops = {k: v for k, v in counts.items() if k.startswith(("binary", "unary"))}
    assert ops == {f"binary_contig_{name}": 1, f"binary_scalar_contig_{name}": 1, f"unary_contig_{name}": 1}, counts
    strided = {}
    counts = dispatches_during(
        lambda: strided.update(
            add=(ma.t() * mb.t()).t().float().numpy(),
            scalar=(ma.t() - 0.5).t().float().numpy(),
            exp=ma.t().exp().t().float().numpy(),
        )
    )
    assert {k for k in counts if "contig" in k} == set(), counts
    for key in got:
        np.testing.assert_array_equal(got[key], strided[key], err_msg=key)
    ca, cb = lucid.tensor(a).to(dtype), lucid.tensor(b).to(dtype)
    np.testing.assert_array_equal(got["add"], (ca * cb).float().numpy())


@pytest.mark.parametrize("dtype", FLOATS + [lucid.int32, lucid.int64])
def test_broadcast_binary_ops_run_as_a_grid_without_division(dtype):
    # A bias over rows, a per-channel scale over [N, C, H, W], a column against a row: layouts
    # that merge into three dimensions or fewer run the grid kernel, and agree with numpy.
    floating = dtype in FLOATS
    draw = (lambda *s: RNG.standard_normal(s).astype(np.float32)) if floating else (lambda *s: RNG.integers(-9, 9, s))
    import operator

    cases = [
        (draw(5, 33), draw(33), operator.add),
        (draw(2, 3, 5, 7), draw(1, 3, 1, 1), operator.mul),
        (draw(6, 1), draw(1, 9), operator.sub),
    ]
    for x, y, fn in cases:
        if floating:
            x, y = (v.astype(NP[dtype]).astype(np.float32) for v in (x, y))
        mx, my = metal(x, dtype), metal(y, dtype)
        got = {}
        counts = dispatches_during(lambda: got.update(v=fn(mx, my)))
        assert {k for k in counts if k.startswith("binary")} == {f"binary_grid_{dtype.name}"}, counts
        want = fn(x.astype(np.float64), y.astype(np.float64))
        if floating:
            np.testing.assert_array_equal(
                got["v"].float().numpy(), want.astype(np.float32).astype(NP[dtype]).astype(np.float32)
            )
        else:
            np.testing.assert_array_equal(got["v"].numpy(), want)


@pytest.mark.parametrize("dtype", FLOATS)
def test_contiguous_kernels_take_only_operands_aligned_for_their_vectors(dtype):
    # A view that starts one element in is contiguous but not aligned to four elements: it
    # runs the strided kernel, and both agree with numpy (the aligned one with a partial run).
    a = RNG.standard_normal(4 * 50 + 3).astype(NP[dtype]).astype(np.float32)
    ma = metal(a, dtype)
    got = {}
    aligned = dispatches_during(lambda: got.update(aligned=(ma[4:] * 2.0).float().numpy()))
    unaligned = dispatches_during(lambda: got.update(unaligned=(ma[1:] * 2.0).float().numpy()))
    assert f"binary_scalar_contig_{dtype.name}" in aligned, aligned
    assert f"binary_scalar_{dtype.name}" in unaligned and not [k for k in unaligned if "contig" in k], unaligned
    np.testing.assert_array_equal(got["aligned"], a[4:] * 2)
    np.testing.assert_array_equal(got["unaligned"], a[1:] * 2)


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_full_reduction_of_many_elements_splits_among_threadgroups(dtype):
    # A mean over 300K elements (a loss) runs on many threadgroups and a second pass over their
    # partials, not on one threadgroup, and keeps float32's compensated accuracy.
    x = (RNG.standard_normal(300_001) + 3).astype(np.float32)
    mx = metal(x, dtype)
    got = {}
    counts = dispatches_during(lambda: got.update(mean=mx.mean().float().item(), sum=mx.sum().float().item()))
    assert counts.get(f"reduce_split_{dtype.name}") == 2 and counts.get(f"reduce_merge_{dtype.name}") == 2, counts
    exact = x.astype(NP[dtype]).astype(np.float64)
    rounding = 1e-6 if dtype == lucid.float32 else (1e-3 if dtype == lucid.float16 else 8e-3)
    assert abs(got["mean"] - exact.mean()) <= rounding * abs(exact.mean())
    if dtype == lucid.float16:  # 900K is past float16's range: an infinity, as on the host
        assert got["sum"] == np.inf
    else:
        assert abs(got["sum"] - exact.sum()) <= rounding * abs(exact.sum()), (got["sum"], exact.sum())


@pytest.mark.parametrize("dtype", FLOATS)
def test_an_arg_reduction_along_a_long_axis_runs_a_threadgroup_per_output(dtype):
    # argmax/argmin over 10K elements: the first NaN, else the first extreme, as on the CPU,
    # from a threadgroup per output rather than one serial thread.
    x = np.round(RNG.standard_normal((3, 10_000)) * 4).astype(np.float32)  # many ties
    x[1, 7777] = np.nan
    x[1, 9000] = np.nan
    mx, cx = metal(x, dtype), lucid.tensor(x).to(dtype)
    got = {}
    counts = dispatches_during(
        lambda: got.update(amax=mx.argmax(1).numpy(), amin=mx.argmin(1).numpy(), vmax=mx.max(1).values.float().numpy())
    )
    assert counts.get(f"arg_reduce_group_{dtype.name}") == 3 and f"arg_reduce_{dtype.name}" not in counts, counts
    np.testing.assert_array_equal(got["amax"], cx.argmax(1).numpy())
    np.testing.assert_array_equal(got["amin"], cx.argmin(1).numpy())
    np.testing.assert_array_equal(got["vmax"], cx.max(1).values.float().numpy())
    assert got["amax"][1] == 7777 and got["amin"][1] == 7777


@pytest.mark.parametrize("dtype", FLOATS)
def test_an_embeddings_backward_adds_a_thread_per_token_atomically(dtype):
    # 512 tokens into a 50-row table: the scatter-add's lines (one per embedding column) are
    # long, so each token's gradient is added by its own threads, atomically, in float32.
    table = lucid.nn.Embedding(50, 16).to("metal").to(dtype)
    tokens = RNG.integers(0, 50, 512)
    grad_out = RNG.standard_normal((512, 16)).astype(np.float32)
    got = {}

    def backward():
        table.zero_grad()
        (table(lucid.tensor(tokens, device="metal")).float() * lucid.tensor(grad_out, device="metal")).sum().backward()
        got["grad"] = table.weight.grad.float().numpy()

    counts = dispatches_during(backward)
    assert counts.get(f"scatter_add_atomic_{dtype.name}") == 1 and f"scatter_add_{dtype.name}" not in counts, counts
    want = np.zeros((50, 16))
    np.add.at(want, tokens, grad_out.astype(NP[dtype]).astype(np.float64))
    tol = 1e-5 if dtype == lucid.float32 else (2e-3 if dtype == lucid.float16 else 1.6e-2)
    np.testing.assert_allclose(got["grad"], want, rtol=tol, atol=tol * np.abs(want).max())


def test_the_benchmark_has_a_metal_section_where_the_backend_runs(tmp_path):
    # A Mac's `make bench` (the macOS workflow runs it) measures the GPU: product rates per
    # dtype, and conv, attention and two training steps in float32 against autocast.
    import os
    import subprocess
    import sys

    suite = os.path.join(os.path.dirname(__file__), "..", "bench", "suite.py")
    out = tmp_path / "results.md"
    run = subprocess.run(
        [sys.executable, suite, "--quick", "--only", "metal", "--write", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env=os.environ.copy(),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    table = out.read_text()
    for row in (
        "| metal matmul float16 64 |",
        "| metal matmul bfloat16 64 |",
        "| metal CNN train step |",
        "| metal attention head 80 float16 fwd |",
        "| metal add transposed 64x64 float32 |",
        "| metal max over rows 500x100 float32 |",
        "causal attention",
        "GPT (1 layers of 32) train step",
    ):
        assert row in table, table
    assert "TFLOP/s" in table and "float32 / float16 autocast" in table


ATTENTION_HEADS = [(32, 32), (64, 64), (80, 80), (96, 96), (128, 128), (40, 40), (64, 72), (112, 112)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("e,ev", ATTENTION_HEADS)
@pytest.mark.parametrize("masking", ["none", "causal", "mask"])
def test_each_attention_variant_matches_numpy(dtype, e, ev, masking):
    # Every fixed-head variant (32, 64, 80, 96, 128), and the generic ones for the heads they
    # do not take (40; 64 with values of 72; 112), over odd lengths (37 queries and 45 keys,
    # so that the key and row blocks end part-way; causal on 37 and 37), q a transposed view,
    # against float64; the forward's weights pass (for the backward) in the unmasked case.
    b, h, l = 2, 2, 37
    s = l if masking == "causal" else 45
    q = RNG.standard_normal((b, l, h, e)).astype(NP[dtype]).astype(np.float32)
    k = RNG.standard_normal((b, h, s, e)).astype(NP[dtype]).astype(np.float32)
    v = RNG.standard_normal((b, h, s, ev)).astype(NP[dtype]).astype(np.float32)
    allowed = RNG.random((l, s)) > 0.3
    allowed[:, 0] = True
    tq = metal(q, dtype).transpose(1, 2)  # [b, h, l, e], not contiguous
    tk, tv = metal(k, dtype), metal(v, dtype)
    if masking == "none":
        tq.requires_grad_()
    mask = metal(allowed) if masking == "mask" else None
    got = {}
    counts = dispatches_during(
        lambda: got.update(
            y=lucid.nn.functional.scaled_dot_product_attention(
                tq, tk, tv, attn_mask=mask, is_causal=masking == "causal"
            )
        )
    )
    assert counts.get(_attention_variant(e, ev, dtype)) == 1, counts
    assert not [k for k in counts if k.startswith("attention") and k != _attention_variant(e, ev, dtype)], counts
    qh = np.swapaxes(q, 1, 2).astype(np.float64)
    scores = qh @ np.swapaxes(k, -1, -2).astype(np.float64) * e**-0.5
    keep = np.tril(np.ones((l, s), bool)) if masking == "causal" else (allowed if masking == "mask" else True)
    scores = np.where(keep, scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    tol = {lucid.float32: 1e-5, lucid.float16: 4e-3}.get(dtype, 3e-2)
    np.testing.assert_allclose(got["y"].float().numpy(), want, rtol=tol, atol=tol * np.abs(want).max())
    if masking == "none":
        g = RNG.standard_normal(want.shape).astype(NP[dtype]).astype(np.float32)
        got["y"].backward(metal(g, dtype))
        dq = _attention_reference(qh, k, v, g, e**-0.5, False, None)[1]
        np.testing.assert_allclose(tq.grad.float().numpy(), dq, rtol=tol * 4, atol=tol * 4 * np.abs(dq).max())


STRIDED = """
import json
import numpy as np
import lucid

rng = np.random.default_rng(11)
out = {}
before = dict(lucid.metal.stats()["dispatches"])
for name in ("float32", "float16", "bfloat16", "int32", "int64"):
    dt = getattr(lucid, name)
    floating = name.startswith(("float", "bfloat"))
    if floating:
        draw = lambda *s: (rng.standard_normal(s) * 3).astype(np.float32)
    else:
        draw = lambda *s: rng.integers(-50, 50, s)
    a = lucid.tensor(draw(9, 5, 7), device="metal").to(dt)
    b = lucid.tensor(draw(5, 7), device="metal").to(dt)
    c = lucid.tensor(draw(9, 1, 7), device="metal").to(dt)
    at = a.permute(2, 0, 1)  # [7, 9, 5], strided
    results = {
        "add_transposed": at + b.t().unsqueeze(1),  # a strided operand and a broadcast one
        "mul_broadcast": a * c,
        "scalar": at - 2,
        "compare": at > b.t().unsqueeze(1),
        "where": lucid.where(a > c, a, c),
        "copy": at.contiguous(),
        "cast": at.to(lucid.float32 if name != "float32" else lucid.int64),
        "sum_rows": a.sum(2),
        "sum_strided": at.sum(1),
        "argmax_rows": a.argmax(2),
        "max_strided": at.max(1).values,
        "small": lucid.tensor(draw(4, 6), device="metal").to(dt).t() * 2,  # within any bound here
    }
    if floating:
        long = lucid.tensor(draw(40, 66), device="metal").to(dt)
        results.update(
            exp_strided=at.exp(),
            neg_strided=-at,
            mean_rows=a.mean(2),
            simd_sum=long.sum(1),
            simd_mean=long.mean(1),
            simd_max=long.max(1).values,
            simd_argmin=long.argmin(1),
            group_sum=lucid.tensor(draw(3, 1000), device="metal").to(dt).sum(1),
        )
    for key, value in results.items():
        out[f"{name} {key}"] = value.float().numpy().tolist() if value.dtype != lucid.bool else value.numpy().tolist()
after = lucid.metal.stats()["dispatches"]
print(json.dumps(out, sort_keys=True))
print(json.dumps(sorted(k for k in after if after[k] != before.get(k, 0))))
print(json.dumps([c["op"] for c in lucid.metal.self_test() if not c["passed"]]))
"""

WIDE_ONLY = ("binary_", "unary_", "compare_", "select_", "copy_", "fill_", "reduce_", "arg_reduce_")


def test_strided_kernels_take_32_bit_indices_and_their_64_bit_forms_agree():
    # Strided elementwise ops, copies, casts and reductions run the 32-bit index forms of their
    # kernels where every count and offset fits (always here); LUCID_METAL_INDEX32_LIMIT lowers
    # the bound so that the same programme runs their 64-bit forms (`_wide`), which must give
    # the same results, as must a bound that splits them (small operands 32-bit, larger wide);
    # the self-test, which checks every kernel, passes in each.
    import json

    def strided(names):
        return {n for n in names if n.startswith(WIDE_ONLY) and "contig" not in n and "grid" not in n}

    runs = {}
    for limit in (None, "0", "40"):
        env = {"LUCID_METAL_INDEX32_LIMIT": limit} if limit else {}
        values, names, failed = _run_emulated(STRIDED, **env)
        runs[limit] = json.loads(values)
        assert json.loads(failed) == [], (limit, failed)
        names = strided(json.loads(names))
        wide = {n for n in names if n.endswith("_wide")}
        if limit is None:
            assert names and not wide, names
        elif limit == "0":
            assert names and wide == names, names - wide
        else:
            assert wide and names - wide, names
    assert runs["0"] == runs[None]
    assert runs["40"] == runs[None]
    # And the 32-bit forms agree with numpy (float32 and int64 cases).
    rng = np.random.default_rng(11)
    a32 = (rng.standard_normal((9, 5, 7)) * 3).astype(np.float32)
    b32 = (rng.standard_normal((5, 7)) * 3).astype(np.float32)
    at = a32.transpose(2, 0, 1)
    got = runs[None]
    np.testing.assert_allclose(got["float32 add_transposed"], at + b32.T[:, None, :], rtol=1e-6)
    np.testing.assert_array_equal(got["float32 copy"], at)
    np.testing.assert_allclose(got["float32 sum_strided"], at.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got["float32 argmax_rows"], a32.argmax(2))
    np.testing.assert_array_equal(got["float32 max_strided"], at.max(1))


def _reduction_input(shape, dtype):
    if dtype in FLOATS:
        x = np.round(RNG.standard_normal(shape) * 8) / 4  # ties among the maxima
        x = x.astype(NP[dtype]).astype(np.float32)
        x.flat[shape[-1] + 3] = np.nan  # a NaN in the second row
        return x
    return RNG.integers(-20, 20, shape).astype(NP[dtype])


@pytest.mark.parametrize("dtype", FLOATS + [lucid.int32, lucid.int64])
@pytest.mark.parametrize(
    "shape,kind",
    [((4096, 7), "thread"), ((3, 1000), "group"), ((700, 100), "simd"), ((300, 33), "simd")],
)
def test_many_output_reductions_match_numpy(dtype, shape, kind):
    # Sum, mean and max (values and indices) over the last dimension: many outputs of short
    # rows take a thread each, of rows of 32 elements or more a SIMD group each (lanes reduced
    # by shuffles), few outputs of long rows a threadgroup each; all against numpy (the sum in
    # float64 rounded once, the first NaN or the first maximum).
    x = _reduction_input(shape, dtype)
    mx = metal(x, dtype) if dtype in FLOATS else lucid.tensor(x, device="metal")
    floating = dtype in FLOATS
    got = {}

    def run():
        got["sum"] = mx.sum(-1)
        if floating:
            got["mean"] = mx.mean(-1)
        got["max"] = mx.max(-1)

    counts = dispatches_during(run)
    name = dtype.name
    if floating:
        reduce = {"thread": f"reduce_{name}", "group": f"reduce_group_{name}", "simd": f"reduce_simd_{name}"}[kind]
        arg = {"thread": f"arg_reduce_{name}", "group": f"arg_reduce_group_{name}", "simd": f"arg_reduce_simd_{name}"}[
            kind
        ]
        assert counts.get(reduce) == 2 and counts.get(arg) == 1, counts
    else:  # integer sums take a thread per output, into int64
        assert counts.get(f"reduce_{name}") == 1 and counts.get(f"arg_reduce_{name}") == 1, counts
    assert not [k for k in counts if k.endswith("_wide")], counts
    exact = x.astype(np.float64)
    if floating:
        tol = {lucid.float32: 1e-6, lucid.float16: 1e-3}.get(dtype, 8e-3)
        want_sum = exact.sum(-1).astype(NP[dtype]).astype(np.float64)
        np.testing.assert_allclose(got["sum"].float().numpy(), want_sum, rtol=tol, atol=tol)
        np.testing.assert_allclose(got["mean"].float().numpy(), exact.mean(-1), rtol=tol, atol=tol)
    else:
        assert got["sum"].dtype == lucid.int64
        np.testing.assert_array_equal(got["sum"].numpy(), x.astype(np.int64).sum(-1))
    values, indices = got["max"]
    np.testing.assert_array_equal(indices.numpy(), np.argmax(x, -1))
    np.testing.assert_array_equal(values.float().numpy() if floating else values.numpy(), np.max(x, -1))
