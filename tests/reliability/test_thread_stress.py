"""Autocast under threads, all at once. Eight threads enter and leave autocast scopes for
several seconds: random nesting up to six deep, both devices, enabled or not, three dtypes,
their own scope objects and objects shared by every thread (entered by several threads at
the same time and several times by one thread), left innermost-first or out of order, as a
decorator and through an exception. In between they run matmul, linear, conv2d and reductions
on tensors made once by the main thread and shared by all, and backward passes on leaves of
their own. After every step a thread checks what it sees on both devices (and with no device)
against its own stack of scopes, the dtype its ops ran in against the op policy, their values
against numpy, and its weight-cast cache against the casts its own ops made. Every thread must
finish (one still running long after the deadline is a deadlock), and afterwards no guard may
be live, no tensor leaked and the main thread's scopes untouched.

The second test ends threads while they are inside scopes, as the spec (Part 2, item 5) allows:
such a guard is harmless, its scope goes with its thread, and its handle is then stale.

tests/test_autocast.py and tests/test_abi.py check each of these rules once on one or two
threads; this file checks them together under contention.
"""

import gc
import random
import sys
import threading
import time
import traceback

import ml_dtypes
import numpy as np

import lucid
import lucid.nn.functional as F
from lucid import _C
from lucid.amp import autocast

from _support import record, scale

THREADS = 8
SECONDS = scale(2.0, 15.0)
MAX_DEPTH = 6
GRACE = 60  # seconds past the deadline before a running thread counts as deadlocked
DEVICES = ("cpu", "metal")
F16, BF16, F32 = lucid.float16, lucid.bfloat16, lucid.float32
DTYPES = (F16, BF16, F32)
NP = {F32: np.float32, F16: np.float16, BF16: ml_dtypes.bfloat16}
# Relative rounding bound of one result in each dtype; for float32 it also covers a different
# accumulation order.
EPS = {F32: 1e-5, F16: 2.0**-10, BF16: 2.0**-7}
LOW = (F16, BF16)


class Planned(Exception):
    """Raised on purpose inside a scope to leave it by an exception."""


def compute_dtype(device, enabled, dtype):
    """The dtype a lower-precision op (matmul, linear, conv2d) runs in under this state. The
    CPU stream has no float16 kernels, so a CPU float16 scope leaves them in float32."""
    if not enabled or dtype is F32:
        return F32
    if device == "cpu" and dtype is F16:
        return F32
    return dtype


def rounded(a, dtype):
    return np.asarray(a).astype(NP[dtype]).astype(np.float64)


def conv2d_reference(img, kernel, bias):
    """3x3 cross-correlation with padding 1, in float64."""
    n, _, h, w = img.shape
    padded = np.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, kernel.shape[0], h, w))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", padded[:, :, i : i + h, j : j + w], kernel[:, :, i, j])
    return out + bias[None, :, None, None]


def assert_close(got, ref, eps, what, scale_=None):
    """|got - ref| <= 2 eps |ref| + eps * scale (scale: max |ref| unless given)."""
    got = np.asarray(got, np.float64)
    scale_ = np.abs(ref).max() if scale_ is None else scale_
    err = np.abs(got - ref)
    bound = 2 * eps * np.abs(ref) + eps * scale_
    if not np.all(err <= bound):
        k = int(np.argmax(err - bound))
        raise AssertionError(
            f"{what}: off by {err.flat[k]:.3g} at flat index {k} (bound {bound.flat[k]:.3g}; "
            f"got {got.flat[k]!r}, numpy {ref.flat[k]!r})"
        )


def make_shared():
    """The tensors every thread reads, made on the main thread, and numpy's answers for every
    dtype an op can run in: inputs rounded to that dtype, products in float64 (the engine
    accumulates in float32), the result rounded to that dtype."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    w = rng.standard_normal((24, 32)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    img = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    k = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    kb = rng.standard_normal(4).astype(np.float32)
    want = {}
    for dt in DTYPES:
        mm = rounded(rounded(x, dt) @ rounded(w, dt).T, dt)
        want[dt] = {
            "matmul": mm,
            "linear": rounded(rounded(x, dt) @ rounded(w, dt).T + rounded(b, dt), dt),
            "conv2d": rounded(conv2d_reference(rounded(img, dt), rounded(k, dt), rounded(kb, dt)), dt),
            # d/dleaf of linear(leaf, w, b).sum(): every row is w's column sums, in dt.
            "grad": rounded(rounded(w, dt).sum(axis=0), dt),
            "w": rounded(w, dt),
            "b": rounded(b, dt),
        }
    want["elementwise.sum"] = (x.astype(np.float64) * 2 + 1).sum(axis=1)
    tensors = {}
    for d in DEVICES:
        tensors[d] = {
            "x": lucid.tensor(x, device=d),
            "w": lucid.tensor(w, device=d),
            "b": lucid.tensor(b, device=d),
            # a parameter: a float32 leaf that requires grad, so autocast caches its cast per thread
            "p": lucid.tensor(w, device=d, requires_grad=True),
            "img": lucid.tensor(img, device=d),
            "k": lucid.tensor(k, device=d),
            "kb": lucid.tensor(kb, device=d),
        }
    return tensors, want


def shared_scopes():
    return [
        autocast("metal"),
        autocast("metal", dtype=BF16),
        autocast("cpu", dtype=BF16),
        autocast("cpu", enabled=False),
        autocast("metal", enabled=False),
        autocast("cpu", dtype=F32),
    ]


def seen_state():
    return tuple((lucid.amp.is_autocast_enabled(d), lucid.amp.get_autocast_dtype(d)) for d in DEVICES)


class Worker:
    """One thread's random walk through scopes and ops, with its own model of what it should see."""

    def __init__(self, seed, shared, no_grad, tensors, want):
        self.seed, self.rng = seed, random.Random(seed)
        self.shared, self.no_grad = shared, no_grad
        self.tensors, self.want = tensors, want
        self.stack = []  # (device, enabled, dtype, scope object), innermost last
        self.cached = set()  # the casts autocast's weight cache should hold for this thread
        self.leaves = 0
        self.transitions = self.checks = 0
        self.recent = []  # the last actions, for a failure message
        self.error = None

    # ---- the model --------------------------------------------------------------------------

    def expected(self, device):
        for dev, enabled, dtype, _ in reversed(self.stack):
            if dev == device:
                return enabled, (dtype if enabled else None)
        return False, None

    def expected_any(self):
        """With no device: on if either device is; the dtype of the innermost scope that is
        still in force on its device and switches autocast on."""
        seen = set()
        for dev, enabled, dtype, _ in reversed(self.stack):
            if dev in seen:
                continue
            seen.add(dev)
            if enabled:
                return True, dtype
        return False, None

    def check_state(self):
        for device in DEVICES:
            want = self.expected(device)
            got = (lucid.amp.is_autocast_enabled(device), lucid.amp.get_autocast_dtype(device))
            assert got == want, f"{device}: saw {got}, this thread's scopes say {want}"
        on, dtype = self.expected_any()
        got = (lucid.amp.is_autocast_enabled(), lucid.amp.get_autocast_dtype())
        assert got == (on, dtype), f"no device: saw {got}, this thread's scopes say {(on, dtype)}"
        cached = _C.autocast_cached_casts()
        assert cached == len(self.cached), (
            f"this thread's weight cache holds {cached} casts, its own ops made {len(self.cached)}"
        )
        self.checks += 1

    def note(self, action):
        self.recent.append(action)
        del self.recent[:-10]

    def push(self, scope):
        self.stack.append((scope.device_type, scope.enabled, scope.dtype, scope))

    def drop(self, i):
        del self.stack[i]
        if not self.stack:  # the outermost scope has gone: the weight cache is emptied
            self.cached.clear()

    # ---- scope transitions ------------------------------------------------------------------

    def pick_scope(self):
        r = self.rng
        if r.random() < 0.45:
            return r.choice(self.shared)
        return autocast(r.choice(DEVICES), dtype=r.choice(DTYPES), enabled=r.random() < 0.8)

    def enter(self):
        scope = self.pick_scope()
        self.note(f"enter {scope!r} (depth {len(self.stack) + 1})")
        scope.__enter__()
        self.push(scope)

    def leave(self):
        # Mostly the innermost, sometimes one further out: scopes may be left in any order.
        i = len(self.stack) - 1 if self.rng.random() < 0.7 else self.rng.randrange(len(self.stack))
        scope = self.stack[i][3]
        # An object entered several times on this thread leaves its most recent entry here.
        i = max(k for k, entry in enumerate(self.stack) if entry[3] is scope)
        self.note(f"exit {scope!r} (entry {i + 1} of {len(self.stack)})")
        scope.__exit__(None, None, None)
        self.drop(i)

    def decorated(self):
        scope = self.rng.choice(self.shared)
        self.note(f"call decorated by {scope!r}")

        pushed = []

        def body():
            self.push(scope)
            pushed.append(True)
            self.check_state()
            self.op()

        try:
            scope(body)()
        finally:
            if pushed:
                self.drop(len(self.stack) - 1)

    def raising(self):
        scope = self.pick_scope()
        self.note(f"raise inside {scope!r}")
        pushed = False
        try:
            with scope:
                self.push(scope)
                pushed = True
                self.check_state()
                raise Planned
        except Planned:
            pass
        finally:
            if pushed:
                self.drop(len(self.stack) - 1)

    def foreign_exit(self):
        """Leaving a shared object this thread has not entered is a clear error that changes nothing."""
        mine = {id(entry[3]) for entry in self.stack}
        free = [s for s in self.shared if id(s) not in mine]
        if not free:
            return
        scope = self.rng.choice(free)
        self.note(f"exit {scope!r} not entered here")
        try:
            scope.__exit__(None, None, None)
        except RuntimeError:
            pass
        else:
            raise AssertionError(f"{scope!r}.__exit__ on a thread that never entered it did not raise")

    # ---- ops --------------------------------------------------------------------------------

    def op(self):
        r = self.rng
        device = r.choice(DEVICES)
        t = self.tensors[device]
        dt = compute_dtype(device, *self.expected(device))
        want = self.want[dt]
        kind = r.choice(("matmul", "linear", "linear(param)", "conv2d", "matmul.sum", "elementwise.sum"))
        grad_off = kind == "linear(param)" and r.random() < 0.3
        self.note(f"{kind}{' under no_grad' if grad_off else ''} on {device}, expecting {dt}")
        if kind == "matmul":
            got, ref, out_dt = t["x"] @ t["w"].T, want["matmul"], dt
        elif kind == "linear":
            got, ref, out_dt = F.linear(t["x"], t["w"], t["b"]), want["linear"], dt
        elif kind == "linear(param)":
            if grad_off:
                with self.no_grad:
                    got = F.linear(t["x"], t["p"], t["b"])
                assert not got.requires_grad, "an op under no_grad recorded a graph"
            else:
                got = F.linear(t["x"], t["p"], t["b"])
                assert got.requires_grad, "an op on a parameter did not record a graph"
                if dt in LOW and self.stack:
                    self.cached.add(("p", device, dt))
            ref, out_dt = want["linear"], dt
        elif kind == "conv2d":
            got, ref, out_dt = F.conv2d(t["img"], t["k"], t["kb"], padding=1), want["conv2d"], dt
        elif kind == "matmul.sum":
            # a reduction of a lower-precision result runs in float32
            mm = t["x"] @ t["w"].T
            assert mm.dtype is dt, f"{self.recent[-1]}: the matmul ran in {mm.dtype}"
            mm_values = mm.float().numpy().astype(np.float64)
            assert_close(mm_values, want["matmul"], EPS[dt], f"{self.recent[-1]}: the matmul")
            got, out_dt = mm.sum(dim=0), F32
        else:
            # elementwise ops keep float32 input in float32 under any scope
            got, out_dt, dt = (t["x"] * 2 + 1).sum(dim=1), F32, F32
        assert got.dtype is out_dt, f"{self.recent[-1]}: ran in {got.dtype}, the state says {out_dt}"
        values = got.float().numpy()
        if kind == "matmul.sum":
            assert_close(values, mm_values.sum(axis=0), EPS[F32], self.recent[-1], np.abs(mm_values).sum(axis=0).max())
        elif kind == "elementwise.sum":
            ref = self.want["elementwise.sum"]
            assert_close(values, ref, EPS[F32], self.recent[-1])
        else:
            assert_close(values, ref, EPS[dt], self.recent[-1])
        self.checks += 1

    def backward(self):
        """linear(leaf, w, b).sum() on a leaf of this thread's own, under the current state."""
        r = self.rng
        device = r.choice(DEVICES)
        t = self.tensors[device]
        dt = compute_dtype(device, *self.expected(device))
        want = self.want[dt]
        self.note(f"backward on {device}, expecting {dt}")
        leaf_np = np.asarray([[r.uniform(-2, 2) for _ in range(32)] for _ in range(16)], np.float32)
        leaf = lucid.tensor(leaf_np, device=device, requires_grad=True)
        out = F.linear(leaf, t["w"], t["b"])
        if dt in LOW and self.stack:
            self.leaves += 1
            self.cached.add(("leaf", self.leaves, dt))  # a leaf that requires grad is cached like a parameter
        assert out.dtype is dt, f"{self.recent[-1]}: linear ran in {out.dtype}"
        loss = out.sum()
        assert loss.dtype is F32, f"{self.recent[-1]}: sum gave {loss.dtype}"
        # Each output element is within rounding of numpy (a float32 sum lands on either side of
        # a rounding midpoint now and then), and the loss is the float32 sum of those elements.
        out_values = out.float().numpy().astype(np.float64)
        ref_out = rounded(rounded(leaf_np, dt) @ want["w"].T + want["b"], dt)
        assert_close(out_values, ref_out, EPS[dt], f"{self.recent[-1]}: output")
        assert_close(loss.numpy(), out_values.sum(), EPS[F32], f"{self.recent[-1]}: loss", np.abs(out_values).sum())
        loss.backward()
        grad = leaf.grad
        assert grad is not None and grad.dtype is F32, f"{self.recent[-1]}: leaf grad {grad!r}"
        assert_close(grad.numpy(), np.broadcast_to(want["grad"], (16, 32)), EPS[dt], f"{self.recent[-1]}: grad")
        self.checks += 1

    # ---- the walk ---------------------------------------------------------------------------

    def run(self, start, deadline):
        try:
            start.wait()
            self.check_state()
            while time.monotonic() < deadline:
                r = self.rng.random()
                if r < 0.28 and len(self.stack) < MAX_DEPTH:
                    self.enter()
                    self.transitions += 1
                elif r < 0.5 and self.stack:
                    self.leave()
                    self.transitions += 1
                elif r < 0.55:
                    self.decorated()
                    self.transitions += 2
                elif r < 0.59:
                    self.raising()
                    self.transitions += 2
                elif r < 0.61:
                    self.foreign_exit()
                elif r < 0.95:
                    self.op()
                else:
                    self.backward()
                self.check_state()
            while self.stack:
                self.leave()
                self.transitions += 1
                self.check_state()
            assert seen_state() == ((False, None), (False, None)), "state left on after leaving every scope"
            assert _C.autocast_cached_casts() == 0, "weight cache not emptied after the outermost scope"
        except BaseException:
            self.error = traceback.format_exc()
            # Leave what is still open so the other threads' final counts are not disturbed.
            for entry in reversed(self.stack):
                try:
                    entry[3].__exit__(None, None, None)
                except BaseException:
                    pass


def test_eight_threads_nesting_scopes_over_shared_tensors_see_only_their_own_state():
    gc.collect()
    tensors_before = lucid._memory.live_tensors()
    guards_before = _C.autocast_live_guards()
    main_before = seen_state()
    tensors, want = make_shared()
    shared = shared_scopes()
    no_grad = lucid.no_grad()  # a grad-mode scope object shared by every thread too
    workers = [Worker(seed, shared, no_grad, tensors, want) for seed in range(THREADS)]
    start = threading.Barrier(THREADS + 1, timeout=60)
    deadline = time.monotonic() + SECONDS
    threads = [
        threading.Thread(target=w.run, args=(start, deadline), name=f"stress-{w.seed}", daemon=True) for w in workers
    ]
    for t in threads:
        t.start()
    main_checks = 0
    # The main thread holds scopes of its own throughout, one of them a shared object.
    with shared[2], autocast("metal", enabled=False):
        inside = ((True, BF16), (False, None))  # (cpu, metal)
        start.wait()
        give_up = deadline + GRACE
        while any(t.is_alive() for t in threads) and time.monotonic() < give_up:
            for t in threads:
                t.join(0.05)
            assert seen_state() == inside, "another thread's scopes changed the main thread's state"
            main_checks += 1
        stuck = [(w, t) for w, t in zip(workers, threads) if t.is_alive()]
        if stuck:
            frames = sys._current_frames()
            report = "\n".join(
                f"seed {w.seed}, last actions {w.recent}, now at:\n"
                + "".join(traceback.format_stack(frames.get(t.ident)))
                for w, t in stuck
            )
            raise AssertionError(
                f"{len(stuck)} threads still running {GRACE} s after the deadline (a deadlock):\n" + report
            )
        failed = [w for w in workers if w.error]
        assert not failed, "\n\n".join(f"thread seed {w.seed}, last actions {w.recent}:\n{w.error}" for w in failed)
        assert seen_state() == inside
        assert _C.autocast_live_guards() == guards_before + 2, "guards left live by threads that left every scope"
    assert seen_state() == main_before
    assert _C.autocast_live_guards() == guards_before
    assert all(not w.stack for w in workers)
    transitions, checks = sum(w.transitions for w in workers), sum(w.checks for w in workers)
    assert all(w.transitions > 10 for w in workers), [w.transitions for w in workers]
    del workers, threads, tensors, start
    gc.collect()
    assert lucid._memory.live_tensors() == tensors_before, "tensors left alive after every thread and reference is gone"
    record(
        "Threads",
        f"{THREADS} threads for {SECONDS:g} s: random nested scopes up to {MAX_DEPTH} deep (both "
        "devices, enabled or not, float16/bfloat16/float32, 6 scope objects shared by all threads and entered "
        "concurrently and re-entered, left in any order, as decorators, through exceptions, exits of objects "
        "not entered) with matmul/linear/conv2d/reductions on shared tensors and parameters, backward passes "
        "on thread-local leaves, while the main thread holds two scopes",
        transitions + checks + main_checks,
        f"{transitions} scope transitions and {checks + main_checks} checks: each thread always saw exactly its "
        "own state on both devices and with no device, ops ran in the dtype it implies with values and "
        "gradients within rounding of numpy, each thread's weight cache held only its own casts; no deadlock, "
        "no live guard or tensor left, the main thread's state untouched",
    )


def test_threads_ending_inside_scopes_leave_nothing_behind():
    """A thread that returns inside scopes (own objects, a shared object, raw engine guards)
    changes nothing for the other threads; its guards stay counted while it runs and are
    retired once it has ended, after which their handles are stale."""
    rounds = scale(40, 400)
    per_round = 4
    gc.collect()
    tensors_before = lucid._memory.live_tensors()
    base = _C.autocast_live_guards()
    tensors, _ = make_shared()
    shared = autocast("metal", dtype=BF16)
    errors = []

    # A long-lived thread inside scopes (the shared object among them) the whole time,
    # checking its own state while the others come and go.
    observer_ready, stop = threading.Event(), threading.Event()
    observed = {"checks": 0}
    observer_scopes = [autocast("cpu", dtype=BF16), shared, autocast("cpu", enabled=False)]
    observer_state = ((False, None), (True, BF16))

    def observe():
        try:
            for s in observer_scopes:
                s.__enter__()
            observer_ready.set()
            while not stop.is_set():
                assert seen_state() == observer_state, f"observer saw {seen_state()}"
                out = tensors["metal"]["x"] @ tensors["metal"]["w"].T  # noqa: F821 (a cell; deleted at the end)
                assert out.dtype is BF16, f"observer's matmul ran in {out.dtype}"
                observed["checks"] += 1
            for s in reversed(observer_scopes):
                s.__exit__(None, None, None)
            assert seen_state() == ((False, None), (False, None))
        except BaseException:
            errors.append("observer:\n" + traceback.format_exc())
        finally:
            observer_ready.set()

    def abandon(seed, ready, go, out):
        try:
            r = random.Random(seed)
            model = {"cpu": (False, None), "metal": (False, None)}
            handles, entered = [], 0
            for _ in range(r.randrange(1, 5)):
                how = r.random()
                if how < 0.35:
                    shared.__enter__()
                    model["metal"] = (True, BF16)
                elif how < 0.7:
                    dev, dt, on = r.choice(DEVICES), r.choice(DTYPES), r.random() < 0.8
                    autocast(dev, dtype=dt, enabled=on).__enter__()
                    model[dev] = (on, dt if on else None)
                else:  # the engine's own entry point, whose handle can be tried again later
                    dev, dt = r.choice(DEVICES), r.choice(DTYPES)
                    handles.append(_C.guard_create(0 if dev == "cpu" else 1, 1, dt.code))
                    model[dev] = (True, dt)
                entered += 1
            assert seen_state() == (model["cpu"], model["metal"]), f"seed {seed}: saw {seen_state()}, expected {model}"
            # Fill this thread's weight cache too; the thread takes it with it.
            F.linear(tensors["metal"]["x"], tensors["metal"]["p"])  # noqa: F821 (a cell; deleted at the end)
            out.append((entered, handles))
        except BaseException:
            errors.append(f"seed {seed}:\n" + traceback.format_exc())
        finally:
            try:
                ready.wait()
                go.wait(60)
            except threading.BrokenBarrierError:
                pass
        # returns inside every scope it entered

    def wait_for_guards(n):
        limit = time.monotonic() + 10
        while _C.autocast_live_guards() != n and time.monotonic() < limit:
            time.sleep(0.002)
        return _C.autocast_live_guards()

    watcher = threading.Thread(target=observe, daemon=True)
    watcher.start()
    assert observer_ready.wait(30)
    main_state = ((True, BF16), (False, None))
    abandoned = stale = 0
    try:
        with autocast("cpu", dtype=BF16):
            steady = base + 1 + len(observer_scopes)
            assert not errors, errors[0]
            assert _C.autocast_live_guards() == steady
            for i in range(rounds):
                ready, go, out = threading.Barrier(per_round + 1, timeout=60), threading.Event(), []
                batch = [
                    threading.Thread(target=abandon, args=(i * 100 + k, ready, go, out), daemon=True)
                    for k in range(per_round)
                ]
                for t in batch:
                    t.start()
                ready.wait()
                assert not errors, errors[0]
                entered = sum(n for n, _ in out)
                # while the threads are alive their scopes are live
                assert _C.autocast_live_guards() == steady + entered
                assert seen_state() == main_state
                go.set()
                for t in batch:
                    t.join(60)
                assert not any(t.is_alive() for t in batch), f"round {i}: a thread that returned did not end"
                assert seen_state() == main_state, f"round {i}: ended threads changed the main thread's state"
                # Their scopes go with them; the engine retires them as each thread is torn down.
                left = wait_for_guards(steady)
                assert left == steady, f"round {i}: {left - steady} guards of ended threads still live"
                for _, handles in out:
                    for h in handles:
                        try:
                            _C.guard_destroy(h)
                        except ValueError:
                            stale += 1
                        else:
                            raise AssertionError(f"round {i}: guard {h:#x} of an ended thread was destroyed again")
                assert seen_state() == main_state
                assert _C.autocast_live_guards() == steady
                abandoned += entered
            assert not errors, errors[0]
    finally:
        stop.set()
        watcher.join(60)
    assert not watcher.is_alive(), "the observer thread did not finish"
    assert not errors, errors[0]
    assert observed["checks"] > 0
    assert seen_state() == ((False, None), (False, None))
    assert wait_for_guards(base) == base
    # The shared object carries nothing over from the threads that ended inside it.
    try:
        shared.__exit__(None, None, None)
    except RuntimeError:
        pass
    else:
        raise AssertionError("the main thread left a scope it never entered")
    with shared:
        assert seen_state() == ((False, None), (True, BF16))
    assert seen_state() == ((False, None), (False, None))
    del tensors, watcher
    gc.collect()
    assert lucid._memory.live_tensors() == tensors_before, "the ended threads' weight caches kept tensors alive"
    record(
        "Threads",
        f"{rounds} rounds of {per_round} threads returning inside 1-4 scopes (own objects, an object "
        "shared with a thread that stays inside it, raw engine guards) with cached weight casts, while the main "
        "thread holds a scope",
        abandoned + stale + observed["checks"],
        f"{abandoned} abandoned scopes: counted live while their thread ran and retired once it ended, "
        f"{stale} of their handles stale afterwards, the main and observer threads' state untouched, no "
        "tensor kept alive",
    )
