"""Datasets and data loaders, mirroring ``torch.utils.data``: ``Dataset``, ``TensorDataset``,
``Subset``, ``random_split``, the samplers and ``DataLoader`` with ``default_collate``.

``DataLoader(num_workers=n)`` loads batches in ``n`` worker threads (engine ops release the
GIL, so threads overlap), in order, and each worker runs under the autocast state of the
thread that started the iteration (``lucid.amp.propagate``).
"""

from __future__ import annotations

import collections.abc
import itertools
import math
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..._ops import creation as _creation
from ..._ops.composed import Generator, generator_rng
from ..._ops.shape import stack
from ..._tensor import Tensor
from ...amp import propagate
from .distributed import DistributedSampler


class Dataset:
    """A map-style dataset: ``__getitem__(index)`` and ``__len__``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset:
    """A dataset read as a stream: ``__iter__`` yields its samples (a DataLoader batches them in
    order; it takes no sampler and cannot shuffle them)."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class TensorDataset(Dataset):
    """Samples are the `index`-th rows of tensors that share their first dimension."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset takes lucid tensors, got {type(t).__name__}")
            if t.ndim == 0 or t.shape[0] != tensors[0].shape[0]:
                raise ValueError(
                    f"TensorDataset: every tensor needs the same first dimension, got "
                    f"{[tuple(x.shape) for x in tensors]}"
                )
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of `dataset` at `indices`."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, index):
        if isinstance(index, list):
            return [self.dataset[self.indices[i]] for i in index]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """The datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset needs at least one dataset")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]))

    def __len__(self):
        return int(self.cumulative_sizes[-1])

    def __getitem__(self, index):
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} is out of range for a dataset of {len(self)}")
        k = int(np.searchsorted(self.cumulative_sizes, index, side="right"))
        start = 0 if k == 0 else int(self.cumulative_sizes[k - 1])
        return self.datasets[k][index - start]


def _permutation(n, generator):
    return generator_rng(generator).permutation(n)


class Sampler:
    """Yields dataset indices."""

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new permutation of the dataset at each iteration (its first `num_samples` indices);
    with `replacement`, `num_samples` indices drawn independently."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a bool, got {replacement!r}")
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self.num_samples = len(data_source) if num_samples is None else num_samples
        if isinstance(self.num_samples, bool) or not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer, got {num_samples!r}")

    def __iter__(self):
        n = len(self.data_source)
        if self.replacement:
            return self._with_replacement(n)
        if self.num_samples > n:  # as PyTorch: whole permutations, then part of one more
            return self._permutations(n)
        return iter(int(i) for i in _permutation(n, self.generator)[: self.num_samples])

    # Drawn as they are asked for, a block at a time, so that a sampler of 10^10 draws (an
    # "infinite" loader) costs nothing up front.
    _BLOCK = 4096

    def _with_replacement(self, n):
        rng = generator_rng(self.generator)
        for start in range(0, self.num_samples, self._BLOCK):
            yield from (int(i) for i in rng.integers(0, n, size=min(self._BLOCK, self.num_samples - start)))

    def _permutations(self, n):
        left = self.num_samples
        while left > 0:
            yield from (int(i) for i in _permutation(n, self.generator)[:left])
            left -= n

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups a sampler's indices into lists of `batch_size`."""

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer, got {batch_size!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, bool(drop_last)

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)


def default_collate(batch):
    """Stacks a list of samples into a batch: tensors, numpy arrays and numbers become one
    tensor with a new first dimension; tuples, lists and dicts are collated element-wise;
    strings stay a list."""
    first = batch[0]
    if isinstance(first, Tensor):
        return stack(batch, 0)
    if isinstance(first, np.ndarray):
        return _creation.tensor(np.stack(batch))
    if isinstance(first, (bool, np.bool_)):
        return _creation.tensor(np.array(batch, dtype=bool))
    if isinstance(first, (int, np.integer)):
        return _creation.tensor(np.array(batch, dtype=np.int64))
    if isinstance(first, (float, np.floating)):
        return _creation.tensor(np.array(batch, dtype=np.float32))
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, collections.abc.Mapping):
        return {k: default_collate([sample[k] for sample in batch]) for k in first}
    if isinstance(first, collections.abc.Sequence):
        if any(len(sample) != len(first) for sample in batch):
            raise RuntimeError("default_collate: each element in the batch should have the same length")
        collated = [default_collate(list(items)) for items in zip(*batch)]
        return tuple(collated) if isinstance(first, tuple) else collated
    raise TypeError(f"default_collate: cannot collate samples of type {type(first).__name__}")


class WorkerInfo:
    """What ``get_worker_info()`` tells a dataset inside a DataLoader worker: its ``id`` (0 to
    ``num_workers - 1``), ``num_workers``, ``seed`` and the ``dataset``."""

    __slots__ = ("id", "num_workers", "seed", "dataset")

    def __init__(self, id, num_workers, seed, dataset):
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed})"


_worker = threading.local()


def get_worker_info():
    """The :class:`WorkerInfo` of the DataLoader worker running this (lucid's workers are
    threads), or None outside one."""
    return getattr(_worker, "info", None)


class DataLoader:
    """Batches of a dataset, as ``torch.utils.data.DataLoader``.

    Parameters follow PyTorch's: ``batch_size`` (``None`` for single samples), ``shuffle``,
    ``sampler``, ``batch_sampler``, ``num_workers`` (threads), ``collate_fn``, ``drop_last``,
    ``generator`` (a :class:`Generator`), ``prefetch_factor``. ``pin_memory`` is accepted and
    has no effect (memory is unified on Apple Silicon).
    """

    def __init__(
        self,
        dataset,
        batch_size=1,
        shuffle=False,
        sampler=None,
        batch_sampler=None,
        num_workers=0,
        collate_fn=None,
        pin_memory=False,
        drop_last=False,
        timeout=0,
        worker_init_fn=None,
        generator=None,
        prefetch_factor=None,
        persistent_workers=False,
    ):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"num_workers should be a non-negative integer, got {num_workers!r}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise ValueError(
                "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
            )
        self.dataset, self.num_workers, self.generator = dataset, num_workers, generator
        self.prefetch_factor = 2 if prefetch_factor is None else int(prefetch_factor)
        self.worker_init_fn = worker_init_fn
        if isinstance(dataset, IterableDataset):
            if shuffle or sampler is not None or batch_sampler is not None:
                raise ValueError(
                    "DataLoader with an IterableDataset takes no shuffle, sampler or batch_sampler: it "
                    "reads the stream in order"
                )
            self.sampler = self.batch_sampler = None
            self.batch_size, self.drop_last = batch_size, drop_last
            self.collate_fn = (
                collate_fn if collate_fn is not None else (default_collate if batch_size is not None else (lambda s: s))
            )
            return
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        self.sampler = sampler
        if batch_sampler is None and batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_sampler, self.batch_size, self.drop_last = batch_sampler, batch_size, drop_last
        self.collate_fn = (
            collate_fn
            if collate_fn is not None
            else (default_collate if batch_size is not None or batch_sampler is not None else (lambda s: s))
        )

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # (TypeError for a stream without a length, as PyTorch)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler) if self.batch_sampler is not None else len(self.sampler)

    def _stream(self):
        """The batches of an IterableDataset, read in the loop's thread whatever num_workers says."""
        if self.batch_size is None:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def _load(self, indices):
        if self.batch_sampler is None:
            return self.collate_fn(self.dataset[indices])
        return self.collate_fn([self.dataset[i] for i in indices])

    def __iter__(self):
        if isinstance(self.dataset, IterableDataset):
            yield from self._stream()
            return
        keys = iter(self.batch_sampler if self.batch_sampler is not None else self.sampler)
        if self.num_workers == 0:
            for k in keys:
                yield self._load(k)
            return
        load = propagate(self._load)  # workers run under this thread's autocast state
        ids = itertools.count()
        base_seed = int(generator_rng(self.generator).integers(1 << 62))

        def init():
            worker = next(ids)
            _worker.info = WorkerInfo(worker, self.num_workers, base_seed + worker, self.dataset)
            if self.worker_init_fn is not None:
                self.worker_init_fn(worker)

        with ThreadPoolExecutor(self.num_workers, initializer=init) as pool:
            pending = collections.deque()
            for k in keys:
                pending.append(pool.submit(load, k))
                if len(pending) >= self.num_workers * self.prefetch_factor:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()


def random_split(dataset, lengths, generator=None):
    """Splits a dataset into non-overlapping random subsets of the given lengths (or fractions
    summing to 1, the remainder spread one by one from the first)."""
    n = len(dataset)
    lengths = list(lengths)
    if (
        lengths
        and all(isinstance(x, float) for x in lengths)
        and math.isclose(sum(lengths), 1.0)
        and sum(lengths) <= 1 + 1e-9
    ):
        sizes = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
    if any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 0 for x in lengths) or sum(lengths) != n:
        raise ValueError(
            f"random_split: lengths must be non-negative integers summing to the dataset's length {n}, "
            f"or fractions summing to 1; got {lengths}"
        )
    order = _permutation(n, generator)
    out, start = [], 0
    for size in lengths:
        out.append(Subset(dataset, [int(i) for i in order[start : start + size]]))
        start += size
    return out


__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "Subset",
    "ConcatDataset",
    "Generator",
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "BatchSampler",
    "DistributedSampler",
    "default_collate",
    "DataLoader",
    "random_split",
    "WorkerInfo",
    "get_worker_info",
]
