"""With GradScaler on several ranks, an infinity in one rank's gradients makes every rank
skip that step and back off its scale the same way."""

import json

import pytest

import conftest
from conftest import check_ok

RANKS = 2


def run(mpiexec, tmp_path, mode):
    out = tmp_path / mode
    out.mkdir()
    check_ok(conftest.run_workers(mpiexec, "worker_amp.py", out, mode, n=RANKS))
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(RANKS)]


@pytest.mark.parametrize("mode", ["after-sync", "no-sync"])
def test_every_rank_skips_when_one_sees_inf(mpiexec, tmp_path, mode):
    ranks = run(mpiexec, tmp_path, mode)
    # Only rank 1's own gradients hold the infinity at step 1.
    assert [r["local_inf"] for r in ranks] == [[False, False, False], [False, True, False]]
    for r in ranks:
        assert r["skipped"] == [False, True, False], r  # skipped, and the parameters did not move
        assert r["moved"] == [True, False, True], r
        assert r["scale"] == [2048.0, 1024.0, 2048.0], r  # grown, backed off, grown: the same on both
    if mode == "after-sync":
        assert ranks[0]["params"] == ranks[1]["params"]  # the replicas are still one model


def test_without_agreement_the_ranks_part(mpiexec, tmp_path):
    """The control: with GradScaler's agreement switched off, rank 0 steps where rank 1
    skips, and their scales and parameters part (so the test above can fail)."""
    ranks = run(mpiexec, tmp_path, "unagreed")
    assert ranks[0]["skipped"] == [False, False, False] and ranks[1]["skipped"] == [False, True, False]
    assert ranks[0]["scale"] != ranks[1]["scale"]
    assert ranks[0]["params"] != ranks[1]["params"]
