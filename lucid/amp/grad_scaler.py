"""lucid.amp.GradScaler: dynamic loss scaling for float16 training."""

from __future__ import annotations

import numbers

from .. import _engine as E
from .._tensor import Tensor
from .._types import _DEVICE_CODES, device_names

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"
_FLOAT32_MAX = 3.4028234663852886e38


def _on_any_rank(found_inf: bool) -> bool:
    """`found_inf`, or'ed over the ranks of an initialised lucid.distributed group."""
    from .. import distributed
    if not distributed.is_initialized() or distributed.get_world_size() == 1:
        return found_inf
    return distributed._any(found_inf, "GradScaler.unscale_: agreeing whether a rank found inf or NaN")


class GradScaler:
    """Scales the loss so that float16 gradients do not underflow, unscales them before the
    optimizer step, skips steps whose gradients hold an infinity or NaN, and adapts the scale.

    Parameters
    ----------
    device : str, default 'metal'
        ``"metal"`` or ``"cpu"``.
    init_scale : float, default 2.**16
    growth_factor : float, default 2.0
        Multiplies the scale after `growth_interval` consecutive steps without inf/NaN,
        unless that would take it past the float32 range.
    backoff_factor : float, default 0.5
        Multiplies the scale after a step with inf/NaN gradients (which is skipped).
    growth_interval : int, default 2000
    enabled : bool, default True
        ``False`` makes every method a pass-through.

    Examples
    --------
    >>> scaler = lucid.amp.GradScaler()
    >>> with lucid.amp.autocast():
    ...     loss = loss_fn(model(x), y)
    >>> scaler.scale(loss).backward()
    >>> scaler.step(optimizer)
    >>> scaler.update()
    """

    def __init__(self, device: str = "metal", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        if not isinstance(device, str) or device not in _DEVICE_CODES:
            raise ValueError(f"device must be {device_names()}, got {device!r}")
        for name, v in (("init_scale", init_scale), ("growth_factor", growth_factor), ("backoff_factor", backoff_factor)):
            if not isinstance(v, numbers.Real) or isinstance(v, bool) or not v > 0:
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        if growth_factor <= 1.0:
            raise ValueError(f"growth_factor must be > 1.0, got {growth_factor}")
        if backoff_factor >= 1.0:
            raise ValueError(f"backoff_factor must be < 1.0, got {backoff_factor}")
        if not isinstance(growth_interval, int) or isinstance(growth_interval, bool) or growth_interval <= 0:
            raise ValueError(f"growth_interval must be a positive int, got {growth_interval!r}")
        self._device = device
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._per_optimizer: dict = {}  # id(optimizer) -> {"stage": ..., "found_inf": bool}

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def scale(self, outputs):
        """`outputs` (a tensor, or nested lists/tuples of them) multiplied by the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if outputs.device.type != self._device:
                raise ValueError(f"GradScaler(device={self._device!r}) cannot scale a tensor on {outputs.device}")
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"scale() expects a tensor or an iterable of tensors, got {type(outputs).__name__}")

    def _state(self, optimizer) -> dict:
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": False})

    def unscale_(self, optimizer) -> None:
        """Divides the optimizer's gradients by the scale (in float32, in the engine) and records
        whether any is infinite or NaN. At most once per optimizer between updates.

        When ``lucid.distributed`` is initialised with more than one rank, whether any rank
        found an infinity or NaN is agreed over the ranks, so that every rank skips the same
        steps and keeps the same scale: this call is then collective, and every rank must make
        it (``step`` makes it when ``unscale_`` was not called)."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        params = [p for g in optimizer.param_groups for p in g["params"]]
        grads = [(p, p.grad) for p in params]
        grads = [(p, g) for p, g in grads if g is not None]
        found = E.unscale_grads([g._h for _, g in grads], 1.0 / self._scale)
        state["found_inf"] = _on_any_rank(found)
        state["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscales (if not done yet) and runs ``optimizer.step``, unless a gradient holds an
        infinity or NaN: then the step is skipped and ``None`` returned."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        state["stage"] = _STEPPED
        if state["found_inf"]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None) -> None:
        """Adjusts the scale: backs off after a skipped step, grows after `growth_interval`
        clean ones; or sets `new_scale` (a number or a one-element tensor)."""
        if not self._enabled:
            return
        if new_scale is not None:
            value = new_scale.item() if isinstance(new_scale, Tensor) else new_scale
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or not value > 0:
                raise ValueError(f"new_scale must be a positive number, got {new_scale!r}")
            self._scale = float(value)
        else:
            if not self._per_optimizer:
                raise RuntimeError("No inf checks were recorded prior to update(): call step() or unscale_() first.")
            if any(s["found_inf"] for s in self._per_optimizer.values()):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    # As torch.amp does with its float32 scale: no growth past the float32
                    # range, where scaling would turn every loss into inf.
                    grown = self._scale * self._growth_factor
                    if grown <= _FLOAT32_MAX:
                        self._scale = grown
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError("the state dict is empty: it was saved from a disabled GradScaler")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
