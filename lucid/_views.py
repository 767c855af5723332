"""In-place writes.

A view (slicing, ``view``, ``t()``, ``expand``, ...) is an engine tensor over the same storage
as the tensor it views, so a write through either is seen by both: an in-place op writes its
result into the destination's storage in the engine (``lucid_assign``), one strided copy over
the destination's elements, and bumps the storage's version, which backward checks for every
tensor it saved.

When autograd records the write, it becomes the grad_fn of the written tensor, or of the
tensor a written view views; the engine gives that tensor's handle the new history in place,
and its views take it up when next used. The one thing Python keeps is which tensors' cached
``requires_grad`` may be out of date: a recorded write can make a tensor require grad.
"""

from __future__ import annotations

from . import _engine as E

# Recorded writes so far. Once there has been one, a tensor's cached requires_grad of False is
# asked of the engine again, since the write may have reached the tensor through a view.
rewrites = 0


def recording(t, *others) -> bool:
    """Whether an in-place op on `t` with these operands is recorded for autograd."""
    if not (t.requires_grad or any(getattr(o, "requires_grad", False) for o in others)):
        return False
    return E.is_grad_enabled()


def source(t, *others):
    """`t` as the operand an in-place op computes its result from: `t` itself, or, when the op
    is recorded for autograd, a copy, so that what backward saves of it is not the memory the
    write changes."""
    return t.clone() if recording(t, *others) else t


def _written(t, recorded):
    if recorded:
        global rewrites
        rewrites += 1
    return t


def fill(t, value, op):
    """Sets every element of `t` to the scalar `value` ((float, int, kind) as the engine takes
    it), expanded views included. Returns `t`."""
    return _written(t, E.fill(t._h, *value, op))


def write_at(t, items, src, value, op):
    """Writes the tensor `src` (or, when None, the scalar `value`) at ``t[items]``, basic items
    only, with no view made here. Returns `t`."""
    s = (0.0, 0, E.SCALAR_FLOAT) if value is None else value
    return _written(t, E.write_at(t._h, items, 0 if src is None else src._h, *s, op))


def index_put(t, items, src, accumulate, op):
    """Writes the tensor `src` at ``t[items]`` (items with tensors), or adds it there with
    `accumulate`. Returns `t`."""
    return _written(t, E.index_put_inplace(t._h, items, src._h, bool(accumulate), op))


def assign(t, value, op, *, fill=False, same_kind=False, result=False):
    """Writes `value` (a lucid.Tensor broadcast to `t`'s shape, converted to its dtype and
    device) into `t`'s elements, in place. `fill`: `value` is one value, which may be written
    into an expanded view. `same_kind`: `value` is an arithmetic result, which may not be of a
    higher kind than `t` (a float into an integer tensor). `result`: `value` is the in-place
    op's own result, made for this write: what its backward saved of it becomes `t` as
    written, so that a later write into `t` makes that backward refuse, as in PyTorch.
    Returns `t`."""
    flags = ((E.ASSIGN_FILL if fill else 0) | (E.ASSIGN_SAME_KIND if same_kind else 0)
             | (E.ASSIGN_RESULT if result else 0))
    return _written(t, E.assign(t._h, value._h, flags, op))


def set_data(t, value):
    """``t.data = value``: `t` takes `value`'s storage (and shape, dtype, device), keeping its
    own requires_grad. Views taken of `t` before keep the old storage, as in PyTorch."""
    E.set_data(t._h, value._h)
    t._r = t._meta = t._shape = None


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
