"""What the workers compute from, shared with the tests that check them: each rank's input
values for each dtype, made from the rank alone, so a test can recompute every rank's."""

import ml_dtypes
import numpy as np

DTYPES = ("float32", "float16", "bfloat16", "int32", "int64", "bool")
DEVICES = ("cpu", "metal")
FLOATS = ("float32", "float16", "bfloat16")
NUMPY = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "int32": np.int32,
    "int64": np.int64,
    "bool": np.bool_,
}
SHAPE = (3, 5)


def rank_values(dtype, rank, shape=SHAPE):
    rng = np.random.default_rng(1000 * rank + DTYPES.index(dtype))
    if dtype in FLOATS:
        return (rng.standard_normal(shape) * 8).astype(np.float32).astype(NUMPY[dtype])
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return rng.integers(-1000, 1000, shape).astype(NUMPY[dtype])


def storable(a):
    """`a` as savez can store it (bfloat16 widened to float32, exactly)."""
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype == ml_dtypes.bfloat16 else a
