"""The ported PyTorch examples run as written and learn (at a size that takes seconds)."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

import lucid
from _helpers import load_file

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name):
    return load_file(f"examples/{name}.py")


def test_the_mnist_example_trains_on_the_digits(capsys):
    pytest.importorskip("sklearn")
    args = ["--epochs", "2", "--limit", "600", "--log-interval", "4"]
    if sys.platform != "darwin" and lucid.metal.is_available():
        # The emulated GPU of the check build runs each kernel thread by thread on the CPU:
        # correct, but far too slow for this network's products. The example's accelerator
        # path is what a Mac takes.
        args.append("--no-accel")
    accuracy = load("mnist_digits").main(args)
    out = capsys.readouterr().out
    assert "Train Epoch: 2" in out and "Test set: Average loss" in out
    assert accuracy > 0.5  # ten classes: chance is 0.1


def _host_device_args():
    # As above: the emulated GPU of the check build is too slow for a network.
    return ["--device", "cpu"] if sys.platform != "darwin" and lucid.metal.is_available() else []


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_the_char_gpt_example_learns_and_samples(dtype, capsys):
    args = [
        "--max-iters",
        "40",
        "--eval-interval",
        "20",
        "--eval-iters",
        "4",
        "--batch-size",
        "8",
        "--block-size",
        "32",
        "--n-embd",
        "32",
        "--sample-tokens",
        "40",
        "--dtype",
        dtype,
    ]
    history, text = load("char_gpt").main(args + _host_device_args())
    out = capsys.readouterr().out
    assert "step 40: train loss" in out and "number of parameters" in out
    first, last = history[0], history[-1]
    vocab = len(set((EXAMPLES / "data" / "sonnets.txt").read_text()))
    assert abs(first[1] - math.log(vocab)) < 0.3  # an untrained model is close to uniform
    assert last[1] < first[1] - 0.5 and last[2] < first[2] - 0.5  # train and val loss both fall
    assert len(text) == 41 and set(text) <= set((EXAMPLES / "data" / "sonnets.txt").read_text())


def test_the_amp_inspect_example_finds_the_overflow_and_one_override_fixes_it(tmp_path, capsys):
    report, curves = load("amp_inspect").main(["--steps", "40", "--plot", str(tmp_path / "curves.png")])
    out = capsys.readouterr().out
    top = report.ops[0]
    assert (top.module, top.op, top.introduced_nonfinite) == ("logits", "mul", True)
    assert report.modules["logits"] == lucid.amp.inspect.USE_BFLOAT16
    assert {m for m, v in report.modules.items() if v != lucid.amp.inspect.SAFE_FLOAT16} == {"logits"}
    assert len(report.skipped_steps) > 10
    plain, fixed, bf16 = curves.values()
    assert not all(math.isfinite(v) for v in plain)
    # With the logits in float32 the float16 run trains as the bfloat16 one does.
    assert all(math.isfinite(v) for v in fixed)
    assert fixed[0] == pytest.approx(bf16[0], rel=0.05)
    assert np.mean(fixed[-10:]) < 0.1 * fixed[0] and np.mean(bf16[-10:]) < 0.1 * bf16[0]
    assert "logits in float32" in out and "made here" in out
    try:
        import matplotlib  # noqa: F401

        assert (tmp_path / "curves.png").stat().st_size > 0
    except ImportError:
        assert "saved" not in out
