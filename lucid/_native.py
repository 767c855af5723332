"""Where the engine's native libraries come from on Linux.

On Linux the engine links OpenBLAS and oneDNN, and both come from PyPI, as numpy's and
SciPy's come: OpenBLAS from ``scipy-openblas32`` (its symbols carry a ``scipy_`` prefix,
so it never clashes with another OpenBLAS in the process), oneDNN from ``onednn-cpu-gomp``
(its headers from ``onednn-devel-cpu-gomp``, needed only to build). Nothing is taken from
the system but the C library, libstdc++/libgomp and, to build, the Swift toolchain. On
Apple platforms Accelerate serves the CPU and nothing here applies.

This module finds those libraries by path without importing them: ``_engine`` loads them
before the engine, so the engine's references to them resolve to these files whatever its
run path says, and the build asks for its flags by running this file as a script::

    python lucid/_native.py swift-flags [--release]   # -Xcc -I… -Xlinker -L… -Xlinker -rpath …

It imports nothing from ``lucid``, so the script form works before the engine is built.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shlex
import sys
from pathlib import Path

#: The PyPI packages, by what they provide. Their versions are pinned in pyproject.toml.
OPENBLAS_PACKAGE = "scipy-openblas32"
ONEDNN_PACKAGE = "onednn-cpu-gomp"
ONEDNN_HEADERS_PACKAGE = "onednn-devel-cpu-gomp"

#: The shared libraries the engine names (their sonames), in the order they are loaded.
OPENBLAS_LIBRARY = "libscipy_openblas.so"
ONEDNN_LIBRARY = "libdnnl.so.3"


class MissingDependency(ImportError):
    """A native library lucid needs is not installed; the message says how to get it."""


def needed() -> bool:
    """Whether this platform takes its CPU libraries from PyPI (Linux) or the OS (Apple)."""
    return sys.platform.startswith("linux")


def _missing(package: str, what: str) -> MissingDependency:
    return MissingDependency(
        f"lucid: {what} was not found: the package {package} is not installed in this Python "
        f"({sys.prefix}). Install lucid with pip (`pip install .` or `make build`), which brings it, "
        f"or install it alone with `pip install {package}`."
    )


def _installed_file(package: str, name: str, what: str) -> Path:
    """The path of the file `name` (a file name, or a path ending) that `package` installed."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise _missing(package, what) from None
    for f in dist.files or ():
        if f.name == name or str(f).replace("\\", "/").endswith("/" + name):
            path = Path(dist.locate_file(f)).resolve()
            if path.exists():
                return path
    raise _missing(package, what)


def openblas_dir() -> Path:
    """The folder of the ``scipy_openblas32`` package (``include/`` and ``lib/`` inside)."""
    spec = importlib.util.find_spec("scipy_openblas32")
    if spec is None or not spec.submodule_search_locations:
        raise _missing(OPENBLAS_PACKAGE, "OpenBLAS")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def libraries() -> list[Path]:
    """The shared libraries the engine links, by path, in the order to load them."""
    if not needed():
        return []
    blas = openblas_dir() / "lib" / OPENBLAS_LIBRARY
    if not blas.exists():
        raise _missing(OPENBLAS_PACKAGE, "OpenBLAS")
    return [blas, _installed_file(ONEDNN_PACKAGE, ONEDNN_LIBRARY, "oneDNN")]


# The release build of the engine skips Swift's run-time exclusivity checks: they cost about a
# tenth of a small op's time, the engine guards its shared state with locks, and the debug
# builds (`swift test`, the sanitizer runs) keep them.
RELEASE_FLAGS = ["-Xswiftc", "-enforce-exclusivity=unchecked"]


def swift_flags(release: bool = False) -> list[str]:
    """SwiftPM flags that build the engine against these libraries and let whatever it
    links (the engine library, the test runner) find them again at run time; with `release`,
    also the release build's own."""
    if not needed():
        return list(RELEASE_FLAGS) if release else []
    header = _installed_file(ONEDNN_HEADERS_PACKAGE, "oneapi/dnnl/dnnl.h", "oneDNN's headers")
    includes = [openblas_dir() / "include", header.parent.parent.parent]
    flags = []
    for inc in includes:
        flags += ["-Xcc", f"-I{inc}"]
    for lib in libraries():
        flags += ["-Xlinker", f"-L{lib.parent}", "-Xlinker", "-rpath", "-Xlinker", str(lib.parent)]
    return flags + (RELEASE_FLAGS if release else [])


def main(argv: list[str]) -> int:
    if argv[1:2] == ["swift-flags"] and argv[2:] in ([], ["--release"]):
        try:
            print(" ".join(shlex.quote(f) for f in swift_flags(release=argv[2:] == ["--release"])))
        except MissingDependency as e:
            print(e, file=sys.stderr)
            return 1
        return 0
    if argv[1:] == ["libraries"]:
        print("\n".join(str(p) for p in libraries()))
        return 0
    print(f"usage: {argv[0]} swift-flags [--release] | libraries", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
