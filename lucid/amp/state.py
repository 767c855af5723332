"""Autocast state that follows work into other threads.

Autocast state is per OS thread (as in PyTorch), so work handed to a worker thread (a thread
pool, a prefetch thread, a data-parallel helper) runs with autocast off unless it is told
otherwise. ``autocast_state()`` captures the calling thread's state; entering it in any thread
applies it there, and leaving it restores that thread's own state. ``propagate(fn)`` wraps a
callable so that it runs under the state of the thread that wrapped it.
"""

from __future__ import annotations

import functools
import threading

from .. import _C
from .._types import dtype_from_code, float16
from .autocast_mode import _DEVICE_CODES


class autocast_state:
    """The calling thread's autocast state, captured when this object is made: whether
    autocast is on and its dtype on each device, and the weight-cache switch.

    Use it as a context manager in any thread, as many times and in as many threads at once as
    needed: inside, that thread's autocast state is the captured one (scopes opened inside nest
    as usual); on exit, the thread's own state comes back, also on an exception.

    Examples
    --------
    >>> with lucid.amp.autocast(dtype=lucid.bfloat16):
    ...     state = lucid.amp.autocast_state()
    >>> def work():
    ...     with state:
    ...         return (a @ b).dtype
    >>> pool.submit(work).result()
    lucid.bfloat16
    """

    def __init__(self) -> None:
        settings = []
        for code in sorted(_DEVICE_CODES.values()):
            dtype = _C.autocast_get_dtype(code)
            settings.append((code, 1 if _C.autocast_is_enabled(code) else 0, dtype if dtype >= 0 else float16.code))
        self._settings = tuple(settings)
        self._cache_enabled = _C.autocast_is_cache_enabled() != 0
        self._local = threading.local()

    def enabled(self, device_type: str) -> bool:
        """Whether the captured state has autocast on for `device_type`."""
        return bool(self._settings[_DEVICE_CODES[device_type]][1])

    def dtype(self, device_type: str):
        """The captured autocast dtype of `device_type`, or ``None`` where it is off."""
        code, enabled, dtype = self._settings[_DEVICE_CODES[device_type]]
        return dtype_from_code(dtype) if enabled else None

    def __repr__(self):
        names = sorted(_DEVICE_CODES, key=_DEVICE_CODES.get)
        parts = [f"{name}={self.dtype(name)!r}" if self.enabled(name) else f"{name}=off" for name in names]
        return f"autocast_state({', '.join(parts)}, cache_enabled={self._cache_enabled})"

    def __enter__(self):
        handles = []
        try:
            for code, enabled, dtype in self._settings:
                slot = _C.GuardSlot()
                try:
                    _C.guard_create(code, enabled, dtype, slot)
                finally:
                    if slot.handle:
                        handles.append(slot.handle)
            previous = _C.autocast_set_cache_enabled(self._cache_enabled) != 0
        except BaseException:
            for h in reversed(handles):
                _C.guard_destroy(h)
            raise
        try:
            self._local.entries.append((handles, previous))
        except AttributeError:
            self._local.entries = [(handles, previous)]
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> bool:
        entries = getattr(self._local, "entries", None)
        if not entries:
            raise RuntimeError(f"{self!r}.__exit__ called on a thread that has not entered it")
        handles, previous = entries.pop()
        _C.autocast_set_cache_enabled(previous)
        for h in reversed(handles):
            _C.guard_destroy(h)
        return False


def propagate(fn):
    """`fn` wrapped to run under the autocast state of the thread calling ``propagate`` now,
    wherever and however often it is called later (see :class:`autocast_state`)."""
    if not callable(fn):
        raise TypeError(f"propagate takes a callable, got {fn!r}")
    state = autocast_state()

    @functools.wraps(fn)
    def run_with_captured_autocast(*args, **kwargs):
        with state:
            return fn(*args, **kwargs)

    run_with_captured_autocast.autocast_state = state
    return run_with_captured_autocast
