"""all_reduce, broadcast and all_gather on two ranks, for every dtype and both devices,
against numpy on the inputs each rank had (recomputed here from mpi_cases)."""

import ml_dtypes
import numpy as np
import pytest

from conftest import rank_arrays
from mpi_cases import DEVICES, DTYPES, FLOATS, NUMPY, rank_values

RANKS = 2


@pytest.fixture(scope="module")
def results(tmp_path_factory, mpiexec):
    return rank_arrays(tmp_path_factory, mpiexec, "worker_collectives.py", RANKS)


def inputs(dtype):
    return [rank_values(dtype, r) for r in range(RANKS)]


def in_float32(dtype, a):
    return np.asarray(a, dtype=NUMPY[dtype]).astype(np.float32) if dtype in FLOATS else np.asarray(a)


def expected_sum(dtype):
    a, b = inputs(dtype)
    if dtype == "bool":
        return a | b
    if dtype in FLOATS:  # one float32 addition, rounded once to the dtype
        return (a.astype(np.float32) + b.astype(np.float32)).astype(NUMPY[dtype]).astype(np.float32)
    return a + b


def expected_max(dtype):
    a, b = inputs(dtype)
    return (
        in_float32(dtype, np.maximum(a.astype(np.float32), b.astype(np.float32)))
        if dtype in FLOATS
        else (a | b if dtype == "bool" else np.maximum(a, b))
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_all_reduce_sum_and_max_are_numpys_on_every_rank(results, dtype, device):
    for rank, got in enumerate(results):
        assert int(got["world"]) == RANKS
        np.testing.assert_array_equal(got[f"{dtype}-{device}-sum"], expected_sum(dtype), err_msg=f"rank {rank} sum")
        np.testing.assert_array_equal(got[f"{dtype}-{device}-max"], expected_max(dtype), err_msg=f"rank {rank} max")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_all_reduce_mean_is_the_average_within_the_dtypes_rounding(results, dtype, device):
    a, b = (x.astype(np.float64) for x in inputs(dtype))
    exact = (a + b) / 2
    # Rounded at most twice (the sum, then the halving) to the dtype's precision.
    eps = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}[dtype]
    for got in results:
        mean = got[f"{dtype}-{device}-mean"]
        np.testing.assert_allclose(mean, exact, rtol=0, atol=eps * (np.abs(a) + np.abs(b)).max())
        assert np.array_equal(mean.astype(NUMPY[dtype]).astype(np.float32), mean)  # the dtype's values


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_gives_every_rank_the_source_ranks_values(results, dtype, device):
    source = in_float32(dtype, inputs(dtype)[RANKS - 1])
    for got in results:
        np.testing.assert_array_equal(got[f"{dtype}-{device}-broadcast"], source)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_all_gather_stacks_every_ranks_tensor_in_rank_order(results, dtype, device):
    stacked = np.stack([in_float32(dtype, x) for x in inputs(dtype)])
    for rank, got in enumerate(results):
        np.testing.assert_array_equal(got[f"{dtype}-{device}-gather"], stacked)
        np.testing.assert_array_equal(got[f"{dtype}-{device}-gather-input"], in_float32(dtype, inputs(dtype)[rank]))


def test_a_non_contiguous_view_and_its_base_take_the_result(results):
    a, b = inputs("float32")
    total = a + b
    for got in results:
        np.testing.assert_array_equal(got["view"], total.T)
        np.testing.assert_array_equal(got["view-base"], total)


def test_scalars_empty_tensors_and_parameters(results):
    a, b = inputs("float32")
    for got in results:
        assert got["scalar"].shape == () and got["scalar"] == 1 + 2
        assert got["empty"].shape == (0, 4)
        np.testing.assert_allclose(got["param"], (a + b) / 2, rtol=1e-7)
        np.testing.assert_array_equal(got["param-grad"], np.full((3, 5), 3, np.float32))  # kept
        np.testing.assert_allclose(got["reduceop-avg"], (a + b) / 2, rtol=1e-7)


def test_ranks_on_one_machine_split_its_cores(results):
    import os

    for got in results:
        assert int(got["threads"]) == max(1, (os.cpu_count() or 1) // RANKS)


def test_the_expectations_can_fail():
    """The expected values here differ from what a broken collective would give."""
    a, b = inputs("bfloat16")
    assert not np.array_equal(expected_sum("bfloat16"), a.astype(np.float32))
    assert not np.array_equal(expected_max("int32"), inputs("int32")[0])
    assert ml_dtypes.bfloat16 is NUMPY["bfloat16"]
