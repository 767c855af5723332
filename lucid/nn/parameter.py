from __future__ import annotations

from .. import _engine as E
from .._tensor import Tensor


class Parameter(Tensor):
    """A tensor that is a module's learnable parameter: registered by ``Module`` when
    assigned as an attribute, and requiring gradients by default."""

    __slots__ = ()

    def __new__(cls, data: Tensor, requires_grad: bool = True):
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter expects a lucid.Tensor, got {type(data).__name__}")
        if requires_grad and not data.dtype.is_floating_point:
            raise TypeError(f"only floating-point tensors can be parameters that require gradients, got {data.dtype}")
        return cls._wrap(E.set_requires_grad(data._h, bool(requires_grad)))

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()
