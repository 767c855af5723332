"""Optimizers (SGD, Adam, AdamW) and learning-rate schedules (``lucid.optim.lr_scheduler``)."""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
