"""The ported PyTorch examples run as written and learn (at a size that takes seconds)."""

import importlib.util
import sys
from pathlib import Path

import pytest

import lucid

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
