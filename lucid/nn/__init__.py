"""Neural-network layers."""

from . import functional
from .attention import MultiheadAttention
from .conv import Conv1d, Conv2d, ConvTranspose2d
from .layers import GELU, Dropout, Linear, LogSoftmax, ReLU, Sequential, Sigmoid, SiLU, Softmax, Tanh
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import Module
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm
from .parameter import Parameter
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from .sparse import Embedding

__all__ = ["Module", "Parameter", "Linear", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax",
           "Dropout", "Sequential", "Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool2d", "AvgPool2d",
           "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm", "Embedding",
           "MultiheadAttention", "MSELoss", "L1Loss", "NLLLoss", "CrossEntropyLoss", "BCEWithLogitsLoss", "functional"]
