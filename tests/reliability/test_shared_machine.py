"""Two lucid processes busy on the same cores: each notices, and runs its parallel loops on its
calling thread alone instead of waiting for threads the other process keeps off the cores
(bench/suite.py's two-process table measures what that saves)."""

import os
import subprocess
import sys

import pytest

from _support import record, scale

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
