"""Training utilities: gradient clipping and sequence padding (``rnn``)."""

from . import rnn
from .clip_grad import clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm_", "clip_grad_value_", "rnn"]
