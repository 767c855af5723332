"""Setting lucid up on a fresh machine: the Linux libraries come from PyPI at the pinned
versions and nothing else from the system, and every missing prerequisite is one clear line
from `make`, not a compiler error.

The wheel's side (`pip install .` into a fresh venv, run with the Swift toolchain hidden) is
`make check-wheel`, which CI runs after the tests.
"""

import ctypes
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from lucid import _native

ROOT = Path(__file__).resolve().parents[1]
LINUX = sys.platform.startswith("linux")
linux_only = pytest.mark.skipif(not LINUX, reason="Apple builds use Accelerate and the OS's Swift runtime")

# What lucid may take from the system besides the Swift toolchain (which a wheel carries).
SYSTEM_LIBRARIES = {
    "linux-vdso.so.1",
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libstdc++.so.6",
    "libgcc_s.so.1",
    "libgomp.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
}


def _pins():
    """Every pinned requirement of pyproject.toml: name → set of versions pinned anywhere."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = list(meta["build-system"]["requires"]) + list(meta["project"]["dependencies"])
    for extra in meta["project"]["optional-dependencies"].values():
        reqs += extra
    pins = {}
    for r in reqs:
        m = re.match(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^;\s]+)", r)
        if m:
            pins.setdefault(m.group(1).lower(), set()).add(m.group(2))
    return pins


def test_native_libraries_are_pinned_once_and_consistently():
    pins = _pins()
    assert pins.get("scipy-openblas32") == {"0.3.34.481.3"}, pins
    # The headers and the library are one oneDNN: the devel package must match the runtime one.
    assert pins.get("onednn-cpu-gomp") == pins.get("onednn-devel-cpu-gomp") == {"2023.2.0"}, pins


@linux_only
def test_engine_needs_only_pypi_libraries_the_toolchain_and_the_c_runtime():
    engine = ROOT / "lucid" / "_lib" / "liblucid.so"
    out = subprocess.run(["ldd", str(engine)], capture_output=True, text=True, check=True).stdout
    resolved = re.findall(r"^\s*(\S+)(?: => (\S+))? \(", out, re.MULTILINE)
    assert resolved, out
    packages = {str(p) for p in _native.libraries()}
    swift_dir = Path(shutil.which("swift") or "/nonexistent").resolve().parent.parent / "lib"
    strays = []
    for name, path in resolved:
        if name in SYSTEM_LIBRARIES or os.path.basename(name) in SYSTEM_LIBRARIES:
            continue
        real = str(Path(path).resolve()) if path else name
        if real in packages or real.startswith(str(swift_dir)):
            continue
        strays.append(f"{name} => {path}")
    assert not strays, f"the engine links libraries from outside .venv and the Swift toolchain:\n{out}"
    for lib in ("libscipy_openblas.so", "libdnnl.so.3"):
        assert re.search(rf"^\s*{re.escape(lib)} => ", out, re.MULTILINE), f"{lib} is not linked:\n{out}"


def _pc_fields(text: str) -> dict[str, str]:
    return dict(re.findall(r"^(\w+)[:=] ?(.*)$", text, re.MULTILINE))


@linux_only
def test_the_pkg_config_file_names_the_pinned_headers_libraries_and_run_path(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "lucid" / "_native.py"), "pkg-config", str(tmp_path / "pc")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    path = Path(r.stdout.strip())
    assert path == tmp_path / "pc" / "lucid-native.pc"
    fields = _pc_fields(path.read_text())
    includes = [Path(f[2:]) for f in fields["Cflags"].split()]
    assert all(f.startswith("-I") for f in fields["Cflags"].split()), fields
    assert any((d / "cblas.h").is_file() for d in includes), includes
    assert any((d / "oneapi" / "dnnl" / "dnnl.h").is_file() for d in includes), includes
    lib_dirs = [Path(f[2:]) for f in fields["Libs"].split()]
    assert sorted(lib_dirs) == sorted({p.parent for p in _native.libraries()}), fields
    # The module maps name the libraries; the .pc file gives only their folders.
    assert all(f.startswith("-L") for f in fields["Libs"].split()), fields
    assert [Path(d) for d in fields["runpath"].split(":")] == lib_dirs, fields
    # Package.swift links the run path it reads from the same file (SwiftPM takes none from .pc files).
    assert 'pkgConfig: "lucid-native"' in (ROOT / "Package.swift").read_text()


@linux_only
def test_the_engine_build_used_the_pkg_config_file():
    pc = ROOT / ".venv" / "lib" / "pkgconfig" / "lucid-native.pc"
    assert pc.is_file(), "make build writes .venv/lib/pkgconfig/lucid-native.pc"
    engine = ROOT / "lucid" / "_lib" / "liblucid.so"
    out = subprocess.run(["readelf", "-d", str(engine)], capture_output=True, text=True, check=True).stdout
    runpath = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[(.*)\]", out)
    assert runpath, out
    for d in _pc_fields(pc.read_text())["runpath"].split(":"):
        assert d in runpath.group(1).split(":"), (d, runpath.group(1))


@linux_only
def test_the_process_uses_the_pinned_openblas_and_onednn():
    maps = Path("/proc/self/maps").read_text()
    mapped = {line.split(None, 5)[5] for line in maps.splitlines() if len(line.split(None, 5)) == 6}
    for lib in _native.libraries():
        assert str(lib) in mapped, f"{lib} is not mapped into this process"
    # (numpy brings an OpenBLAS of its own, under other symbol names; the system's must not come.)
    system = [m for m in mapped if re.search(r"blas|dnnl", m) and m.startswith(("/usr/", "/lib"))]
    assert not system, f"a system BLAS or oneDNN is loaded: {system}"

    blas, dnnl = (ctypes.CDLL(str(p)) for p in _native.libraries())
    blas.scipy_openblas_get_config.restype = ctypes.c_char_p
    assert blas.scipy_openblas_get_config().decode().startswith("OpenBLAS 0.3.34"), blas.scipy_openblas_get_config()

    class Version(ctypes.Structure):
        _fields_ = [
            ("major", ctypes.c_int),
            ("minor", ctypes.c_int),
            ("patch", ctypes.c_int),
            ("hash", ctypes.c_char_p),
        ]

    dnnl.dnnl_version.restype = ctypes.POINTER(Version)
    v = dnnl.dnnl_version().contents
    assert (v.major, v.minor) == (3, 2), (v.major, v.minor, v.patch)


HIDE_PACKAGE = {
    # Python as it is when the package was never installed: found neither as a module nor
    # as a distribution.
    "scipy-openblas32": """
        import importlib.util
        real = importlib.util.find_spec
        importlib.util.find_spec = lambda name, *a: None if name == "scipy_openblas32" else real(name, *a)
    """,
    "onednn-cpu-gomp": """
        import importlib.metadata as md
        real = md.distribution
        def distribution(name):
            if name == "onednn-cpu-gomp":
                raise md.PackageNotFoundError(name)
            return real(name)
        md.distribution = distribution
    """,
}


@linux_only
@pytest.mark.parametrize("package", sorted(HIDE_PACKAGE))
def test_a_missing_native_package_is_a_clear_import_error(package):
    code = textwrap.dedent(HIDE_PACKAGE[package]) + "import lucid\n"
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode != 0, r.stdout
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("lucid._native.MissingDependency: lucid:"), r.stderr
    assert f"the package {package} is not installed" in last and f"pip install {package}" in last, last


# --- missing prerequisites -------------------------------------------------------------------


def _shadow_path(tmp_path, hide=(), fakes=None):
    """A PATH of one folder holding links to every program on the current PATH except `hide`,
    plus `fakes` (name → shell script text)."""
    shadow = tmp_path / "bin"
    shadow.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not d or not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            src = os.path.join(d, name)
            if name in hide or (shadow / name).exists() or not (os.path.isfile(src) and os.access(src, os.X_OK)):
                continue
            (shadow / name).symlink_to(src)
    for name, text in (fakes or {}).items():
        (shadow / name).write_text("#!/bin/sh\n" + text)
        (shadow / name).chmod(0o755)
    return str(shadow)


def _make(tmp_path, goal, path, **variables):
    """`make GOAL` in a copy of the Makefile, tools/ and lucid/_native.py (no .venv there), with
    PATH `path`."""
    work = tmp_path / "checkout"
    (work / "lucid").mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml", "setup.py", "lucid/_native.py"):
        shutil.copy(ROOT / name, work / name)
    shutil.copytree(ROOT / "tools", work / "tools")
    make = shutil.which("make")
    args = [make, "--no-print-directory", "-C", str(work), goal] + [f"{k}={v}" for k, v in variables.items()]
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    env["PATH"] = path
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)


def _one_line(r):
    out = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode != 0, f"make succeeded:\n{r.stdout}{r.stderr}"
    assert len(out) == 1, "expected one line, got:\n" + "\n".join(out)
    return out[0]


REAL_PYTHON = shutil.which("python3") or sys.executable


def test_no_swift_is_one_line_naming_it(tmp_path):
    line = _one_line(_make(tmp_path, "demo", _shadow_path(tmp_path, hide={"swift"})))
    assert "no Swift toolchain" in line and "`swift` is not on PATH" in line and "swift.org/install" in line, line


def test_an_old_swift_is_one_line_naming_its_version(tmp_path):
    fake = 'echo "Swift version 5.10.1 (swift-5.10.1-RELEASE)"\necho "Target: x86_64-unknown-linux-gnu"\n'
    line = _one_line(_make(tmp_path, "test", _shadow_path(tmp_path, hide={"swift"}, fakes={"swift": fake})))
    assert "Swift 5.10 " in line and "too old" in line and "Swift 6" in line, line


def test_no_python_is_one_line_naming_it(tmp_path):
    line = _one_line(_make(tmp_path, "demo", _shadow_path(tmp_path), PYTHON="python3-nonexistent"))
    assert "no Python" in line and "python3-nonexistent" in line and "3.10" in line, line


def test_an_old_python_is_one_line_naming_its_version(tmp_path):
    fake = 'case "$*" in *"print("*) echo 3.9 ;; *) exit 1 ;; esac\n'
    line = _one_line(_make(tmp_path, "demo", _shadow_path(tmp_path, fakes={"oldpython": fake}), PYTHON="oldpython"))
    assert "Python 3.9" in line and "too old" in line and "3.10" in line, line


def test_a_python_without_venv_is_one_line_naming_it(tmp_path):
    # A real Python 3.10+ whose venv machinery fails to import, as on Debian without python3-venv.
    fake = f'case "$*" in *ensurepip*) exit 1 ;; esac\nexec {REAL_PYTHON} "$@"\n'
    line = _one_line(_make(tmp_path, "build", _shadow_path(tmp_path, fakes={"novenv": fake}), PYTHON="novenv"))
    assert "cannot make virtual environments" in line and "python3-venv" in line, line


def test_no_c_compiler_is_one_line_for_the_tests(tmp_path):
    path = _shadow_path(tmp_path, hide={"cc", "gcc", "clang"})
    line = _one_line(_make(tmp_path, "test", path))
    assert "no C compiler" in line and "include/lucid.h" in line, line


def test_everything_present_passes_the_checks(tmp_path):
    # A dry run parses the Makefile, and so runs the checks, without building anything.
    r = _make(tmp_path, "-n", os.environ.get("PATH", ""))
    assert r.returncode == 0 and "lucid:" not in r.stdout + r.stderr, r.stdout + r.stderr
