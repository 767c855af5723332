"""PyTorch names real programs use: the CUDA queries, inference_mode, eye/diag/roll/randperm,
mm/dot/norm, legacy tensor types, samplers and data-module paths, PixelShuffle, orthogonal_,
LBFGS; each against numpy, finite differences or recorded PyTorch values."""

import collections

import numpy as np
import pytest

import lucid
import lucid.nn as nn
import lucid.nn.functional as F


# ---- CUDA queries and devices ------------------------------------------------------------------


def test_cuda_queries_answer_for_a_machine_without_cuda():
    assert lucid.cuda.is_available() is False and lucid.cuda.device_count() == 0
    assert lucid.cuda.is_bf16_supported() is False
    lucid.cuda.manual_seed(0)
    lucid.cuda.manual_seed_all(0)
    with pytest.raises(ValueError, match="metal"):
        lucid.cuda.synchronize()
    with pytest.raises(ValueError, match="metal"):
        lucid.cuda.current_device()


@pytest.mark.parametrize(
    "make",
    [
        lambda: lucid.zeros(2).cuda(),
        lambda: lucid.zeros(2, device="cuda"),
        lambda: lucid.tensor([1.0], device="cuda:0"),
        lambda: lucid.device("cuda"),
        lambda: nn.Linear(2, 2).cuda(),
        lambda: lucid.ones(2).to("cuda"),
    ],
)
def test_asking_for_cuda_raises_and_names_metal(make):
    with pytest.raises(ValueError, match="no CUDA device.*'metal'"):
        make()


def test_tensor_flags_and_default_devices():
    t = lucid.ones(2)
    assert t.is_cuda is False and t.is_sparse is False
    assert t.to(None) is t and lucid.zeros(2, device=None).device == "cpu"
    layer = nn.Linear(3, 4, True, None, None)  # torch's positional device and dtype
    assert layer.weight.device == "cpu" and layer.weight.dtype == lucid.float32


# ---- grad modes ----------------------------------------------------------------------------------


def test_inference_mode_records_nothing_as_a_scope_and_a_decorator():
    x = lucid.ones(2, requires_grad=True)
    with lucid.inference_mode():
        assert not (x * 2).requires_grad and not lucid.is_grad_enabled()
    assert lucid.is_grad_enabled() and (x * 2).requires_grad

    @lucid.inference_mode()
    def f():
        return (x * 2).requires_grad

    assert f() is False
    with lucid.inference_mode(False):
        assert (x * 2).requires_grad
    with lucid.no_grad(), lucid.inference_mode(False):
        assert not lucid.is_grad_enabled()  # False leaves the mode as it is
    with pytest.raises(TypeError):
        lucid.inference_mode("yes")


# ---- factories and shape ops -------------------------------------------------------------------


def test_eye_and_diag_match_numpy():
    np.testing.assert_array_equal(lucid.eye(3).numpy(), np.eye(3))
    np.testing.assert_array_equal(lucid.eye(2, 4, dtype=lucid.int64).numpy(), np.eye(2, 4, dtype=np.int64))
    v = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    for k in (0, 1, -2):
        np.testing.assert_array_equal(lucid.diag(lucid.tensor(v), k).numpy(), np.diag(v, k))
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    for k in (0, 1, -1, 3):
        np.testing.assert_array_equal(lucid.tensor(m).diag(k).numpy(), np.diag(m, k))
    with pytest.raises(RuntimeError, match="1-D or 2-D"):
        lucid.diag(lucid.zeros(2, 2, 2))


def test_diag_gradients_reach_the_input():
    v = lucid.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = lucid.tensor(np.arange(16, dtype=np.float32).reshape(4, 4))
    (lucid.diag(v, 1) * w).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), np.diag(np.arange(16).reshape(4, 4), 1))


def test_randperm_is_a_seeded_permutation_and_randint_takes_size_by_name():
    lucid.manual_seed(3)
    p = lucid.randperm(50)
    lucid.manual_seed(3)
    assert (
        p.dtype == lucid.int64 and sorted(p.tolist()) == list(range(50)) and p.tolist() == lucid.randperm(50).tolist()
    )
    r = lucid.randint(7, size=(1000,))
    assert r.shape == (1000,) and set(r.tolist()) == set(range(7))
    with pytest.raises(ValueError):
        lucid.randperm(-1)


@pytest.mark.parametrize("shifts,dims", [(1, 1), (-2, 0), ((1, 2), (0, 1)), (5, None), (-7, None), (0, 1)])
def test_roll_matches_numpy_and_returns_a_new_tensor(shifts, dims):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = lucid.tensor(a)
    y = lucid.roll(x, shifts, dims)
    np.testing.assert_array_equal(y.numpy(), np.roll(a, shifts, dims))
    y.add_(1)
    np.testing.assert_array_equal(x.numpy(), a)


def test_roll_gradient():
    x = lucid.tensor(np.arange(6, dtype=np.float32), requires_grad=True)
    w = lucid.tensor(np.arange(6, dtype=np.float32) ** 2)
    (x.roll(2) * w).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.roll(np.arange(6) ** 2, -2))


# ---- products and norms --------------------------------------------------------------------------


def test_mm_and_dot_match_numpy_and_check_their_shapes():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    np.testing.assert_allclose(lucid.mm(lucid.tensor(a), lucid.tensor(b)).numpy(), a @ b, rtol=1e-5)
    np.testing.assert_allclose(lucid.tensor(a[0]).dot(lucid.tensor(b[:, 0])).item(), a[0] @ b[:, 0], rtol=1e-5)
    with pytest.raises(RuntimeError, match="matrix"):
        lucid.mm(lucid.zeros(3), lucid.zeros(3, 2))
    with pytest.raises(RuntimeError, match="1-D"):
        lucid.dot(lucid.zeros(2, 2), lucid.zeros(2))
    with pytest.raises(RuntimeError, match="sizes"):
        lucid.dot(lucid.zeros(2), lucid.zeros(3))


@pytest.mark.parametrize("p", ["fro", 2, 1, 3, 0.5, 0, float("inf"), float("-inf")])
@pytest.mark.parametrize("dim", [None, 1, (0, 1)])
def test_norm_matches_numpy(p, dim):
    a = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    a[0, 0] = 0.0
    q = 2 if p == "fro" else p
    flat = np.abs(a).reshape(-1) if dim in (None, (0, 1)) else np.abs(a)
    axis = None if dim in (None, (0, 1)) else dim
    if q == 0:
        want = (flat != 0).sum(axis)
    elif q in (float("inf"), float("-inf")):
        want = flat.max(axis) if q > 0 else flat.min(axis)
    else:
        want = (flat.astype(np.float64) ** q).sum(axis) ** (1 / q)
    np.testing.assert_allclose(lucid.tensor(a).norm(p, dim).numpy(), want, rtol=2e-5)


def _central_differences(fn, a, eps=1e-6):
    g = np.zeros_like(a)
    for i in range(a.size):
        step = np.zeros_like(a)
        step.flat[i] = eps
        g.flat[i] = (fn(a + step) - fn(a - step)) / (2 * eps)
    return g


def test_norm_gradient_matches_finite_differences_and_is_zero_at_zero():
    a = np.random.default_rng(2).standard_normal(5)
    for p in (2, 3):
        x = lucid.tensor(a.astype(np.float32), requires_grad=True)
        x.norm(p).backward()
        want = _central_differences(lambda v: np.sum(np.abs(v) ** p) ** (1 / p), a)
        np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-3, atol=1e-4)
    z = lucid.zeros(4, requires_grad=True)
    z.norm().backward()
    np.testing.assert_array_equal(z.grad.numpy(), np.zeros(4))
    with pytest.raises(TypeError, match="floating"):
        lucid.tensor([1, 2]).norm()


def test_free_arithmetic_functions_take_alpha_and_out():
    a, b = lucid.tensor([1.0, 2.0]), lucid.tensor([10.0, 20.0])
    np.testing.assert_array_equal(lucid.add(a, b, alpha=2).numpy(), [21, 42])
    np.testing.assert_array_equal(lucid.sub(a, b).numpy(), [-9, -18])
    out = lucid.zeros(2)
    assert lucid.mul(a, 3, out=out) is out
    np.testing.assert_array_equal(out.numpy(), [3, 6])
    np.testing.assert_array_equal(lucid.div(2, b).numpy(), np.float32(2) / np.float32([10, 20]))
    with pytest.raises(TypeError, match="add"):
        lucid.add("a", b)


# ---- legacy tensor types ---------------------------------------------------------------------------


def test_legacy_tensor_types_make_and_recognise_tensors_of_their_dtype():
    f = lucid.FloatTensor([1, 2])
    assert f.dtype == lucid.float32 and isinstance(f, lucid.FloatTensor) and not isinstance(f, lucid.LongTensor)
    assert lucid.LongTensor(2, 3).shape == (2, 3) and lucid.LongTensor(2, 3).dtype == lucid.int64
    assert lucid.BoolTensor([True]).dtype == lucid.bool_ and lucid.HalfTensor().numel() == 0
    assert f.type() == "lucid.FloatTensor" and not isinstance(np.zeros(2), lucid.FloatTensor)


# ---- data -------------------------------------------------------------------------------------------


def test_random_sampler_with_replacement_draws_uniformly_and_reproducibly():
    from lucid.utils.data import Generator, RandomSampler

    s = RandomSampler(range(5), replacement=True, num_samples=5000, generator=Generator().manual_seed(4))
    first = list(s)
    counts = collections.Counter(first)
    assert len(first) == 5000 and set(counts) == set(range(5)) and min(counts.values()) > 850
    assert list(RandomSampler(range(5), True, 5000, Generator().manual_seed(4))) == first
    without = list(RandomSampler(range(3), num_samples=7))
    assert len(without) == 7 and sorted(without[:3]) == [0, 1, 2] and sorted(without[3:6]) == [0, 1, 2]
    with pytest.raises(ValueError):
        RandomSampler(range(3), num_samples=0)


def test_an_endless_random_sampler_draws_as_it_is_iterated():
    # makemore's "infinite" loader: 10^10 draws with replacement, of which a program takes a few.
    from lucid.utils.data import DataLoader, RandomSampler, TensorDataset

    data = TensorDataset(lucid.arange(10))
    sampler = RandomSampler(data, replacement=True, num_samples=int(1e10))
    assert len(sampler) == 10**10
    batches = iter(DataLoader(data, sampler=sampler, batch_size=4))
    seen = [next(batches)[0] for _ in range(3000)]
    assert all(b.shape == (4,) for b in seen)
    assert set(np.concatenate([b.numpy() for b in seen]).tolist()) == set(range(10))


def test_data_submodules_are_where_programs_import_them_from():
    from lucid.utils.data import dataloader, dataset, sampler

    assert dataloader.DataLoader is lucid.utils.data.DataLoader and dataloader.default_collate is not None
    assert dataset.TensorDataset is lucid.utils.data.TensorDataset and sampler.RandomSampler is not None


# ---- layers, init, optimizers -------------------------------------------------------------------


def test_pixel_shuffle_matches_its_definition_and_unshuffle_inverts_it():
    x = np.arange(2 * 18 * 2 * 3, dtype=np.float32).reshape(2, 18, 2, 3)
    r, c = 3, 2
    want = x.reshape(2, c, r, r, 2, 3).transpose(0, 1, 4, 2, 5, 3).reshape(2, c, 6, 9)
    y = nn.PixelShuffle(3)(lucid.tensor(x))
    np.testing.assert_array_equal(y.numpy(), want)
    np.testing.assert_array_equal(F.pixel_unshuffle(y, 3).numpy(), x)
    with pytest.raises(RuntimeError, match="divisible"):
        F.pixel_shuffle(lucid.zeros(1, 5, 2, 2), 2)
    g = lucid.tensor(x, requires_grad=True)
    (F.pixel_shuffle(g, 3) * lucid.tensor(want)).sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), x)


@pytest.mark.parametrize("shape", [(6, 4), (3, 5), (4, 2, 3)])
def test_orthogonal_init_gives_orthonormal_rows_or_columns(shape):
    w = lucid.zeros(*shape)
    assert nn.init.orthogonal_(w, gain=1.5) is w
    q = w.numpy().reshape(shape[0], -1).astype(np.float64)
    gram = q.T @ q if q.shape[0] >= q.shape[1] else q @ q.T
    np.testing.assert_allclose(gram, 2.25 * np.eye(gram.shape[0]), atol=1e-5)


def test_optimizer_state_is_a_defaultdict():
    p = lucid.zeros(2, requires_grad=True)
    opt = lucid.optim.SGD([p], lr=0.1)
    assert isinstance(opt.state, collections.defaultdict) and opt.state[p] == {}


def test_lbfgs_follows_pytorchs_iterates():
    # Recorded with torch.optim.LBFGS (PyTorch 2.15), same problem, float32.
    torch_losses = [8.99000072479248, 4.522005558013916, 0.7513457536697388, 0.4321427047252655]
    torch_x = [0.7612818479537964, 0.5640249252319336, -0.4582560658454895]
    a = lucid.tensor([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0], [1.0, 0.0, 1.0], [2.0, 1.0, 1.0]])
    b = lucid.tensor([1.0, -1.0, 0.5, 2.0])
    x = lucid.tensor([-1.2, 1.0, 0.5], requires_grad=True)
    opt = lucid.optim.LBFGS([x], lr=0.8, max_iter=6, history_size=3)

    def closure():
        opt.zero_grad()
        loss = (1 - x[0]) ** 2 + 10 * (x[1] - x[0] ** 2) ** 2 + ((a @ x - b) ** 2).sum() * 0.1
        loss.backward()
        return loss

    losses = [float(opt.step(closure)) for _ in range(4)]
    np.testing.assert_allclose(losses, torch_losses, rtol=2e-3)
    np.testing.assert_allclose(x.detach().numpy(), torch_x, rtol=1e-3, atol=1e-4)
    with pytest.raises(ValueError, match="line_search_fn"):
        lucid.optim.LBFGS([x], line_search_fn="strong_wolfe")
    with pytest.raises(RuntimeError, match="closure"):
        opt.step(None)


# ---- more of torch's namespace ------------------------------------------------------------------


def test_constants_settings_and_aliases():
    import math

    assert (lucid.inf, lucid.pi, lucid.e) == (math.inf, math.pi, math.e) and math.isnan(lucid.nan)
    assert (
        lucid.Size([2, 3]) == (2, 3)
        and lucid.Size([2, 3]).numel() == 6
        and lucid.zeros(2, 3).shape == lucid.Size((2, 3))
    )
    assert lucid.get_default_dtype() is lucid.float32
    lucid.set_default_dtype(lucid.float32)
    with pytest.raises(TypeError, match="float32"):
        lucid.set_default_dtype(lucid.float16)
    lucid.set_float32_matmul_precision("high")
    assert lucid.get_float32_matmul_precision() == "high"
    lucid.set_float32_matmul_precision("highest")
    with pytest.raises(ValueError):
        lucid.set_float32_matmul_precision("low")
    assert lucid.autocast is lucid.amp.autocast and lucid.Generator is lucid.utils.data.Generator


def test_predicates_and_comparisons_match_numpy():
    a = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], dtype=np.float32)
    t = lucid.tensor(a)
    np.testing.assert_array_equal(lucid.isnan(t).numpy(), np.isnan(a))
    np.testing.assert_array_equal(t.isinf().numpy(), np.isinf(a))
    np.testing.assert_array_equal(lucid.isfinite(t).numpy(), np.isfinite(a))
    assert not lucid.isinf(lucid.tensor([1, 2])).numpy().any()
    b = a + np.float32(1e-6)
    for equal_nan in (False, True):
        np.testing.assert_array_equal(
            lucid.isclose(t, lucid.tensor(b), equal_nan=equal_nan).numpy(), np.isclose(a, b, equal_nan=equal_nan)
        )
    assert lucid.allclose(lucid.ones(3), lucid.ones(3) + 1e-9) and not lucid.allclose(lucid.ones(3), lucid.ones(3) * 2)
    assert lucid.equal(lucid.arange(3), lucid.arange(3)) and not lucid.equal(lucid.arange(3), lucid.arange(4))
    np.testing.assert_array_equal(
        lucid.outer(lucid.arange(3.0), lucid.tensor([1.0, -1.0])).numpy(), np.outer(np.arange(3.0), [1, -1])
    )


def test_any_all_cumsum_match_numpy():
    a = np.array([[0, 2, 0], [1, 1, 0]], dtype=np.int64)
    t = lucid.tensor(a)
    assert t.any().item() and not t.all().item()
    np.testing.assert_array_equal(t.any(1).numpy(), a.any(1))
    np.testing.assert_array_equal(lucid.all(t, 0, keepdim=True).numpy(), a.all(0, keepdims=True))
    np.testing.assert_array_equal(t.cumsum(1).numpy(), np.cumsum(a, 1))
    f = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)
    x = lucid.tensor(f, requires_grad=True)
    np.testing.assert_allclose(lucid.cumsum(x, 0).detach().numpy(), np.cumsum(f, 0), rtol=1e-5, atol=1e-6)
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    (x.cumsum(1) * lucid.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cumsum(w[:, ::-1], 1)[:, ::-1], rtol=1e-6)


def test_flip_unbind_repeat_and_repeat_interleave_match_numpy():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = lucid.tensor(a)
    np.testing.assert_array_equal(t.flip((0, 2)).numpy(), np.flip(a, (0, 2)))
    assert [u.numpy().tolist() for u in t.unbind(1)] == [a[:, i].tolist() for i in range(3)]
    np.testing.assert_array_equal(t.repeat(2, 1, 1, 3).numpy(), np.tile(a, (2, 1, 1, 3)))
    np.testing.assert_array_equal(t.repeat_interleave(2, dim=1).numpy(), np.repeat(a, 2, axis=1))
    np.testing.assert_array_equal(lucid.repeat_interleave(t, 3).numpy(), np.repeat(a, 3))
    np.testing.assert_array_equal(
        t.repeat_interleave(lucid.tensor([1, 0, 2]), dim=1).numpy(), np.repeat(a, [1, 0, 2], axis=1)
    )
    assert t.mT.shape == (2, 4, 3) and t.nelement() == 24
    with pytest.raises(RuntimeError, match="sizes"):
        t.repeat(2, 2)
    x = lucid.tensor(a[0], requires_grad=True)
    (x.repeat(2, 1) * lucid.tensor(np.arange(24, dtype=np.float32).reshape(6, 4))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(24).reshape(6, 4)[:3] + np.arange(24).reshape(6, 4)[3:])


def test_nonzero_and_index_add_match_numpy():
    a = np.array([[0, 3, 0], [4, 0, 5]], dtype=np.float32)
    np.testing.assert_array_equal(lucid.nonzero(lucid.tensor(a)).numpy(), np.argwhere(a))
    rows, cols = lucid.tensor(a).nonzero(as_tuple=True)
    np.testing.assert_array_equal(rows.numpy(), np.nonzero(a)[0])
    np.testing.assert_array_equal(cols.numpy(), np.nonzero(a)[1])
    base = np.zeros((3, 4), dtype=np.float32)
    src = np.arange(9, dtype=np.float32).reshape(3, 3)
    want = base.copy()
    np.add.at(want, (slice(None), [0, 2, 0]), 2 * src)
    got = lucid.tensor(base).index_add_(1, lucid.tensor([0, 2, 0]), lucid.tensor(src), alpha=2)
    np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(TypeError, match="index must be an int64 or int32 tensor"):
        lucid.zeros(3).index_add_(0, lucid.tensor([0.0]), lucid.ones(1))


def test_linspace_as_tensor_and_small_tensor_methods():
    np.testing.assert_allclose(lucid.linspace(-1, 2, 7).numpy(), np.linspace(-1, 2, 7, dtype=np.float32))
    t = lucid.ones(2)
    assert lucid.as_tensor(t) is t and lucid.as_tensor([1, 2]).dtype == lucid.int64
    assert lucid.as_tensor(t, dtype=lucid.float16).dtype == lucid.float16
    assert t.type_as(lucid.tensor([1])).dtype == lucid.int64 and t.pin_memory() is t and not t.is_xpu
    assert t.to("cpu", non_blocking=True) is t
    lucid.manual_seed(0)
    r = lucid.zeros(2000).random_(3, 7)
    assert set(r.tolist()) == {3.0, 4.0, 5.0, 6.0}


def test_assert_close_passes_and_fails_as_pytorchs():
    lucid.testing.assert_close(lucid.ones(3), lucid.ones(3) + 1e-7)
    lucid.testing.assert_close(lucid.tensor([np.inf, np.nan]), lucid.tensor([np.inf, np.nan]), equal_nan=True)
    for bad, match in (
        (lucid.ones(3) * 1.01, "not close"),
        (lucid.ones(2), "shapes"),
        (lucid.ones(3, dtype=lucid.float16), "dtypes"),
    ):
        with pytest.raises(AssertionError, match=match):
            lucid.testing.assert_close(lucid.ones(3), bad)
    lucid.testing.assert_close(lucid.ones(3), lucid.ones(3) * 1.01, rtol=0.02, atol=0.0)
    with pytest.raises(AssertionError, match="custom"):
        lucid.testing.assert_close(lucid.zeros(1), lucid.ones(1), msg="custom")


def test_a_generator_of_its_own_reproduces_randint_randperm_and_multinomial():
    g = lucid.Generator().manual_seed(11)
    first = (
        lucid.randperm(20, generator=g).tolist(),
        lucid.randint(0, 100, (5,), generator=g).tolist(),
        lucid.multinomial(lucid.ones(10), 3, generator=g).tolist(),
    )
    lucid.manual_seed(0)  # lucid's own stream does not touch it
    g.manual_seed(11)
    again = (
        lucid.randperm(20, generator=g).tolist(),
        lucid.randint(0, 100, (5,), generator=g).tolist(),
        lucid.multinomial(lucid.ones(10), 3, generator=g).tolist(),
    )
    assert first == again and sorted(first[0]) == list(range(20)) and g.initial_seed() == 11
    with pytest.raises(TypeError, match="lucid.Generator"):
        lucid.randperm(3, generator=np.random.default_rng())


def test_mps_is_the_metal_device_under_pytorchs_name():
    assert lucid.device("mps") == "metal" and lucid.zeros(2, device="mps").device == "metal"
    assert lucid.ones(1).to("mps:0").device.type == "metal" and lucid.device("cpu:0") == "cpu"
    assert lucid.backends.mps.is_available() == lucid.metal.is_available() == lucid.backends.mps.is_built()
    with pytest.raises(ValueError, match="unknown device 'mps:1'"):
        lucid.device("mps:1")


def test_accelerator_index_queries():
    if lucid.accelerator.is_available():
        lucid.accelerator.set_device_index(0)
        with lucid.accelerator.device_index(0):
            pass
    else:
        with pytest.raises(ValueError, match="0 accelerator"):
            lucid.accelerator.set_device_index(0)
    with pytest.raises(ValueError):
        lucid.accelerator.set_device_index(3)


def test_load_takes_torch_loads_keywords_and_safe_globals_allows_nothing_needed(tmp_path):
    lucid.save({"w": lucid.arange(3.0)}, tmp_path / "w.safetensors")
    with lucid.serialization.safe_globals([dict]):
        back = lucid.load(tmp_path / "w.safetensors", weights_only=True, mmap=True)
    np.testing.assert_array_equal(back["w"].numpy(), [0, 1, 2])
    lucid.serialization.add_safe_globals([dict])


def test_categorical_matches_its_definition():
    logits = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]], dtype=np.float32)
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    x = lucid.tensor(logits, requires_grad=True)
    m = lucid.distributions.Categorical(logits=x)
    np.testing.assert_allclose(m.probs.detach().numpy(), p, rtol=1e-6)
    lp = m.log_prob(lucid.tensor([1, 2]))
    np.testing.assert_allclose(lp.detach().numpy(), np.log(p[[0, 1], [1, 2]]), rtol=1e-6)
    lp.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.eye(3)[[1, 2]] - p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.entropy().detach().numpy(), -(p * np.log(p)).sum(1), rtol=1e-5)
    lucid.manual_seed(1)
    draws = m.sample((4000,))
    assert draws.shape == (4000, 2) and draws.dtype == lucid.int64
    freq = np.stack([np.bincount(draws.numpy()[:, j], minlength=3) / 4000 for j in range(2)])
    np.testing.assert_allclose(freq, p, atol=0.03)
    q = lucid.distributions.Categorical(probs=lucid.tensor([2.0, 0.0, 6.0]))  # normalised; 0 log 0 = 0
    np.testing.assert_allclose(q.entropy().item(), -(0.25 * np.log(0.25) + 0.75 * np.log(0.75)), rtol=1e-6)
    assert q.sample().ndim == 0
    with pytest.raises(ValueError, match="exactly one"):
        lucid.distributions.Categorical()
    with pytest.raises(TypeError, match="integer"):
        q.log_prob(lucid.tensor(1.0))


def test_optimizers_take_foreach_and_fused():
    p = lucid.zeros(2, requires_grad=True)
    for make in (
        lambda: lucid.optim.AdamW([p], fused=True),
        lambda: lucid.optim.Adam([p], foreach=False),
        lambda: lucid.optim.SGD([p], lr=0.1, foreach=None, fused=True),
    ):
        make()
    with pytest.raises(TypeError, match="fused"):
        lucid.optim.Adam([p], fused="yes")


def test_unique_matches_numpy():
    a = np.array([[3, 1, 3], [2, 1, 3]], dtype=np.int64)
    values, inverse, counts = lucid.unique(lucid.tensor(a), return_inverse=True, return_counts=True)
    want = np.unique(a, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values.numpy(), want[0])
    np.testing.assert_array_equal(inverse.numpy(), want[1].reshape(a.shape))
    np.testing.assert_array_equal(counts.numpy(), want[2])
    rows = lucid.tensor([[1, 2], [1, 2], [0, 5]]).unique(dim=0)
    np.testing.assert_array_equal(rows.numpy(), [[0, 5], [1, 2]])


def test_factories_take_size_by_name():
    for f in (lucid.zeros, lucid.ones, lucid.empty, lucid.rand, lucid.randn):
        assert f(size=(2, 3)).shape == (2, 3) and f(size=4).shape == (4,) and f((2, 1)).shape == (2, 1)
        with pytest.raises(TypeError, match="not both"):
            f(2, size=(3,))


def test_trunc_normal_stays_in_its_bounds_with_the_right_spread():
    lucid.manual_seed(2)
    w = lucid.zeros(200, 100)
    assert nn.init.trunc_normal_(w, mean=0.5, std=1.0, a=-0.5, b=1.0) is w
    v = w.numpy()
    import math

    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    want = 0.5 + (pdf(-1.0) - pdf(0.5)) / (cdf(0.5) - cdf(-1.0))  # the truncated normal's mean
    assert v.min() >= -0.5 and v.max() <= 1.0 and abs(v.mean() - want) < 0.01 and v.std() > 0.3
    with pytest.raises(ValueError):
        nn.init.trunc_normal_(w, a=1.0, b=0.0)
    # A std far wider than [a, b]: nearly uniform there (a normal proposal would almost never land).
    nn.init.trunc_normal_(w, std=2.0**70)
    u = w.numpy()
    assert u.min() >= -2 and u.max() <= 2 and abs(u.std() - 4 / math.sqrt(12)) < 0.02
    # An interval in the tail: its mean as the truncated normal's.
    nn.init.trunc_normal_(w, std=1.0, a=2.0, b=3.0)
    tail = (pdf(2.0) - pdf(3.0)) / (cdf(3.0) - cdf(2.0))
    assert abs(w.numpy().mean() - tail) < 0.01
    with pytest.raises(ValueError, match="too far in a tail"):
        nn.init.trunc_normal_(w, a=10.0, b=11.0)
    with pytest.raises(TypeError, match="std"):
        nn.init.trunc_normal_(w, std="wide")


def test_pad_sequence_matches_a_numpy_padding():
    from lucid.nn.utils.rnn import pad_sequence

    seqs = [np.arange(k * 2, dtype=np.float32).reshape(k, 2) for k in (3, 1, 2)]
    for batch_first in (False, True):
        for side in ("right", "left"):
            want = np.full((3, 3, 2), -1.0, dtype=np.float32)
            for b, s in enumerate(seqs):
                if side == "right":
                    want[b, : len(s)] = s
                else:
                    want[b, 3 - len(s) :] = s
            got = pad_sequence([lucid.tensor(s) for s in seqs], batch_first, -1.0, side).numpy()
            np.testing.assert_array_equal(got, want if batch_first else want.transpose(1, 0, 2))
    x = lucid.tensor(seqs[1], requires_grad=True)
    pad_sequence([lucid.tensor(seqs[0]), x]).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((1, 2)))


def test_an_iterable_dataset_is_batched_in_order():
    from lucid.utils.data import DataLoader, IterableDataset

    class Stream(IterableDataset):
        def __iter__(self):
            return (lucid.tensor([float(i)]) for i in range(7))

    batches = [b.numpy().ravel().tolist() for b in DataLoader(Stream(), batch_size=3)]
    assert batches == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(list(DataLoader(Stream(), batch_size=3, drop_last=True))) == 2
    with pytest.raises(ValueError, match="IterableDataset"):
        DataLoader(Stream(), shuffle=True)
    with pytest.raises(TypeError):
        len(DataLoader(Stream(), batch_size=2))


def test_assert_allclose_is_the_older_spelling():
    lucid.testing.assert_allclose(lucid.ones(2), lucid.ones(2, dtype=lucid.float16))
    with pytest.raises(AssertionError):
        lucid.testing.assert_allclose(lucid.ones(2), lucid.zeros(2))


def test_get_worker_info_names_the_worker_thread():
    from lucid.utils.data import DataLoader, Dataset, get_worker_info

    class Ids(Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            w = get_worker_info()
            return lucid.tensor([-1, -1, -1] if w is None else [w.id, w.num_workers, int(w.dataset is self)])

    assert get_worker_info() is None
    seen = np.concatenate([b.numpy() for b in DataLoader(Ids(), batch_size=2, num_workers=3)])
    assert set(seen[:, 0]) <= {0, 1, 2} and (seen[:, 1] == 3).all() and (seen[:, 2] == 1).all()
    single = np.concatenate([b.numpy() for b in DataLoader(Ids(), batch_size=4)])
    assert (single == -1).all()
