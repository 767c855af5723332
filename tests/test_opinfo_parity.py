"""lucid on PyTorch's own op database (tools/opinfo_parity.py): every recorded sample of every
in-scope op of ``op_db`` runs on lucid, forward and backward, and the guide's and the README's
tables must say what it found; an op that stops agreeing, or starts to, changes them."""

import numpy as np
import pytest

from _helpers import load_file

op = load_file("tools/opinfo_parity.py")


@pytest.fixture(scope="module")
def results():
    return op.check()


def test_guide_and_readme_say_what_lucid_does(results):
    guide = op.GUIDE.read_text()
    assert op.guide_section(results) in guide, (
        "docs/guide/pytorch.rst's op_db section is stale: run `python tools/opinfo_parity.py --write`"
    )
    assert op.summary_table(results) in op.README.read_text(), "README's op_db table is stale (--write)"


def test_every_out_of_scope_op_has_an_allowed_reason(results):
    ref = op.read_reference_file()
    for key, rec in ref["ops"].items():
        if "scope" in rec:
            assert rec["scope"] in op.REASONS, key
    assert all(r["why"] in op.REASONS.values() for r in results.values() if r["status"] == "out of scope")


def test_the_check_can_fail():
    """A wrong value, dtype or gradient is a difference: the comparison is not lenient."""
    w = np.array([1.0, 2.0, 3.0], np.float32)
    assert op._close(w, w, "values") is None
    assert op._close(w * (1 + 1e-3), w, "values") is not None
    assert op._close(np.array([1, 2]), np.array([1, 3]), "values") is not None
    lucid = pytest.importorskip("lucid")
    want = {**op._array(w), "torch_dtype": "float32"}
    assert op._compare(lucid, lucid.tensor(w), want, None) is None
    assert "dtype" in op._compare(lucid, lucid.tensor(w).double(), want, None)
    assert "shape" in op._compare(lucid, lucid.tensor(w).reshape(3, 1), want, None)
    assert op._compare(lucid, lucid.tensor(w + 1), want, None) is not None
    assert op._compare(lucid, lucid.tensor(w + 1), want, "random") is None


def test_a_recorded_module_or_function_argument_is_built_on_lucid():
    """A module passed to a constructor (TransformerEncoder's layer) is recorded by its
    constructor's arguments, a torch.nn.functional function by its name; lucid builds its own."""
    lucid = pytest.importorskip("lucid")
    layer = op._decode(
        lucid,
        {
            "module": "nn.TransformerEncoderLayer",
            "init": {
                "tuple": [{"tuple": [4, 2, 8, 0.0]}, {"dict": [["activation", {"function": "nn.functional.gelu"}]]}]
            },
        },
        [],
    )
    assert isinstance(layer, lucid.nn.TransformerEncoderLayer) and layer.activation is lucid.nn.functional.gelu
    assert layer.linear1.weight.shape == (8, 4)
    with pytest.raises(op.Missing):
        op._decode(lucid, {"function": "nn.functional.not_a_function"}, [])
    with pytest.raises(op.Missing):
        op._decode(lucid, {"module": "nn.NotALayer", "init": {"tuple": [{"tuple": []}, {"dict": []}]}}, [])
