"""Tensor factories."""

from __future__ import annotations

import operator

import numpy as np

from .. import _C
from .._core import TensorBase, result, scalar, shape_args
from .._types import as_device, bool_, check_dtype, float32, float64, from_numpy_dtype, int64, is_numpy_bfloat16

__all__ = [
    "tensor",
    "from_numpy",
    "zeros",
    "ones",
    "full",
    "empty",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "rand_like",
    "randn_like",
    "arange",
    "rand",
    "randn",
    "manual_seed",
    "linspace",
    "as_tensor",
    "scalar_tensor",
    "logspace",
    "empty_strided",
    "empty_permuted",
    "tril_indices",
    "triu_indices",
]


def _to_numpy(data) -> np.ndarray:
    if isinstance(data, TensorBase):
        return data.numpy()
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError) as e:
        raise ValueError(f"tensor(): cannot make a tensor from {type(data).__name__}: {e}") from None
    if (arr.dtype == object or arr.dtype.kind in "USVcmMO") and not is_numpy_bfloat16(arr.dtype):
        raise TypeError(
            f"tensor(): unsupported data of numpy dtype {arr.dtype} "
            f"(expected numbers, bools, nested lists of them, or a numpy array)"
        )
    return arr


def _cast_numpy(arr: np.ndarray, target) -> np.ndarray:
    """Converts in one rounding step from the source (float64 included) to `target`."""
    if target.is_floating_point or arr.dtype.kind in "iub":
        with np.errstate(over="ignore"):  # beyond the target's range is an infinity, as in PyTorch
            return arr.astype(target.numpy, copy=False)
    # float -> integer/bool with the engine's cast rule: truncate toward zero, saturate,
    # NaN -> 0, in one step from the source's own precision.
    a = arr.astype(np.float64)
    if target.numpy == np.bool_:
        return np.asarray(a != 0)  # (a 0-d comparison gives a numpy scalar, not an array)
    if target.itemsize < 4:
        # The 8- and 16-bit integers: the int64 truncation wrapped to their width, as the
        # engine and PyTorch store them (300.7 -> 44 in uint8, -1.5 -> 255).
        return _cast_numpy(a, int64).astype(target.numpy)
    info = np.iinfo(target.numpy)
    limit = 2.0 ** (info.bits - 1)  # exactly representable, unlike info.max
    with np.errstate(invalid="ignore"):
        a = np.nan_to_num(np.trunc(a), nan=0.0)
        high, low = a >= limit, a < -limit
        out = np.where(high | low, 0.0, a).astype(target.numpy)
    out[high] = info.max
    out[low] = info.min
    return out


def _check_fits(arr: np.ndarray, target) -> None:
    """Refuses Python numbers an integer dtype cannot hold, as PyTorch does (and as lucid.full
    does): a float below the type's lowest value, or whose truncation is above its largest
    (NaN and infinities included); an int beyond its range (uint8 takes -255…255, wrapped)."""
    if arr.size == 0 or arr.dtype.kind not in "iuf":
        return
    info = np.iinfo(target.numpy)
    if arr.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = np.isnan(arr) | (arr < info.min) | (np.trunc(arr) > info.max)
    else:
        low = -info.max if target.name == "uint8" else info.min
        bad = (arr < low) | (arr > info.max)
    if bad.any():
        v = arr[bad].flat[0]
        raise ValueError(f"tensor(): value {v.item()!r} cannot be converted to {target!r} without overflow")


def tensor(data, dtype=None, device="cpu", requires_grad=False):
    """A tensor holding a copy of `data` (a number, nested lists, a numpy array or a tensor).

    Python floats become float32 (the default dtype), Python ints int64, bools bool; a numpy
    array or a tensor keeps its dtype (float64 included).
    """
    dev = as_device(device)
    arr = _to_numpy(data)
    if dtype is None:
        target = from_numpy_dtype(arr.dtype)
        if target is float64 and not isinstance(data, (np.ndarray, np.generic, TensorBase)):
            target = float32  # Python floats
    else:
        target = check_dtype(dtype)
        if not target.is_floating_point and target is not bool_ and not isinstance(data, (np.ndarray, TensorBase)):
            _check_fits(arr, target)  # Python numbers (a numpy array or a tensor converts, wrapping)
    arr = _cast_numpy(arr, target)
    if not arr.flags.c_contiguous:  # (np.ascontiguousarray would turn a 0-d array into 1-d)
        arr = arr.copy(order="C")
    t = result(_C.tensor_from_host(arr.ctypes.data, arr.nbytes, arr.shape, target.code, dev.code))
    if requires_grad:
        t.requires_grad_(True)
    return t


def from_numpy(arr: np.ndarray):
    """A CPU tensor holding a copy of `arr`."""
    return tensor(arr)


def full(size, fill_value, dtype=None, device="cpu", requires_grad=False):
    """A tensor of shape `size` filled with `fill_value`; dtype from the value when not given."""
    shape = shape_args((size,) if isinstance(size, int) else tuple(size))
    s = scalar(fill_value)
    if s is None:
        raise TypeError(f"full(): fill_value must be a number or bool, got {fill_value!r}")
    if dtype is None:
        dtype = {_C.SCALAR_FLOAT: float32, _C.SCALAR_INT: int64, _C.SCALAR_BOOL: bool_}[s[2]]
    d = check_dtype(dtype)
    return leaf(result(_C.tensor_full(shape, s[0], s[1], s[2], d.code, as_device(device).code)), requires_grad)


def leaf(t, requires_grad: bool):
    return t.requires_grad_(True) if requires_grad else t


def _size(shape, size, fn):
    """The size given by position (``f(2, 3)``, ``f((2, 3))``) or by name (``f(size=(2, 3))``)."""
    if size is None:
        return shape_args(shape)
    if shape:
        raise TypeError(f"{fn}(): give the size by position or as size=, not both")
    return shape_args((size,) if isinstance(size, int) else tuple(size))


def _filled(size, value, dtype, device, requires_grad):
    d = float32 if dtype is None else check_dtype(dtype)
    t = result(_C.tensor_full(size, float(value), int(value), _C.SCALAR_INT, d.code, as_device(device).code))
    return leaf(t, requires_grad)


def zeros(*shape, size=None, dtype=None, device="cpu", requires_grad=False):
    return _filled(_size(shape, size, "zeros"), 0, dtype, device, requires_grad)


def ones(*shape, size=None, dtype=None, device="cpu", requires_grad=False):
    return _filled(_size(shape, size, "ones"), 1, dtype, device, requires_grad)


def zeros_like(t, dtype=None, device=None, requires_grad=False):
    return zeros(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def ones_like(t, dtype=None, device=None, requires_grad=False):
    return ones(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def full_like(t, fill_value, dtype=None, device=None, requires_grad=False):
    return full(t.shape, fill_value, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def rand_like(t, dtype=None, device=None, requires_grad=False):
    return rand(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def randn_like(t, dtype=None, device=None, requires_grad=False):
    return randn(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def empty(*shape, size=None, dtype=None, device="cpu", requires_grad=False):
    """A tensor of `size` (lucid fills it with zeros: there is no uninitialised memory)."""
    return _filled(_size(shape, size, "empty"), 0, dtype, device, requires_grad)


def empty_like(t, dtype=None, device=None, requires_grad=False):
    return zeros_like(t, dtype=dtype, device=device, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device="cpu"):
    """Values from `start` (default 0) up to, not including, `end`, by `step`."""
    if end is None:
        start, end = 0, start
    vals = []
    for v in (start, end, step):
        s = scalar(v)
        if s is None or s[2] == _C.SCALAR_BOOL:
            raise TypeError(f"arange(): expected numbers, got {v!r}")
        vals.append(s)
    d = -1 if dtype is None else check_dtype(dtype).code
    dev = as_device(device).code
    if all(s[2] == _C.SCALAR_INT for s in vals):
        return result(_C.tensor_arange_int(vals[0][1], vals[1][1], vals[2][1], d, dev))
    nums = [float(s[1]) if s[2] == _C.SCALAR_INT else s[0] for s in vals]
    return result(_C.tensor_arange(nums[0], nums[1], nums[2], d, dev))


def _random(size, normal, dtype, device, requires_grad):
    d = float32 if dtype is None else check_dtype(dtype)
    return leaf(result(_C.tensor_random(size, normal, d.code, as_device(device).code)), requires_grad)


def rand(*shape, size=None, dtype=None, device="cpu", requires_grad=False):
    """Uniform samples in [0, 1) from the generator `manual_seed` reseeds."""
    return _random(_size(shape, size, "rand"), False, dtype, device, requires_grad)


def randn(*shape, size=None, dtype=None, device="cpu", requires_grad=False):
    """Standard normal samples from the generator `manual_seed` reseeds."""
    return _random(_size(shape, size, "randn"), True, dtype, device, requires_grad)


def linspace(start, end, steps, *, dtype=None, device="cpu", requires_grad=False):
    """`steps` values from `start` to `end`, evenly spaced (both ends included)."""
    n = operator.index(steps)
    if n < 0:
        raise ValueError(f"linspace(): steps must be non-negative, got {steps}")
    values = np.linspace(float(start), float(end), n)
    return leaf(tensor(values, dtype=float32 if dtype is None else check_dtype(dtype), device=device), requires_grad)


def as_tensor(data, dtype=None, device=None):
    """`data` as a tensor: a tensor of that dtype and device is returned as it is (no copy),
    anything else as ``tensor()`` makes it."""
    if isinstance(data, TensorBase):
        return data.to(dtype=dtype, device=device)
    return tensor(data, dtype=dtype, device="cpu" if device is None else device)


def scalar_tensor(s, *, dtype=None, layout=None, device="cpu", requires_grad=False, pin_memory=False):
    """A 0-d tensor holding the number `s`, of `dtype` (float32 when not given)."""
    if scalar(s) is None:
        raise TypeError(f"scalar_tensor(): expected a number, got {type(s).__name__}")
    return leaf(full((), s, dtype=float32 if dtype is None else dtype, device=device), requires_grad)


def _number(v, fn, what):
    if isinstance(v, TensorBase):
        if v.numel() != 1 or v.ndim != 0:
            raise RuntimeError(f"{fn}(): {what} must be a number or a 0-d tensor, got shape {tuple(v.shape)}")
        return v.item()
    if scalar(v) is None or isinstance(v, bool):
        raise TypeError(f"{fn}(): {what} must be a number, got {type(v).__name__}")
    return v


def logspace(start, end, steps, base=10.0, *, dtype=None, layout=None, device="cpu", requires_grad=False):
    """`steps` values from ``base ** start`` to ``base ** end``, evenly spaced on a log scale
    (`start` and `end` numbers or 0-d tensors)."""
    start, end = float(_number(start, "logspace", "start")), float(_number(end, "logspace", "end"))
    base = float(_number(base, "logspace", "base"))
    n = operator.index(steps)
    if n < 0:
        raise RuntimeError(f"logspace(): number of steps must be non-negative, got {steps}")
    with np.errstate(over="ignore"):
        values = np.power(base, np.linspace(start, end, n))
    return leaf(tensor(values, dtype=float32 if dtype is None else check_dtype(dtype), device=device), requires_grad)


def _strided_zeros(size, stride, dtype, device, fn):
    size, stride = shape_args((size,)), shape_args((stride,))
    if len(size) != len(stride):
        raise RuntimeError(f"{fn}(): {len(stride)} strides for {len(size)} sizes")
    if any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise RuntimeError(f"{fn}(): sizes and strides must be non-negative, got {size} and {stride}")
    extent = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    base = _filled((extent,), 0, dtype, device, False)
    return result(_C.as_strided(base._h, size, stride, 0, True))


def empty_strided(size, stride, *, dtype=None, layout=None, device="cpu", requires_grad=False, pin_memory=False):
    """A tensor of `size` with these strides (in elements) over storage of its own; lucid fills
    it with zeros (there is no uninitialised memory)."""
    return leaf(_strided_zeros(size, stride, dtype, device, "empty_strided"), requires_grad)


def empty_permuted(
    size, physical_layout, *, dtype=None, layout=None, device="cpu", requires_grad=False, pin_memory=False
):
    """A tensor of `size` whose dimensions lie in memory in the order `physical_layout` (the
    outermost first); filled with zeros."""
    size = shape_args((size,))
    order = shape_args((physical_layout,), "physical_layout")
    if sorted(order) != list(range(len(size))):
        raise RuntimeError(
            f"empty_permuted(): physical_layout {order} is not a permutation of the {len(size)} dimensions"
        )
    physical = _filled(tuple(size[d] for d in order), 0, dtype, device, False)
    inverse = [order.index(d) for d in range(len(size))]
    return leaf(result(_C.permute(physical._h, tuple(inverse))), requires_grad)


def _triangle_indices(row, col, offset, dtype, device, lower, fn):
    row, col, offset = operator.index(row), operator.index(col), operator.index(offset)
    if row < 0 or col < 0:
        raise RuntimeError(f"{fn}(): row and col must be non-negative, got {row} and {col}")
    d = int64 if dtype is None else check_dtype(dtype)
    if d.is_floating_point or d is bool_:
        raise TypeError(f"{fn}(): dtype must be an integer dtype, got {d}")
    rows, cols = (np.tril_indices if lower else np.triu_indices)(row, offset, col)
    return tensor(np.stack([rows, cols]).astype(np.int64).reshape(2, -1), dtype=d, device=device)


def tril_indices(row, col, offset=0, *, dtype=None, device="cpu", layout=None):
    """The coordinates of the lower triangle (on and below diagonal `offset`) of a row x col
    matrix, as a ``(2, N)`` tensor in row-major order."""
    return _triangle_indices(row, col, offset, dtype, device, True, "tril_indices")


def triu_indices(row, col, offset=0, *, dtype=None, device="cpu", layout=None):
    """The coordinates of the upper triangle (on and above diagonal `offset`) of a row x col
    matrix, as a ``(2, N)`` tensor in row-major order."""
    return _triangle_indices(row, col, offset, dtype, device, False, "triu_indices")


def manual_seed(seed: int) -> None:
    """Reseeds the engine's generator behind rand and randn."""
    _C.manual_seed(operator.index(seed) & ((1 << 64) - 1))
