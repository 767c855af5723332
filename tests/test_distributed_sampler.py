"""lucid.utils.data.DistributedSampler against a numpy re-implementation of PyTorch's
partition (torch.utils.data.distributed.DistributedSampler.__iter__, written out below from
its documented behaviour), and the properties of the ranks' shares taken together."""

import math
from collections import Counter

import numpy as np
import pytest

import lucid
import lucid.distributed as dist
from lucid.utils.data import DataLoader, DistributedSampler, TensorDataset


class _Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def pytorch_share(n, replicas, rank, shuffle, seed, epoch, drop_last):
    """PyTorch's partition, step by step: its num_samples formula (ceil((n - R) / R) with
    drop_last when R does not divide n), the padding by whole repeats of the order, the
    slice rank::R. The permutation is the one lucid documents: numpy's generator seeded by
    seed + epoch (torch's own randperm numbers are torch's)."""
    if drop_last and n % replicas != 0:
        num_samples = math.ceil((n - replicas) / replicas)
    else:
        num_samples = math.ceil(n / replicas)
    total = num_samples * replicas
    order = list(np.random.default_rng(seed + epoch).permutation(n)) if shuffle else list(range(n))
    if not drop_last:
        pad = total - len(order)
        if pad <= len(order):
            order += order[:pad]
        else:
            order += (order * math.ceil(pad / len(order)))[:pad]
    else:
        order = order[:total]
    assert len(order) == total
    return [int(i) for i in order[rank:total:replicas]]


CASES = [  # (len, replicas, drop_last, shuffle, epoch)
    (10, 3, False, True, 0),
    (10, 3, True, True, 0),
    (10, 3, False, False, 0),
    (10, 3, True, False, 0),
    (12, 4, False, True, 1),
    (12, 4, True, True, 2),
    (7, 2, False, True, 5),
    (7, 2, True, False, 5),
    (3, 5, False, True, 0),
    (3, 5, True, True, 0),
    (2, 7, False, False, 3),
    (1, 1, False, True, 0),
    (100, 8, False, True, 9),
    (100, 8, True, True, 9),
    (0, 3, False, True, 0),
    (0, 3, True, False, 0),
    (5, 1, True, True, 4),
]


def shares(n, replicas, drop_last, shuffle, epoch, seed=0):
    out = []
    for rank in range(replicas):
        s = DistributedSampler(
            _Sized(n), num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop_last
        )
        s.set_epoch(epoch)
        out.append(list(s))
        assert len(s) == len(out[-1])
        assert all(type(i) is int for i in out[-1])
    return out


@pytest.mark.parametrize("n, replicas, drop_last, shuffle, epoch", CASES)
def test_each_ranks_share_is_pytorchs(n, replicas, drop_last, shuffle, epoch):
    for seed in (0, 17):
        got = shares(n, replicas, drop_last, shuffle, epoch, seed)
        for rank in range(replicas):
            assert got[rank] == pytorch_share(n, replicas, rank, shuffle, seed, epoch, drop_last), (rank, seed)


@pytest.mark.parametrize("n, replicas, drop_last, shuffle, epoch", CASES)
def test_the_shares_together(n, replicas, drop_last, shuffle, epoch):
    got = shares(n, replicas, drop_last, shuffle, epoch)
    expected_len = n // replicas if drop_last else -(-n // replicas)
    assert [len(s) for s in got] == [expected_len] * replicas
    everything = [i for s in got for i in s]
    counts = Counter(everything)
    assert set(counts) <= set(range(n))
    if drop_last:  # disjoint, and only the tail of the order is left out
        assert max(counts.values(), default=1) == 1 and len(everything) == replicas * (n // replicas)
    else:  # every index, and the padding repeats as few as it can
        assert set(counts) == set(range(n))
        assert len(everything) - n == replicas * expected_len - n < replicas
        if n >= replicas:
            assert max(counts.values(), default=1) <= 2


def test_the_order_follows_the_epoch_and_the_seed_the_same_on_every_rank():
    def order(epoch, seed=0):
        got = shares(20, 2, False, True, epoch, seed)
        return [i for pair in zip(*got) for i in pair]  # rank 0 took positions 0, 2, …

    assert order(0) == order(0) and sorted(order(0)) == list(range(20))
    assert order(0) != order(1) and order(0) != order(0, seed=1)
    assert order(1) == order(0, seed=1)  # seed + epoch seeds it, as PyTorch's
    assert order(0) == [int(i) for i in lucid.randperm(20, generator=lucid.Generator().manual_seed(0)).numpy()]
    unshuffled = shares(20, 2, False, False, 3)
    assert unshuffled == [list(range(0, 20, 2)), list(range(1, 20, 2))]


def test_it_is_a_data_loaders_sampler():
    x = lucid.tensor(np.arange(10, dtype=np.float32))
    ds = TensorDataset(x)
    seen = []
    for rank in range(3):
        sampler = DistributedSampler(ds, num_replicas=3, rank=rank, shuffle=False)
        loader = DataLoader(ds, batch_size=2, sampler=sampler)
        assert len(loader) == 2
        seen.append([float(v) for (xb,) in loader for v in xb.numpy()])
    assert seen == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]  # 10 padded to 12 from the start


def test_the_defaults_are_pytorchs():
    s = DistributedSampler(_Sized(5), num_replicas=2, rank=1)
    assert (s.shuffle, s.seed, s.drop_last, s.epoch, s.num_samples, s.total_size) == (True, 0, False, 0, 3, 6)
    import lucid.utils.data.distributed as module

    assert module.DistributedSampler is DistributedSampler


def test_without_num_replicas_and_rank_it_asks_lucid_distributed(monkeypatch):
    assert not dist.is_initialized()
    for kwargs in ({}, {"num_replicas": 2}, {"rank": 0}):
        with pytest.raises(RuntimeError, match=r"not initialised; call lucid.distributed.init\(\) first, or pass"):
            DistributedSampler(_Sized(4), **kwargs)
    from lucid.distributed import _group

    monkeypatch.setattr(_group, "_backend", _group._Local())  # a world of one, as init() makes alone
    s = DistributedSampler(_Sized(4))
    assert (s.num_replicas, s.rank, list(s)) == (1, 0, list(np.random.default_rng(0).permutation(4)))
    assert DistributedSampler(_Sized(4), num_replicas=4, rank=3, shuffle=False).rank == 3


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"num_replicas": 2, "rank": 2}, ValueError, r"Invalid rank 2, rank should be in the interval \[0, 1\]"),
        ({"num_replicas": 2, "rank": -1}, ValueError, r"Invalid rank -1"),
        ({"num_replicas": 0, "rank": 0}, ValueError, "num_replicas must be at least 1"),
        ({"num_replicas": 2.0, "rank": 0}, TypeError, "num_replicas must be an int"),
        ({"num_replicas": 2, "rank": True}, TypeError, "rank must be an int"),
        ({"num_replicas": 2, "rank": 0, "seed": "0"}, TypeError, "seed must be an int"),
    ],
)
def test_wrong_arguments_raise(kwargs, error, words):
    with pytest.raises(error, match=words):
        DistributedSampler(_Sized(4), **kwargs)


def test_set_epoch_takes_an_int():
    s = DistributedSampler(_Sized(4), num_replicas=1, rank=0)
    s.set_epoch(np.int64(3))
    assert s.epoch == 3 and type(s.epoch) is int
    with pytest.raises(TypeError, match="epoch must be an int"):
        s.set_epoch(1.5)
