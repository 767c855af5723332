"""Overlapped averaging, no_sync() and ZeroRedundancyOptimizer on two ranks end with exactly
the parameters (and optimizer state) of a one-process reference that plays both ranks."""

import numpy as np
import pytest

import conftest
from conftest import check_ok

RANKS = 2


def train(mpiexec, tmp_path, mode, ranks):
    out = tmp_path / f"{mode}-{ranks}"
    out.mkdir()
    cmd = [conftest.sys.executable, str(conftest.HERE / "worker_overlap.py"), str(out), mode]
    check_ok(conftest.run_processes([mpiexec, "-n", str(ranks)] + cmd if ranks > 1 else cmd, timeout=180))
    return [dict(np.load(out / f"rank{r}.npz")) for r in range(ranks)]


def params(run):
    return {k: v for k, v in run.items() if k.startswith("param")}


def check_equal(ranks, reference):
    for r, run in enumerate(ranks):
        for key, want in params(reference).items():
            np.testing.assert_array_equal(run[key], want, err_msg=f"rank {r}, {key}")
        np.testing.assert_array_equal(run["grad_is_none"], reference["grad_is_none"])


@pytest.mark.parametrize("mode", ["overlap", "no-overlap", "no_sync", "unused", "zero", "zero-amp"])
def test_two_ranks_end_where_the_one_process_reference_ends(mpiexec, tmp_path, mode):
    (reference,) = train(mpiexec, tmp_path, mode, 1)
    ranks = train(mpiexec, tmp_path, mode, RANKS)
    check_equal(ranks, reference)
    for run in ranks:
        assert int(run["syncs"]) == 4  # one averaging per step (none for no_sync's micro-batches)
        assert int(run["buckets"]) >= 3  # small buckets, so that there is something to overlap
    early = [int(run["started_early"]) for run in ranks]
    if mode in ("overlap", "no_sync", "zero", "zero-amp"):
        # Every bucket but the one the last gradient completes starts during backward.
        assert early == [4 * (int(ranks[0]["buckets"]) - 1)] * RANKS, early
    elif mode in ("no-overlap", "unused"):
        # overlap=False, and find_unused_parameters (whose identities backward reaches last),
        # average every bucket at the end of backward.
        assert early == [0, 0], early
    if mode == "unused":
        assert reference["grad_is_none"].sum() == 2  # the layer nobody used: weight and bias


@pytest.mark.parametrize("mode", ["zero", "zero-amp"])
def test_the_sharded_state_consolidates_into_the_reference_optimizers(mpiexec, tmp_path, mode):
    (reference,) = train(mpiexec, tmp_path, mode, 1)
    ranks = train(mpiexec, tmp_path, mode, RANKS)
    state = {k: v for k, v in reference.items() if k.startswith("state")}
    assert any(k.endswith("exp_avg_sq") for k in state)
    assert state.keys() == {k for k in ranks[0] if k.startswith("state")}
    for key, want in state.items():
        np.testing.assert_array_equal(ranks[0][key], want, err_msg=key)
    assert not any(k.startswith("state") for k in ranks[1])  # consolidated on rank 0 only
    # Each rank kept the state of about half the elements.
    owned = [int(r["owned"]) for r in ranks]
    assert abs(owned[0] - owned[1]) <= 48 * 48, owned
    if mode == "zero-amp":
        assert float(ranks[0]["scale"]) == float(ranks[1]["scale"]) == float(reference["scale"])
        assert state["state0.step"] == 3  # four steps, one skipped on every rank


def test_the_control_each_rank_alone_is_not_the_reference(mpiexec, tmp_path):
    """What the equality above rules out: the no_sync run without its last, synced backward
    (every micro-batch local) leaves the ranks apart from each other and from the reference."""
    (reference,) = train(mpiexec, tmp_path, "overlap", 1)
    (alone,) = train(mpiexec, tmp_path, "no-overlap", 1)
    np.testing.assert_array_equal(alone["param0"], reference["param0"])  # the reference is deterministic
    (other,) = train(mpiexec, tmp_path, "no_sync", 1)
    assert not np.array_equal(other["param0"], reference["param0"])


def test_the_overlap_bench_runs(run_mpi):
    """bench/distributed.py keeps running (a small model; no timing asserted)."""
    bench = conftest.HERE.parent.parent / "bench" / "distributed.py"
    run = run_mpi(bench, "--steps", "2", "--width", "256", "--bucket-mb", "0.1", timeout=180)
    check_ok(run)
    assert "ratio overlapped / after:" in run.out and "waiting for the all-reduce" in run.out, run.out
    started = int(run.out.split("buckets started during backward (overlapped model):")[1].split()[0])
    assert started > 0, run.out
