"""Views, in-place writes and autograd against PyTorch, program by program.

The seeded random programs of ``tests/differential/views_programs.py`` (views of every kind,
views of views, writes of every kind through any of them, leaves that require grad, ops that
save tensors for backward, then backward) were run on PyTorch, and each outcome recorded:
which instructions raised and with which exception class, the shape and values of every
tensor at the end, and the leaf's gradient or backward's exception. Here each program runs on
lucid and must give the same outcome.
"""

import warnings

import numpy as np
import pytest

import lucid
from differential import views_programs as V

REFERENCE = V.reference()


def _compare(got, want):
    assert got["steps"] == want["steps"], "instructions raised differently (ok / skip / exception class)"
    assert len(got["final"]) == len(want["final"])
    for slot, (g, w) in enumerate(zip(got["final"], want["final"])):
        assert (g is None) == (w is None), f"slot {slot}: made in one framework only"
        if g is not None:
            assert g[0] == w[0], f"slot {slot}: shape {g[0]}, PyTorch {w[0]}"
            np.testing.assert_allclose(g[1], w[1], rtol=1e-5, atol=1e-5, err_msg=f"slot {slot}")
    g, w = got["grad"], want["grad"]
    if isinstance(w, list) and isinstance(g, list):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg="the leaf's gradient")
    else:
        assert g == w, "backward: gradient or exception class"


@pytest.mark.parametrize("seed", range(V.PROGRAMS))
def test_a_program_of_views_and_writes_has_pytorchs_outcome(seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = V.run(lucid, seed)
    _compare(got, REFERENCE[seed])


def test_the_programs_exercise_every_instruction_and_pytorchs_errors():
    # The reference is only worth as much as what it covers.
    kinds = {op[2] for seed in range(V.PROGRAMS) for op in V.program(seed)[1:]}
    assert kinds >= set(V.VIEWS) | set(V.WRITES) | set(V.DERIVES)
    steps = [s for o in REFERENCE for s in o["steps"]]
    assert steps.count("RuntimeError") >= 100 and steps.count("ok") >= 1000
    grads = [o["grad"] for o in REFERENCE]
    assert sum(g == "RuntimeError" for g in grads) >= 20 and sum(isinstance(g, list) for g in grads) >= 40
