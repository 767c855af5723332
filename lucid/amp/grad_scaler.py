"""lucid.amp.GradScaler: dynamic loss scaling for float16 training."""

from __future__ import annotations

import numbers

from .. import _C
from .._ops.creation import full
from .._tensor import Tensor
from .._types import _DEVICE_CODES, device_names, float32, int32
from . import inspect as _inspect
from ..optim.optimizer import Optimizer

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


def _agree_over_ranks(found_inf: Tensor) -> None:
    """Or's the found-inf flag over the ranks of an initialised lucid.distributed group, in
    place (the host reads it: the ranks agree through it)."""
    from .. import distributed

    if not distributed.is_initialized() or distributed.get_world_size() == 1:
        return
    found = distributed._any(bool(found_inf.item()), "GradScaler.unscale_: agreeing whether a rank found inf or NaN")
    found_inf.fill_(1.0 if found else 0.0)


class GradScaler:
    """Scales the loss so that float16 gradients do not underflow, unscales them before the
    optimizer step, skips steps whose gradients hold an infinity or NaN, and adapts the scale.

    The scale, the growth tracker and each step's found-inf flag are tensors of the scaler's
    device, as in PyTorch: unscaling, skipping and updating run there, and a training step
    never waits for the host to read them. SGD and Adam/AdamW skip a step on the device; with
    other optimizers ``step`` reads the flag (one wait). ``get_scale()`` reads the scale.

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

    def __init__(
        self,
        device: str = "metal",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ):
        if not isinstance(device, str) or device not in _DEVICE_CODES:
            raise ValueError(f"device must be {device_names()}, got {device!r}")
        for name, v in (
            ("init_scale", init_scale),
            ("growth_factor", growth_factor),
            ("backoff_factor", backoff_factor),
        ):
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
        self._init_scale = float(init_scale)
        self._init_growth_tracker = 0
        self._scale = None  # made on the device at first use, with the growth tracker
        self._growth_tracker = None
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._per_optimizer: dict = {}  # id(optimizer) -> {"stage": ..., "found_inf": flag tensor}

    def _lazy_init(self):
        if self._scale is None:
            self._scale = full((), self._init_scale, dtype=float32, device=self._device)
            self._growth_tracker = full((), self._init_growth_tracker, dtype=int32, device=self._device)
        return self._scale

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled); reads it from the device."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

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
            return outputs * self._lazy_init()
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"scale() expects a tensor or an iterable of tensors, got {type(outputs).__name__}")

    def _state(self, optimizer) -> dict:
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": None})

    def unscale_(self, optimizer) -> None:
        """Divides the optimizer's gradients by the scale (in float32, in the engine, on the
        device) and records in a flag on the device whether any is infinite or NaN. At most once
        per optimizer between updates.

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
        params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        grads = [p.grad for p in params]
        inv_scale = 1.0 / self._lazy_init()
        found = full((), 0.0, dtype=float32, device=self._device)
        if _inspect._thread.live:
            # The engine's check, one flag per gradient (on the device, read when the inspection
            # ends), so that a skipped step can name the parameters behind it.
            flags = []
            for g in grads:
                flag = full((), 0.0, dtype=float32, device=self._device)
                _C.unscale_grads([g._h], inv_scale._h, flag._h)
                flags.append(flag)
                found.add_(flag)
            found.clamp_(max=1.0)  # 1 when any was, as the one call sets it
            state["nonfinite"] = list(zip(params, flags))
        else:
            _C.unscale_grads([g._h for g in grads], inv_scale._h, found._h)
        _agree_over_ranks(found)
        state["found_inf"] = found
        state["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscales (if not done yet) and runs ``optimizer.step``, unless a gradient holds an
        infinity or NaN: then the step is skipped and ``None`` returned. SGD and Adam/AdamW
        skip on the device (``None`` is returned either way); other optimizers, and a step
        given arguments, read the flag first."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        state["stage"] = _STEPPED
        found = state["found_inf"]
        skips_on_device = isinstance(optimizer, Optimizer) and optimizer._skips_on_device
        if skips_on_device and not args and not kwargs and type(optimizer).step is Optimizer.step:
            return optimizer._step(found_inf=found)
        if found.item():
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None) -> None:
        """Adjusts the scale on the device: backs off after a skipped step, grows after
        `growth_interval` clean ones; or sets `new_scale` (a number or a one-element float32
        tensor)."""
        if not self._enabled:
            return
        scale = self._lazy_init()
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1 or new_scale.dtype != float32:
                    raise ValueError(
                        f"new_scale must be a one-element float32 tensor, got {new_scale.dtype} of "
                        f"shape {tuple(new_scale.shape)}"
                    )
                scale.copy_(new_scale.reshape(()))
            elif not isinstance(new_scale, numbers.Real) or isinstance(new_scale, bool) or not new_scale > 0:
                raise ValueError(f"new_scale must be a positive number, got {new_scale!r}")
            else:
                scale.fill_(float(new_scale))
        else:
            found = [s["found_inf"] for s in self._per_optimizer.values() if s["found_inf"] is not None]
            if not found:
                raise RuntimeError("No inf checks were recorded prior to update(): call step() or unscale_() first.")
            combined = found[0]
            for f in found[1:]:
                combined = combined + f
            if _inspect._thread.live:
                flags = [pair for s in self._per_optimizer.values() for pair in s.get("nonfinite", ())]
                _inspect._scaler_step(scale.clone(), combined.clone(), flags)
            _C.update_scale(
                scale._h,
                self._growth_tracker._h,
                combined._h,
                self._growth_factor,
                self._backoff_factor,
                self._growth_interval,
            )
        self._per_optimizer = {}

    def _get_growth_tracker(self) -> int:
        return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())

    def state_dict(self) -> dict:
        """The scaler's state, read from the device."""
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._get_growth_tracker(),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError("the state dict is empty: it was saved from a disabled GradScaler")
        self._init_scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._scale is not None:
            self._scale.fill_(self._init_scale)
            self._growth_tracker.fill_(self._init_growth_tracker)
