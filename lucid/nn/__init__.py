"""Neural-network layers."""

from . import functional
from .layers import GELU, Linear, ReLU, Sequential, Sigmoid, SiLU, Tanh
from .module import Module
from .parameter import Parameter

__all__ = ["Module", "Parameter", "Linear", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Sequential", "functional"]
