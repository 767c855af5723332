"""In-place ops (``add_``, ``exp_``, ``fill_``, ``copy_``, ``x += y`` …), as `InPlaceMethods`.

Each computes its result and writes it into the tensor's storage in the engine (see
writes.py), where its base and every view see it. Where autograd records nothing, one engine
kernel works over the tensor itself; when the op is recorded, the result is computed from a
copy of the tensor, whose values backward may need. A leaf that requires grad changes only
under no_grad.
"""

from __future__ import annotations

from .. import _C
from .._core import TensorBase, scalar, scalar_or_raise, tensor_arg
from .._types import bool_
from .composed import randint
from .creation import rand, randn
from . import elementwise as _elementwise
from .elementwise import UNARY, binary, clamp, masked_fill, unary_functions
from .writes import assign, encode, fill, index_put, operand, recording, source


def _set(t, value, op):
    if value is NotImplemented:
        raise TypeError(f"{op}: expected a tensor or a number")
    return assign(t, value, op, same_kind=True, result=True)


def _scaled(t, other, alpha, op):
    if alpha == 1:
        return other
    if isinstance(other, TensorBase):
        return other * alpha
    return operand(t, other, op) * alpha


def binary_(t, op, other, name, alpha=1):
    """``t op= alpha * other``: one engine kernel over `t` where autograd records nothing; else
    the result, recorded, written in. NotImplemented for another operand."""
    if not recording(t, other):
        if isinstance(other, TensorBase):
            held = operand(t, other, name)  # held: a tensor made here has no other owner
            _C.binary_inplace(op, t._h, held._h, alpha, name)
            return t
        s = scalar(other)
        if s is not None and alpha == 1:
            _C.binary_scalar_inplace(op, t._h, *s, name)
            return t
    value = binary(op, source(t, other), _scaled(t, other, alpha, name))
    if value is NotImplemented:
        return value
    return assign(t, value, name, same_kind=True, result=True)


def _arith_(t, op, other, name, alpha=1):
    out = binary_(t, op, other, name, alpha)
    if out is NotImplemented:
        raise TypeError(f"{name}: expected a tensor or a number, got {type(other).__name__}")
    return out


def _unary_inplace(name, code):
    op = f"{name}_"
    function = unary_functions[name]

    def fn(self):
        if not recording(self):
            _C.unary_inplace(code, self._h, op)
            return self
        return _set(self, function(source(self)), op)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{name}, in place."
    return fn


class InPlaceMethods:
    """Tensor's in-place methods and augmented assignments."""

    __slots__ = ()

    def add_(self, other, *, alpha=1):
        """``self += alpha * other``."""
        return _arith_(self, _C.ADD, other, "add_", alpha)

    def sub_(self, other, *, alpha=1):
        """``self -= alpha * other``."""
        return _arith_(self, _C.SUB, other, "sub_", alpha)

    def mul_(self, other):
        return _arith_(self, _C.MUL, other, "mul_")

    def div_(self, other):
        return _arith_(self, _C.DIV, other, "div_")

    def pow_(self, exponent):
        return _arith_(self, _C.POW, exponent, "pow_")

    def addcmul_(self, tensor1, tensor2, *, value=1):
        """``self += value * tensor1 * tensor2``."""
        return _set(self, source(self, tensor1, tensor2) + tensor1 * tensor2 * value, "addcmul_")

    def addcdiv_(self, tensor1, tensor2, *, value=1):
        """``self += value * tensor1 / tensor2``."""
        return _set(self, source(self, tensor1, tensor2) + tensor1 / tensor2 * value, "addcdiv_")

    def lerp_(self, end, weight):
        """``self += weight * (end - self)``."""
        src = source(self, end, weight)
        return _set(self, src + (end - src) * weight, "lerp_")

    def clamp_(self, min=None, max=None):
        """Limits values to ``[min, max]``, in place."""
        if (min is not None or max is not None) and self.dtype is not bool_ and not recording(self):
            # Unrecorded: the bounds go into this tensor's storage, one kernel each.
            if min is not None:
                _C.binary_scalar_inplace(_C.MAXIMUM, self._h, *scalar_or_raise(min, "clamp_(): min"), "clamp_")
            if max is not None:
                _C.binary_scalar_inplace(_C.MINIMUM, self._h, *scalar_or_raise(max, "clamp_(): max"), "clamp_")
            return self
        return _set(self, clamp(source(self), min, max), "clamp_")

    clip_ = clamp_

    def masked_fill_(self, mask, value):
        """Sets the elements where the bool `mask` (broadcast to this shape) is true to
        `value` (a number or a 0-d tensor)."""
        if not recording(self, value):
            mask = tensor_arg(mask, "masked_fill_", "mask")
            if mask.dtype is not bool_:
                raise TypeError(f"masked_fill_: mask must be a bool tensor, got {mask.dtype}")
            if isinstance(value, TensorBase) and value.ndim != 0:
                raise RuntimeError(
                    f"masked_fill_: value must be a number or a 0-d tensor, got shape {tuple(value.shape)}"
                )
            full = mask.expand(*self.shape) if tuple(mask.shape) != tuple(self.shape) else mask
            return index_put(
                self, encode((full,), self.device, []), operand(self, value, "masked_fill_"), False, "masked_fill_"
            )
        return assign(self, masked_fill(source(self, value), mask, value), "masked_fill_", result=True)

    def fill_(self, value):
        """Sets every element to `value` (a number or a 0-d tensor), expanded views included."""
        if isinstance(value, TensorBase):
            if value.ndim != 0:
                raise RuntimeError(f"fill_: expected a 0-d value tensor, got shape {tuple(value.shape)}")
            return assign(self, value, "fill_", fill=True)
        return fill(self, scalar_or_raise(value, "fill_(): value"), "fill_")

    def zero_(self):
        return self.fill_(0)

    def copy_(self, src):
        """Copies `src` (broadcast to this shape, converted to this dtype and device) in."""
        return assign(self, operand(self, src, "copy_"), "copy_")

    def normal_(self, mean=0.0, std=1.0):
        """Fills with normal samples of this mean and standard deviation."""
        return assign(self, randn(self.shape, dtype=self.dtype, device=self.device) * std + mean, "normal_")

    def random_(self, *bounds):
        """Fills with integers drawn uniformly from ``[from, to)`` (``random_(to)``,
        ``random_(from, to)``), from lucid's generator."""
        if len(bounds) == 1:
            low, high = 0, bounds[0]
        elif len(bounds) == 2:
            low, high = bounds
        else:
            raise TypeError("random_() takes to, or from and to")
        return assign(self, randint(low, high, self.shape, device=self.device), "random_")

    def uniform_(self, a=0.0, b=1.0):
        """Fills with uniform samples from ``[a, b)``."""
        return assign(self, rand(self.shape, dtype=self.dtype, device=self.device) * (b - a) + a, "uniform_")

    # ``x += y`` writes into x itself (its base and views see it), as in PyTorch.
    def __iadd__(self, o):
        return binary_(self, _C.ADD, o, "+=")

    def __isub__(self, o):
        return binary_(self, _C.SUB, o, "-=")

    def __imul__(self, o):
        return binary_(self, _C.MUL, o, "*=")

    def __itruediv__(self, o):
        return binary_(self, _C.DIV, o, "/=")

    def __ipow__(self, o):
        return binary_(self, _C.POW, o, "**=")

    def __iand__(self, o):
        return binary_(self, _C.BITWISE_AND, o, "&=")

    def __ior__(self, o):
        return binary_(self, _C.BITWISE_OR, o, "|=")

    def __ixor__(self, o):
        return binary_(self, _C.BITWISE_XOR, o, "^=")


def _function_inplace(name):
    """The in-place form of the elementwise function `name`: its result, written into the tensor
    (whose dtype it must fit)."""
    op = f"{name}_"
    function = getattr(_elementwise, name)

    def fn(self, *args, **kwargs):
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, TensorBase)]
        return _set(self, function(source(self, *tensors), *args, **kwargs), op)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{name}, in place."
    return fn


# PyTorch's in-place forms of the elementwise math functions.
for _name in (
    "atan2",
    "arctan2",
    "copysign",
    "xlogy",
    "hypot",
    "nextafter",
    "igamma",
    "igammac",
    "fmod",
    "remainder",
    "floor_divide",
    "fmax",
    "fmin",
    "gcd",
    "lcm",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "heaviside",
    "true_divide",
    "ldexp",
    "sgn",
    "frac",
    "reciprocal",
    "square",
    "deg2rad",
    "rad2deg",
    "logit",
    "nan_to_num",
    "mvlgamma",
    "clamp_min",
    "clamp_max",
):
    setattr(InPlaceMethods, f"{_name}_", _function_inplace(_name))


def _polygamma_(self, n):
    """polygamma(n, self), in place."""
    return _set(self, _elementwise.polygamma(n, source(self)), "polygamma_")


def _round_(self, *, decimals=0):
    """round, in place."""
    if decimals == 0 and not recording(self):
        _C.unary_inplace(UNARY["round"], self._h, "round_")
        return self
    return _set(self, _elementwise.round(source(self), decimals=decimals), "round_")


def _div_(self, other, *, rounding_mode=None):
    """div, in place."""
    if rounding_mode is None:
        return _arith_(self, _C.DIV, other, "div_")
    return _set(self, _elementwise.div(source(self, other), other, rounding_mode=rounding_mode), "div_")


def _float_power_(self, exponent):
    """float_power, in place: the tensor must be float64, the dtype of the result."""
    if self.dtype.name != "float64":
        raise RuntimeError(f"float_power_: the base has dtype {self.dtype} but the result requires float64")
    return _set(self, _elementwise.float_power(source(self, exponent), exponent), "float_power_")


InPlaceMethods.polygamma_, InPlaceMethods.round_, InPlaceMethods.div_ = _polygamma_, _round_, _div_
InPlaceMethods.float_power_ = _float_power_


def _shift(op, name):
    def fn(self, o):
        if isinstance(o, float):
            raise TypeError(f"{name}: the shift must be an integer or an integer tensor")
        return binary_(self, op, o, name)

    return fn


def _dividing(op, name):
    def fn(self, o):
        if not self.dtype.is_floating_point and not getattr(o, "is_floating_point", lambda: isinstance(o, float))():
            if bool((o == 0).any()) if isinstance(o, TensorBase) else o == 0:
                raise RuntimeError(f"{name}: ZeroDivisionError: integer division by zero")
        return binary_(self, op, o, name)

    return fn


InPlaceMethods.__imod__ = _dividing(_C.REMAINDER, "%=")
InPlaceMethods.__ifloordiv__ = _dividing(_C.FLOOR_DIVIDE, "//=")
InPlaceMethods.__ilshift__ = _shift(_C.LEFT_SHIFT, "<<=")
InPlaceMethods.__irshift__ = _shift(_C.RIGHT_SHIFT, ">>=")

for _name, _code in UNARY.items():
    if _name in unary_functions and _name != "round":
        setattr(InPlaceMethods, f"{_name}_", _unary_inplace(_name, _code))
