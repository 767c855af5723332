"""Helpers shared by the tests (tests/ is on sys.path, as for tests/reference.py):
`from _helpers import ...`."""

import numpy as np

DEVICES = ["cpu", "metal"]


def mismatches(got, want, inputs, limit=8):
    """(up to `limit` messages naming an input and both results in hex, count) of the
    places where the integer arrays `got` and `want` differ."""
    bad = np.nonzero(got != want)[0]
    return [f"in=0x{int(inputs[i]):x} got=0x{int(got[i]):x} want=0x{int(want[i]):x}" for i in bad[:limit]], len(bad)


def numpy_f16_bits(f32):
    """numpy's float32 -> float16 conversion, as bit patterns."""
    with np.errstate(all="ignore"):
        return f32.astype(np.float16).view(np.uint16)

