"""StepLR and CosineAnnealingLR against their closed forms, over several parameter groups."""

import math

import numpy as np
import pytest

import lucid
from lucid.optim.lr_scheduler import CosineAnnealingLR, StepLR


def groups():
    a = lucid.zeros(2, requires_grad=True)
    b = lucid.zeros(3, requires_grad=True)
    return lucid.optim.SGD([{"params": [a], "lr": 0.5}, {"params": [b], "lr": 0.1}], lr=0.1)


def test_step_lr_follows_gamma_every_step_size_epochs():
    opt = groups()
    sched = StepLR(opt, step_size=3, gamma=0.5)
    for epoch in range(10):
        want = [base * 0.5 ** (epoch // 3) for base in (0.5, 0.1)]
        assert sched.get_last_lr() == pytest.approx(want)
        assert [g["lr"] for g in opt.param_groups] == pytest.approx(want)
        sched.step()


def test_cosine_annealing_reaches_eta_min_at_t_max():
    opt = groups()
    sched = CosineAnnealingLR(opt, T_max=8, eta_min=0.01)
    seen = []
    for epoch in range(12):
        want = [0.01 + (base - 0.01) * (1 + math.cos(math.pi * epoch / 8)) / 2 for base in (0.5, 0.1)]
        assert sched.get_last_lr() == pytest.approx(want)
        seen.append(sched.get_last_lr()[0])
        sched.step()
    assert seen[8] == pytest.approx(0.01) and seen[0] == pytest.approx(0.5)


def test_state_dict_resumes_the_schedule():
    opt = groups()
    sched = StepLR(opt, step_size=2, gamma=0.1)
    for _ in range(3):
        sched.step()
    state = sched.state_dict()
    assert "optimizer" not in state
    opt2 = groups()
    sched2 = StepLR(opt2, step_size=5, gamma=0.9)
    sched2.load_state_dict(state)
    sched.step()
    sched2.step()
    assert sched2.get_last_lr() == pytest.approx(sched.get_last_lr())
    assert sched2.last_epoch == 4


def test_the_scheduled_lr_is_the_one_the_optimizer_uses():
    p = lucid.tensor(np.array([1.0, -2.0], np.float32), requires_grad=True)
    opt = lucid.optim.SGD([p], lr=1.0)
    sched = StepLR(opt, step_size=1, gamma=0.5)
    want = np.array([1.0, -2.0])
    for epoch in range(3):
        (p * p).sum().backward()
        opt.step()
        opt.zero_grad()
        want = want - 0.5**epoch * 2 * want  # grad of sum(p²) is 2p
        sched.step()
    np.testing.assert_allclose(p.numpy(), want, rtol=1e-6)


def test_errors():
    opt = groups()
    with pytest.raises(TypeError, match="not an Optimizer"):
        StepLR(object(), 1)
    with pytest.raises(ValueError, match="step_size"):
        StepLR(opt, 0)
    with pytest.raises(ValueError, match="T_max"):
        CosineAnnealingLR(opt, -1)
    with pytest.raises(KeyError, match="initial_lr"):
        StepLR(groups(), 2, last_epoch=3)


def cosine(base, eta_min, t_max, epoch):
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * epoch / t_max)) / 2


def test_cosine_schedule_drives_sgd_in_every_group():
    start = [np.array([0.5, -1.5], np.float32), np.array([2.0, 1.0, -3.0], np.float32)]
    ps = [lucid.tensor(a, requires_grad=True) for a in start]
    bases = [0.2, 0.05]
    opt = lucid.optim.SGD([{"params": [ps[0]], "lr": bases[0]}, {"params": [ps[1]], "lr": bases[1]}])
    sched = CosineAnnealingLR(opt, T_max=7, eta_min=0.001)
    want = [a.astype(np.float64) for a in start]
    for epoch in range(20):
        sum(((p * p).sum() for p in ps), lucid.tensor(0.0)).backward()
        opt.step()
        opt.zero_grad()
        want = [w - cosine(b, 0.001, 7, epoch) * 2 * w for w, b in zip(want, bases)]
        sched.step()
    for p, w in zip(ps, want):
        np.testing.assert_allclose(p.numpy(), w, rtol=1e-5, atol=1e-7)


def test_initial_lr_is_recorded_and_kept():
    opt = groups()
    StepLR(opt, step_size=1, gamma=0.5).step()
    assert [g["initial_lr"] for g in opt.param_groups] == [0.5, 0.1]
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.25, 0.05])
    # A second scheduler on the same optimizer starts from the recorded base rates, not the current ones.
    sched = CosineAnnealingLR(opt, T_max=4)
    assert sched.get_last_lr() == pytest.approx([0.5, 0.1])


def test_last_epoch_resumes_from_the_closed_form():
    opt = groups()
    StepLR(opt, step_size=3)
    sched = StepLR(opt, step_size=3, gamma=0.5, last_epoch=6)
    assert sched.last_epoch == 7
    assert sched.get_last_lr() == pytest.approx([base * 0.5 ** (7 // 3) for base in (0.5, 0.1)])


def test_state_dict_survives_a_checkpoint_and_is_a_snapshot(tmp_path):
    from lucid.serialization import load, save

    opt = groups()
    sched = CosineAnnealingLR(opt, T_max=10, eta_min=0.02)
    for _ in range(4):
        sched.step()
    state = sched.state_dict()
    save({"sched": state}, tmp_path / "s.safetensors")
    sched.step()  # later steps must not change the snapshot
    assert state["last_epoch"] == 4 and state["_last_lr"] == pytest.approx([cosine(b, 0.02, 10, 4) for b in (0.5, 0.1)])
    resumed = CosineAnnealingLR(groups(), T_max=3)
    resumed.load_state_dict(load(tmp_path / "s.safetensors")["sched"])
    for epoch in range(5, 15):
        resumed.step()
        assert resumed.get_last_lr() == pytest.approx([cosine(b, 0.02, 10, epoch) for b in (0.5, 0.1)])


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda o: StepLR(o, 2, last_epoch=-2), ValueError, "last_epoch"),
        (lambda o: StepLR(o, 2.5), ValueError, "step_size"),
        (lambda o: StepLR(o, True), ValueError, "step_size"),
        (lambda o: StepLR(o, 2, gamma="0.5"), TypeError, "gamma"),
        (lambda o: StepLR(o, 2, gamma=-0.5), ValueError, "gamma"),
        (lambda o: CosineAnnealingLR(o, 0), ValueError, "T_max"),
        (lambda o: CosineAnnealingLR(o, 5, eta_min=-1e-3), ValueError, "eta_min"),
        (lambda o: CosineAnnealingLR(o, 5, eta_min=float("nan")), ValueError, "eta_min"),
        (lambda o: StepLR(o, 2).load_state_dict([1, 2]), TypeError, "dict"),
        (lambda o: StepLR(o, 2).load_state_dict({"optimizer": o}), ValueError, "optimizer"),
    ],
)
def test_more_argument_errors(make, error, match):
    opt = groups()
    lrs = [g["lr"] for g in opt.param_groups]
    with pytest.raises(error, match=match):
        make(opt)
    assert [g["lr"] for g in opt.param_groups] == lrs  # a refused argument changes no learning rate
