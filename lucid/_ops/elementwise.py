"""Elementwise ops: arithmetic, the unary ops, comparisons, bitwise and logical ops, selection,
and the matrix product; with `ElementwiseMethods`, the operators and methods they give Tensor.

The unary ops are the engine's (enum lucid_unary_op in include/lucid.h): each one's function,
method and documentation come from its line there.
"""

from __future__ import annotations

from .. import _C, _core
from .._core import TensorBase, operand, result, scalar, scalar_or_raise, tensor_arg
from .._types import bool_
from .creation import tensor
from .writes import returned

# The engine calls of the hottest operators, bound once.
_binary_op, _binary_scalar_op, _unary_op, _matmul_op = _C.binary, _C.binary_scalar, _C.unary, _C.matmul
_ADD, _SUB, _MUL, _DIV = _C.ADD, _C.SUB, _C.MUL, _C.DIV

UNARY = _C.codes("lucid_unary_op")

# What autocast does to each op, as the engine's op table says (for the documentation).
_POLICIES = {
    _C.POLICY_LOWER_PRECISION: "; lower precision under autocast",
    _C.POLICY_FLOAT32: "; float32 under autocast",
    _C.POLICY_PROMOTE: "; the widest input dtype under autocast",
}
_AUTOCAST = {name: _POLICIES.get(policy, "") for name, policy, _ in _C.op_table()}


def binary(op, a, b, reflected=False):
    """``a op b`` (``b op a`` when reflected) for a tensor `a` and a tensor or number `b`;
    NotImplemented for anything else."""
    if isinstance(b, TensorBase):
        x, y = (b, a) if reflected else (a, b)
        return result(_binary_op(op, x._h, y._h))
    s = scalar(b)
    if s is None:
        return NotImplemented
    return result(_binary_scalar_op(op, a._h, s[0], s[1], s[2], reflected))


def _arithmetic(op, name, input, other):
    if isinstance(input, TensorBase):
        r = binary(op, input, other)
    elif isinstance(other, TensorBase):
        r = binary(op, other, input, True)
    else:
        r = NotImplemented
    if r is NotImplemented:
        raise TypeError(f"{name}(): expected tensors or numbers, got {type(input).__name__} and {type(other).__name__}")
    return r


def add(input, other, *, alpha=1, out=None):
    """``input + alpha * other``, with broadcasting."""
    return returned(_arithmetic(_ADD, "add", input, other if alpha == 1 else other * alpha), out, "add")


def sub(input, other, *, alpha=1, out=None):
    """``input - alpha * other``, with broadcasting."""
    return returned(_arithmetic(_SUB, "sub", input, other if alpha == 1 else other * alpha), out, "sub")


def mul(input, other, *, out=None):
    """``input * other``, with broadcasting."""
    return returned(_arithmetic(_MUL, "mul", input, other), out, "mul")


def pow(input, exponent, *, out=None):
    """``input ** exponent`` (either may be a number), elementwise; float32 under autocast."""
    return returned(_arithmetic(_C.POW, "pow", input, exponent), out, "pow")


def maximum(input, other, *, out=None):
    """Elementwise maximum (NaN propagates); ties split the gradient evenly."""
    return returned(_arithmetic(_C.MAXIMUM, "maximum", tensor_arg(input, "maximum"), other), out, "maximum")


def minimum(input, other, *, out=None):
    """Elementwise minimum (NaN propagates); ties split the gradient evenly."""
    return returned(_arithmetic(_C.MINIMUM, "minimum", tensor_arg(input, "minimum"), other), out, "minimum")


def _deferred_product(input, other, fn):
    """``input @ other`` for a first operand that is not a Tensor but multiplies (a sparse
    matrix), else TypeError."""
    try:
        return input @ other
    except TypeError:
        raise TypeError(f"{fn}(): input must be a lucid.Tensor, got {type(input).__name__}") from None


def matmul(input, other, *, out=None):
    """The matrix product with PyTorch's rules for 1-D and batched operands; lower precision
    under autocast. A sparse first operand gives ``spmm``."""
    if not isinstance(input, TensorBase):
        return returned(_deferred_product(input, other, "matmul"), out, "matmul")
    tensor_arg(other, "matmul", "other")
    return returned(result(_matmul_op(input._h, other._h)), out, "matmul")


def mm(input, mat2, *, out=None):
    """The product of two matrices (2-D tensors only, as torch.mm); a sparse first operand gives
    ``spmm``."""
    if not isinstance(input, TensorBase):
        return returned(_deferred_product(input, mat2, "mm"), out, "mm")
    for t, what in ((input, "input"), (mat2, "mat2")):
        if tensor_arg(t, "mm", what).ndim != 2:
            raise RuntimeError(f"mm(): {what} must be a matrix, got shape {tuple(t.shape)}")
    return matmul(input, mat2, out=out)


def dot(input, other, *, out=None):
    """The dot product of two 1-D tensors of one size (as torch.dot)."""
    for t, what in ((input, "input"), (other, "other")):
        if tensor_arg(t, "dot", what).ndim != 1:
            raise RuntimeError(f"dot(): {what} must be 1-D, got shape {tuple(t.shape)}")
    if input.shape != other.shape:
        raise RuntimeError(f"dot(): inputs of sizes {input.shape[0]} and {other.shape[0]}")
    return matmul(input, other, out=out)


def _dims(fn, *checks):
    for t, what, nd in checks:
        if tensor_arg(t, fn, what).ndim != nd:
            raise RuntimeError(f"{fn}(): {what} must be {nd}-D, got shape {tuple(t.shape)}")


def _scaled_sum(fn, input, product, beta, alpha):
    """``beta * input + alpha * product``, `input` broadcast to the product's shape; with
    ``beta == 0`` `input` is not read (NaN in it does not propagate), as in PyTorch."""
    tensor_arg(input, fn, "input")
    try:
        expanded = input.expand(*product.shape)
    except (RuntimeError, ValueError) as e:
        raise RuntimeError(
            f"{fn}(): input of shape {tuple(input.shape)} does not broadcast to the product's shape "
            f"{tuple(product.shape)}"
        ) from e
    scaled = product if alpha == 1 else product * alpha
    if beta == 0:
        return scaled
    return scaled + (expanded if beta == 1 else expanded * beta)


def bmm(input, mat2, *, out=None):
    """Batched matrix product of ``[b, n, m]`` and ``[b, m, p]`` tensors: ``[b, n, p]``."""
    _dims("bmm", (input, "input", 3), (mat2, "mat2", 3))
    if input.shape[0] != mat2.shape[0] or input.shape[2] != mat2.shape[1]:
        raise RuntimeError(f"bmm(): shapes {tuple(input.shape)} and {tuple(mat2.shape)} cannot be multiplied")
    return matmul(input, mat2, out=out)


def mv(input, vec, *, out=None):
    """The product of a matrix ``[n, m]`` and a vector ``[m]``: ``[n]``."""
    _dims("mv", (input, "input", 2), (vec, "vec", 1))
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"mv(): shapes {tuple(input.shape)} and {tuple(vec.shape)} cannot be multiplied")
    return matmul(input, vec, out=out)


def vdot(input, other, *, out=None):
    """The dot product of two 1-D tensors (the first conjugated, which for real tensors is
    :func:`dot`)."""
    _dims("vdot", (input, "input", 1), (other, "other", 1))
    if input.shape != other.shape:
        raise RuntimeError(f"vdot(): inputs of sizes {input.shape[0]} and {other.shape[0]}")
    return matmul(input, other, out=out)


def inner(input, other, *, out=None):
    """The sum of products over the last dimension of both inputs (a product with a number for
    a 0-d input): shape ``input.shape[:-1] + other.shape[:-1]``."""
    tensor_arg(input, "inner", "input")
    tensor_arg(other, "inner", "other")
    if input.ndim == 0 or other.ndim == 0:
        return returned(input * other, out, "inner")
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(
            f"inner(): the last dimensions of shapes {tuple(input.shape)} and {tuple(other.shape)} differ"
        )
    a = input.reshape(-1, input.shape[-1])
    b = other.reshape(-1, other.shape[-1])
    r = matmul(a, b.mT).reshape(*input.shape[:-1], *other.shape[:-1])
    return returned(r, out, "inner")


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat1 @ mat2)`` for matrices; `input` broadcasts."""
    tensor_arg(input, "addmm")
    r = _scaled_sum("addmm", input, mm(mat1, mat2), beta, alpha)
    return returned(r, out, "addmm")


def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat @ vec)``; `input` broadcasts."""
    tensor_arg(input, "addmv")
    return returned(_scaled_sum("addmv", input, mv(mat, vec), beta, alpha), out, "addmv")


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * outer(vec1, vec2)``; `input` broadcasts."""
    tensor_arg(input, "addr")
    return returned(_scaled_sum("addr", input, outer(vec1, vec2), beta, alpha), out, "addr")


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * bmm(batch1, batch2)``; `input` broadcasts."""
    tensor_arg(input, "baddbmm")
    return returned(_scaled_sum("baddbmm", input, bmm(batch1, batch2), beta, alpha), out, "baddbmm")


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * sum_b batch1[b] @ batch2[b]``; `input` broadcasts."""
    tensor_arg(input, "addbmm")
    _dims("addbmm", (batch1, "batch1", 3), (batch2, "batch2", 3))
    b, n, m = batch1.shape
    if batch2.shape[0] != b or batch2.shape[1] != m:
        raise RuntimeError(f"addbmm(): shapes {tuple(batch1.shape)} and {tuple(batch2.shape)} cannot be multiplied")
    # The sum over the batch of products is one product over the batch and inner dimensions.
    product = matmul(batch1.permute(1, 0, 2).reshape(n, b * m), batch2.reshape(b * m, batch2.shape[2]))
    return returned(_scaled_sum("addbmm", input, product, beta, alpha), out, "addbmm")


def _unary_function(name, code):
    # A special function's messages name it as Python spells it: special.i0e.
    shown = "special." + name[len("special_") :] if name.startswith("special_") else name

    def fn(input, *, out=None):
        return returned(result(_unary_op(code, tensor_arg(input, shown)._h)), out, shown)

    doc = _C._abi.DOCS[f"LUCID_{name.upper()}"]
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{doc}, elementwise{_AUTOCAST.get(shown.split('.')[-1], '')}."
    return fn


# lucid.special's functions (``special_`` in the header) live in that namespace only.
_SPECIAL = "special_"
unary_functions = {name: _unary_function(name, code) for name, code in UNARY.items() if not name.startswith(_SPECIAL)}
special_functions = {
    name[len(_SPECIAL) :]: _unary_function(name, code) for name, code in UNARY.items() if name.startswith(_SPECIAL)
}
for _name, _fn in special_functions.items():
    _fn.__name__ = _fn.__qualname__ = _name
globals().update(unary_functions)
# NumPy's names for the inverse trigonometric functions, which PyTorch takes too.
arcsin, arccos, arctan = unary_functions["asin"], unary_functions["acos"], unary_functions["atan"]
arcsinh, arccosh, arctanh = unary_functions["asinh"], unary_functions["acosh"], unary_functions["atanh"]
fix = unary_functions["trunc"]  # NumPy's name for trunc, which PyTorch takes too


# ---- comparisons, bitwise and logical ops ------------------------------------------------------


def compare(op, a, b, reflected=False):
    """``a op b`` (bool), for a tensor `a` and a tensor or number `b`; NotImplemented otherwise."""
    if isinstance(b, TensorBase):
        x, y = (b, a) if reflected else (a, b)
        return result(_C.compare(op, x._h, y._h))
    s = scalar(b)
    if s is None:
        return NotImplemented
    return result(_C.compare_scalar(op, a._h, s[0], s[1], s[2], reflected))


def _comparison(op, name, symbol):
    def fn(input, other, *, out=None):
        r = compare(op, tensor_arg(input, name), other)
        if r is NotImplemented:
            raise TypeError(f"{name}(): other must be a lucid.Tensor or a number, got {type(other).__name__}")
        return returned(r, out, name)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``input {symbol} other``, elementwise (bool)."
    return fn


eq, ne = _comparison(_C.EQ, "eq", "=="), _comparison(_C.NE, "ne", "!=")
lt, le = _comparison(_C.LT, "lt", "<"), _comparison(_C.LE, "le", "<=")
gt, ge = _comparison(_C.GT, "gt", ">"), _comparison(_C.GE, "ge", ">=")


def bitwise(op, a, b, reflected=False):
    """The bitwise op of a tensor and a tensor or an integer (or bool); NotImplemented otherwise."""
    if isinstance(b, float):
        return NotImplemented
    return binary(op, a, b, reflected)


def _bitwise_function(op, name, symbol):
    def fn(input, other, *, out=None):
        r = bitwise(op, tensor_arg(input, name), other)
        if r is NotImplemented:
            raise TypeError(f"{name}(): other must be an integer or bool tensor or number, got {type(other).__name__}")
        return returned(r, out, name)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``input {symbol} other``: logical for bool tensors, bitwise for integers."
    return fn


bitwise_and = _bitwise_function(_C.BITWISE_AND, "bitwise_and", "&")
bitwise_or = _bitwise_function(_C.BITWISE_OR, "bitwise_or", "|")
bitwise_xor = _bitwise_function(_C.BITWISE_XOR, "bitwise_xor", "^")


def bitwise_not(input, *, out=None):
    """``~input``: logical for bool tensors, bitwise for integers."""
    return returned(result(_C.bitwise_not(tensor_arg(input, "bitwise_not")._h)), out, "bitwise_not")


def _truth(v, device):
    if isinstance(v, TensorBase):
        return v.to(bool_)
    return tensor(bool(v), device=device)


def logical_and(input, other, *, out=None):
    """Elementwise and of the inputs' truth values (non-zero is true); bool."""
    t = tensor_arg(input, "logical_and")
    return returned(binary(_C.BITWISE_AND, t.to(bool_), _truth(other, t.device)), out, "logical_and")


def logical_or(input, other, *, out=None):
    """Elementwise or of the inputs' truth values; bool."""
    t = tensor_arg(input, "logical_or")
    return returned(binary(_C.BITWISE_OR, t.to(bool_), _truth(other, t.device)), out, "logical_or")


def logical_xor(input, other, *, out=None):
    """Elementwise xor of the inputs' truth values; bool."""
    t = tensor_arg(input, "logical_xor")
    return returned(binary(_C.BITWISE_XOR, t.to(bool_), _truth(other, t.device)), out, "logical_xor")


def logical_not(input, *, out=None):
    """Elementwise not of the input's truth values; bool."""
    return returned(result(_C.bitwise_not(tensor_arg(input, "logical_not").to(bool_))), out, "logical_not")


def isnan(input):
    """Where `input` is NaN (bool)."""
    t = tensor_arg(input, "isnan")
    return compare(_C.NE, t, t)


def isinf(input):
    """Where `input` is +inf or -inf (bool)."""
    t = tensor_arg(input, "isinf")
    if not t.dtype.is_floating_point:
        return compare(_C.NE, t, t)  # all False
    return compare(_C.EQ, result(_unary_op(UNARY["abs"], t._h)), float("inf"))


def isfinite(input):
    """Where `input` is neither infinite nor NaN (bool)."""
    return logical_not(logical_or(isnan(input), isinf(input)))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Where ``|input - other| <= atol + rtol * |other|`` (bool), as torch.isclose; infinities
    are close to themselves, NaNs only with `equal_nan`."""
    a, b = tensor_arg(input, "isclose"), tensor_arg(other, "isclose", "other")
    close = logical_or(eq(a, b), le((a - b).abs(), atol + rtol * b.abs()))
    return logical_or(close, logical_and(isnan(a), isnan(b))) if equal_nan else close


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """Whether every element of `input` is close to `other`'s (see :func:`isclose`)."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input, other) -> bool:
    """Whether the two tensors have one shape and equal elements."""
    a, b = tensor_arg(input, "equal"), tensor_arg(other, "equal", "other")
    return a.shape == b.shape and bool(eq(a, b).all())


def outer(input, vec2, *, out=None):
    """The outer product of two 1-D tensors: ``[n, m]`` with ``input[i] * vec2[j]``."""
    for t, what in ((input, "input"), (vec2, "vec2")):
        if tensor_arg(t, "outer", what).ndim != 1:
            raise RuntimeError(f"outer(): {what} must be 1-D, got shape {tuple(t.shape)}")
    return returned(input.reshape(-1, 1) * vec2.reshape(1, -1), out, "outer")


ger = outer


# ---- selection ---------------------------------------------------------------------------------


def where(condition, input, other, *, out=None):
    """``input`` where the bool ``condition`` holds, ``other`` elsewhere (either may be a
    number), with broadcasting; gradients flow to the branch chosen."""
    tensor_arg(condition, "where", "condition")
    a, b = operand(input, "where", "input"), operand(other, "where", "other")
    ah, (av, ai, ak) = (a, (0.0, 0, 0)) if isinstance(a, int) else (0, a)
    bh, (bv, bi, bk) = (b, (0.0, 0, 0)) if isinstance(b, int) else (0, b)
    return returned(result(_C.where(condition._h, ah, bh, av, ai, ak, bv, bi, bk)), out, "where")


def masked_fill(input, mask, value):
    """``value`` where the bool ``mask`` is true, ``input`` elsewhere."""
    return where(mask, value, input)


# ---- elementwise math ----------------------------------------------------------------------------

_PI = 3.141592653589793


def _check_divisor(r, other, name):
    """`r`, the result of an integer division by `other`, unless `other` holds a 0."""
    if r is not NotImplemented and not r.dtype.is_floating_point:
        zero = bool((other == 0).any()) if isinstance(other, TensorBase) else other == 0
        if zero:
            raise RuntimeError(f"{name}: ZeroDivisionError: integer division by zero")
    return r


def _math_binary(op, name, input, other, out, *, divides=False, input_number=True):
    """An engine binary op of a tensor and a tensor or number (either first), with `out=`. The
    integer divisions refuse a divisor of 0, as PyTorch does."""
    if not isinstance(input, TensorBase) and not (input_number and isinstance(other, TensorBase)):
        tensor_arg(input, name)
    r = _arithmetic(op, name, input, other)
    if divides:
        _check_divisor(r, other, f"{name}()")
    return returned(r, out, name)


def _binary_function(op, name, doc, **kw):
    def fn(input, other, *, out=None):
        return _math_binary(op, name, input, other, out, **kw)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


atan2 = _binary_function(
    _C.ATAN2,
    "atan2",
    "The angle of the point ``(other, input)``: arctan(input / other) in the "
    "right quadrant, elementwise (integers promote to float32; float32 under autocast).",
    input_number=False,
)
arctan2 = atan2
copysign = _binary_function(
    _C.COPYSIGN,
    "copysign",
    "The magnitude of `input` with the sign of `other` (-0.0 "
    "counts as negative), elementwise; integers promote to float32.",
)
xlogy = _binary_function(
    _C.XLOGY,
    "xlogy",
    "``input * log(other)``, 0 where `input` is 0 (unless `other` is NaN); integers promote to float32.",
)
hypot = _binary_function(
    _C.HYPOT,
    "hypot",
    "``sqrt(input**2 + other**2)`` without overflow, elementwise (floating tensors only).",
    input_number=False,
)
nextafter = _binary_function(
    _C.NEXTAFTER,
    "nextafter",
    "The next value of `input`'s dtype after `input` towards `other`, elementwise (floating tensors only).",
    input_number=False,
)
logaddexp = _binary_function(
    _C.LOGADDEXP,
    "logaddexp",
    "``log(exp(input) + exp(other))`` without overflow, elementwise (floating tensors only).",
    input_number=False,
)
logaddexp2 = _binary_function(
    _C.LOGADDEXP2,
    "logaddexp2",
    "``log2(2**input + 2**other)`` without overflow, elementwise (floating tensors only).",
    input_number=False,
)
igamma = _binary_function(
    _C.IGAMMA,
    "igamma",
    "The regularized lower incomplete gamma function P(input, other) "
    "(floating tensors only; the gradient is for `other`).",
    input_number=False,
)
igammac = _binary_function(
    _C.IGAMMAC,
    "igammac",
    "The regularized upper incomplete gamma function Q(input, other) "
    "= 1 - P (floating tensors only; the gradient is for `other`).",
    input_number=False,
)
fmod = _binary_function(
    _C.FMOD,
    "fmod",
    "The remainder of ``input / other`` with the sign of `input` (C's fmod), elementwise; integers by 0 raise.",
    divides=True,
    input_number=False,
)
remainder = _binary_function(
    _C.REMAINDER,
    "remainder",
    "``input - floor(input / other) * other``: the remainder "
    "with the sign of `other` (Python's %), elementwise; integers by 0 raise.",
    divides=True,
)
floor_divide = _binary_function(
    _C.FLOOR_DIVIDE,
    "floor_divide",
    "``floor(input / other)`` (Python's //), elementwise; integers stay integers, and by 0 raise.",
    divides=True,
)
fmax = _binary_function(
    _C.FMAX, "fmax", "Elementwise maximum that ignores NaN (NaN only where both are).", input_number=False
)
fmin = _binary_function(
    _C.FMIN, "fmin", "Elementwise minimum that ignores NaN (NaN only where both are).", input_number=False
)
gcd = _binary_function(
    _C.GCD, "gcd", "The greatest common divisor, elementwise (integer tensors only).", input_number=False
)
lcm = _binary_function(
    _C.LCM, "lcm", "The least common multiple, elementwise (integer tensors only).", input_number=False
)
bitwise_left_shift = _binary_function(
    _C.LEFT_SHIFT,
    "bitwise_left_shift",
    "``input << other`` (integer tensors only; shifts by the width or more give 0).",
)
bitwise_right_shift = _binary_function(
    _C.RIGHT_SHIFT,
    "bitwise_right_shift",
    "``input >> other``, arithmetic (integer tensors only; shifts by the width or more give the sign).",
)


def heaviside(input, values, *, out=None):
    """0 where `input` is negative, `values` where it is 0, 1 where it is positive."""
    tensor_arg(input, "heaviside")
    tensor_arg(values, "heaviside", "values")
    if input.dtype != values.dtype:
        raise RuntimeError(f"heaviside(): input and values must have one dtype, got {input.dtype} and {values.dtype}")
    return _math_binary(_C.HEAVISIDE, "heaviside", input, values, out)


def true_divide(input, other, *, out=None):
    """``input / other`` (as :func:`div`)."""
    return div(input, other, out=out)


def rsub(input, other, *, alpha=1):
    """``other - alpha * input``."""
    t = tensor_arg(input, "rsub")
    r = binary(_SUB, t if alpha == 1 else t * alpha, other, True)
    if r is NotImplemented:
        raise TypeError(f"rsub(): other must be a lucid.Tensor or a number, got {type(other).__name__}")
    return r


def float_power(input, exponent, *, out=None):
    """``input ** exponent`` in float64, elementwise."""
    from .._types import float64

    a = input.to(float64) if isinstance(input, TensorBase) else input
    b = exponent.to(float64) if isinstance(exponent, TensorBase) else exponent
    if not isinstance(a, TensorBase):
        tensor_arg(b, "float_power", "exponent")
        a = tensor(float(a), dtype=float64, device=b.device)
    return returned(pow(a, b), out, "float_power")


def ldexp(input, other, *, out=None):
    """``input * 2**other``, elementwise."""
    tensor_arg(input, "ldexp")
    tensor_arg(other, "ldexp", "other")
    return returned(input * unary_functions["exp2"](other), out, "ldexp")


def frexp(input, *, out=None):
    """The mantissa (magnitude in [0.5, 1), or 0) and int32 exponent of each element, with
    ``input = mantissa * 2**exponent``; floating tensors only."""
    from .._types import int32

    t = tensor_arg(input, "frexp")
    if not t.dtype.is_floating_point:
        raise TypeError(f"frexp(): only floating-point tensors are supported, got {t.dtype}")
    a = t.abs()
    finite = logical_and(isfinite(t), ne(t, 0))
    safe = where(finite, a, 1.0)
    # The exponent is a step function of the input: no gradient flows through it.
    e = (unary_functions["floor"](unary_functions["log2"](safe)) + 1).detach()
    m = t / unary_functions["exp2"](e)
    # log2 rounds: one step of correction puts the magnitude in [0.5, 1).
    low, high = lt(m.abs(), 0.5), ge(m.abs(), 1.0)
    m = where(low, m * 2, where(high, m / 2, m))
    e = where(low, e - 1, where(high, e + 1, e))
    m = where(finite, m, t)
    e = where(finite, e, 0).to(int32)
    if out is not None:
        returned(m, out[0], "frexp")
        returned(e, out[1], "frexp")
        return out
    return m, e


def div(input, other, *, rounding_mode=None, out=None):
    """``input / other`` with broadcasting: true division (integers divide to float32) by
    default, ``rounding_mode="trunc"`` rounds toward zero and ``"floor"`` down (integers then
    stay integers)."""
    if rounding_mode is None:
        return returned(_arithmetic(_DIV, "div", input, other), out, "div")
    if rounding_mode == "trunc":
        return _math_binary(_C.TRUNC_DIVIDE, "div", input, other, out, divides=True)
    if rounding_mode == "floor":
        return _math_binary(_C.FLOOR_DIVIDE, "div", input, other, out, divides=True)
    raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found {rounding_mode!r}")


divide = div


def round(input, *, decimals=0, out=None):
    """The nearest integer, halves to even, elementwise; with `decimals`, to that many decimal
    places (``round(input * 10**decimals) / 10**decimals``). Integers are unchanged."""
    t = tensor_arg(input, "round")
    r = result(_unary_op(UNARY["round"], t._h))
    if decimals != 0 and t.dtype.is_floating_point:
        scale = 10.0 ** (decimals if decimals > 0 else -decimals)
        scaled = t * scale if decimals > 0 else t / scale  # (held: the call borrows its handle)
        rounded = result(_unary_op(UNARY["round"], scaled._h))
        r = rounded / scale if decimals > 0 else rounded * scale
    return returned(r, out, "round")


def sign(input, *, out=None):
    """-1, 0 or 1 by the sign of each element (NaN stays NaN; integers and bool keep their
    dtype)."""
    t = tensor_arg(input, "sign")
    r = t.clone() if t.dtype == bool_ else result(_unary_op(UNARY["sign"], t._h))
    return returned(r, out, "sign")


def sgn(input, *, out=None):
    """The sign of each element (:func:`sign` for real tensors)."""
    return sign(input, out=out)


def signbit(input, *, out=None):
    """Where the sign bit is set (bool): negative values, -0.0 and NaNs with the bit."""
    t = tensor_arg(input, "signbit")
    if t.dtype == bool_:
        r = ne(t, t)
    elif not t.dtype.is_floating_point:
        r = lt(t, 0)
    else:
        r = lt(copysign(tensor(1.0, dtype=t.dtype, device=t.device), t), 0)
    return returned(r, out, "signbit")


def frac(input, *, out=None):
    """The fractional part ``input - trunc(input)``, with the sign of `input` (floating tensors
    only)."""
    t = tensor_arg(input, "frac")
    if not t.dtype.is_floating_point:
        raise TypeError(f"frac(): only floating-point tensors are supported, got {t.dtype}")
    return returned(t - unary_functions["trunc"](t), out, "frac")


def reciprocal(input, *, out=None):
    """``1 / input``, elementwise (integers promote to float32)."""
    t = tensor_arg(input, "reciprocal")
    return returned(binary(_DIV, t, 1.0 if t.dtype.is_floating_point else 1, True), out, "reciprocal")


def square(input, *, out=None):
    """``input * input`` (bool gives int64)."""
    t = tensor_arg(input, "square")
    if t.dtype == bool_:
        from .._types import int64

        t = t.to(int64)
    return returned(t * t, out, "square")


def deg2rad(input, *, out=None):
    """Degrees to radians (integers promote to float32)."""
    return returned(tensor_arg(input, "deg2rad") * (_PI / 180), out, "deg2rad")


def rad2deg(input, *, out=None):
    """Radians to degrees (integers promote to float32)."""
    return returned(tensor_arg(input, "rad2deg") * (180 / _PI), out, "rad2deg")


def logit(input, eps=None, *, out=None):
    """``log(p / (1 - p))``, with `p` clamped to ``[eps, 1 - eps]`` when `eps` is given."""
    t = tensor_arg(input, "logit")
    if not t.dtype.is_floating_point:
        from .._types import float32

        t = t.to(float32)
    if eps is not None:
        # eps, then 1 - eps, as PyTorch applies them (for eps > 1/2 every value is replaced).
        t = where(lt(t, eps), float(eps), where(gt(t, 1 - eps), float(1 - eps), t))
    return returned(unary_functions["log"](t / (1 - t)), out, "logit")


# The largest finite value of each floating dtype.
_LARGEST = {
    "float32": 3.4028234663852886e38,
    "float64": 1.7976931348623157e308,
    "float16": 65504.0,
    "bfloat16": 3.3895313892515355e38,
}


def nan_to_num(input, nan=0.0, posinf=None, neginf=None, *, out=None):
    """NaN replaced by `nan`, +inf by `posinf` and -inf by `neginf` (by default the dtype's
    largest and lowest values); integer and bool tensors are unchanged."""
    t = tensor_arg(input, "nan_to_num")
    if not t.dtype.is_floating_point:
        return returned(t.clone(), out, "nan_to_num")
    largest = _LARGEST[t.dtype.name]
    hi = largest if posinf is None else posinf
    lo = -largest if neginf is None else neginf
    r = where(isnan(t), float(nan), t)
    r = where(eq(t, float("inf")), float(hi), r)
    r = where(eq(t, float("-inf")), float(lo), r)
    return returned(r, out, "nan_to_num")


def isposinf(input, *, out=None):
    """Where `input` is +inf (bool)."""
    t = tensor_arg(input, "isposinf")
    r = eq(t, float("inf")) if t.dtype.is_floating_point else ne(t, t)
    return returned(r, out, "isposinf")


def isneginf(input, *, out=None):
    """Where `input` is -inf (bool)."""
    t = tensor_arg(input, "isneginf")
    r = eq(t, float("-inf")) if t.dtype.is_floating_point else ne(t, t)
    return returned(r, out, "isneginf")


def isreal(input):
    """Where the imaginary part is 0 (bool): everywhere, as lucid's tensors are real."""
    t = tensor_arg(input, "isreal")
    return eq(t, t).logical_or(isnan(t)) if t.dtype.is_floating_point else eq(t, t)


def positive(input):
    """`input` itself (unary plus); not for bool tensors."""
    t = tensor_arg(input, "positive")
    if t.dtype == bool_:
        raise TypeError("positive(): the `+` operator on a bool tensor is not supported; use the tensor itself")
    return t


def angle(input, *, out=None):
    """The argument of each element: pi for negative values, 0 otherwise (NaN stays NaN);
    integers promote to float32."""
    t = tensor_arg(input, "angle")
    if not t.dtype.is_floating_point:
        from .._types import float32

        t = t.to(float32)
    r = where(isnan(t), t, where(lt(t, 0), _PI, 0.0).to(t.dtype))
    return returned(r, out, "angle")


def real(input):
    """The real part: `input` itself, as lucid's tensors are real."""
    return tensor_arg(input, "real")


def conj(input):
    """The complex conjugate: `input` itself, as lucid's tensors are real."""
    return tensor_arg(input, "conj")


def conj_physical(input, *, out=None):
    """The complex conjugate: `input` itself, as lucid's tensors are real."""
    return returned(tensor_arg(input, "conj_physical"), out, "conj_physical")


def polygamma(n, input, *, out=None):
    """The n-th derivative of digamma at `input`: digamma for n = 0, else
    ``(-1)**(n+1) n! zeta(n + 1, input)``."""
    t = tensor_arg(input, "polygamma")
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"polygamma(): n must be an int, got {type(n).__name__}")
    if n < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n, got {n}")
    if n == 0:
        return returned(unary_functions["digamma"](t), out, "polygamma")
    import math

    factor = math.factorial(n) * (1 if n % 2 == 1 else -1)
    r = result(_binary_scalar_op(_C.ZETA, t._h, float(n + 1), 0, _C.SCALAR_FLOAT, True)) * float(factor)
    return returned(r, out, "polygamma")


def mvlgamma(input, p, *, out=None):
    """The log of the multivariate gamma function of dimension `p`:
    ``sum(lgamma(input - i/2) for i < p) + p(p-1)/4 log(pi)``; every element must exceed
    ``(p - 1) / 2``."""
    import math

    t = tensor_arg(input, "mvlgamma")
    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        raise ValueError(f"mvlgamma(): p must be a positive int, got {p!r}")
    if not t.dtype.is_floating_point:
        from .._types import float32

        t = t.to(float32)
    if not bool(gt(t, (p - 1) / 2).all()):
        raise RuntimeError(f"mvlgamma(): all elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    r = unary_functions["lgamma"](t)
    for i in range(1, p):
        r = r + unary_functions["lgamma"](t - i / 2)
    return returned(r + p * (p - 1) / 4 * math.log(_PI), out, "mvlgamma")


def lerp(input, end, weight, *, out=None):
    """``input + weight * (end - input)``, elementwise (`weight` a tensor or number)."""
    tensor_arg(input, "lerp")
    tensor_arg(end, "lerp", "end")
    d = end - input
    if isinstance(weight, TensorBase):
        # The form exact at weight 1 for weights from 1/2 up, as PyTorch's.
        r = where(lt(weight.abs(), 0.5), input + weight * d, end - d * (1 - weight))
    else:
        r = input + d * weight if -0.5 < weight < 0.5 else end - d * (1 - weight)
    return returned(r, out, "lerp")


def addcmul(input, tensor1, tensor2, *, value=1, out=None):
    """``input + value * tensor1 * tensor2``."""
    tensor_arg(input, "addcmul")
    p = tensor_arg(tensor1, "addcmul", "tensor1") * tensor_arg(tensor2, "addcmul", "tensor2")
    return returned(input + (p if value == 1 else p * value), out, "addcmul")


def addcdiv(input, tensor1, tensor2, *, value=1, out=None):
    """``input + value * tensor1 / tensor2``; integer `tensor1` and `tensor2` are refused."""
    tensor_arg(input, "addcdiv")
    a, b = tensor_arg(tensor1, "addcdiv", "tensor1"), tensor_arg(tensor2, "addcdiv", "tensor2")
    if not a.dtype.is_floating_point and not b.dtype.is_floating_point:
        raise RuntimeError(
            "addcdiv(): integer division with addcdiv is not supported; use true_divide on the tensors' float forms"
        )
    q = a / b
    return returned(input + (q if value == 1 else q * value), out, "addcdiv")


def _bound(x, bound, lower):
    """`x` with the tensor `bound` applied: the bound where `x` is past it or the bound is NaN;
    the gradient goes to `x` at a tie."""
    past = lt(x, bound) if lower else gt(x, bound)
    return where(logical_or(past, isnan(bound)), bound, x)


def clamp(input, min=None, max=None, *, out=None):
    """Limits values to ``[min, max]`` (numbers or tensors, broadcast); the gradient passes where
    ``min <= x <= max``."""
    tensor_arg(input, "clamp")
    if isinstance(min, TensorBase) or isinstance(max, TensorBase):
        r = input
        for bound, lower in ((min, True), (max, False)):
            if isinstance(bound, TensorBase):
                r = _bound(r, bound, lower)
            elif bound is not None:
                r = _scalar_clamp(r, bound if lower else None, None if lower else bound)
        return returned(r, out, "clamp")
    return returned(_scalar_clamp(input, min, max), out, "clamp")


def _scalar_clamp(input, min, max):
    lo = (0.0, 0, 0) if min is None else scalar_or_raise(min, "clamp(): min")
    hi = (0.0, 0, 0) if max is None else scalar_or_raise(max, "clamp(): max")
    return result(_C.clamp(input._h, min is not None, *lo, max is not None, *hi))


clip = clamp


def clamp_min(input, min, *, out=None):
    """Limits values from below (a number or a tensor)."""
    return clamp(input, min=min, out=out)


def clamp_max(input, max, *, out=None):
    """Limits values from above (a number or a tensor)."""
    return clamp(input, max=max, out=out)


def _reflected(op, name):
    def fn(self, o):
        return binary(op, self, o, True)

    fn.__name__ = fn.__qualname__ = name
    return fn


def _integer_reflected(op, name):
    def fn(self, o):
        if isinstance(o, float):
            return NotImplemented
        return binary(op, self, o, True)

    fn.__name__ = fn.__qualname__ = name
    return fn


MATH_FUNCTIONS = [
    "atan2",
    "arctan2",
    "copysign",
    "xlogy",
    "hypot",
    "nextafter",
    "logaddexp",
    "logaddexp2",
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
    "divide",
    "rsub",
    "float_power",
    "ldexp",
    "frexp",
    "sign",
    "sgn",
    "signbit",
    "frac",
    "reciprocal",
    "square",
    "deg2rad",
    "rad2deg",
    "logit",
    "nan_to_num",
    "isposinf",
    "isneginf",
    "isreal",
    "positive",
    "angle",
    "real",
    "conj",
    "conj_physical",
    "polygamma",
    "mvlgamma",
    "lerp",
    "addcmul",
    "addcdiv",
    "clamp_min",
    "clamp_max",
]

# The header's words first, as for every unary op.
round.__doc__ = (
    f"{_C._abi.DOCS['LUCID_ROUND']}, elementwise; with `decimals`, to that many decimal places "
    "(``round(input * 10**decimals) / 10**decimals``)."
)
sign.__doc__ = f"{_C._abi.DOCS['LUCID_SIGN']}, elementwise (bool stays bool)."
unary_functions["round"], unary_functions["sign"] = round, sign


def _operator(op=None, reflected=False):
    """The operator method of binary `op`, or (no `op`) of ``@``, its operands swapped when
    `reflected`. Two tensors, the commonest case, go straight to the engine's entry and into
    the result tensor (what `_C.binary`, `_C.matmul` and `result` do, without their calls:
    this is the hottest path there is); anything else takes `binary`, or is NotImplemented
    for ``@``."""
    entry = _C.lib.lucid_matmul if op is None else _C.lib.lucid_binary
    record, fail, new, handle = _C.Record, _C.raise_error, object.__new__, _C.RECORD_HANDLE

    def method(self, o):
        if isinstance(o, TensorBase):
            r = record()
            if op is not None:
                rc = entry(op, self._h, o._h, r)
            else:
                rc = entry(o._h, self._h, r) if reflected else entry(self._h, o._h, r)
            if rc:
                fail(rc)
            t = new(_core.Tensor)
            t._h, t._r = r[handle], r
            t._meta = t._shape = None
            return t
        return NotImplemented if op is None else binary(op, self, o)

    return method


class ElementwiseMethods:
    """Tensor's operators and elementwise methods."""

    __slots__ = ()

    __add__ = _operator(_ADD)

    def __radd__(self, o):
        return binary(_ADD, self, o, True)

    __sub__ = _operator(_SUB)

    def __rsub__(self, o):
        return binary(_SUB, self, o, True)

    __mul__ = _operator(_MUL)

    def __rmul__(self, o):
        return binary(_MUL, self, o, True)

    __truediv__ = _operator(_DIV)

    def __rtruediv__(self, o):
        return binary(_DIV, self, o, True)

    def __pow__(self, o):
        return binary(_C.POW, self, o)

    def __rpow__(self, o):
        return binary(_C.POW, self, o, True)

    __matmul__ = _operator()
    __rmatmul__ = _operator(reflected=True)

    def __neg__(self):
        return result(_unary_op(UNARY["neg"], self._h))

    def __pos__(self):
        return self

    def __abs__(self):
        return result(_unary_op(UNARY["abs"], self._h))

    def __eq__(self, o):
        return compare(_C.EQ, self, o)

    def __ne__(self, o):
        return compare(_C.NE, self, o)

    def __lt__(self, o):
        return compare(_C.LT, self, o)

    def __le__(self, o):
        return compare(_C.LE, self, o)

    def __gt__(self, o):
        return compare(_C.GT, self, o)

    def __ge__(self, o):
        return compare(_C.GE, self, o)

    # & | ^ ~ are the engine's bitwise ops: logical on bool tensors, bitwise on integers.
    def __and__(self, o):
        return bitwise(_C.BITWISE_AND, self, o)

    def __or__(self, o):
        return bitwise(_C.BITWISE_OR, self, o)

    def __xor__(self, o):
        return bitwise(_C.BITWISE_XOR, self, o)

    def __rand__(self, o):
        return bitwise(_C.BITWISE_AND, self, o, True)

    def __ror__(self, o):
        return bitwise(_C.BITWISE_OR, self, o, True)

    def __rxor__(self, o):
        return bitwise(_C.BITWISE_XOR, self, o, True)

    def __invert__(self):
        return result(_C.bitwise_not(self._h))

    # Tensors hash by identity, as in PyTorch, although == compares elementwise.
    __hash__ = object.__hash__

    add, sub, mul, div, pow, matmul, mm, dot = add, sub, mul, div, pow, matmul, mm, dot
    bmm, mv, vdot, inner = bmm, mv, vdot, inner
    addmm, addmv, addr, baddbmm, addbmm = addmm, addmv, addr, baddbmm, addbmm
    maximum, minimum, clamp, clip = maximum, minimum, clamp, clip
    eq, ne, lt, le, gt, ge = eq, ne, lt, le, gt, ge
    bitwise_and, bitwise_or, bitwise_xor, bitwise_not = bitwise_and, bitwise_or, bitwise_xor, bitwise_not
    logical_and, logical_or, logical_xor, logical_not = logical_and, logical_or, logical_xor, logical_not
    arcsin, arccos, arctan = arcsin, arccos, arctan
    arcsinh, arccosh, arctanh, fix = arcsinh, arccosh, arctanh, fix
    isnan, isinf, isfinite, isclose, allclose, equal, outer = isnan, isinf, isfinite, isclose, allclose, equal, outer

    def __mod__(self, o):
        return _check_divisor(binary(_C.REMAINDER, self, o), o, "%")

    def __rmod__(self, o):
        return _check_divisor(binary(_C.REMAINDER, self, o, True), self, "%")

    def __floordiv__(self, o):
        return _check_divisor(binary(_C.FLOOR_DIVIDE, self, o), o, "//")

    def __rfloordiv__(self, o):
        return _check_divisor(binary(_C.FLOOR_DIVIDE, self, o, True), self, "//")

    def __lshift__(self, o):
        return bitwise(_C.LEFT_SHIFT, self, o)

    def __rshift__(self, o):
        return bitwise(_C.RIGHT_SHIFT, self, o)

    __rlshift__ = _integer_reflected(_C.LEFT_SHIFT, "__rlshift__")
    __rrshift__ = _integer_reflected(_C.RIGHT_SHIFT, "__rrshift__")
    __rdiv__ = _reflected(_DIV, "__rdiv__")

    def polygamma(self, n):
        """polygamma(n, self)."""
        return polygamma(n, self)

    def where(self, condition, other):
        """``self`` where ``condition`` holds, ``other`` elsewhere."""
        return where(condition, self, other)


for _name, _fn in unary_functions.items():
    setattr(ElementwiseMethods, _name, _fn)
# The math functions are methods too, but polygamma (whose method takes n, above), sign (a
# unary function) and rsub and real (functions only).
for _name in MATH_FUNCTIONS:
    if _name not in ("polygamma", "rsub", "real", "sign"):
        setattr(ElementwiseMethods, _name, globals()[_name])

__all__ = [
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    "clamp",
    "clip",
    "matmul",
    "mm",
    "dot",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "where",
    "isnan",
    "isinf",
    "isfinite",
    "isclose",
    "allclose",
    "equal",
    "outer",
    "ger",
    "arcsin",
    "arccos",
    "arctan",
    "arcsinh",
    "arccosh",
    "arctanh",
    "fix",
    *unary_functions,
    *MATH_FUNCTIONS,
]
__all__ += ["bmm", "mv", "vdot", "inner", "addmm", "addmv", "addr", "baddbmm", "addbmm"]
