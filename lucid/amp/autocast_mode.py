"""lucid.amp.autocast: mixed-precision scopes backed by the engine's thread-local AMP state."""

from __future__ import annotations

import _thread
import enum
import functools

import numpy as np

from .. import _C
from .._types import _BY_CODE, _DEVICE_CODES, device_names, dtype as _dtype, dtype_from_code

# The guard entry points, called directly by __enter__ and __exit__ (their status checked there).
_guard_create = _C.guard_create_raw
_guard_destroy = _C.guard_destroy_raw

# The engine's rules, read once: each device's default dtype and the dtypes it can target.
_DEFAULTS = {code: dtype_from_code(_C.autocast_default_dtype(code)) for code in _DEVICE_CODES.values()}


def _targets(device_code):
    allowed = []
    for d in _BY_CODE:
        try:
            _C.autocast_check_dtype(device_code, d.code)
            allowed.append(d)
        except ValueError:
            pass
    return frozenset(allowed)


_TARGETS = {code: _targets(code) for code in _DEVICE_CODES.values()}


class _ThreadEntries:
    """One thread's open autocast entries, innermost last: ``(scope, slot, previous, pair)``.
    `slot` is the GuardSlot the engine wrote that entry's handle into, read even when an
    exception (a KeyboardInterrupt) lands before ``guard_create`` returns, and handed to
    ``guard_destroy`` as it is by the entry's exit; `previous` is, for a scope with
    ``cache_enabled``, the cache switch it replaced (else None). The AMP state itself lives
    in the engine; this is only what Python must release.

    Slots are reused: `free` holds the ``(slot, pointer)`` pairs (from ``_C.guard_slot()``)
    of entries left normally. A reused slot still holds the handle of an entry already left,
    which the engine never hands out again."""

    __slots__ = ("entries", "free")

    def __init__(self):
        self.entries = []
        self.free = []


_threads = _thread._local()


def _entries_here() -> _ThreadEntries:
    try:
        return _threads.state
    except AttributeError:
        here = _threads.state = _ThreadEntries()
        return here


def _device_code(device_type, allow_none=True) -> int:
    if device_type is None and allow_none:
        return -1
    if not isinstance(device_type, str) or device_type not in _DEVICE_CODES:
        raise ValueError(f"device_type must be {device_names()}, got {device_type!r}")
    return _DEVICE_CODES[device_type]


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """``True`` if autocast is on for `device_type` on this thread (for either device if None)."""
    return _C.autocast_is_enabled(_device_code(device_type)) != 0


def is_autocast_available(device_type) -> bool:
    """Whether autocast can be used on `device_type`: ``True`` for ``"metal"`` and ``"cpu"``,
    ``False`` for any other device name."""
    if not isinstance(device_type, str):
        raise TypeError(f"device_type must be a str, got {device_type!r}")
    return device_type in _DEVICE_CODES


def is_autocast_cache_enabled() -> bool:
    """Whether this thread's autocast scopes cache the lower-precision casts of parameters
    (``True`` for a new thread)."""
    return _C.autocast_is_cache_enabled() != 0


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turns this thread's autocast weight cache on or off. Casts already cached stay until the
    outermost scope exits. ``autocast(cache_enabled=...)`` sets it for one scope."""
    if not isinstance(enabled, (bool, np.bool_)):
        raise TypeError(f"enabled must be a bool, got {enabled!r}")
    _C.autocast_set_cache_enabled(bool(enabled))


def get_autocast_dtype(device_type: str | None = None):
    """The autocast dtype for `device_type` on this thread, or ``None`` when off there.

    Without a device: the dtype of the innermost scope that still switches autocast on, or
    ``None`` when autocast is off on both devices.
    """
    code = _C.autocast_get_dtype(_device_code(device_type))
    return None if code < 0 else dtype_from_code(code)


def _innermost(entries, scope, i, stale=False) -> int:
    """The index of `scope`'s innermost entry at or below `i`; raises when there is none (the
    exception being handled, for a `stale` handle)."""
    while i >= 0 and entries[i][0] is not scope:
        i -= 1
    if i < 0:
        if stale:
            raise
        raise RuntimeError(
            f"{scope!r}.__exit__ called on a thread that has not entered it (or has already left every entry)"
        )
    return i


def _left_stale(entries, scope, rc, i) -> bool:
    """An exit's engine call failed with `rc`. A stale handle (ValueError: the engine changed
    nothing) belongs to an exit that already left its scope, so this exit is for `scope`'s
    entry at or below `i`; with no entry there, the stale handle is the error raised."""
    while True:
        try:
            _C.raise_error(rc)
        except ValueError:
            i = _innermost(entries, scope, i, stale=True)
        rc = _guard_destroy(entries[i][1])
        del entries[i]
        if not rc:
            return False  # exceptions propagate
        i -= 1


# (device_type, dtype, enabled) -> the fields of a scope made with those plain arguments.
_made = {}


def _fields(device_type, dtype, enabled, cache_enabled, overrides) -> tuple:
    """autocast's arguments checked, as a scope's fields: ((device code, enabled 0/1, dtype
    code), override codes, cache switch or None, device_type, dtype, enabled)."""
    code = _DEVICE_CODES.get(device_type) if type(device_type) is str else None
    if code is None:
        code = _device_code(device_type, allow_none=False)  # raises
    if dtype is None:
        dtype = _DEFAULTS[code]
    elif dtype not in _TARGETS[code]:
        if not isinstance(dtype, _dtype):
            raise TypeError(f"autocast dtype must be a lucid.dtype, got {dtype!r}")
        _C.autocast_check_dtype(code, dtype.code)  # raises the engine's message
    if type(enabled) is not bool:
        if not isinstance(enabled, (int, np.bool_)):
            raise TypeError(f"enabled must be a bool, got {enabled!r}")
        enabled = bool(enabled)
    if cache_enabled is not None:
        if not isinstance(cache_enabled, (bool, np.bool_)):
            raise TypeError(f"cache_enabled must be a bool or None, got {cache_enabled!r}")
        cache_enabled = bool(cache_enabled)
    codes = (code, 1 if enabled else 0, dtype.code)
    return (codes, _override_codes(overrides), cache_enabled, device_type, dtype, enabled)


class autocast:
    """Enable automatic mixed-precision computation inside a context.

    Operations that opt into AMP (matmul, linear, ...) cast their inputs to the target
    lower-precision dtype on entry; accumulators and reductions stay in float32. Leaving the
    scope restores exactly the state it was entered from — autocast off, or the enclosing
    scope's dtype — whether it is left normally or by an exception. One object can be
    entered again after it exits, entered while already active (each entry is undone by its
    own exit, on its own thread), and used as a decorator. Every call makes a new object;
    its settings cannot be changed, and its entries live in the calling thread's state.

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
    overrides : dict, optional
        Changes the policy of named ops for this scope: ``{"softmax": "lower", "layer_norm":
        "float32", "matmul": "float32"}``. A policy is ``"lower"`` (cast to the scope's dtype),
        ``"float32"``, ``"promote"`` (to the widest floating input) or ``"none"`` (keep the
        inputs' dtypes), or a :class:`CastPolicy`. The overrides hold for ops on
        `device_type` while the scope is live, in the engine's per-thread state; nested
        scopes compose, an inner scope's override of an op winning. :func:`policies` shows the
        table in force. An unknown op or policy raises ``ValueError``; so does, on entering
        the scope, an override of an op with no precision of its own (the views and ``to``,
        :attr:`CastPolicy.VIEW` in the table) or ``"lower"`` for an op without float16 and
        bfloat16 kernels (the LAPACK decompositions).

    Examples
    --------
    >>> with lucid.amp.autocast():
    ...     output = model(x)            # ops cast to float16 inside
    """

    is_autocast_enabled = staticmethod(is_autocast_enabled)
    get_autocast_dtype = staticmethod(get_autocast_dtype)

    # One field: the checked arguments (see `_fields`). Calls with the same plain arguments
    # share that tuple, checked once, so ``with autocast(...)`` written inline costs a dict
    # lookup and a new object; every call still makes a new object, as in PyTorch, so an
    # exit can only leave scopes its own object entered.
    __slots__ = ("_fields",)

    def __init__(
        self, device_type: str = "metal", dtype=None, enabled: bool = True, cache_enabled=None, overrides=None
    ) -> None:
        key = None
        if cache_enabled is None and overrides is None and (enabled is True or enabled is False):
            key = (device_type, dtype, enabled)
            try:
                self._fields = _made[key]
                return
            except KeyError:
                pass
            except TypeError:  # unhashable: the checks say what is wrong
                key = None
        fields = self._fields = _fields(device_type, dtype, enabled, cache_enabled, overrides)
        if key is not None and type(device_type) is str and len(_made) < 64:
            _made[key] = fields

    @property
    def device_type(self) -> str:
        return self._fields[3]

    @property
    def dtype(self):
        return self._fields[4]

    @property
    def enabled(self) -> bool:
        return self._fields[5]

    @property
    def cache_enabled(self):
        return self._fields[2]

    @property
    def overrides(self) -> dict:
        """The ops whose policy this scope changes: ``{name: CastPolicy}``."""
        return {op: _POLICY_CODES[code] for op, code in self._fields[1]}

    def __repr__(self):
        _, overrides, cache, device_type, dtype, enabled = self._fields
        cache = "" if cache is None else f", cache_enabled={cache}"
        overrides = "" if not overrides else f", overrides={ {k: v.value for k, v in self.overrides.items()} }"
        return f"autocast(device_type={device_type!r}, dtype={dtype!r}, enabled={enabled}{cache}{overrides})"

    def __enter__(self):
        try:
            here = _threads.state
        except AttributeError:
            here = _entries_here()
        try:
            pair = here.free.pop()
        except IndexError:
            pair = _C.guard_slot()
        slot, ref = pair
        fields = self._fields
        device, enabled, dtype = fields[0]
        try:
            rc = _guard_create(device, enabled, dtype, ref)
            if rc:
                _C.raise_error(rc)
            here.entries.append((self, slot, None, pair))
            for op, code in fields[1]:
                _C.autocast_override(slot.value, op, code)
        except BaseException:
            # An exception (a KeyboardInterrupt) may have landed after the engine entered the
            # scope but before __enter__ returned, so __exit__ will never run: leave the scope
            # here rather than keep autocast on for the rest of the thread. When the engine
            # wrote no new handle, the slot holds an old one already left (or none), and
            # releasing it again is a stale-handle error that changes nothing: ignored.
            entries = here.entries
            if entries and entries[-1][1] is slot:
                entries.pop()
            _guard_destroy(slot)
            raise
        if fields[2] is not None:
            # The thread's cache switch for this entry; its exit puts the previous one back.
            here.entries[-1] = (self, slot, _C.autocast_set_cache_enabled(fields[2]) != 0, pair)
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> bool:
        try:
            here = _threads.state
            entries = here.entries
            entry = entries[-1]
        except (AttributeError, IndexError):
            entries = entry = ()
        # The common case first: this object's entry is the innermost, without a cache switch.
        if entry and entry[0] is self and entry[2] is None:
            rc = _guard_destroy(entry[1])
            del entries[-1]
            if not rc:
                here.free.append(entry[3])
                return False  # exceptions propagate
            return _left_stale(entries, self, rc, len(entries) - 1)
        i = len(entries) - 1
        if not entry or entry[0] is not self:
            i = _innermost(entries, self, i - 1)
            entry = entries[i]
        # Leave the scope before forgetting its handle: an interrupt in between leaves a stale
        # handle rather than a live scope nobody can close.
        if entry[2] is not None:
            _C.autocast_set_cache_enabled(entry[2])
        rc = _guard_destroy(entry[1])
        del entries[i]
        if not rc:
            here.free.append(entry[3])
            return False
        return _left_stale(entries, self, rc, i - 1)

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

    NONE = "none"  #: keeps input dtypes
    LOWER_PRECISION = "lower_precision"  #: casts to the autocast dtype
    FLOAT32 = "float32"  #: casts float16/bfloat16 inputs to float32
    PROMOTE = "promote"  #: casts to the widest floating input
    VIEW = "view"  #: no precision of its own (views, ``to``): takes no override

    def __repr__(self):
        return f"CastPolicy.{self.name}"


_POLICY_CODES = (CastPolicy.NONE, CastPolicy.LOWER_PRECISION, CastPolicy.FLOAT32, CastPolicy.PROMOTE, CastPolicy.VIEW)
# The names an override may give a policy by.
_POLICY_NAMES = {"lower": 1, "lower_precision": 1, "float32": 2, "promote": 3, "none": 0}
_table_cache = None


def _override_codes(overrides) -> tuple:
    """autocast's `overrides` checked: ((op name, LUCID_POLICY_* code), ...)."""
    if overrides is None:
        return ()
    if not isinstance(overrides, dict):
        raise TypeError(f"overrides must be a dict from op names to policies, got {overrides!r}")
    table = _table()
    codes = []
    for op, chosen in overrides.items():
        if op not in table:
            raise ValueError(f"autocast overrides: unknown op {op!r}; known ops: {', '.join(sorted(table))}")
        key = chosen.value if isinstance(chosen, CastPolicy) else chosen
        if not isinstance(key, str) or key not in _POLICY_NAMES:
            raise ValueError(
                f"autocast overrides: the policy for {op!r} must be 'lower', 'float32', 'promote' or "
                f"'none', got {chosen!r}"
            )
        codes.append((op, _POLICY_NAMES[key]))
    return tuple(codes)


def _table():
    global _table_cache
    if _table_cache is None:
        _table_cache = {name: (_POLICY_CODES[code], bf16 != 0) for name, code, bf16 in _C.op_table()}
    return _table_cache


def policy(op_name: str) -> CastPolicy:
    """The autocast policy of the op called `op_name` (e.g. ``"matmul"``)."""
    if not isinstance(op_name, str):
        raise TypeError(f"op_name must be a str, got {op_name!r}")
    try:
        return _table()[op_name][0]
    except KeyError:
        raise ValueError(f"unknown op {op_name!r}; known ops: {', '.join(sorted(_table()))}") from None


def cast_floating_args(args, kwargs, dtype):
    """`args` and `kwargs` with their floating tensors cast to `dtype` (``custom_fwd``'s
    ``cast_inputs`` and a module's ``autocast_policy``)."""
    from .._tensor import Tensor

    def cast(v):
        return v.to(dtype) if isinstance(v, Tensor) and v.dtype.is_floating_point else v

    return tuple(cast(a) for a in args), {k: cast(v) for k, v in kwargs.items()}


def policies(device_type: str | None = None) -> dict:
    """Every op's autocast policy in force on this thread: ``{name: CastPolicy}``, the live
    scopes' overrides included (outside any, each op's declared policy).

    `device_type` chooses whose overrides count; ``None`` means the device of the innermost
    scope that switches autocast on (``"metal"`` when none does).
    """
    code = _device_code(device_type)
    return {name: _POLICY_CODES[_C.autocast_effective_policy(code, name)] for name in _table()}


def cpu_bfloat16_ops() -> frozenset:
    """Ops with a bfloat16 CPU kernel; the others run in float32 under CPU bfloat16 autocast."""
    return frozenset(name for name, (_, bf16) in _table().items() if bf16)
