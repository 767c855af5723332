"""``lucid.testing``, as ``torch.testing``: comparing tensors in tests."""

from __future__ import annotations

import numpy as np

from ._core import TensorBase
from ._ops.creation import as_tensor

# PyTorch's default tolerances by dtype name: (rtol, atol).
_TOLERANCES = {"float32": (1.3e-6, 1e-5), "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5)}


def assert_close(
    actual, expected, *, rtol=None, atol=None, equal_nan=False, check_dtype=True, check_device=True, msg=None
):
    """Raises AssertionError unless ``|actual - expected| <= atol + rtol * |expected|`` everywhere
    (with PyTorch's default tolerances for the dtype; exact for integers and bools), the shapes
    match, and (by default) the dtypes and devices do. Numbers and sequences are compared as
    tensors."""
    if (rtol is None) != (atol is None):
        raise ValueError("assert_close: give both rtol and atol, or neither")
    a = actual if isinstance(actual, TensorBase) else as_tensor(actual)
    b = expected if isinstance(expected, TensorBase) else as_tensor(expected)
    problem = None
    if a.shape != b.shape:
        problem = f"the shapes differ: {tuple(a.shape)} and {tuple(b.shape)}"
    elif check_dtype and a.dtype != b.dtype:
        problem = f"the dtypes differ: {a.dtype} and {b.dtype}"
    elif check_device and a.device != b.device:
        problem = f"the devices differ: {a.device} and {b.device}"
    else:
        if rtol is None:
            rtol, atol = _TOLERANCES.get(a.dtype.name, (0.0, 0.0))
        x, y = np.asarray(a.numpy(), dtype=np.float64), np.asarray(b.numpy(), dtype=np.float64)
        close = np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan) | ((x == y) & np.isinf(x))
        if not close.all():
            bad = int((~close).sum())
            diff = np.abs(x - y)[~close]
            problem = (
                f"{bad} of {close.size} elements are not close (rtol={rtol}, atol={atol}); the largest absolute "
                f"difference is {np.nanmax(diff) if np.isfinite(diff).any() else diff.max()}"
            )
    if problem is not None:
        raise AssertionError(msg if msg is not None else f"Tensor-likes are not close: {problem}")


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """PyTorch's older spelling of :func:`assert_close`, without its dtype and device checks."""
    assert_close(
        actual,
        expected,
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        check_dtype=False,
        check_device=False,
        msg=msg or None,
    )


__all__ = ["assert_close", "assert_allclose"]
