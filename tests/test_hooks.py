"""Gradient hooks on tensors (register_hook, register_post_accumulate_grad_hook, retain_grad),
lucid.autograd.grad / backward, and module hooks (forward and backward), as PyTorch has them."""

import gc
import threading
import weakref

import numpy as np
import pytest

import lucid
import lucid.nn as nn
from lucid.utils.hooks import RemovableHandle

from _helpers import DEVICES, numeric_grads


def leaf(values, device="cpu", dtype=lucid.float32):
    return lucid.tensor(np.asarray(values, dtype=np.float32), dtype=dtype, device=device, requires_grad=True)


def f(x):
    """sum(x**3 + 2x): d/dx = 3x**2 + 2."""
    return (x * x * x + 2 * x).sum()


X = np.array([0.5, -1.25, 2.0], dtype=np.float32)
DF = 3 * X.astype(np.float64) ** 2 + 2


# ---- tensor hooks -----------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_a_leaf_hook_sees_the_whole_gradient_once_before_it_is_accumulated(device):
    x = leaf(X, device)
    seen = []

    def hook(g):
        seen.append(g.numpy())
        assert x.grad is None  # called before accumulation

    x.register_hook(hook)
    (f(x) + (x * 4).sum()).backward()  # two paths into x: the hook sees their sum, once
    assert len(seen) == 1
    want = DF + 4
    np.testing.assert_allclose(seen[0], want, rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5)
    numeric = numeric_grads(lambda t: f(t) + (t * 4).sum(), [X.astype(np.float64)], np.float64(1.0))[0]
    np.testing.assert_allclose(seen[0], numeric, rtol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_a_hook_result_replaces_the_gradient_and_hooks_chain_in_order(device):
    x = leaf(X, device)
    order = []
    x.register_hook(lambda g: order.append(("a", g.numpy())) or g * 2)
    x.register_hook(lambda g: order.append(("b", g.numpy())))  # None keeps the gradient
    x.register_hook(lambda g: order.append(("c", g.numpy())) or g + 1)
    f(x).backward()
    assert [name for name, _ in order] == ["a", "b", "c"]
    np.testing.assert_allclose(order[0][1], DF, rtol=1e-5)
    np.testing.assert_allclose(order[1][1], 2 * DF, rtol=1e-5)  # each sees the previous result
    np.testing.assert_allclose(order[2][1], 2 * DF, rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), 2 * DF + 1, rtol=1e-5)


def test_a_hook_on_an_intermediate_sees_its_gradient_and_its_replacement_flows_on():
    x = leaf(X)
    y = x * x  # dL/dy = 3 for L = sum(3y); dL/dx = 6x
    seen = []
    y.register_hook(lambda g: seen.append(g.numpy()) or g * 0.5)
    (3 * y).sum().backward()
    np.testing.assert_allclose(seen[0], np.full(3, 3.0), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), 0.5 * 6 * X, rtol=1e-5)
    assert y.grad is None  # an op result keeps no gradient unless retain_grad()


def test_a_hook_registered_before_an_in_place_write_sees_the_earlier_value_s_gradient():
    x = leaf(X)
    y = x * 2
    seen_before, seen_after = [], []
    y.register_hook(lambda g: seen_before.append(g.numpy()))
    y.mul_(3)  # y's history is now y*3
    y.register_hook(lambda g: seen_after.append(g.numpy()))
    y.sum().backward()
    np.testing.assert_allclose(seen_after[0], np.ones(3))
    np.testing.assert_allclose(seen_before[0], np.full(3, 3.0))
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 6.0))


def test_removing_a_hook_stops_it_and_a_handle_is_a_context_manager():
    x = leaf(X)
    calls = []
    handle = x.register_hook(lambda g: calls.append(1) or g * 10)
    assert isinstance(handle, RemovableHandle)
    f(x).backward()
    handle.remove()
    handle.remove()  # a second remove does nothing
    x.grad = None
    f(x).backward()
    assert calls == [1]
    np.testing.assert_allclose(x.grad.numpy(), DF, rtol=1e-5)
    with x.register_hook(lambda g: g * 0) as h:
        assert isinstance(h, RemovableHandle)
        x.grad = None
        f(x).backward()
        np.testing.assert_allclose(x.grad.numpy(), 0.0)
    x.grad = None
    f(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), DF, rtol=1e-5)


def test_a_hook_may_remove_itself_while_it_runs():
    x = leaf(X)
    calls = []
    handles = []
    handles.append(x.register_hook(lambda g: calls.append(1) or handles[0].remove()))
    f(x).backward(retain_graph=True)
    f(x).backward()
    assert calls == [1]


def test_hooks_run_at_every_backward_of_a_retained_graph():
    x = leaf(X)
    y = x * x
    calls = []
    y.register_hook(lambda g: calls.append(g.numpy()))
    loss = y.sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert len(calls) == 2
    np.testing.assert_allclose(x.grad.numpy(), 2 * 2 * X, rtol=1e-6)


def test_an_exception_raised_in_a_hook_is_raised_by_backward_and_the_process_goes_on():
    class Boom(Exception):
        pass

    x = leaf(X)
    y = x * 2

    def bad(g):
        raise Boom("from the hook")

    y.register_hook(bad)
    with pytest.raises(Boom, match="from the hook"):
        y.sum().backward()
    z = leaf(X)
    z.register_hook(bad)
    with pytest.raises(Boom):
        lucid.autograd.grad(f(z), z)
    with pytest.raises(Boom):
        f(z).backward()
    assert z.grad is None  # the failing hook ran before accumulation
    w = leaf(X)  # autograd still works
    f(w).backward()
    np.testing.assert_allclose(w.grad.numpy(), DF, rtol=1e-5)


def test_a_hook_must_keep_the_gradient_s_shape_dtype_and_return_a_tensor_or_none():
    for replacement, error, message in [
        (lambda g: lucid.ones(4), RuntimeError, "changed the size"),
        (lambda g: g.double(), RuntimeError, "changed the type"),
        (lambda g: 3.0, TypeError, "returned 'float'"),
    ]:
        x = leaf(X)
        x.register_hook(replacement)
        with pytest.raises(error, match=message):
            f(x).backward()
        assert x.grad is None


def test_registering_a_hook_checks_its_arguments():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        lucid.tensor([1.0]).register_hook(lambda g: g)
    with pytest.raises(TypeError, match="callable"):
        leaf(X).register_hook(3)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (leaf(X) * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        lucid.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        lucid.tensor([1.0]).retain_grad()


def test_hooks_fire_on_tensors_freed_before_backward_and_are_released_with_the_graph():
    x = leaf(X)
    seen = []

    class Hook:
        def __call__(self, g):
            seen.append(g.numpy())

    hook = Hook()
    alive = weakref.ref(hook)
    y = x * 3
    y.register_hook(hook)
    loss = y.sum()
    del y, hook  # the graph holds the hook, as PyTorch's grad_fn does
    gc.collect()
    assert alive() is not None
    loss.backward()
    np.testing.assert_allclose(seen[0], np.ones(3))
    del loss
    leaf(X).register_hook(lambda g: None)  # released contexts are dropped at a registration
    gc.collect()
    assert alive() is None

    # A leaf whose tensor is gone still gets its gradient hooks and post-accumulate hooks (the
    # latter called with a tensor over the same leaf).
    z = leaf(X)
    got = []
    z.register_hook(lambda g: got.append("grad"))
    z.register_post_accumulate_grad_hook(lambda t: got.append(t.grad.numpy()))
    loss = f(z)
    del z
    gc.collect()
    loss.backward()
    assert got[0] == "grad"
    np.testing.assert_allclose(got[1], DF, rtol=1e-5)


def test_post_accumulate_hooks_see_the_accumulated_gradient_as_soon_as_it_is_ready():
    w1, w2 = leaf(X), leaf(X * 2)
    events = []

    def post(name):
        def hook(t):
            assert t is (w1 if name == "w1" else w2)  # the tensor itself while it lives
            events.append((name, t.grad.numpy().copy()))

        return hook

    w1.register_post_accumulate_grad_hook(post("w1"))
    w2.register_post_accumulate_grad_hook(post("w2"))
    w2.register_hook(lambda g: events.append(("w2 grad hook", None)) or g)
    # w2 is used only by the last op; its gradient is complete before w1's is.
    h = w1 * 2
    out = (h * w2).sum()
    out.backward()
    assert [e[0] for e in events] == ["w2 grad hook", "w2", "w1"]
    np.testing.assert_allclose(events[1][1], 2 * X, rtol=1e-6)
    np.testing.assert_allclose(events[2][1], 2 * 2 * X, rtol=1e-6)
    del events[:]
    (w1 * w2).sum().backward()  # accumulates: the hooks see the sums so far
    assert [e[0] for e in events] == ["w1", "w2 grad hook", "w2"]  # one node feeds both: leaf by leaf, in input order
    np.testing.assert_allclose(events[0][1], 4 * X + 2 * X, rtol=1e-6)
    np.testing.assert_allclose(events[2][1], 2 * X + X, rtol=1e-6)
    with pytest.raises(TypeError, match="must return None"):
        w3 = leaf(X)
        w3.register_post_accumulate_grad_hook(lambda t: 1)
        f(w3).backward()


def test_retain_grad_keeps_an_intermediate_s_gradient_after_its_hooks():
    x = leaf(X)
    y = x * 2
    assert not y.retains_grad
    y.retain_grad()
    y.retain_grad()  # twice is once
    assert y.retains_grad
    y.register_hook(lambda g: g * 10)  # registered after retain_grad, still runs before it
    loss = (y * 3).sum()
    loss.backward(retain_graph=True)
    np.testing.assert_allclose(y.grad.numpy(), np.full(3, 30.0))
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 60.0))
    loss.backward()
    np.testing.assert_allclose(y.grad.numpy(), np.full(3, 60.0))  # accumulates, as a leaf's
    x.retain_grad()  # a leaf: nothing changes
    assert not x.retains_grad and x.is_leaf


def test_hooks_under_autocast_see_gradients_in_each_tensor_s_dtype():
    x = leaf(np.ones((2, 3)))
    w = leaf(np.full((3, 4), 0.5))
    seen = {}
    w.register_hook(lambda g: seen.__setitem__("w", g.dtype))
    with lucid.autocast("cpu", dtype=lucid.bfloat16):
        y = x @ w
        assert y.dtype == lucid.bfloat16
        y.register_hook(lambda g: seen.__setitem__("y", g.dtype))
        loss = y.float().sum()
    loss.backward()
    assert seen == {"y": lucid.bfloat16, "w": lucid.float32}
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 4), 2.0))


def test_a_hook_registered_on_one_thread_runs_in_another_thread_s_backward():
    x = leaf(X)
    seen, errors = [], []
    x.register_hook(lambda g: seen.append((threading.get_ident(), g.numpy())) or g * 2)
    loss = f(x)

    def run():
        try:
            loss.backward()
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert not errors
    assert seen[0][0] == t.ident
    np.testing.assert_allclose(x.grad.numpy(), 2 * DF, rtol=1e-5)


def test_threads_with_their_own_graphs_and_hooks_see_only_their_own_gradients():
    results, errors = {}, []

    def run(k):
        try:
            x = leaf(X * (k + 1))
            seen = []
            x.register_hook(lambda g: seen.append(g.numpy()) or g * k)
            for _ in range(20):
                x.grad = None
                f(x).backward()
            results[k] = (seen, x.grad.numpy())
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k, (seen, grad) in results.items():
        want = 3 * (X.astype(np.float64) * (k + 1)) ** 2 + 2
        assert len(seen) == 20
        np.testing.assert_allclose(seen[-1], want, rtol=1e-5)
        np.testing.assert_allclose(grad, k * want, rtol=1e-5)


def test_an_exception_in_a_hook_is_raised_on_the_thread_whose_backward_ran_it():
    errors = []

    def run():
        x = leaf(X)
        x.register_hook(lambda g: 1 / 0)
        try:
            f(x).backward()
        except ZeroDivisionError as e:
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert len(errors) == 1
    y = leaf(X)
    f(y).backward()  # this thread has no error pending
    assert y.grad is not None


def test_data_assignment_keeps_a_leaf_s_hooks():
    x = leaf(X)
    calls = []
    x.register_hook(lambda g: calls.append(1))
    x.data = lucid.tensor(X * 2)
    f(x).backward()
    assert calls == [1]


# ---- autograd.grad and autograd.backward -------------------------------------------------------


def test_autograd_grad_returns_gradients_without_touching_grad():
    x, y = leaf(X), leaf(X * 2)
    out = (x * y).sum() + f(x)
    gx, gy = lucid.autograd.grad(out, [x, y])
    np.testing.assert_allclose(gx.numpy(), X * 2 + DF, rtol=1e-5)
    np.testing.assert_allclose(gy.numpy(), X, rtol=1e-6)
    assert x.grad is None and y.grad is None
    (gx,) = lucid.autograd.grad(f(x), x, grad_outputs=lucid.tensor(2.0))
    np.testing.assert_allclose(gx.numpy(), 2 * DF, rtol=1e-5)


def test_autograd_grad_of_an_intermediate_and_of_several_outputs():
    x = leaf(X)
    h = x * 2
    a, b = (h * h).sum(), (h * 3).sum()
    gh, gx = lucid.autograd.grad([a, b], [h, x], retain_graph=True)
    np.testing.assert_allclose(gh.numpy(), 2 * 2 * X + 3, rtol=1e-6)
    np.testing.assert_allclose(gx.numpy(), 2 * (2 * 2 * X + 3), rtol=1e-6)
    (gx,) = lucid.autograd.grad([a, b], x, grad_outputs=[lucid.tensor(1.0), lucid.tensor(0.0)], retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), 2 * 2 * 2 * X, rtol=1e-6)
    (gx,) = lucid.autograd.grad([a, b], x, grad_outputs=[lucid.tensor(1.0), None])  # None: 1 for a scalar
    np.testing.assert_allclose(gx.numpy(), 2 * (2 * 2 * X + 3), rtol=1e-6)


def test_autograd_grad_unused_inputs_and_errors():
    x, u = leaf(X), leaf(X)
    with pytest.raises(RuntimeError, match="index 1 appears to not have been used"):
        lucid.autograd.grad(f(x), [x, u])
    gx, gu = lucid.autograd.grad(f(x), [x, u], allow_unused=True)
    assert gu is None
    _, gu = lucid.autograd.grad(f(x), [x, u], materialize_grads=True)
    np.testing.assert_array_equal(gu.numpy(), np.zeros(3, np.float32))
    with pytest.raises(RuntimeError, match="does not require grad"):
        lucid.autograd.grad(f(x), [lucid.tensor(X)])
    with pytest.raises(RuntimeError, match="does not require grad"):
        lucid.autograd.grad(lucid.tensor(1.0), [x])
    with pytest.raises(RuntimeError, match="implicitly created only for one-element"):
        lucid.autograd.grad(x * 2, [x])
    with pytest.raises(ValueError, match="gradient shape"):
        lucid.autograd.grad(x * 2, [x], grad_outputs=lucid.ones(2))
    with pytest.raises(ValueError, match="2 entries, expected 1"):
        lucid.autograd.grad(f(x), [x], grad_outputs=[None, None])
    with pytest.raises(TypeError, match="must be a lucid.Tensor"):
        lucid.autograd.grad(f(x), [np.ones(3)])
    with pytest.raises(NotImplementedError, match="create_graph"):
        lucid.autograd.grad(f(x), [x], create_graph=True)
    loss = f(x)
    lucid.autograd.grad(loss, [x])
    with pytest.raises(RuntimeError, match="a second time"):
        lucid.autograd.grad(loss, [x])


def test_autograd_backward_of_several_tensors_and_into_chosen_inputs():
    x, y = leaf(X), leaf(X * 2)
    lucid.autograd.backward([(x * y).sum(), f(x)])
    np.testing.assert_allclose(x.grad.numpy(), X * 2 + DF, rtol=1e-5)
    np.testing.assert_allclose(y.grad.numpy(), X, rtol=1e-6)
    x.grad = y.grad = None
    (x * y).sum().backward(inputs=[y])
    assert x.grad is None
    np.testing.assert_allclose(y.grad.numpy(), X, rtol=1e-6)
    h = x * 2
    (h * h).sum().backward(inputs=h)  # an op result among the inputs keeps its gradient
    np.testing.assert_allclose(h.grad.numpy(), 2 * 2 * X, rtol=1e-6)
    assert x.grad is None
    with pytest.raises(NotImplementedError, match="create_graph"):
        f(x).backward(create_graph=True)


# ---- module hooks -------------------------------------------------------------------------------


def linear(seed=0):
    lucid.manual_seed(seed)
    return nn.Linear(3, 2)


def test_full_backward_hooks_get_the_gradients_of_the_module_s_inputs_and_outputs():
    layer = linear()
    W = layer.weight.numpy().astype(np.float64)
    events = []
    layer.register_full_backward_pre_hook(lambda m, go: events.append(("pre", m, go)))
    layer.register_full_backward_hook(lambda m, gi, go: events.append(("full", m, gi, go)))
    xs = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    x = lucid.tensor(xs, requires_grad=True)
    weights = np.arange(8, dtype=np.float32).reshape(4, 2)
    (layer(x) * lucid.tensor(weights)).sum().backward()
    assert [e[0] for e in events] == ["pre", "full"]
    _, m, go = events[0]
    assert m is layer and isinstance(go, tuple) and len(go) == 1
    np.testing.assert_allclose(go[0].numpy(), weights)  # dL/d(output)
    _, m, gi, go2 = events[1]
    assert m is layer and isinstance(gi, tuple) and len(gi) == 1
    np.testing.assert_allclose(go2[0].numpy(), weights)
    np.testing.assert_allclose(gi[0].numpy(), weights @ W, rtol=1e-5)  # dL/d(input)
    np.testing.assert_allclose(x.grad.numpy(), weights @ W, rtol=1e-5)
    np.testing.assert_allclose(layer.weight.grad.numpy(), weights.T @ xs, rtol=1e-5)


def test_a_full_backward_hook_with_no_input_requiring_grad_gets_none_and_runs_after_the_pre_hooks():
    layer = linear()
    events = []
    layer.register_full_backward_hook(lambda m, gi, go: events.append(("full", gi, go[0].shape)))
    layer.register_full_backward_pre_hook(lambda m, go: events.append(("pre",)))
    layer(lucid.ones(4, 3)).sum().backward()
    assert events == [("pre",), ("full", (None,), (4, 2))]


def test_full_backward_hook_arguments_follow_the_positional_arguments_and_the_outputs():
    class Two(nn.Module):
        def forward(self, a, k, b):
            return a * k + b, a - b, 3

    m = Two()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go)))
    a, b = leaf(np.ones(2)), leaf(np.ones(2))
    o1, o2, three = m(a, 2.0, b)
    assert three == 3
    (o1 * lucid.tensor([1.0, 5.0])).sum().backward()
    ((gi, go),) = seen
    # As PyTorch: None for the non-tensor argument, and for the outputs no gradient reached.
    assert len(gi) == 3 and gi[1] is None and len(go) == 3 and go[1] is None and go[2] is None
    np.testing.assert_allclose(go[0].numpy(), [1.0, 5.0])
    np.testing.assert_allclose(gi[0].numpy(), [2.0, 10.0])
    np.testing.assert_allclose(gi[2].numpy(), [1.0, 5.0])
    np.testing.assert_allclose(a.grad.numpy(), [2.0, 10.0])


def test_hooks_may_replace_grad_input_and_grad_output():
    layer = linear()
    x = lucid.tensor(np.ones((4, 3), np.float32), requires_grad=True)
    layer.register_full_backward_hook(lambda m, gi, go: (lucid.full((4, 3), 7.0),))
    layer(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((4, 3), 7.0))

    plain, doubled = linear(), linear()
    doubled.register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))
    xs = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    for layer in (plain, doubled):
        layer(lucid.tensor(xs, requires_grad=True)).sum().backward()
    np.testing.assert_allclose(doubled.weight.grad.numpy(), 2 * plain.weight.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(doubled.bias.grad.numpy(), 2 * plain.bias.grad.numpy(), rtol=1e-6)

    bad = linear()
    bad.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
        bad(lucid.tensor(xs, requires_grad=True)).sum().backward()
    worse = linear()
    worse.register_full_backward_pre_hook(lambda m, go: ("no",))
    with pytest.raises(TypeError, match="grad_output"):
        worse(lucid.tensor(xs, requires_grad=True)).sum().backward()


def test_backward_hooks_leave_gradients_as_they_are_and_run_once_per_backward():
    def model():
        lucid.manual_seed(3)  # the same weights for both
        return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))

    plain, hooked = model(), model()
    order = []
    for i, layer in enumerate(hooked):
        layer.register_full_backward_hook(lambda m, gi, go, i=i: order.append(i))
    xs = np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32)
    outs = []
    for model in (plain, hooked):
        x = lucid.tensor(xs, requires_grad=True)
        loss = (model(x) ** 2).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        outs.append((x.grad.numpy(), [p.grad.numpy() for p in model.parameters()]))
    assert order == [2, 1, 0, 2, 1, 0]  # the last layer's gradients are known first
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-6)
    for got, want in zip(outs[1][1], outs[0][1]):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_backward_hooks_order_prepend_and_removal():
    layer = linear()
    order = []
    h1 = layer.register_full_backward_hook(lambda m, gi, go: order.append("a"))
    h2 = layer.register_full_backward_hook(lambda m, gi, go: order.append("b"))
    layer.register_full_backward_hook(lambda m, gi, go: order.append("c"), prepend=True)
    hp = layer.register_full_backward_pre_hook(lambda m, go: order.append("pre"))
    x = lucid.ones(2, 3, requires_grad=True)
    layer(x).sum().backward()
    assert order == ["pre", "c", "a", "b"]
    h1.remove()
    hp.remove()
    with h2:
        pass
    order.clear()
    layer(x).sum().backward()
    assert order == ["c"]
    with pytest.raises(TypeError, match="callable"):
        layer.register_full_backward_hook(None)
    with pytest.raises(TypeError, match="callable"):
        layer.register_full_backward_pre_hook(1)


def test_an_exception_in_a_module_backward_hook_is_raised_by_backward():
    layer = linear()
    layer.register_full_backward_hook(lambda m, gi, go: {}["missing"])
    with pytest.raises(KeyError, match="missing"):
        layer(lucid.ones(2, 3, requires_grad=True)).sum().backward()


def test_backward_hooks_with_inputs_of_two_dtypes_and_under_no_grad():
    class Mix(nn.Module):
        def forward(self, a, b):
            return a.float() * b

    m = Mix()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(gi))
    a = lucid.tensor([1.0, 2.0], dtype=lucid.float64, requires_grad=True)
    b = leaf([3.0, 4.0])
    m(a, b).sum().backward()
    (gi,) = seen
    assert gi[0].dtype == lucid.float64 and gi[1].dtype == lucid.float32
    np.testing.assert_allclose(gi[0].numpy(), [3.0, 4.0])
    np.testing.assert_allclose(gi[1].numpy(), [1.0, 2.0])
    np.testing.assert_allclose(a.grad.numpy(), [3.0, 4.0])
    with lucid.no_grad():
        out = m(a, b)
    assert not out.requires_grad and len(seen) == 1


def test_global_module_hooks_run_for_every_module_before_its_own():
    from lucid.nn.modules.module import (
        register_module_forward_hook,
        register_module_forward_pre_hook,
        register_module_full_backward_hook,
        register_module_full_backward_pre_hook,
    )

    model = nn.Sequential(linear(0), nn.ReLU())
    calls = []
    model[0].register_forward_hook(lambda m, a, o: calls.append(("own", type(m).__name__)))
    handles = [
        register_module_forward_pre_hook(lambda m, a: calls.append(("pre", type(m).__name__))),
        register_module_forward_hook(lambda m, a, o: calls.append(("fwd", type(m).__name__))),
        register_module_full_backward_pre_hook(lambda m, go: calls.append(("bwpre", type(m).__name__))),
        register_module_full_backward_hook(lambda m, gi, go: calls.append(("bw", type(m).__name__))),
    ]
    try:
        model(lucid.ones(2, 3, requires_grad=True)).sum().backward()
    finally:
        for h in handles:
            h.remove()
    assert calls == [
        ("pre", "Sequential"),
        ("pre", "Linear"),
        ("fwd", "Linear"),
        ("own", "Linear"),
        ("pre", "ReLU"),
        ("fwd", "ReLU"),
        ("fwd", "Sequential"),
        ("bwpre", "Sequential"),
        ("bwpre", "ReLU"),
        ("bw", "ReLU"),
        ("bwpre", "Linear"),
        ("bw", "Linear"),
        ("bw", "Sequential"),
    ]
    calls.clear()
    model(lucid.ones(2, 3))
    assert calls == [("own", "Linear")]
    with pytest.raises(TypeError, match="callable"):
        register_module_forward_hook("no")


def test_a_global_forward_hook_with_kwargs_and_always_call():
    from lucid.nn.modules.module import register_module_forward_hook

    class Fails(nn.Module):
        def forward(self, x, *, scale=1.0):
            if scale < 0:
                raise ValueError("negative scale")
            return x * scale

    seen = []
    h = register_module_forward_hook(lambda m, a, kw, o: seen.append((dict(kw), o)), with_kwargs=True, always_call=True)
    try:
        Fails()(lucid.ones(1), scale=2.0)
        with pytest.raises(ValueError, match="negative"):
            Fails()(lucid.ones(1), scale=-1.0)
    finally:
        h.remove()
    assert seen[0][0] == {"scale": 2.0} and seen[0][1].item() == 2.0
    assert seen[1] == ({"scale": -1.0}, None)


def test_removable_handle_as_pytorch_s():
    table, extra = {}, {}
    h = RemovableHandle(table, extra_dict=extra)
    table[h.id], extra[h.id] = "hook", True
    h2 = RemovableHandle(table)
    assert h2.id != h.id
    with h:
        assert h.id in table
    assert table == {} and extra == {}
    h.remove()  # again: nothing


def test_removed_and_released_hooks_leave_nothing_behind():
    from lucid import _tensor

    p = leaf(X)
    gc.collect()
    p.register_hook(lambda g: g).remove()  # drops what earlier tests' graphs left released
    before = len(_tensor._hooks)
    for _ in range(200):  # a hook added and removed at every step leaves no trace
        p.register_hook(lambda g: g).remove()
        p.register_post_accumulate_grad_hook(lambda t: None).remove()
    assert len(_tensor._hooks) == before
    for _ in range(50):  # hooks on op results go with their graphs
        y = p * 2
        y.register_hook(lambda g: g)
        y.sum().backward()
        del y
    p.register_hook(lambda g: g).remove()  # drops the contexts the engine released
    assert len(_tensor._hooks) == before


def test_a_parameter_keeps_its_hooks_when_the_module_changes_dtype():
    layer = linear()
    seen = []
    layer.weight.register_hook(lambda g: seen.append(g.dtype))
    layer.weight.register_post_accumulate_grad_hook(lambda t: seen.append("accumulated"))
    layer.double()
    assert layer.weight.dtype == lucid.float64 and layer.weight.requires_grad
    layer(lucid.ones(2, 3, dtype=lucid.float64)).sum().backward()
    assert seen == [lucid.float64, "accumulated"]
    np.testing.assert_allclose(layer.weight.grad.numpy(), np.full((2, 3), 2.0))


def test_hooks_registered_and_removed_while_another_thread_runs_backward():
    p = leaf(X)
    stop, errors, calls = threading.Event(), [], []

    def train():
        try:
            for _ in range(200):
                f(p).backward()
        except BaseException as e:
            errors.append(e)
        finally:
            stop.set()

    t = threading.Thread(target=train)
    t.start()
    while not stop.is_set():  # each hook seen runs whole; none changes the gradient
        p.register_hook(lambda g: calls.append(1)).remove()
        p.register_post_accumulate_grad_hook(lambda t: None).remove()
    t.join()
    assert not errors
    np.testing.assert_allclose(p.grad.numpy(), 200 * DF, rtol=1e-4)
