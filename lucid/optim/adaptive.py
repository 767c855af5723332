"""RMSprop, Adagrad and Adadelta, with PyTorch's update rules, composed from tensor ops in
float32 (the parameter keeps its dtype; the state is float32)."""

from __future__ import annotations

from .._ops.creation import full_like, zeros_like
from .optimizer import Optimizer


def _keep(state, key, value):
    """Stores `value` as state `key`: written into the tensor already there, so that a
    reference to it (or a state dict taken before) follows every step."""
    held = state.get(key)
    if held is None:
        state[key] = value
    else:
        held.copy_(value)


def _direction(p32, grad, group):
    g = grad.float()
    if group["maximize"]:
        g = -g
    if group["weight_decay"]:
        g = g + p32 * float(group["weight_decay"])
    return g


def _check_positive(name, value, zero_ok=True):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (value == 0 and not zero_ok):
        raise ValueError(f"invalid {name}: {value!r}")


class RMSprop(Optimizer):
    """``torch.optim.RMSprop``: a running mean of squared gradients scales each step (centred,
    with momentum, if asked)."""

    def __init__(
        self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False, *, maximize=False
    ):
        for name, v in (("alpha", alpha), ("eps", eps), ("momentum", momentum)):
            _check_positive(name, v)
        super().__init__(
            params,
            dict(
                lr=lr,
                alpha=alpha,
                eps=eps,
                weight_decay=weight_decay,
                momentum=momentum,
                centered=centered,
                maximize=maximize,
            ),
        )

    def _update(self, p, grad, group, state):
        p32 = p.float()
        g = _direction(p32, grad, group)
        alpha = float(group["alpha"])
        square = state.get("square_avg", zeros_like(p32)) * alpha + g * g * (1 - alpha)
        _keep(state, "square_avg", square)
        if group["centered"]:
            avg_grad = state.get("grad_avg", zeros_like(p32)) * alpha + g * (1 - alpha)
            _keep(state, "grad_avg", avg_grad)
            avg = (square - avg_grad * avg_grad).sqrt() + float(group["eps"])
        else:
            avg = square.sqrt() + float(group["eps"])
        step = g / avg
        if group["momentum"] > 0:
            step = state.get("momentum_buffer", zeros_like(p32)) * float(group["momentum"]) + step
            _keep(state, "momentum_buffer", step)
        p.copy_(p32 - step * float(group["lr"]))


class Adagrad(Optimizer):
    """``torch.optim.Adagrad``: steps scaled by the root of the summed squared gradients."""

    def __init__(
        self,
        params,
        lr=1e-2,
        lr_decay=0.0,
        weight_decay=0.0,
        initial_accumulator_value=0.0,
        eps=1e-10,
        *,
        maximize=False,
    ):
        for name, v in (("lr_decay", lr_decay), ("initial_accumulator_value", initial_accumulator_value), ("eps", eps)):
            _check_positive(name, v)
        super().__init__(
            params,
            dict(
                lr=lr,
                lr_decay=lr_decay,
                weight_decay=weight_decay,
                eps=eps,
                maximize=maximize,
                initial_accumulator_value=initial_accumulator_value,
            ),
        )

    def _update(self, p, grad, group, state):
        p32 = p.float()
        g = _direction(p32, grad, group)
        state["step"] = state.get("step", 0) + 1
        total = state.get("sum", full_like(p32, float(group["initial_accumulator_value"]))) + g * g
        _keep(state, "sum", total)
        lr = float(group["lr"]) / (1 + (state["step"] - 1) * float(group["lr_decay"]))
        p.copy_(p32 - g / (total.sqrt() + float(group["eps"])) * lr)


class Adadelta(Optimizer):
    """``torch.optim.Adadelta``: steps scaled by the ratio of running RMS of updates and of
    gradients."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, *, maximize=False):
        _check_positive("rho", rho)
        _check_positive("eps", eps)
        if rho > 1:
            raise ValueError(f"invalid rho: {rho!r}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize))

    def _update(self, p, grad, group, state):
        p32 = p.float()
        g = _direction(p32, grad, group)
        rho, eps = float(group["rho"]), float(group["eps"])
        square = state.get("square_avg", zeros_like(p32)) * rho + g * g * (1 - rho)
        acc = state.get("acc_delta", zeros_like(p32))
        delta = (acc + eps).sqrt() / (square + eps).sqrt() * g
        _keep(state, "square_avg", square)
        _keep(state, "acc_delta", acc * rho + delta * delta * (1 - rho))
        p.copy_(p32 - delta * float(group["lr"]))
