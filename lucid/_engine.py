"""The one place that talks to the engine library.

Every exported symbol gets its ctypes signature from include/lucid.h (through lucid/_abi.py);
every call checks the engine's status and raises the matching Python exception with the
engine's message. Handles are plain ``int``s. An op returns its result's record (a ctypes
array, see `Record`): the handle with the metadata the engine wrote in the same call.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading
import warnings
from ctypes import POINTER, byref, c_char_p, c_double, c_int32, c_int64, c_uint32, c_uint64, c_void_p
from pathlib import Path

from . import _abi, _native

_LIB_NAME = "liblucid.dylib" if sys.platform == "darwin" else "liblucid.so"


def _find_library() -> Path:
    # LUCID_ENGINE_LIBRARY loads another build of the engine, e.g. the check build whose
    # "metal" device runs on the emulated Metal backend (`make metal-emulated` prints its path).
    override = os.environ.get("LUCID_ENGINE_LIBRARY")
    if override:
        if not Path(override).is_file():
            raise ImportError(f"lucid: LUCID_ENGINE_LIBRARY names {override}, which is not a file")
        return Path(override)
    here = Path(__file__).resolve().parent
    candidates = [here / "_lib" / _LIB_NAME, here.parent / ".build" / "release" / _LIB_NAME]
    for c in candidates:
        if c.exists():
            return c
    raise ImportError(
        f"lucid: the engine library {_LIB_NAME} was not found (looked in "
        + ", ".join(str(c.parent) for c in candidates)
        + "). Build it with `make build` or install lucid with `pip install .`."
    )


# On Linux the engine links OpenBLAS and oneDNN from their PyPI packages. Loading them first,
# by path, makes the engine's references resolve to those files (a library already loaded
# answers to its soname), whether the engine's run path knows their folders (`make build`)
# or not (an installed wheel, whose run path stays inside lucid/_lib).
#
# oneDNN's GNU OpenMP threads spin-wait after each parallel region, by default for longer than
# a step between two ops. When two processes share the cores, each one's barrier then waits for
# threads the other's spinning keeps off the CPU: a million-element exp was found 60x slower.
# A short spin (GOMP_SPINCOUNT, read when OpenMP loads, below) keeps back-to-back ops as fast
# in one process and lets a second one in. A setting of the user's wins.
if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "2000"
_dependencies = [ctypes.CDLL(str(path)) for path in _native.libraries()]
_lib_path = str(_find_library())
_lib = ctypes.CDLL(_lib_path)


# Every entry point's ctypes signature, generated from include/lucid.h (tools/gen_abi.py). The
# ones whose arguments are all 32-bit integers or data pointers get no argtypes: ctypes then
# passes a Python int as a 32-bit int and an array, byref() or None as a pointer exactly, with
# no conversion per call. Their callers here pass nothing else.
for _name, (_args, _res) in _abi.SIGNATURES.items():
    _fn = getattr(_lib, _name)
    if _name not in _abi.UNCONVERTED:
        _fn.argtypes = _args
    _fn.restype = _res

# Status codes -> Python exception types.
_ERRORS = {_abi.LUCID_ERR_VALUE: ValueError, _abi.LUCID_ERR_TYPE: TypeError, _abi.LUCID_ERR_INDEX: IndexError,
           _abi.LUCID_ERR_RUNTIME: RuntimeError, _abi.LUCID_ERR_HANDLE: ValueError, _abi.LUCID_ERR_THREAD: RuntimeError}


def _codes(enum: str, prefix: str = "LUCID_") -> dict:
    """An enum of the header as {lower-case name without the prefix: code}."""
    return {name[len(prefix):].lower(): code for name, code in _abi.ENUMS[enum].items()}


# Codes shared with the engine, all from the header.
ADD, SUB, MUL, DIV, POW, MAXIMUM, MINIMUM = (_abi.LUCID_ADD, _abi.LUCID_SUB, _abi.LUCID_MUL, _abi.LUCID_DIV,
                                             _abi.LUCID_POW, _abi.LUCID_MAXIMUM, _abi.LUCID_MINIMUM)
BITWISE_AND, BITWISE_OR, BITWISE_XOR = _abi.LUCID_BITWISE_AND, _abi.LUCID_BITWISE_OR, _abi.LUCID_BITWISE_XOR
EQ, NE, LT, LE, GT, GE = _abi.LUCID_EQ, _abi.LUCID_NE, _abi.LUCID_LT, _abi.LUCID_LE, _abi.LUCID_GT, _abi.LUCID_GE
UNARY = _codes("lucid_unary_op")
NEG, RELU = UNARY["neg"], UNARY["relu"]
SUM, MEAN, AMAX, AMIN, LOGSUMEXP = (_abi.LUCID_SUM, _abi.LUCID_MEAN, _abi.LUCID_AMAX, _abi.LUCID_AMIN,
                                    _abi.LUCID_LOGSUMEXP)
REDUCTIONS = _codes("lucid_reduction", "LUCID_REDUCTION_")
SCALAR_FLOAT, SCALAR_INT, SCALAR_BOOL = _abi.LUCID_SCALAR_FLOAT, _abi.LUCID_SCALAR_INT, _abi.LUCID_SCALAR_BOOL
SPLIT_SIZES, SPLIT_SIZE, SPLIT_CHUNKS = _abi.LUCID_SPLIT_SIZES, _abi.LUCID_SPLIT_SIZE, _abi.LUCID_SPLIT_CHUNKS
INDEX_INT, INDEX_SLICE, INDEX_NONE, INDEX_ELLIPSIS, INDEX_TENSOR = (
    _abi.LUCID_INDEX_INT, _abi.LUCID_INDEX_SLICE, _abi.LUCID_INDEX_NONE, _abi.LUCID_INDEX_ELLIPSIS,
    _abi.LUCID_INDEX_TENSOR)
MSE, L1 = _abi.LUCID_LOSS_MSE, _abi.LUCID_LOSS_L1


def _raise(status: int):
    msg = _lib.lucid_last_error()
    text = msg.decode("utf-8", "replace") if msg else f"engine error {status}"
    raise _ERRORS.get(status, RuntimeError)(text)


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _int64(v: int) -> int:
    # ctypes wraps out-of-range integers silently; refuse them instead.
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise ValueError(f"{v} does not fit in a 64-bit integer")
    return v


def _dims(values):
    n = len(values)
    return (c_int64 * n)(*[_int64(v) for v in values]), n


# An op's result as the engine describes it (include/lucid.h, enum lucid_record_field).
Record = c_int64 * _abi.LUCID_RECORD_LEN
R_HANDLE, R_DTYPE, R_DEVICE, R_NDIM = (_abi.LUCID_RECORD_HANDLE, _abi.LUCID_RECORD_DTYPE, _abi.LUCID_RECORD_DEVICE,
                                       _abi.LUCID_RECORD_NDIM)
R_REQUIRES_GRAD, R_STORAGE_BYTES = _abi.LUCID_RECORD_REQUIRES_GRAD, _abi.LUCID_RECORD_STORAGE_BYTES
R_SHAPE, R_STRIDES, R_DIMS = _abi.LUCID_RECORD_SHAPE, _abi.LUCID_RECORD_STRIDES, _abi.LUCID_RECORD_DIMS
R_SHAPE_KEY = _abi.LUCID_RECORD_SHAPE_KEY


def _new(fn, *args) -> Record:
    """Calls an op that makes one tensor; its record."""
    out = Record()
    rc = fn(*args, out)
    if rc:
        _raise(rc)
    return out


def _new_handle(fn, *args) -> int:
    """Calls an entry point that writes a bare handle (0 for none)."""
    out = c_uint32()
    rc = fn(*args, byref(out))
    if rc:
        _raise(rc)
    return out.value


def handle(x) -> int:
    """The handle of a record, or `x` itself when it is one."""
    return x if type(x) is int else x[R_HANDLE]


# ---- warnings ------------------------------------------------------------------------------

class MetalFallbackWarning(RuntimeWarning):
    """Device ``"metal"`` is served by the host fallback because Metal is unavailable."""


_WARNING_FN = ctypes.CFUNCTYPE(None, c_char_p)


_PACKAGE_DIR = str(Path(__file__).resolve().parent)


def _caller_stacklevel() -> int:
    """The stacklevel of the first frame outside lucid, so a warning names the user's line."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level


def _on_engine_warning(message: bytes):
    text = message.decode("utf-8", "replace") if message else ""
    category = MetalFallbackWarning if "host fallback" in text else RuntimeWarning
    warnings.warn(text, category, stacklevel=_caller_stacklevel())


_warning_callback = _WARNING_FN(_on_engine_warning)  # kept alive for the process
_lib.lucid_set_warning_handler(ctypes.cast(_warning_callback, c_void_p))


# ---- autocast ------------------------------------------------------------------------------

# Entering a scope is the hottest call there is. Its arguments are three 32-bit ints, which
# callers range-check, and a byref out-pointer: ctypes passes those exactly without argtypes,
# and skipping the per-argument conversion saves about a third of the call.
# They also take the engine's registry lock for a moment and nothing else, so they are called
# holding the GIL (through a PyDLL view of the same library): releasing and retaking it would
# cost more than the call.
_lib_holding_gil = ctypes.PyDLL(_lib_path)
_guard_create = _lib_holding_gil["guard_create"]
_guard_create.restype = c_int32
# Leaving one takes the handle as the c_uint64 (a GuardSlot) the engine wrote it into, which
# ctypes passes by value as it is: converting a Python int through argtypes would allocate a
# c_uint64 at every call, a quarter of an enter+exit.
_guard_destroy = _lib_holding_gil["guard_destroy"]
_guard_destroy.restype = c_int32


class GuardSlot(c_uint64):
    """Where guard_create writes a handle: the caller holds it, so the handle is known as
    soon as the engine has made it, even if an exception (a KeyboardInterrupt) arrives
    before guard_create returns. 0 until then."""

    @property
    def handle(self) -> int:
        return self.value


def guard_slot():
    """A new GuardSlot and the pointer to it that ``_guard_create`` writes through."""
    slot = GuardSlot()
    return slot, byref(slot)


def guard_create(device: int, enabled: int, dtype: int, slot: GuardSlot | None = None) -> int:
    out = GuardSlot() if slot is None else slot
    rc = _guard_create(device, enabled, dtype, byref(out))
    if rc:
        _raise(rc)
    return out.value


def guard_destroy(handle: int) -> None:
    rc = _guard_destroy(c_uint64(handle))
    if rc:
        _raise(rc)


def _query_i32(fn, *args) -> int:
    out = c_int32()
    rc = fn(*args, byref(out))
    if rc:
        _raise(rc)
    return out.value


def _query_i64(fn) -> int:
    out = c_int64()
    rc = fn(byref(out))
    if rc:
        _raise(rc)
    return out.value


def _query_str(fn, *args) -> str:
    out = c_char_p()
    rc = fn(*args, byref(out))
    if rc:
        _raise(rc)
    return out.value.decode()


def dtype_table():
    """(code, name, itemsize, is_floating) of every dtype the engine has, by code."""
    rows = []
    for code in sorted(_abi.ENUMS["lucid_dtype"].values()):
        name, size, floating = c_char_p(), c_int32(), c_int32()
        rc = _lib.lucid_dtype_info(code, byref(name), byref(size), byref(floating))
        if rc:
            _raise(rc)
        rows.append((code, name.value.decode(), size.value, bool(floating.value)))
    return rows


def device_table():
    """(code, name) of every device the engine has, by code."""
    return [(code, _query_str(_lib.lucid_device_info, code)) for code in sorted(_abi.ENUMS["lucid_device"].values())]


def autocast_default_dtype(device: int) -> int:
    return _query_i32(_lib.lucid_autocast_default_dtype, device)


def autocast_check_dtype(device: int, dtype: int) -> None:
    """Raises (ValueError, with the engine's message) unless autocast on `device` can target
    `dtype`."""
    rc = _lib.lucid_autocast_check_dtype(device, dtype)
    if rc:
        _raise(rc)


def autocast_is_enabled(device: int) -> bool:
    return bool(_query_i32(_lib.lucid_autocast_is_enabled, device))


def autocast_get_dtype(device: int) -> int:
    return _query_i32(_lib.lucid_autocast_get_dtype, device)


def autocast_live_guards() -> int:
    return _query_i64(_lib.lucid_autocast_live_guards)


def autocast_cached_casts() -> int:
    """Parameter casts held by this thread's autocast weight cache."""
    return _query_i64(_lib.lucid_autocast_cached_casts)


def autocast_is_cache_enabled() -> bool:
    return bool(_query_i32(_lib.lucid_autocast_is_cache_enabled))


def autocast_set_cache_enabled(enabled: bool) -> bool:
    """Sets this thread's weight-cache switch; returns the previous setting."""
    previous = c_int32()
    rc = _lib.lucid_autocast_set_cache_enabled(1 if enabled else 0, byref(previous))
    if rc:
        _raise(rc)
    return bool(previous.value)


def op_table():
    """[(name, policy code, cpu bfloat16 kernel)] for every op."""
    rows = []
    for i in range(_query_i32(_lib.lucid_op_count)):
        name, policy, bf16 = c_char_p(), c_int32(), c_int32()
        rc = _lib.lucid_op_info(i, byref(name), byref(policy), byref(bf16))
        if rc:
            _raise(rc)
        rows.append((name.value.decode(), policy.value, bool(bf16.value)))
    return rows


def metal_is_available() -> bool:
    return bool(_query_i32(_lib.lucid_metal_is_available))


def metal_synchronize() -> None:
    rc = _lib.lucid_metal_synchronize()
    if rc:
        _raise(rc)


def metal_self_test() -> list:
    checks, failures = c_int64(), c_int64()
    rc = _lib.lucid_metal_self_test(byref(checks), byref(failures))
    if rc:
        _raise(rc)
    report = []
    op, dtype, err, tol, detail = c_char_p(), c_int32(), c_double(), c_double(), c_char_p()
    for i in range(checks.value):
        rc = _lib.lucid_metal_self_test_entry(i, byref(op), byref(dtype), byref(err), byref(tol), byref(detail))
        if rc:
            _raise(rc)
        report.append((op.value.decode(), dtype.value, err.value, tol.value, detail.value.decode()))
    return report


_METAL_STATS = ("command_buffers", "host_waits", "new_buffers", "cached_bytes", "host_fallbacks",
                "library_compiles")


def metal_stats() -> dict:
    values = (c_int64 * (len(_METAL_STATS) + 1))()
    rc = _lib.lucid_metal_stats(values, len(values))
    if rc:
        _raise(rc)
    stats = dict(zip(_METAL_STATS, values))
    dispatches = {}
    kernel, count = c_char_p(), c_int64()
    for i in range(values[len(_METAL_STATS)]):
        rc = _lib.lucid_metal_dispatch_entry(i, byref(kernel), byref(count))
        if rc:
            _raise(rc)
        dispatches[kernel.value.decode()] = count.value
    stats["dispatches"] = dispatches
    return stats


def metal_host_fallback_counts() -> dict:
    counts = {}
    name, count = c_char_p(), c_int64()
    for i in range(_query_i64(_lib.lucid_metal_fallback_entries)):
        rc = _lib.lucid_metal_fallback_entry(i, byref(name), byref(count))
        if rc:
            _raise(rc)
        counts[name.value.decode()] = count.value
    return counts


# ---- tensors -------------------------------------------------------------------------------

def from_host(address: int, nbytes: int, shape, dtype: int, device: int) -> Record:
    dims, n = _dims(shape)
    return _new(_lib.lucid_tensor_from_host, address, nbytes, dims, n, dtype, device)


def full(shape, value: float, int_value: int, kind: int, dtype: int, device: int) -> Record:
    dims, n = _dims(shape)
    return _new(_lib.lucid_tensor_full, dims, n, value, int_value, kind, dtype, device)


def arange(start: float, end: float, step: float, dtype: int, device: int) -> Record:
    return _new(_lib.lucid_tensor_arange, start, end, step, dtype, device)


def arange_int(start: int, end: int, step: int, dtype: int, device: int) -> Record:
    return _new(_lib.lucid_tensor_arange_int, _int64(start), _int64(end), _int64(step), dtype, device)


def random(shape, normal: bool, dtype: int, device: int) -> Record:
    dims, n = _dims(shape)
    return _new(_lib.lucid_tensor_random, dims, n, 1 if normal else 0, dtype, device)


def manual_seed(seed: int) -> None:
    rc = _lib.lucid_manual_seed(seed)
    if rc:
        _raise(rc)


_release, _release_many = _lib.lucid_tensor_release, _lib.lucid_tensor_release_many

# Releases of small tensors outside any graph wait here and go to the engine together, in one
# call per _DEFERRED_MAX of them: a tensor's release then costs an append instead of a call
# (Tensor.__del__ reads the record and decides). What waits keeps at most _DEFERRED_MAX *
# _DEFERRED_BYTES bytes alive; a tensor that takes part in autograd (it may hold a graph) or
# keeps more storage alive is released at once.
_DEFERRED_MAX = 256
_DEFERRED_BYTES = 1 << 16
_deferred = []
_flush_lock = threading.Lock()


def release(x) -> None:
    """Releases a handle (or a record's handle) now."""
    _release(handle(x))


def flush_releases() -> None:
    """Releases every deferred handle now. Safe from any thread and from a finalizer; a call
    that finds another thread (or itself, re-entered) flushing leaves the work to that one."""
    if not _flush_lock.acquire(blocking=False):
        return
    try:
        n = len(_deferred)
        if n:
            # Appends from other threads land after the first n, which only a flush removes.
            batch = (c_uint32 * n)(*_deferred[:n])
            del _deferred[:n]
            _release_many(batch, n)
    finally:
        _flush_lock.release()


atexit.register(flush_releases)


def _reset_flush_lock_in_child():
    # A fork while another thread flushed would leave the child's copy of the lock held.
    global _flush_lock
    _flush_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_flush_lock_in_child)


def meta(handle: int):
    """(dtype code, device code, ndim, requires_grad)."""
    d, dev, nd, rg = c_int32(), c_int32(), c_int32(), c_int32()
    rc = _lib.lucid_tensor_meta(handle, byref(d), byref(dev), byref(nd), byref(rg))
    if rc:
        _raise(rc)
    return d.value, dev.value, nd.value, bool(rg.value)


def record(handle: int) -> Record:
    """The record of a tensor known by its handle alone, as an op that made it would write it."""
    out = Record()
    rc = _lib.lucid_tensor_record(handle, out)
    if rc:
        _raise(rc)
    return out


def shape_and_strides(handle: int, ndim: int):
    shape, strides = (c_int64 * max(ndim, 1))(), (c_int64 * max(ndim, 1))()
    rc = _lib.lucid_tensor_shape(handle, shape, strides, ndim)
    if rc:
        _raise(rc)
    return tuple(shape[:ndim]), tuple(strides[:ndim])


def to_host(handle: int, address: int, nbytes: int) -> None:
    rc = _lib.lucid_tensor_to_host(handle, address, nbytes)
    if rc:
        _raise(rc)


def convert(handle: int, dtype: int, device: int) -> Record:
    return _new(_lib.lucid_tensor_to, handle, dtype, device)


def set_requires_grad(handle: int, flag: bool) -> Record:
    return _new(_lib.lucid_tensor_set_requires_grad, handle, 1 if flag else 0)


def detach(handle: int) -> Record:
    return _new(_lib.lucid_detach, handle)


def data(handle: int) -> Record:
    return _new(_lib.lucid_data, handle)


def clone(handle: int) -> Record:
    return _new(_lib.lucid_clone, handle)


ASSIGN_FILL, ASSIGN_SAME_KIND, ASSIGN_RESULT = (_abi.LUCID_ASSIGN_FILL, _abi.LUCID_ASSIGN_SAME_KIND,
                                                _abi.LUCID_ASSIGN_RESULT)

_OP_NAMES = {}  # op names as the in-place exports take them, encoded once


def _op_name(op: str) -> bytes:
    name = _OP_NAMES.get(op)
    if name is None:
        name = _OP_NAMES[op] = op.encode()
    return name


def _recorded(rc, flag) -> bool:
    """Whether an in-place write was recorded for autograd (it then gave the written tensor, or
    the tensor it views, a new grad_fn)."""
    if rc:
        _raise(rc)
    return flag.value != 0


def assign(dst: int, value: int, flags: int, op: str) -> bool:
    """The in-place write of `value` into `dst` (lucid_assign); whether autograd recorded it."""
    flag = c_int32()
    return _recorded(_lib.lucid_assign(dst, value, flags, _op_name(op), byref(flag)), flag)


def fill(dst: int, value: float, int_value: int, kind: int, op: str) -> bool:
    """Every element of `dst` set to a scalar, in place (lucid_fill); whether autograd recorded it."""
    flag = c_int32()
    return _recorded(_lib.lucid_fill(dst, value, _int64(int_value), kind, _op_name(op), byref(flag)), flag)


def set_data(t: int, value: int) -> None:
    """``t.data = value`` (lucid_set_data)."""
    rc = _lib.lucid_set_data(t, value)
    if rc:
        _raise(rc)


def binary_inplace(op: int, dst: int, other: int, alpha: float, name: str) -> None:
    """``dst op= alpha * other``, unrecorded (lucid_binary_inplace)."""
    rc = _lib.lucid_binary_inplace(op, dst, other, alpha, _op_name(name))
    if rc:
        _raise(rc)


def binary_scalar_inplace(op: int, dst: int, value: float, int_value: int, kind: int, name: str) -> None:
    rc = _lib.lucid_binary_scalar_inplace(op, dst, value, _int64(int_value), kind, _op_name(name))
    if rc:
        _raise(rc)


def unary_inplace(op: int, dst: int, name: str) -> None:
    rc = _lib.lucid_unary_inplace(op, dst, _op_name(name))
    if rc:
        _raise(rc)


_PAD = ((0, 0, 0, 0), (0, 0, 0), (0, 0), (0,), ())


_set_element = _lib.lucid_set_element


def set_element(dst: int, index: tuple, value: float, int_value: int, kind: int) -> None:
    """``dst[index] = scalar`` for one int per dimension (at most 4), unrecorded (lucid_set_element)."""
    n = len(index)
    if n == 1:  # the commonest: one call with no padding made
        rc = _set_element(dst, 1, index[0], 0, 0, 0, value, int_value, kind)
    else:
        i0, i1, i2, i3 = index + _PAD[n]
        rc = _set_element(dst, n, i0, i1, i2, i3, value, int_value, kind)
    if rc:
        _raise(rc)


def write_at(dst: int, items, src: int, value: float, int_value: int, kind: int, op: str) -> bool:
    """`src` (or the scalar, when `src` is 0) written at ``dst[items]``, in place (lucid_write_at);
    whether autograd recorded it."""
    flag = c_int32()
    return _recorded(_lib.lucid_write_at(dst, *_subscript(items), src, value, _int64(int_value), kind, _op_name(op),
                                         byref(flag)), flag)


def live_tensors() -> int:
    flush_releases()
    return _query_i64(_lib.lucid_live_tensors)


def memory_stats(device: int):
    """(bytes allocated now, peak bytes since the last reset) on a device (-1: all)."""
    flush_releases()
    now, peak = c_int64(), c_int64()
    rc = _lib.lucid_memory_stats(device, byref(now), byref(peak))
    if rc:
        _raise(rc)
    return now.value, peak.value


def empty_cache() -> int:
    flush_releases()
    return _query_i64(_lib.lucid_empty_cache)


def set_num_threads(n: int) -> None:
    rc = _lib.lucid_set_num_threads(n)
    if rc:
        _raise(rc)


def get_num_threads() -> int:
    return _query_i64(_lib.lucid_get_num_threads)


def cpu_capability() -> str:
    return _query_str(_lib.lucid_cpu_capability)


def reset_peak_memory_stats(device: int) -> None:
    rc = _lib.lucid_reset_peak_memory_stats(device)
    if rc:
        _raise(rc)


# ---- ops -----------------------------------------------------------------------------------

# The hottest ops (binary, binary_scalar, unary, matmul) spell out `_new` instead of calling it:
# one Python call and no argument tuple less per op, on ops that take about a microsecond.
_binary, _binary_scalar = _lib.lucid_binary, _lib.lucid_binary_scalar


def binary(op: int, a: int, b: int) -> Record:
    out = Record()
    rc = _binary(op, a, b, out)
    if rc:
        _raise(rc)
    return out


def binary_scalar(op: int, a: int, value: float, int_value: int, kind: int, scalar_first: bool) -> Record:
    out = Record()
    rc = _binary_scalar(op, a, value, int_value, kind, scalar_first, out)
    if rc:
        _raise(rc)
    return out


_unary = _lib.lucid_unary


def unary(op: int, a: int) -> Record:
    out = Record()
    rc = _unary(op, a, out)
    if rc:
        _raise(rc)
    return out


def bitwise_not(a: int) -> Record:
    return _new(_lib.lucid_bitwise_not, a)


_matmul = _lib.lucid_matmul


def matmul(a: int, b: int) -> Record:
    out = Record()
    rc = _matmul(a, b, out)
    if rc:
        _raise(rc)
    return out


def linear(x: int, w: int, b: int) -> Record:
    return _new(_lib.lucid_linear, x, w, b)


def reduce(op: int, a: int, dims, keepdim: bool) -> Record:
    if dims is None:
        return _new(_lib.lucid_reduce, op, a, None, -1, 1 if keepdim else 0)
    arr, n = _dims(dims)
    return _new(_lib.lucid_reduce, op, a, arr, n, 1 if keepdim else 0)


def reshape(a: int, shape, view_only: bool) -> Record:
    dims, n = _dims(shape)
    return _new(_lib.lucid_reshape, a, dims, n, 1 if view_only else 0)


def transpose(a: int, d0: int, d1: int) -> Record:
    return _new(_lib.lucid_transpose, a, _int64(d0), _int64(d1))


def permute(a: int, dims) -> Record:
    arr, n = _dims(dims)
    return _new(_lib.lucid_permute, a, arr, n)


def contiguous(a: int) -> Record:
    return _new(_lib.lucid_contiguous, a)


# ---- autograd ------------------------------------------------------------------------------

# An exception raised by a custom function's Python backward (lucid.autograd), kept for the
# thread whose backward() called it, to be raised there as it is.
pending_error = threading.local()


def backward(handle: int, grad: int, retain_graph: bool) -> None:
    pending_error.exception = None
    rc = _lib.lucid_backward(handle, grad, 1 if retain_graph else 0)
    if rc:
        raised = pending_error.exception
        pending_error.exception = None
        if raised is not None:
            raise raised
        _raise(rc)


_CUSTOM_BACKWARD = ctypes.CFUNCTYPE(c_int32, c_uint64, c_uint32, POINTER(c_uint32), c_int32)
_CUSTOM_RELEASE = ctypes.CFUNCTYPE(None, c_uint64)
_custom_callbacks = None  # the C callbacks, alive for the process once registered


def custom_function_callbacks(backward, release) -> None:
    """Registers custom functions' Python side with the engine: ``backward(context, grad
    handle)`` returns one gradient handle per input (0 for none) and may raise (the exception
    is raised again by ``backward()``); ``release(context)`` says the engine is done with it."""
    global _custom_callbacks

    def on_backward(context, grad, out, count):
        try:
            handles = backward(context, grad)
            if len(handles) != count:
                raise RuntimeError(f"custom function backward gave {len(handles)} gradients for {count} inputs")
            for k, h in enumerate(handles):
                out[k] = h
            return 0
        except BaseException as e:  # handed to the thread that called backward()
            pending_error.exception = e
            return 1

    callbacks = (_CUSTOM_BACKWARD(on_backward), _CUSTOM_RELEASE(release))
    rc = _lib.lucid_custom_function_callbacks(ctypes.cast(callbacks[0], c_void_p), ctypes.cast(callbacks[1], c_void_p))
    if rc:
        _raise(rc)
    _custom_callbacks = callbacks


def custom_function_record(name: str, inputs, output: int, context: int) -> int:
    arr = (c_uint32 * max(len(inputs), 1))(*inputs)
    return _new_handle(_lib.lucid_custom_function_record, name.encode(), arr, len(inputs), output, context)


def grad(handle: int) -> int:
    """The leaf's gradient handle (a new reference), or 0."""
    return _new_handle(_lib.lucid_tensor_grad, handle)


def set_grad(handle: int, grad_handle: int) -> None:
    rc = _lib.lucid_tensor_set_grad(handle, grad_handle)
    if rc:
        _raise(rc)


def grad_fn(handle: int):
    name = c_char_p()
    rc = _lib.lucid_tensor_grad_fn(handle, byref(name))
    if rc:
        _raise(rc)
    return name.value.decode() if name.value else None


def set_grad_enabled(enabled: bool) -> bool:
    """Sets grad mode for the calling thread; returns the previous mode."""
    return bool(_query_i32(_lib.lucid_set_grad_enabled, 1 if enabled else 0))


def is_grad_enabled() -> bool:
    return bool(_query_i32(_lib.lucid_is_grad_enabled))


# ---- optimizers ----------------------------------------------------------------------------

def sgd_step(param, grad, buf, found_inf, lr, momentum, dampening, weight_decay, nesterov, maximize):
    """Updates param (and buf) in place, unless the found_inf flag (0 for none) is set; the
    momentum buffer made on the first step, or 0."""
    b = c_uint32()
    rc = _lib.lucid_sgd_step(param, grad, buf, found_inf, lr, momentum, dampening, weight_decay, 1 if nesterov else 0,
                             1 if maximize else 0, byref(b))
    if rc:
        _raise(rc)
    return b.value


def adam_step(param, grad, m, v, step, found_inf, lr, beta1, beta2, eps, weight_decay, decoupled, maximize):
    """Updates param, m, v and the step count in place, unless the found_inf flag (0 for none)
    is set; the (exp_avg, exp_avg_sq) handles made for those given as 0."""
    m1, v1 = c_uint32(), c_uint32()
    rc = _lib.lucid_adam_step(param, grad, m, v, step, found_inf, lr, beta1, beta2, eps, weight_decay,
                              1 if decoupled else 0, 1 if maximize else 0, byref(m1), byref(v1))
    if rc:
        _raise(rc)
    return m1.value, v1.value


def unscale_grads(handles, inv_scale, found_inf) -> None:
    """Unscales the gradients in place for GradScaler.unscale_, setting the found_inf flag when
    any holds an inf or NaN."""
    n = len(handles)
    rc = _lib.lucid_unscale_grads((c_uint32 * max(n, 1))(*handles), n, inv_scale, found_inf)
    if rc:
        _raise(rc)


def update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval) -> None:
    """GradScaler.update's new scale and growth tracker, in place."""
    rc = _lib.lucid_update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                                 _int64(growth_interval))
    if rc:
        _raise(rc)


# ---- comparisons, selection, reductions ------------------------------------------------------

def compare(op: int, a: int, b: int) -> Record:
    return _new(_lib.lucid_compare, op, a, b)


def compare_scalar(op: int, a: int, value: float, int_value: int, kind: int, scalar_first: bool) -> Record:
    return _new(_lib.lucid_compare_scalar, op, a, value, int_value, kind, 1 if scalar_first else 0)


def where(cond: int, a, b) -> Record:
    """``a``/``b`` are handles (int) or ``(value, int_value, kind)`` scalar triples."""
    ah, (av, ai, ak) = (a, (0.0, 0, 0)) if isinstance(a, int) else (0, a)
    bh, (bv, bi, bk) = (b, (0.0, 0, 0)) if isinstance(b, int) else (0, b)
    return _new(_lib.lucid_where, cond, ah, bh, av, ai, ak, bv, bi, bk)


def clamp(a: int, lo, hi) -> Record:
    """``lo``/``hi`` are ``(value, int_value, kind)`` triples or None."""
    lv, li, lk = lo or (0.0, 0, 0)
    hv, hi_, hk = hi or (0.0, 0, 0)
    return _new(_lib.lucid_clamp, a, 0 if lo is None else 1, lv, li, lk, 0 if hi is None else 1, hv, hi_, hk)


def _optional_dims(dims):
    if dims is None:
        return None, -1
    return _dims(dims)


def var(a: int, dims, correction: float, keepdim: bool, root: bool) -> Record:
    arr, n = _optional_dims(dims)
    return _new(_lib.lucid_var, a, arr, n, correction, 1 if keepdim else 0, 1 if root else 0)


def max_dim(a: int, dim: int, keepdim: bool, largest: bool):
    v, i = c_uint32(), c_uint32()
    rc = _lib.lucid_max_dim(a, _int64(dim), 1 if keepdim else 0, 1 if largest else 0, byref(v), byref(i))
    if rc:
        _raise(rc)
    return v.value, i.value


def argmax(a: int, dim, keepdim: bool, largest: bool) -> Record:
    return _new(_lib.lucid_argmax, a, 0 if dim is None else _int64(dim), 0 if dim is None else 1, 1 if keepdim else 0,
                1 if largest else 0)


# ---- shape and indexing --------------------------------------------------------------------

def squeeze(a: int, dims) -> Record:
    arr, n = _optional_dims(dims)
    return _new(_lib.lucid_squeeze, a, arr, n)


def unsqueeze(a: int, dim: int) -> Record:
    return _new(_lib.lucid_unsqueeze, a, _int64(dim))


def expand(a: int, shape) -> Record:
    arr, n = _dims(shape)
    return _new(_lib.lucid_expand, a, arr, n)


def flatten(a: int, start: int, end: int) -> Record:
    return _new(_lib.lucid_flatten, a, _int64(start), _int64(end))


def narrow(a: int, dim: int, start: int, length: int) -> Record:
    return _new(_lib.lucid_narrow, a, _int64(dim), _int64(start), _int64(length))


def diagonal(a: int, offset: int, dim1: int, dim2: int) -> Record:
    return _new(_lib.lucid_diagonal, a, _int64(offset), _int64(dim1), _int64(dim2))


def as_strided(a: int, size, stride, offset) -> Record:
    """`offset` None: a's own."""
    sizes, n = _dims(size)
    strides, _ = _dims(stride)
    return _new(_lib.lucid_as_strided, a, sizes, strides, n, _int64(0 if offset is None else offset),
                0 if offset is None else 1)


def storage_offset(a: int) -> int:
    return _query_i64(lambda out: _lib.lucid_storage_offset(a, out))


def cat(handles, dim: int, stack: bool) -> Record:
    n = len(handles)
    arr = (c_uint32 * max(n, 1))(*handles)
    return _new(_lib.lucid_cat, arr, n, _int64(dim), 1 if stack else 0)




def split(a: int, mode: int, sizes, dim: int, capacity: int):
    arr, n = _dims(sizes)
    capacity = max(capacity, 1)
    outs, count = (c_uint32 * capacity)(), c_int32()
    rc = _lib.lucid_split(a, mode, arr, n, _int64(dim), outs, capacity, byref(count))
    if rc:
        _raise(rc)
    return list(outs[:count.value])




def _subscript(items):
    """``items``: (kind, (v0, v1, v2), flags, handle) tuples, as the C arrays of a subscript."""
    n = len(items)
    kinds, values = (c_int32 * max(n, 1))(), (c_int64 * max(3 * n, 1))()
    flags, handles = (c_int32 * max(n, 1))(), (c_uint32 * max(n, 1))()
    for i, (kind, vals, flag, handle) in enumerate(items):
        kinds[i], flags[i], handles[i] = kind, flag, handle
        for j, v in enumerate(vals):
            values[3 * i + j] = _int64(v)
    return kinds, values, flags, handles, n


def index(a: int, items) -> Record:
    return _new(_lib.lucid_index, a, *_subscript(items))


def index_put(a: int, items, src: int, accumulate: bool) -> Record:
    return _new(_lib.lucid_index_put, a, *_subscript(items), src, int(accumulate))


def index_put_inplace(dst: int, items, src: int, accumulate: bool, op: str) -> bool:
    """`src` written (or added) at ``dst[items]`` in place (lucid_index_put_inplace); whether
    autograd recorded it."""
    flag = c_int32()
    return _recorded(_lib.lucid_index_put_inplace(dst, *_subscript(items), src, int(accumulate), _op_name(op),
                                                  byref(flag)), flag)


def gather(a: int, dim: int, idx: int) -> Record:
    return _new(_lib.lucid_gather, a, _int64(dim), idx)


def index_select(a: int, dim: int, idx: int) -> Record:
    return _new(_lib.lucid_index_select, a, _int64(dim), idx)


def embedding(weight: int, indices: int, padding_idx) -> Record:
    return _new(_lib.lucid_embedding, weight, indices, 0 if padding_idx is None else 1,
                0 if padding_idx is None else _int64(padding_idx))


# ---- layers and losses ---------------------------------------------------------------------

def softmax(a: int, dim: int, log: bool) -> Record:
    return _new(_lib.lucid_softmax, a, _int64(dim), 1 if log else 0)


def leaky_relu(a: int, slope: float) -> Record:
    return _new(_lib.lucid_leaky_relu, a, slope)


def dropout(a: int, p: float, training: bool) -> Record:
    return _new(_lib.lucid_dropout, a, p, 1 if training else 0)


def layer_norm(a: int, shape, w: int, b: int, eps: float) -> Record:
    arr, n = _dims(shape)
    return _new(_lib.lucid_layer_norm, a, arr, n, w, b, eps)


def group_norm(a: int, groups: int, w: int, b: int, eps: float) -> Record:
    return _new(_lib.lucid_group_norm, a, _int64(groups), w, b, eps)


def batch_norm(a, running_mean, running_var, w, b, training, momentum, eps):
    """(output, new running mean or 0, new running var or 0)."""
    y, m, v = c_uint32(), c_uint32(), c_uint32()
    rc = _lib.lucid_batch_norm(a, running_mean, running_var, w, b, 1 if training else 0, momentum, eps, byref(y),
                               byref(m), byref(v))
    if rc:
        _raise(rc)
    return y.value, m.value, v.value


def _params(values):
    return (c_int64 * len(values))(*[_int64(v) for v in values])


def conv2d(x: int, w: int, b: int, params) -> Record:
    return _new(_lib.lucid_conv2d, x, w, b, _params(params))


def conv1d(x: int, w: int, b: int, params) -> Record:
    return _new(_lib.lucid_conv1d, x, w, b, _params(params))


def conv_transpose2d(x: int, w: int, b: int, params) -> Record:
    return _new(_lib.lucid_conv_transpose2d, x, w, b, _params(params))


def max_pool2d(x: int, params, ceil_mode: bool) -> Record:
    return _new(_lib.lucid_max_pool2d, x, _params(params), 1 if ceil_mode else 0)


def avg_pool2d(x: int, params, ceil_mode: bool, count_include_pad: bool, divisor: int) -> Record:
    return _new(_lib.lucid_avg_pool2d, x, _params(params), 1 if ceil_mode else 0, 1 if count_include_pad else 0,
                _int64(divisor))


def adaptive_avg_pool2d(x: int, oh: int, ow: int) -> Record:
    return _new(_lib.lucid_adaptive_avg_pool2d, x, _int64(oh), _int64(ow))


def attention(q, k, v, mask, causal, scale, dropout_p, need_weights):
    """(output handle, weights handle or 0)."""
    o, w = c_uint32(), c_uint32()
    rc = _lib.lucid_attention(q, k, v, mask, 1 if causal else 0, 0 if scale is None else 1,
                              0.0 if scale is None else scale, dropout_p, byref(o), byref(w) if need_weights else None)
    if rc:
        _raise(rc)
    return o.value, w.value




def pointwise_loss(kind: int, x: int, y: int, reduction: int) -> Record:
    return _new(_lib.lucid_pointwise_loss, kind, x, y, reduction)


def nll_loss(x: int, y: int, w: int, ignore_index: int, reduction: int) -> Record:
    return _new(_lib.lucid_nll_loss, x, y, w, _int64(ignore_index), reduction)


def cross_entropy(x: int, y: int, w: int, ignore_index: int, reduction: int, label_smoothing: float) -> Record:
    return _new(_lib.lucid_cross_entropy, x, y, w, _int64(ignore_index), reduction, label_smoothing)


def bce_with_logits(x: int, y: int, w: int, pos_weight: int, reduction: int) -> Record:
    return _new(_lib.lucid_bce_with_logits, x, y, w, pos_weight, reduction)


def raw_library():
    """The loaded library, for tests that exercise the C ABI directly."""
    return _lib
