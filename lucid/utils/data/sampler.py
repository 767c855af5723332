"""``torch.utils.data.sampler``'s names, where programs import them from."""

from . import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "BatchSampler"]
