"""In-place updates on an immutable engine.

Engine tensors never change. An in-place op (``x.add_(y)``, ``x[i] = v``, ``x += y``) computes
the new value and points the same Python tensor at it. PyTorch's views share storage with the
tensor they view, so a write to one is seen by the other; here each Python view records how
it was made from its *base* (the tensor it ultimately views), and a write through any of them
is carried to the base and from the base to every live view:

- writing to a view writes its elements into the base (an ``index_put`` at the positions the
  view covers), then every live view of the base is made again from the new base;
- writing to a base makes its live views again.

So a base and its views never disagree. Writes through an expanded view (one element seen at
several places) raise, as in PyTorch. Views hold their base alive, as in PyTorch; a base
holds its views weakly.
"""

from __future__ import annotations

import contextlib
import weakref

from . import _engine as E


class _View:
    """How a view was made: its base, the engine steps from the base's handle to its own, and
    whether those steps detach it or let it see one element at several places."""

    __slots__ = ("base", "steps", "detached", "overlapping")

    def __init__(self, base, steps, detached, overlapping):
        self.base, self.steps, self.detached, self.overlapping = base, steps, detached, overlapping


def link(parent, out, step, *, detach=False, overlapping=False):
    """Records `out` (just made from `parent` by the engine step ``step(handle) -> handle``)
    as a view of `parent`'s base. Returns `out`."""
    v = getattr(parent, "_view", None)
    if v is None:
        out._view = _View(parent, (step,), detach, overlapping)
        base = parent
    else:
        out._view = _View(v.base, v.steps + (step,), v.detached or detach, v.overlapping or overlapping)
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


def _is_leaf_requiring_grad(t):
    return t.requires_grad and E.grad_fn(t._h) is None


def _rebind(t, result):
    """Points `t` at `result` (a handle or record, taken over). A leaf that requires grad stays
    one and keeps its ``.grad`` (the update happens under no_grad)."""
    if _is_leaf_requiring_grad(t):
        handle = E.handle(result)
        grad = E.grad(t._h)
        leaf = E.handle(E.set_requires_grad(handle, True))
        E.release(handle)
        t._replace(leaf)
        if grad:
            E.set_grad(leaf, grad)
            E.release(grad)
    else:
        t._replace(result)


def _refresh(base):
    """Makes every live view of `base` again from its current value."""
    for view in _live_views(base):
        view._replace(_replay(view._view.steps, base._h))


def check_writable(t, op):
    """Raises where PyTorch refuses an in-place op on `t`: a leaf that requires grad, or a view
    of one, outside ``no_grad``; an expanded view."""
    v = getattr(t, "_view", None)
    if E.is_grad_enabled():
        if _is_leaf_requiring_grad(t):
            raise RuntimeError(f"{op}: a leaf tensor that requires grad cannot be changed in place while gradients "
                               f"are recorded; update it under lucid.no_grad() (or through .data)")
        if v is not None and not v.detached and _is_leaf_requiring_grad(v.base):
            raise RuntimeError(f"{op}: a view of a leaf tensor that requires grad cannot be changed in place while "
                               f"gradients are recorded; update it under lucid.no_grad()")
    if v is not None and v.overlapping:
        raise RuntimeError(f"{op}: cannot write in place to an expanded view: several of its elements are one "
                           f"element of the tensor it views; write to a clone() instead")


def assign(t, value, op):
    """Makes `value` (a lucid.Tensor of `t`'s shape, dtype and device, or castable to its dtype)
    the value of `t`, carried to its base and views. Returns `t`."""
    check_writable(t, op)
    if value.shape != t.shape:
        raise RuntimeError(f"{op}: the result has shape {tuple(value.shape)}, which does not match the tensor's "
                           f"shape {tuple(t.shape)} (an in-place op cannot broadcast its target)")
    if value.dtype is not t.dtype:
        value = _cast_for(t, value, op)
    if value.device != t.device:
        raise RuntimeError(f"{op}: expected a value on {t.device}, got one on {value.device}")
    v = getattr(t, "_view", None)
    if v is None:
        _rebind(t, _reference(value))
        _refresh(t)
        return t
    base = v.base
    if v.detached and base.requires_grad and not base.is_leaf:
        raise RuntimeError(f"{op}: cannot change a tensor with autograd history through .data or detach(); "
                           f"change the tensor itself, or clone() the detached one")
    untracked = v.detached or _is_leaf_requiring_grad(base)
    with _no_grad() if untracked else contextlib.nullcontext():
        if all(step is E.detach for step in v.steps):
            new_base = _reference(value)  # the whole base, seen through .data / detach()
        else:
            new_base = _written(base, v.steps, value)
    _rebind(base, E.handle(E.detach(new_base)) if untracked else new_base)
    if untracked:
        E.release(new_base)
    _refresh(base)
    return t


def _reference(value):
    """A new reference to `value`'s values, with its autograd history."""
    return E.handle(E.reshape(value._h, value.shape, False))


def _written(base, steps, value):
    """A handle to `base` with `value` written at the elements the view `steps` covers."""
    from ._creation import arange
    from ._tensor import Tensor
    with _no_grad():
        ids = arange(base.numel(), device=base.device)
        grid = Tensor._wrap(E.reshape(ids._h, base.shape, False))
        positions = Tensor._wrap(_replay(steps, grid._h))
        flat_positions = positions.reshape(-1)
    flat_base = Tensor._wrap(E.reshape(base._h, (-1,), False))
    flat_value = Tensor._wrap(E.reshape(value._h, (-1,), False))
    written = Tensor._wrap(E.index_put(flat_base._h, [(E.INDEX_TENSOR, (0, 0, 0), 0, flat_positions._h)],
                                       flat_value._h, False))
    return E.handle(E.reshape(written._h, base.shape, False))


def _no_grad():
    from ._grad_mode import no_grad
    return no_grad()


def update(t, result):
    """Makes the engine tensor `result` (a handle or record, taken over; `t`'s shape and dtype,
    and already the leaf `t` should be) the new value of `t`: the optimizers' and ``nn.init``'s
    parameter update."""
    if getattr(t, "_view", None) is None:
        t._replace(result)
        if getattr(t, "_views", None):
            _refresh(t)
        return
    from ._tensor import Tensor
    with _no_grad():
        assign(t, Tensor._wrap(result), "update")


_WIDER = {"bool": 0, "int32": 1, "int64": 1, "float16": 2, "bfloat16": 2, "float32": 2}


def _cast_for(t, value, op):
    """`value` converted to `t`'s dtype, refusing what PyTorch refuses: a floating result into
    an integer or bool tensor, an integer result into a bool tensor."""
    if _WIDER[value.dtype.name] > _WIDER[t.dtype.name]:
        raise RuntimeError(f"{op}: the result type {value.dtype} can't be cast to the tensor's dtype {t.dtype} "
                           f"in place")
    return value.to(t.dtype)


def set_data(t, value):
    """``t.data = value``: `t` takes `value`'s values (and shape, dtype, device), keeping its own
    requires_grad; views of `t` see the new values."""
    from ._tensor import Tensor
    if not isinstance(value, Tensor):
        raise TypeError(f"data must be a lucid.Tensor, got {type(value).__name__}")
    if getattr(t, "_view", None) is not None:
        raise RuntimeError("cannot assign .data of a view; assign to the tensor it views")
    live = _live_views(t)
    if live and (value.shape != t.shape or value.dtype is not t.dtype or value.device != t.device):
        raise RuntimeError(f".data: the tensor has {len(live)} live view(s), so its new data must keep its shape, "
                           f"dtype and device")
    if t.requires_grad and value.requires_grad is False and not value.dtype.is_floating_point:
        raise TypeError(f".data: a tensor that requires grad needs floating-point data, got {value.dtype}")
    flag = t.requires_grad and t.is_leaf
    h = E.handle(E.detach(value._h))
    if flag:
        leaf = E.handle(E.set_requires_grad(h, True))
        E.release(h)
        h = leaf
    t._replace(h)
    _refresh(t)
