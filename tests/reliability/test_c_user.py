"""The C ABI as a C user meets it: abi_user.c is compiled with the system compiler against
include/lucid.h and the built library, run, and must report every one of its checks passed.

Everything the program checks comes from the header: status codes, ownership, handles, the
thread rules of guards, the warning handler. A compiler is part of what this test needs, so a
machine without one fails rather than skips.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _support import record

REPO = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).resolve().parent / "abi_user.c"
LIB_DIR = REPO / "lucid" / "_lib"
LIB_NAME = "liblucid.dylib" if sys.platform == "darwin" else "liblucid.so"
SUMMARY = re.compile(r"^abi_user: (\d+) checks passed$", re.MULTILINE)


def _compiler() -> str:
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("no C compiler found (looked for cc, gcc and clang on PATH); the C ABI test needs one")


def _output(proc) -> str:
    return f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"


def test_c_program_uses_the_abi_as_documented(tmp_path):
    library = LIB_DIR / LIB_NAME
    assert library.exists(), f"{library} is missing; build the engine with `make build`"
    exe = tmp_path / "abi_user"
    cmd = [
        _compiler(),
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-pedantic",
        f"-I{REPO / 'include'}",
        str(SOURCE),
        "-o",
        str(exe),
        f"-L{LIB_DIR}",
        "-llucid",
        f"-Wl,-rpath,{LIB_DIR}",
        "-pthread",
        "-lm",
    ]
    try:
        build = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"compiling abi_user.c took more than 120 s: {' '.join(cmd)}")
    assert build.returncode == 0, f"abi_user.c does not compile warning-free:\n{' '.join(cmd)}\n{_output(build)}"

    # The program uses device 1, which LUCID_METAL_FALLBACK=0 would turn into an error off Apple hardware.
    env = {k: v for k, v in os.environ.items() if k != "LUCID_METAL_FALLBACK"}
    try:
        run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    except subprocess.TimeoutExpired as e:
        pytest.fail(
            f"abi_user did not finish within 60 s (a deadlock?)\n--- stdout ---\n{e.stdout}\n--- stderr ---\n{e.stderr}"
        )
    if run.returncode < 0:
        pytest.fail(f"abi_user crashed with signal {-run.returncode}\n{_output(run)}")
    assert run.returncode == 0, f"abi_user failed with exit code {run.returncode}\n{_output(run)}"

    found = SUMMARY.findall(run.stdout)
    assert len(found) == 1, f"abi_user printed no single summary line\n{_output(run)}"
    checks = int(found[0])
    assert checks > 0, f"abi_user ran no checks\n{_output(run)}"

    record(
        "C program",
        "abi_user.c against include/lucid.h: tensors and an op chain vs a C reference, autograd, "
        "nested and out-of-order autocast scopes, every provokable status, guards across threads, "
        "concurrent workers, the warning handler",
        checks,
        "every status as documented, results within tolerance, out-pointers untouched on failure, "
        "live tensors and guards back at baseline",
    )
