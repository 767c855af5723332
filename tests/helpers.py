"""Shared helpers for the Python tests."""

import numpy as np

import lucid

DEVICES = ["cpu", "metal"]


def autocast_state():
    """The calling thread's autocast state, as seen through the public queries."""
    return (lucid.amp.is_autocast_enabled("metal"), lucid.amp.get_autocast_dtype("metal"),
            lucid.amp.is_autocast_enabled("cpu"), lucid.amp.get_autocast_dtype("cpu"))


OFF = (False, None, False, None)


def f16_ulps(a, b):
    """Distance in float16 units in the last place between two float16 arrays."""
    ia = np.asarray(a, dtype=np.float16).view(np.int16).astype(np.int32)
    ib = np.asarray(b, dtype=np.float16).view(np.int16).astype(np.int32)
    ia = np.where(ia < 0, -32768 - ia, ia)
    ib = np.where(ib < 0, -32768 - ib, ib)
    return np.abs(ia - ib)
