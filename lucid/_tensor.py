"""lucid.Tensor: a handle to an engine tensor, with PyTorch's operators and methods."""

from __future__ import annotations

import numbers
import operator
import struct
from collections import namedtuple

import numpy as np

from . import _engine as E
from . import _views
from ._types import device as _Device, dtype as _DType
from ._types import (as_device, as_index, bfloat16, bool_, check_dtype, device, dtype, dtype_from_code,
                     device_from_code, float16, float32, int32, int64)


_R_HANDLE, _R_DTYPE, _R_DEVICE, _R_NDIM, _R_REQUIRES_GRAD, _R_DIMS = (E.R_HANDLE, E.R_DTYPE, E.R_DEVICE, E.R_NDIM,
                                                                  E.R_REQUIRES_GRAD, E.R_DIMS)
_SHAPE_OFFSET, _STRIDES_OFFSET = 8 * E.R_SHAPE, 8 * E.R_STRIDES
_R_STORAGE_BYTES, _DEFERRED_BYTES, _DEFERRED_MAX, _deferred = (E.R_STORAGE_BYTES, E._DEFERRED_BYTES,
                                                               E._DEFERRED_MAX, E._deferred)
_new_object = object.__new__
# The engine calls of the hottest operators, bound once.
_binary_op, _matmul_op, _ADD, _MUL = E.binary, E.matmul, E.ADD, E.MUL
# Reads n int64 sizes (or strides) from a record straight into a tuple.
_UNPACK = [struct.Struct(f"={n}q").unpack_from for n in range(E.R_DIMS + 1)]
# The shapes seen so far, by the key a record gives its sizes (include/lucid.h): a fresh
# result's shape is then one lookup instead of a read of its sizes.
_R_SHAPE_KEY, _SHAPES_MAX = E.R_SHAPE_KEY, 4096
_shapes = {}


def _scalar(value):
    """(float value, int value, kind) for a Python/numpy scalar, or None for anything else."""
    t = type(value)
    if t is float:
        return value, 0, E.SCALAR_FLOAT
    if t is int and -(1 << 63) <= value < (1 << 63):
        return 0.0, value, E.SCALAR_INT
    if isinstance(value, (bool, np.bool_)):
        return 0.0, int(bool(value)), E.SCALAR_BOOL
    if isinstance(value, numbers.Integral):
        v = int(value)
        if not -(1 << 63) <= v < (1 << 63):
            raise ValueError(f"integer scalar {v} does not fit in int64")
        return 0.0, v, E.SCALAR_INT
    if isinstance(value, numbers.Real):
        return float(value), 0, E.SCALAR_FLOAT
    return None


def _int_tuple(values, what):
    out = []
    for v in values:
        try:
            out.append(as_index(v))
        except TypeError:
            raise TypeError(f"{what} must be integers, got {v!r} ({type(v).__name__})") from None
    return tuple(out)


def _shape_args(shape, what="shape"):
    """Accepts f(2, 3) and f((2, 3)) / f([2, 3])."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return _int_tuple(shape, what)


def _scalar_or_raise(value, what):
    s = _scalar(value)
    if s is None:
        raise TypeError(f"{what} must be a number, got {type(value).__name__}")
    return s


# (values, indices), as torch.max(x, dim) returns.
MaxResult = namedtuple("max", ["values", "indices"])
MinResult = namedtuple("min", ["values", "indices"])


class Tensor:
    """A multi-dimensional array on the CPU or the Metal stream.

    Make tensors with :func:`lucid.tensor`, :func:`lucid.zeros`, :func:`lucid.randn` and the
    other factories. Every op runs in the engine; a tensor here holds one engine handle.
    """

    # _h: the engine handle; _r: the record the engine wrote for it (None until needed when
    # the tensor came from a bare handle); _meta, _shape: (dtype, device, ndim, requires_grad)
    # and the shape as read from it, None until first asked for.
    __slots__ = ("_h", "_r", "_meta", "_shape", "__weakref__")
    # numpy operators and ufuncs defer to ours, so mixing an ndarray into an op raises
    # TypeError instead of silently returning an ndarray; np.asarray(t) still works.
    __array_ufunc__ = None

    def __new__(cls, *args, device="cpu", requires_grad=False):
        """``lucid.Tensor(data)`` is a float32 tensor of `data`, ``lucid.Tensor(2, 3)`` a float32
        tensor of that size (zeros) and ``lucid.Tensor()`` an empty one, as ``torch.Tensor``."""
        from . import _creation
        from ._types import float32
        if cls is not Tensor:
            raise TypeError(f"{cls.__name__} cannot be constructed; make a lucid.Tensor")
        if not args:
            return _creation.zeros(0, device=device, requires_grad=requires_grad)
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            return _creation.zeros(*args, device=device, requires_grad=requires_grad)
        if len(args) == 1:
            return _creation.tensor(args[0], dtype=float32, device=device, requires_grad=requires_grad)
        raise TypeError(f"lucid.Tensor() takes data or a size of ints, got {args!r}")

    @classmethod
    def _wrap(cls, result):
        """A tensor for an engine result: an op's record (E.Record) or a bare handle (int)."""
        t = _new_object(cls)
        if type(result) is int:
            t._h, t._r = result, None
        else:
            t._h, t._r = result[_R_HANDLE], result
        t._meta = t._shape = None
        return t

    def __del__(self):
        try:
            h, r = self._h, self._r
        except AttributeError:  # construction failed before the handle was set
            return
        if not h:
            return
        try:
            # Small tensors outside any graph are released in batches (_engine._deferred).
            if r is not None and not r[_R_REQUIRES_GRAD] and r[_R_STORAGE_BYTES] <= _DEFERRED_BYTES:
                _deferred.append(h)
                if len(_deferred) >= _DEFERRED_MAX:
                    E.flush_releases()
            else:
                E.release(h)
        except (TypeError, AttributeError):  # the interpreter is shutting down: the engine goes too
            pass

    def _replace(self, result):
        """Points this Python object at another engine tensor, given as a record or a handle
        (used by in-place style APIs)."""
        old = self._h
        if type(result) is int:
            self._h, self._r = result, None
        else:
            self._h, self._r = result[_R_HANDLE], result
        self._meta = self._shape = None
        E.release(old)

    def _record(self):
        r = self._r
        if r is None:
            r = self._r = E.record(self._h)
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

    # ---- metadata ------------------------------------------------------------------------

    @property
    def dtype(self) -> dtype:
        return dtype_from_code(self._info()[0])

    @property
    def device(self) -> device:
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
        if _views.rewrites:  # a recorded write may have made it require grad since it was read
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
        self._replace(E.set_requires_grad(self._h, requires_grad))
        return self

    # ---- autograd ------------------------------------------------------------------------

    @property
    def grad_fn(self):
        """The name of the op that produced this tensor in the backward graph, or None."""
        return E.grad_fn(self._h)

    @property
    def is_leaf(self) -> bool:
        return E.grad_fn(self._h) is None

    @property
    def grad(self):
        """The gradient accumulated into this leaf by ``backward``, or None."""
        h = E.grad(self._h)
        return Tensor._wrap(h) if h else None

    @grad.setter
    def grad(self, value):
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(f"grad must be a lucid.Tensor or None, got {type(value).__name__}")
        E.set_grad(self._h, 0 if value is None else value._h)

    def backward(self, gradient=None, retain_graph: bool = False):
        """Accumulates d(self)/d(leaf) into every leaf's ``.grad``; `gradient` defaults to 1
        for a one-element tensor. The graph is freed afterwards unless `retain_graph`."""
        if gradient is not None and not isinstance(gradient, Tensor):
            raise TypeError(f"gradient must be a lucid.Tensor, got {type(gradient).__name__}")
        E.backward(self._h, 0 if gradient is None else gradient._h, bool(retain_graph))

    def _geometry(self):
        """(shape, strides), from the engine's record (asked for beyond its dimensions)."""
        r = self._r
        if r is None:
            r = self._record()
        nd = r[_R_NDIM]
        if nd > _R_DIMS:
            return E.shape_and_strides(self._h, nd)
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

    def size(self, dim=None):
        if dim is None:
            return self.shape
        return self.shape[self._wrap_dim(dim)]

    def stride(self, dim=None):
        s = self._geometry()[1]
        return s if dim is None else s[self._wrap_dim(dim)]

    def storage_offset(self) -> int:
        """The element of the storage where this tensor's element 0 is."""
        return E.storage_offset(self._h)

    def as_strided(self, size, stride, storage_offset=None):
        """The view of this tensor's storage with these sizes and strides (in elements, not
        negative) from `storage_offset` (this tensor's own by default), as torch.as_strided.
        It must lie inside the storage; its elements may repeat, and their gradients add up."""
        size, stride = _int_tuple(size, "as_strided: size"), _int_tuple(stride, "as_strided: stride")
        if len(size) != len(stride):
            raise RuntimeError(f"as_strided: {len(stride)} strides for {len(size)} sizes")
        offset = None if storage_offset is None else as_index(storage_offset)
        return Tensor._wrap(E.as_strided(self._h, size, stride, offset))

    def _wrap_dim(self, dim):
        n = self.ndim
        d = as_index(dim)
        if not -max(n, 1) <= d < max(n, 1):
            raise IndexError(f"dimension {d} is out of range for a tensor with {n} dimensions")
        return d % n if n else 0

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def is_contiguous(self) -> bool:
        expected = 1
        shape, strides = self._geometry()
        for size, st in zip(reversed(shape), reversed(strides)):
            if size != 1:
                if st != expected:
                    return False
                expected *= size
        return True

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ---- values --------------------------------------------------------------------------

    def numpy(self) -> np.ndarray:
        """A copy of the values as a numpy array (bfloat16 as ``ml_dtypes.bfloat16``)."""
        d = self.dtype
        out = np.empty(self.shape, dtype=d.numpy)
        E.to_host(self._h, out.ctypes.data, out.nbytes)
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
        body = np.array2string(a, separator=", ", prefix="tensor(", threshold=1000,
                               precision=4, floatmode="maxprec_equal")
        extras = []
        if self.device.type != "cpu":
            extras.append(f"device='{self.device.type}'")
        if self.dtype not in (float32, int64, bool_) or (a.size == 0 and self.dtype is not float32):
            extras.append(f"dtype={self.dtype!r}")
        if self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    # ---- conversion ----------------------------------------------------------------------

    def to(self, *args, dtype=None, device=None, copy=False):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)`` or ``to(other_tensor)``.

        Returns `self` when nothing changes; with `copy`, always a tensor in storage of its own.
        """
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, _DType):
                dtype = a
            elif isinstance(a, (str, _Device)):
                device = a
            else:
                raise TypeError(f"to(): expected a device, a dtype or a tensor, got {a!r}")
        d = -1 if dtype is None else check_dtype(dtype).code
        dev = -1 if device is None else as_device(device).code
        if (d in (-1, self._info()[0])) and (dev in (-1, self._info()[1])):
            return self.clone() if copy else self
        return Tensor._wrap(E.convert(self._h, d, dev))

    def float(self):
        return self.to(float32)

    def half(self):
        return self.to(float16)

    def bfloat16(self):
        return self.to(bfloat16)

    def int(self):
        return self.to(int32)

    def long(self):
        return self.to(int64)

    def bool(self):
        return self.to(bool_)

    def cpu(self):
        return self.to("cpu")

    def metal(self):
        return self.to("metal")

    def detach(self):
        """This tensor cut from the autograd graph. As in PyTorch it shares this tensor's
        values: an in-place write to either is seen by both."""
        return Tensor._wrap(E.detach(self._h))

    def __deepcopy__(self, memo):
        """A new leaf with these values, dtype, device and requires_grad (a Parameter stays
        one); as in PyTorch, only leaves can be deep-copied."""
        if id(self) in memo:
            return memo[id(self)]
        if not self.is_leaf:
            raise RuntimeError("only tensors created explicitly (leaves) support deepcopy; detach() or clone() first")
        detached = E.handle(E.detach(self._h))
        try:
            copy = E.handle(E.clone(detached))
        finally:
            E.release(detached)
        try:
            copied = type(self)._wrap(E.set_requires_grad(copy, self.requires_grad))
        finally:
            E.release(copy)
        memo[id(self)] = copied
        return copied

    def __copy__(self):
        return self.__deepcopy__({})

    def __reduce_ex__(self, protocol):
        """Pickles as its values (numpy), dtype, device and requires_grad."""
        from ._creation import _rebuild
        return _rebuild, (self.detach().numpy(), self.dtype.name, self.device.type, self.requires_grad,
                          type(self).__name__ == "Parameter")

    def detach_(self):
        self._replace(E.detach(self._h))
        return self

    def clone(self):
        """A copy of this tensor in storage of its own (gradients flow back)."""
        return Tensor._wrap(E.clone(self._h))

    @property
    def data(self):
        """This tensor's values without autograd: ``p.data.add_(...)`` updates ``p``. Unlike
        ``detach()``, as in PyTorch, writes through it are hidden from autograd's version
        checks: a tensor saved for backward and changed through ``.data`` is used as it is."""
        return Tensor._wrap(E.data(self._h))

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a lucid.Tensor, got {type(value).__name__}")
        _views.set_data(self, value)

    # ---- operators -----------------------------------------------------------------------

    def _binary(self, op, other, reflected=False):
        if isinstance(other, Tensor):
            a, b = (other, self) if reflected else (self, other)
            return _result(E.binary(op, a._h, b._h))
        s = _scalar(other)
        if s is None:
            return NotImplemented
        return _result(E.binary_scalar(op, self._h, s[0], s[1], s[2], reflected))

    def __add__(self, o):
        if isinstance(o, Tensor):  # the commonest case, without the general path's calls
            return _result(_binary_op(_ADD, self._h, o._h))
        return self._binary(E.ADD, o)

    def __radd__(self, o):
        return self._binary(E.ADD, o, True)

    def __sub__(self, o):
        return self._binary(E.SUB, o)

    def __rsub__(self, o):
        return self._binary(E.SUB, o, True)

    def __mul__(self, o):
        if isinstance(o, Tensor):
            return _result(_binary_op(_MUL, self._h, o._h))
        return self._binary(E.MUL, o)

    def __rmul__(self, o):
        return self._binary(E.MUL, o, True)

    def __truediv__(self, o):
        return self._binary(E.DIV, o)

    def __rtruediv__(self, o):
        return self._binary(E.DIV, o, True)

    def __matmul__(self, o):
        if not isinstance(o, Tensor):
            return NotImplemented
        return _result(_matmul_op(self._h, o._h))

    def __rmatmul__(self, o):
        if not isinstance(o, Tensor):
            return NotImplemented
        return Tensor._wrap(E.matmul(o._h, self._h))

    def __neg__(self):
        return Tensor._wrap(E.unary(E.NEG, self._h))

    def __pos__(self):
        return self

    add = __add__
    sub = __sub__
    mul = __mul__
    div = __truediv__

    def matmul(self, other):
        return self @ other

    def relu(self):
        return Tensor._wrap(E.unary(E.RELU, self._h))

    def _unary(self, name):
        return Tensor._wrap(E.unary(E.UNARY[name], self._h))

    def exp(self):
        return self._unary("exp")

    def log(self):
        return self._unary("log")

    def log1p(self):
        return self._unary("log1p")

    def sqrt(self):
        return self._unary("sqrt")

    def rsqrt(self):
        return self._unary("rsqrt")

    def abs(self):
        return self._unary("abs")

    __abs__ = abs

    def tanh(self):
        return self._unary("tanh")

    def sin(self):
        return self._unary("sin")

    def cos(self):
        return self._unary("cos")

    def sigmoid(self):
        return self._unary("sigmoid")

    def __pow__(self, o):
        return self._binary(E.POW, o)

    def __rpow__(self, o):
        return self._binary(E.POW, o, True)

    def pow(self, exponent):
        """``self ** exponent`` (a tensor or a number); float32 under autocast."""
        out = self._binary(E.POW, exponent)
        if out is NotImplemented:
            raise TypeError(f"pow(): exponent must be a tensor or a number, got {type(exponent).__name__}")
        return out

    def _binary_checked(self, op, other, name):
        out = self._binary(op, other)
        if out is NotImplemented:
            raise TypeError(f"{name}(): other must be a tensor or a number, got {type(other).__name__}")
        return out

    def maximum(self, other):
        """Elementwise maximum (NaN propagates); ties split the gradient evenly."""
        return self._binary_checked(E.MAXIMUM, other, "maximum")

    def minimum(self, other):
        """Elementwise minimum (NaN propagates); ties split the gradient evenly."""
        return self._binary_checked(E.MINIMUM, other, "minimum")

    def clamp(self, min=None, max=None):
        """Limits values to ``[min, max]``; the gradient passes where ``min <= x <= max``."""
        lo = None if min is None else _scalar_or_raise(min, "clamp(): min")
        hi = None if max is None else _scalar_or_raise(max, "clamp(): max")
        return Tensor._wrap(E.clamp(self._h, lo, hi))

    clip = clamp

    # ---- in place -------------------------------------------------------------------------
    # Each computes its result and writes it into this tensor's storage in the engine (see
    # _views.py), where its base and every view see it. When the op is recorded for autograd the
    # result is computed from a copy of this tensor, whose values backward may need. A leaf that
    # requires grad changes only under no_grad.

    def _set(self, value, op):
        if value is NotImplemented:
            raise TypeError(f"{op}: expected a tensor or a number")
        return _views.assign(self, value, op, same_kind=True, result=True)

    def _scaled(self, other, alpha, op):
        if alpha == 1:
            return other
        if isinstance(other, Tensor):
            return other * alpha
        return self._operand(other, op) * alpha

    def _binary_(self, op, other, name, alpha=1):
        """``self op= alpha * other``: one engine kernel over this tensor where autograd records
        nothing; else the result, recorded, written in. NotImplemented for another operand."""
        if not _views.recording(self, other):
            if isinstance(other, Tensor):
                operand = self._operand(other, name)  # held: a tensor made here has no other owner
                E.binary_inplace(op, self._h, operand._h, alpha, name)
                return self
            s = _scalar(other)
            if s is not None and alpha == 1:
                E.binary_scalar_inplace(op, self._h, *s, name)
                return self
        value = _views.source(self, other)._binary(op, self._scaled(other, alpha, name))
        if value is NotImplemented:
            return value
        return _views.assign(self, value, name, same_kind=True, result=True)

    def _arith_(self, op, other, name, alpha=1):
        result = self._binary_(op, other, name, alpha)
        if result is NotImplemented:
            raise TypeError(f"{name}: expected a tensor or a number, got {type(other).__name__}")
        return result

    def add_(self, other, *, alpha=1):
        """``self += alpha * other``."""
        return self._arith_(E.ADD, other, "add_", alpha)

    def sub_(self, other, *, alpha=1):
        return self._arith_(E.SUB, other, "sub_", alpha)

    def mul_(self, other):
        return self._arith_(E.MUL, other, "mul_")

    def div_(self, other):
        return self._arith_(E.DIV, other, "div_")

    def pow_(self, exponent):
        return self._arith_(E.POW, exponent, "pow_")

    def addcmul_(self, tensor1, tensor2, *, value=1):
        """``self += value * tensor1 * tensor2``."""
        return self._set(_views.source(self, tensor1, tensor2) + tensor1 * tensor2 * value, "addcmul_")

    def addcdiv_(self, tensor1, tensor2, *, value=1):
        """``self += value * tensor1 / tensor2``."""
        return self._set(_views.source(self, tensor1, tensor2) + tensor1 / tensor2 * value, "addcdiv_")

    def lerp_(self, end, weight):
        """``self += weight * (end - self)``."""
        src = _views.source(self, end, weight)
        return self._set(src + (end - src) * weight, "lerp_")

    def clamp_(self, min=None, max=None):
        if (min is not None or max is not None) and self.dtype is not bool_ and not _views.recording(self):
            # Unrecorded: the bounds go into this tensor's storage, one kernel each.
            if min is not None:
                E.binary_scalar_inplace(E.MAXIMUM, self._h, *_scalar_or_raise(min, "clamp_(): min"), "clamp_")
            if max is not None:
                E.binary_scalar_inplace(E.MINIMUM, self._h, *_scalar_or_raise(max, "clamp_(): max"), "clamp_")
            return self
        return self._set(_views.source(self).clamp(min, max), "clamp_")

    clip_ = clamp_

    def masked_fill_(self, mask, value):
        """Sets the elements where the bool `mask` (broadcast to this shape) is true to
        `value` (a number or a 0-d tensor)."""
        if not _views.recording(self, value):
            mask = _tensor_arg(mask, "masked_fill_: mask")
            if mask.dtype is not bool_:
                raise TypeError(f"masked_fill_: mask must be a bool tensor, got {mask.dtype}")
            if isinstance(value, Tensor) and value.ndim != 0:
                raise RuntimeError(f"masked_fill_: value must be a number or a 0-d tensor, got shape {tuple(value.shape)}")
            full = mask.expand(*self.shape) if tuple(mask.shape) != tuple(self.shape) else mask
            return _views.index_put(self, [_index_item(full, self.device, [])], self._operand(value, "masked_fill_"),
                                    False, "masked_fill_")
        return _views.assign(self, _views.source(self, value).masked_fill(mask, value), "masked_fill_", result=True)

    def fill_(self, value):
        """Sets every element to `value` (a number or a 0-d tensor), expanded views included."""
        if isinstance(value, Tensor):
            if value.ndim != 0:
                raise RuntimeError(f"fill_: expected a 0-d value tensor, got shape {tuple(value.shape)}")
            return _views.assign(self, value, "fill_", fill=True)
        return _views.fill(self, _scalar_or_raise(value, "fill_(): value"), "fill_")

    def zero_(self):
        return self.fill_(0)

    def copy_(self, src):
        """Copies `src` (broadcast to this shape, converted to this dtype and device) in."""
        return _views.assign(self, self._operand(src, "copy_"), "copy_")

    def normal_(self, mean=0.0, std=1.0):
        from ._creation import randn
        return _views.assign(self, randn(self.shape, dtype=self.dtype, device=self.device) * std + mean, "normal_")

    def uniform_(self, a=0.0, b=1.0):
        from ._creation import rand
        return _views.assign(self, rand(self.shape, dtype=self.dtype, device=self.device) * (b - a) + a, "uniform_")

    def _unary_(self, name):
        if not _views.recording(self):
            E.unary_inplace(E.UNARY[name], self._h, f"{name}_")
            return self
        return self._set(_views.source(self)._unary(name), f"{name}_")

    def neg_(self):
        return self._unary_("neg")

    def relu_(self):
        return self._unary_("relu")

    def exp_(self):
        return self._unary_("exp")

    def log_(self):
        return self._unary_("log")

    def sqrt_(self):
        return self._unary_("sqrt")

    def abs_(self):
        return self._unary_("abs")

    def tanh_(self):
        return self._unary_("tanh")

    def sigmoid_(self):
        return self._unary_("sigmoid")

    def sin_(self):
        return self._unary_("sin")

    def cos_(self):
        return self._unary_("cos")

    # ``x += y`` writes into x itself (its base and views see it), as in PyTorch.
    def __iadd__(self, o):
        return self._binary_(E.ADD, o, "+=")

    def __isub__(self, o):
        return self._binary_(E.SUB, o, "-=")

    def __imul__(self, o):
        return self._binary_(E.MUL, o, "*=")

    def __itruediv__(self, o):
        return self._binary_(E.DIV, o, "/=")

    def __ipow__(self, o):
        return self._binary_(E.POW, o, "**=")

    def __iand__(self, o):
        return self._binary_(E.BITWISE_AND, o, "&=")

    def __ior__(self, o):
        return self._binary_(E.BITWISE_OR, o, "|=")

    def __ixor__(self, o):
        return self._binary_(E.BITWISE_XOR, o, "^=")

    # ---- comparisons and selection -------------------------------------------------------

    def _compare(self, op, other, reflected=False):
        if isinstance(other, Tensor):
            a, b = (other, self) if reflected else (self, other)
            return Tensor._wrap(E.compare(op, a._h, b._h))
        s = _scalar(other)
        if s is None:
            return NotImplemented
        return Tensor._wrap(E.compare_scalar(op, self._h, s[0], s[1], s[2], reflected))

    def __eq__(self, o):
        return self._compare(E.EQ, o)

    def __ne__(self, o):
        return self._compare(E.NE, o)

    def __lt__(self, o):
        return self._compare(E.LT, o)

    def __le__(self, o):
        return self._compare(E.LE, o)

    def __gt__(self, o):
        return self._compare(E.GT, o)

    def __ge__(self, o):
        return self._compare(E.GE, o)

    # Tensors hash by identity, as in PyTorch, although == compares elementwise.
    __hash__ = object.__hash__

    eq, ne, lt, le, gt, ge = __eq__, __ne__, __lt__, __le__, __gt__, __ge__

    # & | ^ ~ are the engine's bitwise ops: logical on bool tensors, bitwise on integers.
    def _bitwise(self, op, other, reflected=False):
        if isinstance(other, float):
            return NotImplemented
        return self._binary(op, other, reflected)

    def __and__(self, o):
        return self._bitwise(E.BITWISE_AND, o)

    def __or__(self, o):
        return self._bitwise(E.BITWISE_OR, o)

    def __xor__(self, o):
        return self._bitwise(E.BITWISE_XOR, o)

    def __rand__(self, o):
        return self._bitwise(E.BITWISE_AND, o, True)

    def __ror__(self, o):
        return self._bitwise(E.BITWISE_OR, o, True)

    def __rxor__(self, o):
        return self._bitwise(E.BITWISE_XOR, o, True)

    def __invert__(self):
        return Tensor._wrap(E.bitwise_not(self._h))

    bitwise_and, bitwise_or, bitwise_xor, bitwise_not = __and__, __or__, __xor__, __invert__

    def logical_and(self, other):
        """Elementwise ``self != 0 and other != 0`` (a bool tensor)."""
        return self.bool() & _as_bool(other, self.device)

    def logical_or(self, other):
        return self.bool() | _as_bool(other, self.device)

    def logical_xor(self, other):
        return self.bool() ^ _as_bool(other, self.device)

    def logical_not(self):
        return ~self.bool()

    def where(self, condition, other):
        """``self`` where ``condition`` holds, ``other`` elsewhere."""
        from ._functions import where
        return where(condition, self, other)

    def masked_fill(self, mask, value):
        """``value`` where the bool ``mask`` is true, ``self`` elsewhere."""
        from ._functions import where
        return where(mask, value, self)

    # ---- reductions ----------------------------------------------------------------------

    @staticmethod
    def _dims(dim):
        if dim is None:
            return None
        if isinstance(dim, (tuple, list)):
            return _int_tuple(dim, "dim")
        return _int_tuple((dim,), "dim")

    def sum(self, dim=None, keepdim=False):
        return Tensor._wrap(E.reduce(E.SUM, self._h, self._dims(dim), keepdim))

    def mean(self, dim=None, keepdim=False):
        return Tensor._wrap(E.reduce(E.MEAN, self._h, self._dims(dim), keepdim))

    def amax(self, dim=None, keepdim=False):
        """The max over ``dim`` (all by default); ties share the gradient evenly."""
        return Tensor._wrap(E.reduce(E.AMAX, self._h, self._dims(dim), keepdim))

    def amin(self, dim=None, keepdim=False):
        return Tensor._wrap(E.reduce(E.AMIN, self._h, self._dims(dim), keepdim))

    def _extreme(self, dim, keepdim, largest, result):
        if dim is None:
            if keepdim:
                raise TypeError("max()/min() without dim does not take keepdim")
            return self.amax() if largest else self.amin()
        v, i = E.max_dim(self._h, as_index(dim), keepdim, largest)
        return result(Tensor._wrap(v), Tensor._wrap(i))

    def max(self, dim=None, keepdim=False):
        """The max of all elements, or ``(values, indices)`` along ``dim``."""
        return self._extreme(dim, keepdim, True, MaxResult)

    def min(self, dim=None, keepdim=False):
        """The min of all elements, or ``(values, indices)`` along ``dim``."""
        return self._extreme(dim, keepdim, False, MinResult)

    def argmax(self, dim=None, keepdim=False):
        """Index of the max along ``dim``, or into the flattened tensor."""
        return Tensor._wrap(E.argmax(self._h, None if dim is None else as_index(dim), keepdim, True))

    def argmin(self, dim=None, keepdim=False):
        return Tensor._wrap(E.argmax(self._h, None if dim is None else as_index(dim), keepdim, False))

    def _var(self, dim, unbiased, correction, keepdim, root):
        if correction is None:
            correction = 1 if unbiased is None or unbiased else 0
        elif unbiased is not None:
            raise TypeError("var()/std(): pass either unbiased or correction, not both")
        return Tensor._wrap(E.var(self._h, self._dims(dim), float(correction), keepdim, root))

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        """Variance over ``dim`` with Bessel's correction (``correction=1``) by default."""
        return self._var(dim, unbiased, correction, keepdim, False)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return self._var(dim, unbiased, correction, keepdim, True)

    def logsumexp(self, dim, keepdim=False):
        """``log(sum(exp(x)))`` over ``dim``, computed stably; float32 under autocast."""
        return Tensor._wrap(E.reduce(E.LOGSUMEXP, self._h, self._dims(dim), keepdim))

    def softmax(self, dim):
        return Tensor._wrap(E.softmax(self._h, as_index(dim), False))

    def log_softmax(self, dim):
        return Tensor._wrap(E.softmax(self._h, as_index(dim), True))

    # ---- shape ---------------------------------------------------------------------------

    def reshape(self, *shape):
        """A view when the layout allows one, else a copy (as in PyTorch)."""
        return Tensor._wrap(E.reshape(self._h, _shape_args(shape), False))

    def view(self, *shape):
        s = _shape_args(shape)
        return Tensor._wrap(E.reshape(self._h, s, True))

    def flatten(self, start_dim=0, end_dim=-1):
        start, end = as_index(start_dim), as_index(end_dim)
        if self.ndim == 0:  # checks the dims, then a 1-element view, as PyTorch's
            Tensor._wrap(E.flatten(self._h, start, end))
            return self.reshape(1)
        shape = self.shape
        s, e = self._wrap_dim(start), self._wrap_dim(end)
        if s > e:
            raise ValueError(f"flatten(): start_dim {start_dim} comes after end_dim {end_dim}")
        n = 1
        for d in shape[s:e + 1]:
            n *= d
        return self.reshape(shape[:s] + (n,) + shape[e + 1:])

    def squeeze(self, dim=None):
        dims = self._dims(dim)
        return Tensor._wrap(E.squeeze(self._h, dims))

    def unsqueeze(self, dim):
        d = as_index(dim)
        return Tensor._wrap(E.unsqueeze(self._h, d))

    def expand(self, *sizes):
        """A broadcast view at ``sizes`` (-1 keeps a dimension)."""
        s = _shape_args(sizes, "sizes")
        return Tensor._wrap(E.expand(self._h, s))

    def expand_as(self, other):
        return self.expand(other.shape)

    def tril(self, diagonal=0):
        from ._composed import tril
        return tril(self, diagonal)

    def triu(self, diagonal=0):
        from ._composed import triu
        return triu(self, diagonal)

    def sort(self, dim=-1, descending=False):
        from ._composed import sort
        return sort(self, dim, descending)

    def argsort(self, dim=-1, descending=False):
        from ._composed import argsort
        return argsort(self, dim, descending)

    def topk(self, k, dim=-1, largest=True, sorted=True):
        from ._composed import topk
        return topk(self, k, dim, largest, sorted)

    def multinomial(self, num_samples, replacement=False):
        from ._composed import multinomial
        return multinomial(self, num_samples, replacement)

    def view_as(self, other):
        return self.view(other.shape)

    def reshape_as(self, other):
        return self.reshape(other.shape)

    # ---- new tensors like this one (dtype and device), as PyTorch's new_* methods -------------

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        from ._creation import zeros
        return zeros(*size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        from ._creation import ones
        return ones(*size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        from ._creation import full, _leaf
        return _leaf(full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device), requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        return self.new_zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        from ._creation import tensor
        return tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)

    _TYPE_NAMES = {"float32": "FloatTensor", "float16": "HalfTensor", "bfloat16": "BFloat16Tensor",
                   "int32": "IntTensor", "int64": "LongTensor", "bool": "BoolTensor"}

    def type(self, dtype=None):
        """Without an argument, the type name (``"lucid.FloatTensor"``); with a dtype (or such a
        name, ``torch.`` accepted), this tensor converted to it."""
        if dtype is None:
            return f"lucid.{Tensor._TYPE_NAMES[self.dtype.name]}"
        if isinstance(dtype, str):
            short = dtype.split(".")[-1]
            names = {v: k for k, v in Tensor._TYPE_NAMES.items()}
            if short not in names:
                raise ValueError(f"type(): unknown tensor type {dtype!r}; known: {sorted(names)}")
            from . import _types
            dtype = getattr(_types, "bool_" if names[short] == "bool" else names[short])
        return self.to(dtype)

    def narrow(self, dim, start, length):
        d, s, n = as_index(dim), as_index(start), as_index(length)
        return Tensor._wrap(E.narrow(self._h, d, s, n))

    def select(self, dim, index):
        """The view of the slice at `index` along `dim`, which goes away (``x[:, i]`` for
        dim 1)."""
        d = self._wrap_dim(dim)
        return self[(slice(None),) * d + (as_index(index),)]

    def diagonal(self, offset=0, dim1=0, dim2=1):
        """The view of the diagonal of dimensions dim1 and dim2 (above it for a positive
        `offset`), which become a last dimension."""
        o, d1, d2 = as_index(offset), as_index(dim1), as_index(dim2)
        return Tensor._wrap(E.diagonal(self._h, o, d1, d2))

    def unflatten(self, dim, sizes):
        """The view splitting dimension `dim` into `sizes` (one of them may be -1)."""
        d = self._wrap_dim(dim)
        sizes = tuple(as_index(n) for n in sizes)
        if not sizes:
            raise ValueError("unflatten: sizes must not be empty")
        if sizes.count(-1) > 1:
            raise ValueError("unflatten: only one size can be -1")
        shape = self.shape
        known = 1
        for n in sizes:
            if n != -1:
                known *= n
        if -1 in sizes:
            if known == 0 or shape[d] % known:
                raise RuntimeError(f"unflatten: sizes {sizes} don't multiply up to the size of dimension {d} ({shape[d]})")
            sizes = tuple(shape[d] // known if n == -1 else n for n in sizes)
        elif known != shape[d]:
            raise RuntimeError(f"unflatten: sizes {sizes} don't multiply up to the size of dimension {d} ({shape[d]})")
        return self.view(*(shape[:d] + sizes + shape[d + 1:]))

    def split(self, split_size_or_sections, dim=0):
        """Views of consecutive pieces: of ``split_size`` entries each, or of the listed sizes."""
        dim = as_index(dim)
        if isinstance(split_size_or_sections, (list, tuple)):
            sizes = _int_tuple(split_size_or_sections, "split sizes")
            handles = E.split(self._h, E.SPLIT_SIZES, sizes, dim, len(sizes))
        else:
            size = as_index(split_size_or_sections)
            n = self.shape[self._wrap_dim(dim)] if self.ndim else 1
            handles = E.split(self._h, E.SPLIT_SIZE, (size,), dim, n)
        return tuple(Tensor._wrap(h) for h in handles)

    def chunk(self, chunks, dim=0):
        chunks, dim = as_index(chunks), as_index(dim)
        n = self.shape[self._wrap_dim(dim)] if self.ndim else 1
        capacity = min(max(chunks, 1), max(n, 1))  # never more pieces than entries
        return tuple(Tensor._wrap(h) for h in E.split(self._h, E.SPLIT_CHUNKS, (chunks,), dim, capacity))

    def transpose(self, dim0, dim1):
        d0, d1 = as_index(dim0), as_index(dim1)
        return Tensor._wrap(E.transpose(self._h, d0, d1))

    def permute(self, *dims):
        order = _shape_args(dims, "dims")
        return Tensor._wrap(E.permute(self._h, order))

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    def t(self):
        if self.ndim > 2:
            raise ValueError(f"t() expects a tensor with at most 2 dimensions, got {self.ndim}")
        return self.T

    # ---- indexing ------------------------------------------------------------------------

    def __getitem__(self, key):
        """Ints, slices, None and ``...`` give a view; integer and bool tensors (or lists) a copy."""
        items = key if isinstance(key, tuple) else (key,)
        encoded, keep = [], []
        for item in items:
            encoded.append(_index_item(item, self.device, keep))
        return Tensor._wrap(E.index(self._h, encoded))

    def __setitem__(self, key, value):
        """``x[key] = value``: any subscript ``x[key]`` takes, a value broadcast to its shape
        and converted to x's dtype, written into x's storage (its views see it)."""
        kt = type(key)
        items = key if kt is tuple else (key,)
        s = None if isinstance(value, Tensor) else _scalar(value)
        # One element from ints, where autograd records nothing: written with no view made.
        if s is not None and (kt is int or (kt is tuple and len(key) <= 4 and all(type(i) is int for i in key))):
            _, _, ndim, grad = self._info()
            if not grad and _views.rewrites:
                grad = self.requires_grad
            if len(items) == ndim and not (grad and E.is_grad_enabled()):
                E.set_element(self._h, items, *s)
                return
        encoded, keep = [], []
        for item in items:
            encoded.append(_index_item(item, self.device, keep))
        if any(e[0] == E.INDEX_TENSOR for e in encoded):
            self._index_put(encoded, value, False, "__setitem__")
            return
        _views.write_at(self, encoded, None if s is not None else self._operand(value, "__setitem__"), s,
                        "__setitem__")

    def _encoded_indices(self, indices, op, keep):
        """index_put's `indices` (a tuple) in the engine's encoding; tensors made here go in `keep`."""
        if not isinstance(indices, tuple):
            raise TypeError(f"{op}: indices must be a tuple, got {type(indices).__name__}")
        return [_index_item(item, self.device, keep) for item in indices]

    def index_put_(self, indices, values, accumulate=False, *, op="index_put_"):
        """Writes `values` at ``self[indices]`` (adds them there with `accumulate`, repeated
        positions adding up)."""
        keep = []
        encoded = self._encoded_indices(indices, op, keep)
        if not accumulate and not any(e[0] == E.INDEX_TENSOR for e in encoded):
            return _views.write_at(self, encoded, self._operand(values, op), None, op)
        return self._index_put(encoded, values, accumulate, op)

    def index_put(self, indices, values, accumulate=False):
        """A new tensor: this one with `values` written at ``self[indices]`` (added there with
        `accumulate`), as ``index_put_`` on a copy; gradients flow to both."""
        keep = []
        encoded = self._encoded_indices(indices, "index_put", keep)
        src = self._operand(values, "index_put")
        return Tensor._wrap(E.index_put(self._h, encoded, src._h, bool(accumulate)))

    def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
        """Writes `src` (a tensor, or a number: also given as `value`) at the positions
        `index` names along `dim`: ``self[i][index[i][j][k]][k] = src[i][j][k]`` for dim 1.
        `index` is int64 with self's number of dimensions and no larger than self in any
        dimension but `dim` (nor than `src` in any); ``reduce="add"`` adds instead (repeated
        positions add up). Which of several writes to one position wins is undefined, as in
        PyTorch."""
        if reduce not in (None, "add"):
            raise ValueError(f"scatter_: reduce must be None or 'add', got {reduce!r}")
        return self.index_put_(*self._scatter_args(dim, index, src, value, "scatter_"), accumulate=reduce == "add",
                               op="scatter_")

    def scatter(self, dim, index, src=None, *, value=None, reduce=None):
        """`scatter_` on a copy (differentiable in self and src)."""
        return self.clone().scatter_(dim, index, src, value=value, reduce=reduce)

    def scatter_add_(self, dim, index, src):
        """Adds `src` at the positions `index` names along `dim`, repeated positions adding up."""
        return self.index_put_(*self._scatter_args(dim, index, src, None, "scatter_add_"), accumulate=True,
                               op="scatter_add_")

    def scatter_add(self, dim, index, src):
        return self.clone().scatter_add_(dim, index, src)

    def _scatter_args(self, dim, index, src, value, op):
        """(indices, values) for index_put_ from scatter's arguments."""
        from ._creation import arange
        if src is None:
            src = value
        elif value is not None:
            raise TypeError(f"{op}: give src or value, not both")
        if src is None:
            raise TypeError(f"{op}: src (a tensor or a number) is required")
        index = _tensor_arg(index, "index")
        if index.dtype != int64:
            raise TypeError(f"{op}: index must be int64, got {index.dtype}")
        d = self._wrap_dim(dim)
        if index.ndim != self.ndim:
            raise ValueError(f"{op}: index has {index.ndim} dimensions, self has {self.ndim}")
        for k, n in enumerate(index.shape):
            if k != d and n > self.shape[k]:
                raise ValueError(f"{op}: index is larger than self in dimension {k} ({n} > {self.shape[k]})")
        if isinstance(src, Tensor):
            if src.ndim != self.ndim or any(n > m for n, m in zip(index.shape, src.shape)):
                raise ValueError(f"{op}: index of shape {tuple(index.shape)} is larger than src of shape "
                                 f"{tuple(src.shape)}")
            src = src[tuple(slice(0, n) for n in index.shape)]
        positions = tuple(index if k == d else
                          arange(n, device=self.device).view(*(n if j == k else 1 for j in range(self.ndim)))
                          for k, n in enumerate(index.shape))
        return positions, src

    def _index_put(self, encoded, values, accumulate, op):
        """Writes through tensor indices, in place in the engine: only the indexed elements
        are touched."""
        return _views.index_put(self, encoded, self._operand(values, op), accumulate, op)

    def _operand(self, value, op):
        """`value` as a tensor on this tensor's device (a number, list or 0-d tensor moves)."""
        if isinstance(value, Tensor):
            if value.device != self.device and value.ndim == 0:
                return value.to(self.device)
            return value
        from ._creation import tensor
        try:
            return tensor(value, device=self.device)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{op}: expected a tensor or a number, got {type(value).__name__}") from e

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def index_select(self, dim, index):
        return Tensor._wrap(E.index_select(self._h, as_index(dim), _tensor_arg(index, "index")._h))

    def gather(self, dim, index):
        return Tensor._wrap(E.gather(self._h, as_index(dim), _tensor_arg(index, "index")._h))

    def contiguous(self):
        if self.is_contiguous():
            return self
        return Tensor._wrap(E.contiguous(self._h))


def _as_bool(v, device):
    if isinstance(v, Tensor):
        return v.bool()
    from ._creation import tensor
    return tensor(bool(v), device=device)


def _tensor_arg(t, what):
    if not isinstance(t, Tensor):
        raise TypeError(f"{what} must be a lucid.Tensor, got {type(t).__name__}")
    return t


def _index_item(item, device, keep):
    """One subscript item in the engine's encoding; tensors made here are kept alive in ``keep``."""
    if item is None:
        return E.INDEX_NONE, (0, 0, 0), 0, 0
    if item is Ellipsis:
        return E.INDEX_ELLIPSIS, (0, 0, 0), 0, 0
    if isinstance(item, slice):
        parts, flags = [], 0
        for bit, v in enumerate((item.start, item.stop, item.step)):
            if v is None:
                parts.append(0)
                continue
            try:
                parts.append(operator.index(v))
            except TypeError:
                raise TypeError(f"slice indices must be integers or None, got {v!r}") from None
            flags |= 1 << bit
        return E.INDEX_SLICE, tuple(parts), flags, 0
    if isinstance(item, Tensor):
        if item.ndim == 0 and not item.dtype.is_floating_point and item.dtype.name != "bool":
            return E.INDEX_INT, (item.item(), 0, 0), 0, 0  # an int, as in PyTorch: the result is a view
        return E.INDEX_TENSOR, (0, 0, 0), 0, item._h
    if isinstance(item, (bool, np.bool_, list, np.ndarray)):
        from ._creation import tensor
        t = tensor(item, device=device)
        if t.dtype.is_floating_point:
            raise IndexError("tensors used as indices must be integer or bool tensors, got float values")
        keep.append(t)
        return E.INDEX_TENSOR, (0, 0, 0), 0, t._h
    try:
        return E.INDEX_INT, (operator.index(item), 0, 0), 0, 0
    except TypeError:
        raise IndexError(f"only integers, slices, None, ..., integer or bool tensors and lists are valid indices, "
                         f"got {type(item).__name__}") from None


def _result(record):
    """A plain lucid.Tensor for an op's record: Tensor._wrap's hot path."""
    t = _new_object(Tensor)
    t._h = record[_R_HANDLE]
    t._r = record
    t._meta = t._shape = None
    return t
