"""What the engine's backends run on (as ``torch.backends``)."""

from . import cpu

__all__ = ["cpu"]
