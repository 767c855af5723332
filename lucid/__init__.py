"""lucid: mixed-precision deep learning on Apple Silicon, with a Swift engine.

>>> import lucid
>>> x = lucid.randn(8, 4, device="metal")
>>> with lucid.amp.autocast():
...     y = x @ x.T        # float16 inside the scope
"""

import math

from ._types import bfloat16, bool_, device, dtype, float16, float32, float64, iinfo, int8, int16, int32, int64, uint8
from ._types import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format
from ._tensor import TYPED as _TYPED, Tensor
from ._ops.creation import *  # noqa: F401,F403  (tensor, zeros, arange, randn …)
from ._ops.elementwise import *  # noqa: F401,F403  (add, exp, where, maximum …)
from ._ops.reduce import *  # noqa: F401,F403  (sum, mean, max, softmax …)
from ._ops.shape import *  # noqa: F401,F403  (reshape, transpose, cat, stack, tril …)
from ._ops.indexing import *  # noqa: F401,F403  (gather, index_select, scatter …)
from ._ops.composed import *  # noqa: F401,F403  (sort, topk, randint, multinomial)
from ._ops.sparse import *  # noqa: F401,F403  (sparse_coo_tensor, spmm)
from ._ops.linalg import *  # noqa: F401,F403  (det, svd, lu, cholesky, matrix_exp …)
from ._ops import composed as _composed, creation as _creation, elementwise as _elementwise, indexing as _indexing
from ._ops import linalg as _linalg, reduce as _reduce, shape as _shape, sparse as _sparse
from ._grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from ._memory import empty_cache, max_memory_allocated, memory_allocated, reset_peak_memory_stats
from ._threads import get_num_threads, set_num_threads
from ._settings import get_default_dtype, get_float32_matmul_precision, set_default_dtype, set_float32_matmul_precision
from .serialization import load, save

# lucid.distributed imports mpi4py only when init() runs, so importing it here costs nothing.
from . import (
    accelerator,
    amp,
    autograd,
    backends,
    cuda,
    distributed,
    distributions,
    linalg,
    metal,
    nn,
    optim,
    sparse,
    special,
    testing,
    utils,
)
from . import masked, signal
from .amp import autocast

# PyTorch's aten-level functions at the top level (torch.native_layer_norm …); all of them, by aten name, in
# lucid.ops.aten.
from .nn._aten import (
    _native_batch_norm_legit,
    _safe_softmax,
    _scaled_dot_product_flash_attention_for_cpu,
    _softmax_backward_data,
    constant_pad_nd,
    grid_sampler_2d,
    grid_sampler_3d,
    native_batch_norm,
    native_group_norm,
    native_layer_norm,
)
from . import ops

inf, nan, pi, e = math.inf, math.nan, math.pi, math.e

# The layouts, by name (a sparse tensor's ``layout`` is "sparse_coo"), for ``layout=`` arguments.
strided, sparse_coo = "strided", "sparse_coo"


class Size(tuple):
    """A shape, as torch.Size: a tuple of ints (``tensor.shape`` compares equal to one)."""

    def numel(self) -> int:
        return math.prod(self)


half = float16
double = float64
long = int64
short = int16

__version__ = "0.1.0"

__all__ = [
    "Tensor",
    "dtype",
    "device",
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "int32",
    "int64",
    "bool_",
    "half",
    "double",
    "long",
    "uint8",
    "int8",
    "int16",
    "short",
    "iinfo",
    "memory_format",
    "contiguous_format",
    "channels_last",
    "channels_last_3d",
    "preserve_format",
    *_creation.__all__,
    *_elementwise.__all__,
    *_reduce.__all__,
    *_shape.__all__,
    *_indexing.__all__,
    *_composed.__all__,
    *_sparse.__all__,
    *_linalg.__all__,
    "memory_allocated",
    "max_memory_allocated",
    "reset_peak_memory_stats",
    "empty_cache",
    "save",
    "load",
    "set_num_threads",
    "get_num_threads",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "inference_mode",
    "accelerator",
    "amp",
    "autograd",
    "backends",
    "cuda",
    "distributed",
    "distributions",
    "sparse",
    "special",
    "testing",
    "autocast",
    "Generator",
    "Size",
    "inf",
    "nan",
    "pi",
    "e",
    "get_default_dtype",
    "set_default_dtype",
    "set_float32_matmul_precision",
    "get_float32_matmul_precision",
    "nn",
    "optim",
    "metal",
    "utils",
]

__all__ += [
    "masked",
    "signal",
    "strided",
    "sparse_coo",
    "ops",
    "native_layer_norm",
    "native_group_norm",
    "native_batch_norm",
    "constant_pad_nd",
    "grid_sampler_2d",
    "grid_sampler_3d",
]

globals().update(_TYPED)  # FloatTensor, LongTensor, … (PyTorch's legacy tensor types)
__all__ += list(_TYPED)

# PyTorch-style names that shadow builtins are set last, so nothing above sees them.
globals()["bool"] = bool_
globals()["float"] = float32
globals()["int"] = int32
