"""lucid.save / lucid.load: safetensors files that round-trip every dtype and nested state,
open in the safetensors package itself, survive interrupted writes and reject bad files."""

import os

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file

import lucid
import lucid.nn as nn

rng = np.random.default_rng(2)


@pytest.mark.parametrize(
    "arr",
    [
        rng.standard_normal((3, 4)).astype(np.float32),
        rng.standard_normal(5).astype(np.float16),
        rng.standard_normal((2, 2)).astype(ml_dtypes.bfloat16),
        rng.integers(-9, 9, (4,)).astype(np.int32),
        rng.integers(-(2**40), 2**40, (2, 3)),
        rng.random(6) > 0.5,
        np.array(1.5, np.float32),
        np.zeros((0, 3), np.float32),
    ],
    ids=["f32", "f16", "bf16", "i32", "i64", "bool", "0d", "empty"],
)
def test_tensor_round_trip_is_bit_exact(arr, tmp_path):
    path = tmp_path / "t.safetensors"
    lucid.save(lucid.tensor(arr), path)
    back = lucid.load(path)
    assert back.shape == arr.shape and back.dtype == lucid.tensor(arr).dtype
    np.testing.assert_array_equal(back.numpy().reshape(-1).view(np.uint8), arr.reshape(-1).view(np.uint8))
    assert lucid.load(path, map_location="metal").device == "metal"


def test_module_state_dict_round_trip_and_other_tools(tmp_path):
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2))
    model(lucid.randn(5, 4))  # updates the running statistics
    path = tmp_path / "model.safetensors"
    lucid.save(model.state_dict(), str(path))
    plain = load_file(path)
    assert set(plain) == set(model.state_dict())
    np.testing.assert_array_equal(plain["0.weight"], model[0].weight.numpy())
    fresh = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2))
    fresh.load_state_dict(lucid.load(path))
    model.eval(), fresh.eval()
    x = lucid.randn(2, 4)
    np.testing.assert_array_equal(fresh(x).numpy(), model(x).numpy())


def test_optimizer_and_nested_state_round_trip(tmp_path):
    p = lucid.randn(3, requires_grad=True)
    opt = lucid.optim.Adam([p], lr=0.01, betas=(0.8, 0.9))
    (p * p).sum().backward()
    opt.step()
    state = {
        "model": {"w": p.detach()},
        "optim": opt.state_dict(),
        "epoch": 7,
        "loss": float("nan"),
        "tag": "run-1",
        "shape": (1, 2),
        "none": None,
        "flags": [True, 2.5],
    }
    path = tmp_path / "ckpt.safetensors"
    lucid.save(state, path)
    back = lucid.load(path)
    assert back["epoch"] == 7 and np.isnan(back["loss"]) and back["tag"] == "run-1"
    assert back["shape"] == (1, 2) and back["none"] is None and back["flags"] == [True, 2.5]
    assert list(back["optim"]["state"]) == [0]  # int keys come back as ints
    assert back["optim"]["param_groups"][0]["betas"] == (0.8, 0.9)
    opt2 = lucid.optim.Adam([lucid.randn(3, requires_grad=True)], lr=0.5)
    opt2.load_state_dict(back["optim"])
    np.testing.assert_array_equal(
        opt2.state_dict()["state"][0]["exp_avg"].numpy(), opt.state_dict()["state"][0]["exp_avg"].numpy()
    )
    assert "optim.state.0.exp_avg" in load_file(path)


def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.safetensors"
    lucid.save({"w": lucid.ones(3)}, path)

    def fail(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(KeyboardInterrupt):
        lucid.save({"w": lucid.zeros(3)}, path)
    monkeypatch.undo()
    np.testing.assert_array_equal(lucid.load(path)["w"].numpy(), np.ones(3))
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]  # no temporary file left behind


def test_bad_files_are_value_errors(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    lucid.save({"w": lucid.randn(64)}, path)
    data = path.read_bytes()
    for name, content in {
        "truncated": data[: len(data) // 2],
        "header": data[:6],
        "garbage": os.urandom(256),
        "huge header": (2**60).to_bytes(8, "little") + b"{}",
        "empty": b"",
    }.items():
        bad = tmp_path / f"{name}.safetensors"
        bad.write_bytes(content)
        with pytest.raises(ValueError, match="not a valid safetensors file"):
            lucid.load(bad)
    with pytest.raises(FileNotFoundError):
        lucid.load(tmp_path / "missing.safetensors")


def test_unsupported_objects_are_refused(tmp_path):
    with pytest.raises(TypeError, match="cannot store"):
        lucid.save({"f": object()}, tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match=r"cannot store a Linear.*state_dict\(\)"):
        lucid.save(
            lucid.nn.Linear(2, 2), tmp_path / "x.safetensors"
        )  # PyTorch pickles modules; safetensors holds no code
    with pytest.raises(TypeError, match="keys"):
        lucid.save({(1, 2): lucid.ones(1)}, tmp_path / "x.safetensors")
    with pytest.raises(ValueError, match="two tensors"):
        lucid.save({"a.b": lucid.ones(1), "a": {"b": lucid.ones(1)}}, tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()


def header(path):
    import json

    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n])


def test_file_records_safetensors_dtypes_and_shapes(tmp_path):
    arrays = {
        "bf16": rng.standard_normal((2, 3)).astype(ml_dtypes.bfloat16),
        "f16": rng.standard_normal(4).astype(np.float16),
        "f32": np.zeros((0, 2), np.float32),
        "i32": np.array(7, np.int32),
        "i64": np.arange(3),
        "b": np.array([True, False]),
    }
    path = tmp_path / "d.safetensors"
    lucid.save({k: lucid.tensor(v) for k, v in arrays.items()}, path)
    h = header(path)
    names = {"bf16": "BF16", "f16": "F16", "f32": "F32", "i32": "I32", "i64": "I64", "b": "BOOL"}
    for k, v in arrays.items():
        assert h[k]["dtype"] == names[k] and tuple(h[k]["shape"]) == v.shape
    plain = load_file(path)
    np.testing.assert_array_equal(plain["bf16"].view(np.uint16), arrays["bf16"].view(np.uint16))


def test_tensors_that_require_grad_are_saved_as_values(tmp_path):
    p = lucid.randn(4, requires_grad=True)
    (p * 2).sum().backward()
    path = tmp_path / "p.safetensors"
    lucid.save({"p": p}, path)
    back = lucid.load(path, map_location=lucid.device("cpu"))["p"]
    assert not back.requires_grad and back.grad is None and back.is_leaf
    np.testing.assert_array_equal(back.numpy(), p.numpy())


def test_numpy_scalars_and_keys_are_stored_as_python_values(tmp_path):
    path = tmp_path / "n.safetensors"
    lucid.save({np.int64(3): np.bool_(True), "f": np.float32(0.25), "i": np.int32(-4)}, path)
    back = lucid.load(path)
    assert back == {3: True, "f": 0.25, "i": -4}
    assert type(back[3]) is bool and type(back["i"]) is int


def test_checkpoint_permissions_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        path = tmp_path / "m.safetensors"
        lucid.save(lucid.ones(1), path)
        reference = tmp_path / "plain"
        reference.write_bytes(b"")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == reference.stat().st_mode & 0o777


def test_save_into_a_missing_directory_names_the_target(tmp_path):
    target = tmp_path / "nope" / "x.safetensors"
    with pytest.raises(FileNotFoundError, match="x.safetensors"):
        lucid.save(lucid.ones(1), target)


@pytest.mark.parametrize(
    "structure",
    [
        '{"__dict__": 5}',
        '{"__tuple__": 3}',
        '{"__dict__": [[[1], 2]]}',
        '{"__dict__": [["a"]]}',
        '{"other": 1}',
        '{"__tensor__": "missing"}',
        "[" * 100000,
        "not json",
    ],
)
def test_malformed_structure_metadata_is_a_value_error(structure, tmp_path):
    from safetensors.numpy import save_file

    path = tmp_path / "s.safetensors"
    save_file({"w": np.zeros(2, np.float32)}, path, metadata={"lucid.structure": structure})
    with pytest.raises(ValueError, match="lucid.load"):
        lucid.load(path)


def test_corrupted_headers_are_value_errors(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    lucid.save({"w": lucid.randn(8), "b": lucid.ones(2, dtype=lucid.int64)}, path)
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    text = data[8 : 8 + n]
    cases = {
        "wrong length": (n - 3).to_bytes(8, "little") + data[8:],
        "offsets past the end": data[:8] + text.replace(b'"data_offsets":[0,', b'"data_offsets":[9,'),
        "extra bytes": data + b"\0" * 8,
        "bad utf-8": data[:8] + b"\xff" + text[1:] + data[8 + n :],
    }
    assert cases["offsets past the end"] != data
    for name, content in cases.items():
        bad = tmp_path / "bad.safetensors"
        bad.write_bytes(content)
        with pytest.raises(ValueError):
            lucid.load(bad)


def test_numpy_arrays_are_stored_as_they_are_in_nested_containers(tmp_path):
    import ml_dtypes

    arrays = {
        "f64": np.linspace(0, 1, 7),
        "i16": np.arange(-3, 3, dtype=np.int16),
        "u8": np.arange(5, dtype=np.uint8),
        "b": np.array([True, False]),
        "bf16": np.array([1.5, -2.25], dtype=ml_dtypes.bfloat16),
        "empty": np.zeros((0, 3), dtype=np.int64),
        "strided": np.arange(12.0).reshape(3, 4)[:, ::2],
    }
    obj = {"data": arrays, "pairs": [(np.float64(0.5), np.ones((2, 2), dtype=np.float32))], "t": lucid.ones(2)}
    lucid.save(obj, tmp_path / "data.safetensors")
    back = lucid.load(tmp_path / "data.safetensors")
    for name, a in arrays.items():
        got = back["data"][name]
        assert isinstance(got, np.ndarray) and got.dtype == a.dtype and got.shape == a.shape, name
        np.testing.assert_array_equal(got.astype(np.float64), a.astype(np.float64))
        got[...] = 0  # an array of its own, not a view of the file's bytes
    assert back["pairs"][0][0] == 0.5 and back["pairs"][0][1].dtype == np.float32
    assert isinstance(back["t"], lucid.Tensor)
    lucid.save(np.arange(3.0), tmp_path / "one.safetensors")
    np.testing.assert_array_equal(lucid.load(tmp_path / "one.safetensors"), np.arange(3.0))
    with pytest.raises(TypeError, match="dtype <U1"):
        lucid.save({"s": np.array(["a"])}, tmp_path / "bad.safetensors")


def test_a_pytorch_pickle_is_refused_with_what_to_do(tmp_path):
    import pickle
    import zipfile

    with zipfile.ZipFile(tmp_path / "new.pt", "w") as z:  # torch.save's format since PyTorch 1.6
        z.writestr("archive/data.pkl", pickle.dumps({"a": 1}, protocol=2))
    (tmp_path / "legacy.pt").write_bytes(pickle.dumps({"a": 1}, protocol=2))  # the format before it
    for name in ("new.pt", "legacy.pt"):
        with pytest.raises(ValueError, match="PyTorch pickle.*safetensors.torch.save_file"):
            lucid.load(tmp_path / name)


def test_a_header_whose_length_starts_like_a_pickle_still_loads(tmp_path):
    # A header of 0x80 + 256k bytes begins with the byte a pickle begins with.
    from safetensors.numpy import save as serialize

    for pad in range(0, 64):
        data = serialize({"x": np.arange(3, dtype=np.float32)}, metadata={"pad": "p" * pad})
        if data[0] == 0x80:
            break
    assert data[0] == 0x80
    (tmp_path / "x.safetensors").write_bytes(data)
    np.testing.assert_array_equal(lucid.load(tmp_path / "x.safetensors")["x"].numpy(), [0, 1, 2])
