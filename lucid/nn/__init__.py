"""Neural-network layers, their functional forms (``lucid.nn.functional``), initialisers
(``lucid.nn.init``) and training utilities (``lucid.nn.utils``)."""

from . import functional, init, parallel, utils
from .parallel import DataParallel
from .attention import MultiheadAttention
from .containers import ModuleDict, ModuleList
from .conv import (ChannelShuffle, Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, Fold,
                   LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d,
                   Unfold)
from .layers import (CELU, ELU, GELU, GLU, SELU, AlphaDropout, Bilinear, CosineSimilarity, Dropout, Dropout1d,
                     Dropout2d, Dropout3d, FeatureAlphaDropout, Flatten, Hardshrink, Hardsigmoid, Hardswish, Hardtanh,
                     Identity, LeakyReLU, Linear, LogSigmoid, LogSoftmax, Mish, PairwiseDistance, PixelShuffle,
                     PixelUnshuffle, PReLU, ReLU, ReLU6, RReLU, Sequential, Sigmoid, SiLU, Softmax, Softmax2d, Softmin,
                     Softplus, Softshrink, Softsign, Tanh, Tanhshrink, Threshold, Upsample, UpsamplingBilinear2d,
                     UpsamplingNearest2d)
from .loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss, CTCLoss, GaussianNLLLoss,
                   HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss, LinearCrossEntropyLoss, LinearCrossEntropyOptions,
                   MarginRankingLoss, MSELoss, MultiLabelMarginLoss,
                   MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss, PoissonNLLLoss, SmoothL1Loss, SoftMarginLoss,
                   TripletMarginLoss, TripletMarginWithDistanceLoss)
from .module import Module
from . import modules  # torch.nn.modules.module: Module and the global module hooks
from .normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d,
                            InstanceNorm3d, LayerNorm, LocalResponseNorm, RMSNorm)
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d,
                      ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d,
                      ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d)
from .parameter import Parameter
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d,
                      AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, FractionalMaxPool2d, FractionalMaxPool3d,
                      LPPool1d, LPPool2d, LPPool3d, MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d,
                      MaxUnpool3d)
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .sparse import Embedding, EmbeddingBag
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
                          TransformerEncoderLayer)

__all__ = ["Module", "Parameter", "DataParallel", "Linear", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax",
           "Dropout", "Identity", "Flatten", "PixelShuffle", "PixelUnshuffle", "Sequential", "ModuleList", "ModuleDict", "Conv1d", "Conv2d",
           "ConvTranspose2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d", "LayerNorm",
           "GroupNorm", "Embedding", "MultiheadAttention", "MSELoss", "L1Loss", "NLLLoss", "CrossEntropyLoss",
           "BCEWithLogitsLoss", "BCELoss", "LeakyReLU", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell",
           "Transformer", "TransformerEncoder", "TransformerEncoderLayer", "TransformerDecoder",
           "TransformerDecoderLayer", "RMSNorm", "InstanceNorm1d", "InstanceNorm2d", "Dropout1d", "Dropout2d",
           "PReLU", "ELU", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "ConstantPad1d",
           "ConstantPad2d", "ZeroPad1d", "ZeroPad2d", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d",
           "ReplicationPad2d", "SmoothL1Loss", "HuberLoss", "EmbeddingBag", "functional", "init", "parallel",
           "utils",
           # activations, distances, dropouts, normalisations and losses
           "ReLU6", "Hardtanh", "Hardsigmoid", "Hardswish", "Mish", "SELU", "CELU", "Threshold", "GLU", "LogSigmoid",
           "Softplus", "Softshrink", "Hardshrink", "Softsign", "Tanhshrink", "RReLU", "Softmin", "Softmax2d",
           "Bilinear", "CosineSimilarity", "PairwiseDistance", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
           "BatchNorm3d", "InstanceNorm3d", "LocalResponseNorm", "KLDivLoss", "MarginRankingLoss",
           "HingeEmbeddingLoss", "SoftMarginLoss", "CosineEmbeddingLoss", "PoissonNLLLoss", "GaussianNLLLoss",
           "MultiLabelSoftMarginLoss", "MultiLabelMarginLoss", "MultiMarginLoss", "TripletMarginLoss",
           "TripletMarginWithDistanceLoss", "CTCLoss", "LinearCrossEntropyLoss", "LinearCrossEntropyOptions",
           # convolutions, pools and paddings
           "Conv3d", "ConvTranspose1d", "ConvTranspose3d", "LazyConv1d", "LazyConv2d",
           "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d", "Unfold", "Fold",
           "ChannelShuffle", "MaxPool1d", "MaxPool3d", "AvgPool1d", "AvgPool3d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "LPPool1d", "LPPool2d",
           "LPPool3d", "FractionalMaxPool2d", "FractionalMaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
           "ConstantPad3d", "ZeroPad3d", "ReflectionPad3d", "ReplicationPad3d", "CircularPad1d", "CircularPad2d",
           "CircularPad3d"]
