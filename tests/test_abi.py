"""The engine's C ABI (include/lucid.h) called directly through ctypes."""

import ctypes
import gc
import threading
import time
from ctypes import byref, c_int32, c_int64, c_uint64

import numpy as np
import pytest

import lucid
from lucid import _C
from lucid._C import _abi

# A separate CDLL object, declared from the header (through lucid/_C/_abi.py) with argtypes for
# every call, even those lucid makes without them: a wrong argument here is an error.
lib = ctypes.CDLL(_C.lib._name)
for _name, (_args, _res) in _abi.SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.argtypes, _fn.restype = _args, _res
Record, HANDLE = _C.Record, _C.RECORD_HANDLE

OK, E_VALUE, E_TYPE, E_INDEX, E_RUNTIME, E_HANDLE, E_THREAD = range(7)
CPU, METAL = 0, 1
FLOAT32, FLOAT16, BFLOAT16, INT32, INT64, BOOL = range(6)
ADD = 0


def last_error():
    msg = lib.lucid_last_error()
    return None if msg is None else msg.decode()


def create(device=METAL, enabled=1, dtype=FLOAT16):
    h = c_uint64(0)
    rc = lib.guard_create(device, enabled, dtype, byref(h))
    assert rc == OK, last_error()
    assert h.value != 0
    return h.value


def dtype_code(device):
    out = c_int32(-99)
    assert lib.lucid_autocast_get_dtype(device, byref(out)) == OK
    return out.value


def enabled(device):
    out = c_int32(-99)
    assert lib.lucid_autocast_is_enabled(device, byref(out)) == OK
    return out.value


def abi_state():
    return (enabled(METAL), dtype_code(METAL), enabled(CPU), dtype_code(CPU), enabled(-1), dtype_code(-1))


ABI_OFF = (0, -1, 0, -1, 0, -1)


def live_guards():
    n = c_int64(-1)
    assert lib.lucid_autocast_live_guards(byref(n)) == OK
    return n.value


def live_tensors():
    _C.flush_releases()  # releases that Python has made but batches for the engine
    n = c_int64(-1)
    assert lib.lucid_live_tensors(byref(n)) == OK
    return n.value


def in_thread(fn):
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def wait_until(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def mentions(message, handle):
    return f"{handle:#x}" in message or f"{handle:x}" in message or str(handle) in message


# ---- symbols ----------------------------------------------------------------------------------


def test_guard_symbols_are_exported_unprefixed():
    assert callable(getattr(lib, "guard_create"))
    assert callable(getattr(lib, "guard_destroy"))
    for prefixed in ("lucid_guard_create", "lucid_guard_destroy"):
        with pytest.raises(AttributeError):
            getattr(lib, prefixed)


def test_rest_of_abi_is_lucid_prefixed():
    for name in _abi.SIGNATURES:
        if name not in ("guard_create", "guard_destroy"):
            assert name.startswith("lucid_")
            assert callable(getattr(lib, name))
    for unprefixed in ("tensor_release", "last_error", "autocast_live_guards", "binary"):
        with pytest.raises(AttributeError):
            getattr(lib, unprefixed)


# ---- guards -----------------------------------------------------------------------------------


def test_guard_round_trip():
    base = live_guards()
    h = create(CPU, 1, BFLOAT16)
    assert abi_state() == (0, -1, 1, BFLOAT16, 1, BFLOAT16)
    assert live_guards() == base + 1
    assert lib.guard_destroy(h) == OK
    assert abi_state() == ABI_OFF
    assert live_guards() == base


def test_default_dtype_code_is_float16():
    h = create(METAL, 1, -1)
    assert dtype_code(METAL) == FLOAT16
    assert lib.guard_destroy(h) == OK


def test_double_destroy():
    outer = create(METAL, 1, BFLOAT16)
    h = create(METAL, 1, FLOAT16)
    assert lib.guard_destroy(h) == OK
    assert dtype_code(METAL) == BFLOAT16
    base = live_guards()
    rc = lib.guard_destroy(h)
    assert rc == E_HANDLE
    msg = last_error()
    assert msg and mentions(msg, h), msg
    assert dtype_code(METAL) == BFLOAT16
    assert live_guards() == base
    assert lib.guard_destroy(outer) == OK
    assert abi_state() == ABI_OFF


def test_stale_handle_is_rejected_after_its_slot_is_reused():
    # The next scope takes the freed table slot; the old handle must not name it.
    old = create(CPU, 1, BFLOAT16)
    assert lib.guard_destroy(old) == OK
    new = create(CPU, 1, FLOAT16)
    assert new != old and (new & 0xFFFFFFFF) == (old & 0xFFFFFFFF)  # same slot, new generation
    assert lib.guard_destroy(old) == E_HANDLE and mentions(last_error(), old)
    assert dtype_code(CPU) == FLOAT16  # the live scope is untouched
    assert lib.guard_destroy(new) == OK
    assert abi_state() == ABI_OFF


@pytest.mark.parametrize("bogus", [0, 12345, 2**63 + 7])
def test_bogus_guard_handle(bogus):
    h = create(CPU, 1, BFLOAT16)
    assert h != bogus
    base = live_guards()
    rc = lib.guard_destroy(bogus)
    assert rc != OK
    assert rc == E_HANDLE
    assert last_error()
    assert dtype_code(CPU) == BFLOAT16
    assert live_guards() == base
    assert lib.guard_destroy(h) == OK


def test_tensor_handle_is_not_a_guard():
    t = lucid.ones(2)
    h = create()
    if t._h != h:
        assert lib.guard_destroy(t._h) == E_HANDLE
    assert dtype_code(METAL) == FLOAT16
    assert lib.guard_destroy(h) == OK


def test_destroy_from_another_thread():
    h = create(METAL, 1, BFLOAT16)
    base = live_guards()

    def other():
        return lib.guard_destroy(h), last_error(), abi_state()

    rc, msg, there = in_thread(other)
    assert rc == E_THREAD
    assert msg
    assert there == ABI_OFF  # the other thread saw and changed nothing
    assert abi_state() == (1, BFLOAT16, 0, -1, 1, BFLOAT16)  # the owner is untouched
    assert live_guards() == base
    assert lib.guard_destroy(h) == OK
    assert abi_state() == ABI_OFF


def test_guard_outliving_its_thread():
    base = live_guards()

    def make():
        h = create(CPU, 1, BFLOAT16)
        return h, live_guards(), abi_state()

    h, during, there = in_thread(make)
    assert during == base + 1
    assert there == (0, -1, 1, BFLOAT16, 1, BFLOAT16)
    assert abi_state() == ABI_OFF  # never visible on this thread
    assert wait_until(lambda: live_guards() == base), live_guards()
    rc = lib.guard_destroy(h)
    assert rc != OK
    assert last_error() and mentions(last_error(), h)
    assert abi_state() == ABI_OFF
    assert live_guards() == base


@pytest.mark.parametrize(
    "device,dtype",
    [(7, FLOAT16), (-2, FLOAT16), (METAL, INT32), (CPU, INT32), (METAL, 99), (CPU, BOOL), (METAL, INT64), (METAL, -2)],
)
def test_invalid_codes(device, dtype):
    outer = create(CPU, 1, FLOAT32)
    before, base = abi_state(), live_guards()
    h = c_uint64(0)
    rc = lib.guard_create(device, 1, dtype, byref(h))
    if rc == OK:  # undo a wrongly accepted guard before failing, so nothing leaks
        lib.guard_destroy(h.value)
        lib.guard_destroy(outer)
    assert rc == E_VALUE
    assert last_error()
    assert h.value == 0  # not written on error
    assert abi_state() == before
    assert live_guards() == base
    assert lib.guard_destroy(outer) == OK


def test_null_out_pointers():
    base = live_guards()
    assert lib.guard_create(METAL, 1, FLOAT16, None) != OK
    assert last_error()
    assert abi_state() == ABI_OFF
    assert live_guards() == base
    assert lib.lucid_autocast_get_dtype(METAL, None) != OK
    assert lib.lucid_autocast_is_enabled(-1, None) != OK
    assert lib.lucid_autocast_live_guards(None) != OK
    assert lib.lucid_live_tensors(None) != OK
    assert lib.lucid_op_count(None) != OK


def test_memory_stats_with_a_null_out_pointer_writes_neither():
    for device in (CPU, METAL):
        now, peak = c_int64(-7), c_int64(-7)
        assert lib.lucid_memory_stats(device, None, byref(peak)) != OK and last_error()
        assert lib.lucid_memory_stats(device, byref(now), None) != OK and last_error()
        assert now.value == -7 and peak.value == -7
        assert lib.lucid_memory_stats(device, byref(now), byref(peak)) == OK
        assert 0 <= now.value <= peak.value


@pytest.mark.parametrize("device", [2, 7, -2])
def test_queries_reject_invalid_device(device):
    out = c_int32(-99)
    assert lib.lucid_autocast_get_dtype(device, byref(out)) == E_VALUE
    assert out.value == -99
    assert lib.lucid_autocast_is_enabled(device, byref(out)) == E_VALUE
    assert out.value == -99


def test_guard_state_is_visible_to_python():
    h = create(METAL, 1, BFLOAT16)
    assert lucid.amp.is_autocast_enabled("metal") is True
    assert lucid.amp.get_autocast_dtype("metal") is lucid.bfloat16
    assert lucid.amp.is_autocast_enabled("cpu") is False
    assert lucid.amp.get_autocast_dtype() is lucid.bfloat16
    a = lucid.ones(2, 2, device="metal")
    assert (a @ a).dtype is lucid.bfloat16
    with lucid.amp.autocast("metal", dtype=lucid.float16):
        assert dtype_code(METAL) == FLOAT16
        g = create(METAL, 0, -1)
        assert lucid.amp.is_autocast_enabled("metal") is False
        assert lib.guard_destroy(g) == OK
        assert lucid.amp.get_autocast_dtype("metal") is lucid.float16
    assert lucid.amp.get_autocast_dtype("metal") is lucid.bfloat16
    assert lib.guard_destroy(h) == OK
    assert lucid.amp.is_autocast_enabled() is False


def test_python_scope_is_visible_to_abi():
    with lucid.amp.autocast():
        assert dtype_code(METAL) == FLOAT16
        assert enabled(METAL) == 1 and enabled(-1) == 1 and enabled(CPU) == 0
        with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
            assert dtype_code(CPU) == BFLOAT16
            assert dtype_code(-1) == BFLOAT16
        assert dtype_code(-1) == FLOAT16
    assert abi_state() == ABI_OFF


def test_python_scope_and_raw_guard_out_of_order():
    ac = lucid.amp.autocast("cpu", dtype=lucid.float32)
    ac.__enter__()
    h = create(CPU, 1, BFLOAT16)
    ac.__exit__(None, None, None)
    assert lucid.amp.get_autocast_dtype("cpu") is lucid.bfloat16
    assert lib.guard_destroy(h) == OK
    assert abi_state() == ABI_OFF


# ---- tensor handles --------------------------------------------------------------------------


def new_tensor(values, dtype=FLOAT32, np_dtype=np.float32, device=CPU):
    a = np.ascontiguousarray(values, dtype=np_dtype)
    shape = (c_int64 * max(a.ndim, 1))(*a.shape)
    rec = Record()
    rc = lib.lucid_tensor_from_host(a.ctypes.data, a.nbytes, shape, a.ndim, dtype, device, rec)
    assert rc == OK, last_error()
    return rec[HANDLE]


def to_numpy(h, shape, np_dtype=np.float32):
    out = np.empty(shape, dtype=np_dtype)
    assert lib.lucid_tensor_to_host(h, out.ctypes.data, out.nbytes) == OK, last_error()
    return out


def test_tensor_round_trip_and_binary_against_numpy():
    base = live_tensors()
    a = np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5
    b = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    ha, hb = new_tensor(a), new_tensor(b)
    out = Record()
    assert lib.lucid_binary(ADD, ha, hb, out) == OK
    np.testing.assert_array_equal(to_numpy(out[HANDLE], (2, 3)), a + b)
    # The record holds what the tensor's own queries say.
    assert (out[_C.RECORD_DTYPE], out[_C.RECORD_DEVICE], out[_C.RECORD_NDIM], out[_C.RECORD_REQUIRES_GRAD]) == (
        FLOAT32,
        CPU,
        2,
        0,
    )
    assert out[_C.RECORD_SHAPE : _C.RECORD_SHAPE + 2] == [2, 3]
    assert out[_C.RECORD_STRIDES : _C.RECORD_STRIDES + 2] == [3, 1]
    assert live_tensors() == base + 3
    for h in (ha, hb, out[HANDLE]):
        assert lib.lucid_tensor_release(h) == OK
    assert live_tensors() == base


def test_release_twice():
    base = live_tensors()
    h = new_tensor([1.0, 2.0])
    assert lib.lucid_tensor_release(h) == OK
    assert live_tensors() == base
    rc = lib.lucid_tensor_release(h)
    assert rc == E_HANDLE
    assert last_error()
    assert live_tensors() == base


def test_released_handle_in_binary():
    base = live_tensors()
    live = new_tensor([1.0, 2.0])
    dead = new_tensor([3.0, 4.0])
    assert lib.lucid_tensor_release(dead) == OK
    out = Record()
    # Both operands are looked up together: the message names the one that is not live,
    # whichever side it is on.
    dead_hex = f"0x{dead:x}"
    assert lib.lucid_binary(ADD, live, dead, out) == E_HANDLE
    assert out[HANDLE] == 0
    assert dead_hex in last_error()
    assert lib.lucid_binary(ADD, dead, live, out) == E_HANDLE
    assert dead_hex in last_error()
    assert lib.lucid_compare(0, live, dead, out) == E_HANDLE
    assert dead_hex in last_error()
    assert lib.lucid_matmul(live, dead, out) == E_HANDLE
    assert dead_hex in last_error()
    assert lib.lucid_matmul(dead, dead, out) == E_HANDLE
    assert out[HANDLE] == 0
    assert lib.lucid_tensor_release(live) == OK
    assert live_tensors() == base


def test_guard_handle_is_not_a_tensor():
    g = create()
    t = new_tensor([1.0])
    if g != t:
        assert lib.lucid_tensor_release(g) == E_HANDLE
    assert lib.lucid_tensor_release(t) == OK
    assert lib.guard_destroy(g) == OK


def _from_host(data, nbytes, shape, ndim, dtype=FLOAT32, device=CPU):
    out = Record()
    dims = None if shape is None else (c_int64 * max(len(shape), 1))(*shape)
    rc = lib.lucid_tensor_from_host(data, nbytes, dims, ndim, dtype, device, out)
    return rc, out[HANDLE]


def test_from_host_argument_errors():
    base = live_tensors()
    a = np.zeros((2, 3), dtype=np.float32)
    ptr = a.ctypes.data
    cases = [
        (ptr, a.nbytes - 4, (2, 3), 2, FLOAT32),  # too few bytes
        (ptr, a.nbytes + 4, (2, 3), 2, FLOAT32),  # too many bytes
        (ptr, a.nbytes, (2, 3), 2, FLOAT16),  # nbytes for float32, dtype float16
        (None, a.nbytes, (2, 3), 2, FLOAT32),  # null data with nonzero bytes
        (ptr, a.nbytes, (-2, -3), 2, FLOAT32),  # negative dims
        (ptr, a.nbytes, (2, -3), 2, FLOAT32),
        (ptr, a.nbytes, (2, 3), 2, 42),  # unknown dtype code
        (ptr, a.nbytes, (2, 3), 2, -1),
    ]
    for data, nbytes, shape, ndim, dt in cases:
        rc, h = _from_host(data, nbytes, shape, ndim, dt)
        assert rc == E_VALUE, (nbytes, shape, dt, rc)
        assert h == 0
        assert last_error()
    assert live_tensors() == base


def test_from_host_reports_byte_count():
    a = np.zeros(4, dtype=np.float32)
    rc, _ = _from_host(a.ctypes.data, 12, (4,), 1)
    assert rc == E_VALUE
    assert "16" in last_error()


def test_live_tensors_back_to_baseline():
    base = live_tensors()
    handles = [new_tensor(np.full(3, i, dtype=np.float32)) for i in range(10)]
    assert live_tensors() == base + 10
    for h in handles:
        assert lib.lucid_tensor_release(h) == OK
    assert live_tensors() == base


# ---- errors are per thread ----------------------------------------------------------------------


def test_last_error_is_thread_local():
    assert lib.guard_destroy(2**63 + 7) == E_HANDLE
    mine = last_error()
    assert mine and mentions(mine, 2**63 + 7)
    started, go = threading.Event(), threading.Event()
    box = {}

    def other():
        box["initial"] = last_error()
        a = np.zeros(4, dtype=np.float32)
        rc, _ = _from_host(a.ctypes.data, 3, (4,), 1)
        box["rc"] = rc
        box["msg"] = last_error()
        started.set()
        go.wait(5)
        box["later"] = last_error()

    t = threading.Thread(target=other)
    t.start()
    assert started.wait(5)
    assert last_error() == mine  # the other thread's failure did not touch ours
    assert lib.guard_destroy(0) == E_HANDLE  # a new failure here ...
    ours_now = last_error()
    go.set()
    t.join(5)
    assert box["rc"] == E_VALUE
    assert box["msg"] and box["msg"] != mine
    assert box["initial"] != mine
    assert box["later"] == box["msg"]  # ... does not touch theirs
    assert last_error() == ours_now


def test_slot_reuse_does_not_revive_a_stale_handle():
    t = new_tensor([1.0, 2.0])
    assert lib.lucid_tensor_release(t) == OK
    u = new_tensor([3.0])  # may reuse the slot, never the handle
    assert u != t
    assert lib.lucid_tensor_release(t) == E_HANDLE
    assert lib.lucid_tensor_release(u) == OK


def test_to_host_shape_and_reduce_validate_their_arguments():
    t = new_tensor([1.0, 2.0, 3.0])
    buf = np.zeros(3, dtype=np.float32)
    assert lib.lucid_tensor_to_host(t, buf.ctypes.data, 8) == E_VALUE
    assert lib.lucid_tensor_to_host(t, None, 12) == E_VALUE
    assert lib.lucid_tensor_to_host(t, buf.ctypes.data, 12) == OK
    np.testing.assert_array_equal(buf, [1, 2, 3])
    shape = (c_int64 * 1)()
    assert lib.lucid_tensor_shape(t, shape, None, 0) == E_VALUE
    assert lib.lucid_tensor_shape(t, shape, None, 1) == OK and shape[0] == 3
    dims = (c_int64 * 1)(5)
    out = Record()
    assert lib.lucid_reduce(0, t, dims, 1, 0, out) == E_INDEX
    assert "out of range" in last_error()
    assert lib.lucid_reduce(9, t, dims, 1, 0, out) == E_VALUE
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


# ---- codes ------------------------------------------------------------------------------------


def _unknown_code_calls(x, m):
    """(the kind of code the message names, a call of lucid._C's glue given an unknown one)."""
    return [
        ("dtype", lambda: _C.tensor_full((2,), 1.0, 0, _C.SCALAR_FLOAT, 42, CPU)),
        ("device", lambda: _C.tensor_to(x, -1, 7)),
        ("scalar kind", lambda: _C.fill(x, 1.0, 0, 9, "fill_")),
        ("binary op", lambda: _C.binary(1000, x, x)),
        ("unary op", lambda: _C.unary(-5, x)),
        ("comparison", lambda: _C.compare(6, x, x)),
        ("reduce op", lambda: _C.reduce(5, x, None, 0)),
        ("reduction", lambda: _C.pointwise_loss(_C.LOSS_MSE, x, x, 3)),
        ("pointwise loss kind", lambda: _C.pointwise_loss(2, x, x, _C.REDUCTION_MEAN)),
        ("split mode", lambda: _C.split(x._h, 3, (1,), 0, 4)),
        ("assign flag", lambda: _C.assign(x, x, _C.ASSIGN_FILL | 8, "copy_")),
        ("hook kind", lambda: _C.tensor_register_hook(x, 2, 0)),
        ("qr mode", lambda: _C.linalg_qr(m, 3)),
    ]


@pytest.mark.parametrize("index", range(13))
def test_an_unknown_code_is_a_value_error_naming_its_kind(index):
    x, m = lucid.tensor([1.0, 2.0]), lucid.eye(2)
    what, call = _unknown_code_calls(x, m)[index]
    gc.collect()  # earlier tests' garbage, freed now rather than during the call
    gc.disable()
    try:
        base = live_tensors()
        with pytest.raises(ValueError, match=rf"^unknown {what} code -?\d+; expected one of ") as info:
            call()
        assert live_tensors() == base  # nothing made
    finally:
        gc.enable()
    if what in ("device", "hook kind", "split mode"):  # a short enum lists its codes by name
        names = {
            "device": "0 (cpu), 1 (metal)",
            "hook kind": "0 (grad), 1 (post_accumulate)",
            "split mode": "0 (sizes), 1 (size), 2 (chunks)",
        }[what]
        assert str(info.value).endswith("expected one of " + names)


def test_every_valid_code_of_a_short_enum_is_listed():
    with pytest.raises(ValueError) as info:
        _C.tensor_full((2,), 1.0, 0, _C.SCALAR_FLOAT, 10, CPU)
    names = [name for name, _ in sorted(_C.codes("lucid_dtype").items(), key=lambda kv: kv[1])]
    assert str(info.value) == "unknown dtype code 10; expected one of " + ", ".join(
        f"{code} ({name})" for code, name in enumerate(names)
    )
