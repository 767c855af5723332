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


@pytest.mark.parametrize("arr", [
    rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(5).astype(np.float16),
    rng.standard_normal((2, 2)).astype(ml_dtypes.bfloat16), rng.integers(-9, 9, (4,)).astype(np.int32),
    rng.integers(-2 ** 40, 2 ** 40, (2, 3)), rng.random(6) > 0.5, np.array(1.5, np.float32), np.zeros((0, 3), np.float32),
], ids=["f32", "f16", "bf16", "i32", "i64", "bool", "0d", "empty"])
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
    state = {"model": {"w": p.detach()}, "optim": opt.state_dict(), "epoch": 7, "loss": float("nan"),
             "tag": "run-1", "shape": (1, 2), "none": None, "flags": [True, 2.5]}
    path = tmp_path / "ckpt.safetensors"
    lucid.save(state, path)
    back = lucid.load(path)
    assert back["epoch"] == 7 and np.isnan(back["loss"]) and back["tag"] == "run-1"
    assert back["shape"] == (1, 2) and back["none"] is None and back["flags"] == [True, 2.5]
    assert list(back["optim"]["state"]) == [0]  # int keys come back as ints
    assert back["optim"]["param_groups"][0]["betas"] == (0.8, 0.9)
    opt2 = lucid.optim.Adam([lucid.randn(3, requires_grad=True)], lr=0.5)
    opt2.load_state_dict(back["optim"])
    np.testing.assert_array_equal(opt2.state_dict()["state"][0]["exp_avg"].numpy(),
                                  opt.state_dict()["state"][0]["exp_avg"].numpy())
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
    for name, content in {"truncated": data[:len(data) // 2], "header": data[:6], "garbage": os.urandom(256),
                          "huge header": (2 ** 60).to_bytes(8, "little") + b"{}", "empty": b""}.items():
        bad = tmp_path / f"{name}.safetensors"
        bad.write_bytes(content)
        with pytest.raises(ValueError, match="not a valid safetensors file"):
            lucid.load(bad)
    with pytest.raises(FileNotFoundError):
        lucid.load(tmp_path / "missing.safetensors")


def test_unsupported_objects_are_refused(tmp_path):
    with pytest.raises(TypeError, match="cannot store"):
        lucid.save({"f": object()}, tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="keys"):
        lucid.save({(1, 2): lucid.ones(1)}, tmp_path / "x.safetensors")
    with pytest.raises(ValueError, match="two tensors"):
        lucid.save({"a.b": lucid.ones(1), "a": {"b": lucid.ones(1)}}, tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()
