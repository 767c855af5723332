"""lucid.autograd.Function and lucid.amp.custom_fwd / custom_bwd, as PyTorch's."""

import gc
import threading

import numpy as np
import pytest

import lucid
from lucid import autograd

rng = np.random.default_rng(13)


class ScaledCube(autograd.Function):
    """y = k·x³ with a hand-written backward; k is a plain number."""

    @staticmethod
    def forward(ctx, x, k):
        assert not lucid.is_grad_enabled()  # forward runs with grad mode off
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * x * k

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * ctx.k * x * x, None


@pytest.mark.parametrize("device", ["cpu", "metal"])
def test_a_custom_function_matches_finite_differences(device):
    x_np = rng.standard_normal((3, 4)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    x = lucid.tensor(x_np, device=device, requires_grad=True)
    y = ScaledCube.apply(x, 0.5)
    assert y.grad_fn == "ScaledCubeBackward" and y.requires_grad
    np.testing.assert_allclose(y.numpy(), 0.5 * x_np**3, rtol=1e-6)
    (y * lucid.tensor(w, device=device)).sum().backward()
    numeric = np.zeros_like(x_np)
    for i in np.ndindex(x_np.shape):
        hi, lo = x_np.copy(), x_np.copy()
        hi[i] += 1e-2
        lo[i] -= 1e-2
        numeric[i] = ((0.5 * hi**3 * w).sum() - (0.5 * lo**3 * w).sum()) / 2e-2
    np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-3, atol=1e-3)


def test_needs_input_grad_untracked_calls_and_mixed_arguments():
    seen = []

    class Mul(autograd.Function):
        @staticmethod
        def forward(ctx, a, scale, b):
            seen.append(ctx.needs_input_grad)
            ctx.save_for_backward(a, b)
            return a * b * scale

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, None, g * a

    a = lucid.tensor([1.0, 2.0], requires_grad=True)
    b = lucid.tensor([3.0, 4.0])
    y = Mul.apply(a, 2.0, b)
    y.sum().backward()
    assert seen == [(True, False, False)]
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 4.0])
    # Nothing requires grad (or grad mode is off): the forward's result comes back untracked.
    assert not Mul.apply(b, 2.0, b).requires_grad
    with lucid.no_grad():
        assert not Mul.apply(a, 2.0, b).requires_grad


def test_several_outputs_each_get_their_gradient():
    class SplitScale(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3, "label"

        @staticmethod
        def backward(ctx, g2, g3):
            return g2 * 2 + g3 * 3

    x = lucid.tensor([1.0, 1.0], requires_grad=True)
    p, q, label = SplitScale.apply(x)
    assert label == "label"
    (p.sum() * 5 + q.sum() * 7).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [31.0, 31.0])


def test_gradients_are_cast_to_their_inputs_dtype():
    class ToFloat32Grad(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g.float() * 2

    leaf = lucid.tensor([1.0, 2.0]).bfloat16().requires_grad_()
    ToFloat32Grad.apply(leaf).float().sum().backward()
    assert leaf.grad.dtype == lucid.bfloat16
    np.testing.assert_array_equal(leaf.grad.float().numpy(), [2.0, 2.0])


def _function(backward):
    class Custom(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

    Custom.backward = staticmethod(backward)
    return Custom


def test_a_wrong_backward_is_a_clear_error_and_its_exception_comes_through():
    x = lucid.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError, match="Custom.backward returned 2 values, expected 1"):
        _function(lambda ctx, g: (g, g)).apply(x).sum().backward()
    with pytest.raises(ValueError, match=r"gradient 0 has shape \[3\], but its input has shape \[2\]"):
        _function(lambda ctx, g: lucid.ones(3)).apply(x).sum().backward()
    with pytest.raises(TypeError, match="returned a ndarray for argument 0"):
        _function(lambda ctx, g: np.ones(2)).apply(x).sum().backward()

    class Boom(Exception):
        pass

    def explode(ctx, g):
        raise Boom("from backward")

    with pytest.raises(Boom, match="from backward"):
        _function(explode).apply(x).sum().backward()
    # The engine is fine afterwards.
    (x * 2).sum().backward()
    with pytest.raises(TypeError, match="used through .*apply"):
        ScaledCube()


def test_contexts_are_released_with_their_graph():
    before = len(autograd._contexts)
    for _ in range(5):
        x = lucid.tensor([1.0], requires_grad=True)
        ScaledCube.apply(x, 1.0).sum().backward()
    gc.collect()
    ScaledCube.apply(lucid.tensor([1.0]), 1.0)  # an apply drops what the engine released
    assert len(autograd._contexts) <= before + 1


def test_backward_on_another_thread():
    x = lucid.tensor([1.0, 2.0], requires_grad=True)
    y = ScaledCube.apply(x, 2.0).sum()
    t = threading.Thread(target=y.backward)
    t.start()
    t.join()
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 24.0])


# ---- custom_fwd / custom_bwd ---------------------------------------------------------------


class AutocastProbe(autograd.Function):
    """Records the autocast state forward and backward see; y = x @ w."""

    seen = []

    @staticmethod
    @lucid.amp.custom_fwd(device_type="metal")
    def forward(ctx, x, w):
        AutocastProbe.seen.append(
            ("fwd", lucid.amp.is_autocast_enabled("metal"), lucid.amp.get_autocast_dtype("metal"))
        )
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    @lucid.amp.custom_bwd(device_type="metal")
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        AutocastProbe.seen.append(
            ("bwd", lucid.amp.is_autocast_enabled("metal"), lucid.amp.get_autocast_dtype("metal"), (g @ w.T).dtype)
        )
        return g @ w.T, x.T @ g


class CastToFloat32(autograd.Function):
    seen = []

    @staticmethod
    @lucid.amp.custom_fwd(device_type="metal", cast_inputs=lucid.float32)
    def forward(ctx, x, w):
        CastToFloat32.seen.append(("fwd", x.dtype, lucid.amp.is_autocast_enabled("metal")))
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    @lucid.amp.custom_bwd(device_type="metal")
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        CastToFloat32.seen.append(("bwd", lucid.amp.is_autocast_enabled("metal")))
        return g @ w.T, x.T @ g


def test_backward_runs_under_the_autocast_state_forward_saw():
    AutocastProbe.seen.clear()
    x = lucid.tensor(rng.standard_normal((2, 3)).astype(np.float32), device="metal", requires_grad=True)
    w = lucid.tensor(rng.standard_normal((3, 4)).astype(np.float32), device="metal", requires_grad=True)
    with lucid.amp.autocast("metal", dtype=lucid.bfloat16):
        y = AutocastProbe.apply(x, w)
    assert y.dtype == lucid.bfloat16
    y.float().sum().backward()  # outside autocast
    assert AutocastProbe.seen == [("fwd", True, lucid.bfloat16), ("bwd", True, lucid.bfloat16, lucid.bfloat16)]
    assert x.grad.dtype == w.grad.dtype == lucid.float32
    assert not lucid.amp.is_autocast_enabled()


def test_cast_inputs_runs_forward_and_backward_in_that_dtype_with_autocast_off():
    CastToFloat32.seen.clear()
    x = lucid.tensor(rng.standard_normal((2, 3)).astype(np.float32), device="metal").half().requires_grad_()
    w = lucid.tensor(rng.standard_normal((3, 4)).astype(np.float32), device="metal", requires_grad=True)
    with lucid.amp.autocast("metal", dtype=lucid.float16):
        y = CastToFloat32.apply(x, w)
        assert lucid.amp.is_autocast_enabled("metal")  # restored after forward
    assert y.dtype == lucid.float32
    y.sum().backward()
    assert CastToFloat32.seen == [("fwd", lucid.float32, False), ("bwd", False)]
    assert x.grad.dtype == lucid.float16  # cast back to the input's dtype
    np.testing.assert_allclose(w.grad.numpy(), np.tile(x.float().numpy().sum(0)[:, None], (1, 4)), rtol=1e-3)
    # Outside autocast, cast_inputs does nothing.
    CastToFloat32.seen.clear()
    CastToFloat32.apply(x, w.half())
    assert CastToFloat32.seen == [("fwd", lucid.float16, False)]
    with pytest.raises(TypeError, match="cast_inputs must be a floating"):
        lucid.amp.custom_fwd(lambda ctx: None, device_type="metal", cast_inputs=lucid.int32)
    with pytest.raises(ValueError, match="device_type"):
        lucid.amp.custom_bwd(lambda ctx: None, device_type="cuda")
