"""Neural-network layers."""

from . import functional
from .layers import Linear, ReLU, Sequential
from .module import Module
from .parameter import Parameter

__all__ = ["Module", "Parameter", "Linear", "ReLU", "Sequential", "functional"]
