"""clip_grad_norm_ and clip_grad_value_, computed with engine ops."""

from __future__ import annotations

import math

from ..._ops.creation import tensor
from ..._ops.shape import stack
from ..._tensor import Tensor
from ..._grad_mode import no_grad


def _grads(parameters):
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"parameters must be lucid tensors, got {type(p).__name__}")
    return [p for p in params if p.grad is not None]


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False) -> Tensor:
    """Scales the gradients of ``parameters`` so that their joint ``norm_type``-norm is at most
    ``max_norm`` (coefficient ``max_norm / (norm + 1e-6)``, applied only when below 1).

    Returns the total norm before clipping as a 0-d float32 tensor. Call
    ``GradScaler.unscale_(optimizer)`` first when training with loss scaling.
    """
    max_norm, norm_type = float(max_norm), float(norm_type)
    if norm_type <= 0 and norm_type != -math.inf:
        raise ValueError(f"norm_type must be positive or inf, got {norm_type}")
    params = _grads(parameters)
    if not params:
        return tensor(0.0)
    with no_grad():
        grads = [p.grad.float() for p in params]
        if math.isinf(norm_type):
            total = stack([g.abs().amax() for g in grads]).amax()
        else:
            total = stack([(g.abs() ** norm_type).sum() for g in grads]).sum() ** (1.0 / norm_type)
        value = total.item()
        if error_if_nonfinite and not math.isfinite(value):
            raise RuntimeError(
                f"the total norm of order {norm_type} of the gradients is non-finite ({value}), "
                "so it cannot be clipped; pass error_if_nonfinite=False to clip anyway"
            )
        coef = max_norm / (value + 1e-6)
        if coef < 1.0:  # in place: each gradient stays the tensor the program may hold
            for p in params:
                p.grad.mul_(coef)
    return total


def clip_grad_value_(parameters, clip_value: float) -> None:
    """Clamps every gradient of ``parameters`` to ``[-clip_value, clip_value]``."""
    clip_value = float(clip_value)
    if clip_value < 0:
        raise ValueError(f"clip_value must be non-negative, got {clip_value}")
    with no_grad():
        for p in _grads(parameters):
            p.grad.clamp_(-clip_value, clip_value)
