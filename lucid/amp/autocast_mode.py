"""lucid.amp.autocast: mixed-precision scopes backed by the engine's thread-local AMP state."""

from __future__ import annotations

import enum
import functools
from threading import get_ident as _get_ident

import numpy as np

from .. import _engine as E
from .._types import _BY_CODE, _DEVICE_CODES, device_names, dtype as _dtype, dtype_from_code

# The engine's rules, read once: each device's default dtype and the dtypes it can target.
_DEFAULTS = {code: dtype_from_code(E.autocast_default_dtype(code)) for code in _DEVICE_CODES.values()}


def _targets(device_code):
    allowed = []
    for d in _BY_CODE:
        try:
            E.autocast_check_dtype(device_code, d.code)
            allowed.append(d)
        except ValueError:
            pass
    return frozenset(allowed)


_TARGETS = {code: _targets(code) for code in _DEVICE_CODES.values()}


def _device_code(device_type, allow_none=True) -> int:
    if device_type is None and allow_none:
        return -1
    if not isinstance(device_type, str) or device_type not in _DEVICE_CODES:
        raise ValueError(f"device_type must be {device_names()}, got {device_type!r}")
    return _DEVICE_CODES[device_type]


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """``True`` if autocast is on for `device_type` on this thread (for either device if None)."""
    return E.autocast_is_enabled(_device_code(device_type))


def is_autocast_available(device_type) -> bool:
    """Whether autocast can be used on `device_type`: ``True`` for ``"metal"`` and ``"cpu"``,
    ``False`` for any other device name."""
    if not isinstance(device_type, str):
        raise TypeError(f"device_type must be a str, got {device_type!r}")
    return device_type in _DEVICE_CODES


def is_autocast_cache_enabled() -> bool:
    """Whether this thread's autocast scopes cache the lower-precision casts of parameters
    (``True`` for a new thread)."""
    return E.autocast_is_cache_enabled()


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turns this thread's autocast weight cache on or off. Casts already cached stay until the
    outermost scope exits. ``autocast(cache_enabled=...)`` sets it for one scope."""
    if not isinstance(enabled, (bool, np.bool_)):
        raise TypeError(f"enabled must be a bool, got {enabled!r}")
    E.autocast_set_cache_enabled(bool(enabled))


def get_autocast_dtype(device_type: str | None = None):
    """The autocast dtype for `device_type` on this thread, or ``None`` when off there.

    Without a device: the dtype of the innermost scope that still switches autocast on, or
    ``None`` when autocast is off on both devices.
    """
    code = E.autocast_get_dtype(_device_code(device_type))
    return None if code < 0 else dtype_from_code(code)


class autocast:
    """Enable automatic mixed-precision computation inside a context.

    Operations that opt into AMP (matmul, linear, ...) cast their inputs to the target
    lower-precision dtype on entry; accumulators and reductions stay in float32. Leaving the
    scope restores exactly the state it was entered from — autocast off, or the enclosing
    scope's dtype — whether it is left normally or by an exception. One object can be
    entered again after it exits, entered while already active (each entry is undone by its
    own exit, on its own thread), and used as a decorator.

    Parameters
    ----------
    device_type : str, default 'metal'
        ``"metal"`` (GPU stream) or ``"cpu"`` (Accelerate stream); anything else raises
        ``ValueError``.
    dtype : lucid.dtype, optional
        ``None`` means ``lucid.float16``. On the CPU, float16 runs in float32, so a CPU scope
        with the default dtype changes nothing; pass ``dtype=lucid.bfloat16`` there.
        ``lucid.float32`` is accepted; other dtypes raise ``ValueError`` and non-dtypes
        ``TypeError``.
    enabled : bool, default True
        ``False`` disables autocast on `device_type` for the scope, leaving the other
        device's state untouched.
    cache_enabled : bool, optional
        Whether the scope caches the lower-precision cast of each parameter (a float32 leaf
        that requires gradients) and reuses it, as PyTorch does; the cache empties when the
        outermost scope exits. ``None`` keeps the thread's setting
        (:func:`is_autocast_cache_enabled`, on by default); ``False`` casts at every use.

    Examples
    --------
    >>> with lucid.amp.autocast():
    ...     output = model(x)            # ops cast to float16 inside
    """

    is_autocast_enabled = staticmethod(is_autocast_enabled)
    get_autocast_dtype = staticmethod(get_autocast_dtype)

    def __init__(self, device_type: str = "metal", dtype=None, enabled: bool = True, cache_enabled=None) -> None:
        code = _DEVICE_CODES.get(device_type) if type(device_type) is str else None
        if code is None:
            code = _device_code(device_type, allow_none=False)  # raises
        if dtype is None:
            dtype = _DEFAULTS[code]
        elif dtype not in _TARGETS[code]:
            if not isinstance(dtype, _dtype):
                raise TypeError(f"autocast dtype must be a lucid.dtype, got {dtype!r}")
            E.autocast_check_dtype(code, dtype.code)  # raises the engine's message
        if type(enabled) is not bool:
            if not isinstance(enabled, (int, np.bool_)):
                raise TypeError(f"enabled must be a bool, got {enabled!r}")
            enabled = bool(enabled)
        if cache_enabled is not None:
            if not isinstance(cache_enabled, (bool, np.bool_)):
                raise TypeError(f"cache_enabled must be a bool or None, got {cache_enabled!r}")
            cache_enabled = bool(cache_enabled)
        self._cache_enabled = cache_enabled
        self._device_type = device_type
        self._device_code = code
        self._dtype = dtype
        self._enabled = enabled
        self._codes = (code, 1 if enabled else 0, dtype.code)
        # Each thread's open entries of this object, innermost last, by thread: the engine
        # handles that thread's exits must release (and, with cache_enabled, the cache switch
        # each entry replaced). The AMP state itself lives in the engine.
        self._entries = {}

    @property
    def device_type(self) -> str:
        return self._device_type

    @property
    def dtype(self):
        return self._dtype

    @property
    def enabled(self) -> bool:
        return self._enabled

    @property
    def cache_enabled(self):
        return self._cache_enabled

    def __repr__(self):
        cache = "" if self._cache_enabled is None else f", cache_enabled={self._cache_enabled}"
        return f"autocast(device_type={self._device_type!r}, dtype={self._dtype!r}, enabled={self._enabled}{cache})"

    def __enter__(self):
        made = E.GuardSlot()
        thread = _get_ident()
        try:
            handle = E.guard_create(*self._codes, made)
            stack = self._entries.get(thread)
            if stack is None:
                stack = self._entries[thread] = []
            stack.append([handle, None])
        except BaseException:
            # An exception (a KeyboardInterrupt) landed after the engine entered the scope but
            # before __enter__ returned, so __exit__ will never run: leave the scope here
            # rather than keep autocast on for the rest of the thread.
            if made.handle:
                stack = self._entries.get(thread)
                if stack and stack[-1][0] == made.handle:
                    stack.pop()
                E.guard_destroy(made.handle)
            raise
        if self._cache_enabled is not None:
            # The thread's cache switch for this entry; its exit puts the previous one back.
            stack[-1][1] = E.autocast_set_cache_enabled(self._cache_enabled)
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> bool:
        thread = _get_ident()
        stack = self._entries.get(thread)
        if not stack:
            raise RuntimeError(
                f"{self!r}.__exit__ called on a thread that has not entered it (or has already left every entry)")
        # Leave the scope before forgetting its handle: an interrupt in between leaves a stale
        # handle rather than a live scope nobody can close. A stale handle on top belongs to
        # an exit that already left its scope, so this exit is for the entry below it; with
        # no entry below, the stale handle is a clear error.
        previous = stack[-1][1]
        if previous is not None:
            E.autocast_set_cache_enabled(previous)
        while True:
            try:
                E.guard_destroy(stack[-1][0])
            except ValueError:  # (not a live guard: the engine changed nothing)
                stack.pop()
                if not stack:
                    del self._entries[thread]
                    raise
                continue
            stack.pop()
            if not stack:
                del self._entries[thread]
            return False  # exceptions propagate

    def __call__(self, fn):
        """Use as a decorator: every call of `fn` runs inside this scope."""
        if not callable(fn):
            raise TypeError(f"autocast can decorate a callable, got {fn!r}")

        @functools.wraps(fn)
        def decorate_autocast(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return decorate_autocast


class CastPolicy(str, enum.Enum):
    """How autocast treats an op's floating-point inputs."""

    NONE = "none"                        #: keeps input dtypes
    LOWER_PRECISION = "lower_precision"  #: casts to the autocast dtype
    FLOAT32 = "float32"                  #: casts float16/bfloat16 inputs to float32
    PROMOTE = "promote"                  #: casts to the widest floating input

    def __repr__(self):
        return f"CastPolicy.{self.name}"


_POLICY_CODES = (CastPolicy.NONE, CastPolicy.LOWER_PRECISION, CastPolicy.FLOAT32, CastPolicy.PROMOTE)
_table_cache = None


def _table():
    global _table_cache
    if _table_cache is None:
        _table_cache = {name: (_POLICY_CODES[code], bf16) for name, code, bf16 in E.op_table()}
    return _table_cache


def policy(op_name: str) -> CastPolicy:
    """The autocast policy of the op called `op_name` (e.g. ``"matmul"``)."""
    if not isinstance(op_name, str):
        raise TypeError(f"op_name must be a str, got {op_name!r}")
    try:
        return _table()[op_name][0]
    except KeyError:
        raise ValueError(f"unknown op {op_name!r}; known ops: {', '.join(sorted(_table()))}") from None


def policies() -> dict:
    """Every op's autocast policy: ``{name: CastPolicy}``."""
    return {name: p for name, (p, _) in _table().items()}


def cpu_bfloat16_ops() -> frozenset:
    """Ops with a bfloat16 CPU kernel; the others run in float32 under CPU bfloat16 autocast."""
    return frozenset(name for name, (_, bf16) in _table().items() if bf16)
