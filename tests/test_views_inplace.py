"""Views share storage and in-place ops write into it, as in PyTorch.

numpy's views have PyTorch's storage semantics (a write through one is seen by every view of
the same memory), so every program of views and writes here runs side by side on a numpy
array and on a lucid tensor, and every live view is compared after every step. The classes
of in-place behaviour PyTorch defines beyond values (stable ``.grad``, buffers and optimizer
state, autograd through in-place ops, version counters) have tests of their own, with
gradients checked against finite differences or closed forms.
"""

import copy

import numpy as np
import pytest

import lucid
import lucid.nn as nn


def _close(t, a):
    np.testing.assert_allclose(t.numpy(), a, rtol=1e-6, atol=1e-6)


# ---- random programs of views and writes -----------------------------------------------------


def _views_of(t, a, rng):
    """A random view of the pair (t, a): the same view op on both, or None when none fits."""
    nd = a.ndim
    choice = rng.integers(0, 9)
    if choice == 0 and nd >= 1 and a.shape[0] >= 2:  # a slice with a step
        start, step = int(rng.integers(0, 2)), int(rng.integers(1, 3))
        return t[start::step], a[start::step]
    if choice == 1 and nd >= 1 and a.shape[0] >= 1:  # select
        i = int(rng.integers(0, a.shape[0]))
        return t[i], a[i, ...]  # a 0-d view in numpy too, not a scalar copy
    if choice == 2 and nd >= 2:
        return t.transpose(0, nd - 1), np.swapaxes(a, 0, nd - 1)
    if choice == 3 and nd >= 1:
        order = [int(d) for d in rng.permutation(nd)]
        return t.permute(*order), a.transpose(order)
    if choice == 4 and nd < 4:
        d = int(rng.integers(0, nd + 1))
        return t.unsqueeze(d), np.expand_dims(a, d)
    if choice == 5 and nd >= 1 and 1 in a.shape:
        d = a.shape.index(1)
        return t.squeeze(d), np.squeeze(a, d)
    if choice == 6 and nd >= 1 and a.shape[-1] >= 2:
        start = int(rng.integers(0, a.shape[-1] - 1))
        return t.narrow(nd - 1, start, 2), a[..., start : start + 2]
    if choice == 7 and a.flags.c_contiguous and t.is_contiguous():
        return t.view(-1), a.reshape(-1)  # numpy gives a view of contiguous memory
    if choice == 8:
        return t.detach(), a
    return None


def _write(t, a, rng):
    """A random in-place write on the pair, done to both."""
    choice = rng.integers(0, 9)
    v = float(np.float32(rng.standard_normal()))
    if choice == 0:
        t.add_(v)
        a += np.float32(v)
    elif choice == 1:
        t.mul_(v)
        a *= np.float32(v)
    elif choice == 2:
        t.fill_(v)
        a[...] = np.float32(v)
    elif choice == 3:
        t.zero_()
        a[...] = 0
    elif choice == 4:
        src = rng.standard_normal(a.shape).astype(np.float32)
        t.copy_(lucid.tensor(src))
        a[...] = src
    elif choice == 5 and a.ndim >= 1 and a.shape[0] >= 1:
        i = int(rng.integers(0, a.shape[0]))
        t[i] = v
        a[i] = np.float32(v)
    elif choice == 6 and a.ndim >= 1 and a.shape[0] >= 2:
        t[::2] = v
        a[::2] = np.float32(v)
    elif choice == 7:
        other = rng.standard_normal(a.shape).astype(np.float32)
        t += lucid.tensor(other)
        a += other
    else:
        t.clamp_(-0.5, 0.5)
        np.clip(a, -0.5, 0.5, out=a)


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_of_views_and_writes_match_numpy(seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((3, 4, 2)).astype(np.float32)
    t = lucid.tensor(a.copy())
    a = a.copy()
    pairs = [(t, a)]
    for _ in range(30):
        if rng.random() < 0.5:
            made = _views_of(*pairs[int(rng.integers(0, len(pairs)))], rng)
            if made is not None:
                pairs.append(made)
        else:
            _write(*pairs[int(rng.integers(0, len(pairs)))], rng)
        for lt, na in pairs:
            _close(lt, na)


@pytest.mark.parametrize("dtype", [lucid.float32, lucid.float16, lucid.bfloat16, lucid.int64])
def test_add_and_sub_with_alpha_in_place_match_numpy(dtype):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    x, y = lucid.tensor(a).to(dtype), lucid.tensor(b).to(dtype)
    alpha = 2 if dtype is lucid.int64 else -0.5
    x.add_(y, alpha=alpha)
    x.sub_(y[None], alpha=alpha)  # broadcast rows, composed where no fused kernel applies
    tol = 1e-6 if dtype in (lucid.float32, lucid.int64) else 2e-2
    np.testing.assert_allclose(x.float().numpy(), a, rtol=tol, atol=tol)
    if dtype is lucid.int64:
        with pytest.raises(TypeError, match="alpha must not be a floating-point number"):
            x.add_(y, alpha=0.5)
        with pytest.raises(ValueError, match="does not fit in a 64-bit integer"):
            x.add_(y, alpha=1e300)


@pytest.mark.parametrize("offset,dims", [(0, (0, 1)), (1, (0, 1)), (-1, (1, 2)), (2, (2, 0)), (5, (0, 1))])
def test_diagonal_is_a_view_with_numpys_values_and_gradient(offset, dims):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = lucid.tensor(a, requires_grad=True)
    d = t.diagonal(offset, *dims)
    want = np.diagonal(a, offset, *dims)
    np.testing.assert_array_equal(d.detach().numpy(), want)
    w = np.random.default_rng(1).standard_normal(want.shape).astype(np.float32)
    (d * lucid.tensor(w)).sum().backward()
    expect = np.zeros_like(a)  # numpy's diagonal is read-only: the gradient goes in by index
    idx = np.indices(a.shape)
    on = (idx[dims[1]] - idx[dims[0]]) == offset
    kept = [i for i in range(3) if i not in dims]
    for pos in zip(*np.nonzero(on)):
        k = pos[dims[0]] if offset >= 0 else pos[dims[1]]
        expect[pos] = w[tuple(pos[i] for i in kept) + (k,)]
    np.testing.assert_array_equal(t.grad.numpy(), expect)
    # A write through it reaches the tensor.
    x = lucid.tensor(a)
    x.diagonal(offset, *dims).fill_(-1.0)
    b = a.copy()
    b[on] = -1.0
    np.testing.assert_array_equal(x.numpy(), b)


def test_unflatten_is_a_view():
    x = lucid.arange(12.0).reshape(3, 4)
    u = x.unflatten(1, (2, -1))
    assert u.shape == (3, 2, 2)
    u[1, 1, 0] = 100.0
    assert x[1, 2].item() == 100.0
    with pytest.raises(RuntimeError, match="don't multiply up"):
        x.unflatten(1, (3, 2))


def test_siblings_and_views_of_views_see_each_other():
    x = lucid.zeros(4, 4)
    row, col = x[1], x[:, 2]
    block = x[1:3, 1:3].t()
    row[2] = 5.0
    assert col.tolist() == [0.0, 5.0, 0.0, 0.0] and block.tolist()[1][0] == 5.0
    block.mul_(2)
    assert x[1, 2].item() == 10.0 and row.tolist() == [0.0, 0.0, 10.0, 0.0]


def test_copy_and_fill_keep_the_destination_layout():
    x = lucid.zeros(2, 3)
    x.copy_(lucid.arange(3.0))  # a row broadcast: x keeps its own strides
    assert x.stride() == (3, 1) and x.view(-1).tolist() == [0.0, 1.0, 2.0] * 2
    y = lucid.arange(6.0).reshape(3, 2)
    x.copy_(y.t())
    flat = x.reshape(-1)
    flat[0] = 9.0
    assert x[0, 0].item() == 9.0


def test_writes_that_overlap_their_source_follow_pytorch():
    x = lucid.arange(6.0)
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
        x[1:].copy_(x[:-1])
    x.copy_(x)  # the same elements: nothing to do
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    m = lucid.arange(4.0).reshape(2, 2)
    m.copy_(m.t())  # not dense together: read first, then written
    assert m.tolist() == [[0.0, 2.0], [1.0, 3.0]]


def test_augmented_operators_write_in_place():
    x = lucid.tensor([1.0, 2.0, 3.0])
    v = x[1:]
    x **= 2
    assert v.tolist() == [4.0, 9.0]
    b = lucid.tensor([True, False, True])
    alias = b[:]
    b &= lucid.tensor([True, True, False])
    assert alias.tolist() == [True, False, False]
    b |= lucid.tensor([False, True, False])
    b ^= lucid.tensor([True, True, True])
    assert alias.tolist() == [False, False, True]
    i = lucid.tensor([6, 3])
    j = i[:]
    i &= 2
    assert j.tolist() == [2, 2]


def test_a_0d_integer_tensor_index_and_flatten_of_a_0d_tensor_are_views():
    x = lucid.zeros(3, 2)
    row = x[lucid.tensor(1)]
    row.fill_(4.0)
    assert x.tolist() == [[0.0, 0.0], [4.0, 4.0], [0.0, 0.0]]
    x[lucid.tensor(2), 1] = 9.0
    assert x[2].tolist() == [0.0, 9.0]
    s = lucid.tensor(5.0)
    f = s.flatten()
    f[0] = 6.0
    assert f.shape == (1,) and s.item() == 6.0


def test_a_parameter_and_data_share_storage_with_their_source():
    t = lucid.zeros(3)
    p = nn.Parameter(t)
    with lucid.no_grad():
        p.add_(1)
    assert t.tolist() == [1.0, 1.0, 1.0]
    p.data[0] = 7.0
    assert t.tolist()[0] == 7.0


def test_assigning_data_rebinds_only_the_tensor():
    x = lucid.zeros(3)
    v = x[:2]
    x.data = lucid.ones(3)
    assert x.tolist() == [1.0, 1.0, 1.0] and v.tolist() == [0.0, 0.0]  # the view keeps the old storage
    v.fill_(5.0)
    assert x.tolist() == [1.0, 1.0, 1.0]


# ---- element writes are O(1) -----------------------------------------------------------------


def test_single_element_writes_do_not_copy_the_base():
    x = lucid.zeros(1_000_000)
    before = lucid.memory_allocated() if hasattr(lucid, "memory_allocated") else None
    for i in range(100):
        x[i * 7] = 1.0
    assert x.sum().item() == 100.0
    if before is not None:
        assert lucid.memory_allocated() - before < 1_000_000  # no copy of the 4 MB base was kept


# ---- stable objects ----------------------------------------------------------------------------


def test_grad_is_one_tensor_that_backward_accumulates_into():
    w = nn.Parameter(lucid.tensor([1.0, 2.0]))
    (w * 3).sum().backward()
    g = w.grad
    (w * w).sum().backward()
    assert g.tolist() == [5.0, 7.0]  # 3 + 2w, in the tensor saved after the first backward
    w.grad.mul_(0.5)
    assert g.tolist() == [2.5, 3.5]
    w.grad[0] = 0.0
    w.grad.data.clamp_(-1, 1)
    assert g.tolist() == [0.0, 1.0]
    opt = lucid.optim.SGD([w], lr=1.0)
    opt.step()
    assert w.tolist() == [1.0, 1.0]  # stepped with the gradient as changed in place
    opt.zero_grad(set_to_none=False)
    assert g.tolist() == [0.0, 0.0] and w.grad is not None


def test_module_zero_grad_zeroes_in_place_or_clears():
    m = nn.Linear(2, 1)
    m(lucid.ones(1, 2)).sum().backward()
    g = m.weight.grad
    m.zero_grad(set_to_none=False)
    assert m.weight.grad is not None and g.tolist() == [[0.0, 0.0]]
    m.zero_grad()
    assert m.weight.grad is None


def test_clip_and_unscale_update_the_gradient_tensors():
    w = nn.Parameter(lucid.tensor([3.0, 4.0]))
    (w * w).sum().backward()  # grad [6, 8], norm 10
    g = w.grad
    nn.utils.clip_grad_norm_([w], 1.0)
    np.testing.assert_allclose(g.numpy(), [0.6, 0.8], rtol=1e-5)
    opt = lucid.optim.SGD([w], lr=0.1)
    scaler = lucid.amp.GradScaler("cpu", init_scale=4.0)
    scaler.unscale_(opt)
    np.testing.assert_allclose(g.numpy(), [0.15, 0.2], rtol=1e-5)


def test_manual_training_by_hand_zeroes_gradients_in_place():
    # PyTorch's introductory tutorial: manual updates under no_grad, then grad.zero_().
    rng = np.random.default_rng(0)
    x = lucid.tensor(rng.standard_normal((64, 3)).astype(np.float32))
    y = x @ lucid.tensor([[1.0], [-2.0], [0.5]])
    w = lucid.zeros(3, 1, requires_grad=True)
    for _ in range(200):
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        with lucid.no_grad():
            w -= 0.1 * w.grad
            w.grad.zero_()
    np.testing.assert_allclose(w.detach().numpy().ravel(), [1.0, -2.0, 0.5], atol=1e-3)


def test_batchnorm_running_statistics_are_updated_in_place():
    bn = nn.BatchNorm1d(3)
    rm, rv = bn.running_mean, bn.running_var
    x = lucid.tensor(np.random.default_rng(1).standard_normal((8, 3)).astype(np.float32))
    bn(x)
    xn = x.numpy()
    np.testing.assert_allclose(rm.numpy(), 0.1 * xn.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rv.numpy(), 0.9 + 0.1 * xn.var(0, ddof=1), rtol=1e-5)
    assert bn.running_mean is rm


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: lucid.optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: lucid.optim.Adam(ps, lr=0.1),
        lambda ps: lucid.optim.RMSprop(ps, lr=0.1),
    ],
)
def test_optimizer_state_and_parameters_are_updated_in_place(make):
    w = nn.Parameter(lucid.tensor([1.0, -1.0]))
    view = w[:1]
    opt = make([w])
    (w * w).sum().backward()
    opt.step()
    state = opt.state_dict()["state"][0]
    held = {k: v for k, v in opt.state[w].items() if isinstance(v, lucid.Tensor)}
    snapshot = {k: v.numpy().copy() for k, v in held.items()}
    saved = copy.deepcopy(opt.state_dict())
    (w * w).sum().backward()
    opt.step()
    assert view.item() == w[0].item()  # a view taken before the step follows the parameter
    for k, v in held.items():
        assert opt.state[w][k] is v  # the same state tensor, updated
        assert not np.array_equal(v.numpy(), snapshot[k])
        np.testing.assert_array_equal(state[k].numpy(), v.numpy())  # a state dict taken before follows it
        np.testing.assert_array_equal(saved["state"][0][k].numpy(), snapshot[k])  # a deep copy does not


# ---- autograd through in-place ops -------------------------------------------------------------


def _numeric_grad(f, x, eps=1e-3):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


@pytest.mark.parametrize(
    "program",
    [
        "y = x * 2; y.zero_(); out = y",
        "y = x * 1; y.mul_(x); out = y",
        "y = x.exp() * 1; y.add_(x); out = y",
        "y = x * 1; y[1:].mul_(3); out = y",
        "y = x * 1; y[0] = x[1] * x[1]; out = y",
        "y = x * 1; v = y.t(); v[0].sub_(x[:, 0] * 2); out = y",
        "y = x * 1; y.abs_(); y.tanh_(); out = y",
        "y = lucid.zeros(2, 3); y[1] = x[0] ** 2; out = y",
        "y = x.clone(); y += x * x; y /= 2; out = y",
        # views made before a write into a sibling or the base take up the new history
        "y = x * 1; a = y[0]; b = y[:, 1:2]; a.mul_(x[1]); out = b * b",
        "y = x * 1; c = y[:, 2:]; y.exp_(); out = c",
        "y = x * 1; v = y.view(3, 2)[1:]; y[0].copy_(x[1] * 3); out = v.reshape(4)[:3] * 2",
        # a written view of a tensor that is not row-major
        "y = lucid.arange(6.0).view(2, 3).t().detach(); y[1].copy_(x[:, 0] * x[:, 1]); out = y.t()",
        "y = lucid.zeros(3, 2).t(); z = y.detach(); z[:, 1:].add_(x[:, :2]); out = z",
    ],
)
def test_gradients_through_inplace_ops_match_finite_differences(program):
    rng = np.random.default_rng(2)
    base = rng.standard_normal((2, 3)).astype(np.float64)

    def run(values, grad):
        x = lucid.tensor(values.astype(np.float32), requires_grad=grad)
        scope = {"x": x, "lucid": lucid}
        exec(program, scope)
        return x, scope["out"]

    weights = rng.standard_normal((2, 3))
    x, out = run(base, True)
    (out * lucid.tensor(weights.astype(np.float32))).sum().backward()
    want = _numeric_grad(lambda v: float((run(v, False)[1].numpy().astype(np.float64) * weights).sum()), base)
    got = np.zeros_like(base) if x.grad is None else x.grad.numpy()
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


def test_an_inplace_op_makes_a_new_history_and_views_see_it():
    x = lucid.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    v = y[:1]
    y.mul_(3)
    assert y.grad_fn == "CopyBackwards" and v.requires_grad
    v.sum().backward()
    assert x.grad.tolist() == [3.0, 0.0]


def test_views_made_before_a_recorded_write_take_up_the_new_history():
    w = lucid.tensor([1.0, 2.0], requires_grad=True)
    x = lucid.zeros(4)
    u, v = x[2:], x[:2]
    assert not u.requires_grad
    v.copy_(w * 3)  # x did not require grad: from now on it does, and so does every view of it
    assert x.requires_grad and x.grad_fn == "CopySlices"
    assert u.requires_grad and u.grad_fn == "AsStridedBackward" and v.grad_fn == "AsStridedBackward"
    (x * lucid.arange(4.0)).sum().backward()
    assert w.grad.tolist() == [0.0, 3.0]


def test_an_expanded_view_made_before_a_write_adds_up_its_gradients():
    rng = np.random.default_rng(5)
    x = lucid.tensor(rng.standard_normal(4).astype(np.float32), requires_grad=True)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    y = x * 1
    e = y.expand(3, 4)
    y.mul_(2)
    assert e.grad_fn == "AsStridedBackward"
    (e * lucid.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * w.sum(0), rtol=1e-6)


def test_tensor_index_writes_touch_only_the_indexed_elements():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((5, 6)).astype(np.float32)
    x = lucid.tensor(a.copy())
    v = x.t()[1:]  # a strided view: the writes go through its strides
    n = v.numpy().copy()
    mask = n > 0
    v[lucid.tensor(mask)] = -1.0
    n[mask] = -1.0
    idx = np.array([0, 3, 0, 2])
    vals = rng.standard_normal((4, 5)).astype(np.float32)
    v.index_put_((lucid.tensor(idx),), lucid.tensor(vals), accumulate=True)
    np.add.at(n, idx, vals)
    v[:, lucid.tensor([4, 1])] = lucid.tensor([7.0, 8.0])
    n[:, [4, 1]] = [7.0, 8.0]
    _close(v, n)
    want = a.copy()
    want.T[1:] = n
    _close(x, want)


def test_index_put_into_an_expanded_view_writes_the_shared_elements():
    base = lucid.zeros(4)
    e = base.expand(3, 4)
    e.index_put_((lucid.tensor([1]),), lucid.tensor([1.0, 2.0, 3.0, 4.0]))
    assert base.tolist() == [1.0, 2.0, 3.0, 4.0]  # as in PyTorch, which also warns


def test_assigning_data_keeps_the_gradient():
    p = nn.Parameter(lucid.ones(3))
    (p * 2).sum().backward()
    p.data = lucid.zeros(3)
    assert p.requires_grad and p.is_leaf and p.grad.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(TypeError, match="floating-point"):
        p.data = lucid.zeros(3, dtype=lucid.int64)
    assert p.tolist() == [0.0, 0.0, 0.0]


def test_leaves_that_require_grad_are_changed_only_without_recording():
    w = lucid.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w.add_(1)
    with pytest.raises(RuntimeError, match="view of a leaf tensor that requires grad"):
        w[:1].add_(1)
    with lucid.no_grad():
        w.add_(1)
    assert w.tolist() == [2.0, 3.0] and w.is_leaf and w.requires_grad


@pytest.mark.parametrize(
    "program,saved",
    [
        ("y = x.exp(); y.add_(1)", "ExpBackward"),
        ("h = x * 1; y = h * x.detach(); h.zero_()", None),  # mul saved x.detach() for h's gradient, not h
        ("h = x * 1; y = x * h; h.mul_(2)", "MulBackward"),
        ("h = x * 1; y = h.sigmoid(); y.zero_()", "SigmoidBackward"),
        ("h = x * 1; y = h @ h.t(); h[0, 0] = 1.0", "MatmulBackward"),
    ],
)
def test_a_saved_tensor_changed_in_place_is_refused_in_backward(program, saved):
    x = lucid.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
    scope = {"x": x}
    exec(program, scope)
    y = scope["y"]
    if saved is None:
        y.sum().backward()
        assert x.grad is not None
        return
    with pytest.raises(
        RuntimeError, match=f"modified by an inplace operation.*{saved} saved.*is at version 1; expected version 0"
    ):
        y.sum().backward()


def test_version_counter_counts_writes_through_any_view():
    x = lucid.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = h.exp()
    h.detach()[0] = 3.0  # the same storage: exp saved its output, not h, so this is allowed
    y.sum().backward()
    y2 = h.exp()
    y2.detach().add_(1)  # exp's saved output changed through an alias
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y2.sum().backward()


@pytest.mark.parametrize(
    "op,refuses",
    [
        ("exp_", True),
        ("sigmoid_", True),
        ("tanh_", True),
        ("sqrt_", True),
        ("relu_", True),
        ("abs_", False),
        ("neg_", False),
        ("log_", False),
    ],
)
def test_an_inplace_result_its_backward_needs_is_protected_by_the_version_check(op, refuses):
    # As PyTorch: an in-place op whose backward reads its result saves the destination, so a
    # later write into it makes backward refuse; one that reads its input saves that, and goes on.
    x = lucid.tensor(np.array([0.5, 1.0, 2.0], np.float32), requires_grad=True)
    y = x * 1.5
    getattr(y, op)()
    y.add_(1.0)
    if refuses:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
    else:
        y.sum().backward()
        assert x.grad is not None


def test_tensor_index_writes_and_joins_keep_their_operands_alive():
    # A copy made for autograd, or a generator's tensors, have no other owner while the engine
    # uses them.
    x = lucid.tensor(np.arange(6, dtype=np.float32).reshape(3, 2), requires_grad=True)
    y = x * 1.5
    y[[0, 2]] = 2.0
    y.mul_(2)  # rows 0 and 2 hold 4, row 1 holds 3 * x = [6, 9]
    y[y > 7] = 1.0
    (y * lucid.tensor(np.arange(6, dtype=np.float32).reshape(3, 2))).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0], [3 * 2, 0], [0, 0]])
    parts = [lucid.tensor(np.ones(2, np.float32), requires_grad=True) for _ in range(3)]
    joined = lucid.cat(p * (i + 1) for i, p in enumerate(parts))
    np.testing.assert_array_equal(joined.numpy(), [1, 1, 2, 2, 3, 3])
    assert lucid.stack(p * 2 for p in parts).shape == (3, 2)


def test_writes_through_data_are_hidden_from_the_version_check_and_detach_writes_are_not():
    # PyTorch's rule: .data has a version counter of its own; detach() shares its source's.
    x = lucid.ones(3, requires_grad=True)
    y = x * 2
    z = y * y  # saves y
    y.data.add_(1)
    y.data[0] = 5.0
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2 * 2 * 5, 2 * 2 * 3, 2 * 2 * 3])  # computed with the new values
    x = lucid.ones(3, requires_grad=True)
    y = x * 2
    z = y * y
    y.detach().add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_autocast_casts_a_weight_again_after_a_write_through_data():
    # The cast cache counts writes through any alias of the weight's memory.
    w = lucid.tensor(np.ones((4, 4), np.float32), requires_grad=True)
    x = lucid.tensor(np.ones((2, 4), np.float32))
    with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
        first = (x @ w).float().numpy()
        w.data.mul_(2)
        second = (x @ w).float().numpy()
    np.testing.assert_allclose(first, 4.0)
    np.testing.assert_allclose(second, 8.0)


# ---- as_strided ----------------------------------------------------------------------------------


def test_as_strided_views_the_storage_as_numpy_does():
    a = np.arange(24, dtype=np.float32)
    x = lucid.tensor(a.copy())
    v = x[2:].as_strided((3, 4), (5, 1))  # from the view's own offset: overlapping windows
    want = np.lib.stride_tricks.as_strided(a[2:], (3, 4), (20, 4))
    _close(v, want)
    assert v.storage_offset() == 2 and v.stride() == (5, 1)
    v[1, 0] = -1.0  # a write through it reaches the storage, and every view of it
    assert x[7].item() == -1.0
    w = x.as_strided((2, 2), (0, 3), storage_offset=10)
    _close(w, [[10.0, 13.0], [10.0, 13.0]])


def test_as_strided_refuses_what_lies_outside_the_storage():
    x = lucid.zeros(12)
    with pytest.raises(RuntimeError, match="need a storage of 15 elements"):
        x.as_strided((5, 3), (3, 1))
    with pytest.raises(RuntimeError, match="negative strides"):
        x.as_strided((3,), (-1,))
    with pytest.raises(RuntimeError, match="2 strides for 1 sizes"):
        x.as_strided((3,), (1, 1))
    with pytest.raises(RuntimeError, match="storage offset"):
        x.as_strided((3,), (1,), storage_offset=10)
    for size in ((), (2,)):  # the largest offset: the message must not overflow computing its reach
        with pytest.raises(RuntimeError, match="need a storage of more than 9223372036854775807 elements"):
            x.as_strided(size, (0,) * len(size), storage_offset=2**63 - 1)
    # An empty view may start at the storage's end, not past it: an offset past it once reached
    # the kernels, whose address arithmetic overflowed.
    assert x.as_strided((0,), (1,), storage_offset=12).numel() == 0
    assert (x.as_strided((0, 3), (3, 1), storage_offset=12) > 1).shape == (0, 3)
    for offset in (13, 2**62, 2**63 - 1):
        with pytest.raises(
            RuntimeError, match=f"storage offset {offset} is past the end of the tensor's storage of 12"
        ):
            x.as_strided((0,), (1,), storage_offset=offset)


def test_as_strided_gradients_add_up_where_its_elements_overlap():
    rng = np.random.default_rng(8)
    base = rng.standard_normal(12)
    weights = rng.standard_normal((4, 3))

    def f(values, grad=False):
        x = lucid.tensor(values.astype(np.float32), requires_grad=grad)
        y = (x * 1).view(4, 3).t()  # a's gradient is read back in a's own (transposed) layout
        return x, (y.as_strided((4, 3), (2, 1), 1) * lucid.tensor(weights.astype(np.float32))).sum()

    x, out = f(base, True)
    out.backward()
    want = _numeric_grad(lambda v: float(f(v)[1].item()), base)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=2e-2, atol=2e-2)


# ---- out= ----------------------------------------------------------------------------------------


def test_out_writes_the_result_into_the_given_tensor():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    out = lucid.zeros(2, 3)
    alias = out[1]
    assert lucid.exp(lucid.tensor(a), out=out) is out
    _close(out, np.exp(a))
    _close(alias, np.exp(a)[1])  # into its storage: its views see it
    lucid.where(lucid.tensor(a > 0), lucid.tensor(a), 0.0, out=out)
    _close(out, np.where(a > 0, a, 0))
    values, indices = lucid.zeros(2), lucid.zeros(2, dtype=lucid.int64)
    lucid.max(lucid.tensor(a), 1, out=(values, indices))
    _close(values, a.max(1))
    assert indices.tolist() == a.argmax(1).tolist()
    wider = lucid.zeros(2, 3, dtype=lucid.float16)
    lucid.abs(lucid.tensor(a), out=wider)
    assert wider.dtype == lucid.float16
    np.testing.assert_allclose(wider.float().numpy(), np.abs(a), rtol=1e-3)


def test_out_of_another_shape_is_resized_and_bad_outs_are_refused():
    a = lucid.arange(6.0).view(2, 3)
    empty = lucid.empty(0)
    lucid.cat([a, a], out=empty)
    assert empty.shape == (4, 3)
    full = lucid.zeros(5)
    with pytest.warns(UserWarning, match="was resized"):
        lucid.stack([a, a], out=full)
    assert full.shape == (2, 2, 3) and full.tolist()[1] == a.tolist()
    with pytest.raises(RuntimeError, match="can't be cast"):
        lucid.exp(a, out=lucid.zeros(2, 3, dtype=lucid.int64))
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        lucid.exp(lucid.ones(2, requires_grad=True), out=lucid.zeros(2))
    with pytest.raises(TypeError, match="out must be a lucid.Tensor"):
        lucid.exp(a, out=np.zeros((2, 3)))
    with pytest.raises(TypeError, match="out must be a tuple of 2 tensors"):
        lucid.max(a, 1, out=lucid.zeros(2))
    with pytest.raises(TypeError):
        lucid.reshape(a, (3, 2), out=lucid.zeros(3, 2))  # views take no out=, as in PyTorch


def test_index_put_makes_a_new_tensor_with_gradients_to_both():
    rng = np.random.default_rng(10)
    a = rng.standard_normal((4, 3)).astype(np.float32)
    v = rng.standard_normal((3, 3)).astype(np.float32)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    rows = np.array([2, 0, 2])
    x = lucid.tensor(a, requires_grad=True)
    vals = lucid.tensor(v, requires_grad=True)
    out = lucid.index_put(x, (lucid.tensor(rows),), vals, accumulate=True)
    want = a.copy()
    np.add.at(want, rows, v)
    _close(out, want)
    _close(x, a)  # x itself is unchanged
    (out * lucid.tensor(w)).sum().backward()
    _close(x.grad, w)
    _close(vals.grad, w[rows])
    replaced = x.index_put((lucid.tensor([1, 3]),), lucid.tensor(0.0))
    want = a.copy()
    want[[1, 3]] = 0.0
    _close(replaced, want)
    with pytest.raises(TypeError, match="indices must be a tuple"):
        x.index_put(lucid.tensor([1]), vals)
