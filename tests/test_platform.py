"""The "metal" device without Metal: the host fallback warns once per process, reports
itself, and can be turned off. Each case runs in a fresh interpreter, since the warning and
the fallback decision are once per process."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

import lucid  # noqa: E402

# These tests are about the host fallback; where the Metal backend serves "metal" (a Mac, or
# the emulated check build) there is no fallback to warn about or turn off.
pytestmark = pytest.mark.skipif(
    lucid.metal.is_available(), reason="the Metal backend serves 'metal' here, so there is no host fallback"
)


def run(code, **env):
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=ROOT,
        timeout=120,
    )


def test_fallback_warns_exactly_once_per_process():
    r = run("""
        import warnings, lucid
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a = lucid.ones(2, 2, device="metal")
            b = lucid.zeros(3, device="metal")
            c = (a @ a).to("cpu").to("metal")
        kinds = [type(w.message).__name__ for w in caught]
        print(kinds.count("MetalFallbackWarning"), len(kinds))
        print(lucid.metal.is_available(), a.device, c.device)
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[0] == "1 1"
    assert lines[1] == "False metal metal"


def test_warning_names_the_callers_line():
    r = run("""
        import warnings, lucid
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lucid.ones(2, device="metal")
        print(caught[0].filename)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "<string>"


def test_cpu_only_use_does_not_warn():
    r = run("""
        import warnings, lucid
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a = lucid.ones(2, 2)
            with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
                (a @ a).numpy()
        print(len(caught))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"


@pytest.mark.parametrize("value", ["0", "false", "off"])
def test_fallback_can_be_turned_off(value):
    r = run(
        """
        import lucid
        try:
            lucid.ones(2, device="metal")
        except RuntimeError as e:
            print("RuntimeError:", e)
        t = lucid.ones(2).to("cpu")
        print(t.tolist(), lucid.metal.is_available())
        try:
            t.to("metal")
        except RuntimeError as e:
            print("again")
        with lucid.amp.autocast():   # the scope itself needs no device
            print(lucid.amp.get_autocast_dtype("metal"))
    """,
        LUCID_METAL_FALLBACK=value,
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout.split("\n")
    assert out[0].startswith("RuntimeError:") and "LUCID_METAL_FALLBACK=0" in out[0] and "metal" in out[0]
    assert out[1] == "[1.0, 1.0] False"
    assert out[2] == "again"
    assert out[3] == "lucid.float16"


def test_fallback_keeps_float16_storage():
    # The GPU stream stores float16 as float16 (2 bytes a value), not widened.
    r = run("""
        import numpy as np, lucid, warnings
        warnings.simplefilter("ignore")
        x = lucid.tensor(np.array([1/3, 65504.0, 1e-7], dtype=np.float32), device="metal").half()
        print(x.dtype, x.numpy().dtype, x.numpy().view(np.uint16).tolist())
        print(np.array([1/3, 65504.0, 1e-7], dtype=np.float32).astype(np.float16).view(np.uint16).tolist())
    """)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.split("\n")[:2]
    assert first.startswith("lucid.float16 float16 ")
    assert first.split(" ", 2)[2] == second


def test_synchronize_on_the_fallback_returns_and_without_it_is_a_clear_error():
    lucid.metal.synchronize()
    r = run(
        """
        import lucid
        try:
            lucid.metal.synchronize()
        except RuntimeError as e:
            print("RuntimeError", e)
    """,
        LUCID_METAL_FALLBACK="0",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("RuntimeError device 'metal' is unavailable"), r.stdout


def test_self_test_without_a_metal_backend_is_a_clear_error():
    with pytest.raises(RuntimeError, match="self_test: .*no Metal backend"):
        lucid.metal.self_test()


def test_stats_on_the_fallback_count_only_host_fallbacks():
    x = lucid.tensor([1.0, 2.0], device="metal")
    (x * 3).numpy()
    s = lucid.metal.stats()
    assert set(s) == {
        "command_buffers",
        "host_waits",
        "dispatches",
        "new_buffers",
        "cached_bytes",
        "host_fallbacks",
        "library_compiles",
    }
    assert s["dispatches"] == {}
    assert [s[k] for k in ("command_buffers", "host_waits", "new_buffers", "cached_bytes", "library_compiles")] == [
        0
    ] * 5
    assert s["host_fallbacks"] == sum(lucid.metal.host_fallback_counts().values())
