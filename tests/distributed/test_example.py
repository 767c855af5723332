"""examples/ddp_digits.py as the guide runs it: two ranks learn the digits together; and the
guide's data-parallel training loop (docs/guide/distributed.rst) as written."""

import re
from pathlib import Path

import pytest

import conftest
from conftest import check_ok

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ddp_digits.py"


@pytest.mark.parametrize("extra", [[], ["--amp", "--grad-dtype", "bfloat16"]])
def test_ddp_digits_trains_on_two_ranks(mpiexec, extra):
    pytest.importorskip("sklearn")
    run = conftest.run_processes(
        [mpiexec, "-n", "2", conftest.sys.executable, str(EXAMPLE), "--epochs", "4", *extra], timeout=180
    )
    check_ok(run)
    assert "2 rank(s)" in run.out and "replicas identical: yes" in run.out, run.out
    epochs = re.findall(r"test acc\s+([\d.]+)% \(per rank: ([\d.]+)%, ([\d.]+)%\)", run.out)
    assert len(epochs) == 4, run.out  # printed once per epoch, by rank 0 only
    assert float(epochs[-1][0]) > 85.0  # ten classes: chance is 10 %
    losses = [float(v) for v in re.findall(r"train loss ([\d.]+)", run.out)]
    assert losses[-1] < losses[0] / 3


def test_the_guides_training_loop_runs_on_two_ranks(run_mpi):
    run = run_mpi("worker_readme.py", timeout=120)
    check_ok(run)
    for rank in range(2):
        assert f"rank {rank} of 2: replicas identical True, scale 65536" in run.out, run.out
