"""lucid.amp.GradScaler: PyTorch's semantics, with the inf/NaN check in the engine."""

import numpy as np
import pytest

import lucid
import lucid.nn as nn
from lucid.amp import GradScaler


def setup(device="metal"):
    lucid.manual_seed(1)
    model = nn.Linear(4, 2).to(device)
    opt = lucid.optim.SGD(model.parameters(), lr=0.1)
    x = lucid.randn(8, 4, device=device)
    return model, opt, x


def test_scale_multiplies_tensors_and_nested_sequences():
    s = GradScaler(init_scale=8.0)
    t = lucid.tensor([1.0, 2.0], device="metal").half()
    out = s.scale(t)
    assert out.dtype == lucid.float16
    np.testing.assert_array_equal(out.numpy(), [8, 16])
    a, (b,) = s.scale([t, (t,)])
    np.testing.assert_array_equal(b.numpy(), [8, 16])
    with pytest.raises(TypeError):
        s.scale(3.0)
    with pytest.raises(ValueError, match="cpu"):
        s.scale(lucid.ones(2))


def test_a_clean_step_unscales_in_float32_and_updates():
    model, opt, x = setup()
    scaler = GradScaler(init_scale=1024.0)
    with lucid.amp.autocast():
        loss = model(x).float().sum()
    scaler.scale(loss).backward()
    scaled = model.weight.grad.numpy()
    w0 = model.weight.numpy()
    scaler.unscale_(opt)
    np.testing.assert_allclose(model.weight.grad.numpy(), scaled / 1024.0, rtol=1e-6)
    assert model.weight.grad.dtype == lucid.float32
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)  # not skipped: the parameter moves by the unscaled gradient
    np.testing.assert_allclose(model.weight.numpy(), w0 - 0.1 * scaled / 1024.0, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="already been called since the last update"):
        scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 1024.0


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_an_inf_or_nan_gradient_skips_the_step_and_backs_off(bad):
    model, opt, x = setup()
    scaler = GradScaler(init_scale=256.0, backoff_factor=0.25)
    model(x).sum().backward()
    g = model.weight.grad.numpy()
    g[0, 0] = bad
    model.weight.grad = lucid.tensor(g, device="metal")
    before = [p.numpy() for p in model.parameters()]
    assert scaler.step(opt) is None
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), b)  # untouched
    scaler.update()
    assert scaler.get_scale() == 64.0
    # training resumes: the next clean step goes through
    opt.zero_grad()
    scaler.scale(model(x).sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert not np.array_equal(model.weight.numpy(), before[0])


def test_float16_overflow_after_scaling_counts_as_inf():
    p = nn.Parameter(lucid.ones(3, device="metal").half())
    opt = lucid.optim.SGD([p], lr=0.1)
    p.grad = lucid.tensor([60000.0, 1.0, 1.0], device="metal").half()
    scaler = GradScaler(init_scale=0.5)  # unscaling multiplies by 2: 120000 overflows float16
    assert scaler.step(opt) is None
    np.testing.assert_array_equal(p.numpy(), [1, 1, 1])


def test_growth_after_the_interval():
    model, opt, x = setup()
    scaler = GradScaler(init_scale=4.0, growth_factor=3.0, growth_interval=3)
    scales = []
    for _ in range(7):
        opt.zero_grad()
        scaler.scale(model(x).sum()).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    assert scales == [4.0, 4.0, 12.0, 12.0, 12.0, 36.0, 36.0]


def test_update_with_new_scale_and_state_dict():
    model, opt, x = setup()
    scaler = GradScaler(init_scale=16.0, growth_interval=10)
    scaler.scale(model(x).sum()).backward()
    scaler.step(opt)
    scaler.update(new_scale=2.0)
    assert scaler.get_scale() == 2.0
    scaler.update(lucid.tensor(5.0))
    assert scaler.get_scale() == 5.0
    with pytest.raises(ValueError):
        scaler.update(new_scale=-1)
    sd = scaler.state_dict()
    other = GradScaler()
    other.load_state_dict(sd)
    assert other.get_scale() == 5.0 and other.state_dict() == sd
    with pytest.raises(RuntimeError, match="No inf checks"):
        GradScaler().update()


def test_disabled_scaler_is_a_pass_through():
    model, opt, x = setup()
    scaler = GradScaler(enabled=False)
    loss = model(x).sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    w0 = model.weight.numpy()
    g = model.weight.grad.numpy()
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(model.weight.numpy(), w0 - 0.1 * g, rtol=1e-5, atol=1e-6)
    assert scaler.get_scale() == 1.0 and not scaler.is_enabled() and scaler.state_dict() == {}


def test_constructor_validation():
    for kwargs in [
        dict(device="cuda"),
        dict(init_scale=0),
        dict(growth_factor=1.0),
        dict(backoff_factor=1.5),
        dict(growth_interval=0),
        dict(growth_interval=2.5),
    ]:
        with pytest.raises(ValueError):
            GradScaler(**kwargs)


@pytest.mark.parametrize("device,dtype", [("metal", lucid.float16), ("cpu", lucid.bfloat16)])
def test_mixed_precision_training_matches_float32(device, dtype):
    def train(amp):
        lucid.manual_seed(0)
        x = lucid.randn(128, 10, device=device)
        y = (x @ lucid.randn(10, 1, device=device) * 0.5).relu()
        model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
        opt = lucid.optim.Adam(model.parameters(), lr=0.01)
        scaler = GradScaler(device=device, enabled=amp and dtype is lucid.float16)
        losses = []
        for _ in range(150):
            opt.zero_grad()
            with lucid.amp.autocast(device, dtype=dtype, enabled=amp):
                err = model(x).float() - y
                loss = (err * err).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            losses.append(loss.item())
        return losses

    full, mixed = train(False), train(True)
    assert mixed[-1] < 0.1 * mixed[0]
    assert abs(mixed[-1] - full[-1]) < 0.02 + 0.2 * full[-1]


# ---- skipping on the device ------------------------------------------------------------------

OPTIMIZERS = {
    "sgd": lambda ps: lucid.optim.SGD(ps, lr=0.1),
    "sgd-momentum": lambda ps: lucid.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    "sgd-dampening": lambda ps: lucid.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5),
    "adam": lambda ps: lucid.optim.Adam(ps, lr=0.05),
    "adamw": lambda ps: lucid.optim.AdamW(ps, lr=0.05),
    "rmsprop": lambda ps: lucid.optim.RMSprop(ps, lr=0.01),  # composed: the scaler reads the flag
}


def _train(device, make_opt, poisoned, scaled, steps=5):
    """Trains a small model; returns its final weights and the optimizer. With `scaled`, under
    a GradScaler, a gradient made infinite after backward at the steps in `poisoned`; without,
    those steps left out."""
    lucid.manual_seed(4)
    model = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 2)).to(device)
    opt = make_opt(list(model.parameters()))
    scaler = GradScaler(device, init_scale=2.0**8, growth_interval=2, enabled=scaled)
    rng = np.random.default_rng(0)
    data = [lucid.tensor(rng.standard_normal((8, 5)).astype(np.float32), device=device) for _ in range(steps)]
    for step in range(steps):
        if step in poisoned and not scaled:
            continue
        opt.zero_grad()
        scaler.scale(model(data[step]).pow(2).mean()).backward()
        if step in poisoned:
            model[0].weight.grad[1, 2] = float("inf")
        scaler.step(opt)
        scaler.update()
    return [p.numpy() for p in model.parameters()], opt


@pytest.mark.parametrize("name", OPTIMIZERS)
@pytest.mark.parametrize("device", ["cpu", "metal"])
def test_skipped_steps_leave_the_same_trace_as_steps_never_taken(device, name):
    # The first step skipped (state not made yet), and a later one (state present). The clean
    # run takes the same steps with the poisoned ones left out: scales are powers of two, so
    # the unscaled gradients are the same bits whatever the scale.
    poisoned = {0, 3}
    skipped_w, skipped_opt = _train(device, OPTIMIZERS[name], poisoned, scaled=True)
    clean_w, _ = _train(device, OPTIMIZERS[name], poisoned, scaled=False)
    for got, want in zip(skipped_w, clean_w):
        np.testing.assert_array_equal(got, want)
    if name.startswith("adam"):
        steps = {float(s["step"]) for s in skipped_opt.state.values()}
        assert steps == {3.0}, steps  # the count holds the steps taken, on the parameter's device
        assert {s["step"].device.type for s in skipped_opt.state.values()} == {device}


def test_an_optimizer_that_overrides_step_is_called_through_it():
    calls = []

    class Logged(lucid.optim.SGD):
        def step(self, closure=None):
            calls.append(1)
            return super().step(closure)

    model, _, x = setup("cpu")
    opt = Logged(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu")
    scaler.scale(model(x).sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert calls == [1]
    opt.zero_grad()
    scaler.scale(model(x).sum()).backward()
    model.weight.grad[0, 0] = float("nan")
    assert scaler.step(opt) is None and calls == [1]  # skipped after reading the flag


def test_the_scale_does_not_grow_past_the_float32_range():
    model, opt, x = setup("cpu")
    scaler = GradScaler("cpu", init_scale=2.0**127, growth_interval=1)
    opt.zero_grad()
    scaler.scale(model(x).sum() * 0).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0**127
    assert scaler.state_dict()["_growth_tracker"] == 0


def test_a_wrong_step_count_is_refused_by_name():
    model, _, x = setup("cpu")
    opt = lucid.optim.Adam(model.parameters())
    model(x).sum().backward()
    opt.step()
    opt.state[model.weight]["step"] = lucid.tensor(1, dtype=lucid.int32)
    with pytest.raises(TypeError, match="step must be lucid.float32, got lucid.int32"):
        opt.step()
    opt.state[model.weight]["step"] = lucid.zeros(2)
    with pytest.raises(ValueError, match="step must have one element"):
        opt.step()
    opt.state[model.weight]["step"] = 7  # a number is taken as the count
    opt.step()
    assert float(opt.state[model.weight]["step"]) == 8.0


def test_adam_state_dicts_keep_the_step_count_in_float32():
    model, _, x = setup("cpu")
    model.half()
    opt = lucid.optim.Adam(model.parameters())
    model(x.half()).float().sum().backward()
    opt.step()
    sd = opt.state_dict()
    other = lucid.optim.Adam(model.parameters())
    other.load_state_dict(sd)
    step = other.state[model.weight]["step"]
    assert step.dtype == lucid.float32 and float(step) == 1.0
    assert other.state[model.weight]["exp_avg"].dtype == lucid.float16


@pytest.mark.parametrize("device", ["cpu", "metal"])
def test_the_hand_computed_sequence_the_swift_suite_checks(device):
    # tests/swift/TrainingUtilityTests.swift runs the same sequence through Swift's GradScaler:
    # init 8, growth every 2 clean steps, SGD lr 0.5 on p = [1, 2], gradients c * scale.
    p = lucid.tensor([1.0, 2.0], device=device, requires_grad=True)
    opt = lucid.optim.SGD([p], lr=0.5)
    s = GradScaler(device=device, init_scale=8.0, growth_interval=2)
    expected = [([1e38, 1.0], [1, 2], 4.0, 0), ([1.0, 2.0], [0.5, 1], 4.0, 1), ([1.0, 2.0], [0, 0], 8.0, 0)]
    for c, params, scale, tracker in expected:
        opt.zero_grad()
        s.scale((p * lucid.tensor(c, device=device)).sum()).backward()
        s.step(opt)
        s.update()
        np.testing.assert_array_equal(p.detach().numpy(), params)
        assert s.get_scale() == scale and s.state_dict()["_growth_tracker"] == tracker
