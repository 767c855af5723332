"""Conv1d, Conv2d and ConvTranspose2d."""

from __future__ import annotations

import math

from . import functional as F
from .layers import uniform_parameter
from .module import Module
from .._types import as_index


def _tuple(v, n, what):
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,) * n
    if len(t) != n:
        raise ValueError(f"{what} must be an int or a {n}-tuple, got {v!r}")
    return tuple(as_index(x) for x in t)


class _ConvNd(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, n, transposed,
                 output_padding=0, device="cpu", dtype=None):
        super().__init__()
        self.in_channels, self.out_channels = as_index(in_channels), as_index(out_channels)
        self.groups = as_index(groups)
        if self.groups <= 0:
            raise ValueError(f"groups must be a positive integer, got {groups}")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by "
                             f"groups ({groups})")
        self.kernel_size = _tuple(kernel_size, n, "kernel_size")
        self.stride = _tuple(stride, n, "stride")
        self.padding = 0 if padding == "valid" else _tuple(padding, n, "padding")
        self.dilation = _tuple(dilation, n, "dilation")
        self.output_padding = _tuple(output_padding, n, "output_padding")
        self.transposed = transposed
        if transposed:
            shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        else:
            shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        # PyTorch's default: kaiming_uniform(a=√5) for weights, which is ±1/√fan_in, and the
        # same bound for the bias.
        fan_in = shape[1] * math.prod(self.kernel_size)
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        self.weight = uniform_parameter(shape, bound, dtype, device)
        if bias:
            self.bias = uniform_parameter((self.out_channels,), bound, dtype, device)
        else:
            self.register_parameter("bias", None)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * len(self.kernel_size):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.kernel_size):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class Conv1d(_ConvNd):
    """1-D convolution over [N, C, L] input."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 device="cpu", dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, 1, False,
                         device=device, dtype=dtype)

    def forward(self, x):
        return F.conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv2d(_ConvNd):
    """2-D convolution over [N, C, H, W] input; lower precision under autocast."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 device="cpu", dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, 2, False,
                         device=device, dtype=dtype)

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class ConvTranspose2d(_ConvNd):
    """The transpose of Conv2d (weights [in, out/groups, kh, kw])."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, device="cpu", dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, 2, True,
                         output_padding=output_padding, device=device, dtype=dtype)

    def forward(self, x):
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                  self.groups, self.dilation)
