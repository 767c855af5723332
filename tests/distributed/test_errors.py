"""Wrong arguments raise clear exceptions on every rank, and a rank that fails ends the job
(non-zero, with its message) instead of leaving the others waiting."""

import json

import pytest

from conftest import check_ok, run_workers

RANKS = 2


@pytest.fixture(scope="module")
def raised(tmp_path_factory, mpiexec):
    out = tmp_path_factory.mktemp("errors")
    check_ok(run_workers(mpiexec, "worker_errors.py", out, n=RANKS))
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(RANKS)]


def expect(raised, case, per_rank):
    for rank, (kind, words) in enumerate(per_rank):
        got = raised[rank][case]
        assert got is not None, f"{case}: rank {rank} raised nothing"
        assert got[0] == kind, f"{case}: rank {rank} raised {got}"
        for w in words:
            assert w in got[1], f"{case}: rank {rank}: {w!r} not in {got[1]!r}"


def test_an_argument_wrong_on_one_rank_raises_on_both(raised):
    expect(
        raised,
        "not-a-tensor-on-rank-1",
        [
            ("RuntimeError", ["rank 1 passed invalid arguments", "list"]),
            ("TypeError", ["expected a lucid.Tensor, got list"]),
        ],
    )


@pytest.mark.parametrize(
    "case, kind, words",
    [
        ("bad-op", "ValueError", ["'product'", "'sum', 'mean' or 'max'"]),
        ("mean-of-ints", "TypeError", ["floating-point", "int64"]),
        ("src-out-of-range", "ValueError", ["src=2 is not a rank", "0 … 1"]),
        ("src-not-an-int", "TypeError", ["src must be an int"]),
        ("autograd-history", "RuntimeError", ["autograd history", "detach()"]),
        ("gather-not-a-tensor", "TypeError", ["got NoneType"]),
        ("ddp-not-a-module", "TypeError", ["wraps a lucid.nn.Module, got Tensor"]),
        ("ddp-bad-grad-dtype", "ValueError", ["grad_dtype", "lucid.int32"]),
    ],
)
def test_an_argument_wrong_on_every_rank(raised, case, kind, words):
    expect(raised, case, [(kind, words)] * RANKS)


@pytest.mark.parametrize(
    "case, words",
    [
        ("shapes-differ", ["shape (3,)", "shape (4,)"]),
        ("dtypes-differ", ["float32", "float16"]),
        ("ops-differ", ["op='sum'", "op='max'"]),
        ("src-differs", ["src=0", "src=1"]),
        ("different-collectives", ["all_reduce(", "broadcast("]),
        ("gather-shapes-differ", ["shape (2, 1)", "shape (2, 2)"]),
        (
            "ddp-models-differ",
            ["differ in their parameters", "'weight' (float32, shape (2, 2))", "'weight' (float32, shape (3, 2))"],
        ),
    ],
)
def test_ranks_that_disagree_raise_the_same_error(raised, case, words):
    expect(raised, case, [("ValueError", words)] * RANKS)
    # The same description on both (each names its own call first).
    assert raised[0][case][1].split(": ", 1)[1] == raised[1][case][1].split(": ", 1)[1]


def test_the_ranks_stay_in_step_after_the_errors(raised):
    assert raised[0]["after"] == raised[1]["after"] == [3.0]


# A rank that exits by itself (os._exit(3), no MPI_Abort) ends the job through mpiexec, which
# kills the other rank with SIGKILL; whether MPICH's mpiexec then reports the rank's 3 or the
# kill's 9 depends on which status it collects first, so either is the job failing.
@pytest.mark.parametrize(
    "mode, statuses, words",
    [
        (
            "raise",
            {1},
            [
                "rank 1 of 2 stopped on an uncaught exception",
                "ValueError: rank 1 failed on purpose",
                "aborting all 2 ranks",
            ],
        ),
        ("raise-in-backward", {1}, ["ValueError: rank 1 failed on purpose"]),
        ("exit", {3, 9}, []),
    ],
)
def test_a_failing_rank_ends_the_job_quickly(run_mpi, mode, statuses, words):
    run = run_mpi("worker_failures.py", mode, timeout=60)
    assert run.returncode in statuses, run.out
    assert run.seconds < 30, f"took {run.seconds:.1f} s:\n{run.out}"
    assert "rank 0 ready" in run.out and "rank 0 was not stopped" not in run.out
    for w in words:
        assert w in run.out, run.out


def test_a_rank_that_leaves_early_ends_the_job_at_the_timeout(run_mpi):
    run = run_mpi("worker_failures.py", "leave", timeout=60, env={"LUCID_DISTRIBUTED_TIMEOUT": "3"})
    assert run.returncode != 0, run.out
    assert run.seconds < 30, f"took {run.seconds:.1f} s:\n{run.out}"
    assert "rank 0 of 2 has waited" in run.out and "in all_reduce" in run.out, run.out
    assert "rank 0 was not stopped" not in run.out


@pytest.mark.parametrize("victim", [0, 1])
def test_a_rank_killed_mid_training_ends_the_job_within_seconds(run_mpi, victim):
    """A rank killed (SIGKILL) during DistributedDataParallel training: mpiexec ends the job
    and names the dead process (test_two_hosts.py does the same across two hosts)."""
    run = run_mpi("worker_dead_rank.py", victim, timeout=90)
    assert run.returncode != 0, run.out
    assert run.seconds < 30, f"took {run.seconds:.1f} s:\n{run.out}"
    assert f"rank {victim} step 3" in run.out and "finished" not in run.out, run.out
    assert "BAD TERMINATION" in run.out and "EXIT CODE: 9" in run.out, run.out


@pytest.mark.parametrize("mode, raising", [("unused-everywhere", {0, 1}), ("unused-on-rank-1", {1})])
def test_a_parameter_without_a_gradient_raises_at_the_next_forward(run_mpi, mode, raising):
    """Without find_unused_parameters, a parameter that gets no gradient leaves the averaging
    unfinished; the next forward says so (as PyTorch does) and the job ends, nothing hangs
    (with "unused-on-rank-1", rank 0 waits in its backward for rank 1 until the abort)."""
    run = run_mpi("worker_failures.py", mode, timeout=60)
    assert run.returncode == 1, run.out
    assert run.seconds < 30, f"took {run.seconds:.1f} s:\n{run.out}"
    assert "was not stopped" not in run.out and "step 2" not in run.out, run.out
    assert "the previous backward did not give every parameter a gradient" in run.out, run.out
    assert "Parameters without one: b.weight, b.bias" in run.out and "find_unused_parameters=True" in run.out
    assert any(f"on rank {r}" in run.out for r in raising), run.out
