"""Elementwise ops: arithmetic, the unary ops, comparisons, bitwise and logical ops, selection,
and the matrix product; with `ElementwiseMethods`, the operators and methods they give Tensor.

The unary ops are the engine's (enum lucid_unary_op in include/lucid.h): each one's function,
method and documentation come from its line there.
"""

from __future__ import annotations

from .. import _C
from .._core import TensorBase, operand, result, scalar, scalar_or_raise, tensor_arg
from .._types import bool_
from .creation import tensor
from .writes import returned

# The engine calls of the hottest operators, bound once.
_binary_op, _binary_scalar_op, _unary_op, _matmul_op = _C.binary, _C.binary_scalar, _C.unary, _C.matmul
_ADD, _SUB, _MUL, _DIV = _C.ADD, _C.SUB, _C.MUL, _C.DIV

UNARY = _C.codes("lucid_unary_op")

# What autocast does to each op, as the engine's op table says (for the documentation).
_POLICIES = {_C.POLICY_LOWER_PRECISION: "; lower precision under autocast",
             _C.POLICY_FLOAT32: "; float32 under autocast",
             _C.POLICY_PROMOTE: "; the widest input dtype under autocast"}
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
        raise TypeError(f"{name}(): expected tensors or numbers, got {type(input).__name__} and "
                        f"{type(other).__name__}")
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


def div(input, other, *, out=None):
    """``input / other`` (true division: integers divide to float32), with broadcasting."""
    return returned(_arithmetic(_DIV, "div", input, other), out, "div")


def pow(input, exponent, *, out=None):
    """``input ** exponent`` (either may be a number), elementwise; float32 under autocast."""
    return returned(_arithmetic(_C.POW, "pow", input, exponent), out, "pow")


def maximum(input, other, *, out=None):
    """Elementwise maximum (NaN propagates); ties split the gradient evenly."""
    return returned(_arithmetic(_C.MAXIMUM, "maximum", tensor_arg(input, "maximum"), other), out, "maximum")


def minimum(input, other, *, out=None):
    """Elementwise minimum (NaN propagates); ties split the gradient evenly."""
    return returned(_arithmetic(_C.MINIMUM, "minimum", tensor_arg(input, "minimum"), other), out, "minimum")


def clamp(input, min=None, max=None, *, out=None):
    """Limits values to ``[min, max]``; the gradient passes where ``min <= x <= max``."""
    tensor_arg(input, "clamp")
    lo = (0.0, 0, 0) if min is None else scalar_or_raise(min, "clamp(): min")
    hi = (0.0, 0, 0) if max is None else scalar_or_raise(max, "clamp(): max")
    r = result(_C.clamp(input._h, min is not None, *lo, max is not None, *hi))
    return returned(r, out, "clamp")


clip = clamp


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
        raise RuntimeError(f"{fn}(): input of shape {tuple(input.shape)} does not broadcast to the product's shape "
                           f"{tuple(product.shape)}") from e
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
        raise RuntimeError(f"inner(): the last dimensions of shapes {tuple(input.shape)} and {tuple(other.shape)} "
                           "differ")
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


def kron(input, other, *, out=None):
    """The Kronecker product: every entry of `input` times the whole of `other`, in blocks
    (shape ``input.shape * other.shape``, the shorter shape padded with leading ones)."""
    a, b = tensor_arg(input, "kron"), tensor_arg(other, "kron", "other")
    n = a.ndim if a.ndim > b.ndim else b.ndim
    sa, sb = (1,) * (n - a.ndim) + tuple(a.shape), (1,) * (n - b.ndim) + tuple(b.shape)
    # Interleaved dimensions (a0, b0, a1, b1, ...) broadcast to all products, then merged pairwise.
    left = a.reshape([d for x in sa for d in (x, 1)])
    right = b.reshape([d for x in sb for d in (1, x)])
    return returned((left * right).reshape([x * y for x, y in zip(sa, sb)]), out, "kron")


def _unary_function(name, code):
    def fn(input, *, out=None):
        return returned(result(_unary_op(code, tensor_arg(input, name)._h)), out, name)

    doc = _C._abi.DOCS[f"LUCID_{name.upper()}"]
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{doc}, elementwise{_AUTOCAST.get(name, '')}."
    return fn


unary_functions = {name: _unary_function(name, code) for name, code in UNARY.items()}
globals().update(unary_functions)
# NumPy's names for the inverse trigonometric functions, which PyTorch takes too.
arcsin, arccos, arctan = unary_functions["asin"], unary_functions["acos"], unary_functions["atan"]


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
    return returned(result(_C.bitwise_not(tensor_arg(input, "logical_not").to(bool_)._h)), out, "logical_not")


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


class ElementwiseMethods:
    """Tensor's operators and elementwise methods."""

    __slots__ = ()

    def __add__(self, o):
        if isinstance(o, TensorBase):  # the commonest case, without the general path's calls
            return result(_binary_op(_ADD, self._h, o._h))
        return binary(_ADD, self, o)

    def __radd__(self, o):
        return binary(_ADD, self, o, True)

    def __sub__(self, o):
        return binary(_SUB, self, o)

    def __rsub__(self, o):
        return binary(_SUB, self, o, True)

    def __mul__(self, o):
        if isinstance(o, TensorBase):
            return result(_binary_op(_MUL, self._h, o._h))
        return binary(_MUL, self, o)

    def __rmul__(self, o):
        return binary(_MUL, self, o, True)

    def __truediv__(self, o):
        return binary(_DIV, self, o)

    def __rtruediv__(self, o):
        return binary(_DIV, self, o, True)

    def __pow__(self, o):
        return binary(_C.POW, self, o)

    def __rpow__(self, o):
        return binary(_C.POW, self, o, True)

    def __matmul__(self, o):
        if not isinstance(o, TensorBase):
            return NotImplemented
        return result(_matmul_op(self._h, o._h))

    def __rmatmul__(self, o):
        if not isinstance(o, TensorBase):
            return NotImplemented
        return result(_matmul_op(o._h, self._h))

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
    bmm, mv, vdot, inner, kron = bmm, mv, vdot, inner, kron
    addmm, addmv, addr, baddbmm, addbmm = addmm, addmv, addr, baddbmm, addbmm
    maximum, minimum, clamp, clip = maximum, minimum, clamp, clip
    eq, ne, lt, le, gt, ge = eq, ne, lt, le, gt, ge
    bitwise_and, bitwise_or, bitwise_xor, bitwise_not = bitwise_and, bitwise_or, bitwise_xor, bitwise_not
    logical_and, logical_or, logical_xor, logical_not = logical_and, logical_or, logical_xor, logical_not
    arcsin, arccos, arctan = arcsin, arccos, arctan
    masked_fill, isnan, isinf, isfinite, isclose, allclose, equal, outer = (masked_fill, isnan, isinf, isfinite,
                                                                            isclose, allclose, equal, outer)

    def where(self, condition, other):
        """``self`` where ``condition`` holds, ``other`` elsewhere."""
        return where(condition, self, other)


for _name, _fn in unary_functions.items():
    setattr(ElementwiseMethods, _name, _fn)

__all__ = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "clamp", "clip", "matmul", "mm", "dot", "eq", "ne", "lt", "le",
           "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "logical_and", "logical_or",
           "logical_xor", "logical_not", "where", "isnan", "isinf", "isfinite", "isclose", "allclose", "equal", "outer",
           "ger", "arcsin", "arccos", "arctan", *unary_functions]
__all__ += ["bmm", "mv", "vdot", "inner", "kron", "addmm", "addmv", "addr", "baddbmm", "addbmm"]
