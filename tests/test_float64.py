"""float64 on the CPU: ops and gradients against PyTorch's recorded float64 results and numpy,
conversions that round once, autocast leaving it alone, and "metal" refusing it."""

import math

import ml_dtypes
import numpy as np
import pytest

import lucid
import lucid.nn.functional as F
from differential import float64_ops as D

REFERENCE = D.reference()


@pytest.mark.parametrize("name", D.names())
def test_an_op_in_float64_matches_pytorch_to_float64_precision(name):
    got, want = D.run_case(lucid, F, name), REFERENCE["cases"][name]
    assert (got["dtype"], got["shape"]) == (want["dtype"], want["shape"])
    np.testing.assert_allclose(got["values"], want["values"], rtol=1e-12, atol=1e-12)
    assert len(got["grads"]) == len(want["grads"])
    for i, (g, w) in enumerate(zip(got["grads"], want["grads"])):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-12, err_msg=f"gradient of leaf {i}")


def test_mixed_dtypes_promote_as_in_pytorch():
    got, want = D.promotions(lucid), REFERENCE["promotions"]
    wrong = {k: (got[k], want[k]) for k in want if got.get(k) != want[k]}
    assert not wrong, wrong


def test_the_dtype_and_its_names():
    assert lucid.double is lucid.float64 and lucid.float64.itemsize == 8 and lucid.float64.is_floating_point
    assert repr(lucid.float64) == "lucid.float64" and lucid.float64.numpy == np.float64
    x = lucid.tensor([1.0, 2.0]).double()
    assert x.dtype is lucid.float64 and x.type() == "lucid.DoubleTensor" and x.is_floating_point()
    assert lucid.DoubleTensor([1, 2]).dtype is lucid.float64
    for make in (lucid.zeros, lucid.ones, lucid.rand, lucid.randn, lucid.empty):
        assert make(2, 3, dtype=lucid.float64).dtype is lucid.float64
    assert lucid.arange(0, 1, 0.25, dtype=lucid.float64).numpy().tolist() == [0, 0.25, 0.5, 0.75]
    assert lucid.full((2,), 0.1, dtype=lucid.float64).numpy()[0] == 0.1  # not 0.1 rounded to float32


def test_numpy_round_trip_is_exact_and_python_floats_stay_float32():
    x = np.array([0.1, -1 / 3, 1e-310, 1e300, -0.0, np.inf, np.nan, 2.0**60 + 1])
    t = lucid.from_numpy(x)
    assert t.dtype is lucid.float64
    np.testing.assert_array_equal(t.numpy().view(np.uint64), x.view(np.uint64))
    assert lucid.tensor([0.1, 0.2]).dtype is lucid.float32
    assert lucid.tensor(np.float64(0.1)).dtype is lucid.float64
    assert t.tolist()[0] == 0.1 and lucid.tensor(x[:1]).item() == 0.1


def test_rand_has_float64_resolution():
    u = lucid.rand(10_000, dtype=lucid.float64).numpy()
    assert u.min() >= 0 and u.max() < 1
    # 53-bit draws: almost none sits on the float32 grid of [0, 1).
    assert np.mean(u.astype(np.float32).astype(np.float64) == u) < 0.01


def test_casts_from_float64_round_once():
    # Halfway cases that rounding through float32 first would resolve the other way.
    one_up = 1 + 2.0**-11 + 2.0**-40  # just above float16's halfway point between 1 and 1 + 2^-10
    bf_up = 1 + 2.0**-8 + 2.0**-40  # likewise for bfloat16
    x = lucid.tensor(np.array([one_up, bf_up, -one_up]))
    assert x.half().numpy().tolist() == np.array([one_up, bf_up, -one_up]).astype(np.float16).tolist()
    assert x.half().numpy()[0] == 1 + 2.0**-10
    assert x.bfloat16().float().numpy()[1] == float(ml_dtypes.bfloat16(bf_up)) == 1 + 2.0**-7
    big = np.array([2.0**62, -(2.0**62), 3.99, -3.99, 1e300, np.nan])
    ints = lucid.tensor(big).long().numpy().tolist()
    assert ints[:4] == [2**62, -(2**62), 3, -3] and ints[4] == 2**63 - 1 and ints[5] == 0
    exact = lucid.tensor([2**53 - 1, -(2**53)]).double()
    assert exact.numpy().tolist() == [2.0**53 - 1, -(2.0**53)]
    assert lucid.tensor(np.array([1e39, 0.1])).float().numpy().tolist() == [math.inf, float(np.float32(0.1))]


def test_float64_keeps_its_precision_where_float32_loses_it():
    a = lucid.tensor(np.array([1.0]))
    assert ((a + 1e-12) - 1).item() == pytest.approx(1e-12, rel=1e-3)
    s = lucid.tensor(np.full(1_000_000, 0.1)).sum().item()
    assert s == pytest.approx(100_000.0, rel=1e-12)
    m = lucid.randn(64, 64, dtype=lucid.float64)
    inv = np.linalg.inv(m.numpy())
    np.testing.assert_allclose((m @ lucid.tensor(inv)).numpy(), np.eye(64), atol=1e-10)


def test_gradients_match_finite_differences():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    weights = rng.standard_normal((3, 5))

    def f(x, w):
        return F.log_softmax(F.linear(x, w).tanh() * 2, dim=1)

    lx, lw = lucid.tensor(x, requires_grad=True), lucid.tensor(w, requires_grad=True)
    (f(lx, lw) * lucid.tensor(weights)).sum().backward()
    eps = 1e-6
    for leaf, arr, i in ((lx, x, 0), (lw, w, 1)):
        numeric = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            vals = []
            for sign in (1, -1):
                moved = [x.copy(), w.copy()]
                moved[i][idx] += sign * eps
                vals.append(float((f(*[lucid.tensor(m) for m in moved]).numpy() * weights).sum()))
            numeric[idx] = (vals[0] - vals[1]) / (2 * eps)
        np.testing.assert_allclose(leaf.grad.numpy(), numeric, rtol=1e-7, atol=1e-8)


def test_a_model_trains_in_float64():
    lucid.manual_seed(0)
    model = lucid.nn.Sequential(lucid.nn.Linear(4, 8), lucid.nn.ReLU(), lucid.nn.Linear(8, 1)).double()
    assert all(p.dtype is lucid.float64 for p in model.parameters())
    before = [p.detach().numpy().copy() for p in model.parameters()]
    opt = lucid.optim.SGD(model.parameters(), lr=0.1, momentum=0.0)
    x = lucid.randn(16, 4, dtype=lucid.float64)
    y = x.sum(1, keepdim=True)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    opt.step()
    for p, b, g in zip(model.parameters(), before, grads):
        assert p.dtype is lucid.float64
        np.testing.assert_allclose(p.detach().numpy(), b - 0.1 * g, rtol=0, atol=1e-15)
    adam = lucid.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(60):
        adam.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        adam.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]
    assert all(p.dtype is lucid.float64 for p in model.parameters())


def test_autocast_leaves_float64_alone():
    a = lucid.randn(4, 5, dtype=lucid.float64)
    b = lucid.randn(5, 3, dtype=lucid.float64)
    for dtype in (lucid.bfloat16, lucid.float16):
        with lucid.autocast(device_type="cpu", dtype=dtype):
            assert (a @ b).dtype is lucid.float64
            assert F.linear(a, b.t()).dtype is lucid.float64
            assert F.softmax(a, dim=1).dtype is lucid.float64
            assert a.exp().sum().dtype is lucid.float64
        np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-13, atol=1e-13)


def test_save_and_load_keep_float64(tmp_path):
    model = lucid.nn.Linear(3, 2).double()
    lucid.save(model.state_dict(), tmp_path / "m.safetensors")
    state = lucid.load(tmp_path / "m.safetensors")
    assert all(t.dtype is lucid.float64 for t in state.values())
    for k, t in model.state_dict().items():
        np.testing.assert_array_equal(state[k].numpy(), t.numpy())


def test_metal_refuses_float64_naming_the_call_and_float32():
    x = lucid.tensor(np.array([1.0, 2.0]))
    cases = [
        lambda: x.to("metal"),
        lambda: x.to(device="mps"),
        lambda: lucid.zeros(2, dtype=lucid.float64, device="metal"),
        lambda: lucid.randn(2, dtype=lucid.float64, device="metal"),
        lambda: lucid.arange(0, 3, dtype=lucid.float64, device="metal"),
        lambda: lucid.tensor(np.zeros(2), device="metal"),
        lambda: lucid.ones(2, device="metal").double(),
        lambda: lucid.nn.Linear(2, 2).to("metal").double(),
        lambda: lucid.nn.Linear(2, 2).double().to("metal"),
    ]
    for make in cases:
        with pytest.raises(TypeError, match=r"'metal' does not support float64.*float32"):
            make()
    assert lucid.ones(2, device="metal").float().dtype is lucid.float32  # the device still works
