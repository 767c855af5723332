"""lucid.amp.autocast: every behaviour of the reference page (spec Part 1) and Part 2."""

import contextlib
import functools
import io
import threading

import ml_dtypes
import numpy as np
import pytest

import lucid
import lucid.nn as nn
from helpers import OFF, autocast_state, f16_ulps

autocast = lucid.amp.autocast


# ---- the reference page's examples, as written ------------------------------------------

def test_example_context_manager():
    model = nn.Linear(4, 2).to("metal")
    x = lucid.randn(8, 4, device="metal")
    with lucid.amp.autocast():
        output = model(x)  # ops cast to float16 inside
    assert output.dtype == lucid.float16
    assert repr(output.dtype) == "lucid.float16"
    ref = x.numpy() @ model.weight.numpy().T + model.bias.numpy()
    np.testing.assert_allclose(output.numpy().astype(np.float32), ref, rtol=2e-3, atol=2e-3)


def test_example_decorator():
    model = nn.Linear(4, 2).to("metal")
    x = lucid.randn(8, 4, device="metal")

    @lucid.amp.autocast()
    def predict(x):
        return model(x)

    assert predict(x).dtype == lucid.float16
    assert autocast_state() == OFF


def test_example_nested_scopes_print():
    a = lucid.randn(2, 2, device="metal")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        with lucid.amp.autocast(dtype=lucid.float16):
            print((a @ a).dtype)  # fp16 here
            with lucid.amp.autocast(dtype=lucid.bfloat16):
                print((a @ a).dtype)  # bf16 here
            print((a @ a).dtype)  # back to fp16 — prior guard reinstalled
    assert buf.getvalue() == "lucid.float16\nlucid.bfloat16\nlucid.float16\n"


def test_examples_on_cpu_follow_cpu_rules():
    # The same code on "cpu": float16 has no CPU kernels, so the default scope changes nothing.
    model = nn.Linear(4, 2)
    x = lucid.randn(8, 4)
    a = lucid.randn(2, 2)
    with autocast("cpu"):
        assert model(x).dtype == lucid.float32
        assert (a @ a).dtype == lucid.float32
        assert lucid.amp.is_autocast_enabled("cpu")
        assert lucid.amp.get_autocast_dtype("cpu") == lucid.float16  # reports what it was given
    with autocast("cpu", dtype=lucid.bfloat16):
        y = model(x)
        assert y.dtype == lucid.bfloat16
        assert (a @ a).dtype == lucid.bfloat16
    ref = x.numpy() @ model.weight.numpy().T + model.bias.numpy()
    np.testing.assert_allclose(y.numpy().astype(np.float32), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("device,dtype,np_dtype", [("metal", lucid.float16, np.float16),
                                                   ("metal", lucid.bfloat16, ml_dtypes.bfloat16),
                                                   ("cpu", lucid.bfloat16, ml_dtypes.bfloat16)])
def test_lower_precision_matmul_accumulates_in_float32_and_rounds_once(device, dtype, np_dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((33, 65)).astype(np.float32)
    b = rng.standard_normal((65, 17)).astype(np.float32)
    with autocast(device, dtype=dtype):
        got = (lucid.tensor(a, device=device) @ lucid.tensor(b, device=device)).numpy()
    assert got.dtype == np.dtype(np_dtype)
    a_low, b_low = a.astype(np_dtype).astype(np.float64), b.astype(np_dtype).astype(np.float64)
    exact = a_low @ b_low                       # the products of rounded inputs, exactly
    once = exact.astype(np.float32).astype(np_dtype)
    # float32 accumulation (in BLAS order) then one rounding: at most one unit apart from
    # rounding the exact sum once.
    if np_dtype is np.float16:
        assert f16_ulps(got, once).max() <= 1
    else:
        diff = np.abs(got.astype(np.float64) - once.astype(np.float64))
        spacing = np.abs(once.astype(np.float64)) * 2.0 ** -7 + 1e-30
        assert (diff <= spacing).all()


# ---- scope behaviour ----------------------------------------------------------------------

def test_exception_inside_scope_restores_and_propagates():
    with pytest.raises(KeyError, match="boom"):
        with autocast():
            assert lucid.amp.is_autocast_enabled("metal")
            raise KeyError("boom")
    assert autocast_state() == OFF


def test_exit_never_swallows_the_exception():
    scope = autocast()
    scope.__enter__()
    assert scope.__exit__(ValueError, ValueError("x"), None) is False


def test_reuse_after_exit():
    scope = autocast(dtype=lucid.bfloat16)
    for _ in range(3):
        with scope:
            assert lucid.amp.get_autocast_dtype("metal") == lucid.bfloat16
        assert autocast_state() == OFF


def test_reentry_while_active_each_exit_undoes_its_entry():
    outer = autocast(dtype=lucid.bfloat16)
    inner = autocast(dtype=lucid.float16)
    with outer:
        with inner:
            with inner:
                assert lucid.amp.get_autocast_dtype("metal") == lucid.float16
            assert lucid.amp.get_autocast_dtype("metal") == lucid.float16
        assert lucid.amp.get_autocast_dtype("metal") == lucid.bfloat16
    assert autocast_state() == OFF


def test_scope_ends_at_exit_not_when_collected():
    scope = autocast()
    with scope:
        pass
    assert autocast_state() == OFF  # the object still exists
    del scope
    assert autocast_state() == OFF


def test_nesting_restores_outer_dtype_across_devices():
    with autocast("cpu", dtype=lucid.bfloat16):
        with autocast("metal", dtype=lucid.float16):
            with autocast("metal", dtype=lucid.bfloat16):
                assert autocast_state() == (True, lucid.bfloat16, True, lucid.bfloat16)
            assert autocast_state() == (True, lucid.float16, True, lucid.bfloat16)
        assert autocast_state() == (False, None, True, lucid.bfloat16)
    assert autocast_state() == OFF


def test_float32_target_is_accepted_and_widens():
    a = lucid.randn(3, 3, device="metal").half()
    with autocast(dtype=lucid.float32):
        assert (a @ a).dtype == lucid.float32


# ---- enabled=False ------------------------------------------------------------------------

def test_disabled_scope_leaves_other_device_alone():
    with autocast("cpu", dtype=lucid.bfloat16):
        with autocast("metal", dtype=lucid.float16):
            with autocast("metal", enabled=False):
                assert autocast_state() == (False, None, True, lucid.bfloat16)
                a = lucid.randn(2, 2, device="metal")
                assert (a @ a).dtype == lucid.float32
                c = lucid.randn(2, 2)
                assert (c @ c).dtype == lucid.bfloat16
            assert autocast_state() == (True, lucid.float16, True, lucid.bfloat16)
        with autocast("cpu", enabled=False):
            assert autocast_state() == (False, None, False, None)
        assert lucid.amp.get_autocast_dtype("cpu") == lucid.bfloat16


def test_disabled_scope_on_its_own_changes_nothing_visible():
    with autocast(enabled=False):
        assert autocast_state() == OFF
        a = lucid.randn(2, 2, device="metal")
        assert (a @ a).dtype == lucid.float32


# ---- the decorator ------------------------------------------------------------------------

def test_decorator_fresh_scope_per_call_and_wraps():
    scope = autocast(dtype=lucid.bfloat16)

    @scope
    def f(x):
        """doc of f"""
        return lucid.amp.get_autocast_dtype("metal"), x

    assert f.__name__ == "f" and f.__doc__ == "doc of f" and f.__wrapped__ is not None
    for i in range(3):
        assert f(i) == (lucid.bfloat16, i)
        assert autocast_state() == OFF


def test_decorator_recursion():
    seen = []

    @autocast(dtype=lucid.float16)
    def down(n):
        seen.append((n, lucid.amp.get_autocast_dtype("metal")))
        if n:
            down(n - 1)
        seen.append((n, lucid.amp.get_autocast_dtype("metal")))

    depth_before = lucid._engine.autocast_live_guards()
    down(50)
    assert [d for _, d in seen] == [lucid.float16] * 102
    assert lucid._engine.autocast_live_guards() == depth_before
    assert autocast_state() == OFF


def test_decorator_exception_restores():
    @autocast()
    def bad():
        raise ZeroDivisionError("inside")

    with pytest.raises(ZeroDivisionError, match="inside"):
        bad()
    assert autocast_state() == OFF


def test_decorator_inside_outer_scope_restores_outer():
    @autocast(dtype=lucid.float16)
    def g():
        return lucid.amp.get_autocast_dtype("metal")

    with autocast(dtype=lucid.bfloat16):
        assert g() == lucid.float16
        assert lucid.amp.get_autocast_dtype("metal") == lucid.bfloat16


def test_decorating_a_non_callable_is_a_type_error():
    with pytest.raises(TypeError):
        autocast()(42)


# ---- threads ------------------------------------------------------------------------------

def run_in_thread(fn):
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - reported to the main thread
            box["error"] = e

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def test_new_threads_start_off():
    with autocast("metal", dtype=lucid.bfloat16), autocast("cpu", dtype=lucid.bfloat16):
        assert run_in_thread(autocast_state) == OFF
        assert lucid.amp.get_autocast_dtype("metal") == lucid.bfloat16


def test_per_thread_independence():
    ready, done = threading.Event(), threading.Event()
    seen = {}

    def worker():
        with autocast("cpu", dtype=lucid.bfloat16):
            ready.set()
            done.wait(5)
            seen["worker"] = autocast_state()

    t = threading.Thread(target=worker)
    t.start()
    assert ready.wait(5)
    seen["main"] = autocast_state()
    done.set()
    t.join()
    assert seen["main"] == OFF
    assert seen["worker"] == (False, None, True, lucid.bfloat16)


def test_one_object_shared_by_threads():
    scope = autocast(dtype=lucid.bfloat16)
    n = 6
    barrier = threading.Barrier(n)
    results, errors = [], []

    def worker(i):
        try:
            with scope:
                barrier.wait(5)  # every thread is inside at once
                inner = autocast_state()
                with scope:
                    barrier.wait(5)
                    inner2 = autocast_state()
                barrier.wait(5)
                after_inner = autocast_state()
            results.append((inner, inner2, after_inner, autocast_state()))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    on = (True, lucid.bfloat16, False, None)
    assert results == [(on, on, on, OFF)] * n
    assert autocast_state() == OFF


def test_exit_on_a_thread_that_did_not_enter_raises_and_changes_nothing():
    scope = autocast(dtype=lucid.bfloat16)
    with scope:
        with pytest.raises(RuntimeError, match="has not entered"):
            run_in_thread(lambda: scope.__exit__(None, None, None))
        assert lucid.amp.get_autocast_dtype("metal") == lucid.bfloat16
    assert autocast_state() == OFF


# ---- out-of-order exits and misuse ----------------------------------------------------------

def test_out_of_order_exits_follow_the_innermost_live_scope():
    a = autocast(dtype=lucid.float16)
    b = autocast(dtype=lucid.bfloat16)
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)       # the outer one leaves first
    assert lucid.amp.get_autocast_dtype("metal") == lucid.bfloat16  # b is still alive
    b.__exit__(None, None, None)
    assert autocast_state() == OFF


def test_out_of_order_across_devices():
    m = autocast("metal", dtype=lucid.float16)
    c = autocast("cpu", dtype=lucid.bfloat16)
    m.__enter__()
    c.__enter__()
    m.__exit__(None, None, None)
    assert autocast_state() == (False, None, True, lucid.bfloat16)
    c.__exit__(None, None, None)
    assert autocast_state() == OFF


def test_exit_without_enter_raises_and_changes_nothing():
    stray = autocast()
    with pytest.raises(RuntimeError):
        stray.__exit__(None, None, None)
    with autocast(dtype=lucid.bfloat16):
        with pytest.raises(RuntimeError):
            stray.__exit__(None, None, None)
        assert lucid.amp.get_autocast_dtype("metal") == lucid.bfloat16
    scope = autocast()
    with scope:
        pass
    with pytest.raises(RuntimeError):
        scope.__exit__(None, None, None)  # already left every entry
    assert autocast_state() == OFF


def test_enter_returns_self():
    scope = autocast()
    with scope as s:
        assert s is scope


# ---- validation ---------------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["cuda", "mps", "METAL", "", None, 3, lucid.device("cpu")])
def test_invalid_device_type(bad):
    with pytest.raises(ValueError, match="device_type"):
        autocast(bad)
    assert autocast_state() == OFF


@pytest.mark.parametrize("bad", [lucid.int32, lucid.int64, lucid.bool_])
def test_dtype_autocast_cannot_target_is_a_value_error(bad):
    with pytest.raises(ValueError, match="float16"):
        autocast(dtype=bad)
    assert autocast_state() == OFF


@pytest.mark.parametrize("bad", ["float16", np.float16, 5, object()])
def test_non_dtype_is_a_type_error(bad):
    with pytest.raises(TypeError):
        autocast(dtype=bad)
    assert autocast_state() == OFF


def test_enabled_must_be_boolean():
    with pytest.raises(TypeError):
        autocast(enabled="yes")


# ---- queries ------------------------------------------------------------------------------

def test_query_functions_are_static_methods_and_module_functions():
    assert autocast.is_autocast_enabled is lucid.amp.is_autocast_enabled
    assert autocast.get_autocast_dtype is lucid.amp.get_autocast_dtype
    with autocast("cpu", dtype=lucid.bfloat16):
        assert autocast.is_autocast_enabled() and autocast.is_autocast_enabled("cpu")
        assert not autocast.is_autocast_enabled("metal")
        assert autocast.get_autocast_dtype("metal") is None
        assert autocast.get_autocast_dtype() == lucid.bfloat16


def test_dtype_without_device_is_the_innermost_scope_that_switches_on():
    assert lucid.amp.get_autocast_dtype() is None
    with autocast("cpu", dtype=lucid.bfloat16):
        with autocast("metal", dtype=lucid.float16):
            assert lucid.amp.get_autocast_dtype() == lucid.float16
            with autocast("metal", enabled=False):
                assert lucid.amp.get_autocast_dtype() == lucid.bfloat16
                assert lucid.amp.is_autocast_enabled()
                with autocast("cpu", enabled=False):
                    assert lucid.amp.get_autocast_dtype() is None
                    assert not lucid.amp.is_autocast_enabled()


@pytest.mark.parametrize("bad", ["cuda", 1, ""])
def test_queries_reject_invalid_devices(bad):
    with pytest.raises(ValueError):
        lucid.amp.is_autocast_enabled(bad)
    with pytest.raises(ValueError):
        lucid.amp.get_autocast_dtype(bad)


# ---- the op policy table ------------------------------------------------------------------

def test_policy_lookups():
    P = lucid.amp.CastPolicy
    assert lucid.amp.policy("matmul") is P.LOWER_PRECISION
    assert lucid.amp.policy("linear") is P.LOWER_PRECISION
    assert lucid.amp.policy("sum") is P.FLOAT32 and lucid.amp.policy("mean") is P.FLOAT32
    assert lucid.amp.policy("add") is P.NONE
    assert lucid.amp.policy("matmul") == "lower_precision"
    with pytest.raises(ValueError, match="unknown op"):
        lucid.amp.policy("no_such_op")
    with pytest.raises(TypeError):
        lucid.amp.policy(3)


def _run(name, x, w):
    ops = {
        "add": lambda: x + x, "sub": lambda: x - x, "mul": lambda: x * x, "div": lambda: x / x,
        "neg": lambda: -x, "relu": lambda: x.relu(), "matmul": lambda: x @ w,
        "linear": lambda: nn.functional.linear(x, w),
        "sum": lambda: x.sum(), "mean": lambda: x.mean(), "reshape": lambda: x.reshape(-1),
        "view": lambda: x.view(-1), "transpose": lambda: x.transpose(0, 1), "permute": lambda: x.permute(1, 0),
        "contiguous": lambda: x.T.contiguous(), "to": lambda: x.to(x.device),
    }
    return ops[name]()


@pytest.mark.parametrize("device,target", [("metal", lucid.float16), ("cpu", lucid.bfloat16)])
def test_every_op_in_the_table_yields_its_policy_dtype(device, target):
    P = lucid.amp.CastPolicy
    table = lucid.amp.policies()
    assert {"matmul", "linear", "sum", "mean", "add"} <= set(table)
    x = lucid.randn(4, 4, device=device)
    w = lucid.randn(4, 4, device=device)
    for name, policy in table.items():
        with autocast(device, dtype=target):
            out = _run(name, x, w)
        expected = {P.LOWER_PRECISION: target if (device != "cpu" or name in lucid.amp.cpu_bfloat16_ops())
                    else lucid.float32, P.FLOAT32: lucid.float32, P.NONE: lucid.float32,
                    P.PROMOTE: lucid.float32}[policy]
        assert out.dtype == expected, (name, policy)


def test_float32_policy_widens_low_precision_input_only_under_autocast():
    h = lucid.randn(16, device="metal").half()
    assert h.sum().dtype == lucid.float16
    assert h.mean().dtype == lucid.float16
    with autocast():
        assert h.sum().dtype == lucid.float32
        assert h.mean().dtype == lucid.float32
    np.testing.assert_allclose(h.sum().numpy().astype(np.float32), h.numpy().astype(np.float32).sum(),
                               rtol=1e-3)


def test_integer_inputs_are_never_cast():
    i = lucid.arange(9, device="metal").reshape(3, 3)
    with autocast():
        r = i @ i
    assert r.dtype == lucid.int64
    np.testing.assert_array_equal(r.numpy(), np.arange(9).reshape(3, 3) @ np.arange(9).reshape(3, 3))


def test_autocast_only_affects_its_own_device():
    c = lucid.randn(3, 3)
    with autocast("metal"):
        assert (c @ c).dtype == lucid.float32


def test_autocast_repr_and_properties():
    s = autocast("cpu", dtype=lucid.bfloat16, enabled=False)
    assert (s.device_type, s.dtype, s.enabled) == ("cpu", lucid.bfloat16, False)
    assert "cpu" in repr(s) and "bfloat16" in repr(s)


def test_functools_partial_of_decorated_function():
    @autocast()
    def add(a, b):
        return lucid.amp.is_autocast_enabled("metal"), a + b

    assert functools.partial(add, 1)(2) == (True, 3)
