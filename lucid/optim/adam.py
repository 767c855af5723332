from __future__ import annotations

from .. import _C
from .._ops.creation import tensor
from .._tensor import Tensor
from .._types import float32
from .optimizer import Optimizer, check_implementation_flags
from .._core import result as _result


class Adam(Optimizer):
    """Adam (PyTorch's update rule, without amsgrad). Each parameter's update is one engine call
    (so ``foreach`` and ``fused`` are accepted with nothing to choose). ``state["step"]`` is a
    float32 tensor on the parameter's device, as in PyTorch's fused Adam."""

    _decoupled = False

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0.0,
        *,
        maximize=False,
        foreach=None,
        fused=None,
    ):
        check_implementation_flags(foreach, fused)
        if not (isinstance(betas, (tuple, list)) and len(betas) == 2 and all(0 <= b < 1 for b in betas)):
            raise ValueError(f"invalid betas: {betas!r} (expected two numbers in [0, 1))")
        if eps < 0:
            raise ValueError(f"invalid eps: {eps}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, maximize=maximize))

    _skips_on_device = True

    def _update(self, p, grad, group, state, found_inf=None):
        step = state.get("step")
        if not isinstance(step, Tensor):  # the first step, or a count set as a number
            step = state["step"] = tensor(float(step or 0), dtype=float32, device=p.device)
        m, v = state.get("exp_avg"), state.get("exp_avg_sq")
        b1, b2 = group["betas"]
        made_m, made_v = _C.adam_step(
            p._h,
            grad._h,
            m._h if m is not None else 0,
            v._h if v is not None else 0,
            step._h,
            found_inf._h if found_inf is not None else 0,
            float(group["lr"]),
            float(b1),
            float(b2),
            float(group["eps"]),
            float(group["weight_decay"]),
            self._decoupled,
            bool(group["maximize"]),
        )
        if made_m:
            state["exp_avg"] = _result(made_m)
        if made_v:
            state["exp_avg_sq"] = _result(made_v)


class AdamW(Adam):
    """Adam with decoupled weight decay (default 0.01, as PyTorch's)."""

    _decoupled = True

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=1e-2,
        *,
        maximize=False,
        foreach=None,
        fused=None,
    ):
        super().__init__(
            params,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            maximize=maximize,
            foreach=foreach,
            fused=fused,
        )
