"""Convolution layers (1-, 2- and 3-D, and their transposes), their lazy forms that take
``in_channels`` from the first input, and the block layers Unfold, Fold and ChannelShuffle."""

from __future__ import annotations

import math

from . import functional as F
from .layers import uniform_parameter
from .module import Module
from .._types import as_index

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(v, n, what):
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,) * n
    if len(t) == 1:
        t = t * n
    if len(t) != n:
        raise ValueError(f"{what} must be an int or a {n}-tuple, got {v!r}")
    return tuple(as_index(x) for x in t)


class _ConvNd(Module):
    _n = 2
    _transposed = False

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        output_padding=0,
        device="cpu",
        dtype=None,
    ):
        super().__init__()
        n, name = self._n, type(self).__name__
        self.in_channels, self.out_channels = as_index(in_channels), as_index(out_channels)
        self.groups = as_index(groups)
        if self.groups <= 0:
            raise ValueError(f"groups must be a positive integer, got {groups}")
        if (self.in_channels % self.groups and self.in_channels) or self.out_channels % self.groups:
            raise ValueError(
                f"in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by groups ({groups})"
            )
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got {padding_mode!r}")
        if self._transposed and padding_mode != "zeros":
            raise ValueError(f"{name}: only padding_mode 'zeros' is supported")
        self.kernel_size = _tuple(kernel_size, n, "kernel_size")
        self.stride = _tuple(stride, n, "stride")
        self.dilation = _tuple(dilation, n, "dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid") or self._transposed:
                raise ValueError(f"{name}: padding must be ints, 'valid' or 'same', got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _tuple(padding, n, "padding")
        self.padding_mode = padding_mode
        self.output_padding = _tuple(output_padding, n, "output_padding")
        self.transposed = self._transposed
        self._device, self._dtype, self._bias = device, dtype, bool(bias)
        if self.in_channels or not isinstance(self, _LazyMixin):
            self._make_parameters()
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def _make_parameters(self):
        if self._transposed:
            shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        else:
            shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        # PyTorch's default: kaiming_uniform(a=√5) for weights, which is ±1/√fan_in (fan_in from
        # the weight's second dimension), and the same bound for the bias.
        fan_in = shape[1] * math.prod(self.kernel_size)
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        self.weight = uniform_parameter(shape, bound, self._dtype, self._device)
        if self._bias:
            self.bias = uniform_parameter((self.out_channels,), bound, self._dtype, self._device)
        else:
            self.register_parameter("bias", None)

    def _conv(self, x):
        n = self._n
        if self.padding_mode == "zeros":
            return self._fn(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        if self.padding == "same":
            total = [d * (k - 1) for k, d in zip(self.kernel_size, self.dilation)]
            sides = [(t // 2, t - t // 2) for t in total]
        elif self.padding == "valid":
            sides = [(0, 0)] * n
        else:
            sides = [(p, p) for p in self.padding]
        pads = [v for pair in reversed(sides) for v in pair]
        mode = {"reflect": "reflect", "replicate": "replicate", "circular": "circular"}[self.padding_mode]
        return self._fn(F.pad(x, pads, mode), self.weight, self.bias, self.stride, 0, self.dilation, self.groups)

    def forward(self, input):
        return self._conv(input)

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
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _ForwardConvNd(_ConvNd):
    """The convolutions' PyTorch signature: no output_padding (the transposed ones' only)."""

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        device="cpu",
        dtype=None,
    ):
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            padding_mode,
            device=device,
            dtype=dtype,
        )


class Conv1d(_ForwardConvNd):
    """1-D convolution over [N, C, L] or [C, L] input."""

    _n = 1
    _fn = staticmethod(F.conv1d)


class Conv2d(_ForwardConvNd):
    """2-D convolution over [N, C, H, W] or [C, H, W] input; lower precision under autocast."""

    _n = 2
    _fn = staticmethod(F.conv2d)


class Conv3d(_ForwardConvNd):
    """3-D convolution over [N, C, D, H, W] or [C, D, H, W] input."""

    _n = 3
    _fn = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups=1,
        bias=True,
        dilation=1,
        padding_mode="zeros",
        device="cpu",
        dtype=None,
    ):
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            padding_mode,
            output_padding,
            device=device,
            dtype=dtype,
        )

    def _output_padding(self, input, output_size):
        """The output padding that gives ``output_size`` (PyTorch's forward argument)."""
        if output_size is None:
            return self.output_padding
        n = self._n
        size = [as_index(s) for s in output_size]
        if len(size) > n:
            size = size[-n:]
        if len(size) != n:
            raise ValueError(
                f"{type(self).__name__}: output_size must have {n} or {n + 2} elements, got {tuple(output_size)}"
            )
        pads = []
        for i in range(n):
            base = (
                (input.shape[-n + i] - 1) * self.stride[i]
                - 2 * self.padding[i]
                + self.dilation[i] * (self.kernel_size[i] - 1)
                + 1
            )
            extra = size[i] - base
            if not 0 <= extra < max(self.stride[i], self.dilation[i]):
                raise ValueError(
                    f"{type(self).__name__}: requested output size {tuple(size)} is not reachable from "
                    f"input shape {tuple(input.shape)}"
                )
            pads.append(extra)
        return tuple(pads)

    def forward(self, input, output_size=None):
        return self._fn(
            input,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            self._output_padding(input, output_size),
            self.groups,
            self.dilation,
        )


class ConvTranspose1d(_ConvTransposeNd):
    """The transpose of Conv1d (weights [in, out / groups, k])."""

    _n = 1
    _fn = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """The transpose of Conv2d (weights [in, out / groups, kh, kw])."""

    _n = 2
    _fn = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """The transpose of Conv3d (weights [in, out / groups, kd, kh, kw])."""

    _n = 3
    _fn = staticmethod(F.conv_transpose3d)


class _LazyMixin:
    """A convolution whose ``in_channels`` comes from its first input; it then becomes the
    plain layer (``cls_to_become``), as in PyTorch."""

    cls_to_become = None

    def _materialise(self, input):
        self.in_channels = input.shape[0 if input.ndim == self._n + 1 else 1]
        if self.in_channels % self.groups:
            raise ValueError(
                f"{type(self).__name__}: in_channels ({self.in_channels}) must be divisible by groups ({self.groups})"
            )
        self._make_parameters()
        self.__class__ = self.cls_to_become

    def forward(self, input, *args, **kwargs):
        self._materialise(input)
        return self.forward(input, *args, **kwargs)


def _lazy(base, n):
    if base._transposed:

        def __init__(
            self,
            out_channels,
            kernel_size,
            stride=1,
            padding=0,
            output_padding=0,
            groups=1,
            bias=True,
            dilation=1,
            padding_mode="zeros",
            device="cpu",
            dtype=None,
        ):
            base.__init__(
                self,
                0,
                out_channels,
                kernel_size,
                stride,
                padding,
                output_padding,
                groups,
                bias,
                dilation,
                padding_mode,
                device=device,
                dtype=dtype,
            )
    else:

        def __init__(
            self,
            out_channels,
            kernel_size,
            stride=1,
            padding=0,
            dilation=1,
            groups=1,
            bias=True,
            padding_mode="zeros",
            device="cpu",
            dtype=None,
        ):
            base.__init__(
                self,
                0,
                out_channels,
                kernel_size,
                stride,
                padding,
                dilation,
                groups,
                bias,
                padding_mode,
                device=device,
                dtype=dtype,
            )

    name = f"Lazy{base.__name__}"
    doc = f"{base.__name__} with ``in_channels`` taken from the first input."
    return type(
        name, (_LazyMixin, base), {"__init__": __init__, "cls_to_become": base, "__doc__": doc, "__module__": __name__}
    )


LazyConv1d = _lazy(Conv1d, 1)
LazyConv2d = _lazy(Conv2d, 2)
LazyConv3d = _lazy(Conv3d, 3)
LazyConvTranspose1d = _lazy(ConvTranspose1d, 1)
LazyConvTranspose2d = _lazy(ConvTranspose2d, 2)
LazyConvTranspose3d = _lazy(ConvTranspose3d, 3)


class Unfold(Module):
    """Sliding blocks of [N, C, H, W] input as columns (see ``functional.unfold``)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, stride={self.stride}"


class Fold(Module):
    """Columns summed back into ``[N, C, *output_size]`` (see ``functional.fold``)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (
            f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
            f"padding={self.padding}, stride={self.stride}"
        )


class ChannelShuffle(Module):
    """Regroups the channels of ``[N, C, *]`` input (see ``functional.channel_shuffle``)."""

    def __init__(self, groups):
        super().__init__()
        self.groups = as_index(groups)

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
