"""Views and in-place writes.

A view (slicing, ``view``, ``t()``, ``expand``, ``detach()``, ...) is an engine tensor over the
same storage as the tensor it views, so a write through either is seen by both: an in-place op
writes its result into the destination's storage in the engine (``lucid_assign``), one strided
copy over the destination's elements, and bumps the storage's version, which backward checks
for every tensor it saved.

When gradients are recorded, the write is also a node of the graph, and the written tensor's
autograd history changes. For a view, that history is its *base*'s (the tensor it ultimately
views): the engine gives the base a new history in which the view's elements come from the
written value, and every live view of the base is made again from it, so that views see the
new history (their values are already shared). Each Python view records its base and the engine
steps that make it from the base's handle; a base holds its views weakly, views hold their base.
"""

from __future__ import annotations

import weakref

from . import _engine as E


class _View:
    """How a view was made: its base, the engine steps from the base's handle to its own, and
    whether those steps detach it (``detach()``, ``.data``: writes through it are not recorded)."""

    __slots__ = ("base", "steps", "detached")

    def __init__(self, base, steps, detached):
        self.base, self.steps, self.detached = base, steps, detached


def link(parent, out, step, *, detach=False):
    """Records `out` (just made from `parent` by the engine step ``step(handle) -> handle``)
    as a view of `parent`'s base. Returns `out`."""
    v = getattr(parent, "_view", None)
    if v is None:
        out._view = _View(parent, (step,), detach)
        base = parent
    else:
        out._view = _View(v.base, v.steps + (step,), v.detached or detach)
        base = v.base
    refs = getattr(base, "_views", None)
    if refs is None:
        refs = base._views = []
    elif len(refs) >= 16 and len(refs) & (len(refs) - 1) == 0:
        refs[:] = [r for r in refs if r() is not None]  # amortised: at powers of two
    refs.append(weakref.ref(out))
    return out


def _live_views(base):
    refs = getattr(base, "_views", None)
    if not refs:
        return []
    live = [t for t in (r() for r in refs) if t is not None]
    if len(live) < len(refs):
        refs[:] = [weakref.ref(t) for t in live]
    return live


def _replay(steps, handle):
    """The handle the view steps make from `handle` (a new reference)."""
    h = handle
    for step in steps:
        nh = E.handle(step(h))
        if h != handle:
            E.release(h)
        h = nh
    return E.handle(E.detach(h)) if h == handle else h  # a new reference in every case


def _refresh(base):
    """Makes every live view of `base` again from its current handle: the same storage, with
    the base's new autograd history."""
    for view in _live_views(base):
        view._replace(_replay(view._view.steps, base._h))


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


def _base(t):
    """The tensor whose history a recorded write into `t` reaches: its base when `t` is a view,
    None for a detached one (``detach()``, ``.data``: writes through it are not recorded)."""
    v = getattr(t, "_view", None)
    if v is None:
        return None
    return None if v.detached else v.base


def _written(t, base, result):
    """After an in-place write: when it was recorded, the base (or `t`) takes the new history
    the engine made, and its views are made again from it."""
    if result is not None:
        owner = t if base is None else base
        owner._replace(result)
        _refresh(owner)
    return t


def fill(t, value, op):
    """Sets every element of `t` to the scalar `value` ((float, int, kind) as the engine takes
    it), expanded views included. Returns `t`."""
    base = _base(t)
    return _written(t, base, E.fill(t._h, *value, 0 if base is None else base._h, op))


def write_at(t, items, src, value, op):
    """Writes the tensor `src` (or, when None, the scalar `value`) at ``t[items]``, basic items
    only, with no view made here. Returns `t`."""
    base = _base(t)
    if base is None:
        base = t  # the written elements are a view of t, and so of its base
    s = (0.0, 0, E.SCALAR_FLOAT) if value is None else value
    result = E.write_at(t._h, items, 0 if src is None else src._h, *s, base._h, op)
    return _written(t, None if base is t else base, result)


def assign(t, value, op, *, fill=False, same_kind=False, result=False):
    """Writes `value` (a lucid.Tensor broadcast to `t`'s shape, converted to its dtype and
    device) into `t`'s elements, in place. `fill`: `value` is one value, which may be written
    into an expanded view. `same_kind`: `value` is an arithmetic result, which may not be of a
    higher kind than `t` (a float into an integer tensor). `result`: `value` is the in-place
    op's own result, made for this write: what its backward saved of it becomes `t` as
    written, so that a later write into `t` makes that backward refuse, as in PyTorch.
    Returns `t`."""
    base = _base(t)
    flags = ((E.ASSIGN_FILL if fill else 0) | (E.ASSIGN_SAME_KIND if same_kind else 0)
             | (E.ASSIGN_RESULT if result else 0))
    return _written(t, base, E.assign(t._h, value._h, 0 if base is None else base._h, flags, op))


def set_data(t, value):
    """``t.data = value``: `t` takes `value`'s storage (and shape, dtype, device), keeping its
    own requires_grad. Views taken of `t` before keep the old storage, as in PyTorch."""
    from ._tensor import Tensor
    if not isinstance(value, Tensor):
        raise TypeError(f"data must be a lucid.Tensor, got {type(value).__name__}")
    if t.requires_grad and not value.dtype.is_floating_point:
        raise TypeError(f".data: a tensor that requires grad needs floating-point data, got {value.dtype}")
    for view in _live_views(t):
        view._view = None  # from now on a tensor of its own over the old storage
    t._views = None
    v = getattr(t, "_view", None)
    if v is not None:  # no longer a view of its base either
        refs = getattr(v.base, "_views", None) or []
        refs[:] = [r for r in refs if r() is not t]
        t._view = None
    flag = t.requires_grad and t.is_leaf
    h = E.handle(E.detach(value._h))
    if flag:
        leaf = E.handle(E.set_requires_grad(h, True))
        E.release(h)
        h = leaf
    t._replace(h)


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
