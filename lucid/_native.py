"""Where the engine's native libraries come from on Linux.

On Linux the engine links OpenBLAS and oneDNN, and both come from PyPI, as numpy's and
SciPy's come: OpenBLAS from ``scipy-openblas32`` (its symbols carry a ``scipy_`` prefix,
so it never clashes with another OpenBLAS in the process), oneDNN from ``onednn-cpu-gomp``
(its headers from ``onednn-devel-cpu-gomp``, needed only to build). Nothing is taken from
the system but the C library, libstdc++/libgomp and, to build, the Swift toolchain. On
Apple platforms Accelerate serves the CPU and nothing here applies.

This module finds those libraries by path without importing them: ``_engine`` loads them
before the engine, so the engine's references to them resolve to these files whatever its
run path says. A build finds them through a pkg-config file that this file writes::

    python lucid/_native.py pkg-config DIR   # writes DIR/lucid-native.pc and prints its path
    python lucid/_native.py release-flags    # the release build's own flags

SwiftPM reads it when ``PKG_CONFIG_PATH`` names DIR (``make build`` writes it into
``.venv/lib/pkgconfig``): the header and library folders for every target that imports the
engine, and, read by Package.swift, the run path of whatever links it. So an app that
depends on the package builds with that one variable set and no flags.

It imports nothing from ``lucid``, so the script form works before the engine is built.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
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
# builds (`swift test`, the sanitizer runs) keep them. Passed on the command line, not in
# Package.swift, where an unsafe flag would keep apps from depending on the package by version.
RELEASE_FLAGS = ["-Xswiftc", "-enforce-exclusivity=unchecked"]

#: The pkg-config name the CBLAS and CDNNL targets of Package.swift look for.
PKG_CONFIG_NAME = "lucid-native"


def pkg_config(out_dir: Path) -> Path:
    """Writes ``lucid-native.pc`` into `out_dir`: the folders of OpenBLAS's and oneDNN's
    headers (Cflags) and libraries (Libs), and their run path (the ``runpath`` variable, which
    Package.swift adds to the engine's link: SwiftPM takes no run path from a .pc file)."""
    if not needed():
        raise MissingDependency("lucid: the pkg-config file is for Linux; Apple platforms use Accelerate")
    header = _installed_file(ONEDNN_HEADERS_PACKAGE, "oneapi/dnnl/dnnl.h", "oneDNN's headers")
    includes = [openblas_dir() / "include", header.parent.parent.parent]
    lib_dirs = list(dict.fromkeys(lib.parent for lib in libraries()))
    for d in [*includes, *lib_dirs]:
        if any(c.isspace() for c in str(d)):
            raise MissingDependency(f"lucid: {d} has a space in its path, which a pkg-config file cannot hold")
    text = (
        "# lucid's native libraries on Linux, from PyPI; written by lucid/_native.py\n"
        f"runpath={':'.join(map(str, lib_dirs))}\n\n"
        f"Name: {PKG_CONFIG_NAME}\n"
        f"Description: OpenBLAS ({OPENBLAS_PACKAGE}) and oneDNN ({ONEDNN_PACKAGE}) for lucid's engine\n"
        "Version: 1\n"
        f"Cflags: {' '.join(f'-I{d}' for d in includes)}\n"
        f"Libs: {' '.join(f'-L{d}' for d in lib_dirs)}\n"
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{PKG_CONFIG_NAME}.pc"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def main(argv: list[str]) -> int:
    try:
        if argv[1:2] == ["pkg-config"] and len(argv) == 3:
            print(pkg_config(Path(argv[2])))
            return 0
        if argv[1:] == ["release-flags"]:
            print(" ".join(RELEASE_FLAGS))
            return 0
        if argv[1:] == ["libraries"]:
            print("\n".join(str(p) for p in libraries()))
            return 0
    except MissingDependency as e:
        print(e, file=sys.stderr)
        return 1
    print(f"usage: {argv[0]} pkg-config DIR | release-flags | libraries", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
