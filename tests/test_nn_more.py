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
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"shift": kwargs.get("shift", 0.0) + 1.0}),
                                with_kwargs=True)
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


def test_hooks_in_sequential_submodules():
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    shapes = []
    for layer in seq:
        layer.register_forward_hook(lambda mod, args, out: shapes.append(tuple(out.shape)))
    seq(T(arr(5, 3)))
    assert shapes == [(5, 4), (5, 4), (5, 2)]


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
