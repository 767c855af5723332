"""lucid.amp.autocast against the reference page (Part 1) and its decisions (Part 2)."""

import contextlib
import io
import threading

import ml_dtypes
import numpy as np
import pytest

import lucid
import lucid.nn as nn
import lucid.nn.functional as F
from lucid import _C
from lucid.amp import CastPolicy, autocast
import lucid.amp.autocast_mode as autocast_mode
from _helpers import ulps

F32, F16, BF16 = lucid.float32, lucid.float16, lucid.bfloat16
NP_BF16 = ml_dtypes.bfloat16


def state():
    """(metal on, metal dtype, cpu on, cpu dtype) on the calling thread."""
    return (
        lucid.amp.is_autocast_enabled("metal"),
        lucid.amp.get_autocast_dtype("metal"),
        lucid.amp.is_autocast_enabled("cpu"),
        lucid.amp.get_autocast_dtype("cpu"),
    )


OFF = (False, None, False, None)


def metal_on(dt):
    return (True, dt, False, None)


def cpu_on(dt):
    return (False, None, True, dt)


def rng(seed=0):
    return np.random.RandomState(seed)


def run_in_thread(fn):
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # re-raised on the calling thread
            box["error"] = e

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


# ---- the page's examples ------------------------------------------------------------------


def test_example_context_manager():
    model = nn.Linear(4, 2).to("metal")
    x = lucid.randn(8, 4, device="metal")
    with lucid.amp.autocast():
        output = model(x)  # ops cast to float16 inside
    assert output.dtype == lucid.float16
    assert repr(output.dtype) == "lucid.float16"
    assert output.shape == (8, 2)
    assert output.device == "metal"
    # outside the scope the same model computes in float32
    assert model(x).dtype == lucid.float32


def test_example_decorator():
    model = nn.Linear(4, 2).to("metal")
    x = lucid.randn(8, 4, device="metal")

    @lucid.amp.autocast()
    def predict(x):
        return model(x)

    assert predict(x).dtype == lucid.float16
    assert state() == OFF
    assert predict(x).dtype == lucid.float16
    assert model(x).dtype == lucid.float32


def test_example_nested_prints():
    a = lucid.randn(2, 2, device="metal")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        with lucid.amp.autocast(dtype=lucid.float16):
            print((a @ a).dtype)  # fp16 here
            with lucid.amp.autocast(dtype=lucid.bfloat16):
                print((a @ a).dtype)  # bf16 here
            print((a @ a).dtype)  # back to fp16
    assert buf.getvalue() == "lucid.float16\nlucid.bfloat16\nlucid.float16\n"


def test_examples_on_cpu_default_dtype_changes_nothing():
    model = nn.Linear(4, 2)
    x = lucid.randn(8, 4)
    outside = model(x)
    with lucid.amp.autocast("cpu"):
        assert lucid.amp.is_autocast_enabled("cpu")
        assert lucid.amp.get_autocast_dtype("cpu") is lucid.float16
        output = model(x)
        prod = x @ x.T
    assert output.dtype == lucid.float32
    assert prod.dtype == lucid.float32
    np.testing.assert_array_equal(output.numpy(), outside.numpy())
    np.testing.assert_array_equal(prod.numpy(), (x @ x.T).numpy())

    @lucid.amp.autocast("cpu")
    def predict(x):
        return model(x)

    assert predict(x).dtype == lucid.float32


def test_examples_on_cpu_with_bfloat16():
    model = nn.Linear(4, 2)
    x = lucid.randn(8, 4)
    with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
        output = model(x)
    assert output.dtype == lucid.bfloat16

    @lucid.amp.autocast("cpu", dtype=lucid.bfloat16)
    def predict(x):
        return model(x)

    assert predict(x).dtype == lucid.bfloat16

    a = lucid.randn(2, 2)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        with lucid.amp.autocast("cpu", dtype=lucid.float16):
            print((a @ a).dtype)  # float16 runs in float32 on the CPU
            with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
                print((a @ a).dtype)
            print((a @ a).dtype)
    assert buf.getvalue() == "lucid.float32\nlucid.bfloat16\nlucid.float32\n"


# ---- values ----------------------------------------------------------------------------------


def _matmul_inputs(seed=0, m=16, k=256, n=8):
    r = rng(seed)
    return r.randn(m, k).astype(np.float32), r.randn(k, n).astype(np.float32)


def test_metal_fp16_matmul_values():
    a, b = _matmul_inputs()
    ta, tb = lucid.tensor(a, device="metal"), lucid.tensor(b, device="metal")
    with autocast("metal"):
        out = ta @ tb
    assert out.dtype is F16
    got = out.numpy()
    assert got.dtype == np.float16
    exact = a @ b
    np.testing.assert_allclose(got.astype(np.float32), exact, rtol=1e-2, atol=5e-2)
    # fp16-rounded inputs, float32 accumulation, one rounding at the end
    ref = (a.astype(np.float16).astype(np.float32) @ b.astype(np.float16).astype(np.float32)).astype(np.float16)
    assert ulps(got, ref).max() <= 1


def test_cpu_bf16_matmul_values():
    a, b = _matmul_inputs(1)
    with autocast("cpu", dtype=BF16):
        out = lucid.tensor(a) @ lucid.tensor(b)
    assert out.dtype is BF16
    got = out.numpy()
    assert got.dtype == NP_BF16
    exact = a @ b
    np.testing.assert_allclose(got.astype(np.float32), exact, rtol=3e-2, atol=3e-1)
    ref = (a.astype(NP_BF16).astype(np.float32) @ b.astype(NP_BF16).astype(np.float32)).astype(NP_BF16)
    assert ulps(got, ref).max() <= 1


def test_cpu_default_scope_matmul_values_are_float32():
    a, b = _matmul_inputs(2)
    with autocast("cpu"):
        out = lucid.tensor(a) @ lucid.tensor(b)
    assert out.dtype is F32
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("device,dt", [("metal", F16), ("metal", BF16), ("cpu", BF16)])
def test_linear_values(device, dt):
    r = rng(3)
    x = r.randn(10, 64).astype(np.float32)
    w = r.randn(12, 64).astype(np.float32)
    bias = r.randn(12).astype(np.float32)
    tx, tw, tb = (lucid.tensor(v, device=device) for v in (x, w, bias))
    with autocast(device, dtype=dt):
        out = F.linear(tx, tw, tb)
    assert out.dtype is dt
    got = out.numpy()
    exact = x @ w.T + bias
    tol = dict(rtol=1e-2, atol=5e-2) if dt is F16 else dict(rtol=3e-2, atol=3e-1)
    np.testing.assert_allclose(got.astype(np.float32), exact, **tol)
    lo = dt.numpy
    ref = (
        x.astype(lo).astype(np.float32) @ w.astype(lo).astype(np.float32).T + bias.astype(lo).astype(np.float32)
    ).astype(lo)
    assert ulps(got, ref).max() <= 1


def test_float32_policy_reduction_of_fp16_under_autocast():
    h = rng(4).randn(64, 8).astype(np.float16)
    t = lucid.tensor(h, device="metal")
    outside = t.sum()
    assert outside.dtype is F16
    with autocast("metal"):
        s = t.sum()
        m = t.mean(0)
    assert s.dtype is F32
    assert m.dtype is F32
    np.testing.assert_allclose(s.item(), h.astype(np.float32).sum(), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(m.numpy(), h.astype(np.float32).mean(0), rtol=1e-5, atol=1e-5)
    assert t.sum().dtype is F16


# ---- scope lifecycle ---------------------------------------------------------------------------


class Boom(Exception):
    pass


@pytest.mark.parametrize("device", ["metal", "cpu"])
def test_exception_restores_state_and_propagates(device):
    err = Boom("inside")
    with pytest.raises(Boom) as info:
        with autocast(device, dtype=BF16):
            assert lucid.amp.get_autocast_dtype(device) is BF16
            raise err
    assert info.value is err
    assert state() == OFF


def test_exception_in_nested_scope_restores_outer():
    with autocast(dtype=F16):
        with pytest.raises(Boom):
            with autocast(dtype=BF16):
                raise Boom()
        assert state() == metal_on(F16)
        a = lucid.ones(2, 2, device="metal")
        assert (a @ a).dtype is F16
    assert state() == OFF


def test_exit_does_not_swallow_exceptions():
    ac = autocast()
    ac.__enter__()
    assert ac.__exit__(Boom, Boom(), None) in (False, None)
    assert state() == OFF


def test_enter_returns_self():
    ac = autocast("cpu", dtype=BF16)
    with ac as got:
        assert got is ac


def test_reuse_after_exit():
    ac = autocast(dtype=BF16)
    a = lucid.ones(2, 2, device="metal")
    for _ in range(3):
        with ac:
            assert state() == metal_on(BF16)
            assert (a @ a).dtype is BF16
        assert state() == OFF
        assert (a @ a).dtype is F32


def test_reentry_while_active():
    ac16 = autocast(dtype=F16)
    acbf = autocast(dtype=BF16)
    base = _C.autocast_live_guards()
    with ac16:
        with acbf:
            with ac16:
                assert state() == metal_on(F16)
                with ac16:
                    assert state() == metal_on(F16)
                    assert _C.autocast_live_guards() == base + 4
                assert state() == metal_on(F16)
            assert state() == metal_on(BF16)
        assert state() == metal_on(F16)
    assert state() == OFF


def test_reentry_same_object_twice_each_exit_undoes_its_entry():
    ac = autocast("cpu", dtype=BF16)
    with ac:
        with ac:
            assert state() == cpu_on(BF16)
        assert state() == cpu_on(BF16)
    assert state() == OFF


def test_exit_interrupted_after_leaving_its_scope_does_not_strand_the_outer_one(monkeypatch):
    # An interrupt landing between the engine leaving the inner scope and __exit__ forgetting
    # its handle leaves a stale handle on top; the outer exit must still leave its own scope.
    real, fired = autocast_mode._guard_destroy, []

    def interrupted_once(handle):
        rc = real(handle)
        if not fired:
            fired.append(handle)
            raise KeyboardInterrupt
        return rc

    monkeypatch.setattr(autocast_mode, "_guard_destroy", interrupted_once)
    ac = autocast("cpu", dtype=BF16)
    guards = _C.autocast_live_guards()
    with pytest.raises(KeyboardInterrupt):
        with ac:
            with ac:
                pass
    assert fired and state() == OFF and _C.autocast_live_guards() == guards
    with pytest.raises(RuntimeError, match="has not entered"):
        ac.__exit__(None, None, None)


def test_scope_ends_at_exit_not_at_collection():
    ac = autocast(dtype=BF16)
    with ac:
        pass
    assert state() == OFF  # ac is still referenced here
    assert ac.dtype is BF16 and ac.device_type == "metal" and ac.enabled is True


# ---- decorator ---------------------------------------------------------------------------------


def test_decorator_fresh_scope_per_call():
    base = _C.autocast_live_guards()
    seen = []

    @autocast("cpu", dtype=BF16)
    def f():
        seen.append((state(), _C.autocast_live_guards()))

    f()
    assert state() == OFF
    f()
    with autocast(dtype=F16):
        f()
        assert state() == metal_on(F16)
    assert state() == OFF
    assert seen == [(cpu_on(BF16), base + 1), (cpu_on(BF16), base + 1), ((True, F16, True, BF16), base + 2)]


def test_decorator_recursion():
    seen = []

    @autocast(dtype=BF16)
    def f(n):
        seen.append((n, lucid.amp.get_autocast_dtype("metal"), _C.autocast_live_guards()))
        if n:
            f(n - 1)
            assert lucid.amp.get_autocast_dtype("metal") is BF16
        return n

    assert f(4) == 4
    assert state() == OFF
    assert seen == [(n, BF16, 5 - n) for n in range(4, -1, -1)]


def test_decorator_mutual_recursion_restores_each_level():
    trace = []

    @autocast(dtype=F16)
    def low(n):
        trace.append(("low", n, lucid.amp.get_autocast_dtype("metal")))
        if n:
            high(n - 1)
        trace.append(("low-after", n, lucid.amp.get_autocast_dtype("metal")))

    @autocast(dtype=F32)
    def high(n):
        trace.append(("high", n, lucid.amp.get_autocast_dtype("metal")))
        if n:
            low(n - 1)
        trace.append(("high-after", n, lucid.amp.get_autocast_dtype("metal")))

    low(3)
    assert state() == OFF
    for kind, _, dt in trace:
        assert dt is (F16 if kind.startswith("low") else F32)
    assert len(trace) == 8


def test_decorator_exception_propagates_and_restores():
    err = Boom("from fn")

    @autocast("cpu", dtype=BF16)
    def f():
        assert lucid.amp.get_autocast_dtype("cpu") is BF16
        raise err

    with pytest.raises(Boom) as info:
        f()
    assert info.value is err
    assert state() == OFF
    with autocast(dtype=F16):
        with pytest.raises(Boom):
            f()
        assert state() == metal_on(F16)


def test_decorator_keeps_metadata_and_arguments():
    def fn(a, b=2, *, c=3):
        """adds things"""
        return a + b + c

    wrapped = autocast()(fn)
    assert wrapped.__name__ == "fn"
    assert wrapped.__doc__ == "adds things"
    assert wrapped.__wrapped__ is fn
    assert wrapped(1, 5, c=7) == 13
    assert wrapped(1) == 6


def test_decorator_enabled_false():
    @autocast(enabled=False)
    def f():
        return state()

    with autocast(dtype=BF16):
        assert f() == OFF
        assert state() == metal_on(BF16)


# ---- nesting, devices, enabled=False ----------------------------------------------------------


def test_nesting_restores_outer_dtype_on_both_devices():
    with autocast("cpu", dtype=BF16):
        with autocast("cpu", dtype=F32):
            assert state() == cpu_on(F32)
            with autocast("cpu", dtype=F16):
                assert state() == cpu_on(F16)
            assert state() == cpu_on(F32)
        assert state() == cpu_on(BF16)
    with autocast(dtype=F32):
        with autocast(dtype=BF16):
            assert state() == metal_on(BF16)
        assert state() == metal_on(F32)
    assert state() == OFF


def test_devices_are_independent():
    with autocast("metal"):
        assert state() == metal_on(F16)
        c = lucid.ones(3, 3)
        assert (c @ c).dtype is F32  # a CPU tensor follows CPU state
        with autocast("cpu", dtype=BF16):
            assert state() == (True, F16, True, BF16)
            m = lucid.ones(3, 3, device="metal")
            assert (c @ c).dtype is BF16
            assert (m @ m).dtype is F16
        assert state() == metal_on(F16)


def test_disabled_metal_leaves_cpu_untouched():
    c = lucid.ones(3, 3)
    m = lucid.ones(3, 3, device="metal")
    with autocast("cpu", dtype=BF16):
        with autocast("metal", enabled=False):
            assert state() == cpu_on(BF16)
            assert (c @ c).dtype is BF16
            assert (m @ m).dtype is F32
        assert state() == cpu_on(BF16)
        with autocast("metal", dtype=F16):
            with autocast("metal", enabled=False):
                assert state() == cpu_on(BF16)
            assert state() == (True, F16, True, BF16)


def test_disabled_cpu_leaves_metal_untouched():
    m = lucid.ones(3, 3, device="metal")
    with autocast("metal", dtype=BF16):
        with autocast("cpu", enabled=False):
            assert state() == metal_on(BF16)
            assert (m @ m).dtype is BF16
        with autocast("cpu", dtype=BF16):
            with autocast("cpu", enabled=False):
                assert state() == metal_on(BF16)
            assert state() == (True, BF16, True, BF16)
        assert state() == metal_on(BF16)


def test_disabled_inside_enabled_then_reenabled():
    a = lucid.ones(4, 4, device="metal")
    with autocast():
        assert (a @ a).dtype is F16
        with autocast(enabled=False):
            assert not lucid.amp.is_autocast_enabled("metal")
            assert lucid.amp.get_autocast_dtype("metal") is None
            assert (a @ a).dtype is F32
            with autocast(dtype=BF16):
                assert (a @ a).dtype is BF16
            assert (a @ a).dtype is F32
        assert state() == metal_on(F16)
        assert (a @ a).dtype is F16
    assert (a @ a).dtype is F32


def test_disabled_scope_outside_any_scope():
    with autocast("cpu", enabled=False):
        assert state() == OFF
    assert state() == OFF


# ---- threads -----------------------------------------------------------------------------------


def test_new_threads_start_off():
    with autocast("metal", dtype=BF16), autocast("cpu", dtype=BF16):
        assert run_in_thread(state) == OFF
        assert run_in_thread(lucid.amp.is_autocast_enabled) is False
        assert run_in_thread(lucid.amp.get_autocast_dtype) is None
        assert state() == (True, BF16, True, BF16)


def test_scope_in_one_thread_is_invisible_in_another():
    entered, checked, done = threading.Event(), threading.Event(), threading.Event()
    box = {}

    def worker():
        try:
            with autocast("cpu", dtype=BF16):
                box["inside"] = state()
                entered.set()
                checked.wait(5)
            box["after"] = state()
        finally:
            entered.set()
            done.set()

    t = threading.Thread(target=worker)
    with autocast(dtype=F32):
        t.start()
        assert entered.wait(5)
        main_during = state()
        checked.set()
        assert done.wait(5)
        t.join(5)
        main_after = state()
    assert box["inside"] == cpu_on(BF16)
    assert box["after"] == OFF
    assert main_during == metal_on(F32)
    assert main_after == metal_on(F32)


def test_calls_with_the_same_arguments_make_distinct_scope_objects():
    a, b = autocast("cpu", dtype=BF16), autocast("cpu", dtype=BF16)
    assert a is not b and repr(a) == repr(b)  # as in PyTorch: an exit of one never leaves the other's scope
    assert autocast("cpu", dtype=F32) is not a and autocast("cpu", dtype=BF16, enabled=False) is not a
    assert autocast("cpu", dtype=BF16, cache_enabled=True) is not a
    with a:
        with b:
            assert state() == cpu_on(BF16)
        assert state() == cpu_on(BF16)
    assert state() == OFF
    # Out of order: either exit leaves one of the two identical scopes.
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)
    assert state() == cpu_on(BF16)
    b.__exit__(None, None, None)
    assert state() == OFF
    with pytest.raises(RuntimeError, match="has not entered"):
        b.__exit__(None, None, None)


@pytest.mark.parametrize(
    "args, kwargs, error",
    [
        ((["cpu"],), {}, ValueError),  # unhashable device_type
        (("cpu",), {"dtype": [BF16]}, TypeError),  # unhashable dtype
        (("cpu",), {"enabled": 1.0}, TypeError),  # equal to True, but not a bool
        (("cpu",), {"dtype": lucid.int32}, ValueError),
    ],
)
def test_arguments_are_checked_at_every_call(args, kwargs, error):
    for _ in range(2):  # the second call must not find an object made for equal arguments
        with pytest.raises(error):
            autocast(*args, **kwargs)
    assert autocast("cpu", enabled=1).enabled is True  # an int is accepted as a bool


def test_a_subclass_gets_a_new_object_each_time():
    class Mine(autocast):
        pass

    x, y = Mine("cpu", dtype=BF16), Mine("cpu", dtype=BF16)
    assert x is not y and type(x) is Mine
    with x:
        assert state() == cpu_on(BF16)
    assert state() == OFF


def test_one_object_shared_by_threads():
    n = 4
    ac = autocast("cpu", dtype=BF16)
    peak = []
    barrier = threading.Barrier(n + 1, action=lambda: peak.append(_C.autocast_live_guards()), timeout=10)
    errors, results = [], {}

    def worker(i):
        try:
            barrier.wait()  # 1: everybody off
            got = [state()]
            ac.__enter__()
            barrier.wait()  # 2: all threads entered once
            with ac:
                got.append(state())
                barrier.wait()  # 3: all entered twice (peak count)
            got.append(state())
            barrier.wait()  # 4: all left the inner entry
            ac.__exit__(None, None, None)
            got.append(state())
            barrier.wait()  # 5: all out
            results[i] = got
        except BaseException as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    main_states = []
    try:
        for _ in range(5):
            barrier.wait()
            main_states.append(state())
    except threading.BrokenBarrierError:
        pass
    finally:
        for t in threads:
            t.join(10)
    assert not errors, errors
    assert main_states == [OFF] * 5
    for i in range(n):
        assert results[i] == [OFF, cpu_on(BF16), cpu_on(BF16), OFF]
    assert peak == [0, n, 2 * n, n, 0]
    with pytest.raises(RuntimeError):
        ac.__exit__(None, None, None)  # the main thread never entered it


def test_exit_on_a_thread_that_did_not_enter():
    ac = autocast(dtype=BF16)
    with ac:
        with pytest.raises(RuntimeError):
            run_in_thread(lambda: ac.__exit__(None, None, None))
        assert state() == metal_on(BF16)
        assert run_in_thread(state) == OFF
    assert state() == OFF


# ---- out-of-order exits --------------------------------------------------------------------------


def test_out_of_order_exit_keeps_later_scope():
    a, b = autocast(dtype=F16), autocast(dtype=BF16)
    t = lucid.ones(2, 2, device="metal")
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)
    assert state() == metal_on(BF16)
    assert (t @ t).dtype is BF16
    b.__exit__(None, None, None)
    assert state() == OFF


def test_out_of_order_three_scopes():
    a, b, c = autocast(dtype=F16), autocast(dtype=BF16), autocast(dtype=F32)
    for x in (a, b, c):
        x.__enter__()
    b.__exit__(None, None, None)
    assert state() == metal_on(F32)
    c.__exit__(None, None, None)
    assert state() == metal_on(F16)
    a.__exit__(None, None, None)
    assert state() == OFF


def test_out_of_order_interleaved_with_new_entry():
    a, b, c = autocast(dtype=F16), autocast(dtype=BF16), autocast(dtype=F32)
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)
    assert state() == metal_on(BF16)
    c.__enter__()
    b.__exit__(None, None, None)
    assert state() == metal_on(F32)
    c.__exit__(None, None, None)
    assert state() == OFF


def test_out_of_order_with_disabled_scopes():
    on, off = autocast(dtype=BF16), autocast(enabled=False)
    on.__enter__()
    off.__enter__()
    on.__exit__(None, None, None)
    assert state() == OFF  # the disabled scope is the innermost alive
    off.__exit__(None, None, None)
    assert state() == OFF
    off.__enter__()
    on.__enter__()
    off.__exit__(None, None, None)
    assert state() == metal_on(BF16)
    on.__exit__(None, None, None)
    assert state() == OFF


def test_out_of_order_across_devices():
    m, c = autocast("metal", dtype=F16), autocast("cpu", dtype=BF16)
    m.__enter__()
    c.__enter__()
    m.__exit__(None, None, None)
    assert state() == cpu_on(BF16)
    assert lucid.amp.get_autocast_dtype() is BF16
    c.__exit__(None, None, None)
    assert state() == OFF


def test_out_of_order_inside_with_block_restores_original():
    with autocast("cpu", dtype=F32):
        a, b = autocast("cpu", dtype=F16), autocast("cpu", dtype=BF16)
        a.__enter__()
        b.__enter__()
        a.__exit__(None, None, None)
        assert state() == cpu_on(BF16)
        b.__exit__(None, None, None)
        assert state() == cpu_on(F32)
    assert state() == OFF


# ---- misuse ----------------------------------------------------------------------------------


def test_exit_without_enter():
    base = _C.autocast_live_guards()
    with pytest.raises(RuntimeError):
        autocast().__exit__(None, None, None)
    assert state() == OFF
    with autocast("cpu", dtype=BF16):
        with pytest.raises(RuntimeError):
            autocast("cpu").__exit__(None, None, None)
        assert state() == cpu_on(BF16)
        assert _C.autocast_live_guards() == base + 1


def test_exit_more_often_than_entered():
    ac = autocast(dtype=BF16)
    with autocast(dtype=F32):
        ac.__enter__()
        ac.__exit__(None, None, None)
        with pytest.raises(RuntimeError):
            ac.__exit__(None, None, None)
        assert state() == metal_on(F32)


@pytest.mark.parametrize("device_type", ["cuda", "mps", None, 3, "", "Metal", "CPU"])
def test_invalid_device_type(device_type):
    with autocast("cpu", dtype=BF16):
        before = (state(), _C.autocast_live_guards())
        with pytest.raises(ValueError):
            autocast(device_type)
        with pytest.raises(ValueError):
            autocast(device_type=device_type, dtype=BF16)
        assert (state(), _C.autocast_live_guards()) == before


@pytest.mark.parametrize(
    "bad,exc",
    [
        (lucid.int32, ValueError),
        (lucid.int64, ValueError),
        (lucid.bool_, ValueError),
        ("float16", TypeError),
        (np.float16, TypeError),
        (np.dtype(np.float16), TypeError),
        (5, TypeError),
    ],
)
@pytest.mark.parametrize("device", ["metal", "cpu"])
def test_invalid_dtype_raises_from_constructor(bad, exc, device):
    with autocast("metal", dtype=F32):
        before = (state(), _C.autocast_live_guards())
        with pytest.raises(exc):
            autocast(device, dtype=bad)
        assert (state(), _C.autocast_live_guards()) == before
    assert state() == OFF


@pytest.mark.parametrize("dt", [F16, BF16, F32])
def test_accepted_dtypes(dt):
    for device in ("metal", "cpu"):
        with autocast(device, dtype=dt):
            assert lucid.amp.get_autocast_dtype(device) is dt
            assert lucid.amp.is_autocast_enabled(device)


def test_default_dtype_is_float16():
    assert autocast().dtype is F16
    assert autocast("cpu").dtype is F16
    with autocast("cpu"):
        assert lucid.amp.get_autocast_dtype("cpu") is F16


def test_decorating_a_non_callable_is_a_type_error():
    with pytest.raises(TypeError):
        autocast()(42)


# ---- queries -----------------------------------------------------------------------------------


def test_queries_with_and_without_device():
    assert lucid.amp.is_autocast_enabled() is False
    assert lucid.amp.get_autocast_dtype() is None
    with autocast("metal", dtype=BF16):
        assert lucid.amp.is_autocast_enabled() is True
        assert lucid.amp.is_autocast_enabled("metal") is True
        assert lucid.amp.is_autocast_enabled("cpu") is False
        assert lucid.amp.get_autocast_dtype() is BF16
        assert lucid.amp.get_autocast_dtype("metal") is BF16
        assert lucid.amp.get_autocast_dtype("cpu") is None
    with autocast("cpu"):
        assert lucid.amp.is_autocast_enabled() is True
        assert lucid.amp.get_autocast_dtype() is F16
        assert lucid.amp.get_autocast_dtype("metal") is None


def test_dtype_without_device_is_most_recent_scope_that_switches_on():
    with autocast("cpu", dtype=BF16):
        with autocast("metal", dtype=F16):
            assert lucid.amp.get_autocast_dtype() is F16
            with autocast("metal", enabled=False):
                assert lucid.amp.get_autocast_dtype() is BF16
                assert lucid.amp.is_autocast_enabled() is True
                with autocast("cpu", enabled=False):
                    assert lucid.amp.get_autocast_dtype() is None
                    assert lucid.amp.is_autocast_enabled() is False
                assert lucid.amp.get_autocast_dtype() is BF16
            assert lucid.amp.get_autocast_dtype() is F16
        assert lucid.amp.get_autocast_dtype() is BF16
    with autocast("metal", dtype=F32):
        with autocast("cpu", dtype=BF16):
            assert lucid.amp.get_autocast_dtype() is BF16
            with autocast("cpu", enabled=False):
                assert lucid.amp.get_autocast_dtype() is F32
        assert lucid.amp.get_autocast_dtype() is F32
    assert lucid.amp.get_autocast_dtype() is None


@pytest.mark.parametrize("bad", ["cuda", "mps", 3, "", "gpu"])
def test_queries_reject_invalid_device(bad):
    with pytest.raises(ValueError):
        lucid.amp.is_autocast_enabled(bad)
    with pytest.raises(ValueError):
        lucid.amp.get_autocast_dtype(bad)
    with pytest.raises(ValueError):
        autocast.is_autocast_enabled(bad)
    with pytest.raises(ValueError):
        autocast.get_autocast_dtype(bad)


def test_static_methods_and_module_functions_agree():
    ac = autocast("cpu", dtype=BF16)
    for fn_static, fn_module, fn_inst in [
        (autocast.is_autocast_enabled, lucid.amp.is_autocast_enabled, ac.is_autocast_enabled),
        (autocast.get_autocast_dtype, lucid.amp.get_autocast_dtype, ac.get_autocast_dtype),
    ]:
        assert callable(fn_static)
        outside = [fn_static(), fn_static("cpu"), fn_static("metal")]
        with ac:
            inside = [fn_static(), fn_static("cpu"), fn_static("metal")]
            assert inside == [fn_module(), fn_module("cpu"), fn_module("metal")]
            assert inside == [fn_inst(), fn_inst("cpu"), fn_inst("metal")]
        assert outside == [fn_module(), fn_module("cpu"), fn_module("metal")]
        assert outside != inside
    with ac:
        assert lucid.amp.autocast.is_autocast_enabled("cpu") is True
        assert lucid.amp.autocast.get_autocast_dtype("cpu") is BF16
        assert lucid.amp.autocast.is_autocast_enabled(device_type="metal") is False


# ---- op policy ----------------------------------------------------------------------------------


def test_policy_lookup():
    assert lucid.amp.policy("matmul") is CastPolicy.LOWER_PRECISION
    assert lucid.amp.policy("linear") is CastPolicy.LOWER_PRECISION
    assert lucid.amp.policy("sum") is CastPolicy.FLOAT32
    assert lucid.amp.policy("mean") is CastPolicy.FLOAT32
    assert lucid.amp.policy("add") is CastPolicy.NONE
    with pytest.raises(ValueError):
        lucid.amp.policy("no_such_op")
    with pytest.raises(ValueError):
        lucid.amp.policy("")
    table = lucid.amp.policies()
    assert isinstance(table, dict)
    for name, p in table.items():
        assert lucid.amp.policy(name) is p
        assert isinstance(p, CastPolicy)


def _runners():
    """op name -> fn(device, dtype) running that op once on floating inputs of `dtype`."""

    def mk(shape, device, dt, seed):
        return lucid.tensor(rng(seed).randn(*shape).astype(np.float32), device=device).to(dt)

    def unary(name):
        fn = getattr(F, name, None) or (lambda t: getattr(t, name)())
        # positive inputs keep log, sqrt and rsqrt defined
        return lambda dev, dt: fn(mk((3, 4), dev, dt, 0).abs() + 0.5)

    def binary(op):
        return lambda dev, dt: op(mk((3, 4), dev, dt, 0), mk((3, 4), dev, dt, 1) + 3.0)

    other = {"cpu": "metal", "metal": "cpu"}
    return {
        "matmul": lambda dev, dt: mk((3, 4), dev, dt, 0) @ mk((4, 5), dev, dt, 1),
        "linear": lambda dev, dt: F.linear(mk((3, 4), dev, dt, 0), mk((5, 4), dev, dt, 1), mk((5,), dev, dt, 2)),
        "sum": lambda dev, dt: mk((3, 4), dev, dt, 0).sum(),
        "mean": lambda dev, dt: mk((3, 4), dev, dt, 0).mean(1),
        "add": binary(lambda a, b: a + b),
        "sub": binary(lambda a, b: a - b),
        "mul": binary(lambda a, b: a * b),
        "div": binary(lambda a, b: a / b),
        "neg": lambda dev, dt: -mk((3, 4), dev, dt, 0),
        "relu": lambda dev, dt: mk((3, 4), dev, dt, 0).relu(),
        "reshape": lambda dev, dt: mk((3, 4), dev, dt, 0).reshape(2, 6),
        "view": lambda dev, dt: mk((3, 4), dev, dt, 0).view(12),
        "transpose": lambda dev, dt: mk((3, 4), dev, dt, 0).transpose(0, 1),
        "permute": lambda dev, dt: mk((2, 3, 4), dev, dt, 0).permute(2, 0, 1),
        "contiguous": lambda dev, dt: mk((3, 4), dev, dt, 0).transpose(0, 1).contiguous(),
        "to": lambda dev, dt: mk((3, 4), dev, dt, 0).to(other[dev]),
        **{
            name: unary(name)
            for name in ("exp", "log", "log1p", "sqrt", "rsqrt", "abs", "tanh", "sigmoid", "silu", "gelu", "softplus")
        },
    }


REQUIRED_OPS = {
    "matmul",
    "linear",
    "sum",
    "mean",
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "relu",
    "reshape",
    "transpose",
    "permute",
    "contiguous",
    "exp",
    "log",
    "log1p",
    "sqrt",
    "rsqrt",
    "abs",
    "tanh",
    "sigmoid",
    "silu",
    "gelu",
    "softplus",
}


def _expected(op, p, in_dt, ac_device, ac_dt):
    if p is CastPolicy.LOWER_PRECISION:
        if ac_device == "cpu" and ac_dt is F16:
            return in_dt  # float16 runs in float32 on the CPU: nothing changes
        if ac_device == "cpu" and ac_dt is BF16 and op not in lucid.amp.cpu_bfloat16_ops():
            return F32
        return ac_dt
    if p is CastPolicy.FLOAT32:
        if ac_device == "cpu" and ac_dt is F16:
            return in_dt
        return F32
    return in_dt  # NONE; PROMOTE with a single input dtype


@pytest.mark.parametrize(
    "device,ac_dt,in_dt",
    [
        ("metal", F16, F32),
        ("metal", F16, F16),
        ("metal", F16, BF16),
        ("metal", BF16, F32),
        ("metal", BF16, F16),
        ("cpu", BF16, F32),
        ("cpu", BF16, BF16),
        ("cpu", F16, F32),
        ("cpu", F16, BF16),
    ],
)
def test_every_runnable_op_follows_its_policy(device, ac_dt, in_dt):
    table = lucid.amp.policies()
    assert REQUIRED_OPS <= set(table)
    runners = _runners()
    checked = []
    for op, p in table.items():
        if op not in runners:
            continue
        outside = runners[op](device, in_dt)
        assert outside.dtype is in_dt, op  # no autocast: every op keeps its input dtype
        with autocast(device, dtype=ac_dt):
            got = runners[op](device, in_dt)
        want = _expected(op, p, in_dt, device, ac_dt)
        assert got.dtype is want, f"{op} ({p}) on {device} autocast {ac_dt} with {in_dt} input: got {got.dtype}"
        assert got.shape == outside.shape, op
        # values agree with the op computed outside autocast, to the precision of the coarser dtype
        coarse = max((got.dtype, outside.dtype), key=lambda d: {F32: 0, F16: 1, BF16: 2}[d])
        tol = {F32: 1e-5, F16: 2e-2, BF16: 1e-1}[coarse]
        np.testing.assert_allclose(
            got.numpy().astype(np.float32), outside.numpy().astype(np.float32), rtol=tol, atol=tol, err_msg=op
        )
        checked.append(op)
    assert REQUIRED_OPS <= set(checked)


def test_autocast_on_other_device_does_not_affect_ops():
    runners = _runners()
    for op in REQUIRED_OPS:
        with autocast("metal", dtype=BF16):
            assert runners[op]("cpu", F32).dtype is F32, op
        with autocast("cpu", dtype=BF16):
            assert runners[op]("metal", F32).dtype is F32, op


# ---- integers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("device,dt", [("metal", F16), ("metal", BF16), ("cpu", BF16), ("cpu", F16)])
def test_integer_inputs_are_never_cast(device, dt):
    r = rng(5)
    a = r.randint(-50, 50, size=(4, 6)).astype(np.int64)
    b = r.randint(-50, 50, size=(6, 3)).astype(np.int64)
    ta, tb = lucid.tensor(a, device=device), lucid.tensor(b, device=device)
    assert ta.dtype is lucid.int64
    with autocast(device, dtype=dt):
        prod = ta @ tb
        s = ta.sum()
        added = ta + ta
    assert prod.dtype is lucid.int64
    np.testing.assert_array_equal(prod.numpy(), a @ b)
    assert s.dtype is lucid.int64
    assert s.item() == int(a.sum())
    assert added.dtype is lucid.int64
    np.testing.assert_array_equal(added.numpy(), a + a)


def test_large_integer_matmul_is_exact_under_autocast():
    # values far beyond float16/bfloat16 range and precision
    a = np.array([[70001, -3], [2, 123457]], dtype=np.int64)
    ta = lucid.tensor(a, device="metal")
    with autocast("metal"):
        out = ta @ ta
    assert out.dtype is lucid.int64
    np.testing.assert_array_equal(out.numpy(), a @ a)


@pytest.mark.parametrize("n", [3, 64, 300])
def test_cpu_bf16_matmul_at_several_sizes_matches_the_rounded_product(n):
    # Large products take oneDNN's bfloat16 kernels; every size must round the exact product once.
    a = rng(n).standard_normal((n, n + 1)).astype(np.float32)
    b = rng(n + 1).standard_normal((n + 1, n - 1 if n > 3 else 2)).astype(np.float32)
    with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
        y = lucid.tensor(a) @ lucid.tensor(b)
    assert y.dtype == lucid.bfloat16
    exact = a.astype(ml_dtypes.bfloat16).astype(np.float64) @ b.astype(ml_dtypes.bfloat16).astype(np.float64)
    want = exact.astype(np.float32).astype(ml_dtypes.bfloat16)
    # float32 accumulation in another order may land a near-tie on the other side: at most one
    # bfloat16 ulp, and rarely.
    steps = np.abs(y.numpy().view(np.int16).astype(np.int32) - want.view(np.int16).astype(np.int32))
    assert steps.max() <= 1 and (steps > 0).mean() < 0.01


# ---- the weight cache ---------------------------------------------------------------------


@pytest.mark.parametrize("device,dt", [("cpu", BF16), ("metal", F16), ("metal", BF16)])
def test_a_parameter_read_by_several_ops_is_cast_once_per_scope(device, dt):
    rng = np.random.default_rng(11)
    w_np, x_np = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    w = lucid.tensor(w_np, device=device, requires_grad=True)
    x = lucid.tensor(x_np, device=device)  # not a parameter: cast by each op, never cached
    with lucid.amp.autocast(device, dtype=dt):
        y1 = F.linear(x, w)
        with lucid.amp.autocast(device, dtype=dt):
            y2 = x @ w.T
        assert _C.autocast_cached_casts() == 1
        assert y1.dtype == y2.dtype == dt
    assert _C.autocast_cached_casts() == 0  # the outermost exit empties it
    (y1.float().sum() + 2 * y2.float().sum()).backward()
    # Both reads reach the float32 leaf: d/dw of sum(x w^T) is the column sums of x, per row.
    xr = x_np.astype(NP_BF16 if dt is BF16 else np.float16).astype(np.float64)
    np.testing.assert_allclose(w.grad.numpy(), 3 * np.tile(xr.sum(0), (5, 1)), rtol=2e-2, atol=2e-2)
    assert w.grad.dtype is F32


@pytest.mark.parametrize("device,dt", [("cpu", BF16), ("metal", F16)])
def test_cache_enabled_false_casts_at_every_use_and_restores_the_thread_setting(device, dt):
    w = lucid.ones(4, 4, device=device, requires_grad=True)
    x = lucid.ones(2, 4, device=device)
    assert lucid.amp.is_autocast_cache_enabled()
    with lucid.amp.autocast(device, dtype=dt, cache_enabled=False) as scope:
        assert scope.cache_enabled is False and not lucid.amp.is_autocast_cache_enabled()
        a, b = F.linear(x, w), F.linear(x, w)
        assert _C.autocast_cached_casts() == 0
        with lucid.amp.autocast(device, dtype=dt, cache_enabled=True):
            F.linear(x, w)
            assert _C.autocast_cached_casts() == 1  # cached in the inner scope only
        assert not lucid.amp.is_autocast_cache_enabled()
        F.linear(x, w)
        assert _C.autocast_cached_casts() == 1  # kept until the outermost scope exits
    assert lucid.amp.is_autocast_cache_enabled() and _C.autocast_cached_casts() == 0
    (a.float().sum() + b.float().sum()).backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((4, 4), 4.0))  # both uses reach the leaf
    # The thread-wide switch, which a scope without cache_enabled leaves alone.
    lucid.amp.set_autocast_cache_enabled(False)
    try:
        with lucid.amp.autocast(device, dtype=dt):
            F.linear(x, w)
            assert _C.autocast_cached_casts() == 0
    finally:
        lucid.amp.set_autocast_cache_enabled(True)
    # An exception leaves the thread's setting as it was.
    with pytest.raises(KeyError):
        with lucid.amp.autocast(device, cache_enabled=False):
            raise KeyError("boom")
    assert lucid.amp.is_autocast_cache_enabled()
    with pytest.raises(TypeError, match="cache_enabled must be a bool or None"):
        lucid.amp.autocast(device, cache_enabled="no")
    # Another thread starts with its own (default) setting.
    seen = []
    with lucid.amp.autocast(device, cache_enabled=False):
        t = threading.Thread(target=lambda: seen.append(lucid.amp.is_autocast_cache_enabled()))
        t.start()
        t.join()
    assert seen == [True]


def test_autocast_is_available_on_lucids_devices_only():
    assert lucid.amp.is_autocast_available("metal") and lucid.amp.is_autocast_available("cpu")
    assert not lucid.amp.is_autocast_available("cuda")
    with pytest.raises(TypeError):
        lucid.amp.is_autocast_available(None)


def test_cast_cache_skips_non_leaves_no_grad_and_float32_scopes():
    w = lucid.ones(4, 4, requires_grad=True)
    h = w * 2  # not a leaf
    with lucid.amp.autocast("cpu", dtype=BF16):
        h @ h
        with lucid.no_grad():
            w @ w
        assert _C.autocast_cached_casts() == 0
        with lucid.amp.autocast("cpu", dtype=F32):
            w @ w
        assert _C.autocast_cached_casts() == 0
        w @ w
        assert _C.autocast_cached_casts() == 1


def test_training_inside_one_scope_reuses_casts_until_the_optimizer_replaces_them():
    # Forward, backward and step all inside one long scope: the cached cast is reused across
    # graphs (its node survives each backward) and dropped once its parameter is updated.
    rng = np.random.default_rng(12)
    model = lucid.nn.Linear(4, 3)
    opt = lucid.optim.SGD(model.parameters(), lr=0.1)
    x = lucid.tensor(rng.standard_normal((8, 4)).astype(np.float32))
    w0 = model.weight.numpy().copy()
    with lucid.amp.autocast("cpu", dtype=BF16):
        for step in range(3):
            loss = model(x).float().pow(2).mean()
            loss.backward()
            assert _C.autocast_cached_casts() == 2  # weight and bias
            if step < 2:
                opt.zero_grad()
                (model(x).float().pow(2).mean()).backward()  # the same casts, a second graph
                opt.step()
                assert _C.autocast_cached_casts() == 0
    assert not np.allclose(model.weight.numpy(), w0)


# ---- interrupts -----------------------------------------------------------------------------


def _open_entries(ac):
    """The calling thread's open entries of `ac`, as Python tracks them."""
    return [e for e in autocast_mode._entries_here().entries if e[0] is ac]


def test_interrupt_right_after_the_engine_entered_the_scope_leaves_it(monkeypatch):
    # __exit__ never runs when __enter__ raises, so __enter__ itself must leave a scope the
    # engine had already entered when a KeyboardInterrupt arrived.
    real = autocast_mode._guard_create

    def interrupted(*args):
        assert real(*args) == 0
        raise KeyboardInterrupt

    base = _C.autocast_live_guards()
    ac = autocast("cpu", dtype=BF16)
    monkeypatch.setattr(autocast_mode, "_guard_create", interrupted)
    with pytest.raises(KeyboardInterrupt):
        with ac:
            pass
    monkeypatch.undo()
    assert state() == OFF and _C.autocast_live_guards() == base and not _open_entries(ac)
    with ac:  # the object still works
        assert state() == cpu_on(BF16)
    assert state() == OFF


def test_interrupt_before_the_engine_is_called_leaves_the_open_scopes_alone(monkeypatch):
    # Entry slots are reused: one taken for a new entry still holds the handle of an entry
    # already left. An interrupt before the engine writes a new handle releases that old one
    # again, which must change nothing, even while scopes with later handles are open.
    outer, inner = autocast("cpu", dtype=BF16), autocast("metal", dtype=F16)
    with inner, inner:
        pass  # leaves two slots holding released handles: `outer` takes one, `inner` the other
    base = _C.autocast_live_guards()

    def interrupted(*args):
        raise KeyboardInterrupt

    with outer:
        live = _C.autocast_live_guards()
        monkeypatch.setattr(autocast_mode, "_guard_create", interrupted)
        with pytest.raises(KeyboardInterrupt):
            inner.__enter__()
        monkeypatch.undo()
        assert state() == cpu_on(BF16) and _C.autocast_live_guards() == live
        assert not _open_entries(inner) and len(_open_entries(outer)) == 1
        with inner:  # the thread's entries still work, slots included
            assert state() == (True, F16, True, BF16)
        assert state() == cpu_on(BF16)
    assert state() == OFF and _C.autocast_live_guards() == base


def test_interrupt_while_recording_the_handle_leaves_the_scope(monkeypatch):
    class Interrupting(list):
        def append(self, item):
            super().append(item)
            raise KeyboardInterrupt

    base = _C.autocast_live_guards()
    ac = autocast("cpu", dtype=BF16)
    here = autocast_mode._entries_here()
    monkeypatch.setattr(here, "entries", Interrupting())
    with pytest.raises(KeyboardInterrupt):
        ac.__enter__()
    assert state() == OFF and _C.autocast_live_guards() == base and len(here.entries) == 0


def test_interrupt_during_exit_still_leaves_the_scope(monkeypatch):
    real = autocast_mode._guard_destroy

    def interrupted(handle):
        assert real(handle) == 0
        raise KeyboardInterrupt

    base = _C.autocast_live_guards()
    ac = autocast("cpu", dtype=BF16)
    ac.__enter__()
    monkeypatch.setattr(autocast_mode, "_guard_destroy", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ac.__exit__(None, None, None)
    monkeypatch.undo()
    assert state() == OFF and _C.autocast_live_guards() == base
    # The stale handle left behind is a clear error, not a crash or a silent second exit.
    with pytest.raises(ValueError, match="not a live autocast guard"):
        ac.__exit__(None, None, None)
    assert not _open_entries(ac)  # the stale entry is gone with the error


# ---- autocast state that follows work into other threads -------------------------------------


def _matmul_dtype(device="metal"):
    a = lucid.ones(2, 2, device=device)
    return (a @ a).dtype


def test_work_handed_to_a_thread_pool_keeps_the_callers_autocast_with_propagate():
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        with lucid.amp.autocast("metal", dtype=BF16):
            plain = pool.submit(_matmul_dtype).result()
            carried = pool.submit(lucid.amp.propagate(_matmul_dtype)).result()
            state = lucid.amp.autocast_state()
        # The pool's threads are left as they were.
        after = pool.submit(lambda: (lucid.amp.is_autocast_enabled(), lucid.amp.is_autocast_cache_enabled())).result()
    assert plain is F32  # PyTorch's behaviour: the state is per thread
    assert carried is BF16
    assert after == (False, True)
    assert state.enabled("metal") and state.dtype("metal") is BF16 and not state.enabled("cpu")
    assert "metal=lucid.bfloat16" in repr(state) and "cpu=off" in repr(state)


def test_a_captured_state_nests_restores_the_threads_own_and_survives_exceptions():
    with lucid.amp.autocast("cpu", dtype=BF16), lucid.amp.autocast("metal", cache_enabled=False):
        state = lucid.amp.autocast_state()
    results = []

    def worker():
        with lucid.amp.autocast("metal", dtype=BF16):  # the worker's own state
            with state:
                inside = (_matmul_dtype(), _matmul_dtype("cpu"), lucid.amp.is_autocast_cache_enabled())
                with lucid.amp.autocast("metal", enabled=False):
                    nested = _matmul_dtype()
                back = _matmul_dtype()
            try:
                with state:
                    raise ValueError("boom")
            except ValueError:
                pass
            results.append(
                (inside, nested, back, _matmul_dtype(), _matmul_dtype("cpu"), lucid.amp.is_autocast_cache_enabled())
            )
        results.append(lucid.amp.is_autocast_enabled())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    (inside, nested, back, own_metal, own_cpu, own_cache), final = results
    assert inside == (F16, BF16, False)
    assert nested is F32 and back is F16
    assert (own_metal, own_cpu, own_cache) == (BF16, F32, True)
    assert final is False
    with pytest.raises(RuntimeError, match="has not entered it"):
        state.__exit__(None, None, None)


def test_captured_states_run_concurrently_in_many_threads():
    states = {}
    for dt in (F16, BF16, None):
        if dt is None:
            states[dt] = lucid.amp.propagate(_matmul_dtype)
        else:
            with lucid.amp.autocast("metal", dtype=dt):
                states[dt] = lucid.amp.propagate(_matmul_dtype)
    seen, errors = [], []
    barrier = threading.Barrier(6)

    def run(dt):
        try:
            barrier.wait()
            for _ in range(50):
                seen.append((dt, states[dt]()))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(dt,)) for dt in (F16, BF16, None) * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(seen) == 300
    assert all(got is (F32 if dt is None else dt) for dt, got in seen)
    with pytest.raises(TypeError, match="propagate takes a callable"):
        lucid.amp.propagate(3)


@pytest.mark.parametrize("device,dt", [("metal", F16), ("metal", BF16), ("cpu", BF16)])
def test_a_backward_on_another_thread_replays_the_forwards_casts(device, dt):
    # pytorch#125186: a side-thread backward used another dtype. Here the backward of each op
    # follows the dtypes its forward recorded, whatever the backward thread's autocast says.
    rng = np.random.default_rng(5)
    x_np, w_np = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((3, 6)).astype(np.float32)

    def grads(backward_on_thread, thread_scope):
        x = lucid.tensor(x_np, device=device, requires_grad=True)
        w = lucid.tensor(w_np, device=device, requires_grad=True)
        with lucid.amp.autocast(device, dtype=dt):
            loss = F.gelu(F.linear(x, w)).float().sum()
        if backward_on_thread:

            def run():
                with contextlib.ExitStack() as stack:
                    if thread_scope is not None:
                        stack.enter_context(lucid.amp.autocast(device, dtype=thread_scope))
                    loss.backward()

            t = threading.Thread(target=run)
            t.start()
            t.join()
        else:
            loss.backward()
        return x.grad, w.grad

    same = grads(False, None)
    other_dt = F16 if dt is BF16 else BF16
    for scope in (None, other_dt):
        got = grads(True, scope)
        for g, want in zip(got, same):
            assert g.dtype is want.dtype is F32
            np.testing.assert_array_equal(g.numpy(), want.numpy())


def test_a_stray_exit_of_a_scope_never_entered_raises_and_changes_nothing():
    outer = lucid.amp.autocast("metal", dtype=lucid.bfloat16)
    outer.__enter__()
    try:
        stray = lucid.amp.autocast("metal", dtype=lucid.bfloat16)  # equal arguments, a distinct call
        assert stray is not outer
        with pytest.raises(RuntimeError, match="has not entered it"):
            stray.__exit__(None, None, None)
        assert lucid.amp.get_autocast_dtype("metal") is lucid.bfloat16  # outer is still active
        with lucid.amp.autocast("metal", dtype=lucid.bfloat16):  # a third call enters and leaves its own
            pass
        assert lucid.amp.is_autocast_enabled("metal")
    finally:
        outer.__exit__(None, None, None)
    assert not lucid.amp.is_autocast_enabled("metal")
