"""The README's complete training loop runs as written (on a tiny batch); the autocast page of the
guide (docs/guide/autocast.rst) has the engine's autocast table, and its thread-pool example
prints what the page says; every `>>>` example of the README and the guide prints what it shows."""

import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import lucid

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
AUTOCAST_PAGE = ROOT / "docs" / "guide" / "autocast.rst"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def rst_python_blocks(page):
    """The ``.. code-block:: python`` blocks of a reST page, dedented."""
    blocks = re.findall(r"^\.\. code-block:: python\n\n((?:(?: {3}.*)?\n)+)", page.read_text(), re.M)
    return [textwrap.dedent(b).strip("\n") + "\n" for b in blocks]


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


def _table_check(page):
    tool = ROOT / "tools" / "autocast_table.py"
    return subprocess.run([sys.executable, str(tool), "--check", str(page)], capture_output=True, text=True)


def test_the_autocast_table_is_the_engines(tmp_path):
    assert _table_check(AUTOCAST_PAGE).returncode == 0, _table_check(AUTOCAST_PAGE).stderr
    # It can fail: a page that lists an op under the wrong policy is caught.
    text = AUTOCAST_PAGE.read_text()
    drifted = tmp_path / "autocast.rst"
    drifted.write_text(text.replace("``layer_norm``, ", "", 1).replace("``abs``, ", "``abs``, ``layer_norm``, ", 1))
    failed = _table_check(drifted)
    assert failed.returncode == 1 and "differs from lucid.amp.policies()" in failed.stderr
    # A page without the table's markers is refused, not passed.
    bare = tmp_path / "bare.rst"
    bare.write_text("Autocast\n========\n")
    assert _table_check(bare).returncode == 1
    lines = text.splitlines()
    for policy, ops in (("float32", ("pow", "layer_norm", "cross_entropy")), ("lower precision", ("matmul", "conv2d"))):
        row = lines[lines.index(f"   * - {policy}") + 1]
        assert all(f"``{op}``" in row for op in ops), row


def test_the_thread_pool_example_prints_what_the_page_says():
    import doctest

    (block,) = [b for b in rst_python_blocks(AUTOCAST_PAGE) if "propagate(work)" in b]
    test = doctest.DocTestParser().get_doctest(
        block,
        {"lucid": lucid, "a": lucid.randn(2, 2, device="metal")},
        "autocast page thread pool",
        str(AUTOCAST_PAGE),
        0,
    )
    runner = doctest.DocTestRunner()
    runner.run(test)
    assert runner.failures == 0 and runner.tries >= 4


@pytest.mark.parametrize(
    "page", ["README.md", *sorted(f"docs/guide/{p.name}" for p in (ROOT / "docs" / "guide").glob("*.rst"))]
)
def test_every_interactive_example_prints_what_it_shows(page):
    """The `>>>` examples of the README and of each guide page, run in order in one namespace per
    page, as doctests."""
    import doctest

    path = ROOT / page
    blocks = python_blocks() if page == "README.md" else rst_python_blocks(path)
    scope = {"lucid": lucid}
    for i, block in enumerate(b for b in blocks if b.lstrip().startswith(">>>")):
        test = doctest.DocTestParser().get_doctest(block, scope, f"{page} example {i}", str(path), 0)
        runner = doctest.DocTestRunner()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the "metal" host fallback's warning, off Apple hardware
            runner.run(test, clear_globs=False)
        assert runner.failures == 0, f"{page}: example {i} printed something else"
        scope = test.globs
