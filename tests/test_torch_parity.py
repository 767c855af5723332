"""Small pieces of PyTorch's API that real programs reach for, against numpy."""

import numpy as np
import pytest

import lucid
import lucid.nn as nn
import lucid.nn.functional as F

rng = np.random.default_rng(21)


def test_like_factories_and_new_methods_keep_dtype_and_device():
    t = lucid.ones(2, 3, device="metal").half()
    for made in (
        lucid.zeros_like(t),
        lucid.full_like(t, 2.5),
        lucid.rand_like(t),
        lucid.randn_like(t),
        lucid.empty_like(t),
        t.new_zeros(4),
        t.new_ones(1, 2),
        t.new_full((2,), 7),
        t.new_empty(3),
        t.new_tensor([1, 2]),
    ):
        assert made.dtype == lucid.float16 and made.device == t.device
    np.testing.assert_array_equal(lucid.full_like(t, 2.5).float().numpy(), np.full((2, 3), 2.5))
    assert t.new_zeros(4, dtype=lucid.int64).dtype == lucid.int64
    assert lucid.empty(2, 2).shape == (2, 2)
    r = lucid.randn_like(lucid.zeros(20000))
    assert abs(float(r.mean().item())) < 0.05 and abs(float(r.std().item()) - 1) < 0.05
    assert lucid.full_like(t, 1.0, requires_grad=True).requires_grad


def test_view_as_reshape_as_and_type():
    a = lucid.tensor(np.arange(6, dtype=np.float32))
    b = lucid.zeros(2, 3)
    assert a.view_as(b).shape == (2, 3) and a.reshape_as(b).shape == (2, 3)
    assert a.type() == "lucid.FloatTensor" and a.long().type() == "lucid.LongTensor"
    assert a.type(lucid.float16).dtype == lucid.float16
    assert a.type("torch.LongTensor").dtype == lucid.int64
    assert a.type("torch.DoubleTensor").dtype == lucid.float64 and a.double().type() == "lucid.DoubleTensor"
    with pytest.raises(ValueError, match="unknown tensor type"):
        a.type("torch.ComplexFloatTensor")


def test_zero_dim_tensors_format_as_numbers():
    loss = lucid.tensor(0.123456)
    assert f"{loss:.4f}" == "0.1235" and f"{lucid.tensor(3):d}" == "3"
    assert f"{lucid.ones(2)}" == repr(lucid.ones(2))


def test_module_apply_visits_children_first_then_the_module():
    model = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.ReLU(), nn.Linear(3, 1)))
    seen = []
    assert model.apply(lambda m: seen.append(type(m).__name__)) is model
    assert seen == ["Linear", "ReLU", "Linear", "Sequential", "Sequential"]

    def init(m):
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.weight, 0.5)

    model.apply(init)
    assert (model[0].weight.numpy() == 0.5).all() and (model[1][1].weight.numpy() == 0.5).all()
    with pytest.raises(TypeError, match="callable"):
        model.apply(3)


@pytest.mark.parametrize("device", ["cpu", "metal"])
def test_leaky_relu_and_its_gradient(device):
    x = np.array([-2.0, -0.5, 0.0, 0.5, 3.0], np.float32)
    t = lucid.tensor(x, device=device, requires_grad=True)
    y = nn.LeakyReLU(0.1)(t)
    np.testing.assert_allclose(y.numpy(), np.where(x > 0, x, 0.1 * x), rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), np.where(x > 0, 1.0, 0.1), rtol=1e-6)  # 0 takes the slope, as PyTorch
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        F.leaky_relu(t, inplace=True)  # as PyTorch refuses
    u = t * 1
    assert F.leaky_relu(u, inplace=True) is u
    np.testing.assert_allclose(u.detach().numpy(), np.where(x > 0, x, 0.01 * x), rtol=1e-6)


@pytest.mark.parametrize("device", ["cpu", "metal"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_leaky_relu_fused_and_composed_paths_match_numpy(device, layout):
    # Large enough for the kernel's threads; a transposed view takes the composed path.
    x = np.random.default_rng(7).standard_normal((300, 257)).astype(np.float32)
    x[0, :4] = [0.0, -0.0, np.nan, -np.inf]
    src = x.T.copy() if layout == "transposed" else x
    t = lucid.tensor(src, device=device, requires_grad=True)
    view = t.T if layout == "transposed" else t
    y = F.leaky_relu(view, 0.2)
    want = np.where(x > 0, x, np.float32(0.2) * x)
    np.testing.assert_array_equal(y.numpy(), want)  # one rounding either way: bit-equal
    g = np.random.default_rng(8).standard_normal(x.shape).astype(np.float32)
    y.backward(lucid.tensor(g, device=device))
    want_grad = np.where(x > 0, g, np.float32(0.2) * g)
    np.testing.assert_array_equal(t.grad.numpy(), want_grad.T if layout == "transposed" else want_grad)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_leaky_relu_in_low_precision_rounds_once(dtype):
    import ml_dtypes

    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    x = np.random.default_rng(9).standard_normal(1000).astype(np_dtype)
    y = F.leaky_relu(lucid.tensor(x, dtype=getattr(lucid, dtype)), 0.3)
    assert y.dtype is getattr(lucid, dtype)
    x32 = x.astype(np.float32)
    np.testing.assert_array_equal(
        y.float().numpy(), np.where(x32 > 0, x32, 0.3 * x32).astype(np_dtype).astype(np.float32)
    )


def test_leaky_relu_refuses_what_pytorch_refuses():
    with pytest.raises(TypeError, match="floating-point"):
        F.leaky_relu(lucid.tensor([1, -2]))
    with pytest.raises(TypeError, match="negative_slope must be a number"):
        F.leaky_relu(lucid.ones(2), "0.1")
    with pytest.raises(TypeError, match="lucid.Tensor"):
        F.leaky_relu(np.ones(2))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_matches_numpy_and_clamps_its_logs(reduction):
    p = rng.random((4, 3)).astype(np.float32) * 0.98 + 0.01
    p[0, 0], p[0, 1] = 0.0, 1.0  # log(0) is clamped at -100
    y = (rng.random((4, 3)) > 0.5).astype(np.float32)
    y[0, 0], y[0, 1] = 1.0, 0.0
    w = rng.random((4, 3)).astype(np.float32)
    tp = lucid.tensor(p, requires_grad=True)
    got = F.binary_cross_entropy(tp, lucid.tensor(y), lucid.tensor(w), reduction=reduction)
    with np.errstate(divide="ignore"):
        each = -(y * np.maximum(np.log(p), -100) + (1 - y) * np.maximum(np.log(1 - p), -100)) * w
    want = {"mean": each.mean(), "sum": each.sum(), "none": each}[reduction]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(
        nn.BCELoss(lucid.tensor(w), reduction=reduction)(tp, lucid.tensor(y)).numpy(), want, rtol=1e-5
    )
    got.sum().backward()
    scale = 1 / p.size if reduction == "mean" else 1.0
    # PyTorch's closed form, whose denominator is held at 1e-12 where p is 0 or 1.
    grad = w * (p - y) / np.maximum(p * (1 - p), 1e-12) * scale
    np.testing.assert_allclose(tp.grad.numpy(), grad, rtol=1e-4)
    assert abs(tp.grad.numpy()[0, 0]) > 1e10  # the clamp, not a zero or an infinity
    with lucid.amp.autocast("metal"):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(lucid.tensor(p, device="metal"), lucid.tensor(y, device="metal"))
    with pytest.raises(ValueError, match="must be the same as input shape"):
        F.binary_cross_entropy(tp, lucid.tensor(y[:2]))


def test_binary_cross_entropy_gradients_of_target_and_weight_match_finite_differences():
    p = (rng.random((3, 4)) * 0.8 + 0.1).astype(np.float64)
    y = rng.random((3, 4))
    w = rng.random((4,)) + 0.5
    tp, ty, tw = (lucid.tensor(a, requires_grad=True) for a in (p, y, w))

    def loss(p, y, w):
        return float((-(y * np.log(p) + (1 - y) * np.log1p(-p)) * w).mean())

    out = F.binary_cross_entropy(tp, ty, tw)
    np.testing.assert_allclose(out.item(), loss(p, y, w), rtol=1e-12)
    out.backward()
    eps = 1e-6
    for i, (arr, t) in enumerate(((p, tp), (y, ty), (w, tw))):
        want = np.zeros_like(arr)
        for j in np.ndindex(arr.shape):
            hi, lo = arr.copy(), arr.copy()
            hi[j] += eps
            lo[j] -= eps
            args_hi = [p, y, w]
            args_lo = [p, y, w]
            args_hi[i], args_lo[i] = hi, lo
            want[j] = (loss(*args_hi) - loss(*args_lo)) / (2 * eps)
        np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-6, atol=1e-9)
    # Without a weight that needs a gradient the target's gradient is -logit(p).
    ty.grad = None
    F.binary_cross_entropy(tp, ty, reduction="sum").backward()
    np.testing.assert_allclose(ty.grad.numpy(), -np.log(p / (1 - p)), rtol=1e-10)


def test_binary_cross_entropy_refuses_bad_arguments():
    p = lucid.tensor(np.full((2, 3), 0.5, np.float32))
    with pytest.raises(ValueError, match="weight of shape \\[4\\] does not broadcast"):
        F.binary_cross_entropy(p, p, lucid.ones(4))
    with pytest.raises(TypeError, match="floating-point"):
        F.binary_cross_entropy(p, lucid.ones(2, 3, dtype=lucid.int64))
    with pytest.raises(ValueError, match="reduction must be"):
        F.binary_cross_entropy(p, p, reduction="avg")
    with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, p)


def _run_optimizer(make, steps=4, device="cpu"):
    p0 = rng.standard_normal((3, 4)).astype(np.float32)
    grads = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(steps)]
    p = nn.Parameter(lucid.tensor(p0, device=device))
    opt = make([p])
    for g in grads:
        p.grad = lucid.tensor(g, device=device)
        opt.step()
    return p0, grads, p.numpy()


def _rmsprop_ref(p, grads, lr, alpha, eps, wd, momentum, centered):
    p = p.astype(np.float64)
    sq = np.zeros_like(p)
    ga = np.zeros_like(p)
    buf = np.zeros_like(p)
    for g in grads:
        g = g + wd * p
        sq = alpha * sq + (1 - alpha) * g * g
        if centered:
            ga = alpha * ga + (1 - alpha) * g
            avg = np.sqrt(sq - ga * ga) + eps
        else:
            avg = np.sqrt(sq) + eps
        if momentum:
            buf = momentum * buf + g / avg
            p = p - lr * buf
        else:
            p = p - lr * g / avg
    return p


@pytest.mark.parametrize("device", ["cpu", "metal"])
@pytest.mark.parametrize("kw", [dict(), dict(momentum=0.9, weight_decay=0.01), dict(centered=True, alpha=0.9)])
def test_rmsprop_follows_pytorchs_rule(device, kw):
    p0, grads, got = _run_optimizer(lambda ps: lucid.optim.RMSprop(ps, lr=0.01, **kw), device=device)
    want = _rmsprop_ref(
        p0,
        grads,
        0.01,
        kw.get("alpha", 0.99),
        1e-8,
        kw.get("weight_decay", 0.0),
        kw.get("momentum", 0.0),
        kw.get("centered", False),
    )
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw", [dict(), dict(lr_decay=0.1, initial_accumulator_value=0.5, weight_decay=0.1)])
def test_adagrad_follows_pytorchs_rule(kw):
    p0, grads, got = _run_optimizer(lambda ps: lucid.optim.Adagrad(ps, lr=0.1, **kw))
    p = p0.astype(np.float64)
    total = np.full_like(p, kw.get("initial_accumulator_value", 0.0))
    for step, g in enumerate(grads, 1):
        g = g + kw.get("weight_decay", 0.0) * p
        total += g * g
        p = p - 0.1 / (1 + (step - 1) * kw.get("lr_decay", 0.0)) * g / (np.sqrt(total) + 1e-10)
    np.testing.assert_allclose(got, p, rtol=1e-4, atol=1e-5)


def test_adadelta_follows_pytorchs_rule_and_keeps_a_low_precision_parameter_dtype():
    p0, grads, got = _run_optimizer(lambda ps: lucid.optim.Adadelta(ps, lr=1.0, rho=0.9))
    p = p0.astype(np.float64)
    sq, acc = np.zeros_like(p), np.zeros_like(p)
    for g in grads:
        sq = 0.9 * sq + 0.1 * g * g
        delta = np.sqrt(acc + 1e-6) / np.sqrt(sq + 1e-6) * g
        acc = 0.9 * acc + 0.1 * delta * delta
        p = p - delta
    np.testing.assert_allclose(got, p, rtol=1e-4, atol=1e-5)
    q = nn.Parameter(lucid.ones(3).bfloat16())
    opt = lucid.optim.Adadelta([q])
    q.grad = lucid.ones(3).bfloat16()
    opt.step()
    assert q.dtype == lucid.bfloat16 and opt.state[q]["square_avg"].dtype == lucid.float32
    with pytest.raises(ValueError, match="invalid rho"):
        lucid.optim.Adadelta([q], rho=1.5)


@pytest.mark.parametrize("make", [lucid.optim.RMSprop, lucid.optim.Adagrad, lucid.optim.Adadelta])
def test_adaptive_optimizers_keep_parameters_trainable(make):
    model = nn.Linear(3, 2)
    opt = make(model.parameters())
    x = lucid.ones(4, 3)
    for _ in range(2):  # the second backward needs parameters that still require grad
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    assert all(p.requires_grad and p.is_leaf for p in model.parameters())


def test_randint_is_uniform_in_range_and_reproducible():
    lucid.manual_seed(3)
    a = lucid.randint(-2, 5, (4000,))
    lucid.manual_seed(3)
    b = lucid.randint(-2, 5, (4000,))
    assert a.dtype == lucid.int64 and (a.numpy() == b.numpy()).all()
    counts = np.bincount(a.numpy() + 2, minlength=7)
    assert a.numpy().min() == -2 and a.numpy().max() == 4 and counts.min() > 450
    assert lucid.randint(3, (2, 2), device="metal").device.type == "metal"
    with pytest.raises(ValueError, match="greater than low"):
        lucid.randint(5, 5, (2,))


def test_multinomial_follows_the_weights_and_replacement():
    lucid.manual_seed(0)
    w = lucid.tensor([[1.0, 0.0, 3.0], [0.0, 5.0, 0.0]])
    draws = lucid.multinomial(w, 2000, replacement=True).numpy()
    assert draws.shape == (2, 2000) and set(np.unique(draws[1])) == {1}
    assert 0.7 < (draws[0] == 2).mean() < 0.8 and not (draws[0] == 1).any()
    once = lucid.tensor([0.2, 0.3, 0.5]).multinomial(3).numpy()
    assert sorted(once) == [0, 1, 2]
    with pytest.raises(ValueError, match="without replacement"):
        lucid.multinomial(lucid.tensor([1.0, 1.0]), 3)
    with pytest.raises(ValueError, match="non-negative"):
        lucid.multinomial(lucid.tensor([1.0, -1.0]), 1)


@pytest.mark.parametrize("diagonal", [-1, 0, 2])
def test_tril_triu_match_numpy_and_pass_gradients(diagonal):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    t = lucid.tensor(x, requires_grad=True)
    np.testing.assert_array_equal(lucid.tril(t, diagonal).numpy(), np.tril(x, diagonal))
    np.testing.assert_array_equal(t.triu(diagonal).numpy(), np.triu(x, diagonal))
    lucid.tril(t, diagonal).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), np.tril(np.ones_like(x), diagonal))
    assert lucid.tril(lucid.ones(3, 3, dtype=lucid.int64)).dtype == lucid.int64
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        lucid.tril(lucid.ones(3))


@pytest.mark.parametrize("device", ["cpu", "metal"])
def test_sort_argsort_and_topk_match_numpy_and_pass_gradients(device):
    x = rng.standard_normal((3, 6)).astype(np.float32)
    t = lucid.tensor(x, device=device, requires_grad=True)
    values, indices = t.sort(dim=1)
    np.testing.assert_array_equal(values.numpy(), np.sort(x, 1))
    np.testing.assert_array_equal(indices.numpy(), np.argsort(x, 1, kind="stable"))
    np.testing.assert_array_equal(lucid.argsort(t, 0, descending=True).numpy(), np.argsort(-x, 0, kind="stable"))
    top, where = lucid.topk(t, 2)
    np.testing.assert_array_equal(top.numpy(), -np.sort(-x, 1)[:, :2])
    (top * lucid.tensor([[1.0, 10.0]], device=device)).sum().backward()
    want = np.zeros_like(x)
    for r in range(3):
        want[r, where.numpy()[r, 0]] += 1
        want[r, where.numpy()[r, 1]] += 10
    np.testing.assert_array_equal(t.grad.numpy(), want)
    low = t.topk(2, dim=0, largest=False)
    np.testing.assert_array_equal(low.values.numpy(), np.sort(x, 0)[:2])
    np.testing.assert_array_equal(low.indices.numpy(), np.argsort(x, 0, kind="stable")[:2])
    ordered = lucid.sort(t, dim=1, descending=True)
    np.testing.assert_array_equal(ordered.values.numpy(), -np.sort(-x, 1))
    np.testing.assert_array_equal(ordered.indices.numpy(), np.argsort(-x, 1, kind="stable"))


def test_ordering_puts_nan_first_when_descending_and_handles_integer_extremes():
    v, i = lucid.tensor([1.0, float("nan"), 3.0]).topk(2)
    assert np.isnan(v.numpy()[0]) and i.numpy().tolist() == [1, 2]
    big = np.array([-(2**63), 5, 0, 2**63 - 1], dtype=np.int64)
    np.testing.assert_array_equal(lucid.tensor(big).sort(descending=True)[0].numpy(), np.sort(big)[::-1])
    with pytest.raises(ValueError, match="k \\(5\\) must be between 0"):
        lucid.tensor([1.0, 2.0]).topk(5)
    with pytest.raises(IndexError, match="out of range"):
        lucid.tensor([1.0]).sort(dim=2)
