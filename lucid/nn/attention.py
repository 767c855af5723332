"""MultiheadAttention."""

from __future__ import annotations

import math

from .._ops import creation as _creation
from .._tensor import Tensor
from .._types import as_index, check_dtype, float32
from . import functional as F
from .layers import Linear
from .module import Module
from .parameter import Parameter


def _xavier_uniform(shape, fan_in, fan_out, dtype, device):
    bound = math.sqrt(6.0 / (fan_in + fan_out)) if fan_in + fan_out else 0.0
    return Parameter(((_creation.rand(*shape) * 2.0 - 1.0) * bound).to(dtype).to(device))


def _xavier_normal(shape, fan_in, fan_out, dtype, device):
    std = math.sqrt(2.0 / (fan_in + fan_out)) if fan_in + fan_out else 0.0
    return Parameter((_creation.randn(*shape) * std).to(dtype).to(device))


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of ``embed_dim // num_heads`` features, as
    ``torch.nn.MultiheadAttention``: ``forward`` returns ``(output, weights)``, the weights
    averaged over heads unless ``average_attn_weights=False`` (None when
    ``need_weights=False``). Inputs are [L, N, E] (``batch_first=False``), [N, L, E]
    (``batch_first=True``) or unbatched [L, E]; keys and values may have ``kdim`` and ``vdim``
    features (then the projections are ``q_proj_weight``, ``k_proj_weight`` and
    ``v_proj_weight``). ``add_bias_kv`` appends learnt ``bias_k``/``bias_v`` positions to the
    keys and values, ``add_zero_attn`` a zero one. A bool ``attn_mask`` or
    ``key_padding_mask`` is True where attention is *not* allowed; float masks are added to
    the scores."""

    def __init__(
        self,
        embed_dim,
        num_heads,
        dropout=0.0,
        bias=True,
        add_bias_kv=False,
        add_zero_attn=False,
        kdim=None,
        vdim=None,
        batch_first=False,
        device="cpu",
        dtype=None,
    ):
        super().__init__()
        self.embed_dim, self.num_heads = as_index(embed_dim), as_index(num_heads)
        if self.embed_dim <= 0 or self.num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be positive, got {embed_dim} and {num_heads}")
        if self.embed_dim % self.num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout must be in [0, 1], got {dropout}")
        e = self.embed_dim
        self.kdim = e if kdim is None else as_index(kdim)
        self.vdim = e if vdim is None else as_index(vdim)
        self._qkv_same_embed_dim = self.kdim == e and self.vdim == e
        self.head_dim = e // self.num_heads
        self.dropout, self.batch_first = float(dropout), bool(batch_first)
        self.add_zero_attn = bool(add_zero_attn)
        d = float32 if dtype is None else check_dtype(dtype)
        device = device or "cpu"
        # Xavier-uniform input projections and Xavier-normal bias_k/bias_v, as PyTorch initialises them.
        if self._qkv_same_embed_dim:
            self.in_proj_weight = _xavier_uniform((3 * e, e), e, 3 * e, d, device)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = _xavier_uniform((e, e), e, e, d, device)
            self.k_proj_weight = _xavier_uniform((e, self.kdim), self.kdim, e, d, device)
            self.v_proj_weight = _xavier_uniform((e, self.vdim), self.vdim, e, d, device)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(_creation.zeros(3 * e, dtype=d, device=device))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(e, e, bias=bias, device=device, dtype=d)
        if bias:
            self.out_proj.bias = Parameter(_creation.zeros(e, dtype=d, device=device))
        if add_bias_kv:
            self.bias_k = _xavier_normal((1, 1, e), e, e, d, device)
            self.bias_v = _xavier_normal((1, 1, e), e, e, d, device)
        else:
            self.bias_k = self.bias_v = None

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights=True,
        attn_mask=None,
        average_attn_weights=True,
        is_causal=False,
    ):
        for t, what in ((query, "query"), (key, "key"), (value, "value")):
            if not isinstance(t, Tensor):
                raise TypeError(f"MultiheadAttention: {what} must be a lucid.Tensor, got {type(t).__name__}")
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError(
                f"MultiheadAttention: expected 2-D or 3-D query, key and value of one rank, got "
                f"{query.shape}, {key.shape}, {value.shape}"
            )
        if query.shape[-1] != self.embed_dim:
            raise ValueError(f"MultiheadAttention: query has {query.shape[-1]} features, expected {self.embed_dim}")
        if key.shape[-1] != self.kdim or value.shape[-1] != self.vdim:
            raise ValueError(
                f"MultiheadAttention: key and value have {key.shape[-1]} and {value.shape[-1]} features, "
                f"expected kdim={self.kdim} and vdim={self.vdim}"
            )
        batched = query.ndim == 3
        if batched and self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        if is_causal and attn_mask is None:
            # PyTorch's layers pass is_causal as a hint beside the mask; alone it means the causal mask.
            n = query.shape[0]
            attn_mask = _creation.full((n, key.shape[0]), float("-inf"), dtype=query.dtype, device=query.device).triu(1)
        out, weights = F.multi_head_attention_forward(
            query,
            key,
            value,
            self.embed_dim,
            self.num_heads,
            self.in_proj_weight,
            self.in_proj_bias,
            self.bias_k,
            self.bias_v,
            self.add_zero_attn,
            self.dropout,
            self.out_proj.weight,
            self.out_proj.bias,
            training=self.training,
            key_padding_mask=key_padding_mask,
            need_weights=need_weights,
            attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights,
            is_causal=is_causal,
        )
        if batched and self.batch_first:
            out = out.transpose(0, 1)
        return out, weights
