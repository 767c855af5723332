"""What the engine's backends run on (as ``torch.backends``)."""

from . import cpu, mps

__all__ = ["cpu", "mps"]
