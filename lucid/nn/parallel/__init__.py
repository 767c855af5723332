"""Data-parallel training: :class:`DistributedDataParallel` over ``lucid.distributed``."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
