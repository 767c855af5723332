from __future__ import annotations

from .. import _C
from .._tensor import Tensor
from .._core import result as _result


class Parameter(Tensor):
    """A tensor that is a module's learnable parameter: registered by ``Module`` when
    assigned as an attribute, and requiring gradients by default."""

    __slots__ = ()

    def __new__(cls, data: Tensor, requires_grad: bool = True):
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter expects a lucid.Tensor, got {type(data).__name__}")
        if requires_grad and not data.dtype.is_floating_point:
            raise TypeError(f"only floating-point tensors can be parameters that require gradients, got {data.dtype}")
        return _result(_C.tensor_set_requires_grad(data._h, bool(requires_grad)), cls)

    def __init__(self, data=None, requires_grad=True):
        pass

    @classmethod
    def _rebuild(cls, array, dtype_name, device, requires_grad):
        """Unpickles a parameter (see Tensor.__reduce_ex__)."""
        return cls(Tensor._rebuild(array, dtype_name, device, False), requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()
