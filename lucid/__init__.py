"""lucid: mixed-precision deep learning on Apple Silicon, with a Swift engine.

>>> import lucid
>>> x = lucid.randn(8, 4, device="metal")
>>> with lucid.amp.autocast():
...     y = x @ x.T        # float16 inside the scope
"""

from ._types import bfloat16, bool_, device, dtype, float16, float32, int32, int64
from ._tensor import Tensor
from ._creation import (arange, from_numpy, full, manual_seed, ones, ones_like, rand, randn, tensor, zeros,
                        zeros_like)
from ._grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from ._memory import max_memory_allocated, memory_allocated, reset_peak_memory_stats
from . import amp, metal, nn, optim


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """torch.matmul semantics; lower precision under autocast."""
    return a @ b


def _elementwise(name, doc):
    def fn(input: Tensor) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}() expects a lucid.Tensor, got {type(input).__name__}")
        return getattr(input, name)()

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


exp = _elementwise("exp", "e**x, elementwise; float32 under autocast.")
log = _elementwise("log", "Natural logarithm, elementwise; float32 under autocast.")
log1p = _elementwise("log1p", "log(1 + x), elementwise; float32 under autocast.")
sqrt = _elementwise("sqrt", "Square root, elementwise.")
rsqrt = _elementwise("rsqrt", "1 / sqrt(x), elementwise; float32 under autocast.")
abs = _elementwise("abs", "Absolute value, elementwise.")
tanh = _elementwise("tanh", "Hyperbolic tangent, elementwise.")
sigmoid = _elementwise("sigmoid", "1 / (1 + e**-x), elementwise.")
relu = _elementwise("relu", "max(x, 0), elementwise.")


half = float16
long = int64

__version__ = "0.1.0"

__all__ = ["Tensor", "dtype", "device", "float32", "float16", "bfloat16", "int32", "int64", "bool_", "half", "long",
           "exp", "log", "log1p", "sqrt", "rsqrt", "abs", "tanh", "sigmoid", "relu",
           "tensor", "from_numpy", "zeros", "ones", "full", "zeros_like", "ones_like", "arange", "rand", "randn",
           "manual_seed", "matmul", "memory_allocated", "max_memory_allocated", "reset_peak_memory_stats", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "amp", "nn",
           "optim", "metal"]

# PyTorch-style names that shadow builtins are set last, so nothing above sees them.
globals()["bool"] = bool_
globals()["float"] = float32
globals()["int"] = int32
