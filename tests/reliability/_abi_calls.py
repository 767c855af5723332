"""Random calls to the raw C ABI through ctypes, run in a child process.

Every exported function is called with arguments drawn for its C types: handles that are live,
null, released, forged, guards where tensors belong (and the reverse), guards of ended threads;
dtype, device, op and count codes in and out of range; NaN, inf and huge numbers; null or real
pointers. What the header (include/lucid.h) promises is checked after every call:

- the status is one of its codes, and a failure leaves a non-empty message on the thread;
- a failing call writes nothing: every buffer it was given is unchanged;
- the process survives (the parent sees the exit code).

Pointers always point at buffers as long as the call's length argument says (a C caller's part
of the contract: lengths never exceed BUFFER elements); everything else is arbitrary. Tensors
the engine hands out join the pool, and at the end everything is released: the live tensor and
guard counts must be back where they started.
"""

import ctypes
import random
import threading
from ctypes import POINTER, c_char_p, c_double, c_int32, c_int64, c_uint32, c_uint64, c_void_p

import numpy as np

import lucid
from lucid import _C
from lucid._C import _abi

BUFFER = 1024  # elements in every array argument
MAX_LENGTH = 300  # the largest count passed with one (lucid_index reads 3 values per item)
SKIP = {
    "lucid_set_warning_handler",  # takes a function pointer: any non-null value is a call into it
    "lucid_custom_function_callbacks",  # likewise
    "lucid_hook_callbacks",  # likewise
    "lucid_set_num_threads",  # process-wide, and 1024 threads would only make the run slow
    "lucid_last_error",
}
I32 = [-(2**31), -7, -2, -1, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 13, 14, 64, 65, 2**31 - 1]
LENGTHS = [-(2**31), -5, -1, 0, 1, 1, 2, 2, 3, 4, 8, 64, 65, MAX_LENGTH]
I64 = [-(2**63), -(2**40), -7, -1, 0, 0, 1, 1, 2, 3, 4, 64, 2**40, 2**62, 2**63 - 1]
SIZES = [0, 1, 1, 2, 2, 3, 4, -1, -7, 2**40, 2**62, 2**63 - 1, -(2**63)]
F64 = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.5, 1e-300, 1e300, float("nan"), float("inf"), -float("inf")]
DATA_BYTES = [-1, 0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 48, 96, 4 * BUFFER]


class Fuzzer:
    def __init__(self, seed, log):
        self.rng = random.Random(seed)
        self.lib = _C.lib
        self.log = log
        self.calls = self.failures = 0
        self.functions = [(n, a) for n, (a, _) in sorted(_abi.SIGNATURES.items()) if n not in SKIP]
        self.base_tensors = lucid._memory.live_tensors()
        self.tensors = set()  # every tensor handle ever made here (released ones stay: stale)
        self.released = set()
        self.guards = []  # live guards of this thread, for the end
        self.stale = []  # destroyed guards and guards of ended threads
        self.make_pool()

    # -- the pool of handles

    def make_pool(self):
        E = _C
        for dtype in range(6):
            for device in (0, 1):
                for shape in ((), (0,), (3,), (2, 3), (1, 2, 2), (2, 1, 3, 3)):
                    h = E.handle(E.tensor_full(shape, 0.0, 1, E.SCALAR_INT, dtype, device))
                    self.tensors.add(h)
        leaf = E.handle(E.tensor_full((2, 3), 0.0, 1, E.SCALAR_INT, 0, 0))
        self.tensors.add(leaf)
        self.tensors.add(E.handle(E.tensor_set_requires_grad(leaf, True)))
        gone = E.handle(E.tensor_full((2,), 0.0, 1, E.SCALAR_INT, 0, 0))
        E.release(gone)
        self.tensors.add(gone)
        self.released.add(gone)
        for device, dtype in ((0, 2), (1, 1), (0, 0)):
            self.guards.append(E.guard_create(device, 1, dtype))
        g = E.guard_create(0, 1, 2)
        E.guard_destroy(g)
        self.stale.append(g)
        t = threading.Thread(target=lambda: self.stale.append(E.guard_create(1, 1, 1)))
        t.start()
        t.join()

    def handle(self, bits=32):
        r = self.rng.random()
        if r < 0.55:
            return self.rng.choice(sorted(self.tensors))
        if r < 0.65:
            return 0
        if r < 0.75:
            # A guard's handle (its 32-bit slot half where a tensor handle goes).
            g = self.rng.choice(self.guards + self.stale) if self.guards or self.stale else 0
            return g & ((1 << bits) - 1)
        if r < 0.85 and self.released:
            return self.rng.choice(sorted(self.released))
        return self.rng.getrandbits(bits)

    # -- arguments

    def arguments(self, argtypes):
        args, buffers = [], []
        for n, t in enumerate(argtypes):
            prev = argtypes[n - 1] if n else None
            after_pointer = prev is not None and prev not in (c_int32, c_int64, c_uint32, c_uint64, c_double)
            if t is c_int32:
                args.append(self.rng.choice(LENGTHS if after_pointer else I32))
            elif t is c_int64:
                args.append(self.rng.choice(DATA_BYTES if prev is c_void_p else I64))
            elif t is c_uint32:
                args.append(self.handle())
            elif t is c_uint64:
                args.append(self.handle(64))
            elif t is c_double:
                args.append(self.rng.choice(F64))
            elif t is c_char_p:
                args.append(self.rng.choice((b"Fuzzed", b"", None)))
            elif self.rng.random() < 0.1:
                args.append(None)  # a null pointer
            else:
                buf = self.buffer(t)
                buffers.append(buf)
                args.append(buf.ctypes.data_as(t))
        return args, buffers

    def buffer(self, t):
        if t is POINTER(c_uint32):
            return np.array([self.handle() for _ in range(8)] + [0] * (BUFFER - 8), dtype=np.uint32)
        if t is POINTER(c_uint64):
            return np.array([self.handle(64) for _ in range(8)] + [0] * (BUFFER - 8), dtype=np.uint64)
        if t is POINTER(c_int64):
            head = [self.rng.choice(SIZES) for _ in range(8)]
            return np.array(head + [self.rng.choice((0, 1, 1, 1)) for _ in range(BUFFER - 8)], dtype=np.int64)
        if t is POINTER(c_int32):
            return np.array([self.rng.choice((-1, 0, 1, 2, 3, 4, 5, 7)) for _ in range(BUFFER)], dtype=np.int32)
        if t is POINTER(c_char_p) or t is POINTER(c_void_p):
            return np.zeros(BUFFER, dtype=np.uint64)  # arrays of null pointers
        if t is POINTER(c_double):
            return np.full(BUFFER, 7.25, dtype=np.float64)
        if t is c_void_p:
            return np.frombuffer(self.rng.randbytes(4 * BUFFER * 8), dtype=np.uint8).copy()
        raise AssertionError(f"no rule for argument type {t}")

    # -- one call

    def call(self, name, argtypes, on_thread=False):
        args, buffers = self.arguments(argtypes)
        before = [b.copy() for b in buffers]
        self.log.write(
            f"{self.calls} {name}{tuple(a if isinstance(a, (int, float)) or a is None else 'buf' for a in args)}"
            f"{' on a new thread' if on_thread else ''}\n"
        )
        self.log.flush()
        result = {}

        def run():
            rc = getattr(self.lib, name)(*args)
            msg = self.lib.lucid_last_error() if rc else None
            result.update(rc=rc, msg=msg)

        if on_thread:
            t = threading.Thread(target=run)
            t.start()
            t.join()
        else:
            run()
        self.calls += 1
        rc, msg = result["rc"], result["msg"]
        if rc not in range(7):
            raise AssertionError(f"{name} returned status {rc}, not one of the header's codes")
        if rc:
            self.failures += 1
            if not msg:
                raise AssertionError(f"{name} failed with status {rc} and no message")
            msg.decode("utf-8")
            for b, old in zip(buffers, before):
                if not np.array_equal(b, old):
                    raise AssertionError(f"{name} failed (status {rc}: {msg.decode()}) but wrote into a buffer")
            return
        for b, old in zip(buffers, before):  # new tensors the call handed out join the pool
            if b.dtype == np.uint32 and len(b) == BUFFER:  # bare handles
                fresh = b.tolist()
            elif b.dtype == np.int64 and b[0] != old[0]:  # an op's record: its handle first
                fresh = [int(b[0])]
            else:
                continue
            for h in fresh:
                if 0 < h < 2**32 and h not in self.tensors and _is_tensor(h):
                    self.tensors.add(h)
        if name == "lucid_tensor_release" and args[0] in self.tensors:
            self.released.add(args[0])
        if name == "lucid_tensor_release_many" and buffers:
            self.released.update(h for h in buffers[0][: max(args[1], 0)].tolist() if h in self.tensors)
        if name == "guard_destroy" and args[0] in self.guards:
            self.guards.remove(args[0])
            self.stale.append(args[0])
        if name == "guard_create":
            g = int(buffers[0][0])
            if on_thread:  # its thread has ended, and the guard with it
                self.stale.append(g)
                return
            self.guards.append(g)
            if len(self.guards) > 64:  # keep the scope stack shallow
                h = self.guards.pop()
                _C.guard_destroy(h)
                self.stale.append(h)

    def run(self, count):
        for _ in range(count):
            name, argtypes = self.rng.choice(self.functions)
            self.call(name, argtypes, on_thread=self.rng.random() < 0.03)
        self.finish()

    def finish(self):
        # Leave every scope (any order works) and release every tensor still held.
        for g in self.guards:
            _C.guard_destroy(g)
        self.guards.clear()
        _C.set_grad_enabled(True)
        for h in sorted(self.tensors - self.released):
            self.lib.lucid_tensor_release(h)
        live, guards = lucid._memory.live_tensors(), _C.autocast_live_guards()
        if live != self.base_tensors or guards != 0:
            raise AssertionError(
                f"after releasing everything: {live} live tensors (started with "
                f"{self.base_tensors}), {guards} live guards"
            )


def _is_tensor(h):
    a, b, c, d = c_int32(), c_int32(), c_int32(), c_int32()
    return _C.lib.lucid_tensor_meta(h, ctypes.byref(a), ctypes.byref(b), ctypes.byref(c), ctypes.byref(d)) == 0


def run_in_child(seed, count, log_path, conn):
    """Runs `count` random calls; sends ("ok", calls, failures) or ("failed", message)."""
    import traceback

    with open(log_path, "w") as log:
        try:
            f = Fuzzer(seed, log)
            f.run(count)
            conn.send(("ok", f.calls, f.failures))
        except BaseException:  # noqa: BLE001 - the finding
            conn.send(("failed", traceback.format_exc()))
    conn.close()
