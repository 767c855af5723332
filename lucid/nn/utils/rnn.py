"""Sequence utilities, as ``torch.nn.utils.rnn``."""

from __future__ import annotations

from ..._ops.creation import full
from ..._ops.shape import cat, stack
from ..._tensor import Tensor


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"):
    """Stacks tensors of shapes ``[L_i, *]`` into ``[max L, B, *]`` (``[B, max L, *]`` with
    `batch_first`), padding each with `padding_value` on the `padding_side`; differentiable."""
    seqs = list(sequences)
    if not seqs or not all(isinstance(s, Tensor) for s in seqs):
        raise TypeError("pad_sequence: expected a non-empty sequence of lucid tensors")
    if padding_side not in ("right", "left"):
        raise ValueError(f"pad_sequence: padding_side must be 'right' or 'left', got {padding_side!r}")
    trailing = tuple(seqs[0].shape[1:])
    if any(s.ndim < 1 or tuple(s.shape[1:]) != trailing for s in seqs):
        raise RuntimeError("pad_sequence: every sequence needs one shape after its first dimension")
    longest = max(s.shape[0] for s in seqs)
    padded = []
    for s in seqs:
        missing = longest - s.shape[0]
        if missing:
            pad = full((missing,) + trailing, padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, pad] if padding_side == "right" else [pad, s])
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


__all__ = ["pad_sequence"]
