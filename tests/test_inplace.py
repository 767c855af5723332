"""In-place ops, item assignment and views that see each other's writes (lucid/_views.py)."""

import numpy as np
import pytest

import lucid
import lucid.nn as nn
import lucid.nn.functional as F
from _helpers import DEVICES


def _arr(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_setitem_matches_numpy(device):
    a = _arr((4, 5))
    cases = [
        (1, 7.0),
        ((slice(None), 2), np.arange(4, dtype=np.float32)),
        ((slice(1, None, 2), slice(0, 4, 3)), -1.0),
        ((Ellipsis, None, 0), np.float32(3.5)),
        (np.array([True, False, True, False]), _arr((5,), 1)),
        (a > 0.5, 0.0),
        ((np.array([3, 0]), np.array([1, 4])), np.array([10.0, 20.0], np.float32)),
        ((slice(None), np.array([4, 0, 2])), _arr((4, 3), 2)),
    ]
    for key, value in cases:
        expected = a.copy()
        expected[key] = value
        t = lucid.tensor(a, device=device)
        lkey = (
            tuple(lucid.tensor(k, device=device) if isinstance(k, np.ndarray) else k for k in key)
            if isinstance(key, tuple)
            else (lucid.tensor(key, device=device) if isinstance(key, np.ndarray) else key)
        )
        t[lkey] = lucid.tensor(value, device=device) if isinstance(value, np.ndarray) else value
        np.testing.assert_array_equal(t.numpy(), expected, err_msg=str(key))


def test_setitem_converts_and_broadcasts_and_checks():
    t = lucid.zeros(2, 3, dtype=lucid.int64)
    t[0] = 2.7  # converted to the tensor's dtype, as PyTorch does
    t[1] = lucid.tensor([1, 2, 3])
    np.testing.assert_array_equal(t.numpy(), [[2, 2, 2], [1, 2, 3]])
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        t[0] = lucid.tensor([1, 2])
    with pytest.raises(IndexError, match="out of bounds"):
        t[2] = 0
    b = lucid.tensor([True, False])
    b[1] = True
    assert b.tolist() == [True, True]
    h = lucid.zeros(3, dtype=lucid.bfloat16)
    h[1] = 1.5
    assert h.tolist() == [0.0, 1.5, 0.0]


def test_repeated_integer_index_takes_the_last_write_and_index_put_accumulates():
    t = lucid.zeros(4)
    t[lucid.tensor([1, 3, 1])] = lucid.tensor([5.0, 6.0, 7.0])
    assert t.tolist() == [0.0, 7.0, 0.0, 6.0]
    acc = lucid.zeros(4)
    acc.index_put_((lucid.tensor([1, 3, 1]),), lucid.tensor([5.0, 6.0, 7.0]), accumulate=True)
    assert acc.tolist() == [0.0, 12.0, 0.0, 6.0]


def test_inplace_methods_match_numpy():
    a, b = _arr((3, 4), 0), np.abs(_arr((3, 4), 1)) + 0.5
    ops = [
        (lambda t: t.add_(lucid.tensor(b), alpha=2), a + 2 * b),
        (lambda t: t.sub_(1.5), a - 1.5),
        (lambda t: t.sub_(lucid.tensor(b), alpha=0.5), a - 0.5 * b),
        (lambda t: t.mul_(lucid.tensor(b[0])), a * b[0]),
        (lambda t: t.div_(4), a / 4),
        (lambda t: t.clamp_(-0.5, 0.5), np.clip(a, -0.5, 0.5)),
        (lambda t: t.clip_(min=0), np.maximum(a, 0)),
        (lambda t: t.fill_(3), np.full_like(a, 3)),
        (lambda t: t.fill_(lucid.tensor(2.5)), np.full_like(a, 2.5)),
        (lambda t: t.zero_(), np.zeros_like(a)),
        (lambda t: t.copy_(lucid.tensor(b[1])), np.broadcast_to(b[1], a.shape)),
        (lambda t: t.neg_(), -a),
        (lambda t: t.abs_(), np.abs(a)),
        (lambda t: t.relu_(), np.maximum(a, 0)),
        (lambda t: t.exp_(), np.exp(a)),
        (lambda t: t.tanh_(), np.tanh(a)),
        (lambda t: t.masked_fill_(lucid.tensor(a > 0), -2.0), np.where(a > 0, -2.0, a)),
        (lambda t: t.addcmul_(lucid.tensor(b), lucid.tensor(a), value=0.5), a + 0.5 * b * a),
        (lambda t: t.addcdiv_(lucid.tensor(a), lucid.tensor(b), value=2), a + 2 * a / b),
        (lambda t: t.lerp_(lucid.tensor(b), 0.25), a + 0.25 * (b - a)),
        (lambda t: t.pow_(2), a**2),
    ]
    for i, (op, expected) in enumerate(ops):
        t = lucid.tensor(a)
        alias = t
        out = op(t)
        assert out is t and alias is t, i
        np.testing.assert_allclose(t.numpy(), expected, rtol=1e-6, atol=1e-6, err_msg=f"op {i}")


def test_inplace_type_and_shape_rules():
    t = lucid.zeros(3, dtype=lucid.int64)
    with pytest.raises(RuntimeError, match="can't be cast"):
        t.add_(0.5)
    t.add_(2)
    assert t.tolist() == [2, 2, 2]
    h = lucid.ones(3, dtype=lucid.float16)
    h.mul_(lucid.tensor([2.0, 3.0, 4.0]))  # a float32 result is converted back, as in PyTorch
    assert h.dtype is lucid.float16 and h.tolist() == [2.0, 3.0, 4.0]
    with pytest.raises(RuntimeError, match="does not match the tensor's shape"):
        lucid.zeros(3).add_(lucid.zeros(2, 3))
    with pytest.raises(TypeError):
        lucid.zeros(3).fill_("x")


def test_augmented_assignment_updates_the_object():
    t = lucid.tensor([1.0, 2.0])
    same = t
    t += 1
    t *= lucid.tensor([2.0, 3.0])
    t -= 1
    t /= 2
    assert same is t
    np.testing.assert_allclose(same.numpy(), [1.5, 4.0])


def test_views_see_writes_both_ways():
    a = _arr((3, 4))
    base = lucid.tensor(a)
    row, col, tr, flat = base[1], base[:, 2], base.t(), base.view(-1)
    row.fill_(9.0)  # a write to a view reaches the base and the other views
    expected = a.copy()
    expected[1] = 9.0
    np.testing.assert_array_equal(base.numpy(), expected)
    np.testing.assert_array_equal(col.numpy(), expected[:, 2])
    np.testing.assert_array_equal(tr.numpy(), expected.T)
    np.testing.assert_array_equal(flat.numpy(), expected.reshape(-1))
    base[0, 0] = -1.0  # a write to the base reaches its views
    expected[0, 0] = -1.0
    np.testing.assert_array_equal(tr.numpy(), expected.T)
    tr[3] = 5.0  # a view of a transposed view
    expected[:, 3] = 5.0
    np.testing.assert_array_equal(base.numpy(), expected)
    np.testing.assert_array_equal(row.numpy(), expected[1])
    sub = tr[1:3]  # a view of a view
    sub.mul_(2)
    expected[:, 1:3] *= 2
    np.testing.assert_array_equal(base.numpy(), expected)
    for piece, ref in zip(base.chunk(2, dim=1), np.split(expected, 2, axis=1)):
        np.testing.assert_array_equal(piece.numpy(), ref)
    base.chunk(2, dim=1)[1].zero_()
    expected[:, 2:] = 0
    np.testing.assert_array_equal(base.numpy(), expected)


def test_python_idiom_slice_augmented_assignment():
    t = lucid.arange(6).reshape(2, 3).float()
    t[:, 0] += 10  # Python: tmp = t[:, 0]; tmp += 10; t[:, 0] = tmp
    t[1] *= 2
    np.testing.assert_array_equal(t.numpy(), [[10, 1, 2], [26, 8, 10]])


def test_copies_are_independent():
    base = lucid.tensor([1.0, 2.0, 3.0])
    copies = [base.clone(), base[lucid.tensor([0, 1, 2])], base[base > 0], base.contiguous().clone()]
    base.zero_()
    for c in copies:
        np.testing.assert_array_equal(c.numpy(), [1.0, 2.0, 3.0])


def test_expanded_view_refuses_writes_that_pytorch_refuses():
    base = lucid.tensor([1.0, 2.0])
    e = base.expand(3, 2)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        e.add_(1)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        e.copy_(lucid.zeros(3, 2))
    assert base.tolist() == [1.0, 2.0]
    # PyTorch writes these into the shared element: a fill, one element, a row without repeats.
    e[0, 0] = 5.0
    assert base.tolist() == [5.0, 2.0]
    e[1].add_(1)
    assert base.tolist() == [6.0, 3.0]
    e.fill_(7.0)
    assert base.tolist() == [7.0, 7.0] and e.tolist() == [[7.0, 7.0]] * 3
    ok = lucid.zeros(3, 1).expand(3, 1)  # expanding nothing overlaps nothing
    ok.add_(1)
    assert ok.tolist() == [[1.0]] * 3


def test_leaf_rules_and_manual_sgd():
    w = lucid.tensor([1.0, -2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w.mul_(2)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w += 1
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w[0] = 0.0
    with pytest.raises(RuntimeError, match="view of a leaf"):
        w[0].fill_(0.0)
    assert w.tolist() == [1.0, -2.0, 3.0]
    (w * w).sum().backward()
    params = [w]
    for p in params:  # the loop variable is the parameter itself
        with lucid.no_grad():
            p -= 0.25 * p.grad
    np.testing.assert_allclose(w.numpy(), [0.5, -1.0, 1.5])
    assert w.is_leaf and w.requires_grad
    np.testing.assert_allclose(w.grad.numpy(), [2.0, -4.0, 6.0])  # kept until zero_grad
    w.data.add_(w.grad, alpha=-0.25)  # through .data, autograd does not see the write
    np.testing.assert_allclose(w.numpy(), [0.0, 0.0, 0.0])
    assert w.is_leaf and w.requires_grad
    with lucid.no_grad():
        w[1] = 4.0
    assert w.tolist() == [0.0, 4.0, 0.0] and w.is_leaf
    w.data = lucid.tensor([7.0, 8.0])
    assert w.shape == (2,) and w.requires_grad and w.is_leaf


def test_gradients_through_inplace_ops_match_finite_differences():
    x0 = _arr((5,), 3).astype(np.float64)
    v0 = _arr((2,), 4).astype(np.float64)

    def f(x, v, lib):
        if lib is np:
            y = x * 3
            y[1:3] = v * v
            y[4] *= x[0]
            return float((y * y).sum())
        y = x * 3
        y[1:3] = v * v
        y[4] *= x[0]
        return (y * y).sum()

    x = lucid.tensor(x0.astype(np.float32), requires_grad=True)
    v = lucid.tensor(v0.astype(np.float32), requires_grad=True)
    f(x, v, lucid).backward()
    eps = 1e-6
    for t, arr in ((x, x0), (v, v0)):
        num = np.zeros_like(arr)
        for i in range(arr.size):
            hi, lo = arr.copy(), arr.copy()
            hi[i] += eps
            lo[i] -= eps
            args_hi = (hi, v0) if t is x else (x0, hi)
            args_lo = (lo, v0) if t is x else (x0, lo)
            num[i] = (f(*args_hi, np) - f(*args_lo, np)) / (2 * eps)
        np.testing.assert_allclose(t.grad.numpy(), num, rtol=1e-3, atol=1e-3)


def test_writes_through_detached_aliases_reach_the_tensor():
    a = lucid.ones(3, requires_grad=True)
    y = a * 2
    y.detach().zero_()  # as in PyTorch: y's values change, its history does not
    assert y.tolist() == [0.0, 0.0, 0.0] and y.grad_fn is not None
    y.data[1] = 4.0
    assert y.tolist() == [0.0, 4.0, 0.0]
    d = a.detach()
    d[0] = 5.0  # a leaf's values change through its detached alias
    assert a.tolist() == [5.0, 1.0, 1.0] and a.is_leaf and a.requires_grad


def test_inplace_activations_and_dropout():
    x = lucid.tensor([-1.0, 0.5, 2.0])
    assert F.relu(x, inplace=True) is x and x.tolist() == [0.0, 0.5, 2.0]
    y = lucid.tensor([-1.0, 2.0])
    assert nn.LeakyReLU(0.5, inplace=True)(y) is y and y.tolist() == [-0.5, 2.0]
    z = lucid.tensor([-1.0, 1.0])
    nn.SiLU(inplace=True)(z)
    np.testing.assert_allclose(z.numpy(), [-1 / (1 + np.e), 1 / (1 + np.exp(-1))], rtol=1e-6)
    lucid.manual_seed(0)
    d = lucid.ones(1000)
    assert nn.Dropout(0.5, inplace=True)(d) is d
    vals = set(d.tolist())
    assert vals == {0.0, 2.0}
    h = lucid.randn(4, 3, requires_grad=True)
    out = nn.ReLU(inplace=True)(h * 1)  # a non-leaf activation: gradients still flow
    out.sum().backward()
    np.testing.assert_array_equal(h.grad.numpy(), (h.detach().numpy() > 0).astype(np.float32))
    assert "inplace=True" in repr(nn.ReLU(inplace=True))


def test_optimizer_step_reaches_data_aliases_and_init_writes_through_views():
    lin = nn.Linear(3, 2)
    alias = lin.weight.data
    opt = lucid.optim.SGD(lin.parameters(), lr=0.1)
    lin(lucid.ones(1, 3)).sum().backward()
    opt.step()
    np.testing.assert_array_equal(alias.numpy(), lin.weight.detach().numpy())
    with lucid.no_grad():
        nn.init.zeros_(lin.weight[0])
    np.testing.assert_array_equal(lin.weight.detach().numpy()[0], [0.0, 0.0, 0.0])


def test_views_do_not_keep_dead_references():

    base = lucid.zeros(10, requires_grad=True) * 1  # recorded writes give base new histories
    before = lucid._memory.live_tensors()
    for i in range(100):
        base[i % 10 : i % 10 + 1].add_(1)  # temporary views
    assert lucid._memory.live_tensors() == before
    assert base.tolist() == [10.0] * 10
