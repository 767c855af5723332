"""The README's complete training loop runs as written (on a tiny batch)."""

import re
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
