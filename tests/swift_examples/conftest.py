"""The Swift example programs (examples/swift): built as an app that depends on the package
would build them, then run against checkpoints and outputs of the Python API.

They run with ``make swift-examples`` (which CI runs) or ``pytest tests/swift_examples``; the
plain ``pytest`` run of the whole suite leaves them out, as building the package takes minutes.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PACKAGE = ROOT / "examples" / "swift"


def _asked_for(config) -> bool:
    if os.environ.get("LUCID_SWIFT_EXAMPLE_TESTS") == "1":
        return True
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path, config):
    if Path(collection_path).name.startswith("test_") and not _asked_for(config):
        return True
    return None


def swift_environment() -> dict[str, str]:
    """The environment an app's developer builds in: their own, plus on Linux the one
    variable that names lucid's pkg-config file (docs/swift.rst, 'Building on Linux')."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "PKG_CONFIG_PATH")}
    if sys.platform.startswith("linux"):
        env["PKG_CONFIG_PATH"] = str(ROOT / ".venv" / "lib" / "pkgconfig")
    return env


@pytest.fixture(scope="session")
def examples() -> Path:
    """The folder of the built `train` and `deploy` executables (a plain `swift build`)."""
    build = ["swift", "build", "-c", "release", "--package-path", str(PACKAGE)]
    r = subprocess.run(build, env=swift_environment(), capture_output=True, text=True, timeout=3000)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-6000:]
    bin_dir = subprocess.run(
        build + ["--show-bin-path"], env=swift_environment(), capture_output=True, text=True, check=True
    ).stdout.strip()
    return Path(bin_dir)
