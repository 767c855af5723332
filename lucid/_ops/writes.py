"""In-place writes, and what they share with subscripts: the subscript encoding and `out=`.

A view (slicing, ``view``, ``t()``, ``expand``, ...) is an engine tensor over the same storage
as the tensor it views, so a write through either is seen by both: an in-place op writes its
result into the destination's storage in the engine (``lucid_assign``), one strided copy over
the destination's elements, and bumps the storage's version, which backward checks for every
tensor it saved.

When autograd records the write, it becomes the grad_fn of the written tensor, or of the
tensor a written view views; the engine gives that tensor's handle the new history in place,
and its views take it up when next used. The one thing Python keeps is whether any recorded
write has happened (`lucid._core.rewrites`): a recorded write can make a tensor require grad.
"""

from __future__ import annotations

import operator
import warnings

import numpy as np

from .. import _C, _core
from .._core import TensorBase
from .creation import tensor, zeros


def recording(t, *others) -> bool:
    """Whether an in-place op on `t` with these operands is recorded for autograd."""
    if not t.requires_grad:
        for o in others:
            if getattr(o, "requires_grad", False):
                break
        else:
            return False
    return _C.is_grad_enabled() != 0


def source(t, *others):
    """`t` as the operand an in-place op computes its result from: `t` itself, or, when the op
    is recorded for autograd, a copy, so that what backward saves of it is not the memory the
    write changes."""
    return t.clone() if recording(t, *others) else t


def _written(t, recorded):
    if recorded:
        _core.rewrites += 1
    return t


def operand(t, value, op):
    """`value` as a tensor on `t`'s device (a number, list or 0-d tensor moves there)."""
    if isinstance(value, TensorBase):
        if value.ndim == 0 and value.device != t.device:
            return value.to(t.device)
        return value
    try:
        return tensor(value, device=t.device)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{op}: expected a tensor or a number, got {type(value).__name__}") from e


def fill(t, value, op):
    """Sets every element of `t` to the scalar `value` ((float, int, kind) as the engine takes
    it), expanded views included. Returns `t`."""
    return _written(t, _C.fill(t._h, *value, op))


def write_at(t, items, src, value, op):
    """Writes the tensor `src` (or, when None, the scalar `value`) at ``t[items]``, basic items
    only, with no view made here. Returns `t`."""
    s = (0.0, 0, _C.SCALAR_FLOAT) if value is None else value
    return _written(t, _C.write_at(t._h, items, 0 if src is None else src._h, *s, op))


def index_put(t, items, src, accumulate, op):
    """Writes the tensor `src` at ``t[items]`` (items with tensors), or adds it there with
    `accumulate`. Returns `t`."""
    return _written(t, _C.index_put_inplace(t._h, items, src._h, bool(accumulate), op))


def assign(t, value, op, *, fill=False, same_kind=False, result=False):
    """Writes `value` (a lucid.Tensor broadcast to `t`'s shape, converted to its dtype and
    device) into `t`'s elements, in place. `fill`: `value` is one value, which may be written
    into an expanded view. `same_kind`: `value` is an arithmetic result, which may not be of a
    higher kind than `t` (a float into an integer tensor). `result`: `value` is the in-place
    op's own result, made for this write: what its backward saved of it becomes `t` as
    written, so that a later write into `t` makes that backward refuse, as in PyTorch.
    Returns `t`."""
    flags = (
        (_C.ASSIGN_FILL if fill else 0)
        | (_C.ASSIGN_SAME_KIND if same_kind else 0)
        | (_C.ASSIGN_RESULT if result else 0)
    )
    return _written(t, _C.assign(t._h, value._h, flags, op))


def set_data(t, value):
    """``t.data = value``: `t` takes `value`'s storage (and shape, dtype, device), keeping its
    own requires_grad. Views taken of `t` before keep the old storage, as in PyTorch."""
    _C.set_data(t._h, value._h)
    t._forget()


def zero_grads(params, set_to_none):
    """``zero_grad`` of a module or an optimizer: each gradient to None, or zeroed in place (the
    same tensor, detached from any graph first, as PyTorch does)."""
    for p in params:
        grad = p.grad
        if set_to_none or grad is None:
            p.grad = None
            continue
        if grad.grad_fn is not None:
            grad = grad.detach()
            p.grad = grad
        grad.zero_()


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
    if not isinstance(out, TensorBase):
        raise TypeError(f"{fn}(): out must be a lucid.Tensor, got {type(out).__name__}")
    if result.requires_grad and _C.is_grad_enabled():
        raise RuntimeError(
            f"{fn}(): functions with out=... arguments don't support automatic differentiation, but "
            "one of the arguments requires grad"
        )
    if out.device != result.device:
        raise RuntimeError(f"{fn}(): expected out on {result.device}, got a tensor on {out.device}")
    if tuple(out.shape) == tuple(result.shape):
        return assign(out, result, fn, same_kind=True)
    if out.numel() != 0:
        warnings.warn(
            f"{fn}(): an output with one or more elements was resized since it had shape "
            f"{tuple(out.shape)}, which does not match the required output shape {tuple(result.shape)}",
            UserWarning,
            stacklevel=3,
        )
    resized = assign(zeros(*result.shape, dtype=out.dtype, device=out.device), result, fn, same_kind=True)
    set_data(out, resized)
    return out


def returned(result, out, fn):
    """`result`, or, given `out`, `result` written into it (PyTorch's ``out=``)."""
    return result if out is None else write_out(result, out, fn)


def index_item(item, device, keep):
    """One subscript item in the engine's encoding; tensors made here are kept alive in ``keep``."""
    if item is None:
        return _C.INDEX_NONE, (0, 0, 0), 0, 0
    if item is Ellipsis:
        return _C.INDEX_ELLIPSIS, (0, 0, 0), 0, 0
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
        return _C.INDEX_SLICE, tuple(parts), flags, 0
    if isinstance(item, TensorBase):
        if item.ndim == 0 and not item.dtype.is_floating_point and item.dtype.name != "bool":
            return _C.INDEX_INT, (item.item(), 0, 0), 0, 0  # an int, as in PyTorch: the result is a view
        return _C.INDEX_TENSOR, (0, 0, 0), 0, item._h
    if isinstance(item, (bool, np.bool_, list, range, np.ndarray)):
        t = tensor(item, device=device)
        if t.dtype.is_floating_point:
            raise IndexError("tensors used as indices must be integer or bool tensors, got float values")
        keep.append(t)
        return _C.INDEX_TENSOR, (0, 0, 0), 0, t._h
    try:
        return _C.INDEX_INT, (operator.index(item), 0, 0), 0, 0
    except TypeError:
        raise IndexError(
            f"only integers, slices, None, ..., integer or bool tensors, lists and ranges are valid "
            f"indices, "
            f"got {type(item).__name__}"
        ) from None


def encode(key, device, keep):
    """A subscript (one item or a tuple of them) in the engine's encoding."""
    items = key if isinstance(key, tuple) else (key,)
    return [index_item(item, device, keep) for item in items]


def has_tensor(encoded) -> bool:
    return any(e[0] == _C.INDEX_TENSOR for e in encoded)
