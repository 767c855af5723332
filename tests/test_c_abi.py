"""The C ABI used directly: guard_create/guard_destroy and tensor handles under misuse.
Every bad call must return an error status with a message and leave the state intact."""

import ctypes
import threading
import time
from ctypes import POINTER, byref, c_char_p, c_double, c_int32, c_int64, c_uint64, c_void_p

import numpy as np
import pytest

import lucid
from lucid import _engine
from helpers import OFF, autocast_state

lib = ctypes.CDLL(str(_engine._find_library()))
for name, args, res in [
    ("guard_create", [c_int32, c_int32, c_int32, POINTER(c_uint64)], c_int32),
    ("guard_destroy", [c_uint64], c_int32),
    ("lucid_last_error", [], c_char_p),
    ("lucid_autocast_get_dtype", [c_int32, POINTER(c_int32)], c_int32),
    ("lucid_autocast_is_enabled", [c_int32, POINTER(c_int32)], c_int32),
    ("lucid_autocast_live_guards", [POINTER(c_int64)], c_int32),
    ("lucid_tensor_from_host", [c_void_p, c_int64, POINTER(c_int64), c_int32, c_int32, c_int32, POINTER(c_uint64)],
     c_int32),
    ("lucid_tensor_release", [c_uint64], c_int32),
    ("lucid_binary", [c_int32, c_uint64, c_uint64, POINTER(c_uint64)], c_int32),
    ("lucid_live_tensors", [POINTER(c_int64)], c_int32),
    ("lucid_tensor_to_host", [c_uint64, c_void_p, c_int64], c_int32),
    ("lucid_tensor_shape", [c_uint64, POINTER(c_int64), POINTER(c_int64), c_int32], c_int32),
    ("lucid_reduce", [c_int32, c_uint64, POINTER(c_int64), c_int32, c_int32, POINTER(c_uint64)], c_int32),
]:
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = args, res

OK, E_VALUE, E_TYPE, E_INDEX, E_RUNTIME, E_HANDLE, E_THREAD = range(7)
METAL, CPU = 1, 0
F16, BF16, I32 = 1, 2, 3


def last_error():
    return lib.lucid_last_error().decode()


def create(device=METAL, enabled=1, dtype=F16):
    h = c_uint64()
    assert lib.guard_create(device, enabled, dtype, byref(h)) == OK, last_error()
    assert h.value != 0
    return h.value


def live_guards():
    n = c_int64()
    assert lib.lucid_autocast_live_guards(byref(n)) == OK
    return n.value


def metal_dtype_code():
    c = c_int32()
    assert lib.lucid_autocast_get_dtype(METAL, byref(c)) == OK
    return c.value


def in_thread(fn):
    box = {}
    t = threading.Thread(target=lambda: box.update(value=fn()))
    t.start()
    t.join()
    return box["value"]


def wait_until(cond, timeout=5.0):
    # A thread's engine state is retired by its thread-exit destructor, which runs just after
    # Python's join() has returned.
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.005)
    return cond()


def test_symbols_are_exported_under_their_names():
    for name in ["guard_create", "guard_destroy", "lucid_last_error", "lucid_tensor_release", "lucid_binary"]:
        assert hasattr(lib, name)
    assert not hasattr(lib, "lucid_guard_create")


def test_guard_round_trip_is_visible_to_python():
    h = create(METAL, 1, BF16)
    assert lucid.amp.get_autocast_dtype("metal") == lucid.bfloat16
    assert lucid.amp.is_autocast_enabled("metal") and not lucid.amp.is_autocast_enabled("cpu")
    assert lib.guard_destroy(h) == OK
    assert autocast_state() == OFF


def test_python_scope_is_visible_to_the_abi():
    with lucid.amp.autocast():
        assert metal_dtype_code() == F16
        enabled = c_int32()
        assert lib.lucid_autocast_is_enabled(-1, byref(enabled)) == OK and enabled.value == 1
    assert metal_dtype_code() == -1


def test_double_destroy_is_an_error_and_changes_nothing():
    outer = create(METAL, 1, BF16)
    h = create(METAL, 1, F16)
    assert lib.guard_destroy(h) == OK
    assert metal_dtype_code() == BF16
    assert lib.guard_destroy(h) == E_HANDLE
    assert f"{h:x}" in last_error() and "not a live" in last_error()
    assert metal_dtype_code() == BF16
    assert lib.guard_destroy(outer) == OK


@pytest.mark.parametrize("bogus", [0, 1, 12345, 2**63 + 7, 2**64 - 1])
def test_bogus_guard_handles(bogus):
    h = create()
    assert lib.guard_destroy(bogus) == E_HANDLE
    assert last_error()
    assert metal_dtype_code() == F16
    assert lib.guard_destroy(h) == OK


def test_a_tensor_handle_is_not_a_guard():
    t = lucid.ones(2)
    assert lib.guard_destroy(t._h) == E_HANDLE


def test_destroy_from_another_thread_is_refused():
    h = create(METAL, 1, BF16)
    status, message, there = in_thread(lambda: (lib.guard_destroy(h), last_error(), metal_dtype_code()))
    assert status == E_THREAD
    assert "can only be destroyed" in message and "nothing was changed" in message
    assert there == -1                      # the other thread's state is untouched
    assert metal_dtype_code() == BF16       # and so is the owner's
    assert lib.guard_destroy(h) == OK
    assert metal_dtype_code() == -1


def test_guard_outliving_its_thread_is_harmless():
    base = live_guards()
    h = in_thread(lambda: create(CPU, 1, BF16))
    assert wait_until(lambda: live_guards() == base)
    assert autocast_state() == OFF
    assert lib.guard_destroy(h) == E_HANDLE   # stale now
    assert autocast_state() == OFF


@pytest.mark.parametrize("device,dtype", [(7, F16), (-2, F16), (METAL, I32), (METAL, 99), (CPU, 5)])
def test_invalid_codes_change_no_state(device, dtype):
    h = c_uint64(0)
    assert lib.guard_create(device, 1, dtype, byref(h)) == E_VALUE
    assert last_error()
    assert h.value == 0
    assert autocast_state() == OFF


def test_null_out_pointers_are_errors():
    assert lib.guard_create(METAL, 1, F16, None) == E_VALUE
    assert "null" in last_error()
    assert autocast_state() == OFF
    assert lib.lucid_autocast_get_dtype(METAL, None) == E_VALUE
    assert lib.lucid_live_tensors(None) == E_VALUE


def test_last_error_is_per_thread():
    assert lib.guard_destroy(424242) == E_HANDLE
    mine = last_error()
    other = in_thread(lambda: (lib.guard_destroy(0), last_error())[1])
    assert "null" in other
    assert last_error() == mine


# ---- tensor handles -------------------------------------------------------------------------

def new_tensor(values=(1.0, 2.0, 3.0)):
    a = np.asarray(values, dtype=np.float32)
    shape = (c_int64 * 1)(a.size)
    h = c_uint64()
    assert lib.lucid_tensor_from_host(a.ctypes.data, a.nbytes, shape, 1, 0, CPU, byref(h)) == OK, last_error()
    return h.value


def live_tensors():
    n = c_int64()
    assert lib.lucid_live_tensors(byref(n)) == OK
    return n.value


def test_tensor_release_twice_and_use_after_release():
    base = live_tensors()
    t = new_tensor()
    assert live_tensors() == base + 1
    assert lib.lucid_tensor_release(t) == OK
    assert lib.lucid_tensor_release(t) == E_HANDLE
    out = c_uint64()
    assert lib.lucid_binary(0, t, t, byref(out)) == E_HANDLE and out.value == 0
    assert "not live" in last_error()
    assert live_tensors() == base


def test_slot_reuse_does_not_revive_a_stale_handle():
    t = new_tensor()
    assert lib.lucid_tensor_release(t) == OK
    u = new_tensor()          # may reuse the slot, never the handle
    assert u != t
    assert lib.lucid_tensor_release(t) == E_HANDLE
    assert lib.lucid_tensor_release(u) == OK


def test_from_host_validates_its_arguments():
    a = np.zeros(4, dtype=np.float32)
    shape = (c_int64 * 1)(4)
    out = c_uint64()
    assert lib.lucid_tensor_from_host(a.ctypes.data, 12, shape, 1, 0, CPU, byref(out)) == E_VALUE
    assert "expected 16 bytes" in last_error()
    assert lib.lucid_tensor_from_host(None, 16, shape, 1, 0, CPU, byref(out)) == E_VALUE
    neg = (c_int64 * 1)(-4)
    assert lib.lucid_tensor_from_host(a.ctypes.data, 16, neg, 1, 0, CPU, byref(out)) == E_VALUE
    assert lib.lucid_tensor_from_host(a.ctypes.data, 16, shape, 1, 42, CPU, byref(out)) == E_VALUE
    assert lib.lucid_tensor_from_host(a.ctypes.data, 16, shape, 1, 0, 9, byref(out)) == E_VALUE
    assert lib.lucid_tensor_from_host(a.ctypes.data, 16, None, 1, 0, CPU, byref(out)) == E_VALUE
    assert lib.lucid_tensor_from_host(a.ctypes.data, 16, shape, -1, 0, CPU, byref(out)) == E_VALUE
    assert lib.lucid_tensor_from_host(a.ctypes.data, 16, shape, 1, 0, CPU, None) == E_VALUE
    huge = (c_int64 * 2)(2**62, 2**62)
    assert lib.lucid_tensor_from_host(a.ctypes.data, 16, huge, 2, 0, CPU, byref(out)) == E_VALUE
    assert out.value == 0


def test_to_host_and_shape_validate_buffers():
    t = new_tensor()
    buf = np.zeros(3, dtype=np.float32)
    assert lib.lucid_tensor_to_host(t, buf.ctypes.data, 8) == E_VALUE
    assert lib.lucid_tensor_to_host(t, None, 12) == E_VALUE
    assert lib.lucid_tensor_to_host(t, buf.ctypes.data, 12) == OK
    np.testing.assert_array_equal(buf, [1, 2, 3])
    shape = (c_int64 * 1)()
    assert lib.lucid_tensor_shape(t, shape, None, 0) == E_VALUE
    assert lib.lucid_tensor_shape(t, shape, None, 1) == OK and shape[0] == 3
    dims = (c_int64 * 1)(5)
    out = c_uint64()
    assert lib.lucid_reduce(0, t, dims, 1, 0, byref(out)) == E_INDEX
    assert "out of range" in last_error()
    assert lib.lucid_reduce(9, t, dims, 1, 0, byref(out)) == E_VALUE
    assert lib.lucid_tensor_release(t) == OK


def test_python_tensors_release_their_handles():
    before = live_tensors()
    for _ in range(200):
        x = lucid.ones(3, 3)
        (x @ x.T).sum(0).reshape(-1)
        v = x.T
        del x
        v.numpy()
    del v
    assert live_tensors() == before


def test_a_view_outlives_its_source():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = lucid.tensor(a)
    v = t.T
    del t
    np.testing.assert_array_equal(v.numpy(), a.T)
