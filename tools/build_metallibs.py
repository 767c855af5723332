"""Compiles the Metal kernels ahead of time into one ``.metallib`` per kernel family, with
Apple's Metal compiler (``xcrun metal``, macOS only).

Each family's library is made from Kernels/Common.metal followed by the family's own file
(tools/embed_metal.py's files, Common first), joined byte for byte as the engine joins them,
compiled as MSL 3.1 with every warning an error and fast math off (IEEE NaN and infinities, as
the engine compiles from source at run time), then linked:

    xcrun -sdk macosx metal -std=metal3.1 -Werror -fno-fast-math -c <family>.metal -o <family>.air
    xcrun -sdk macosx metallib <family>.air -o <family>.metallib

The output folder gets ``<family>.metallib`` for each family (the name is the family's, as
the engine's ``KernelFamily`` spells it: the file's stem in lower case, ``Elementwise.metal``
→ ``elementwise.metallib``) and ``manifest.json``, which names, for each family, its library,
the files it was made from and the SHA-256 of the joined source, so a loader can tell a
library made from other sources than its own and compile from source instead.

    python tools/build_metallibs.py --out build/metallib     # compile (macOS)
    python tools/build_metallibs.py --list                   # each family and its files
    python tools/build_metallibs.py --out DIR --dry-run      # print the commands, run nothing
    python tools/build_metallibs.py --out DIR --emulated     # the Metal emulation's stand-ins

``LUCID_METALLIB_DIR=<out>`` then makes the wheel carry them (setup.py), and makes the engine
load them from <out> instead of from its own folder's ``metal/``.

``--emulated`` writes, in place of each ``.metallib``, the file that stands for one in the
check build's emulation of the Metal API (tests/metal/Metal, ``makeLibrary(URL:)``), with the
same manifest: a few lines naming the family, the emulation's hash of its joined source (by
which the emulation finds the kernels it compiled as C++ from that source) and the compiler
flags above. It holds no GPU code and Apple's Metal refuses it; the tests use it to load libraries
through the engine's prebuilt path without a Mac.
"""

import argparse
import hashlib
import importlib.util
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STD = "metal3.1"
# As the engine's run-time compile (MetalBackend.compileOptions): IEEE NaN and infinities.
FLAGS = [f"-std={STD}", "-Werror", "-fno-fast-math"]
EMULATED_MAGIC = "lucid-emulated-metallib 1"


def _embed_metal():
    spec = importlib.util.spec_from_file_location("_lucid_embed_metal", ROOT / "tools" / "embed_metal.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def families() -> dict[str, list[Path]]:
    """Family name → the files its library is made from, in order (Common first)."""
    files = _embed_metal().sources()
    common, rest = files[0], files[1:]
    if common.stem != "Common":
        raise SystemExit(f"build_metallibs: expected Common.metal first, found {common.name}")
    return {p.stem.lower(): [common, p] for p in rest}


def commands(name: str, source: Path, out: Path) -> list[list[str]]:
    air = out / "air" / f"{name}.air"
    return [
        ["xcrun", "-sdk", "macosx", "metal", *FLAGS, "-c", str(source), "-o", str(air)],
        ["xcrun", "-sdk", "macosx", "metallib", str(air), "-o", str(out / f"{name}.metallib")],
    ]


def emulation_hash(data: bytes) -> int:
    """The emulation's hash of a library's source (tests/metal/gen_kernels.py's, which the check
    build's kernel table and the emulated device's lucid_msl_hash use): how it finds the
    kernels it compiled as C++ from that source."""
    spec = importlib.util.spec_from_file_location("_lucid_gen_kernels", ROOT / "tests" / "metal" / "gen_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fnv1a(data)


def emulated_library(name: str, text: str) -> str:
    """The emulation's stand-in for family `name`'s .metallib (see the module's docstring)."""
    lines = [
        EMULATED_MAGIC,
        f"family {name}",
        f"source-fnv1a64 {emulation_hash(text.encode()):016x}",
        f"compile {' '.join(FLAGS)}",
    ]
    return "\n".join(lines) + "\n"


def build(out: Path, dry_run: bool = False, emulated: bool = False) -> int:
    out.mkdir(parents=True, exist_ok=True)
    (out / "src").mkdir(exist_ok=True)
    (out / "air").mkdir(exist_ok=True)
    if not dry_run and not emulated and shutil.which("xcrun") is None:
        raise SystemExit("build_metallibs: needs Apple's Metal compiler (`xcrun metal`, Xcode on macOS)")
    manifest, failed = {"std": STD, "families": {}}, []
    for name, files in families().items():
        text = "".join(p.read_text() for p in files)
        source = out / "src" / f"{name}.metal"
        source.write_text(text)
        manifest["families"][name] = {
            "metallib": f"{name}.metallib",
            "sources": [p.relative_to(ROOT).as_posix() for p in files],
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
        }
        if emulated:
            (out / f"{name}.metallib").write_text(emulated_library(name, text))
            continue
        for cmd in commands(name, source, out):
            print(" ".join(shlex.quote(c) for c in cmd), flush=True)
            if not dry_run and subprocess.call(cmd) != 0:
                failed.append(name)
                break
    if failed:
        print(f"build_metallibs: {', '.join(failed)} did not compile (errors above)", file=sys.stderr)
        return 1
    if not dry_run:
        for name in manifest["families"]:
            if not (out / f"{name}.metallib").is_file():
                print(f"build_metallibs: xcrun made no {name}.metallib", file=sys.stderr)
                return 1
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"build_metallibs: {len(manifest['families'])} libraries in {out}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="the folder to write the libraries and manifest.json to")
    ap.add_argument("--list", action="store_true", help="print each family and its files")
    ap.add_argument("--dry-run", action="store_true", help="print the commands without running them")
    ap.add_argument("--emulated", action="store_true", help="write the Metal emulation's stand-ins, not real libraries")
    opts = ap.parse_args(argv)
    if opts.list:
        for name, files in families().items():
            print(name, *(p.relative_to(ROOT).as_posix() for p in files))
        return 0
    if opts.out is None:
        ap.error("--out is required")
    return build(opts.out.resolve(), opts.dry_run, opts.emulated)


if __name__ == "__main__":
    sys.exit(main())
