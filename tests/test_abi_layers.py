"""The layer part of the C ABI called directly: null pointers, bad codes, bad handles and
capacity limits give errors (and leak no handles), never a crash."""

import ctypes
from ctypes import byref, c_int32, c_int64, c_uint32

import numpy as np
import pytest

import lucid
from lucid import _C
from lucid._C import _abi

lib = ctypes.CDLL(_C.lib._name)
# Declared from the header (through lucid/_C/_abi.py), with argtypes even where lucid itself calls
# without them, so that a wrong argument here is an error and not a silent truncation.
for name in (
    "lucid_last_error",
    "lucid_live_tensors",
    "lucid_split",
    "lucid_index",
    "lucid_attention",
    "lucid_max_dim",
    "lucid_compare",
    "lucid_conv2d",
    "lucid_cat",
    "lucid_pointwise_loss",
):
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = _abi.SIGNATURES[name]

E_VALUE, E_HANDLE = 1, 5


def live():
    n = c_int64()
    assert lib.lucid_live_tensors(byref(n)) == 0
    return n.value


def error():
    return lib.lucid_last_error().decode()


@pytest.fixture
def x():
    return lucid.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))


def test_split_checks_capacity_and_null_outputs(x):
    before = live()
    outs, count = (c_uint32 * 2)(), c_int32()
    size = (c_int64 * 1)(1)
    assert lib.lucid_split(x._h, 1, size, 1, 1, outs, 2, byref(count)) == E_VALUE  # 4 pieces, 2 slots
    assert "do not fit" in error()
    assert lib.lucid_split(x._h, 1, size, 1, 1, None, 4, None) == E_VALUE
    assert lib.lucid_split(x._h, 9, size, 1, 1, outs, 2, byref(count)) == E_VALUE
    assert live() == before


def test_index_rejects_bad_kinds_and_null_arrays(x):
    out = _C.Record()
    kinds, values = (c_int32 * 1)(7), (c_int64 * 3)()
    flags, handles = (c_int32 * 1)(), (c_uint32 * 1)()
    assert lib.lucid_index(x._h, kinds, values, flags, handles, 1, out) == E_VALUE
    assert "unknown item kind" in error()
    assert lib.lucid_index(x._h, None, None, None, None, 1, out) == E_VALUE
    kinds[0] = 4
    handles[0] = 123456789
    assert lib.lucid_index(x._h, kinds, values, flags, handles, 1, out) == E_HANDLE
    assert out[_C.RECORD_HANDLE] == 0  # a failing call writes nothing


def test_two_output_calls_check_every_pointer_first(x):
    before = live()
    v = c_uint32()
    assert lib.lucid_max_dim(x._h, 1, 0, 1, byref(v), None) == E_VALUE
    assert live() == before
    o = c_uint32()
    assert lib.lucid_attention(x._h, x._h, x._h, 0, 0, 0, 0.0, 0.0, byref(o), None) == 0  # weights optional
    assert live() == before + 1
    lucid._C.release(o.value)
    assert lib.lucid_attention(x._h, x._h, x._h, 0, 0, 0, 0.0, 0.0, None, None) == E_VALUE


def test_bad_codes_and_handles(x):
    out = _C.Record()
    assert lib.lucid_compare(17, x._h, x._h, out) == E_VALUE
    assert lib.lucid_pointwise_loss(0, x._h, x._h, 5, out) == E_VALUE
    assert "reduction" in error()
    assert lib.lucid_conv2d(x._h, x._h, 0, None, out) == E_VALUE  # null params
    assert lib.lucid_cat(None, 2, 0, 0, out) == E_VALUE
    assert lib.lucid_cat((c_uint32 * 1)(0), 1, 0, 0, out) == E_HANDLE


def test_devices_must_match():
    a, b = lucid.ones(2, 3), lucid.ones(2, 3, device="metal")
    for call in (
        lambda: lucid.where(a > 0, a, b),
        lambda: lucid.cat([a, b]),
        lambda: lucid.maximum(a, b),
        lambda: lucid.nn.functional.mse_loss(a, b),
        lambda: a.gather(1, lucid.tensor([[0]], device="metal")),
    ):
        with pytest.raises(RuntimeError, match="one device"):
            call()
