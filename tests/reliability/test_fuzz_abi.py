"""Fuzzing the C ABI from ctypes: random calls to every exported function with hostile
arguments (see _abi_calls.py for what is drawn and what is checked after each call), in child
processes so that a crash is seen as an exit code rather than taking the test run down. A
failure names the seed and the call that was running; the child's call log is kept beside it.
"""

import multiprocessing

from _abi_calls import run_in_child
from _support import record, scale

CHILDREN = scale(6, 40)
CALLS = scale(1500, 5000)
TIMEOUT = 300

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(["lucid", "numpy", "_abi_calls"])


def _receive(conn):
    try:
        return conn.recv() if conn.poll(TIMEOUT) else None
    except EOFError:  # the child died before reporting
        return None


def test_random_abi_calls_return_documented_statuses_and_never_crash(tmp_path):
    calls = failures = 0
    for seed in range(CHILDREN):
        log = tmp_path / f"calls-{seed}.log"
        receive, send = _context.Pipe(duplex=False)
        child = _context.Process(target=run_in_child, args=(seed, CALLS, str(log), send), daemon=True)
        child.start()
        send.close()
        report = _receive(receive)
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join()
        last = log.read_text().splitlines()[-1:] if log.exists() else []
        assert child.exitcode == 0 and report is not None, (
            f"seed {seed}: the child ended with exit code {child.exitcode} (negative is a signal) during {last}"
        )
        assert report[0] == "ok", f"seed {seed}: {report[1]}\nlast call: {last}"
        calls += report[1]
        failures += report[2]
    assert failures > calls // 4 and failures < calls  # both paths were exercised
    record(
        "C ABI fuzz",
        f"random calls from ctypes to every exported function ({calls - failures} succeeded, "
        f"{failures} refused): null, forged, released and stale handles, guards for tensors and back, guards "
        "of ended threads, calls from other threads, out-of-range codes and counts, NaN/inf/huge numbers, "
        "null pointers",
        calls,
        "no crash; every status one of the header's codes with a message; a failing call wrote nothing; "
        "live tensors and guards back to baseline after releasing all",
    )
