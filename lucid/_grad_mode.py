"""Grad mode: whether ops record the backward graph on the calling thread (kept in the engine)."""

from __future__ import annotations

import _thread
import functools

from . import _C

_set_raw = _C.set_grad_enabled_raw


def is_grad_enabled() -> bool:
    """``True`` when ops on this thread record the backward graph."""
    return _C.is_grad_enabled() != 0


class _Entries:
    """A thread's entered scopes, innermost last, each with the mode it replaced, and where
    the engine writes the mode a call replaces."""

    __slots__ = ("stack", "previous", "ref")

    def __init__(self):
        self.stack = []
        self.previous, self.ref = _C.mode_slot()


_threads = _thread._local()


def _entries() -> _Entries:
    try:
        return _threads.entries
    except AttributeError:
        here = _threads.entries = _Entries()
        return here


def _set(mode: bool, here: _Entries) -> bool:
    """Sets the calling thread's grad mode (`here` its entries); the mode it replaced."""
    rc = _set_raw(1 if mode else 0, here.ref)
    if rc:
        _C.raise_error(rc)
    return here.previous.value != 0


class _GradModeScope:
    """Sets grad mode for a ``with`` block or each call of a decorated function, and puts
    back the mode it replaced. Reusable, re-entrant and shareable across threads: each entry
    is kept, with the mode it replaced, on the entering thread."""

    __slots__ = ()
    _mode: bool

    def _entered(self, here: _Entries) -> bool:
        """Sets this scope's mode on entry; the mode it replaced."""
        return _set(self._mode, here)

    def __enter__(self):
        here = _entries()
        here.stack.append((self, self._entered(here)))
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> bool:
        try:
            stack = _threads.entries.stack
        except AttributeError:
            stack = ()
        if stack and stack[-1][0] is self:
            previous = stack.pop()[1]
        else:
            for i in range(len(stack) - 1, -1, -1):
                if stack[i][0] is self:
                    previous = stack.pop(i)[1]
                    break
            else:
                raise RuntimeError(f"{type(self).__name__}.__exit__ called on a thread that has not entered it")
        rc = _set_raw(1 if previous else 0, None)
        if rc:
            _C.raise_error(rc)
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

    __slots__ = ()
    _mode = False


class enable_grad(_GradModeScope):
    """Ops inside record the backward graph, even within ``no_grad``."""

    __slots__ = ()
    _mode = True


class inference_mode(_GradModeScope):
    """As PyTorch's ``inference_mode``: ops inside record no backward graph (``no_grad``).
    lucid has no separate inference tensors, so a tensor made inside may take part in
    autograd later. ``inference_mode(False)`` leaves grad mode as it is."""

    __slots__ = ("_inference",)

    def __init__(self, mode: bool = True):
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode expects a bool, got {mode!r}")
        self._inference = mode

    def _entered(self, here: _Entries) -> bool:
        return _set(False, here) if self._inference else is_grad_enabled()


class set_grad_enabled(_GradModeScope):
    """Sets grad mode to `mode` at once; used with ``with``, the previous mode comes back on exit."""

    __slots__ = ("_mode", "_previous")

    def __init__(self, mode: bool):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled expects a bool, got {mode!r}")
        self._mode = mode
        self._previous = _set(mode, _entries())

    def _entered(self, here: _Entries) -> bool:
        return self._previous
