"""Leaks: live tensors, autocast guards, cached casts and buffer bytes after long runs.

The engine counts the tensor handles Python holds (`lucid.lucid._memory.live_tensors()`), the
autocast scopes open on any thread (`autocast_live_guards()`), the parameter casts held by
the calling thread's weight cache (`autocast_cached_casts()`) and the bytes held by tensor
buffers on each device (`lucid.memory_allocated`). Autograd graph nodes and the `.grad` the
engine attaches to a leaf hold no handle and are not counted as live tensors; what they keep
alive is seen through the bytes of their buffers, so a graph that outlives its step shows up
in `memory_allocated`.

A soak of nested scopes, small ops, a training step and GradScaler steps (some skipped for
inf/NaN) runs in a child process, so the resident memory measured is that of the loop and
not of the tests that ran before it. Every counter must come back to its baseline exactly,
during the run and after it, and the resident set must stay within RSS_BOUND. A second test
releases tensors from other threads and raises errors in the middle of ops inside autocast
scopes. tests/test_memory.py covers the counters and the buffer cache one call at a time.
"""

import gc
import json
import os
import queue
import resource
import subprocess
import sys
import threading
import time
import warnings

import numpy as np

import lucid
import lucid.nn as nn
import lucid.nn.functional as F
from lucid import _C
from lucid.amp import GradScaler, autocast
from _support import record, scale

SOAK_ITERATIONS = scale(2000, 100_000)
WARMUP = 50
NO_GC = 200  # iterations run at the end with the cycle collector off
RSS_BOUND = 64 << 20  # bytes the soak's resident set may grow by, from after the warm-up to the end
# The host allocator keeps freed buffers for reuse (see lucid.empty_cache). They are not in
# memory_allocated; with the loop's few small shapes the cache stays tiny, and this bounds it.
CACHE_BOUND = 1 << 20
CHILD_TIMEOUT = 1200  # seconds


def counters(collect=True):
    """What the engine holds now, after the cycle collector has run (unless `collect` is off)."""
    if collect:
        gc.collect()
    return {
        "live_tensors": lucid._memory.live_tensors(),
        "live_guards": _C.autocast_live_guards(),
        "cached_casts": _C.autocast_cached_casts(),
        "cpu_bytes": lucid.memory_allocated("cpu"),
        "metal_bytes": lucid.memory_allocated("metal"),
    }


def rss():
    """Resident set size in bytes (Linux /proc; elsewhere the peak from getrusage, which
    only overstates growth)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


# ---- the soak ---------------------------------------------------------------------------------

MODES = {"cpu": lucid.bfloat16, "metal": lucid.float16}
OTHER = {"cpu": "metal", "metal": "cpu"}
POISON_EVERY = 40  # per device: one step in this many has an inf/NaN gradient
POISONS = ["loss * inf", "loss * nan", "inf input", "nan input"]


class Soak:
    """Per device: a 2-layer MLP, its optimizer (SGD with momentum on the CPU, Adam on metal)
    and a GradScaler; plus small inputs for the ops. `step(i)` runs one iteration on device
    i % 2."""

    def __init__(self):
        lucid.manual_seed(0)
        r = np.random.default_rng(0)
        self.parts = {}
        for device in ("cpu", "metal"):
            m = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1)).to(device)
            opt = (
                lucid.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
                if device == "cpu"
                else lucid.optim.Adam(m.parameters(), lr=0.01)
            )
            scaler = GradScaler(device, init_scale=2.0**8, growth_interval=10)
            xs = r.standard_normal((4, 8)).astype(np.float32)
            bad = {}
            for kind, value in (("inf input", np.inf), ("nan input", np.nan)):
                b = xs.copy()
                b[1, 3] = value
                bad[kind] = lucid.tensor(b, device=device)
            self.parts[device] = {
                "model": m,
                "opt": opt,
                "scaler": scaler,
                "x": lucid.tensor(xs, device=device),
                "y": lucid.tensor(r.standard_normal((4, 1)).astype(np.float32), device=device),
                "bad": bad,
                "a": lucid.tensor(r.standard_normal((3, 4)).astype(np.float32), device=device),
                "b": lucid.tensor(r.standard_normal((4, 5)).astype(np.float32), device=device),
                "idx": lucid.tensor(np.array([2, 0, 1, 2]), device=device),
                # The same scope objects are entered again every iteration (and re-entered
                # while active); fresh ones are made every iteration too.
                "scope": autocast(device, dtype=MODES[device]),
            }
        self.skipped = 0
        self.poisoned = 0
        self.steps = 0

        @autocast("cpu", enabled=False)
        def decorated(a, b):
            return (a @ b).softmax(-1)

        self.decorated = decorated

    def small_ops(self, p):
        """About twenty small ops: elementwise, comparison, reductions, matmul, indexing, shapes."""
        a, b, idx = p["a"], p["b"], p["idx"]
        e = lucid.where(a > 0, (a * 2.0 + 1.0).relu(), a.exp().tanh())
        s = e.sum(1).mean() + e.max(1).values.sum()
        mm = (a @ b).float()  # lower precision under the scope
        g = mm[1:3, ::2].sum() + mm.index_select(1, idx).sum()
        v = mm.reshape(5, 3).transpose(0, 1).flatten()
        c = lucid.cat(v.split(7), 0).masked_fill(v < -1.0, 0.0).sum()
        return s + g + c

    def step(self, i):
        device = "cpu" if i % 2 else "metal"
        other = OTHER[device]
        p = self.parts[device]
        m, opt, scaler = p["model"], p["opt"], p["scaler"]
        k = i // 2
        poison = POISONS[(k // POISON_EVERY) % len(POISONS)] if k % POISON_EVERY == POISON_EVERY - 1 else None
        x = p["bad"][poison] if poison in p["bad"] else p["x"]
        scope = p["scope"]
        with scope:
            with autocast(other, dtype=lucid.bfloat16 if other == "cpu" else lucid.float16):
                with scope:  # the same object, re-entered while active
                    ops = self.small_ops(p)
                with autocast(device, enabled=False):
                    ops = ops + self.decorated(p["a"], p["b"]).sum()
            out = m(x)
            assert out.dtype is MODES[device]
            loss = F.mse_loss(out.float(), p["y"]) + 0.0 * ops
        if poison == "loss * inf":
            loss = loss * float("inf")
        elif poison == "loss * nan":
            loss = loss * float("nan")
        if k % 5 == 0:
            m(x).sum().to(other)  # a graph that is dropped without backward; a copy across devices
        before = scaler.get_scale()
        scaler.scale(loss).backward()
        stepped = scaler.step(opt)
        scaler.update()
        if stepped is None and scaler.get_scale() < before:
            self.skipped += 1
        if poison is not None:
            # A poisoned step is skipped and backs the scale off.
            assert stepped is None and scaler.get_scale() == before * 0.5, (i, poison, before, scaler.get_scale())
            self.poisoned += 1
        opt.zero_grad(set_to_none=k % 3 != 0)  # zeros instead of None now and then
        self.steps += 1
        if k % 7 == 0:
            loss.item()

    def settle(self):
        """Every gradient back to None, so counts compare across iterations."""
        for p in self.parts.values():
            p["opt"].zero_grad()


def soak(iterations, warmup=WARMUP):
    """Runs the soak and returns the counters and RSS taken along the way."""
    warnings.filterwarnings("ignore", category=lucid.metal.MetalFallbackWarning)
    # A throwaway run first, so that what the engine and lucid create once per process (the
    # thread's AMP state, handle table slots, the op table) exists before the baseline.
    run = Soak()
    for i in range(warmup):
        run.step(i)
    del run
    empty = counters()  # nothing of a run alive
    run = Soak()
    for i in range(warmup):
        run.step(i)
    run.settle()
    base = counters()
    base_rss = rss()
    base_objects = len(gc.get_objects())
    samples = []
    every = max(iterations // 10, 1)
    start = time.perf_counter()
    for i in range(warmup, warmup + iterations):
        run.step(i)
        if (i + 1 - warmup) % every == 0:
            run.settle()
            samples.append({"iteration": i + 1 - warmup, **counters(), "rss": rss(), "objects": len(gc.get_objects())})
    seconds = time.perf_counter() - start
    # Reference counting alone releases each iteration's tensors, graphs and scopes: nothing
    # waits for the cycle collector.
    gc.collect()
    gc.disable()
    try:
        for i in range(warmup + iterations, warmup + iterations + NO_GC):
            run.step(i)
        run.settle()
        no_gc = counters(collect=False)
    finally:
        gc.enable()
    stats = {
        "steps": run.steps,
        "skipped": run.skipped,
        "poisoned": run.poisoned,
        "scales": {d: p["scaler"].get_scale() for d, p in run.parts.items()},
    }
    del run
    end = counters()
    end_rss = rss()
    cache = lucid.empty_cache()
    return {
        "empty": empty,
        "base": base,
        "base_rss": base_rss,
        "base_objects": base_objects,
        "samples": samples,
        "no_gc": no_gc,
        "end": end,
        "end_rss": end_rss,
        "cache": cache,
        "seconds": seconds,
        **stats,
    }


def test_soak_returns_every_counter_to_its_baseline_and_bounds_rss():
    n = SOAK_ITERATIONS
    child = subprocess.run(
        [sys.executable, os.path.abspath(__file__), str(n)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        cwd=os.path.dirname(os.path.abspath(__file__)),
    )
    assert child.returncode == 0, f"the soak failed (exit {child.returncode}):\n{child.stderr[-6000:]}"
    out = json.loads(child.stdout.strip().splitlines()[-1])
    base, samples = out["base"], out["samples"]
    assert len(samples) == 10 and samples[-1]["iteration"] == n
    for s in samples:  # the same model, optimizer state and inputs held at every sample
        got = {k: s[k] for k in base}
        assert got == base, f"counters grew by iteration {s['iteration']} of {n}: {got} vs baseline {base}"
    assert base["live_guards"] == 0 and base["cached_casts"] == 0
    assert out["no_gc"] == base, f"{NO_GC} iterations with gc off: {out['no_gc']} vs baseline {base}"
    # Dropping the run gives back everything it held.
    assert out["end"] == out["empty"], f"after the run was dropped: {out['end']} vs before it: {out['empty']}"
    assert out["cache"] <= CACHE_BOUND, f"the buffer cache holds {out['cache']} bytes (bound {CACHE_BOUND})"
    # Python objects: a few hundred either way is the collector's own bookkeeping.
    objects = [s["objects"] - out["base_objects"] for s in samples]
    assert max(objects) <= 500, f"gc-tracked objects grew by {objects} over the samples"
    growth = out["end_rss"] - out["base_rss"]
    assert growth <= RSS_BOUND, (
        f"RSS grew by {growth / 2**20:.1f} MiB over {n} iterations (bound {RSS_BOUND >> 20} MiB)"
    )
    # Steady state: no growth between the first tenth and the end beyond half the bound.
    late = samples[-1]["rss"] - samples[0]["rss"]
    assert late <= RSS_BOUND // 2, f"RSS grew by {late / 2**20:.1f} MiB from iteration {samples[0]['iteration']} to {n}"
    assert out["poisoned"] >= n // (2 * POISON_EVERY) - 1 and out["skipped"] >= out["poisoned"]
    record(
        "Leaks",
        f"{n} iterations (after {WARMUP} of warm-up, then {NO_GC} with gc off), each: nested autocast "
        "scopes on both devices (float16/bfloat16, disabled, re-entered, decorated), small elementwise/"
        "reduction/matmul/indexing/reshape/cat ops, one training step of an 8-8-1 MLP on alternating devices "
        "(SGD momentum on cpu, Adam on metal) under autocast with GradScaler, a graph dropped without backward "
        f"every 10th; one step in {POISON_EVERY} per device with an inf/NaN gradient",
        n,
        f"live tensors, live guards, cached casts and cpu/metal bytes equal the baseline at every tenth, with "
        f"gc off, and after the run is dropped; {out['poisoned']} poisoned steps skipped ({out['skipped']} "
        f"skipped in all); RSS grew {growth / 2**20:.1f} MiB (bound {RSS_BOUND >> 20} MiB), buffer cache "
        f"{out['cache']} bytes",
    )


# ---- threads and errors mid-op ----------------------------------------------------------------


def wait_for_no_guards(timeout=10.0):
    """A thread's autocast state is retired by its thread-local destructor, which runs as the
    OS thread exits, a moment after join() returns."""
    deadline = time.monotonic() + timeout
    while _C.autocast_live_guards() and time.monotonic() < deadline:
        time.sleep(0.001)
    return _C.autocast_live_guards()


def failing_calls(device, layer, x):
    """(error, call) pairs that fail in the middle of an op, inside autocast scopes."""
    other = OTHER[device]
    dtype = MODES[device]
    a = lucid.randn(3, 4, device=device)
    leaf = lucid.randn(3, 4, device=device, requires_grad=True)

    def matmul_shapes():
        with autocast(device, dtype=dtype):
            (a * 2.0) @ a  # the casts are made, then the shapes are refused

    def linear_after_cached_cast():
        with autocast(device, dtype=dtype):
            layer(x)  # caches the weight's cast
            layer(lucid.randn(2, 5, device=device))

    def nested_device_mismatch():
        with autocast(device, dtype=dtype), autocast(other, dtype=lucid.bfloat16):
            layer(x) + lucid.ones(4, device=other)

    def index_out_of_range():
        with autocast(device, dtype=dtype):
            (a @ a.T)[7]

    def bad_reshape():
        with autocast(device, dtype=dtype):
            (a + leaf).reshape(5, 5)

    def backward_twice():
        with autocast(device, dtype=dtype):
            loss = layer(x).float().sum()
        loss.backward()
        loss.backward()

    def cat_mismatch():
        with autocast(device, dtype=dtype):
            lucid.cat([a @ a.T, lucid.ones(2, 2, device=device)], 0)

    def python_error_mid_forward():
        with autocast(device, dtype=dtype):
            h = layer(x).relu()
            raise KeyError(h.shape)  # any exception, tensors of the scope alive in the frame

    return [
        (ValueError, matmul_shapes),
        (ValueError, linear_after_cached_cast),
        (RuntimeError, nested_device_mismatch),
        (IndexError, index_out_of_range),
        (ValueError, bad_reshape),
        (RuntimeError, backward_twice),
        (ValueError, cat_mismatch),
        (KeyError, python_error_mid_forward),
    ]


def test_errors_mid_op_and_tensors_released_on_other_threads_leave_counters_at_baseline():
    rounds = scale(30, 1000)
    layer = {d: nn.Linear(4, 3).to(d) for d in ("cpu", "metal")}
    xs = {d: lucid.randn(2, 4, device=d) for d in ("cpu", "metal")}
    base = counters()
    base_rss = rss()

    # (a) errors raised in the middle of ops inside (nested) autocast scopes.
    errors = 0
    kinds = {}
    try:
        for r in range(rounds):
            if r == 0:  # the first round with the cycle collector off: reference counting alone
                gc.collect()
                gc.disable()
            for device in ("cpu", "metal"):
                calls = failing_calls(device, layer[device], xs[device])
                for error, call in calls:
                    try:
                        call()
                    except error:
                        errors += 1
                    else:
                        raise AssertionError(f"{call.__name__} on {device} did not raise {error.__name__}")
                    kinds[call.__name__] = error.__name__
                    layer[device].zero_grad()  # backward_twice's first backward left gradients, as it should
                    assert _C.autocast_live_guards() == 0, call.__name__
                    assert _C.autocast_cached_casts() == 0, call.__name__
            del calls, call  # the last device's closures hold its inputs
            if r == 0:
                got = counters(collect=False)
                gc.enable()
                assert got == base, f"after the first round of errors, with gc off: {got} vs baseline {base}"
    finally:
        gc.enable()
    after_errors = counters()
    assert after_errors == base, f"after {errors} errors mid-op: {after_errors} vs baseline {base}"

    # (b) tensors made on one thread and released on another, both ways, while the other
    # threads train under autocast. One tensor is in flight each way at a time, so that the
    # resident memory measured is not that of a backlog.
    made_here = queue.Queue()
    made_there = queue.Queue()
    failures = []

    def worker(seed):
        try:
            lucid.manual_seed(seed)
            device = "cpu" if seed % 2 else "metal"
            m = nn.Linear(4, 2).to(device)
            opt = lucid.optim.Adam(m.parameters(), lr=0.01)
            scaler = GradScaler(device, init_scale=2.0**8)
            x = lucid.randn(3, 4, device=device)
            while True:
                got = made_here.get(timeout=60)
                if got is None:
                    return
                assert got.shape == (2, 3)
                del got  # released on this thread
                with autocast(device, dtype=MODES[device]):
                    loss = m(x).float().pow(2).mean()
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
                with autocast(device, dtype=MODES[device]):
                    made_there.put(m(x))  # an output with its graph, released on the main thread
        except BaseException as e:  # noqa: BLE001 - reported on the main thread
            failures.append(e)
            made_there.put(None)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    threaded = rounds * len(threads)
    for _ in range(threaded):
        made_here.put(lucid.randn(2, 3, device="metal") @ lucid.randn(3, 3, device="metal"))
        y = made_there.get(timeout=60)
        if y is None:
            break
        y.sum().backward()  # backward of another thread's graph, then released here
        del y
    for _ in threads:
        made_here.put(None)
    for t in threads:
        t.join(timeout=60)
    assert not failures, failures
    assert not any(t.is_alive() for t in threads)

    # (c) threads that end inside an open scope, holding cached weight casts: their scopes
    # are retired and the casts released when the thread ends.
    def leave_scope_open(device):
        try:
            scope = autocast(device, dtype=MODES[device])
            scope.__enter__()
            layer[device](xs[device])
            assert _C.autocast_cached_casts() == 2  # the weight's and the bias' casts
        except BaseException as e:  # noqa: BLE001 - reported on the main thread
            failures.append(e)

    open_threads = [threading.Thread(target=leave_scope_open, args=(d,)) for d in ("cpu", "metal") * 4]
    for t in open_threads:
        t.start()
    for t in open_threads:
        t.join(timeout=60)
    assert not failures, failures
    assert wait_for_no_guards() == 0, "scopes of ended threads are still live"
    end = counters()
    assert end == base, f"after the threads: {end} vs baseline {base}"
    growth = rss() - base_rss
    assert growth <= RSS_BOUND, f"RSS grew by {growth / 2**20:.1f} MiB (bound {RSS_BOUND >> 20} MiB)"
    record(
        "Leaks",
        f"errors mid-op inside autocast scopes ({len(kinds)} kinds x 2 devices x {rounds} rounds, the "
        "first with gc off: shape, device, index, reshape, cat, backward twice, a Python error mid-forward, "
        f"after a cached weight cast); {threaded} tensors made on the main thread and released on 4 training "
        f"threads and {threaded} graphs the other way; {len(open_threads)} threads ending inside an open scope",
        errors + 2 * threaded + len(open_threads),
        f"live tensors, guards, cached casts and cpu/metal bytes equal the baseline; RSS grew "
        f"{growth / 2**20:.1f} MiB (bound {RSS_BOUND >> 20} MiB)",
    )


if __name__ == "__main__":
    print(json.dumps(soak(int(sys.argv[1]))))
