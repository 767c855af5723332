"""Autograd in the engine: every differentiable op against central finite differences,
accumulation, graph lifetime, grad mode, and gradients across autocast casts."""

import threading

import numpy as np
import pytest

import lucid
import lucid.nn as nn
import lucid.nn.functional as F
from _helpers import numeric_grads

rng = np.random.default_rng(7)


def leaf(*shape, device="cpu", offset=0.0):
    return lucid.tensor(rng.standard_normal(shape).astype(np.float32) + offset, device=device, requires_grad=True)


def check(fn, *shapes, device="cpu", offset=0.0):
    arrays = [rng.standard_normal(s).astype(np.float32) + offset for s in shapes]
    leaves = [lucid.tensor(a, device=device, requires_grad=True) for a in arrays]
    out = fn(*leaves)
    weights = rng.standard_normal(out.shape).astype(np.float32)
    (out * lucid.tensor(weights, device=device)).sum().backward()
    for t, want in zip(leaves, numeric_grads(fn, arrays, weights.astype(np.float64))):
        assert t.grad is not None and t.grad.shape == t.shape and t.grad.dtype == t.dtype
        np.testing.assert_allclose(t.grad.numpy(), want, rtol=2e-2, atol=2e-2)


OPS = {
    "add": (lambda a, b: a + b, [(3, 4), (4,)]),
    "sub": (lambda a, b: a - b, [(3, 1), (1, 4)]),
    "mul": (lambda a, b: a * b, [(2, 3), (2, 3)]),
    "div": (lambda a, b: a / b, [(2, 3), (3,)]),
    "scalar": (lambda a: (2.5 - a) * 3 + a / 4 - 1, [(5,)]),
    "rdiv": (lambda a: 2.0 / a, [(4,)]),
    "neg": (lambda a: -a, [(3,)]),
    "relu": (lambda a: a.relu(), [(6,)]),
    "matmul": (lambda a, b: a @ b, [(3, 4), (4, 2)]),
    "matvec": (lambda a, b: a @ b, [(3, 4), (4,)]),
    "vecmat": (lambda a, b: a @ b, [(4,), (4, 2)]),
    "dot": (lambda a, b: a @ b, [(5,), (5,)]),
    "batched": (lambda a, b: a @ b, [(2, 3, 4), (4, 2)]),
    "broadcast_batch": (lambda a, b: a @ b, [(2, 1, 2, 3), (3, 3, 2)]),
    "linear": (lambda x, w, b: F.linear(x, w, b), [(2, 3, 4), (5, 4), (5,)]),
    "linear_nobias": (lambda x, w: F.linear(x, w), [(4,), (2, 4)]),
    "sum": (lambda a: a.sum(), [(3, 4)]),
    "sum_dims": (lambda a: a.sum(dim=(0, 2), keepdim=True), [(2, 3, 4)]),
    "mean": (lambda a: a.mean(1), [(3, 4)]),
    "reshape": (lambda a: a.reshape(4, 3) * lucid.arange(3).float(), [(3, 4)]),
    "view_T": (lambda a: a.T.reshape(-1), [(3, 4)]),
    "transpose": (lambda a: a.transpose(0, 2), [(2, 3, 4)]),
    "permute": (lambda a: a.permute(2, 0, 1).contiguous(), [(2, 3, 4)]),
    "view": (lambda a: a.view(2, 6), [(3, 4)]),
}


@pytest.mark.parametrize("name", OPS)
def test_gradients_match_finite_differences(name):
    fn, shapes = OPS[name]
    offset = 3.0 if name in ("div", "rdiv") else 0.0  # keep denominators away from zero
    check(fn, *shapes, offset=offset)


def test_gradients_on_metal_match_cpu():
    fn, shapes = OPS["linear"]
    check(fn, *shapes, device="metal")


def test_gradient_accumulates_across_backward_calls_and_uses():
    x = leaf(3)
    (x * x).sum().backward()
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy() + 2, rtol=1e-6)
    x.grad = None
    assert x.grad is None
    (x + x + x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 3.0))


def test_backward_with_a_gradient_tensor():
    x = leaf(2, 3)
    y = x * 3
    g = lucid.tensor(rng.standard_normal((2, 3)).astype(np.float32))
    y.backward(g)
    np.testing.assert_allclose(x.grad.numpy(), 3 * g.numpy(), rtol=1e-6)


def test_retain_graph_allows_a_second_backward():
    x = leaf(4)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * x.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="retain_graph"):
        y.backward()


def test_backward_errors():
    with pytest.raises(RuntimeError, match="does not require grad"):
        lucid.ones(3).sum().backward()
    x = leaf(2, 2)
    with pytest.raises(RuntimeError, match="one-element"):
        (x * 2).backward()
    with pytest.raises(ValueError, match="shape"):
        (x * 2).backward(lucid.ones(3))
    with pytest.raises(TypeError):
        (x * 2).backward(np.ones((2, 2)))
    with pytest.raises(TypeError, match="floating-point"):
        lucid.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        (x * 2).requires_grad_(False)
    with pytest.raises(ValueError, match="shape"):
        x.grad = lucid.ones(3)
    with pytest.raises(TypeError):
        x.grad = lucid.ones(2, 2, dtype=lucid.float16)


def test_leaves_grad_fn_and_detach():
    x = leaf(2)
    assert x.is_leaf and x.grad_fn is None and x.requires_grad
    y = x * 2
    assert not y.is_leaf and y.grad_fn == "MulBackward" and y.requires_grad
    d = y.detach()
    assert d.is_leaf and not d.requires_grad
    (d * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), d.numpy())
    assert (lucid.ones(2) * 2).grad_fn is None


def test_no_grad_is_thread_local_and_reusable():
    x = leaf(3)
    scope = lucid.no_grad()
    with scope:
        assert not lucid.is_grad_enabled()
        assert not (x * 2).requires_grad
        seen = []
        t = threading.Thread(target=lambda: seen.append((lucid.is_grad_enabled(), (x * 2).requires_grad)))
        t.start()
        t.join()
        assert seen == [(True, True)]
        with lucid.enable_grad():
            assert (x * 2).requires_grad
        with scope:
            assert not lucid.is_grad_enabled()
        assert not lucid.is_grad_enabled()
    assert lucid.is_grad_enabled()

    @lucid.no_grad()
    def infer(v):
        return v * 3

    assert not infer(x).requires_grad and lucid.is_grad_enabled()
    with pytest.raises(RuntimeError):
        lucid.no_grad().__exit__(None, None, None)


def test_set_grad_enabled():
    lucid.set_grad_enabled(False)
    assert not lucid.is_grad_enabled()
    lucid.set_grad_enabled(True)
    assert lucid.is_grad_enabled()
    with lucid.set_grad_enabled(False):
        assert not lucid.is_grad_enabled()
    assert lucid.is_grad_enabled()
    with pytest.raises(TypeError):
        lucid.set_grad_enabled(1)


def test_float32_leaf_under_autocast_gets_a_float32_gradient():
    model = nn.Linear(4, 3).to("metal")
    x = leaf(5, 4, device="metal")
    with lucid.amp.autocast():
        out = model(x)
        assert out.dtype == lucid.float16
        loss = out.float().sum()
    loss.backward()
    for p in (model.weight, model.bias, x):
        assert p.grad.dtype == lucid.float32 and p.grad.device == "metal"
    # d(sum(x Wᵀ + b))/dW = column sums of x, within float16 rounding of the inputs
    np.testing.assert_allclose(model.weight.grad.numpy(), np.tile(x.numpy().sum(0), (3, 1)), rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(model.bias.grad.numpy(), np.full(3, 5.0))


def test_float16_activation_gradient_is_float16():
    x = leaf(4, 4, device="metal")
    with lucid.amp.autocast():
        h = x @ x
    assert h.dtype == lucid.float16
    seen = {}
    y = h * 1.0
    g = lucid.ones(4, 4, dtype=lucid.float16, device="metal")
    h2 = h.detach().requires_grad_()
    (h2 * 2).backward(g)
    seen["h2"] = h2.grad.dtype
    assert seen["h2"] == lucid.float16
    y.backward(g)
    assert x.grad.dtype == lucid.float32


def test_backward_inside_autocast_gives_the_same_result():
    def run(inside):
        lucid.manual_seed(3)
        model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 2)).to("metal")
        x = lucid.randn(7, 6, device="metal")
        with lucid.amp.autocast():
            loss = model(x).sum()
            if inside:
                loss.backward()
        if not inside:
            loss.backward()
        return [p.grad.numpy() for p in model.parameters()]

    for a, b in zip(run(False), run(True)):
        np.testing.assert_array_equal(a, b)


def test_module_zero_grad_clears_every_parameter():
    m = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
    m(lucid.ones(4, 3)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())


def test_module_to_keeps_parameters_as_leaves():
    m = nn.Linear(3, 2).to("metal").to(lucid.float16)
    assert all(p.is_leaf and p.requires_grad for p in m.parameters())
    out = m(lucid.ones(1, 3, device="metal", dtype=lucid.float16)).sum()
    out.backward()
    assert m.weight.grad.dtype == lucid.float16


# ---- only the wanted gradients -------------------------------------------------------------

_PRODUCTS = {
    "matmul": (lambda a, b: a @ b, (3, 4, 5), (5, 6)),
    "conv2d": (lambda a, b: F.conv2d(a, b, padding=1), (2, 3, 6, 6), (4, 3, 3, 3)),
    "conv_transpose2d": (lambda a, b: F.conv_transpose2d(a, b, stride=2), (2, 3, 5, 5), (3, 4, 3, 3)),
}


@pytest.mark.parametrize("name", sorted(_PRODUCTS))
@pytest.mark.parametrize("amp", [False, True])
def test_products_give_each_operand_that_needs_one_the_same_gradient(name, amp):
    # A product whose data (or weight) needs no gradient skips that pass; what the other
    # operand receives must not change, and the skipped one must get none.
    fn, shape_a, shape_b = _PRODUCTS[name]
    rng = np.random.default_rng(7)
    a_np, b_np = rng.standard_normal(shape_a).astype(np.float32), rng.standard_normal(shape_b).astype(np.float32)
    results = {}
    for need in [(True, True), (True, False), (False, True)]:
        a = lucid.tensor(a_np, requires_grad=need[0])
        b = lucid.tensor(b_np, requires_grad=need[1])
        with lucid.amp.autocast("cpu", dtype=lucid.bfloat16, enabled=amp):
            y = fn(a, b)
        (y.float() * y.float()).sum().backward()
        results[need] = (a.grad, b.grad)
    ga, gb = results[(True, True)]
    assert ga is not None and gb is not None
    only_a, only_b = results[(True, False)], results[(False, True)]
    assert only_a[1] is None and only_b[0] is None
    np.testing.assert_array_equal(only_a[0].numpy(), ga.numpy())
    np.testing.assert_array_equal(only_b[1].numpy(), gb.numpy())


def test_grad_mode_scopes_are_reentrant_shared_across_threads_and_refuse_a_stray_exit():
    scope = lucid.no_grad()
    with scope:
        with lucid.enable_grad():
            with scope:  # the same object again, inside
                assert not lucid.is_grad_enabled()
            assert lucid.is_grad_enabled()
        assert not lucid.is_grad_enabled()
    assert lucid.is_grad_enabled()
    # Entered on two threads at once: each exit restores its own thread's mode.
    seen, barrier = [], threading.Barrier(2)

    def work(start):
        lucid.set_grad_enabled(start)
        with scope:
            barrier.wait()
            seen.append(lucid.is_grad_enabled())
            barrier.wait()
        seen.append(lucid.is_grad_enabled() == start)

    threads = [threading.Thread(target=work, args=(m,)) for m in (True, False)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen.count(False) == 2 and seen.count(True) == 2
    # Out of order exits leave their own entries; an exit with none on this thread raises.
    outer, inner = lucid.no_grad(), lucid.enable_grad()
    outer.__enter__()
    inner.__enter__()
    outer.__exit__(None, None, None)  # restores the mode outer replaced: on
    assert lucid.is_grad_enabled()
    inner.__exit__(None, None, None)  # restores the mode inner replaced: off
    assert not lucid.is_grad_enabled()
    lucid.set_grad_enabled(True)
    with pytest.raises(RuntimeError, match="has not entered it"):
        outer.__exit__(None, None, None)
    assert lucid.is_grad_enabled()
    # set_grad_enabled sets at once and, used with `with`, puts the previous mode back;
    # inference_mode(False) changes nothing.
    with lucid.set_grad_enabled(False):
        assert not lucid.is_grad_enabled()
        with lucid.inference_mode(False):
            assert not lucid.is_grad_enabled()
        with lucid.inference_mode():
            assert not lucid.is_grad_enabled()
    assert lucid.is_grad_enabled()

    @lucid.no_grad()
    def decorated():
        return lucid.is_grad_enabled()

    assert decorated() is False and lucid.is_grad_enabled()
