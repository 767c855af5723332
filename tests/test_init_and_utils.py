"""nn.init against its formulas, clip_grad_norm_/clip_grad_value_ against numpy, and the
ModuleList / ModuleDict / Flatten / Identity containers."""

import math

import numpy as np
import pytest

import lucid
import lucid.nn as nn
from lucid.nn import init

rng = np.random.default_rng(4)


@pytest.mark.parametrize("shape", [(300, 200), (64, 32, 3, 3)])
def test_fans_and_bounds(shape):
    t = lucid.zeros(*shape)
    rf = math.prod(shape[2:])
    fan_in, fan_out = shape[1] * rf, shape[0] * rf
    a = math.sqrt(6 / (fan_in + fan_out))
    v = init.xavier_uniform_(t).numpy()
    assert np.abs(v).max() <= a and np.abs(v).max() > 0.95 * a
    assert abs(v.std() - a / math.sqrt(3)) < 0.03 * a
    v = init.xavier_normal_(t, gain=2.0).numpy()
    assert abs(v.std() - 2 * math.sqrt(2 / (fan_in + fan_out))) < 0.03 * v.std()
    bound = math.sqrt(2) * math.sqrt(3 / fan_in)
    v = init.kaiming_uniform_(t, nonlinearity="relu").numpy()
    assert np.abs(v).max() <= bound and np.abs(v).max() > 0.95 * bound
    v = init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu").numpy()
    assert abs(v.std() - math.sqrt(2 / fan_out)) < 0.03 * v.std()
    v = init.kaiming_uniform_(t, a=math.sqrt(5)).numpy()  # PyTorch's Linear/Conv default
    assert np.abs(v).max() <= 1 / math.sqrt(fan_in)


def test_in_place_keeps_identity_dtype_device_and_requires_grad():
    p = nn.Parameter(lucid.zeros(50, 40, dtype=lucid.float16, device="metal"))
    q = init.normal_(p, mean=3.0, std=0.5)
    assert q is p and p.dtype == lucid.float16 and p.device == "metal" and p.requires_grad
    v = p.numpy().astype(np.float64)
    assert abs(v.mean() - 3.0) < 0.05 and abs(v.std() - 0.5) < 0.05
    init.uniform_(p, -2, -1)
    assert p.numpy().min() >= -2 and p.numpy().max() <= -1
    assert np.all(init.ones_(p).numpy() == 1) and np.all(init.zeros_(p).numpy() == 0)
    assert np.all(init.constant_(p, 0.25).numpy() == 0.25)


def test_seeded_and_errors():
    lucid.manual_seed(7)
    a = init.normal_(lucid.zeros(5)).numpy()
    lucid.manual_seed(7)
    np.testing.assert_array_equal(init.normal_(lucid.zeros(5)).numpy(), a)
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        init.xavier_uniform_(lucid.zeros(3))
    with pytest.raises(ValueError, match="mode"):
        init.kaiming_normal_(lucid.zeros(3, 3), mode="fan")
    with pytest.raises(ValueError, match="nonlinearity"):
        init.kaiming_normal_(lucid.zeros(3, 3), nonlinearity="swish")
    with pytest.raises(TypeError):
        init.zeros_(np.zeros(3))
    with pytest.raises(TypeError, match="floating"):
        init.ones_(lucid.zeros(3, dtype=lucid.int64))


# ---- gradient clipping --------------------------------------------------------------------


def with_grads(*arrays, dtype=lucid.float32):
    params = []
    for a in arrays:
        p = lucid.zeros(*a.shape, dtype=dtype, requires_grad=True)
        p.grad = lucid.tensor(a, dtype=dtype)
        params.append(p)
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
def test_clip_grad_norm_matches_numpy(norm_type):
    g = [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(5).astype(np.float32)]
    flat = np.concatenate([x.ravel() for x in g]).astype(np.float64)
    total = np.abs(flat).max() if math.isinf(norm_type) else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    params = with_grads(*g)
    got = nn.utils.clip_grad_norm_(params, max_norm=0.5, norm_type=norm_type)
    assert got.dtype == lucid.float32 and got.shape == ()
    assert got.item() == pytest.approx(total, rel=1e-5)
    coef = 0.5 / (total + 1e-6)
    for p, a in zip(params, g):
        np.testing.assert_allclose(p.grad.numpy(), a * coef, rtol=1e-5)


def test_clip_grad_norm_leaves_small_gradients_and_skips_missing():
    small = with_grads(np.full(4, 0.1, np.float32))
    nograd = lucid.zeros(3, requires_grad=True)
    total = nn.utils.clip_grad_norm_(small + [nograd], max_norm=10.0)
    assert total.item() == pytest.approx(0.2, rel=1e-6)
    np.testing.assert_array_equal(small[0].grad.numpy(), np.full(4, 0.1, np.float32))
    assert nograd.grad is None


def test_clip_grad_norm_half_grads_and_nonfinite():
    (p,) = with_grads(np.full(4, 100.0, np.float32), dtype=lucid.float16)
    nn.utils.clip_grad_norm_(p, 1.0)  # a single tensor works too
    assert p.grad.dtype == lucid.float16
    np.testing.assert_allclose(p.grad.numpy().astype(np.float64), 0.5, rtol=1e-3)
    bad = with_grads(np.array([np.inf, 1.0], np.float32))
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(bad, 1.0, error_if_nonfinite=True)
    assert math.isinf(nn.utils.clip_grad_norm_(bad, 1.0).item())


def test_clip_grad_value():
    a = rng.standard_normal(10).astype(np.float32) * 3
    params = with_grads(a)
    nn.utils.clip_grad_value_(params, 1.0)
    np.testing.assert_array_equal(params[0].grad.numpy(), np.clip(a, -1, 1))
    with pytest.raises(ValueError):
        nn.utils.clip_grad_value_(params, -1.0)


# ---- containers ---------------------------------------------------------------------------


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Identity(7, key="ignored")})
        self.flat = nn.Flatten()

    def forward(self, x):
        for layer in self.layers:
            x = layer(x).relu()
        return self.heads["a"](self.heads["b"](x))


def test_containers_register_parameters_with_pytorch_names():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names[:2] == ["layers.0.weight", "layers.0.bias"] and "heads.a.weight" in names and len(names) == 8
    fresh = Net()
    fresh.load_state_dict(net.state_dict())
    x = lucid.randn(2, 4)
    np.testing.assert_array_equal(fresh(x).numpy(), net(x).numpy())


def test_module_list_api():
    ml = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    ml.append(nn.GELU())
    ml.insert(0, nn.SiLU())
    assert [type(m).__name__ for m in ml] == ["SiLU", "ReLU", "Tanh", "GELU"]
    assert isinstance(ml[-1], nn.GELU) and len(ml[1:3]) == 2
    del ml[0]
    ml[0] = nn.Sigmoid()
    ml += [nn.Identity()]
    assert [type(m).__name__ for m in ml] == ["Sigmoid", "Tanh", "GELU", "Identity"]
    with pytest.raises(IndexError):
        ml[4]
    with pytest.raises(TypeError, match="Modules"):
        ml.append(3)


def test_module_dict_api():
    md = nn.ModuleDict()
    md["x"] = nn.ReLU()
    md.update([("y", nn.Tanh())])
    assert list(md) == ["x", "y"] and "x" in md and len(md) == 2
    assert isinstance(md.pop("x"), nn.ReLU) and list(md.keys()) == ["y"]
    with pytest.raises(KeyError):
        md["missing"]
    with pytest.raises(TypeError):
        md["z"] = "not a module"


def test_flatten_and_identity():
    a = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    x = lucid.tensor(a, requires_grad=True)
    y = nn.Flatten()(x)
    np.testing.assert_array_equal(y.numpy(), a.reshape(2, -1))
    assert nn.Flatten(0, 2)(x).shape == (24, 5) and nn.Flatten(-2)(x).shape == (2, 3, 20)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones_like(a))
    assert nn.Identity()(x) is x
    with pytest.raises(IndexError):
        nn.Flatten(5)(x)
