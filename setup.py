"""Build hook: compiles the Swift engine with SwiftPM and ships the library inside lucid/_lib.

Everything else about the package is declared in pyproject.toml.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parent
LIB = "liblucid.dylib" if sys.platform == "darwin" else "liblucid.so"


def build_engine() -> Path:
    """Builds the engine in release mode and returns the library's path."""
    cmd = ["swift", "build", "-c", "release", "--product", "lucid"]
    if os.environ.get("LUCID_SKIP_ENGINE_BUILD") != "1":
        try:
            subprocess.check_call(cmd, cwd=ROOT)
        except FileNotFoundError:
            raise SystemExit("lucid: building the engine needs a Swift toolchain (`swift` was not found on PATH)")
    bin_dir = subprocess.check_output(cmd[:4] + ["--show-bin-path"], cwd=ROOT, text=True).strip()
    lib = Path(bin_dir) / LIB
    if not lib.exists():
        raise SystemExit(f"lucid: {lib} was not produced by `{' '.join(cmd)}`")
    return lib


class build_py_with_engine(build_py):
    def run(self):
        super().run()
        lib = build_engine()
        # An editable install imports lucid/ from the source tree, so the library goes there.
        base = ROOT if getattr(self, "editable_mode", False) else Path(self.build_lib)
        dest = base / "lucid" / "_lib"
        dest.mkdir(parents=True, exist_ok=True)
        if not (dest / LIB).exists() or (dest / LIB).read_bytes() != lib.read_bytes():
            shutil.copy2(lib, dest / LIB)


class BinaryDistribution(Distribution):
    """The wheel carries a native library, so it is platform-specific."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": build_py_with_engine}, distclass=BinaryDistribution)
