"""The tensor core: a Python object holding one engine handle, its record, its release, and
what the engine knows about it (dtype, device, shape, strides, values).

`TensorBase` is every tensor's base class; the ops (lucid/_ops) take and make tensors through
it, and `lucid.Tensor` adds the methods. An op's result is an instance of the class
`lucid.Tensor` registers here (`register`), as PyTorch's C core makes instances of the Python
class registered with it.
"""

from __future__ import annotations

import numbers
import struct

import numpy as np

from . import _C
from ._types import as_index, bfloat16, bool_, dtype_from_code, device_from_code, float32, int64

_R_HANDLE, _R_DTYPE, _R_DEVICE, _R_NDIM = _C.RECORD_HANDLE, _C.RECORD_DTYPE, _C.RECORD_DEVICE, _C.RECORD_NDIM
_R_REQUIRES_GRAD, _R_STORAGE_BYTES, _R_DIMS = _C.RECORD_REQUIRES_GRAD, _C.RECORD_STORAGE_BYTES, _C.RECORD_DIMS
_SHAPE_OFFSET, _STRIDES_OFFSET = 8 * _C.RECORD_SHAPE, 8 * _C.RECORD_STRIDES
_DEFERRED_BYTES, _DEFERRED_MAX, _deferred = _C.DEFERRED_BYTES, _C.DEFERRED_MAX, _C.deferred
_new_object = object.__new__
# Reads n int64 sizes (or strides) from a record straight into a tuple.
_UNPACK = [struct.Struct(f"={n}q").unpack_from for n in range(_R_DIMS + 1)]
# The shapes seen so far, by the key a record gives its sizes (include/lucid.h): a fresh
# result's shape is then one lookup instead of a read of its sizes.
_R_SHAPE_KEY, _SHAPES_MAX = _C.RECORD_SHAPE_KEY, 4096
_shapes = {}

# Recorded in-place writes so far. Once there has been one, a tensor's cached requires_grad of
# False is asked of the engine again: the write may have reached the tensor through a view and
# made it require grad.
rewrites = 0

Tensor = None  # the class ops make: lucid.Tensor, once registered


def register(cls):
    """Makes `cls` (a TensorBase subclass) the class of the tensors ops return."""
    global Tensor
    Tensor = cls
    return cls


def result(r, cls=None):
    """A tensor (of class `cls`, lucid.Tensor by default) for an engine result: an op's record,
    the hot path of every op, or a bare handle (int)."""
    t = _new_object(cls or Tensor)
    if type(r) is int:
        t._h, t._r = r, None
    else:
        t._h, t._r = r[_R_HANDLE], r
    t._meta = t._shape = None
    return t


# ---- arguments -------------------------------------------------------------------------------


def scalar(value):
    """(float value, int value, kind) for a Python/numpy scalar, or None for anything else."""
    t = type(value)
    if t is float:
        return value, 0, _C.SCALAR_FLOAT
    if t is int and -(1 << 63) <= value < (1 << 63):
        return 0.0, value, _C.SCALAR_INT
    if isinstance(value, (bool, np.bool_)):
        return 0.0, int(bool(value)), _C.SCALAR_BOOL
    if isinstance(value, numbers.Integral):
        v = int(value)
        if not -(1 << 63) <= v < (1 << 63):
            raise ValueError(f"integer scalar {v} does not fit in int64")
        return 0.0, v, _C.SCALAR_INT
    if isinstance(value, numbers.Real):
        return float(value), 0, _C.SCALAR_FLOAT
    return None


def scalar_or_raise(value, what):
    s = scalar(value)
    if s is None:
        raise TypeError(f"{what} must be a number, got {type(value).__name__}")
    return s


def int_tuple(values, what):
    out = []
    for v in values:
        try:
            out.append(as_index(v))
        except TypeError:
            raise TypeError(f"{what} must be integers, got {v!r} ({type(v).__name__})") from None
    return tuple(out)


def shape_args(shape, what="shape"):
    """Accepts f(2, 3) and f((2, 3)) / f([2, 3])."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return int_tuple(shape, what)


def dims_arg(dim):
    """A reduction's `dim` (an int, a sequence of them, or None for all) as the engine takes it."""
    if dim is None:
        return None
    if isinstance(dim, (tuple, list)):
        return int_tuple(dim, "dim")
    return int_tuple((dim,), "dim")


def tensor_arg(t, fn, what="input"):
    """`t`, which must be a tensor."""
    if not isinstance(t, TensorBase):
        raise TypeError(f"{fn}(): {what} must be a lucid.Tensor, got {type(t).__name__}")
    return t


def operand(value, fn, what):
    """A tensor's handle, or a number's (float, int, kind) triple."""
    if isinstance(value, TensorBase):
        return value._h
    s = scalar(value)
    if s is None:
        raise TypeError(f"{fn}(): {what} must be a lucid.Tensor or a number, got {type(value).__name__}")
    return s


class TensorBase:
    """A handle to an engine tensor, with what the engine knows about it."""

    # _h: the engine handle; _r: the record the engine wrote for it (None until needed when
    # the tensor came from a bare handle); _meta, _shape: (dtype, device, ndim, requires_grad)
    # and the shape as read from it, None until first asked for.
    __slots__ = ("_h", "_r", "_meta", "_shape", "__weakref__")
    # numpy operators and ufuncs defer to ours, so mixing an ndarray into an op raises
    # TypeError instead of silently returning an ndarray; np.asarray(t) still works.
    __array_ufunc__ = None

    def __del__(self):
        try:
            h, r = self._h, self._r
        except AttributeError:  # construction failed before the handle was set
            return
        if not h:
            return
        try:
            # Small tensors outside any graph are released in batches (lucid/_C/_calls.py).
            if r is not None and not r[_R_REQUIRES_GRAD] and r[_R_STORAGE_BYTES] <= _DEFERRED_BYTES:
                _deferred.append(h)
                if len(_deferred) >= _DEFERRED_MAX:
                    _C.flush_releases()
            else:
                _C.release(h)
        except (TypeError, AttributeError):  # the interpreter is shutting down: the engine goes too
            pass

    def _replace(self, result):
        """Points this Python object at another engine tensor, given as a record or a handle."""
        old = self._h
        if type(result) is int:
            self._h, self._r = result, None
        else:
            self._h, self._r = result[_R_HANDLE], result
        self._meta = self._shape = None
        _C.release(old)

    def _forget(self):
        """Drops what was read of the engine tensor, which has changed behind the handle."""
        self._r = self._meta = self._shape = None

    def _record(self):
        r = self._r
        if r is None:
            r = self._r = _C.tensor_record(self._h)
        return r

    def _info(self):
        """(dtype code, device code, ndim, requires_grad), from the engine's record."""
        m = self._meta
        if m is None:
            r = self._r
            if r is None:
                r = self._record()
            m = self._meta = (r[_R_DTYPE], r[_R_DEVICE], r[_R_NDIM], r[_R_REQUIRES_GRAD] != 0)
        return m

    # ---- metadata ----------------------------------------------------------------------------

    @property
    def dtype(self):
        return dtype_from_code(self._info()[0])

    @property
    def device(self):
        return device_from_code(self._info()[1])

    @property
    def ndim(self) -> int:
        return self._info()[2]

    def dim(self) -> int:
        return self.ndim

    @property
    def requires_grad(self) -> bool:
        if self._info()[3]:
            return True
        if rewrites:  # a recorded write may have made it require grad since it was read
            self._r = self._meta = None
            return self._info()[3]
        return False

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True):
        """Marks a leaf as requiring gradients (in place)."""
        if not isinstance(requires_grad, bool):
            raise TypeError(f"requires_grad must be a bool, got {requires_grad!r}")
        if not self.is_leaf:
            raise RuntimeError("requires_grad can only be changed on leaf tensors; use detach() first")
        self._replace(_C.tensor_set_requires_grad(self._h, requires_grad))
        return self

    @property
    def is_leaf(self) -> bool:
        return _C.tensor_grad_fn(self._h) is None

    def _geometry(self):
        """(shape, strides), from the engine's record (asked for beyond its dimensions)."""
        r = self._r
        if r is None:
            r = self._record()
        nd = r[_R_NDIM]
        if nd > _R_DIMS:
            return _C.tensor_shape(self._h, nd)
        unpack = _UNPACK[nd]
        return unpack(r, _SHAPE_OFFSET), unpack(r, _STRIDES_OFFSET)

    @property
    def shape(self) -> tuple:
        s = self._shape
        if s is None:
            try:
                s = _shapes[self._r[_R_SHAPE_KEY]]
            except (KeyError, TypeError):  # a shape not seen yet, one without a key, or no record
                s = self._read_shape()
            self._shape = s
        return s

    def _read_shape(self):
        """The shape from the record's sizes, remembered under its key when it has one."""
        r = self._r
        if r is None:
            r = self._record()
        s = self._geometry()[0]
        key = r[_R_SHAPE_KEY]
        if key >= 0 and len(_shapes) < _SHAPES_MAX:
            _shapes[key] = s
        return s

    def _wrap_dim(self, dim, op="dim"):
        """`dim` wrapped into 0..<ndim by the engine's rule (IndexError out of range)."""
        return _C.wrap_dim(as_index(dim), self.ndim, op)

    def size(self, dim=None):
        if dim is None:
            return self.shape
        return self.shape[self._wrap_dim(dim, "size")]

    def stride(self, dim=None):
        s = self._geometry()[1]
        return s if dim is None else s[self._wrap_dim(dim, "stride")]

    def storage_offset(self) -> int:
        """The element of the storage where this tensor's element 0 is."""
        return _C.storage_offset(self._h)

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def is_contiguous(self) -> bool:
        """Whether the elements lie in row-major order with no gaps (size-1 dimensions aside)."""
        return _C.is_contiguous(self._h) != 0

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ---- values ------------------------------------------------------------------------------

    def numpy(self) -> np.ndarray:
        """A copy of the values as a numpy array (bfloat16 as ``ml_dtypes.bfloat16``)."""
        d = self.dtype
        out = np.empty(self.shape, dtype=d.numpy)
        _C.tensor_to_host(self._h, out.ctypes.data, out.nbytes)
        return out

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def item(self):
        if self.numel() != 1:
            raise ValueError(f"item(): expected a tensor with one element, got shape {self.shape}")
        v = self.numpy().reshape(())
        return v.astype(np.float32).item() if self.dtype is bfloat16 else v.item()

    def tolist(self):
        a = self.numpy()
        if self.dtype is bfloat16:
            a = a.astype(np.float32)
        return a.tolist()

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(f"the truth value of a tensor with {self.numel()} elements is ambiguous")
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only one-element integer tensors can be used as an index")
        return int(self.item())

    def __format__(self, spec):
        """A 0-d tensor formats as its number (``f"{loss:.4f}"``); others as their repr."""
        if self.ndim == 0 and spec:
            return format(self.item(), spec)
        return format(repr(self), spec)

    def __repr__(self):
        a = self.numpy()
        if self.dtype is bfloat16:
            a = a.astype(np.float32)
        body = np.array2string(
            a, separator=", ", prefix="tensor(", threshold=1000, precision=4, floatmode="maxprec_equal"
        )
        extras = []
        if self.device.type != "cpu":
            extras.append(f"device='{self.device.type}'")
        if self.dtype not in (float32, int64, bool_) or (a.size == 0 and self.dtype is not float32):
            extras.append(f"dtype={self.dtype!r}")
        if self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"
