"""``DistributedSampler``: each rank's share of a dataset, as ``torch.utils.data.distributed``."""

from __future__ import annotations

import math
import numbers

from ..._ops.composed import Generator, generator_rng

__all__ = ["DistributedSampler"]


def _count(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"DistributedSampler: {what} must be an int, got {value!r}")
    return int(value)


class DistributedSampler:
    """The indices of `dataset` that this rank loads: the ranks' shares are disjoint and, put
    together, cover the dataset (with a few indices repeated unless `drop_last`).

    The partition is PyTorch's: the indices ``0 … len(dataset) - 1`` (a permutation of them
    seeded by ``seed + epoch`` when `shuffle`) are made a multiple of `num_replicas` long, by
    repeating indices from the start, or, with `drop_last`, by dropping the tail; rank ``r``
    then takes every `num_replicas`-th index starting at position ``r``. Every rank gets the
    same number of indices: ``ceil(len / num_replicas)``, or ``floor(len / num_replicas)``
    with `drop_last`. Pass it as a DataLoader's ``sampler=`` and call :meth:`set_epoch` at the
    start of every epoch, or every epoch has the same order.

    Parameters
    ----------
    dataset : Dataset
        Anything with ``len()``.
    num_replicas : int, optional
        The number of ranks; by default ``lucid.distributed.get_world_size()``.
    rank : int, optional
        This rank, ``0 … num_replicas - 1``; by default ``lucid.distributed.get_rank()``.
    shuffle : bool, default True
        Shuffles the indices, the same way on every rank (the same `seed` and epoch).
    seed : int, default 0
        The seed of the permutation; it must be the same on every rank.
    drop_last : bool, default False
        Drops the last ``len % num_replicas`` indices of the (shuffled) order instead of
        repeating indices to fill the last round.

    Raises
    ------
    RuntimeError
        `num_replicas` or `rank` left out while ``lucid.distributed`` is not initialised (as
        PyTorch raises when there is no process group): call ``lucid.distributed.init()``
        first, or pass both.
    ValueError
        `num_replicas` not positive, or `rank` outside ``0 … num_replicas - 1``.

    Notes
    -----
    The permutation of an epoch is ``lucid.randperm(len(dataset), generator=g)`` with
    ``g = lucid.Generator().manual_seed(seed + epoch)`` (a negative sum is taken modulo
    2**64): every rank computes the same one, so the shares are disjoint, but its order
    is lucid's, not the one ``torch.randperm`` gives for that seed.

    A DataLoader takes it as it takes any sampler (an iterable of indices with a length).
    It is not a subclass of :class:`lucid.utils.data.Sampler`: that class is defined in the
    package that exports this one, and importing it here would make the two import each
    other.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            from ... import distributed

            if not distributed.is_initialized():
                raise RuntimeError(
                    "DistributedSampler: num_replicas and rank default to lucid.distributed's world "
                    "size and rank, and lucid.distributed is not initialised; call "
                    "lucid.distributed.init() first, or pass num_replicas= and rank="
                )
            if num_replicas is None:
                num_replicas = distributed.get_world_size()
            if rank is None:
                rank = distributed.get_rank()
        num_replicas, rank = _count(num_replicas, "num_replicas"), _count(rank, "rank")
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be at least 1, got {num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas, self.rank = num_replicas, rank
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.seed = _count(seed, "seed")
        self.epoch = 0
        n = len(dataset)
        if self.drop_last:
            self.num_samples = n // num_replicas
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def _order(self):
        n = len(self.dataset)
        if not self.shuffle:
            return list(range(n))
        g = Generator().manual_seed((self.seed + self.epoch) % (1 << 64))
        return [int(i) for i in generator_rng(g).permutation(n)]

    def __iter__(self):
        order = self._order()
        if self.drop_last:
            order = order[: self.total_size]
        elif order:
            missing = self.total_size - len(order)
            order = order + (order * math.ceil(missing / len(order)))[:missing]
        mine = order[self.rank : self.total_size : self.num_replicas]
        assert len(mine) == self.num_samples, (len(mine), self.num_samples)
        return iter(mine)

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch whose permutation :meth:`__iter__` gives (``seed + epoch`` seeds
        it); call it with the same epoch on every rank before each epoch."""
        self.epoch = _count(epoch, "epoch")
