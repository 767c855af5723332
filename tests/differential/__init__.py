"""Programs run the same way on lucid and on PyTorch, with PyTorch's outcomes recorded beside
them (each module's ``--record``, with PyTorch installed) so that the tests need no PyTorch."""

import gzip
import json
from pathlib import Path


def write_reference(path: Path, torch, payload: dict) -> None:
    """Writes PyTorch's outcomes, with its version, to `path` as gzipped JSON."""
    with gzip.open(path, "wt") as f:
        json.dump({"torch": torch.__version__, **payload}, f, separators=(",", ":"))
    print(f"wrote {path} ({path.stat().st_size} bytes) from PyTorch {torch.__version__}")


def read_reference(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)
