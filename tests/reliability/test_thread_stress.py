"""Eight threads at once entering and leaving autocast scopes (random nesting, both devices,
scope objects shared between the threads) and running ops on tensors they all share. After
every step each thread checks that the state it sees, on both devices, is what its own stack
of scopes says, and that its ops ran in the dtype that state implies with values close to
numpy. Every thread must finish (a thread still running after its deadline is a deadlock) and
the process must end with no live guard and the main thread's state untouched.
tests/test_autocast.py covers the thread rules one at a time; this is them all at once.
"""

import random
import threading
import time
import traceback
import warnings

import ml_dtypes
import numpy as np

import lucid
import lucid.nn.functional as F
from lucid import _engine
from lucid.amp import autocast

from _support import record, scale

THREADS = 8
SECONDS = scale(2.0, 15.0)
DEVICES = ("cpu", "metal")
DTYPES = (lucid.float16, lucid.bfloat16, lucid.float32)
NP = {lucid.float32: np.float32, lucid.float16: np.float16, lucid.bfloat16: ml_dtypes.bfloat16}
TOLERANCE = {lucid.float32: 1e-4, lucid.float16: 2e-2, lucid.bfloat16: 6e-2}


def lowered(device, enabled, dtype):
    """The dtype a matmul runs in under this state: the CPU lowers only to bfloat16."""
    if not enabled or dtype is lucid.float32:
        return lucid.float32
    if device == "cpu" and dtype is not lucid.bfloat16:
        return lucid.float32
    return dtype


class Worker:
    def __init__(self, seed, shared_scopes, operands):
        self.seed, self.rng = seed, random.Random(seed)
        self.shared, self.operands = shared_scopes, operands
        self.stack = []              # (device, enabled, dtype, scope object), innermost last
        self.transitions = self.checks = 0
        self.recent = []             # the last actions, for a failure message
        self.error = None

    def expected(self, device):
        for dev, enabled, dtype, _ in reversed(self.stack):
            if dev == device:
                return enabled, (dtype if enabled else None)
        return False, None

    def check_state(self):
        for device in DEVICES:
            want = self.expected(device)
            got = (lucid.amp.is_autocast_enabled(device), lucid.amp.get_autocast_dtype(device))
            assert got == want, f"{device}: saw {got}, the thread's scopes say {want}"
        self.checks += 1

    def enter(self):
        r = self.rng
        if r.random() < 0.4:
            scope = r.choice(self.shared)
        else:
            scope = autocast(r.choice(DEVICES), dtype=r.choice(DTYPES), enabled=r.random() < 0.8)
        scope.__enter__()
        self.stack.append((scope.device_type, scope.enabled, scope.dtype, scope))
        self.recent.append(f"enter {scope!r}")

    def leave(self):
        # Mostly the innermost, sometimes one further out: scopes may be left in any order.
        i = len(self.stack) - 1 if self.rng.random() < 0.7 else self.rng.randrange(len(self.stack))
        scope = self.stack[i][3]
        # An object entered several times leaves its most recent entry on this thread.
        i = max(k for k, entry in enumerate(self.stack) if entry[3] is scope)
        scope.__exit__(None, None, None)
        del self.stack[i]
        self.recent.append(f"exit {scope!r}")

    def op(self):
        device = self.rng.choice(DEVICES)
        x, w, b, want = self.operands[device]
        enabled, dtype = self.expected(device)
        dtype = lowered(device, enabled, dtype)
        kind = self.rng.randrange(3)
        if kind == 0:
            got, ref = x @ w.T, want["matmul"]
        elif kind == 1:
            got, ref = F.linear(x, w, b), want["linear"]
        else:
            got, ref = (x * 2 + 1).sum(dim=1), want["sum"]
            dtype = lucid.float32  # elementwise ops and reductions are not lowered
        self.recent.append(f"{['matmul', 'linear', 'sum'][kind]} on {device}")
        assert got.dtype is dtype, f"{self.recent[-1]} gave {got.dtype}, the state says {dtype}"
        tol = TOLERANCE[dtype]
        np.testing.assert_allclose(got.float().numpy(), ref, rtol=tol, atol=tol * np.abs(ref).max())
        self.checks += 1

    def backward(self):
        leaf = lucid.tensor(np.float32(self.rng.uniform(-2, 2)) * np.ones((3, 4), np.float32), requires_grad=True)
        x = self.operands["cpu"][0][:3, :4]
        (leaf * x).sum().backward()
        np.testing.assert_allclose(leaf.grad.numpy(), x.numpy(), rtol=0, atol=0)
        self.recent.append("backward")
        self.checks += 1

    def run(self, start, deadline):
        try:
            start.wait()
            self.check_state()
            while time.monotonic() < deadline:
                r = self.rng.random()
                if r < 0.3 and len(self.stack) < 6:
                    self.enter()
                    self.transitions += 1
                elif r < 0.55 and self.stack:
                    self.leave()
                    self.transitions += 1
                elif r < 0.95:
                    self.op()
                else:
                    self.backward()
                self.recent = self.recent[-8:]
                self.check_state()
            while self.stack:
                self.leave()
                self.transitions += 1
                self.check_state()
        except BaseException:
            self.error = traceback.format_exc()


def make_operands():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    w = rng.standard_normal((24, 32)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    x64, w64, b64 = (a.astype(np.float64) for a in (x, w, b))
    want = {"matmul": x64 @ w64.T, "linear": x64 @ w64.T + b64, "sum": (x64 * 2 + 1).sum(axis=1)}
    return {d: (lucid.tensor(x, device=d), lucid.tensor(w, device=d), lucid.tensor(b, device=d), want)
            for d in DEVICES}


def test_eight_threads_nesting_scopes_over_shared_tensors_see_only_their_own_state():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        operands = make_operands()
    shared = [autocast("metal"), autocast("cpu", dtype=lucid.bfloat16), autocast("metal", dtype=lucid.bfloat16),
              autocast("cpu", enabled=False)]
    guards_before = _engine.autocast_live_guards()
    main_before = [(lucid.amp.is_autocast_enabled(d), lucid.amp.get_autocast_dtype(d)) for d in DEVICES]
    workers = [Worker(seed, shared, operands) for seed in range(THREADS)]
    start = threading.Barrier(THREADS + 1)
    deadline = time.monotonic() + SECONDS
    threads = [threading.Thread(target=w.run, args=(start, deadline + 0.5), daemon=True) for w in workers]
    for t in threads:
        t.start()
    with autocast("cpu", dtype=lucid.bfloat16):  # the main thread holds a scope throughout
        start.wait()
        for t in threads:
            t.join(max(deadline + 60 - time.monotonic(), 1))
        inside = (lucid.amp.is_autocast_enabled("cpu"), lucid.amp.get_autocast_dtype("cpu"))
    stuck = [w.seed for w, t in zip(workers, threads) if t.is_alive()]
    assert not stuck, f"threads with seeds {stuck} still running 60 s after their deadline: a deadlock"
    for w in workers:
        assert w.error is None, f"thread seed {w.seed}, last actions {w.recent}:\n{w.error}"
    assert inside == (True, lucid.bfloat16), "another thread's scopes changed the main thread's state"
    assert [(lucid.amp.is_autocast_enabled(d), lucid.amp.get_autocast_dtype(d)) for d in DEVICES] == main_before
    assert _engine.autocast_live_guards() == guards_before
    transitions, checks = sum(w.transitions for w in workers), sum(w.checks for w in workers)
    assert transitions > THREADS * 10 and checks > transitions
    record("Threads", f"{THREADS} threads for {SECONDS:g} s: random nested scopes (both devices, enabled or "
           "not, three dtypes, some scope objects shared by all threads, left in any order), matmul/linear/"
           "sum on shared tensors and backward passes, while the main thread holds a scope",
           transitions + checks,
           f"{transitions} scope transitions and {checks} checks: each thread always saw its own state on "
           "both devices, ops ran in the dtype it implies within tolerance of numpy, no deadlock, no live "
           "guard after, the main thread's scope untouched")


def test_threads_ending_inside_scopes_leave_nothing_behind():
    rounds = scale(50, 400)
    base = _engine.autocast_live_guards()
    shared = autocast("metal", dtype=lucid.bfloat16)
    errors = []

    def abandon(r):
        try:
            for _ in range(r.randrange(1, 5)):
                (shared if r.random() < 0.5 else autocast(r.choice(DEVICES), dtype=r.choice(DTYPES))).__enter__()
            assert lucid.amp.is_autocast_enabled()
        except BaseException:
            errors.append(traceback.format_exc())

    with autocast("cpu", dtype=lucid.bfloat16):
        for i in range(rounds):
            batch = [threading.Thread(target=abandon, args=(random.Random(i * 10 + k),)) for k in range(4)]
            for t in batch:
                t.start()
            for t in batch:
                t.join(30)
            assert not any(t.is_alive() for t in batch), "a thread did not finish"
            assert lucid.amp.get_autocast_dtype("cpu") is lucid.bfloat16
            assert not lucid.amp.is_autocast_enabled("metal")
    assert not errors, errors[0]
    # A thread's scopes end with the thread; the engine sees that once the thread is gone.
    deadline = time.monotonic() + 10
    while _engine.autocast_live_guards() != base and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _engine.autocast_live_guards() == base
    with shared:  # the shared object still works on a thread that never entered it
        assert lucid.amp.get_autocast_dtype("metal") is lucid.bfloat16
    record("Threads", "threads that end inside 1-4 scopes (own and shared objects), 4 at a time while the main "
           "thread holds a scope", rounds * 4,
           "the main thread's state untouched; every abandoned scope's guard gone once its thread ended")
