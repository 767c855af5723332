from __future__ import annotations

from .. import _C
from .optimizer import Optimizer, check_implementation_flags
from .._core import result as _result


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, Nesterov momentum and weight decay
    (PyTorch's update rule). Each parameter's update is one engine call (so ``foreach`` and
    ``fused`` are accepted with nothing to choose)."""

    def __init__(
        self,
        params,
        lr=1e-3,
        momentum=0.0,
        dampening=0.0,
        weight_decay=0.0,
        nesterov=False,
        *,
        maximize=False,
        foreach=None,
        fused=None,
    ):
        check_implementation_flags(foreach, fused)
        if momentum < 0:
            raise ValueError(f"invalid momentum: {momentum}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(
            params,
            dict(
                lr=lr,
                momentum=momentum,
                dampening=dampening,
                weight_decay=weight_decay,
                nesterov=nesterov,
                maximize=maximize,
            ),
        )

    _skips_on_device = True

    def _update(self, p, grad, group, state, found_inf=None):
        buf = state.get("momentum_buffer")
        made = _C.sgd_step(
            p._h,
            grad._h,
            buf._h if buf is not None else 0,
            found_inf._h if found_inf is not None else 0,
            float(group["lr"]),
            float(group["momentum"]),
            float(group["dampening"]),
            float(group["weight_decay"]),
            bool(group["nesterov"]),
            bool(group["maximize"]),
        )
        if made:
            state["momentum_buffer"] = _result(made)
