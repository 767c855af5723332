"""The loaded engine library, its errors, and the conversions every entry point shares.

Every exported symbol gets its ctypes signature from include/lucid.h (through _abi.py); every
call checks the engine's status and raises the matching Python exception with the engine's
message. Handles are plain ``int``s. An op returns its result's record (a ctypes array, see
`Record`): the handle with the metadata the engine wrote in the same call.
"""

from __future__ import annotations

import ctypes
import os
import sys
from ctypes import c_int32, c_int64, c_uint32
from pathlib import Path

from .. import _native
from . import _abi

_LIB_NAME = "liblucid.dylib" if sys.platform == "darwin" else "liblucid.so"


def _find_library() -> Path:
    # LUCID_ENGINE_LIBRARY loads another build of the engine, e.g. the check build whose
    # "metal" device runs on the emulated Metal backend (`make metal-emulated` prints its path).
    override = os.environ.get("LUCID_ENGINE_LIBRARY")
    if override:
        if not Path(override).is_file():
            raise ImportError(f"lucid: LUCID_ENGINE_LIBRARY names {override}, which is not a file")
        return Path(override)
    package = Path(__file__).resolve().parent.parent
    candidates = [package / "_lib" / _LIB_NAME, package.parent / ".build" / "release" / _LIB_NAME]
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
path = str(_find_library())
lib = ctypes.CDLL(path)

# Every entry point's ctypes signature, generated from include/lucid.h (tools/gen_abi.py). The
# ones whose arguments are all 32-bit integers or data pointers get no argtypes: ctypes then
# passes a Python int as a 32-bit int and an array, byref() or None as a pointer exactly, with
# no conversion per call. Their callers pass nothing else.
for _name, (_args, _res) in _abi.SIGNATURES.items():
    _fn = getattr(lib, _name)
    if _name not in _abi.UNCONVERTED:
        _fn.argtypes = _args
    _fn.restype = _res

# Status codes -> Python exception types.
_ERRORS = {
    _abi.LUCID_ERR_VALUE: ValueError,
    _abi.LUCID_ERR_TYPE: TypeError,
    _abi.LUCID_ERR_INDEX: IndexError,
    _abi.LUCID_ERR_RUNTIME: RuntimeError,
    _abi.LUCID_ERR_HANDLE: ValueError,
    _abi.LUCID_ERR_THREAD: RuntimeError,
}


def raise_error(status: int):
    """Raises the exception for a failed call's status, with the engine's message."""
    msg = lib.lucid_last_error()
    text = msg.decode("utf-8", "replace") if msg else f"engine error {status}"
    raise _ERRORS.get(status, RuntimeError)(text)


def out_of_range(name: str, value):
    """An int64 argument ctypes would wrap silently: refused instead."""
    raise ValueError(f"{name}: {value} does not fit in a 64-bit integer")


# An op's result as the engine describes it (include/lucid.h, enum lucid_record_field).
Record = c_int64 * _abi.LUCID_RECORD_LEN


def int64s(values, count=None):
    """A C array of int64 `values` and its count; None (no array) is NULL with count -1. With
    `count`, the array alone, which must hold that many values."""
    if values is None:
        if count is not None:
            raise ValueError("an array is required here")
        return None, -1
    n = len(values)
    if count is not None and n != count:
        raise ValueError(f"expected {count} values, got {n}")
    for v in values:
        if not -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
            out_of_range("array element", v)
    array = (c_int64 * max(n, 1))(*values)
    return array if count is not None else (array, n)


def handles(values, count=None):
    """A C array of the handles of `values` (tensors or handles) and its count (the array alone
    with `count`); the caller's sequence keeps its tensors alive through the call."""
    n = len(values)
    if count is not None and n != count:
        raise ValueError(f"expected {count} tensors, got {n}")
    array = (c_uint32 * max(n, 1))(*(v if v.__class__ is int else v._h for v in values))
    return array if count is not None else (array, n)


def subscript(items):
    """``items``: (kind, (v0, v1, v2), flags, handle) tuples, as the C arrays of a subscript and
    their count."""
    n = len(items)
    kinds, values = (c_int32 * max(n, 1))(), (c_int64 * max(3 * n, 1))()
    flags, tensors = (c_int32 * max(n, 1))(), (c_uint32 * max(n, 1))()
    for i, (kind, vals, flag, handle) in enumerate(items):
        kinds[i], flags[i], tensors[i] = kind, flag, handle
        for j, v in enumerate(vals):
            if not -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
                out_of_range("index", v)
            values[3 * i + j] = v
    return kinds, values, flags, tensors, n


_NAMES = {}  # names as the entry points take them, encoded once


def name(text: str) -> bytes:
    encoded = _NAMES.get(text)
    if encoded is None:
        encoded = text.encode()
        if len(_NAMES) < 4096:  # op names are few; a caller's own names need not stay
            _NAMES[text] = encoded
    return encoded


def text(value):
    """An engine-owned C string as a str (None for NULL)."""
    return None if value is None else value.decode()
