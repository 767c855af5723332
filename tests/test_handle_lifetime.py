"""A tensor made for one engine call (``arange(...)`` inside ``flip``) must stay alive until the
engine has used it: its release can go to the engine from its finalizer at any moment (a batch
of deferred releases is flushed when it fills), so the generated glue takes tensors, not just
handles, and keeps them for the call."""

import re
from pathlib import Path

import numpy as np
import pytest

import lucid
from lucid import _C

ROOT = Path(__file__).resolve().parent.parent


def _nearly_full_batch():
    """Fills the deferred releases up to one short of a flush, with handles of tensors made for
    it (their objects give them up), so that the next small tensor to die flushes the batch."""
    _C.flush_releases()
    for _ in range(_C.DEFERRED_MAX - 1):
        t = lucid.zeros(1)
        h, t._h = t._h, 0
        _C.deferred.append(h)


@pytest.mark.parametrize(
    "call",
    [
        lambda x: lucid.flip(x, [0, 1]),
        lambda x: lucid.repeat_interleave(x, 2, dim=0),
        lambda x: lucid.logical_not(x),
    ],
)
def test_a_temporary_lives_through_its_call(call):
    x = lucid.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    want = call(x).numpy()
    for _ in range(3):
        _nearly_full_batch()
        np.testing.assert_array_equal(call(x).numpy(), want)


def test_the_glue_takes_a_tensor_or_its_handle():
    x = lucid.tensor(np.arange(6, dtype=np.float32))
    i = lucid.tensor(np.array([2, 0], np.int64))
    by_tensor = lucid._core.result(_C.index_select(x, 0, i)).numpy()
    by_handle = lucid._core.result(_C.index_select(x._h, 0, i._h)).numpy()
    np.testing.assert_array_equal(by_tensor, [2.0, 0.0])
    np.testing.assert_array_equal(by_handle, by_tensor)


def test_no_handle_of_a_temporary_is_passed():
    """``f(...)._h`` hands the engine the handle of an object nothing holds; pass the tensor."""
    found = []
    for path in (ROOT / "lucid").rglob("*.py"):
        if path.parent.name == "_C":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in re.finditer(r"(\w+)\([^()]*(?:\([^()]*\)[^()]*)*\)\._h\b", line):
                if m.group(1) != "tensor_arg":  # returns its argument, which the caller holds
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
