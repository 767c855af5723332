"""Linear, the activations, dropout, upsampling and Sequential."""

from __future__ import annotations

import math
import operator
from collections import OrderedDict

from .._ops import creation as _creation
from .._types import check_dtype, float32
from . import functional as F
from .module import Module
from .parameter import Parameter
from .._types import as_index


def uniform_parameter(shape, bound: float, dtype=None, device="cpu") -> Parameter:
    """A parameter drawn uniformly from ±bound (PyTorch's default layer initialisation)."""
    d = float32 if dtype is None else check_dtype(dtype)
    return Parameter(((_creation.rand(*shape) * 2.0 - 1.0) * bound).to(d).to(device))


class Linear(Module):
    """``y = x @ weight.T + bias``, weights drawn uniformly from ±1/sqrt(in_features)
    (PyTorch's default initialisation)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device="cpu", dtype=None):
        super().__init__()
        self.in_features = as_index(in_features)
        self.out_features = as_index(out_features)
        if self.in_features < 0 or self.out_features < 0:
            raise ValueError(f"Linear features must be non-negative, got {in_features} and {out_features}")
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        self.weight = uniform_parameter((self.out_features, self.in_features), bound, dtype, device)
        if bias:
            self.bias = uniform_parameter((self.out_features,), bound, dtype, device)
        else:
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class _Inplace(Module):
    """An activation with PyTorch's ``inplace`` flag: the input tensor itself is updated."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = bool(inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU(_Inplace):
    def forward(self, input):
        return F.relu(input, self.inplace)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = float(negative_slope), bool(inplace)

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, self.approximate)


class SiLU(_Inplace):
    def forward(self, input):
        return F.silu(input, self.inplace)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Identity(Module):
    """Returns its input; takes and ignores any constructor arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Flatten(Module):
    """Merges dimensions ``start_dim`` to ``end_dim`` (by default all but the batch one)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = as_index(start_dim), as_index(end_dim)

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class PixelShuffle(Module):
    """``[*, C * r**2, H, W]`` to ``[*, C, H * r, W * r]`` (see ``functional.pixel_shuffle``)."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = as_index(upscale_factor)

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """The inverse of PixelShuffle (see ``functional.pixel_unshuffle``)."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = as_index(downscale_factor)

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        if self.dim is None:
            raise ValueError("Softmax needs a dim (Softmax(dim=-1) for the last dimension)")
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input):
        if self.dim is None:
            raise ValueError("LogSoftmax needs a dim (LogSoftmax(dim=-1) for the last dimension)")
        return F.log_softmax(input, self.dim)


class Dropout(Module):
    """Zeroes elements with probability ``p`` in training mode; the identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, got {p}")
        self.p, self.inplace = float(p), bool(inplace)

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}" + (", inplace=True" if self.inplace else "")


class Sequential(Module):
    """Runs its modules in order."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                setattr(self, name, self._checked(m))
        else:
            for i, m in enumerate(modules):
                setattr(self, str(i), self._checked(m))

    @staticmethod
    def _checked(m):
        if not isinstance(m, Module):
            raise TypeError(f"Sequential takes Modules, got {type(m).__name__}")
        return m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, i):
        mods = list(self._modules.values())
        if isinstance(i, slice):
            return Sequential(*mods[i])
        return mods[operator.index(i)]

    def append(self, m):
        setattr(self, str(len(self)), self._checked(m))
        return self

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input


class Dropout1d(Dropout):
    """Zeroes whole channels of [N, C, L] (or [C, L]) input with probability ``p`` in training
    mode; the identity in eval mode."""

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    """Zeroes whole channels of [N, C, H, W] input with probability ``p`` in training mode,
    scaling the others by 1/(1-p); the identity in eval mode."""

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class ELU(Module):
    """x where x > 0, else ``alpha``·(exp(x) - 1)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = float(alpha), bool(inplace)

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class PReLU(Module):
    """x where x > 0, else a learned slope times x: one slope (``num_parameters=1``) or one per
    channel (dimension 1 of the input), all starting at ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = as_index(num_parameters)
        if self.num_parameters <= 0:
            raise ValueError(f"PReLU: num_parameters must be positive, got {num_parameters!r}")
        self.init = float(init)
        d = float32 if dtype is None else check_dtype(dtype)
        self.weight = Parameter(_creation.full((self.num_parameters,), self.init, dtype=d, device=device))

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class Upsample(Module):
    """Resizes [N, C, L] or [N, C, H, W] input to ``size`` or by ``scale_factor`` (see
    ``functional.interpolate`` for the modes)."""

    def __init__(
        self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None, recompute_scale_factor=None
    ):
        super().__init__()
        self.size, self.mode, self.align_corners = size, mode, align_corners
        self.scale_factor = (
            tuple(float(s) for s in scale_factor)
            if isinstance(scale_factor, (tuple, list))
            else (float(scale_factor) if scale_factor is not None else None)
        )
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(
            input,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            recompute_scale_factor=self.recompute_scale_factor,
        )

    def extra_repr(self):
        what = f"scale_factor={self.scale_factor}" if self.scale_factor is not None else f"size={self.size}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of [N, C, H, W] input."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of [N, C, H, W] input with the corners aligned (align_corners=True)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "bilinear", True)


class ReLU6(_Inplace):
    """min(max(x, 0), 6)."""

    def forward(self, input):
        return F.relu6(input, self.inplace)


class Hardtanh(Module):
    """x clamped to [``min_val``, ``max_val``]."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        self.min_val, self.max_val, self.inplace = float(min_val), float(max_val), bool(inplace)
        if self.max_val <= self.min_val:
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater than min_val ({min_val})")

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class Hardsigmoid(_Inplace):
    """relu6(x + 3) / 6."""

    def forward(self, input):
        return F.hardsigmoid(input, self.inplace)


class Hardswish(_Inplace):
    """x·relu6(x + 3) / 6."""

    def forward(self, input):
        return F.hardswish(input, self.inplace)


class Mish(_Inplace):
    """x·tanh(softplus(x))."""

    def forward(self, input):
        return F.mish(input, self.inplace)


class SELU(_Inplace):
    """The self-normalising ELU."""

    def forward(self, input):
        return F.selu(input, self.inplace)


class CELU(Module):
    """x where x > 0, else ``alpha``·(exp(x/alpha) - 1)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = float(alpha), bool(inplace)

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Threshold(Module):
    """x where x > ``threshold``, else ``value``."""

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold, self.value, self.inplace = float(threshold), float(value), bool(inplace)

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")


class GLU(Module):
    """a·sigmoid(b) of the two halves of the input along ``dim``."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = as_index(dim)

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSigmoid(Module):
    """log(sigmoid(x))."""

    def forward(self, input):
        return F.logsigmoid(input)


class Softplus(Module):
    """log(1 + exp(beta·x)) / beta, linear where beta·x > ``threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softshrink(Module):
    """x ∓ ``lambd`` outside [-lambd, lambd], 0 inside."""

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = float(lambd)

    def forward(self, input):
        return F.softshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(Softshrink):
    """x outside [-lambd, lambd], 0 inside."""

    def forward(self, input):
        return F.hardshrink(input, self.lambd)


class Softsign(Module):
    """x / (1 + abs(x))."""

    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    """x - tanh(x)."""

    def forward(self, input):
        return F.tanhshrink(input)


class RReLU(Module):
    """Leaky ReLU with a random slope in [``lower``, ``upper``] per element in training mode,
    their mean in eval mode."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        self.lower, self.upper, self.inplace = float(lower), float(upper), bool(inplace)

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class Softmin(Module):
    """softmax(-x) along ``dim``."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels of [N, C, H, W] (or [C, H, W]) input, at each position."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected a 3-D or 4-D input, got shape {tuple(input.shape)}")
        return F.softmax(input, -3)


class Bilinear(Module):
    """``y = x1ᵀ·A·x2 + b`` per output feature, weights drawn uniformly from
    ±1/sqrt(in1_features) (PyTorch's initialisation)."""

    def __init__(
        self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None, dtype=None
    ):
        super().__init__()
        self.in1_features, self.in2_features = as_index(in1_features), as_index(in2_features)
        self.out_features = as_index(out_features)
        if min(self.in1_features, self.in2_features, self.out_features) <= 0:
            raise ValueError(
                f"Bilinear: the features must be positive, got {in1_features}, {in2_features} and {out_features}"
            )
        bound = 1.0 / math.sqrt(self.in1_features)
        dev = "cpu" if device is None else device
        self.weight = uniform_parameter((self.out_features, self.in1_features, self.in2_features), bound, dtype, dev)
        if bias:
            self.bias = uniform_parameter((self.out_features,), bound, dtype, dev)
        else:
            self.register_parameter("bias", None)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


class CosineSimilarity(Module):
    """The cosine similarity of two inputs along ``dim``."""

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = as_index(dim), float(eps)

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """The p-norm distance of two inputs over their last dimension."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = float(p), float(eps), bool(keepdim)

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class Dropout3d(Dropout):
    """Zeroes whole channels of [N, C, D, H, W] input with probability ``p`` in training mode,
    scaling the others by 1/(1-p); the identity in eval mode."""

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(Dropout):
    """Dropout that keeps SELU activations self-normalised (see ``functional.alpha_dropout``)."""

    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(Dropout):
    """Alpha dropout of whole channels (see ``functional.feature_alpha_dropout``)."""

    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training)
