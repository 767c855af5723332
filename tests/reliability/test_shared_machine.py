"""Two lucid processes busy on the same cores: each notices, and runs its parallel loops on its
calling thread alone instead of waiting for threads the other process keeps off the cores
(bench/suite.py's two-process table measures what that saves)."""

import ctypes
import os
import subprocess
import sys

import pytest

from _support import record, scale
from lucid._C._library import lib

WORKER = """
import sys, time
import numpy as np
import lucid
from lucid._C import threads_contended as solo

a = lucid.tensor(np.random.default_rng(0).random(1_000_000).astype(np.float32))
start, first, ops = time.perf_counter(), None, 0
while time.perf_counter() - start < float(sys.argv[1]):
    a.exp()
    ops += 1
    if first is None and solo():
        first = time.perf_counter() - start
print(ops, -1 if first is None else first)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the engine's loops share oneDNN's GNU OpenMP pool on Linux")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: no parallel loops")
def test_two_processes_on_the_same_cores_each_run_their_loops_alone():
    seconds = scale(3.0, 8.0)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(seconds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        ops, first = out.split()
        results.append((int(ops), float(first)))
    # Each process's exps want every core; with two at once, both must have gone solo.
    assert all(first >= 0 for _, first in results), results
    record(
        "Shared machines",
        "two processes running 1M-element exps on the same cores at once, "
        f"{seconds:g} s each ({sum(ops for ops, _ in results)} ops)",
        2,
        f"each noticed the other within {max(first for _, first in results):.1f} s of starting (the first "
        "0.5 s are not judged) and ran its loops on its calling thread alone",
    )


class _Contention(ctypes.Structure):
    _fields_ = [("solo_until_ns", ctypes.c_int64), ("contended_windows", ctypes.c_int)]


def test_a_hold_needs_four_contended_windows_in_a_row_and_renews_at_once():
    # The rule the detector applies to each closed 20 ms window, on a state of the test's own.
    # A daemon busy for tens of milliseconds (up to 33 ms seen on a shared machine) makes a
    # window or two contended, which must not take the threads away for a second; two
    # processes busy together contend in every window, and go solo again at once after the
    # trial that follows each hold.
    judge = lib.lucid_host_contention_judge
    judge.argtypes = [ctypes.POINTER(_Contention), ctypes.c_int64, ctypes.c_int, ctypes.c_int]
    judge.restype = None
    ms, t = 1_000_000, 10**12
    state = _Contention()

    def windows(start, *counts):
        for i, (regions, contended) in enumerate(counts):
            judge(ctypes.byref(state), start + 20 * ms * i, regions, contended)
        return start + 20 * ms * len(counts)

    # Three contended windows, a calm one, three more: no hold.
    t = windows(t, (40, 30), (40, 30), (40, 30), (40, 2), (40, 30), (40, 30), (40, 30))
    assert state.solo_until_ns == 0
    # A window needs at least four contended regions, and two in five.
    t = windows(t, (40, 2), (3, 3), (3, 3), (3, 3), (3, 3), (40, 15), (40, 15), (40, 15), (40, 15))
    assert state.solo_until_ns == 0
    # Four in a row: a hold of a second from the fourth.
    t = windows(t, (40, 16), (40, 16), (40, 16), (40, 16))
    assert state.solo_until_ns == t - 20 * ms + 1000 * ms
    # After the hold, the first window holds what was counted before it (calm); one contended
    # window within a second of the hold's end renews it.
    end = state.solo_until_ns
    windows(end + 1 * ms, (1, 0))
    windows(end + 21 * ms, (40, 30))
    assert state.solo_until_ns == end + 1021 * ms
    # More than a second after a hold's end, a spell needs four windows again.
    end = state.solo_until_ns
    windows(end + 1500 * ms, (1, 0), (40, 30), (40, 30), (40, 30))
    assert state.solo_until_ns == end
