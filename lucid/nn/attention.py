"""MultiheadAttention."""

from __future__ import annotations

import math

from .._ops import creation as _creation
from .._tensor import Tensor
from .._types import bool_, check_dtype, float32
from . import functional as F
from .layers import Linear
from .module import Module
from .parameter import Parameter
from .._types import as_index


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of ``embed_dim // num_heads`` features, as
    ``torch.nn.MultiheadAttention``: ``forward`` returns ``(output, weights)``, the weights
    averaged over heads unless ``average_attn_weights=False`` (None when
    ``need_weights=False``). Inputs are [L, N, E] (``batch_first=False``), [N, L, E]
    (``batch_first=True``) or unbatched [L, E]. A bool ``attn_mask`` or
    ``key_padding_mask`` is True where attention is *not* allowed; float masks are added to
    the scores."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False, device="cpu", dtype=None):
        super().__init__()
        self.embed_dim, self.num_heads = as_index(embed_dim), as_index(num_heads)
        if self.num_heads <= 0 or self.embed_dim % self.num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.head_dim = self.embed_dim // self.num_heads
        self.dropout, self.batch_first = float(dropout), batch_first
        d = float32 if dtype is None else check_dtype(dtype)
        e = self.embed_dim
        # Xavier-uniform input projection, as PyTorch initialises it.
        bound = math.sqrt(6.0 / (e + 3 * e)) if e else 0.0
        self.in_proj_weight = Parameter(((_creation.rand(3 * e, e) * 2.0 - 1.0) * bound).to(d).to(device))
        if bias:
            self.in_proj_bias = Parameter(_creation.zeros(3 * e, dtype=d, device=device))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(e, e, bias=bias, device=device, dtype=d)
        if bias:
            self.out_proj.bias = Parameter(_creation.zeros(e, dtype=d, device=device))

    def _heads(self, x, n):
        # [N, L, E] -> [N, H, L, D]
        return x.reshape(n, x.shape[1], self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        for t, what in ((query, "query"), (key, "key"), (value, "value")):
            if not isinstance(t, Tensor):
                raise TypeError(f"MultiheadAttention: {what} must be a lucid.Tensor, got {type(t).__name__}")
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError(f"MultiheadAttention: expected 2-D or 3-D query, key and value of one rank, got "
                             f"{query.shape}, {key.shape}, {value.shape}")
        if query.shape[-1] != self.embed_dim:
            raise ValueError(f"MultiheadAttention: query has {query.shape[-1]} features, expected {self.embed_dim}")
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        n, l, e = query.shape
        s = key.shape[1]
        wq, wk, wv = self.in_proj_weight.chunk(3)
        bq, bk, bv = (None, None, None) if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
        q = self._heads(F.linear(query, wq, bq), n)
        k = self._heads(F.linear(key, wk, bk), n)
        v = self._heads(F.linear(value, wv, bv), n)
        mask = self._mask(attn_mask, key_padding_mask, n, l, s, is_causal)
        out, weights = F._attention(q, k, v, mask, self.dropout if self.training else 0.0,
                                    is_causal and mask is None, None, need_weights)
        out = self.out_proj(out.transpose(1, 2).reshape(n, l, e))
        if unbatched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(1).to(weights.dtype)
        return out, (weights.squeeze(0) if unbatched else weights)

    @staticmethod
    def _mask(attn_mask, key_padding_mask, n, l, s, is_causal):
        """One mask for the attention kernel: bool True where allowed, or additive float."""
        masks = []
        if attn_mask is not None:
            if attn_mask.ndim not in (2, 3):
                raise ValueError(f"attn_mask must be 2-D [L, S] or 3-D [N·H, L, S], got {attn_mask.shape}")
            m = attn_mask if attn_mask.ndim == 2 else attn_mask.reshape(n, -1, l, s)
            masks.append(m)
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (n, s):
                raise ValueError(f"key_padding_mask must have shape ({n}, {s}), got {key_padding_mask.shape}")
            masks.append(key_padding_mask.reshape(n, 1, 1, s))
        if not masks:
            return None
        if all(m.dtype == bool_ for m in masks):
            allowed = ~masks[0]
            for m in masks[1:]:
                allowed = allowed & ~m
            return allowed
        total = None
        for m in masks:
            f = m.float().masked_fill(m, float("-inf")) if m.dtype == bool_ else m.float()
            total = f if total is None else total + f
        return total
