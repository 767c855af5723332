"""Helpers shared by the tests (tests/ is on sys.path, as for tests/reference.py):
`from _helpers import ...`."""

import importlib.util
from pathlib import Path

import ml_dtypes
import numpy as np

import lucid

DEVICES = ["cpu", "metal"]
F32, F16, BF16 = np.float32, np.float16, ml_dtypes.bfloat16
NP_OF = {
    "float32": F32,
    "float16": F16,
    "bfloat16": BF16,
    "int32": np.int32,
    "int64": np.int64,
    "bool": np.bool_,
    "float64": np.float64,
    "uint8": np.uint8,
    "int8": np.int8,
    "int16": np.int16,
}
LUCID_OF = {
    "float32": lucid.float32,
    "float16": lucid.float16,
    "bfloat16": lucid.bfloat16,
    "int32": lucid.int32,
    "int64": lucid.int64,
    "bool": lucid.bool_,
    "float64": lucid.float64,
    "uint8": lucid.uint8,
    "int8": lucid.int8,
    "int16": lucid.int16,
}


def T(a, **kw):
    """`lucid.tensor(a)`, a float64 numpy array as float32 unless a dtype is given (the tests
    build float32 inputs from numpy's float64 draws)."""
    if "dtype" not in kw and np.asarray(a).dtype == np.float64:
        kw["dtype"] = lucid.float32
    return lucid.tensor(a, **kw)


def arrays_from(gen):
    """`arr(*shape, dtype=np.float32, offset=0.0)`: standard normal values plus `offset` drawn
    from the numpy generator `gen`, as `dtype`."""

    def arr(*shape, dtype=np.float32, offset=0.0):
        return (gen.standard_normal(shape) + offset).astype(dtype)

    return arr


def scalar_tensor(value, dtype, device="cpu"):
    """A 0-d tensor (lucid.full with an empty shape)."""
    return lucid.full((), value, dtype=dtype, device=device)


def shape_in_message(shape, message):
    body = ", ".join(str(s) for s in shape)
    return f"[{body}]" in message or f"({body})" in message or (len(shape) == 1 and f"({body},)" in message)


def mismatches(got, want, inputs, limit=8):
    """(up to `limit` messages naming an input and both results in hex, count) of the
    places where the integer arrays `got` and `want` differ."""
    bad = np.nonzero(got != want)[0]
    return [f"in=0x{int(inputs[i]):x} got=0x{int(got[i]):x} want=0x{int(want[i]):x}" for i in bad[:limit]], len(bad)


def numpy_f16_bits(f32):
    """numpy's float32 -> float16 conversion, as bit patterns."""
    with np.errstate(all="ignore"):
        return f32.astype(np.float16).view(np.uint16)


def randf(shape, seed=0, dtype=np.float32):
    """Standard normal values of `shape` from a generator seeded `seed`, rounded to float32 and
    then to `dtype`."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32).astype(dtype)


def ulps(a, b, np_type=None):
    """Distance in units in the last place between two 16-bit float arrays (float16 or
    bfloat16): both converted to `np_type` when it is given, else both of one dtype."""
    if np_type is not None:
        a, b = np.asarray(a, dtype=np_type), np.asarray(b, dtype=np_type)
    else:
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.dtype.itemsize == 2, a.dtype
    ia = a.view(np.int16).astype(np.int64)
    ib = b.view(np.int16).astype(np.int64)
    ia = np.where(ia < 0, -32768 - ia, ia)
    ib = np.where(ib < 0, -32768 - ib, ib)
    return np.abs(ia - ib)


def assert_bits_equal(got, want):
    """Same dtype, shape and bit patterns (so NaN matches NaN and -0.0 differs from 0.0)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    uint = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    gb, wb = got.reshape(-1).view(uint), want.reshape(-1).view(uint)
    bad = np.nonzero(gb != wb)[0]
    assert len(bad) == 0, (
        f"{len(bad)} mismatches, first at flat index {bad[:4].tolist()}: "
        f"{got.reshape(-1)[bad[0]]!r} vs {want.reshape(-1)[bad[0]]!r}"
    )


def numeric_grads(fn, arrays, weights, eps=1e-2, dtype=lucid.float32):
    """Central differences of sum(fn(*arrays) * weights) in float64, through lucid's ops on
    tensors of `dtype` (float32 unless given)."""
    grads = []
    for i, a in enumerate(arrays):
        g = np.zeros(a.shape, dtype=np.float64)
        for idx in np.ndindex(a.shape):
            vals = []
            for sign in (1, -1):
                moved = [x.copy() for x in arrays]
                moved[i][idx] += sign * eps
                out = fn(*[lucid.tensor(x, dtype=dtype) for x in moved]).numpy().astype(np.float64)
                vals.append(float((out * weights).sum()))
            g[idx] = (vals[0] - vals[1]) / (2 * eps)
        grads.append(g)
    return grads


ROOT = Path(__file__).resolve().parent.parent


def load_file(path, name=None):
    """The module a Python file of the repository defines (a tool or an example), loaded from
    its path (`path` relative to the repository's root)."""
    path = ROOT / path
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
