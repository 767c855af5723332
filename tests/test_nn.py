"""lucid.nn: Linear, ReLU, Sequential, Module and Parameter."""

import math
from collections import OrderedDict

import ml_dtypes
import numpy as np
import pytest

import lucid
import lucid.nn as nn
from _helpers import DEVICES, randf

pytestmark = pytest.mark.filterwarnings("ignore::lucid.metal.MetalFallbackWarning")


def np_linear(x, layer):
    w = layer.weight.numpy().astype(np.float64)
    y = x.astype(np.float64) @ w.T
    if layer.bias is not None:
        y = y + layer.bias.numpy().astype(np.float64)
    return y


# ---- Linear -----------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("inf,outf", [(4, 3), (1, 1), (256, 64), (7, 1)])
def test_linear_parameters(device, inf, outf):
    lucid.manual_seed(inf * 1000 + outf)
    layer = nn.Linear(inf, outf, device=device)
    assert layer.in_features == inf and layer.out_features == outf
    assert isinstance(layer.weight, nn.Parameter) and isinstance(layer.bias, nn.Parameter)
    assert layer.weight.shape == (outf, inf)
    assert layer.bias.shape == (outf,)
    for p in (layer.weight, layer.bias):
        assert p.dtype is lucid.float32
        assert p.device == device
        assert p.requires_grad
        bound = 1.0 / math.sqrt(inf)
        a = p.numpy().astype(np.float64)
        assert np.all(np.abs(a) <= bound * (1 + 1e-6))
    assert [p for p in layer.parameters()] == [layer.weight, layer.bias]


def test_linear_init_fills_the_interval():
    lucid.manual_seed(5)
    layer = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    w = layer.weight.numpy().astype(np.float64) / bound
    assert w.min() >= -1 and w.max() <= 1
    assert w.min() < -0.99 and w.max() > 0.99
    assert abs(w.mean()) < 0.01
    assert abs(w.std() - 1 / math.sqrt(3)) < 0.01
    hist, _ = np.histogram(w, bins=10, range=(-1, 1))
    assert hist.min() > 0.9 * w.size / 10
    b = layer.bias.numpy() / bound
    assert b.min() >= -1 and b.max() <= 1 and b.std() > 0.4


def test_linear_inits_differ_between_layers_and_follow_the_seed():
    lucid.manual_seed(3)
    a = nn.Linear(8, 8)
    b = nn.Linear(8, 8)
    assert not np.array_equal(a.weight.numpy(), b.weight.numpy())
    lucid.manual_seed(3)
    a2 = nn.Linear(8, 8)
    np.testing.assert_array_equal(a2.weight.numpy(), a.weight.numpy())
    np.testing.assert_array_equal(a2.bias.numpy(), a.bias.numpy())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("xshape", [(5,), (2, 5), (3, 2, 5), (0, 5)])
def test_linear_forward(device, xshape):
    layer = nn.Linear(5, 4, device=device)
    x = randf(xshape, 1)
    y = layer(lucid.tensor(x, device=device))
    assert y.shape == xshape[:-1] + (4,)
    assert y.device == device and y.dtype is lucid.float32
    np.testing.assert_allclose(y.numpy(), np_linear(x, layer), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer.forward(lucid.tensor(x, device=device)).numpy(), y.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_linear_without_bias(device):
    layer = nn.Linear(6, 3, bias=False, device=device)
    assert layer.bias is None
    assert [n for n, _ in layer.named_parameters()] == ["weight"]
    assert list(layer.state_dict()) == ["weight"]
    x = randf((4, 6), 2)
    y = layer(lucid.tensor(x, device=device))
    np.testing.assert_allclose(
        y.numpy(), x.astype(np.float64) @ layer.weight.numpy().astype(np.float64).T, rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("dtype,np_type", [(lucid.float16, np.float16), (lucid.bfloat16, ml_dtypes.bfloat16)])
def test_linear_dtype_argument(dtype, np_type):
    layer = nn.Linear(16, 4, dtype=dtype, device="metal")
    assert layer.weight.dtype is dtype and layer.bias.dtype is dtype
    assert layer.weight.device == "metal"
    x = randf((3, 16), 3).astype(np_type)
    y = layer(lucid.tensor(x, device="metal"))
    assert y.dtype is dtype
    want = (
        x.astype(np.float32) @ layer.weight.numpy().astype(np.float32).T + layer.bias.numpy().astype(np.float32)
    ).astype(np_type)
    np.testing.assert_allclose(y.numpy().astype(np.float64), want.astype(np.float64), rtol=2e-2, atol=2e-2)


def test_linear_errors():
    layer = nn.Linear(3, 2)
    with pytest.raises(ValueError):
        layer(lucid.ones(4, 5))
    with pytest.raises(ValueError):
        layer(lucid.zeros(()))
    with pytest.raises(TypeError):
        layer(lucid.ones(4, 3, dtype=lucid.float16))
    with pytest.raises(RuntimeError):
        layer(lucid.ones(4, 3, device="metal"))
    with pytest.raises(ValueError):
        nn.Linear(-1, 3)
    with pytest.raises(TypeError):
        nn.Linear(2.5, 3)
    with pytest.raises(TypeError):
        nn.Linear(2, 3, dtype="float16")


def test_linear_repr():
    r = repr(nn.Linear(3, 2, bias=False))
    assert "Linear" in r and "in_features=3" in r and "out_features=2" in r and "bias=False" in r


# ---- ReLU and Sequential -------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_relu_module(device):
    x = np.array([[-1.0, 0.0, 2.0], [np.nan, -np.inf, 0.5]], dtype=np.float32)
    y = nn.ReLU()(lucid.tensor(x, device=device))
    assert y.device == device
    np.testing.assert_array_equal(y.numpy(), np.maximum(x, 0))
    assert list(nn.ReLU().parameters()) == []


def make_mlp(device="cpu"):
    lucid.manual_seed(11)
    return nn.Sequential(nn.Linear(4, 8, device=device), nn.ReLU(), nn.Linear(8, 3, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_sequential_forward(device):
    model = make_mlp(device)
    x = randf((5, 4), 4)
    h = np.maximum(np_linear(x, model[0]), 0)
    want = h @ model[2].weight.numpy().astype(np.float64).T + model[2].bias.numpy()
    got = model(lucid.tensor(x, device=device))
    assert got.shape == (5, 3) and got.device == device
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_sequential_container_protocol():
    l0, r, l2 = nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)
    model = nn.Sequential(l0, r, l2)
    assert len(model) == 3
    assert model[0] is l0 and model[1] is r and model[2] is l2
    assert model[-1] is l2 and model[-3] is l0
    assert list(model) == [l0, r, l2]
    assert list(model.children()) == [l0, r, l2]
    head = model[:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2 and head[1] is r
    with pytest.raises(IndexError):
        model[3]
    model.append(nn.ReLU())
    assert len(model) == 4 and isinstance(model[3], nn.ReLU)
    assert len(nn.Sequential()) == 0
    x = lucid.ones(2, 2)
    assert nn.Sequential()(x) is x
    with pytest.raises(TypeError):
        nn.Sequential(nn.ReLU(), lambda v: v)


def test_sequential_from_ordered_dict():
    model = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 3)), ("act", nn.ReLU()), ("out", nn.Linear(3, 1))]))
    assert [n for n, _ in model.named_parameters()] == ["fc.weight", "fc.bias", "out.weight", "out.bias"]
    assert model.fc is model[0] and model.out is model[2]


# ---- Module --------------------------------------------------------------------------------------


def test_named_parameters_and_children():
    model = make_mlp()
    names = [n for n, _ in model.named_parameters()]
    assert names == ["0.weight", "0.bias", "2.weight", "2.bias"]
    params = list(model.parameters())
    assert params == [model[0].weight, model[0].bias, model[2].weight, model[2].bias]
    assert all(isinstance(p, nn.Parameter) for p in params)
    assert [n for n, _ in model.named_children()] == ["0", "1", "2"]
    assert [n for n, _ in model.named_modules()] == ["", "0", "1", "2"]
    assert list(model.modules())[0] is model
    assert list(model.parameters(recurse=False)) == []


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 4)
        self.scale = nn.Parameter(lucid.full((4,), 2.0))
        self.act = nn.ReLU()
        self.note = "not a parameter"

    def forward(self, x):
        return self.act(self.proj(x)) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Block()
        self.layers = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.head = nn.Linear(4, 2, bias=False)

    def forward(self, x):
        return self.head(self.layers(self.first(x)))


def test_custom_module_registration_and_forward():
    lucid.manual_seed(0)
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == [
        "first.scale",
        "first.proj.weight",
        "first.proj.bias",
        "layers.0.weight",
        "layers.0.bias",
        "head.weight",
    ]
    assert [type(m).__name__ for m in net.children()] == ["Block", "Sequential", "Linear"]
    assert net.first.note == "not a parameter"
    x = randf((5, 3), 1)
    h = np.maximum(np_linear(x, net.first.proj), 0) * 2.0
    h = np.maximum(np_linear(h, net.layers[0]), 0)
    want = np_linear(h, net.head)
    np.testing.assert_allclose(net(lucid.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(AttributeError):
        net.missing
    r = repr(net)
    assert "Block" in r and "Sequential" in r and "(head): Linear" in r


def test_module_attribute_bookkeeping():
    m = nn.Module()
    p = nn.Parameter(lucid.zeros(2))
    m.w = p
    assert m.w is p and [n for n, _ in m.named_parameters()] == ["w"]
    m.w = lucid.zeros(2)  # a plain tensor replaces the parameter and is not registered
    assert list(m.parameters()) == []
    m.sub = nn.Linear(1, 1)
    assert [n for n, _ in m.named_children()] == ["sub"]
    del m.sub
    assert list(m.children()) == []
    shared = nn.Linear(2, 2)
    m.a, m.b = shared, shared
    assert len(list(m.parameters())) == 2  # shared parameters are listed once
    with pytest.raises(TypeError):
        m.register_parameter("x", lucid.zeros(1))
    with pytest.raises(NotImplementedError):
        nn.Module()(lucid.zeros(1))

    class NoInit(nn.Module):
        def __init__(self):
            self.x = 1

    with pytest.raises(AttributeError):
        NoInit()


def test_module_to_device_keeps_parameter_identity():
    model = make_mlp()
    before = {n: (p, p.numpy()) for n, p in model.named_parameters()}
    assert model.to("metal") is model
    for n, p in model.named_parameters():
        obj, values = before[n]
        assert p is obj
        assert p.device == "metal"
        assert p.requires_grad
        assert isinstance(p, nn.Parameter)
        np.testing.assert_array_equal(p.numpy(), values)
    assert model[0].weight is before["0.weight"][0]
    y = model(lucid.ones(2, 4, device="metal"))
    assert y.device == "metal"
    model.to(lucid.device("cpu"))
    assert all(p.device == "cpu" for p in model.parameters())


def test_module_to_dtype_keeps_parameter_identity():
    model = make_mlp()
    before = {n: (p, p.numpy()) for n, p in model.named_parameters()}
    model.to(lucid.float16)
    for n, p in model.named_parameters():
        obj, values = before[n]
        assert p is obj and p.dtype is lucid.float16 and p.device == "cpu" and p.requires_grad
        np.testing.assert_array_equal(p.numpy(), values.astype(np.float16))
    model.to("metal", lucid.bfloat16)
    for n, p in model.named_parameters():
        obj, values = before[n]
        assert p is obj and p.dtype is lucid.bfloat16 and p.device == "metal"
        np.testing.assert_array_equal(
            p.numpy(), values.astype(np.float16).astype(np.float32).astype(ml_dtypes.bfloat16)
        )
    model.float()
    assert all(p.dtype is lucid.float32 for p in model.parameters())
    model.half()
    assert all(p.dtype is lucid.float16 for p in model.parameters())
    model.to(device="cpu", dtype=lucid.float32)
    assert all(p.dtype is lucid.float32 and p.device == "cpu" for p in model.parameters())
    with pytest.raises(TypeError):
        model.to(lucid.int32)
    with pytest.raises(ValueError):
        model.to("cuda")


def test_train_eval_propagate():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert all(not m.training for m in net.modules())
    assert not net.first.proj.training and not net.layers[1].training
    net.train()
    assert all(m.training for m in net.modules())
    net.layers.eval()
    assert net.training and not net.layers.training and not net.layers[0].training and net.first.training
    net.train(False)
    assert not any(m.training for m in net.modules())
    with pytest.raises(TypeError):
        net.train("yes")


# ---- state_dict ----------------------------------------------------------------------------------


def test_state_dict_contents():
    model = make_mlp()
    sd = model.state_dict()
    assert list(sd) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    for name, p in model.named_parameters():
        assert isinstance(sd[name], lucid.Tensor)
        assert sd[name].shape == p.shape and sd[name].dtype is p.dtype
        np.testing.assert_array_equal(sd[name].numpy(), p.numpy())


def test_load_state_dict_round_trip():
    src, dst = make_mlp(), nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    assert not np.array_equal(src[0].weight.numpy(), dst[0].weight.numpy())
    ids = [id(p) for p in dst.parameters()]
    result = dst.load_state_dict(src.state_dict())
    assert tuple(result) == ([], [])
    assert [id(p) for p in dst.parameters()] == ids
    for (n1, p1), (n2, p2) in zip(src.named_parameters(), dst.named_parameters()):
        assert n1 == n2
        np.testing.assert_array_equal(p2.numpy(), p1.numpy())
        assert p2.requires_grad
    x = lucid.tensor(randf((3, 4), 9))
    np.testing.assert_array_equal(dst(x).numpy(), src(x).numpy())


def test_load_state_dict_converts_to_each_parameters_dtype_and_device():
    src = make_mlp()
    dst = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to("metal", lucid.float16)
    dst.load_state_dict(src.state_dict())
    for p1, p2 in zip(src.parameters(), dst.parameters()):
        assert p2.device == "metal" and p2.dtype is lucid.float16
        np.testing.assert_array_equal(p2.numpy(), p1.numpy().astype(np.float16))
    back = make_mlp()
    back.load_state_dict(dst.state_dict())
    for p1, p2 in zip(dst.parameters(), back.parameters()):
        assert p2.device == "cpu" and p2.dtype is lucid.float32
        np.testing.assert_array_equal(p2.numpy(), p1.numpy().astype(np.float32))


def test_load_state_dict_shape_mismatch():
    model = make_mlp()
    before = [p.numpy() for p in model.parameters()]
    sd = model.state_dict()
    sd["2.weight"] = lucid.zeros(3, 7)
    with pytest.raises(ValueError) as e:
        model.load_state_dict(sd)
    assert "2.weight" in str(e.value)
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), b)  # nothing was loaded


def test_load_state_dict_missing_and_unexpected_keys():
    model = make_mlp()
    before = [p.numpy() for p in model.parameters()]
    sd = model.state_dict()
    del sd["0.bias"]
    with pytest.raises(KeyError) as e:
        model.load_state_dict(sd)
    assert "0.bias" in str(e.value)
    sd = model.state_dict()
    sd["3.weight"] = lucid.zeros(1)
    with pytest.raises(KeyError) as e:
        model.load_state_dict(sd)
    assert "3.weight" in str(e.value)
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), b)

    other = make_mlp()
    lucid.manual_seed(77)
    fresh = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    sd = fresh.state_dict()
    del sd["2.bias"]
    sd["extra"] = lucid.zeros(1)
    missing, unexpected = other.load_state_dict(sd, strict=False)
    assert list(missing) == ["2.bias"] and list(unexpected) == ["extra"]
    np.testing.assert_array_equal(other[0].weight.numpy(), fresh[0].weight.numpy())
    np.testing.assert_array_equal(other[2].bias.numpy(), make_mlp()[2].bias.numpy())


def test_load_state_dict_rejects_non_tensors():
    model = make_mlp()
    sd = model.state_dict()
    sd["0.weight"] = np.zeros((8, 4), np.float32)
    with pytest.raises(TypeError):
        model.load_state_dict(sd)


def test_state_dict_of_custom_module_round_trips():
    lucid.manual_seed(1)
    a = Net()
    lucid.manual_seed(2)
    b = Net()
    b.load_state_dict(a.state_dict())
    x = lucid.tensor(randf((4, 3), 3))
    np.testing.assert_array_equal(b(x).numpy(), a(x).numpy())


# ---- Parameter -----------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_parameter(device):
    data = lucid.tensor(randf((2, 3), 4), device=device)
    p = nn.Parameter(data)
    assert isinstance(p, lucid.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad is True
    assert p.device == device and p.dtype is lucid.float32 and p.shape == (2, 3)
    np.testing.assert_array_equal(p.numpy(), data.numpy())
    assert not data.requires_grad
    q = nn.Parameter(data, requires_grad=False)
    assert q.requires_grad is False
    assert "Parameter containing" in repr(p)
    assert nn.Parameter(lucid.zeros(2, dtype=lucid.float16)).requires_grad
    assert nn.Parameter(lucid.zeros(2, dtype=lucid.int64), requires_grad=False).dtype is lucid.int64
    with pytest.raises(TypeError):
        nn.Parameter(lucid.zeros(2, dtype=lucid.int32))
    with pytest.raises(TypeError):
        nn.Parameter(np.zeros(2, np.float32))
    r = p + 1
    assert type(r) is lucid.Tensor
    np.testing.assert_array_equal(r.numpy(), data.numpy() + np.float32(1))
