"""Tests that walk a whole space of inputs (every float32 bit pattern) take long enough that
`make test` leaves them out: they run under `make reliability` (LUCID_RELIABILITY=full) or when
named on the command line (`pytest tests/reliability/test_dtype_conversions.py`). `make test`
runs a sampled form of each in the tests of its area (tests/test_dtypes.py for the
conversions)."""

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
FULL_ONLY = {"test_dtype_conversions.py"}


def _named(path, config):
    return any(Path(arg.split("::")[0]).resolve() == path for arg in config.args)


def pytest_ignore_collect(collection_path, config):
    path = Path(collection_path).resolve()
    if path.name in FULL_ONLY and path.parent == HERE:
        if os.environ.get("LUCID_RELIABILITY") != "full" and not _named(path, config):
            return True
    return None
