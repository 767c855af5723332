"""The entry points tools/gen_abi.py leaves to hand (_ops.HAND_WRITTEN): the autocast scope's
fast path, batched releases, backward and custom functions' callbacks, the engine's warnings,
and calls that write arrays back."""

from __future__ import annotations

import array
import atexit
import ctypes
import os
import sys
import threading
import warnings
from ctypes import POINTER, byref, c_char_p, c_double, c_int32, c_int64, c_uint32, c_uint64, c_void_p
from pathlib import Path

from . import _abi
from ._library import int64s, lib, path, raise_error
from ._ops import (
    device_info,
    dtype_info,
    metal_dispatch_entry,
    metal_fallback_entries,
    metal_fallback_entry,
    metal_libraries,
    metal_library_entry,
    metal_self_test_entry,
    op_count,
    op_info,
    metal_self_test as _metal_self_test,
)

__all__ = [
    "GuardSlot",
    "guard_slot",
    "guard_create",
    "guard_destroy",
    "guard_create_raw",
    "guard_destroy_raw",
    "set_grad_enabled_raw",
    "mode_slot",
    "release",
    "deferred",
    "DEFERRED_MAX",
    "DEFERRED_BYTES",
    "flush_releases",
    "backward",
    "pending_error",
    "custom_function_callbacks",
    "hook_callbacks",
    "autograd_backward",
    "autograd_grad",
    "MetalFallbackWarning",
    "set_element",
    "split",
    "tensor_shape",
    "attention",
    "metal_stats",
    "last_error",
    "dtype_table",
    "device_table",
    "op_table",
    "metal_self_test_report",
    "metal_host_fallback_counts",
    "metal_kernel_libraries",
    "amp_inspect_entry",
    "safetensors_tensor",
    "safetensors_write",
]


def last_error():
    """The calling thread's last error message, or None."""
    msg = lib.lucid_last_error()
    return None if msg is None else msg.decode("utf-8", "replace")


# ---- autocast scopes -------------------------------------------------------------------------

# Entering a scope is the hottest call there is. Its arguments are three 32-bit ints, which
# callers range-check, and a byref out-pointer: ctypes passes those exactly without argtypes,
# and skipping the per-argument conversion saves about a third of the call.
# They also take the engine's registry lock for a moment and nothing else, so they are called
# holding the GIL (through a PyDLL view of the same library): releasing and retaking it would
# cost more than the call.
_lib_holding_gil = ctypes.PyDLL(path)
guard_create_raw = _lib_holding_gil["guard_create"]
guard_create_raw.restype = c_int32
# Leaving one takes the handle as the c_uint64 (a GuardSlot) the engine wrote it into, which
# ctypes passes by value as it is: converting a Python int through argtypes would allocate a
# c_uint64 at every call, a quarter of an enter+exit.
guard_destroy_raw = _lib_holding_gil["guard_destroy"]
guard_destroy_raw.restype = c_int32


# Setting grad mode is as hot (every ``with no_grad()``) and as cheap in the engine (a
# thread-local write): called the same way, holding the GIL, without argtypes. Its arguments
# are the mode as 0 or 1 and a byref c_int32 for the mode it replaces, or None.
set_grad_enabled_raw = _lib_holding_gil["lucid_set_grad_enabled"]
set_grad_enabled_raw.restype = c_int32


class GuardSlot(c_uint64):
    """Where guard_create writes a handle: the caller holds it, so the handle is known as
    soon as the engine has made it, even if an exception (a KeyboardInterrupt) arrives
    before guard_create returns. 0 until then."""

    @property
    def handle(self) -> int:
        return self.value


def guard_slot():
    """A new GuardSlot and the pointer to it that ``guard_create_raw`` writes through."""
    slot = GuardSlot()
    return slot, byref(slot)


def mode_slot():
    """A new c_int32 and the pointer to it that ``set_grad_enabled_raw`` writes the mode it
    replaces through."""
    slot = c_int32()
    return slot, byref(slot)


def guard_create(device: int, enabled: int, dtype: int, slot: GuardSlot | None = None) -> int:
    out = GuardSlot() if slot is None else slot
    rc = guard_create_raw(device, enabled, dtype, byref(out))
    if rc:
        raise_error(rc)
    return out.value


def guard_destroy(handle: int) -> None:
    rc = guard_destroy_raw(c_uint64(handle))
    if rc:
        raise_error(rc)


# ---- releases --------------------------------------------------------------------------------

_release, _release_many = lib.lucid_tensor_release, lib.lucid_tensor_release_many

# Releases of small tensors outside any graph wait here and go to the engine together, in one
# call per DEFERRED_MAX of them: a tensor's release then costs an append instead of a call
# (Tensor.__del__ reads the record and decides). What waits keeps at most DEFERRED_MAX *
# DEFERRED_BYTES bytes alive; a tensor that takes part in autograd (it may hold a graph) or
# keeps more storage alive is released at once.
DEFERRED_MAX = 256
DEFERRED_BYTES = 1 << 16
# An array of uint32, as the engine takes handles: a batch is handed over as its memory, with
# no conversion of each handle into a ctypes array element (which costs as much as a release).
deferred = array.array("I")
_flush_lock = threading.Lock()


def release(handle: int) -> None:
    """Releases a handle now."""
    _release(handle)


def flush_releases() -> None:
    """Releases every deferred handle now. Safe from any thread and from a finalizer; a call
    that finds another thread (or itself, re-entered) flushing leaves the work to that one."""
    if not _flush_lock.acquire(blocking=False):
        return
    try:
        n = len(deferred)
        if n:
            # Appends from other threads land after the first n, which only a flush removes.
            batch = deferred[:n]
            del deferred[:n]
            _release_many((c_uint32 * n).from_buffer(batch), n)
    finally:
        _flush_lock.release()


atexit.register(flush_releases)


def _reset_flush_lock_in_child():
    # A fork while another thread flushed would leave the child's copy of the lock held.
    global _flush_lock
    _flush_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_flush_lock_in_child)


# ---- autograd ----------------------------------------------------------------------------------

# An exception raised by a custom function's Python backward (lucid.autograd), kept for the
# thread whose backward() called it, to be raised there as it is.
pending_error = threading.local()


def backward(t: int, grad: int, retain_graph: bool) -> None:
    pending_error.exception = None
    rc = lib.lucid_backward(t, grad, 1 if retain_graph else 0)
    _hook_result.value = None  # the engine holds what it kept of it
    if rc:
        _raise_pending(rc)


def _raise_pending(rc):
    raised = pending_error.exception
    pending_error.exception = None
    if raised is not None:
        raise raised
    raise_error(rc)


def autograd_backward(tensors, grads, inputs, retain_graph: bool) -> None:
    """One backward pass from several tensors (`grads`: a handle or 0 each); with `inputs`,
    only those accumulate."""
    n, m = len(tensors), len(inputs)
    roots, seeds = (c_uint32 * max(n, 1))(*tensors), (c_uint32 * max(n, 1))(*grads)
    ins = (c_uint32 * max(m, 1))(*inputs)
    pending_error.exception = None
    rc = lib.lucid_autograd_backward(roots, seeds, n, ins, m, 1 if retain_graph else 0)
    _hook_result.value = None  # the engine holds what it kept of it
    if rc:
        _raise_pending(rc)


def autograd_grad(outputs, grad_outputs, inputs, retain_graph: bool, allow_unused: bool) -> list:
    """The handles of the gradients of `outputs` with respect to `inputs` (0 where unused)."""
    n, m = len(outputs), len(inputs)
    outs, seeds = (c_uint32 * max(n, 1))(*outputs), (c_uint32 * max(n, 1))(*grad_outputs)
    ins, grads = (c_uint32 * max(m, 1))(*inputs), (c_uint32 * max(m, 1))()
    pending_error.exception = None
    rc = lib.lucid_autograd_grad(outs, seeds, n, ins, m, 1 if retain_graph else 0, 1 if allow_unused else 0, grads)
    _hook_result.value = None  # the engine holds what it kept of it
    if rc:
        _raise_pending(rc)
    return list(grads[:m])


_HOOK_CALL = ctypes.CFUNCTYPE(c_int32, c_uint64, c_uint32, POINTER(c_uint32))
_HOOK_RELEASE = ctypes.CFUNCTYPE(None, c_uint64)
_hook_callbacks = None  # the C callbacks, alive for the process once registered
# What the last hook on this thread returned, alive until the engine has taken it (it reads
# the handle as the callback returns).
_hook_result = threading.local()


def hook_callbacks(call, release) -> None:
    """Registers gradient hooks' Python side with the engine: ``call(context, handle)`` returns
    a replacement tensor or None and may raise (the exception is raised again by the backward
    call); ``release(context)`` says the engine is done with it."""
    global _hook_callbacks

    def on_call(context, handle, replacement):
        try:
            result = call(context, handle)
            _hook_result.value = result
            replacement[0] = 0 if result is None else result._h
            return 0
        except BaseException as e:  # handed to the thread that called backward()
            pending_error.exception = e
            return 1

    callbacks = (_HOOK_CALL(on_call), _HOOK_RELEASE(release))
    rc = lib.lucid_hook_callbacks(ctypes.cast(callbacks[0], c_void_p), ctypes.cast(callbacks[1], c_void_p))
    if rc:
        raise_error(rc)
    _hook_callbacks = callbacks


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
    rc = lib.lucid_custom_function_callbacks(ctypes.cast(callbacks[0], c_void_p), ctypes.cast(callbacks[1], c_void_p))
    if rc:
        raise_error(rc)
    _custom_callbacks = callbacks


# ---- warnings ----------------------------------------------------------------------------------


class MetalFallbackWarning(RuntimeWarning):
    """Device ``"metal"`` is served by the host fallback because Metal is unavailable."""


_WARNING_FN = ctypes.CFUNCTYPE(None, c_char_p)
_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)


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
lib.lucid_set_warning_handler(ctypes.cast(_warning_callback, c_void_p))


# ---- calls that write arrays back, or pick their outputs ---------------------------------------

_PAD = ((0, 0, 0, 0), (0, 0, 0), (0, 0), (0,), ())
_set_element = lib.lucid_set_element


def set_element(dst: int, index: tuple, value: float, int_value: int, kind: int) -> None:
    """``dst[index] = scalar`` for one int per dimension (at most 4), unrecorded: Python's
    ``x[i] = v``. The caller passes ints in range (a Python subscript's)."""
    n = len(index)
    if n == 1:  # the commonest: one call with no padding made
        rc = _set_element(dst, 1, index[0], 0, 0, 0, value, int_value, kind)
    else:
        i0, i1, i2, i3 = index + _PAD[n]
        rc = _set_element(dst, n, i0, i1, i2, i3, value, int_value, kind)
    if rc:
        raise_error(rc)


def split(a: int, mode: int, sizes, dim: int, capacity: int) -> list:
    """The handles of lucid_split's pieces (at most `capacity` of them)."""
    arr, n = int64s(sizes)
    capacity = max(capacity, 1)
    outs, count = (c_uint32 * capacity)(), c_int32()
    rc = lib.lucid_split(a, mode, arr, n, dim, outs, capacity, byref(count))
    if rc:
        raise_error(rc)
    return list(outs[: count.value])


def tensor_shape(t: int, ndim: int):
    """(sizes, strides) of a tensor of `ndim` dimensions."""
    shape, strides = (c_int64 * max(ndim, 1))(), (c_int64 * max(ndim, 1))()
    rc = lib.lucid_tensor_shape(t, shape, strides, ndim)
    if rc:
        raise_error(rc)
    return tuple(shape[:ndim]), tuple(strides[:ndim])


def attention(q, k, v, mask, causal, scale, dropout_p, need_weights):
    """(output handle, weights handle or 0); the weights are made only when asked for."""
    o, w = c_uint32(), c_uint32()
    rc = lib.lucid_attention(
        q,
        k,
        v,
        mask,
        1 if causal else 0,
        0 if scale is None else 1,
        0.0 if scale is None else scale,
        dropout_p,
        byref(o),
        byref(w) if need_weights else None,
    )
    if rc:
        raise_error(rc)
    return o.value, w.value


_METAL_STATS = ("command_buffers", "host_waits", "new_buffers", "cached_bytes", "host_fallbacks", "library_compiles")


def metal_stats() -> dict:
    """The Metal backend's counters by name, with "dispatches": {kernel: count}."""
    values = (c_int64 * (len(_METAL_STATS) + 1))()
    rc = lib.lucid_metal_stats(values, len(values))
    if rc:
        raise_error(rc)
    stats = dict(zip(_METAL_STATS, values))
    stats["dispatches"] = dict(metal_dispatch_entry(i) for i in range(values[len(_METAL_STATS)]))
    return stats


def amp_inspect_entry(index: int):
    """Record `index` of the calling thread's last ended inspection: (op, module, device code,
    dtype code, calls, inputs, results, verdict code, reason), inputs and results each
    (elements, max |x|, then the six band counts of lucid_amp_inspect_entry's order)."""
    op, module, device, dtype, calls = c_char_p(), c_char_p(), c_int32(), c_int32(), c_int64()
    values, verdict, reason = (c_double * 16)(), c_int32(), c_char_p()
    rc = lib.lucid_amp_inspect_entry(
        index,
        byref(op),
        byref(module),
        byref(device),
        byref(dtype),
        byref(calls),
        values,
        byref(verdict),
        byref(reason),
    )
    if rc:
        raise_error(rc)
    return (
        op.value.decode(),
        module.value.decode(),
        device.value,
        dtype.value,
        calls.value,
        tuple(values[0:8]),
        tuple(values[8:16]),
        verdict.value,
        reason.value.decode(),
    )


def safetensors_tensor(index: int):
    """Tensor `index` of the calling thread's last lucid_safetensors_read: (name, dtype name,
    shape, offset, nbytes)."""
    name, dtype, ndim, offset, nbytes = c_char_p(), c_char_p(), c_int32(), c_int64(), c_int64()
    shape = (c_int64 * 64)()
    rc = lib.lucid_safetensors_tensor(
        index, byref(name), byref(dtype), shape, 64, byref(ndim), byref(offset), byref(nbytes)
    )
    if rc:
        raise_error(rc)
    n = ndim.value
    return name.value.decode(), dtype.value.decode(), tuple(shape[:n]), offset.value, nbytes.value


def _c_strings(texts):
    return (c_char_p * max(len(texts), 1))(*[t.encode() for t in texts])


def safetensors_write(tensors, metadata) -> bytes:
    """The safetensors file of `tensors` ((name, dtype name, shape, C-contiguous numpy array) each)
    and `metadata` ({str: str}), laid out and written by the engine."""
    count = len(tensors)
    names = _c_strings([t[0] for t in tensors])
    dtypes = _c_strings([t[1] for t in tensors])
    ndims = (c_int32 * max(count, 1))(*[len(t[2]) for t in tensors])
    dims = [int(d) for t in tensors for d in t[2]]
    shapes = (c_int64 * max(len(dims), 1))(*dims)
    # Pointers into the arrays (kept alive by `tensors` through the calls).
    data = (c_void_p * max(count, 1))(*[t[3].ctypes.data if t[3].nbytes else None for t in tensors])
    nbytes = (c_int64 * max(count, 1))(*[t[3].nbytes for t in tensors])
    keys, values = _c_strings(list(metadata)), _c_strings(list(metadata.values()))
    size = c_int64()
    args = (names, dtypes, ndims, shapes, data, nbytes, count, keys, values, len(metadata))
    rc = lib.lucid_safetensors_write(*args, None, 0, byref(size))
    if rc:
        raise_error(rc)
    out = ctypes.create_string_buffer(size.value)
    rc = lib.lucid_safetensors_write(*args, out, size.value, byref(size))
    if rc:
        raise_error(rc)
    return out.raw


# ---- tables ------------------------------------------------------------------------------------


def dtype_table():
    """(code, name, itemsize, is_floating) of every dtype the engine has, by code."""
    return [(code, *dtype_info(code)) for code in sorted(_abi.ENUMS["lucid_dtype"].values())]


def device_table():
    """(code, name) of every device the engine has, by code."""
    return [(code, device_info(code)) for code in sorted(_abi.ENUMS["lucid_device"].values())]


def op_table():
    """[(name, autocast policy code, cpu bfloat16 kernel)] for every op."""
    return [op_info(i) for i in range(op_count())]


def metal_self_test_report() -> list:
    """Runs the Metal backend's self-test; (op, dtype code, max error, tolerance, detail) per check."""
    checks, _ = _metal_self_test()
    return [metal_self_test_entry(i) for i in range(checks)]


def metal_host_fallback_counts() -> dict:
    """{op: times it ran on the host fallback} on the "metal" device."""
    return dict(metal_fallback_entry(i) for i in range(metal_fallback_entries()))


def metal_kernel_libraries() -> dict:
    """{family: (origin, detail, error)} of the Metal backend's kernel libraries."""
    entries = (metal_library_entry(i) for i in range(metal_libraries()))
    return {family: (origin, detail, error) for family, origin, detail, error in entries}
