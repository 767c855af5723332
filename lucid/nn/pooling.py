"""Pooling layers: max, average, adaptive, power-average (LP), fractional max and max-unpooling,
in 1, 2 and 3 dimensions, over ``functional``'s forms."""

from __future__ import annotations

from . import functional as F
from .module import Module


class _MaxPoolNd(Module):
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = bool(return_indices), bool(ceil_mode)

    def forward(self, input):
        return type(self)._fn(
            input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode, self.return_indices
        )

    def extra_repr(self):
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool1d(_MaxPoolNd):
    """The max over each window of [N, C, L] or [C, L] input (see ``functional.max_pool1d``)."""

    _fn = F.max_pool1d


class MaxPool2d(_MaxPoolNd):
    """The max over each window of [N, C, H, W] or [C, H, W] input (see
    ``functional.max_pool2d``)."""

    _fn = F.max_pool2d


class MaxPool3d(_MaxPoolNd):
    """The max over each window of [N, C, D, H, W] or [C, D, H, W] input (see
    ``functional.max_pool3d``)."""

    _fn = F.max_pool3d


class _AvgPoolNd(Module):
    def __init__(
        self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
    ):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, bool(ceil_mode), bool(count_include_pad)
        self.divisor_override = divisor_override

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """The mean over each window of [N, C, L] or [C, L] input (see ``functional.avg_pool1d``)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """The mean over each window of [N, C, H, W] or [C, H, W] input (see
    ``functional.avg_pool2d``)."""

    def forward(self, input):
        return F.avg_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )


class AvgPool3d(_AvgPoolNd):
    """The mean over each window of [N, C, D, H, W] or [C, D, H, W] input (see
    ``functional.avg_pool3d``)."""

    def forward(self, input):
        return F.avg_pool3d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )


class _AdaptiveAvgPoolNd(Module):
    _fn = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return type(self)._fn(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """Averages over the windows that split L into ``output_size`` cells."""

    _fn = F.adaptive_avg_pool1d


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Averages over the windows that split each plane into ``output_size`` cells (None keeps
    a dimension)."""

    _fn = F.adaptive_avg_pool2d


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """Averages over the windows that split each volume into ``output_size`` cells (None keeps
    a dimension)."""

    _fn = F.adaptive_avg_pool3d


class _AdaptiveMaxPoolNd(Module):
    _fn = None

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, bool(return_indices)

    def forward(self, input):
        return type(self)._fn(input, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """The max over the windows that split L into ``output_size`` cells."""

    _fn = F.adaptive_max_pool1d


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """The max over the windows that split each plane into ``output_size`` cells."""

    _fn = F.adaptive_max_pool2d


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """The max over the windows that split each volume into ``output_size`` cells."""

    _fn = F.adaptive_max_pool3d


class _LPPoolNd(Module):
    _fn = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, bool(ceil_mode)

    def forward(self, input):
        return type(self)._fn(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"ceil_mode={self.ceil_mode}"
        )


class LPPool1d(_LPPoolNd):
    """The ``norm_type``-norm over each window of [N, C, L] or [C, L] input."""

    _fn = F.lp_pool1d


class LPPool2d(_LPPoolNd):
    """The ``norm_type``-norm over each window of [N, C, H, W] or [C, H, W] input."""

    _fn = F.lp_pool2d


class LPPool3d(_LPPoolNd):
    """The ``norm_type``-norm over each window of [N, C, D, H, W] or [C, D, H, W] input."""

    _fn = F.lp_pool3d


class _FractionalMaxPoolNd(Module):
    _fn = None

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None):
        super().__init__()
        if (output_size is None) == (output_ratio is None):
            raise ValueError(f"{type(self).__name__}: give exactly one of output_size and output_ratio")
        self.kernel_size, self.output_size, self.output_ratio = kernel_size, output_size, output_ratio
        self.return_indices = bool(return_indices)
        # A buffer, as PyTorch's: saved and loaded with the state dict when given.
        self.register_buffer("_random_samples", _random_samples)

    def forward(self, input):
        return type(self)._fn(
            input,
            self.kernel_size,
            self.output_size,
            self.output_ratio,
            self.return_indices,
            _random_samples=self._random_samples,
        )


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Max pooling over windows at pseudo-random steps (see ``functional.fractional_max_pool2d``)."""

    _fn = F.fractional_max_pool2d


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Max pooling over 3-D windows at pseudo-random steps (see
    ``functional.fractional_max_pool3d``)."""

    _fn = F.fractional_max_pool3d


class _MaxUnpoolNd(Module):
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, input, indices, output_size=None):
        return type(self)._fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The inverse of MaxPool1d: values placed at their indices, zeros elsewhere."""

    _fn = F.max_unpool1d


class MaxUnpool2d(_MaxUnpoolNd):
    """The inverse of MaxPool2d: values placed at their indices, zeros elsewhere."""

    _fn = F.max_unpool2d


class MaxUnpool3d(_MaxUnpoolNd):
    """The inverse of MaxPool3d: values placed at their indices, zeros elsewhere."""

    _fn = F.max_unpool3d
