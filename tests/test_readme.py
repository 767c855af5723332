"""The README's complete training loop runs as written (on a tiny batch)."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

import lucid

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_the_training_loop_runs_and_checkpoints(tmp_path, monkeypatch):
    (loop,) = [b for b in python_blocks() if "scaler.step(opt)" in b and "lucid.save" in b]
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    images = lucid.tensor(rng.standard_normal((4, 1, 8, 8)).astype(np.float32), device="metal")
    labels = lucid.tensor(rng.integers(0, 10, 4), device="metal")
    scope = {"epochs": 2, "batches": [(images, labels)]}
    exec(compile(loop, str(README), "exec"), scope)
    assert (tmp_path / "checkpoint.safetensors").exists()
    assert scope["scaler"].get_scale() > 0 and scope["sched"].last_epoch == 2


def _table_check(readme):
    tool = README.parent / "tools" / "autocast_table.py"
    return subprocess.run([sys.executable, str(tool), "--check", str(readme)], capture_output=True, text=True)


def test_the_autocast_table_is_the_engines(tmp_path):
    assert _table_check(README).returncode == 0, _table_check(README).stderr
    # It can fail: a README that lists an op under the wrong policy is caught.
    text = README.read_text()
    drifted = tmp_path / "README.md"
    drifted.write_text(text.replace("`layer_norm`, ", "", 1).replace("`abs`, ", "`abs`, `layer_norm`, ", 1))
    failed = _table_check(drifted)
    assert failed.returncode == 1 and "differs from lucid.amp.policies()" in failed.stderr
    for policy, ops in (("float32", ("pow", "layer_norm", "cross_entropy")), ("lower precision", ("matmul", "conv2d"))):
        (row,) = [line for line in text.splitlines() if line.startswith(f"| {policy} |")]
        assert all(f"`{op}`" in row for op in ops), row


def test_the_thread_pool_example_prints_what_the_readme_says():
    import doctest
    (block,) = [b for b in python_blocks() if "propagate(work)" in b]
    test = doctest.DocTestParser().get_doctest(block, {"lucid": lucid, "a": lucid.randn(2, 2, device="metal")},
                                               "README thread pool", str(README), 0)
    runner = doctest.DocTestRunner()
    runner.run(test)
    assert runner.failures == 0 and runner.tries >= 4
