"""LayerNorm, GroupNorm, BatchNorm1d/2d/3d, RMSNorm, InstanceNorm1d/2d/3d and LocalResponseNorm."""

from __future__ import annotations

import warnings

from .._ops import creation as _creation
from .._grad_mode import no_grad
from .._types import check_dtype, float32, int64
from . import functional as F
from .module import Module
from .parameter import Parameter
from .._types import as_index


def _filled(shape, value, dtype, device):
    d = float32 if dtype is None else check_dtype(dtype)
    return _creation.full(tuple(shape), value, dtype=d, device=device)


class LayerNorm(Module):
    """Normalises over the trailing ``normalized_shape``; float32 under autocast."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device="cpu", dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = tuple(as_index(s) for s in shape)
        self.eps = float(eps)
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_filled(self.normalized_shape, 1.0, dtype, device))
            if bias:
                self.bias = Parameter(_filled(self.normalized_shape, 0.0, dtype, device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Normalises each of ``num_groups`` channel groups; float32 under autocast."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device="cpu", dtype=None, *, bias=True):
        super().__init__()
        self.num_groups, self.num_channels = as_index(num_groups), as_index(num_channels)
        if self.num_groups <= 0 or self.num_channels % self.num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.eps, self.affine = float(eps), affine
        if affine:
            self.weight = Parameter(_filled((self.num_channels,), 1.0, dtype, device))
            if bias:
                self.bias = Parameter(_filled((self.num_channels,), 0.0, dtype, device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


def _per_channel_state(module, n, affine, track_running_stats, dtype, device, bias=True):
    """A batch or instance norm's per-channel weight and bias (ones and zeros; None without
    `affine`, no bias without `bias`) and running statistics (None without
    `track_running_stats`), as PyTorch's."""
    if affine:
        module.weight = Parameter(_filled((n,), 1.0, dtype, device))
        if bias:
            module.bias = Parameter(_filled((n,), 0.0, dtype, device))
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)
    if track_running_stats:
        # Running statistics stay float32 whatever the parameters' dtype.
        module.register_buffer("running_mean", _filled((n,), 0.0, float32, device))
        module.register_buffer("running_var", _filled((n,), 1.0, float32, device))
        module.register_buffer("num_batches_tracked", _creation.zeros((), dtype=int64, device=device))
    else:
        module.register_buffer("running_mean", None)
        module.register_buffer("running_var", None)
        module.register_buffer("num_batches_tracked", None)


class _BatchNorm(Module):
    _dims: tuple = ()

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=True,
        track_running_stats=True,
        device="cpu",
        dtype=None,
        *,
        bias=True,
    ):
        super().__init__()
        self.num_features = as_index(num_features)
        self.eps, self.momentum = float(eps), momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _per_channel_state(self, self.num_features, affine, track_running_stats, dtype, device, bias)

    def forward(self, input):
        x = input
        if x.ndim not in self._dims:
            raise ValueError(
                f"{type(self).__name__}: expected {' or '.join(f'{d}-D' for d in self._dims)} input, "
                f"got shape {x.shape}"
            )
        use_batch_stats = self.training or self.running_mean is None
        momentum = self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if momentum is None:  # a cumulative moving average
                momentum = 1.0 / self.num_batches_tracked.item()
        # The running statistics are updated in place.
        return F._batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, use_batch_stats, momentum or 0.0, self.eps
        )

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of [N, C] or [N, C, L] input."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of [N, C, H, W] input."""

    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of [N, C, D, H, W] input."""

    _dims = (5,)


class RMSNorm(Module):
    """Root-mean-square normalisation over the trailing ``normalized_shape``:
    ``x / sqrt(mean(x**2) + eps) * weight`` (see ``functional.rms_norm``; ``eps=None`` is the
    machine epsilon of the float32 computation). ``weight`` starts at ones."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = tuple(as_index(s) for s in shape)
        if not self.normalized_shape or any(s <= 0 for s in self.normalized_shape):
            raise ValueError(f"RMSNorm: normalized_shape must be positive sizes, got {normalized_shape!r}")
        self.eps = None if eps is None else float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        if self.elementwise_affine:
            self.weight = Parameter(_filled(self.normalized_shape, 1.0, dtype, device))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self):
        if self.weight is not None:
            with no_grad():
                self.weight.fill_(1.0)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class _InstanceNorm(Module):
    _dims: int = 0

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=False,
        track_running_stats=False,
        device=None,
        dtype=None,
        *,
        bias=True,
    ):
        super().__init__()
        self.num_features = as_index(num_features)
        if self.num_features <= 0:
            raise ValueError(f"{type(self).__name__}: num_features must be positive, got {num_features!r}")
        self.eps, self.momentum = float(eps), momentum
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        _per_channel_state(self, self.num_features, self.affine, self.track_running_stats, dtype, device, bias)

    def forward(self, input):
        x = input
        d = self._dims
        if x.ndim not in (d + 1, d + 2):
            raise ValueError(
                f"{type(self).__name__}: expected {d + 1}-D (unbatched) or {d + 2}-D input, got shape {tuple(x.shape)}"
            )
        unbatched = x.ndim == d + 1
        if unbatched:
            x = x.unsqueeze(0)
        if x.shape[1] != self.num_features:
            if self.affine:
                raise ValueError(
                    f"{type(self).__name__}: expected input with {self.num_features} channels "
                    f"(dimension {0 if unbatched else 1}), got shape {tuple(x.shape)}"
                )
            warnings.warn(
                f"{type(self).__name__}: the input's {x.shape[1]} channels differ from num_features "
                f"({self.num_features}), which is not used because affine=False",
                stacklevel=2,
            )
        use_input_stats = self.training or not self.track_running_stats
        # As PyTorch's, instance norm leaves num_batches_tracked alone; momentum None is 0.
        y = F.instance_norm(
            x,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            use_input_stats,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )
        return y.squeeze(0) if unbatched else y

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class InstanceNorm1d(_InstanceNorm):
    """Normalises each channel of each sample of [N, C, L] (or unbatched [C, L]) input over its
    length; ``affine`` adds a per-channel scale and shift. With ``track_running_stats`` the
    running statistics (the batch means of the per-sample ones) are kept in training mode and
    used in eval mode, as PyTorch does."""

    _dims = 1


class InstanceNorm2d(_InstanceNorm):
    """Normalises each channel of each sample of [N, C, H, W] (or unbatched [C, H, W]) input
    over its plane; ``affine`` adds a per-channel scale and shift. With ``track_running_stats``
    the running statistics (the batch means of the per-sample ones) are kept in training mode
    and used in eval mode, as PyTorch does."""

    _dims = 2


class InstanceNorm3d(_InstanceNorm):
    """Normalises each channel of each sample of [N, C, D, H, W] (or unbatched [C, D, H, W])
    input over its volume (see :class:`InstanceNorm2d`)."""

    _dims = 3


class LocalResponseNorm(Module):
    """Divides each element by a power of the mean square over ``size`` neighbouring channels
    (see ``functional.local_response_norm``)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size = as_index(size)
        self.alpha, self.beta, self.k = float(alpha), float(beta), float(k)

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
