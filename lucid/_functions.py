"""Top-level functions (``lucid.where``, ``lucid.cat``, ``lucid.maximum`` …) over the engine ops."""

from __future__ import annotations

import warnings

from . import _engine as E, _views
from ._creation import empty
from ._tensor import Tensor, _scalar
from ._types import as_index


def _check(t, fn, what="input"):
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}(): {what} must be a lucid.Tensor, got {type(t).__name__}")
    return t


def _operand(v, fn, what):
    if isinstance(v, Tensor):
        return v._h
    s = _scalar(v)
    if s is None:
        raise TypeError(f"{fn}(): {what} must be a lucid.Tensor or a number, got {type(v).__name__}")
    return s


def write_out(result, out, fn):
    """PyTorch's ``out=``: `result` (or each tensor of a tuple result) written into `out` (a
    tensor, or a tuple of them), converted to its dtype when that is of the same kind or
    wider. An `out` of another shape takes the result's shape (with a warning unless it was
    empty). Autograd does not record such writes: an input that requires grad is refused.
    Returns `out`."""
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{fn}(): out must be a tuple of {len(result)} tensors, got {out!r}")
        for r, o in zip(result, out):
            write_out(r, o, fn)
        return tuple(out)
    if not isinstance(out, Tensor):
        raise TypeError(f"{fn}(): out must be a lucid.Tensor, got {type(out).__name__}")
    if result.requires_grad and E.is_grad_enabled():
        raise RuntimeError(f"{fn}(): functions with out=... arguments don't support automatic differentiation, but "
                           "one of the arguments requires grad")
    if out.device != result.device:
        raise RuntimeError(f"{fn}(): expected out on {result.device}, got a tensor on {out.device}")
    if tuple(out.shape) == tuple(result.shape):
        return _views.assign(out, result, fn, same_kind=True)
    if out.numel() != 0:
        warnings.warn(f"{fn}(): an output with one or more elements was resized since it had shape "
                      f"{tuple(out.shape)}, which does not match the required output shape {tuple(result.shape)}",
                      UserWarning, stacklevel=3)
    resized = _views.assign(empty(*result.shape, dtype=out.dtype, device=out.device), result, fn, same_kind=True)
    E.set_data(out._h, resized._h)
    out._r = out._meta = out._shape = None
    return out


def _result(result, out, fn):
    return result if out is None else write_out(result, out, fn)


def where(condition, input, other, *, out=None) -> Tensor:
    """``input`` where the bool ``condition`` holds, ``other`` elsewhere (either may be a
    number), with broadcasting; gradients flow to the branch chosen."""
    _check(condition, "where", "condition")
    return _result(Tensor._wrap(E.where(condition._h, _operand(input, "where", "input"), _operand(other, "where", "other"))),
                   out, "where")


def _tensors(tensors, fn):
    if isinstance(tensors, Tensor):
        raise TypeError(f"{fn}(): expected a sequence of tensors, got a single tensor")
    ts = list(tensors)
    for i, t in enumerate(ts):
        _check(t, fn, f"tensors[{i}]")
    return ts


def cat(tensors, dim=0, *, out=None) -> Tensor:
    """Joins tensors along ``dim``; under autocast mixed floating dtypes join in the widest."""
    ts = _tensors(tensors, "cat")  # held until the engine has them: a generator's tensors have no other owner
    return _result(Tensor._wrap(E.cat([t._h for t in ts], as_index(dim), False)), out, "cat")


def stack(tensors, dim=0, *, out=None) -> Tensor:
    """Joins tensors of one shape along a new dimension ``dim``."""
    ts = _tensors(tensors, "stack")
    return _result(Tensor._wrap(E.cat([t._h for t in ts], as_index(dim), True)), out, "stack")


concat = cat


def _method(name, doc):
    if name in _VIEWS:
        def fn(input, *args, **kwargs):
            _check(input, name)
            return getattr(Tensor, name)(input, *args, **kwargs)
    else:
        def fn(input, *args, out=None, **kwargs):
            """`out`: a tensor (a tuple of them, for a tuple result) the result is written into,
            as PyTorch's ``out=``."""
            _check(input, name)
            return _result(getattr(Tensor, name)(input, *args, **kwargs), out, name)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


_METHODS = {
    "exp": "e**x, elementwise; float32 under autocast.",
    "log": "Natural logarithm, elementwise; float32 under autocast.",
    "log1p": "log(1 + x), elementwise; float32 under autocast.",
    "sqrt": "Square root, elementwise.",
    "rsqrt": "1 / sqrt(x), elementwise; float32 under autocast.",
    "abs": "Absolute value, elementwise.",
    "tanh": "Hyperbolic tangent, elementwise.",
    "sin": "Sine, elementwise (integers promote to float32).",
    "cos": "Cosine, elementwise (integers promote to float32).",
    "sigmoid": "1 / (1 + e**-x), elementwise.",
    "relu": "max(x, 0), elementwise.",
    "pow": "input ** exponent, elementwise; float32 under autocast.",
    "maximum": "Elementwise maximum of two tensors (or a tensor and a number).",
    "minimum": "Elementwise minimum of two tensors (or a tensor and a number).",
    "clamp": "Limits values to [min, max].",
    "clip": "Alias of clamp.",
    "eq": "input == other, elementwise (bool).",
    "ne": "input != other, elementwise (bool).",
    "lt": "input < other, elementwise (bool).",
    "le": "input <= other, elementwise (bool).",
    "gt": "input > other, elementwise (bool).",
    "ge": "input >= other, elementwise (bool).",
    "logical_and": "Elementwise and of the inputs' truth values (non-zero is true); bool.",
    "logical_or": "Elementwise or of the inputs' truth values; bool.",
    "logical_xor": "Elementwise xor of the inputs' truth values; bool.",
    "logical_not": "Elementwise not of the input's truth values; bool.",
    "bitwise_and": "input & other: logical for bool tensors, bitwise for integers.",
    "bitwise_or": "input | other: logical for bool tensors, bitwise for integers.",
    "bitwise_xor": "input ^ other: logical for bool tensors, bitwise for integers.",
    "bitwise_not": "~input: logical for bool tensors, bitwise for integers.",
    "sum": "Sum over dim (all by default); float32 under autocast.",
    "mean": "Mean over dim (all by default); float32 under autocast.",
    "amax": "Max over dim (all by default).",
    "amin": "Min over dim (all by default).",
    "max": "Max of all elements, or (values, indices) along dim.",
    "min": "Min of all elements, or (values, indices) along dim.",
    "argmax": "Index of the max along dim, or into the flattened tensor.",
    "argmin": "Index of the min along dim, or into the flattened tensor.",
    "var": "Variance over dim with Bessel's correction by default; float32 under autocast.",
    "std": "Standard deviation over dim; float32 under autocast.",
    "logsumexp": "log(sum(exp(x))) over dim, computed stably; float32 under autocast.",
    "softmax": "Softmax along dim; float32 under autocast.",
    "log_softmax": "Log-softmax along dim; float32 under autocast.",
    "reshape": "A view when the strides allow, else a copy, of the given shape.",
    "flatten": "Merges dimensions start_dim..end_dim.",
    "squeeze": "Drops size-1 dimensions.",
    "unsqueeze": "Inserts a size-1 dimension at dim.",
    "transpose": "Swaps two dimensions (a view).",
    "permute": "Reorders dimensions (a view).",
    "narrow": "The view of length entries of dim from start.",
    "diagonal": "The view of the diagonal of dim1 and dim2 (offset above it), as a last dimension.",
    "unflatten": "The view splitting dim into the given sizes.",
    "as_strided": "The view of input's storage with the given sizes and strides (from storage_offset).",
    "split": "Views of consecutive pieces along dim.",
    "chunk": "At most `chunks` views of equal size along dim.",
    "index_select": "Slices along dim at the positions in a 1-D integer tensor.",
    "gather": "Values along dim at the positions in an index tensor of the output's shape.",
    "select": "The view of the slice at index along dim, which goes away.",
    "index_put": "A copy of input with values written (or, with accumulate, added) at input[indices].",
    "scatter": "A copy of input with src written at the positions index names along dim.",
    "scatter_add": "A copy of input with src added at the positions index names along dim.",
    "matmul": "torch.matmul semantics; lower precision under autocast.",
}

# Views take no out=, as in PyTorch.
_VIEWS = {"reshape", "flatten", "squeeze", "unsqueeze", "transpose", "permute", "narrow", "diagonal", "unflatten",
          "as_strided", "split", "chunk", "select"}

for _name, _doc in _METHODS.items():
    globals()[_name] = _method(_name, _doc)

__all__ = ["where", "cat", "concat", "stack", *_METHODS]
