"""Optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, LBFGS) and learning-rate schedules
(``lucid.optim.lr_scheduler``)."""

from . import lr_scheduler
from .adam import Adam, AdamW
from .adaptive import Adadelta, Adagrad, RMSprop
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "LBFGS", "lr_scheduler"]
