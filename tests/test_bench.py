"""The benchmark suite keeps running: a quick pass over a few cases (no timing asserted)."""

import subprocess
import sys
from pathlib import Path

SUITE = Path(__file__).resolve().parent.parent / "bench" / "suite.py"


def test_quick_benchmark_run_prints_ratios(tmp_path):
    out = tmp_path / "results.md"
    run = subprocess.run(
        [sys.executable, str(SUITE), "--quick", "--only", "4x4", "--write", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "4x4 add" in run.stdout and "lucid/numpy" in run.stdout
    table = out.read_text()
    assert "| 4x4 matmul |" in table and "activation memory" in table and "(a + b).shape" in table
