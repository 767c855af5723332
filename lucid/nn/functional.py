"""Functional forms of the layers."""

from __future__ import annotations

import numbers

from .. import _C
from .._ops import writes
from .._grad_mode import no_grad
from .._tensor import Tensor
from .._types import as_index

_UNARY = _C.codes("lucid_unary_op")
_REDUCTIONS = _C.codes("lucid_reduction", "LUCID_REDUCTION_")


def _check(t, what):
    if not isinstance(t, Tensor):
        raise TypeError(f"{what} must be a lucid.Tensor, got {type(t).__name__}")


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``; lower precision under autocast (float32 accumulation)."""
    _check(input, "input")
    _check(weight, "weight")
    if bias is not None:
        _check(bias, "bias")
    return Tensor._wrap(_C.linear(input._h, weight._h, 0 if bias is None else bias._h))


def _out(input, fn, inplace, op):
    """``fn(input)``, or with `inplace` the input updated to it (PyTorch's ``inplace=True``;
    computed from a copy when recorded for autograd, see ``writes.source``)."""
    return writes.assign(input, fn(writes.source(input)), op, result=True) if inplace else fn(input)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    _check(input, "input")
    return _out(input, lambda x: x.relu(), inplace, "relu")


def relu_(input: Tensor) -> Tensor:
    return relu(input, inplace=True)


def _unary(name, input):
    _check(input, "input")
    return Tensor._wrap(_C.unary(_UNARY[name], input._h))


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else ``negative_slope``·x (rounded once into the input's dtype), with
    PyTorch's gradient (``negative_slope`` at 0). One fused engine kernel for float32."""
    _check(input, "input")
    if not isinstance(negative_slope, numbers.Real) or isinstance(negative_slope, bool):
        raise TypeError(f"leaky_relu: negative_slope must be a number, got {negative_slope!r}")
    return _out(input, lambda x: Tensor._wrap(_C.leaky_relu(x._h, float(negative_slope))), inplace, "leaky_relu")


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x·Φ(x) exactly (``approximate="none"``) or with the tanh approximation (``"tanh"``)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return _unary("gelu" if approximate == "none" else "gelu_tanh", input)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x·sigmoid(x)."""
    return _out(input, lambda x: _unary("silu", x), inplace, "silu")


def softplus(input: Tensor) -> Tensor:
    """log(1 + exp(x)), linear above 20 as in PyTorch."""
    return _unary("softplus", input)


def sigmoid(input: Tensor) -> Tensor:
    return _unary("sigmoid", input)


def tanh(input: Tensor) -> Tensor:
    return _unary("tanh", input)


def _h(t, what):
    """The handle of an optional tensor argument (0 for None)."""
    if t is None:
        return 0
    _check(t, what)
    return t._h


def _pair(v, what):
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"{what} must be an int or a pair of ints, got {v!r}")
        return tuple(as_index(x) for x in v)
    try:
        v = as_index(v)
    except TypeError:
        raise TypeError(f"{what} must be an int or a pair of ints, got {v!r}") from None
    return v, v


def _single(v, what):
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"{what} must be an int or a 1-tuple, got {v!r}")
        v = v[0]
    try:
        return as_index(v)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {v!r}") from None


def _reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    return _REDUCTIONS[reduction]


# ---- activations ---------------------------------------------------------------------------

def softmax(input: Tensor, dim: int) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim``; float32 under autocast."""
    _check(input, "input")
    return input.softmax(dim)


def log_softmax(input: Tensor, dim: int) -> Tensor:
    """x - logsumexp(x) along ``dim``; float32 under autocast."""
    _check(input, "input")
    return input.log_softmax(dim)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes elements with probability ``p`` and scales the rest by 1/(1-p) when training."""
    _check(input, "input")
    if (not training or p == 0) and 0 <= p <= 1:
        return input
    return _out(input, lambda x: Tensor._wrap(_C.dropout(x._h, float(p), bool(training))), inplace, "dropout")


# ---- normalisation -------------------------------------------------------------------------

def layer_norm(input: Tensor, normalized_shape, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalises over the trailing ``normalized_shape`` dimensions; float32 under autocast."""
    _check(input, "input")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    return Tensor._wrap(_C.layer_norm(input._h, shape, _h(weight, "weight"), _h(bias, "bias"), float(eps)))


def group_norm(input: Tensor, num_groups: int, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalises each group of channels of ``[N, C, *]`` input; float32 under autocast."""
    _check(input, "input")
    return Tensor._wrap(_C.group_norm(input._h, as_index(num_groups), _h(weight, "weight"), _h(bias, "bias"),
                                     float(eps)))


def _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps):
    """The output; in training mode the running statistics given are updated in place."""
    _check(input, "input")
    y, m, v = _C.batch_norm(input._h, _h(running_mean, "running_mean"), _h(running_var, "running_var"),
                           _h(weight, "weight"), _h(bias, "bias"), bool(training), float(momentum), float(eps))
    if m:
        with no_grad():
            running_mean.copy_(Tensor._wrap(m))
            running_var.copy_(Tensor._wrap(v))
    return Tensor._wrap(y)


def batch_norm(input: Tensor, running_mean=None, running_var=None, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalisation of ``[N, C, *]`` input, computed in float32, returned in the input's
    dtype. In training mode the running statistics given are updated in place."""
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


# ---- convolution and pooling ---------------------------------------------------------------

def conv2d(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    """2-D cross-correlation; lower precision under autocast."""
    _check(input, "input")
    _check(weight, "weight")
    if padding == "valid":
        padding = 0
    params = (*_pair(stride, "stride"), *_pair(padding, "padding"), *_pair(dilation, "dilation"), as_index(groups))
    return Tensor._wrap(_C.conv2d(input._h, weight._h, _h(bias, "bias"), params))


def conv1d(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    """1-D cross-correlation of [N, C, L] input; lower precision under autocast."""
    _check(input, "input")
    _check(weight, "weight")
    if padding == "valid":
        padding = 0
    params = (_single(stride, "stride"), _single(padding, "padding"), _single(dilation, "dilation"),
              as_index(groups))
    return Tensor._wrap(_C.conv1d(input._h, weight._h, _h(bias, "bias"), params))


def conv_transpose2d(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1,
                     dilation=1) -> Tensor:
    """The transpose of conv2d (weights [in, out/groups, kh, kw]); lower precision under autocast."""
    _check(input, "input")
    _check(weight, "weight")
    params = (*_pair(stride, "stride"), *_pair(padding, "padding"), *_pair(output_padding, "output_padding"),
              *_pair(dilation, "dilation"), as_index(groups))
    return Tensor._wrap(_C.conv_transpose2d(input._h, weight._h, _h(bias, "bias"), params))


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor:
    """The max over each window (padding counts as -inf)."""
    _check(input, "input")
    if return_indices:
        raise NotImplementedError("max_pool2d(return_indices=True) is not supported")
    k = _pair(kernel_size, "kernel_size")
    s = k if stride is None or stride == [] else _pair(stride, "stride")
    params = (*k, *s, *_pair(padding, "padding"), *_pair(dilation, "dilation"))
    return Tensor._wrap(_C.max_pool2d(input._h, params, bool(ceil_mode)))


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None) -> Tensor:
    """The mean over each window, with PyTorch's divisor rules."""
    _check(input, "input")
    k = _pair(kernel_size, "kernel_size")
    s = k if stride is None or stride == [] else _pair(stride, "stride")
    divisor = 0 if divisor_override is None else as_index(divisor_override)
    if divisor_override is not None and divisor <= 0:
        raise ValueError(f"divisor_override must be positive, got {divisor_override!r}")
    params = (*k, *s, *_pair(padding, "padding"))
    return Tensor._wrap(_C.avg_pool2d(input._h, params, bool(ceil_mode), bool(count_include_pad), divisor))


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Averages over the windows that split each plane into ``output_size`` cells (None keeps
    a dimension)."""
    _check(input, "input")
    if isinstance(output_size, (tuple, list)) and len(output_size) == 2:
        oh = input.shape[-2] if output_size[0] is None else output_size[0]
        ow = input.shape[-1] if output_size[1] is None else output_size[1]
    else:
        oh, ow = _pair(output_size, "output_size")
    return Tensor._wrap(_C.adaptive_avg_pool2d(input._h, as_index(oh), as_index(ow)))


# ---- attention and embedding ---------------------------------------------------------------

def _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights):
    for t, what in ((query, "query"), (key, "key"), (value, "value")):
        _check(t, what)
    o, w = _C.attention(query._h, key._h, value._h, _h(attn_mask, "attn_mask"), bool(is_causal),
                       None if scale is None else float(scale), float(dropout_p), need_weights)
    return Tensor._wrap(o), (Tensor._wrap(w) if need_weights else None)


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale=None) -> Tensor:
    """softmax(q·kᵀ·scale + mask)·v over the last two dimensions. A bool ``attn_mask`` is True
    where attention is allowed; a float one is added to the scores. The products run in lower
    precision under autocast, the softmax in float32."""
    return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, False)[0]


def _shuffle_factor(input, factor, fn):
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): input must be a lucid.Tensor, got {type(input).__name__}")
    r = as_index(factor)
    if r <= 0:
        raise ValueError(f"{fn}(): the factor must be positive, got {factor}")
    if input.ndim < 3:
        raise RuntimeError(f"{fn}(): expected an input of at least 3 dimensions, got shape {tuple(input.shape)}")
    return r


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``[*, C * r**2, H, W]`` to ``[*, C, H * r, W * r]``: each group of r**2 channels becomes
    an r x r block of pixels (sub-pixel convolution's upsampling)."""
    r = _shuffle_factor(input, upscale_factor, "pixel_shuffle")
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle(): {c} channels are not divisible by upscale_factor**2 = {r * r}")
    n = len(batch)
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*batch, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """The inverse of :func:`pixel_shuffle`: ``[*, C, H * r, W * r]`` to ``[*, C * r**2, H, W]``."""
    r = _shuffle_factor(input, downscale_factor, "pixel_unshuffle")
    *batch, c, hr, wr = input.shape
    if hr % r or wr % r:
        raise RuntimeError(f"pixel_unshuffle(): height {hr} and width {wr} must be divisible by {r}")
    n = len(batch)
    x = input.reshape(*batch, c, hr // r, r, wr // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*batch, c * r * r, hr // r, wr // r)


def embedding(input: Tensor, weight: Tensor, padding_idx=None) -> Tensor:
    """Rows of ``weight`` at the integer ``input``; the ``padding_idx`` row gets no gradient."""
    _check(input, "input")
    _check(weight, "weight")
    return Tensor._wrap(_C.embedding(weight._h, input._h, padding_idx is not None, 0 if padding_idx is None else as_index(padding_idx)))


# ---- losses (float32 under autocast) -------------------------------------------------------

def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    _check(input, "input")
    _check(target, "target")
    return Tensor._wrap(_C.pointwise_loss(_C.LOSS_MSE, input._h, target._h, _reduction(reduction)))


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    _check(input, "input")
    _check(target, "target")
    return Tensor._wrap(_C.pointwise_loss(_C.LOSS_L1, input._h, target._h, _reduction(reduction)))


def nll_loss(input: Tensor, target: Tensor, weight=None, ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class indices under log-probabilities ``[N, C, *]``."""
    _check(input, "input")
    _check(target, "target")
    return Tensor._wrap(_C.nll_loss(input._h, target._h, _h(weight, "weight"), as_index(ignore_index),
                                   _reduction(reduction)))


def cross_entropy(input: Tensor, target: Tensor, weight=None, ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """log_softmax + nll_loss on logits ``[N, C, *]``, with class-index targets (``ignore_index``,
    ``label_smoothing``) or class-probability targets of the input's shape."""
    _check(input, "input")
    _check(target, "target")
    return Tensor._wrap(_C.cross_entropy(input._h, target._h, _h(weight, "weight"), as_index(ignore_index),
                                        _reduction(reduction), float(label_smoothing)))


def binary_cross_entropy(input: Tensor, target: Tensor, weight=None, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of probabilities, with each log clamped at -100 as PyTorch does.
    Like PyTorch, it refuses to run under autocast (its float16 log is unsafe): use
    ``binary_cross_entropy_with_logits``, which also is more stable."""
    _check(input, "input")
    _check(target, "target")
    from ..amp import is_autocast_enabled
    if is_autocast_enabled(input.device.type):
        raise RuntimeError("binary_cross_entropy and BCELoss are unsafe to autocast: use "
                           "binary_cross_entropy_with_logits or BCEWithLogitsLoss (they take logits), or run it "
                           "outside the autocast scope")
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"binary_cross_entropy: target shape {tuple(target.shape)} must be the same as input shape "
                         f"{tuple(input.shape)}")
    code = _reduction(reduction)
    loss = -(target * input.log().clamp(min=-100.0) + (1 - target) * (1 - input).log().clamp(min=-100.0))
    if weight is not None:
        loss = loss * weight
    return loss if code == _C.REDUCTION_NONE else (loss.sum() if code == _C.REDUCTION_SUM else loss.mean())


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight=None, reduction: str = "mean",
                                     pos_weight=None) -> Tensor:
    """Sigmoid and binary cross-entropy in one numerically stable expression."""
    _check(input, "input")
    _check(target, "target")
    return Tensor._wrap(_C.bce_with_logits(input._h, target._h, _h(weight, "weight"), _h(pos_weight, "pos_weight"),
                                          _reduction(reduction)))
