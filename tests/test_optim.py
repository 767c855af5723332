"""Optimizers against hand-computed (numpy) updates, param groups, state dicts, errors."""

import numpy as np
import pytest

import lucid
import lucid.nn as nn
from lucid.optim import SGD, Adam, AdamW

rng = np.random.default_rng(11)


def param(shape=(3, 2), device="cpu"):
    return nn.Parameter(lucid.tensor(rng.standard_normal(shape).astype(np.float32), device=device))


def run(opt_cls, kwargs, steps=5, device="cpu"):
    """Runs the optimizer on one parameter with fixed random gradients; returns lucid's and the
    gradients used."""
    p = param(device=device)
    start = p.numpy().astype(np.float64)
    grads = [rng.standard_normal(p.shape).astype(np.float32) for _ in range(steps)]
    opt = opt_cls([p], **kwargs)
    for g in grads:
        p.grad = lucid.tensor(g, device=device)
        opt.step()
    return p.numpy(), start, grads


def sgd_reference(p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    buf = None
    for g in grads:
        d = -g.astype(np.float64) if maximize else g.astype(np.float64)
        d = d + weight_decay * p
        if momentum:
            buf = d if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        p = p - lr * d
    return p


def adam_reference(p, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False):
    m = v = 0.0
    for t, g in enumerate(grads, 1):
        d = g.astype(np.float64)
        if weight_decay:
            if decoupled:
                p = p * (1 - lr * weight_decay)
            else:
                d = d + weight_decay * p
        m = betas[0] * m + (1 - betas[0]) * d
        v = betas[1] * v + (1 - betas[1]) * d * d
        denom = np.sqrt(v) / np.sqrt(1 - betas[1] ** t) + eps
        p = p - lr / (1 - betas[0] ** t) * m / denom
    return p


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(lr=0.1),
        dict(lr=0.05, momentum=0.9),
        dict(lr=0.05, momentum=0.9, nesterov=True),
        dict(lr=0.1, momentum=0.5, dampening=0.3, weight_decay=0.01),
        dict(lr=0.1, weight_decay=0.1, maximize=True),
    ],
)
@pytest.mark.parametrize("device", ["cpu", "metal"])
def test_sgd_matches_the_reference_update(kwargs, device):
    got, start, grads = run(SGD, kwargs, device=device)
    np.testing.assert_allclose(got, sgd_reference(start, grads, **kwargs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs", [dict(lr=0.01), dict(lr=0.1, betas=(0.8, 0.99), eps=1e-6), dict(lr=0.01, weight_decay=0.1)]
)
def test_adam_matches_the_reference_update(kwargs):
    got, start, grads = run(Adam, kwargs)
    np.testing.assert_allclose(got, adam_reference(start, grads, **kwargs), rtol=1e-5, atol=1e-6)


def test_adamw_decouples_weight_decay():
    got, start, grads = run(AdamW, dict(lr=0.01, weight_decay=0.1))
    np.testing.assert_allclose(
        got, adam_reference(start, grads, 0.01, weight_decay=0.1, decoupled=True), rtol=1e-5, atol=1e-6
    )
    assert AdamW([param()]).defaults["weight_decay"] == 1e-2


def test_step_keeps_the_parameter_object_and_its_gradient():
    p = param()
    opt = SGD([p], lr=0.1)
    p.grad = lucid.ones(*p.shape)
    before = p.numpy()
    ident = id(p)
    opt.step()
    assert id(p) == ident and p.is_leaf and p.requires_grad
    np.testing.assert_allclose(p.numpy(), before - 0.1, rtol=1e-6)
    np.testing.assert_array_equal(p.grad.numpy(), np.ones(p.shape))
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.numpy(), np.zeros(p.shape))
    opt.zero_grad()
    assert p.grad is None
    opt.step()  # no gradient: nothing changes
    np.testing.assert_allclose(p.numpy(), before - 0.1, rtol=1e-6)


def test_param_groups_use_their_own_hyper_parameters():
    a, b = param(), param()
    opt = SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    a0, b0 = a.numpy(), b.numpy()
    a.grad = lucid.ones(*a.shape)
    b.grad = lucid.ones(*b.shape)
    opt.step()
    np.testing.assert_allclose(a.numpy(), a0 - 0.1, rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), b0 - 1.0, rtol=1e-6)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 1.0]


def test_state_dict_round_trip_resumes_identically():
    def make():
        lucid.manual_seed(5)
        return nn.Linear(3, 2)

    x = lucid.randn(8, 3)
    m1 = make()
    o1 = Adam(m1.parameters(), lr=0.05)
    for _ in range(3):
        o1.zero_grad()
        m1(x).sum().backward()
        o1.step()
    m2 = make()
    m2.load_state_dict(m1.state_dict())
    o2 = Adam(m2.parameters(), lr=0.05)
    o2.load_state_dict(o1.state_dict())
    assert o2.state_dict()["state"][0]["step"] == 3
    for m, o in ((m1, o1), (m2, o2)):
        o.zero_grad()
        m(x).sum().backward()
        o.step()
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p1.numpy(), p2.numpy())


def test_training_an_mlp_under_autocast_reduces_the_loss():
    lucid.manual_seed(0)
    x = lucid.randn(64, 8, device="metal")
    y = (x @ lucid.randn(8, 1, device="metal")).relu()
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to("metal")
    opt = Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(100):
        opt.zero_grad()
        with lucid.amp.autocast():
            err = model(x).float() - y
            loss = (err * err).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]
    assert all(p.dtype == lucid.float32 for p in model.parameters())


def test_optimizer_errors():
    with pytest.raises(ValueError, match="empty"):
        SGD([], lr=0.1)
    with pytest.raises(TypeError):
        SGD(param(), lr=0.1)
    with pytest.raises(ValueError, match="lr"):
        SGD([param()], lr=-1)
    with pytest.raises(ValueError, match="Nesterov"):
        SGD([param()], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="betas"):
        Adam([param()], betas=(0.9, 1.5))
    p = param()
    with pytest.raises(ValueError, match="more than one"):
        SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        SGD([p * 2], lr=0.1)
    q = param(device="metal")
    opt = SGD([q], lr=0.1)
    q.grad = lucid.ones(*q.shape, device="metal")
    opt.state[q] = {"momentum_buffer": lucid.ones(4)}
    opt.param_groups[0]["momentum"] = 0.9
    with pytest.raises(ValueError, match="shape"):
        opt.step()


@pytest.mark.parametrize("kwargs", [dict(lr=0.01), dict(lr=0.02, weight_decay=0.1, maximize=True)])
@pytest.mark.parametrize("cls", [Adam, AdamW])
def test_the_vector_loop_and_the_generic_adam_step_agree_to_the_bit(cls, kwargs):
    # A float32 parameter updated in place takes the vector loop; one whose gradient shares its
    # memory cannot, and takes the engine's generic loop. The same values must come out.
    values = np.random.default_rng(4).standard_normal(4099).astype(np.float32)
    fast, generic = lucid.nn.Parameter(lucid.tensor(values)), lucid.nn.Parameter(lucid.tensor(values))
    o1, o2 = cls([fast], **kwargs), cls([generic], **kwargs)
    for _ in range(3):
        fast.grad = fast.detach().clone()
        generic.grad = generic.detach()  # the parameter's own memory
        o1.step()
        o2.step()
    np.testing.assert_array_equal(fast.detach().numpy().view(np.uint32), generic.detach().numpy().view(np.uint32))
