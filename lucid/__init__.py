"""lucid: mixed-precision deep learning on Apple Silicon, with a Swift engine.

>>> import lucid
>>> x = lucid.randn(8, 4, device="metal")
>>> with lucid.amp.autocast():
...     y = x @ x.T        # float16 inside the scope
"""

from ._types import bfloat16, bool_, device, dtype, float16, float32, int32, int64
from ._tensor import Tensor
from ._creation import (arange, empty, empty_like, from_numpy, full, full_like, manual_seed, ones, ones_like, rand,
                        rand_like, randn, randn_like, tensor, zeros, zeros_like)
from ._grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from ._memory import empty_cache, max_memory_allocated, memory_allocated, reset_peak_memory_stats
from ._threads import get_num_threads, set_num_threads
from .serialization import load, save
from ._functions import *  # noqa: F401,F403  (where, cat, stack, maximum, …)
from ._functions import __all__ as _function_names
from ._composed import argsort, multinomial, randint, sort, topk, tril, triu
# lucid.distributed imports mpi4py only when init() runs, so importing it here costs nothing.
from . import accelerator, amp, autograd, backends, distributed, metal, nn, optim, utils


half = float16
long = int64

__version__ = "0.1.0"

__all__ = ["Tensor", "dtype", "device", "float32", "float16", "bfloat16", "int32", "int64", "bool_", "half", "long",
           *_function_names,
           "tensor", "from_numpy", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like", "empty_like",
           "rand_like", "randn_like", "arange", "rand", "randn", "randint", "multinomial", "tril", "triu", "sort", "argsort", "topk",
           "manual_seed", "memory_allocated", "max_memory_allocated", "reset_peak_memory_stats", "empty_cache", "save", "load",
           "set_num_threads", "get_num_threads",
           "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "accelerator", "amp", "autograd", "backends", "distributed", "nn", "optim", "metal", "utils"]

# PyTorch-style names that shadow builtins are set last, so nothing above sees them.
globals()["bool"] = bool_
globals()["float"] = float32
globals()["int"] = int32
