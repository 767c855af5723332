"""Transformer, TransformerEncoder(Layer) and TransformerDecoder(Layer), with
``torch.nn``'s constructors, forward signatures, submodule names and state-dict keys."""

from __future__ import annotations

import copy

from .._ops import creation as _creation
from .._types import as_index, float32
from . import functional as F
from .attention import MultiheadAttention
from .containers import ModuleList
from .layers import Dropout, Linear
from .module import Module
from .normalization import LayerNorm

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _activation(activation):
    if callable(activation):
        return activation
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation should be 'relu', 'gelu' or a callable, got {activation!r}")
    return _ACTIVATIONS[activation]


def _check_dims(d_model, nhead, dim_feedforward):
    d_model, nhead, dim_feedforward = as_index(d_model), as_index(nhead), as_index(dim_feedforward)
    if d_model <= 0 or dim_feedforward <= 0:
        raise ValueError(f"d_model and dim_feedforward must be positive, got {d_model} and {dim_feedforward}")
    return d_model, nhead, dim_feedforward


def generate_square_subsequent_mask(sz, device="cpu", dtype=None):
    """A causal mask for a sequence of `sz`: 0 on and below the diagonal, -inf above it."""
    sz = as_index(sz)
    mask = _creation.full((sz, sz), float("-inf"), dtype=dtype or float32, device=device or "cpu")
    return mask.triu(1)


class _Layer(Module):
    """What the encoder and decoder layers share: self-attention, the feed-forward block, and
    `norms` LayerNorms and dropouts (``norm1``…, ``dropout1``…), with PyTorch's names."""

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward,
        dropout,
        activation,
        layer_norm_eps,
        batch_first,
        norm_first,
        bias,
        device,
        dtype,
        norms,
    ):
        super().__init__()
        d_model, nhead, dim_feedforward = _check_dims(d_model, nhead, dim_feedforward)
        device = device or "cpu"
        for name in ("self_attn", "multihead_attn")[: norms - 1]:  # the decoder also attends to memory
            setattr(
                self,
                name,
                MultiheadAttention(
                    d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, device=device, dtype=dtype
                ),
            )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, device=device, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, device=device, dtype=dtype)
        self.activation = _activation(activation)
        self.norm_first = bool(norm_first)
        for i in range(1, norms + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype))
        for i in range(1, norms + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self._ff_dropout = f"dropout{norms}"

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=bool(is_causal),
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        out = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return getattr(self, self._ff_dropout)(out)


class TransformerEncoderLayer(_Layer):
    """Self-attention then a feed-forward block, each with a residual connection and a
    LayerNorm (after, or before with ``norm_first=True``)."""

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__(
            d_model,
            nhead,
            dim_feedforward,
            dropout,
            activation,
            layer_norm_eps,
            batch_first,
            norm_first,
            bias,
            device,
            dtype,
            norms=2,
        )

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


class TransformerDecoderLayer(_Layer):
    """Self-attention, attention over the encoder's output (``memory``), then a feed-forward
    block, each with a residual connection and a LayerNorm."""

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__(
            d_model,
            nhead,
            dim_feedforward,
            dropout,
            activation,
            layer_norm_eps,
            batch_first,
            norm_first,
            bias,
            device,
            dtype,
            norms=3,
        )

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal=False,
        memory_is_causal=False,
    ):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(
            x,
            mem,
            mem,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=bool(is_causal),
        )[0]
        return self.dropout2(x)


def _clones(layer, num_layers, what):
    from .module import Module as _Module

    if not isinstance(layer, _Module):
        raise TypeError(f"{what} takes a layer module, got {type(layer).__name__}")
    n = as_index(num_layers)
    if n < 0:
        raise ValueError(f"num_layers must be non-negative, got {n}")
    return ModuleList([copy.deepcopy(layer) for _ in range(n)])


class TransformerEncoder(Module):
    """``num_layers`` independent copies of `encoder_layer`, then an optional `norm`."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers, "TransformerEncoder")
        self.num_layers = len(self.layers)
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """``num_layers`` independent copies of `decoder_layer`, then an optional `norm`."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers, "TransformerDecoder")
        self.num_layers = len(self.layers)
        self.norm = norm

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal=None,
        memory_is_causal=False,
    ):
        x = tgt
        for layer in self.layers:
            x = layer(
                x,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=bool(tgt_is_causal),
                memory_is_causal=memory_is_causal,
            )
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder model of "Attention Is All You Need", as ``torch.nn.Transformer``:
    ``forward(src, tgt)`` gives the decoder's output; matrices are Xavier-initialised."""

    def __init__(
        self,
        d_model=512,
        nhead=8,
        num_encoder_layers=6,
        num_decoder_layers=6,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        custom_encoder=None,
        custom_decoder=None,
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        device = device or "cpu"
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(
                d_model,
                nhead,
                dim_feedforward,
                dropout,
                activation,
                layer_norm_eps,
                batch_first,
                norm_first,
                bias,
                device,
                dtype,
            )
            self.encoder = TransformerEncoder(
                layer, num_encoder_layers, LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
            )
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(
                d_model,
                nhead,
                dim_feedforward,
                dropout,
                activation,
                layer_norm_eps,
                batch_first,
                norm_first,
                bias,
                device,
                dtype,
            )
            self.decoder = TransformerDecoder(
                layer, num_decoder_layers, LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
            )
        self.d_model, self.nhead, self.batch_first = as_index(d_model), as_index(nhead), batch_first
        from . import init

        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(
        self,
        src,
        tgt,
        src_mask=None,
        tgt_mask=None,
        memory_mask=None,
        src_key_padding_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        src_is_causal=None,
        tgt_is_causal=None,
        memory_is_causal=False,
    ):
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and tgt.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise RuntimeError(
                f"the batch number of src ({src.shape[batch_dim]}) and tgt ({tgt.shape[batch_dim]}) must be equal"
            )
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(
                f"the feature number of src and tgt must be equal to d_model ({self.d_model}), got "
                f"{src.shape[-1]} and {tgt.shape[-1]}"
            )
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    generate_square_subsequent_mask = staticmethod(generate_square_subsequent_mask)
