"""Grad mode: whether ops record the backward graph on the calling thread (kept in the engine)."""

from __future__ import annotations

import functools
import threading

from . import _C


def is_grad_enabled() -> bool:
    """``True`` when ops on this thread record the backward graph."""
    return _C.is_grad_enabled() != 0


class _GradModeScope:
    """Sets grad mode for a ``with`` block or each call of a decorated function, and puts
    back the mode it replaced. Reusable, re-entrant and shareable across threads."""

    _mode: bool

    def __init__(self):
        self._local = threading.local()

    def __enter__(self):
        self._local.__dict__.setdefault("stack", []).append(_C.set_grad_enabled(self._mode) != 0)
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> bool:
        stack = self._local.__dict__.get("stack")
        if not stack:
            raise RuntimeError(f"{type(self).__name__}.__exit__ called on a thread that has not entered it")
        _C.set_grad_enabled(stack.pop())
        return False

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"{type(self).__name__} can decorate a callable, got {fn!r}")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradModeScope):
    """Ops inside do not record the backward graph (inference, parameter updates)."""

    _mode = False


class enable_grad(_GradModeScope):
    """Ops inside record the backward graph, even within ``no_grad``."""

    _mode = True


class inference_mode(_GradModeScope):
    """As PyTorch's ``inference_mode``: ops inside record no backward graph (``no_grad``).
    lucid has no separate inference tensors, so a tensor made inside may take part in
    autograd later. ``inference_mode(False)`` leaves grad mode as it is."""

    def __init__(self, mode: bool = True):
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode expects a bool, got {mode!r}")
        super().__init__()
        self._inference = mode

    def __enter__(self):
        mode = False if self._inference else _C.is_grad_enabled() != 0
        self._local.__dict__.setdefault("stack", []).append(_C.set_grad_enabled(mode) != 0)
        return self


class set_grad_enabled(_GradModeScope):
    """Sets grad mode to `mode` at once; used with ``with``, the previous mode comes back on exit."""

    def __init__(self, mode: bool):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled expects a bool, got {mode!r}")
        super().__init__()
        self._mode = mode
        self._previous = _C.set_grad_enabled(mode) != 0

    def __enter__(self):
        self._local.__dict__.setdefault("stack", []).append(self._previous)
        return self
