"""Wrong arguments to the functions the PyTorch coverage work added raise a documented
exception: never another one, a crash or a hang (_wrong_arguments.py, run in a child process)."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "_wrong_arguments.py"


def test_wrong_arguments_raise_documented_exceptions_and_never_hang():
    run = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith("0 problems"), run.stdout
