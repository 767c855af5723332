"""The Swift examples against the Python API, both ways: `deploy` runs checkpoints that
`lucid.save` wrote and must give Python's outputs bit for bit, in float32 and under autocast;
`train` trains under autocast with a GradScaler and a schedule, and Python's `lucid.load`
reads the checkpoint it saves and reproduces its outputs exactly."""

import subprocess

import numpy as np
import pytest

import lucid
from conftest import swift_environment
from lucid import nn


def run(examples, name, *args):
    r = subprocess.run(
        [str(examples / name), *map(str, args)], env=swift_environment(), capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def mlp():
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 3)
    )


MODELS = {"mlp": (mlp, (16, 20)), "cnn": (cnn, (6, 1, 8, 8))}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_deploy_gives_pythons_outputs_bit_for_bit(examples, tmp_path, name):
    make, shape = MODELS[name]
    lucid.manual_seed(3)
    model = make()
    if name == "cnn":
        # Running statistics of their own, so that evaluation mode uses something trained.
        model.train()
        with lucid.no_grad():
            for _ in range(3):
                model(lucid.randn(8, 1, 8, 8) * 2 + 0.5)
    model.eval()
    x = lucid.randn(*shape)
    lucid.save(model.state_dict(), tmp_path / "model.safetensors")
    lucid.save({"x": x}, tmp_path / "input.safetensors")
    with lucid.no_grad():
        plain = model(x)
        with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
            mixed = model(x)

    run(examples, "deploy", name, tmp_path)
    swift = lucid.load(tmp_path / "swift.safetensors")
    assert swift["float32"].dtype == plain.dtype == lucid.float32
    assert swift["autocast"].dtype == mixed.dtype == lucid.bfloat16
    np.testing.assert_array_equal(swift["float32"].numpy(), plain.numpy())
    np.testing.assert_array_equal(swift["autocast"].float().numpy(), mixed.float().numpy())
    # The comparison can fail: autocast changed the values, so equality above is not vacuous.
    assert not np.array_equal(mixed.float().numpy(), plain.numpy())


def test_deploy_refuses_a_checkpoint_of_another_model(examples, tmp_path):
    lucid.save(mlp().state_dict(), tmp_path / "model.safetensors")
    lucid.save({"x": lucid.randn(2, 1, 8, 8)}, tmp_path / "input.safetensors")
    r = subprocess.run(
        [str(examples / "deploy"), "cnn", str(tmp_path)], env=swift_environment(), capture_output=True, text=True
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "deploy: loadStateDict(_:strict:): missing keys" in r.stdout and '"1.running_mean"' in r.stdout, r.stdout


def test_train_learns_and_its_checkpoint_loads_in_python(examples, tmp_path):
    out = run(examples, "train", tmp_path)
    assert "accuracy" in out and f"saved {tmp_path}/model.safetensors" in out, out
    model = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3))
    model.load_state_dict(lucid.load(tmp_path / "model.safetensors"))
    outputs = lucid.load(tmp_path / "outputs.safetensors")
    with lucid.no_grad():
        logits = model.eval()(outputs["x"])
    # The same engine in both processes, up to the last bit of a product: oneDNN's float32
    # matmul on AVX2 rounds some rows differently when it splits them over another number of
    # threads (the app may run on one, when it finds the cores busy).
    np.testing.assert_allclose(logits.numpy(), outputs["logits"].numpy(), rtol=1e-6, atol=1e-6)
