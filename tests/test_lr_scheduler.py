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
        want = want - 0.5 ** epoch * 2 * want  # grad of sum(p²) is 2p
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
