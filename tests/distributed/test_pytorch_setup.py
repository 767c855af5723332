"""DistributedSampler on two ranks: with num_replicas and rank from lucid.distributed, the
ranks' shares are disjoint (apart from PyTorch's padding) and together cover the dataset;
and the PyTorch spelling of the job's set-up (init_process_group's rank and world size,
DistributedDataParallel's device_ids, async_op) works on each rank."""

import math
from collections import Counter

import pytest

from conftest import rank_arrays
from sampler_cases import CASES, key

RANKS = 2


@pytest.fixture(scope="module")
def results(tmp_path_factory, mpiexec):
    return rank_arrays(tmp_path_factory, mpiexec, "worker_pytorch_setup.py", RANKS)


def test_each_rank_is_told_its_place(results):
    for r, got in enumerate(results):
        assert (int(got["rank"]), int(got["world"]), int(got["local_rank"])) == (r, RANKS, r)


@pytest.mark.parametrize("n, drop_last, shuffle, epoch", CASES)
def test_the_ranks_shares_are_disjoint_and_cover_the_dataset(results, n, drop_last, shuffle, epoch):
    shares = [got[key(n, drop_last, shuffle, epoch)].tolist() for got in results]
    size = n // RANKS if drop_last else math.ceil(n / RANKS)
    assert [len(s) for s in shares] == [size] * RANKS
    counts = Counter(i for s in shares for i in s)
    if drop_last:
        assert set(shares[0]).isdisjoint(shares[1]) and len(counts) == RANKS * size
    else:
        assert set(counts) == set(range(n))
        assert sum(c - 1 for c in counts.values()) == RANKS * size - n  # only the padding repeats
    if not shuffle:  # 0 … n-1, padded from the start, dealt out in turn
        padded = (list(range(n)) * RANKS)[: RANKS * size]
        assert shares == [padded[r::RANKS] for r in range(RANKS)]


def test_a_loader_over_each_share(results):
    loaded = [got["loader"].tolist() for got in results]
    assert [len(x) for x in loaded] == [5, 5] and sorted(loaded[0] + loaded[1]) == list(range(10))


def test_pytorchs_setup_spelling(results):
    for r, got in enumerate(results):
        assert "world_size=3 (MPI's is 2)" in str(got["wrong_world"]) and "mpiexec" in str(got["wrong_world"])
        assert f"device_ids=[{r + 1}] does not name this rank's device" in str(got["wrong_device"])
        assert f"local rank {r}" in str(got["wrong_device"])
        assert got["async_sum"].tolist() == [3.0]


def test_a_rank_given_the_wrong_rank_ends_the_job(run_mpi):
    run = run_mpi("worker_wrong_rank.py", timeout=60)
    assert run.returncode != 0, run.out
    assert run.seconds < 30, f"took {run.seconds:.1f} s:\n{run.out}"
    assert "rank=0 (MPI's is 1)" in run.out and "come from mpiexec" in run.out, run.out
    assert "aborting all 2 ranks" in run.out and "was not stopped" not in run.out, run.out
