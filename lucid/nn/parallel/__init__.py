"""Data-parallel training: :class:`DistributedDataParallel` over ``lucid.distributed``, and
:class:`DataParallel`, PyTorch's single-process form, which runs the module as it is (a lucid
process has one device)."""

from .data_parallel import DataParallel, data_parallel
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel", "DataParallel", "data_parallel"]
