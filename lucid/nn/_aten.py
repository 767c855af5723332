"""PyTorch's aten-level forms of the layers' functions, which PyTorch also lists at its top level
(``torch.native_layer_norm``) or under ``torch.ops.aten``: the normalisations that return their
saved statistics, the backward helpers, the integer-coded grid samplers and ``constant_pad_nd``.
Each is composed of lucid's own ops, with PyTorch's signature and result tuple; lucid exports
them at its top level and in :mod:`lucid.ops`."""

from __future__ import annotations

import math
import numbers

from .._ops import creation as _creation
from .._ops.elementwise import where as _where
from .._tensor import Tensor
from .._types import as_index, bool_ as _bool, int64 as _int64, uint8
from . import functional as F


def _tensor(t, what, fn):
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: {what} must be a lucid.Tensor, got {type(t).__name__}")
    return t


def _optional(t, what, fn, shape):
    if t is None:
        return None
    _tensor(t, what, fn)
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{fn}: {what} must have shape {tuple(shape)}, got {tuple(t.shape)}")
    return t


def _float_arg(v, what, fn):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{fn}: {what} must be a number, got {type(v).__name__}")
    return float(v)


def _floating(t, fn):
    if not t.dtype.is_floating_point:
        raise TypeError(f"{fn}: expected a floating-point input, got {t.dtype}")


# ---- normalisations with their statistics ---------------------------------------------------


def native_layer_norm(input: Tensor, normalized_shape, weight, bias, eps: float):
    """:func:`lucid.nn.functional.layer_norm`, with the mean and 1/sqrt(var + eps) of each
    normalised slice: ``(out, mean, rstd)``, the statistics of shape ``input.shape[:-k] + (1,) * k``
    (k = ``len(normalized_shape)``), without gradient (as PyTorch's)."""
    fn = "native_layer_norm"
    _tensor(input, "input", fn)
    _floating(input, fn)
    shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else tuple(normalized_shape)
    shape = tuple(as_index(s) for s in shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k :]) != shape:
        raise ValueError(
            f"{fn}: normalized_shape {shape} must be the (non-empty) trailing dimensions of the input, "
            f"got input of shape {tuple(input.shape)}"
        )
    _optional(weight, "weight", fn, shape)
    _optional(bias, "bias", fn, shape)
    eps = _float_arg(eps, "eps", fn)
    out = F.layer_norm(input, shape, weight, bias, eps)
    dims = tuple(range(input.ndim - k, input.ndim))
    x = input.detach()
    if x.numel() == 0:
        stats = _creation.zeros(tuple(input.shape[: input.ndim - k]) + (1,) * k, dtype=input.dtype, device=input.device)
        return out, stats, stats.clone()
    mean, var = F._moments(x, dims)
    return out, mean, (var + eps).rsqrt()


def native_group_norm(input: Tensor, weight, bias, N: int, C: int, HxW: int, group: int, eps: float):
    """:func:`lucid.nn.functional.group_norm` of input ``[N, C, *]`` (``HxW`` the product of ``*``)
    with ``group`` groups: ``(out, mean, rstd)``, the statistics of shape ``(N, group)``. All three
    are differentiable, as PyTorch's."""
    fn = "native_group_norm"
    _tensor(input, "input", fn)
    _floating(input, fn)
    n, c, hw, g = (as_index(v) for v in (N, C, HxW, group))
    if g <= 0 or c % g:
        raise ValueError(f"{fn}: C ({c}) must be divisible by group ({g})")
    if input.ndim < 2 or input.shape[0] != n or input.shape[1] != c or input.numel() != n * c * hw:
        raise ValueError(
            f"{fn}: input of shape {tuple(input.shape)} is not [N={n}, C={c}, *] with {hw} positions per channel"
        )
    _optional(weight, "weight", fn, (c,))
    _optional(bias, "bias", fn, (c,))
    eps = _float_arg(eps, "eps", fn)
    x = input.reshape(n, g, (c // g) * hw)
    if x.shape[2] == 0:
        raise ValueError(f"{fn}: cannot normalise groups of no element (input of shape {tuple(input.shape)})")
    mean = x.mean(2)
    d = x - mean.unsqueeze(2)
    rstd = ((d * d).mean(2) + eps).rsqrt()
    y = (d * rstd.unsqueeze(2)).reshape(*input.shape)
    per_channel = (c,) + (1,) * (input.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(*per_channel)
    if bias is not None:
        y = y + bias.reshape(*per_channel)
    if not input.requires_grad and any(t is not None and t.requires_grad for t in (weight, bias)):
        # As PyTorch's, the statistics are results of an op with an argument that requires grad,
        # so they require grad too (of zero towards the weight and bias, on which they do not depend).
        mean, rstd = (
            _with_zero_grad(t, [w for w in (weight, bias) if w is not None and w.requires_grad]) for t in (mean, rstd)
        )
    return y, mean, rstd


def _with_zero_grad(t, sources):
    """``t``, in the graph of ``sources`` with a zero gradient towards them."""
    never = _creation.zeros(tuple(t.shape), dtype=_bool, device=t.device)
    for s in sources:
        t = _where(never, s.sum(), t)
    return t


def _batch_stats(input, eps):
    """The mean and 1/sqrt(biased var + eps) per channel of [N, C, *] input, without gradient."""
    x = input.detach()
    dims = (0,) + tuple(range(2, x.ndim))
    mean, var = F._moments(x, dims)
    return mean.reshape(x.shape[1]), (var + eps).rsqrt().reshape(x.shape[1])


def _batch_norm_checked(fn, input, weight, bias, running_mean, running_var, training, momentum, eps):
    _tensor(input, "input", fn)
    _floating(input, fn)
    if input.ndim < 2:
        raise ValueError(f"{fn}: expected an input [N, C, *] of at least 2 dimensions, got shape {tuple(input.shape)}")
    c = input.shape[1]
    for t, what in ((weight, "weight"), (bias, "bias"), (running_mean, "running_mean"), (running_var, "running_var")):
        _optional(t, what, fn, (c,))
    if not isinstance(training, bool):
        raise TypeError(f"{fn}: training must be a bool, got {type(training).__name__}")
    if not training and (running_mean is None or running_var is None):
        raise ValueError(f"{fn}: running_mean and running_var must be given in evaluation mode")
    momentum, eps = _float_arg(momentum, "momentum", fn), _float_arg(eps, "eps", fn)
    out = F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    if not training:
        empty = _creation.zeros((0,), dtype=input.dtype, device=input.device)
        return out, empty, empty.clone()
    mean, invstd = _batch_stats(input, eps)
    return out, mean, invstd


def native_batch_norm(
    input: Tensor, weight, bias, running_mean, running_var, training: bool, momentum: float, eps: float
):
    """:func:`lucid.nn.functional.batch_norm` (its arguments in aten's order) with the batch's
    statistics: ``(out, save_mean, save_invstd)``, per channel in training mode (the running
    statistics given are updated in place), empty in evaluation mode. The statistics have no
    gradient, as PyTorch's."""
    return _batch_norm_checked(
        "native_batch_norm", input, weight, bias, running_mean, running_var, training, momentum, eps
    )


def _native_batch_norm_legit(input: Tensor, weight, bias, *args):
    """:func:`native_batch_norm` in PyTorch's two overloads: ``(input, weight, bias, running_mean,
    running_var, training, momentum, eps)`` and, without running statistics, ``(input, weight,
    bias, training, momentum, eps)``."""
    fn = "_native_batch_norm_legit"
    if len(args) == 5:
        running_mean, running_var, training, momentum, eps = args
    elif len(args) == 3:
        running_mean = running_var = None
        training, momentum, eps = args
    else:
        raise TypeError(
            f"{fn}: expected (input, weight, bias, running_mean, running_var, training, momentum, eps) "
            f"or (input, weight, bias, training, momentum, eps), got {3 + len(args)} arguments"
        )
    return _batch_norm_checked(fn, input, weight, bias, running_mean, running_var, training, momentum, eps)


def _batch_norm_with_update(
    input: Tensor, weight, bias, running_mean: Tensor, running_var: Tensor, momentum: float, eps: float
):
    """Training-mode batch normalisation that updates ``running_mean`` and ``running_var`` in
    place: ``(out, save_mean, save_invstd, reserve)``, ``reserve`` an empty uint8 tensor (the
    space cuDNN would keep; lucid keeps none)."""
    fn = "_batch_norm_with_update"
    _tensor(running_mean, "running_mean", fn)
    _tensor(running_var, "running_var", fn)
    out, mean, invstd = _batch_norm_checked(fn, input, weight, bias, running_mean, running_var, True, momentum, eps)
    return out, mean, invstd, _creation.zeros((0,), dtype=uint8, device=input.device)


# ---- backward helpers ------------------------------------------------------------------------


def _softmax_backward_data(grad_output: Tensor, output: Tensor, dim: int, input_dtype):
    """The gradient of softmax's input from the gradient of its ``output`` along ``dim``:
    ``output * (grad_output - sum(grad_output * output, dim))``, in ``input_dtype``.
    Differentiable in both tensors."""
    fn = "_softmax_backward_data"
    _tensor(grad_output, "grad_output", fn)
    _tensor(output, "output", fn)
    if tuple(grad_output.shape) != tuple(output.shape):
        raise ValueError(
            f"{fn}: grad_output of shape {tuple(grad_output.shape)} and output of shape "
            f"{tuple(output.shape)} must have one shape"
        )
    _floating(output, fn)
    d = as_index(dim)
    if not -max(output.ndim, 1) <= d < max(output.ndim, 1):
        raise IndexError(f"{fn}: dim {dim} is out of range for a tensor of {output.ndim} dimensions")
    d = d % max(output.ndim, 1)
    g = grad_output.to(output.dtype)
    if output.ndim == 0:
        r = output * (g - g * output)
    else:
        r = output * (g - (g * output).sum(d, keepdim=True))
    return r.to(input_dtype) if input_dtype is not None else r


def native_dropout_backward(grad_output: Tensor, mask: Tensor, scale: float) -> Tensor:
    """The gradient of dropout's input: ``grad_output * mask * scale`` (``mask`` the bool
    tensor of kept entries)."""
    fn = "native_dropout_backward"
    _tensor(grad_output, "grad_output", fn)
    _tensor(mask, "mask", fn)
    if mask.dtype != _bool:
        raise TypeError(f"{fn}: mask must be a bool tensor, got {mask.dtype}")
    if tuple(mask.shape) != tuple(grad_output.shape):
        raise ValueError(
            f"{fn}: mask of shape {tuple(mask.shape)} does not match grad_output of shape {tuple(grad_output.shape)}"
        )
    return grad_output * mask.to(grad_output.dtype) * _float_arg(scale, "scale", fn)


def max_pool2d_with_indices_backward(
    grad_output: Tensor, self: Tensor, kernel_size, stride, padding, dilation, ceil_mode: bool, indices: Tensor
) -> Tensor:
    """The gradient of max_pool2d's input ``self`` [N, C, H, W] or [C, H, W]: each entry of
    ``grad_output`` added at the position ``indices`` (from :func:`max_pool2d` with
    ``return_indices=True``) gives within its plane. The pooling's arguments are checked against
    the shapes; the result's gradient with respect to ``self`` is zero (as PyTorch's)."""
    fn = "max_pool2d_with_indices_backward"
    for t, what in ((grad_output, "grad_output"), (self, "self"), (indices, "indices")):
        _tensor(t, what, fn)
    if self.ndim not in (3, 4):
        raise ValueError(f"{fn}: expected self of shape [N, C, H, W] or [C, H, W], got {tuple(self.shape)}")
    if indices.dtype.is_floating_point or indices.dtype == _bool:
        raise TypeError(f"{fn}: indices must be an integer tensor, got {indices.dtype}")
    if tuple(indices.shape) != tuple(grad_output.shape):
        raise ValueError(
            f"{fn}: indices of shape {tuple(indices.shape)} do not match grad_output of shape "
            f"{tuple(grad_output.shape)}"
        )
    kernel = F._ntuple(kernel_size, 2, "kernel_size", fn)
    strides = F._ntuple(kernel_size if stride is None or stride == () else stride, 2, "stride", fn)
    pads = F._ntuple(padding, 2, "padding", fn)
    dil = F._ntuple(dilation, 2, "dilation", fn)
    sizes = tuple(self.shape[-2:])
    out = tuple(
        F._pool_size(n, k, s, p, d, bool(ceil_mode)) for n, k, s, p, d in zip(sizes, kernel, strides, pads, dil)
    )
    if tuple(grad_output.shape) != tuple(self.shape[:-2]) + out:
        raise ValueError(
            f"{fn}: grad_output of shape {tuple(grad_output.shape)} is not the pooled shape "
            f"{tuple(self.shape[:-2]) + out} of self {tuple(self.shape)}"
        )
    lead = tuple(self.shape[:-2])
    planes = math.prod(lead)
    hw = sizes[0] * sizes[1]
    g = grad_output.to(self.dtype).reshape(planes, -1) if grad_output.numel() else None
    base = _creation.zeros((planes, hw), dtype=self.dtype, device=self.device)
    r = base if g is None else base.scatter_add(1, indices.to(_int64).reshape(planes, -1), g)
    r = r.reshape(*self.shape)
    # In the graph of ``self`` with a zero gradient: where() picks r everywhere.
    keep = _creation.zeros(tuple(self.shape), dtype=_bool, device=self.device)
    return _where(keep, self, r)


# ---- samplers and padding --------------------------------------------------------------------

_INTERPOLATION = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")


def _grid_sampler(fn, input, grid, interpolation_mode, padding_mode, align_corners, ndim):
    _tensor(input, "input", fn)
    _tensor(grid, "grid", fn)
    if input.ndim != ndim:
        raise ValueError(f"{fn}: expected a {ndim}-D input, got shape {tuple(input.shape)}")
    modes = _INTERPOLATION if ndim == 4 else _INTERPOLATION[:2]
    i, p = as_index(interpolation_mode), as_index(padding_mode)
    if not 0 <= i < len(modes):
        raise ValueError(
            f"{fn}: interpolation_mode must be one of {tuple(range(len(modes)))} "
            f"({', '.join(modes)}), got {interpolation_mode!r}"
        )
    if not 0 <= p < len(_PADDING):
        raise ValueError(f"{fn}: padding_mode must be 0 (zeros), 1 (border) or 2 (reflection), got {padding_mode!r}")
    if not isinstance(align_corners, bool):
        raise TypeError(f"{fn}: align_corners must be a bool, got {type(align_corners).__name__}")
    return F.grid_sample(input, grid, modes[i], _PADDING[p], align_corners)


def grid_sampler_2d(
    input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> Tensor:
    """:func:`lucid.nn.functional.grid_sample` of [N, C, H, W] input with the modes as aten's
    integers: ``interpolation_mode`` 0 bilinear, 1 nearest, 2 bicubic; ``padding_mode`` 0 zeros,
    1 border, 2 reflection."""
    return _grid_sampler("grid_sampler_2d", input, grid, interpolation_mode, padding_mode, align_corners, 4)


def grid_sampler_3d(
    input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> Tensor:
    """:func:`grid_sampler_2d` for [N, C, D, H, W] input (``interpolation_mode`` 0 trilinear or 1
    nearest)."""
    return _grid_sampler("grid_sampler_3d", input, grid, interpolation_mode, padding_mode, align_corners, 5)


def constant_pad_nd(input: Tensor, pad, value=0) -> Tensor:
    """:func:`lucid.nn.functional.pad` in ``"constant"`` mode: ``pad`` is (left, right) of the last
    dimension, then of the one before…, negative values crop; filled with ``value``."""
    _tensor(input, "input", "constant_pad_nd")
    if not isinstance(value, numbers.Number) or isinstance(value, complex):
        raise TypeError(f"constant_pad_nd: value must be a number, got {type(value).__name__}")
    return F.pad(input, pad, "constant", value)


# ---- attention -------------------------------------------------------------------------------


def _safe_softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """softmax along ``dim``, but 0 (not NaN) along a slice whose entries are all -inf (a fully
    masked row of attention scores)."""
    fn = "_safe_softmax"
    _tensor(input, "input", fn)
    x = input if dtype is None else input.to(dtype)
    _floating(x, fn)
    d = as_index(dim)
    masked = x == -math.inf
    if x.ndim:
        masked = masked.all(d, keepdim=True)
    zero = _creation.zeros((), dtype=x.dtype, device=x.device)
    # The masked slices are softmaxed as zeros, so that neither their values nor their (zero)
    # gradients pass through a NaN.
    return _where(masked, zero, _where(masked, zero, x).softmax(d))


def _scaled_dot_product_flash_attention_for_cpu(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    attn_mask=None,
    scale=None,
):
    """Attention of query [B, H, L, E] over key [B, H, S, E] and value [B, H, S, Ev]:
    ``(output [B, H, L, Ev], logsumexp [B, H, L])``, ``logsumexp`` that of the scaled (masked)
    scores over S, without gradient. ``attn_mask`` (bool, or added to the scores) broadcasts to
    [B, H, L, S]; ``is_causal`` keeps key j <= query i."""
    fn = "_scaled_dot_product_flash_attention_for_cpu"
    for t, what in ((query, "query"), (key, "key"), (value, "value")):
        _tensor(t, what, fn)
        if t.ndim != 4:
            raise ValueError(f"{fn}: {what} must be 4-D [B, H, L, E], got shape {tuple(t.shape)}")
        _floating(t, fn)
    if query.shape[-1] != key.shape[-1] or key.shape[2] != value.shape[2]:
        raise ValueError(
            f"{fn}: query {tuple(query.shape)}, key {tuple(key.shape)} and value "
            f"{tuple(value.shape)} do not fit (E of query and key, S of key and value)"
        )
    if is_causal and attn_mask is not None:
        raise ValueError(f"{fn}: give attn_mask or is_causal, not both")
    p = _float_arg(dropout_p, "dropout_p", fn)
    s = 1.0 / math.sqrt(query.shape[-1]) if scale is None else _float_arg(scale, "scale", fn)
    scores = query.matmul(key.transpose(-2, -1)) * s
    L, S = query.shape[2], key.shape[2]
    if is_causal:
        allowed = _creation.ones((L, S), dtype=_bool, device=query.device).tril()
        scores = scores.masked_fill(~allowed, -math.inf)
    elif attn_mask is not None:
        _tensor(attn_mask, "attn_mask", fn)
        if attn_mask.dtype == _bool:
            scores = scores.masked_fill(~attn_mask, -math.inf)
        else:
            scores = scores + attn_mask.to(scores.dtype)
    lse = scores.logsumexp(-1)
    weights = (scores - lse.unsqueeze(-1)).exp()
    if p > 0:
        weights = F.dropout(weights, p, True)
    return weights.matmul(value), lse.detach()
