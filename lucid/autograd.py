"""Custom autograd functions: ``lucid.autograd.Function``, as PyTorch's ``torch.autograd.Function``.

Subclass it with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)`` and call
``MyFunction.apply(*args)``. ``forward`` runs with grad mode off; its tensor results are
recorded in the engine's graph, whose backward pass calls ``backward`` with the gradient of
the output and expects one value per ``forward`` argument: a gradient for a tensor argument
(or ``None``), ``None`` for anything else. Gradients are checked against their inputs' shapes
and devices and cast to their dtypes.

With several tensor outputs, ``backward`` receives one gradient per output, with zeros for the
outputs that received none, and runs once for each output that receives a gradient.
"""

from __future__ import annotations

import itertools

from . import _C
from ._ops.creation import zeros
from ._grad_mode import is_grad_enabled, no_grad
from ._tensor import Tensor, differentiated
from ._core import result as _result


class FunctionCtx:
    """What ``forward`` hands to ``backward``: tensors saved with :meth:`save_for_backward`,
    ``needs_input_grad``, and any attributes set on it."""

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward takes tensors (or None), got {type(t).__name__}")
        self._saved = tensors

    @property
    def saved_tensors(self) -> tuple:
        return getattr(self, "_saved", ())


# Contexts by id for the engine's callbacks; an id the engine has released is dropped at the
# next apply (never inside the callback, which may run while the engine holds a lock).
_contexts: dict = {}
_released: list = []
_ids = itertools.count(1)


def _backward(context, grad_handle):
    """The engine's call for one context's backward: one gradient handle per tensor input."""
    grad = _result(grad_handle)
    ctx, index, outputs, tensor_args, n_args, name = _contexts[context]
    grads = [grad if k == index else zeros(*o.shape, dtype=o.dtype, device=o.device) for k, o in enumerate(outputs)]
    result = type(ctx)._function.backward(ctx, *grads)
    result = result if isinstance(result, tuple) else (result,)
    if len(result) != n_args:
        raise ValueError(
            f"{name}.backward returned {len(result)} values, expected {n_args} "
            f"(one per forward argument, None where there is no gradient)"
        )
    keep = ctx.__dict__.setdefault("_returned", [])
    handles = []
    for position in tensor_args:
        g = result[position]
        if g is not None and not isinstance(g, Tensor):
            raise TypeError(
                f"{name}.backward returned a {type(g).__name__} for argument {position}; "
                f"expected a lucid.Tensor or None"
            )
        handles.append(0 if g is None else g._h)
        if g is not None:
            keep.append(g)  # alive until the engine releases the context
    return handles


def _release(context):
    _released.append(context)


_registered = False


def _register():
    global _registered
    if not _registered:
        _C.custom_function_callbacks(_backward, _release)
        _registered = True


class _FunctionMeta(type):
    def __init__(cls, name, bases, namespace):
        super().__init__(name, bases, namespace)
        # Each subclass gets a context class that knows it, for backward.
        cls._ctx_class = type(f"{name}Ctx", (FunctionCtx,), {"_function": cls})


class Function(metaclass=_FunctionMeta):
    """Base class of functions with a hand-written backward (see the module docstring).

    Examples
    --------
    >>> class Square(lucid.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x
    ...     @staticmethod
    ...     def backward(ctx, grad):
    ...         (x,) = ctx.saved_tensors
    ...         return 2 * x * grad
    >>> y = Square.apply(lucid.tensor([3.0], requires_grad=True))
    """

    def __init__(self, *args, **kwargs):
        raise TypeError(f"{type(self).__name__} is used through {type(self).__name__}.apply(...), not instantiated")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define a static forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass must define a static backward(ctx, *grad_outputs)")

    @classmethod
    def apply(cls, *args, **kwargs):
        while _released:
            _contexts.pop(_released.pop(), None)
        name = cls.__name__
        ctx = cls._ctx_class()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        with no_grad():
            result = cls.forward(ctx, *args, **kwargs)
        tensor_args = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not is_grad_enabled() or not any(ctx.needs_input_grad):
            return result
        results = result if isinstance(result, tuple) else (result,)
        outputs = [r for r in results if isinstance(r, Tensor)]
        if not outputs:
            return result
        _register()
        inputs = [args[i] for i in tensor_args]
        tracked = []
        for index, output in enumerate(outputs):
            context = next(_ids)
            _contexts[context] = (ctx, index, outputs, tensor_args, len(args), name)
            try:
                tracked.append(_result(_C.custom_function_record(name, [t._h for t in inputs], output._h, context)))
            except BaseException:
                _contexts.pop(context, None)
                raise
        swap = iter(tracked)
        results = tuple(next(swap) if isinstance(r, Tensor) else r for r in results)
        return results if isinstance(result, tuple) else results[0]


def _seed_handles(grads, n, fn, what):
    """One gradient handle (0 for None) per differentiated tensor."""
    if grads is None:
        return [0] * n
    grads = [grads] if isinstance(grads, Tensor) else list(grads)
    if len(grads) != n:
        raise ValueError(f"{fn}(): {what} has {len(grads)} entries, expected {n} (one per tensor)")
    for i, g in enumerate(grads):
        if g is not None and not isinstance(g, Tensor):
            raise TypeError(f"{fn}(): {what}[{i}] must be a lucid.Tensor or None, got {type(g).__name__}")
    return [0 if g is None else g._h for g in grads]


def _no_create_graph(fn, create_graph):
    if create_graph:
        raise NotImplementedError(
            f"{fn}(create_graph=True): lucid does not record the backward pass (no higher-order gradients)"
        )


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates the gradients of `tensors` (weighted by `grad_tensors`, one each; None is 1
    for a one-element tensor) into the leaves' ``.grad`` in one backward pass, as
    ``torch.autograd.backward``. With `inputs`, only those tensors accumulate. The graph is
    freed afterwards unless `retain_graph`."""
    _no_create_graph("backward", create_graph)
    tensors = differentiated(tensors, "backward", "tensors")
    seeds = _seed_handles(grad_tensors, len(tensors), "backward", "grad_tensors")
    ins = [] if inputs is None else [t._h for t in differentiated(inputs, "backward", "inputs")]
    if inputs is not None and not ins:
        raise ValueError("backward(): inputs is empty; pass the tensors to accumulate into, or None")
    _C.autograd_backward([t._h for t in tensors], seeds, ins, bool(retain_graph))


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph=False,
    only_inputs=True,
    allow_unused=None,
    is_grads_batched=False,
    materialize_grads=False,
):
    """The gradients of `outputs` (weighted by `grad_outputs`, one each; None is 1 for a
    one-element output) with respect to each of `inputs`, as ``torch.autograd.grad``: a tuple
    with one tensor per input, and no ``.grad`` changed. Hooks registered on the inputs run on
    their gradients. An input the outputs do not depend on is an error unless `allow_unused`
    (its gradient is then None, or zeros with `materialize_grads`). The graph is freed
    afterwards unless `retain_graph`.

    Examples
    --------
    >>> x = lucid.tensor([1.0, 2.0], requires_grad=True)
    >>> lucid.autograd.grad((x * x).sum(), x)
    (tensor([2., 4.]),)
    """
    _no_create_graph("grad", create_graph)
    if is_grads_batched:
        raise NotImplementedError("grad(is_grads_batched=True) is not supported")
    outputs = differentiated(outputs, "grad", "outputs")
    inputs = differentiated(inputs, "grad", "inputs")
    seeds = _seed_handles(grad_outputs, len(outputs), "grad", "grad_outputs")
    if allow_unused is None:
        allow_unused = materialize_grads
    elif materialize_grads and not allow_unused:
        raise ValueError("grad(): materialize_grads=True needs allow_unused to be True or None")
    handles = _C.autograd_grad(
        [t._h for t in outputs], seeds, [t._h for t in inputs], bool(retain_graph), bool(allow_unused)
    )
    found = [_result(h) if h else None for h in handles]
    if materialize_grads:
        found = [zeros(*t.shape, dtype=t.dtype, device=t.device) if g is None else g for g, t in zip(found, inputs)]
    return tuple(found)


__all__ = ["Function", "FunctionCtx", "backward", "grad"]
