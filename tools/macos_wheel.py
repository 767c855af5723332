"""Makes the engine in a macOS wheel self-contained, for setup.py (loaded by path).

macOS ships the Swift runtime (``/usr/lib/swift``, in the dyld shared cache since macOS
10.14.4), so a wheel needs only what the OS lacks: the libraries the engine loads through
``@rpath`` that are neither in ``/usr/lib/swift`` nor in the wheel (a toolchain's
back-deployment libraries, such as ``libswiftCompatibilitySpan.dylib``). Those are copied
beside the engine, and the engine's run paths become ``/usr/lib/swift`` then
``@loader_path`` only: none points into the toolchain or Xcode. Changing a Mach-O file
voids its signature, and arm64 macOS loads only signed code, so every file changed is
signed again (ad hoc, ``codesign --sign -``).

The parsers take ``otool``'s output and run anywhere (tests/test_workflows.py checks them).
"""

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

SYSTEM_RPATH = "/usr/lib/swift"
OWN_RPATH = "@loader_path"


def dependencies(otool_L: str) -> list[str]:
    """The install names `otool -L FILE` lists after the file's path: for a dylib, its own
    install name first, then what it loads."""
    return re.findall(r"^\s+(\S.*?) \(compatibility version", otool_L, re.MULTILINE)


def rpaths(otool_l: str) -> list[str]:
    """The LC_RPATH entries `otool -l FILE` lists, in order."""
    return re.findall(r"cmd LC_RPATH\n\s+cmdsize \d+\n\s+path (.+?) \(offset \d+\)", otool_l)


def install_id(otool_D: str) -> str | None:
    """The install name `otool -D FILE` prints (None for a file without one)."""
    lines = otool_D.strip().splitlines()
    return lines[1].strip() if len(lines) > 1 else None


def in_system(path: str) -> bool:
    """Whether dyld finds `path` on this Mac: on disk, or in the shared cache (where the OS's
    own libraries are, with no file on disk since macOS 11)."""
    if Path(path).exists():
        return True
    try:
        libc = ctypes.CDLL(None)
        probe = libc._dyld_shared_cache_contains_path
    except (OSError, AttributeError):
        return False
    probe.restype, probe.argtypes = ctypes.c_bool, [ctypes.c_char_p]
    return bool(probe(path.encode()))


def _run(*args: str) -> str:
    return subprocess.check_output(list(args), text=True)


def make_self_contained(lib_dir: Path, engine_name: str) -> list[str]:
    """Copies into `lib_dir` what `engine_name` loads through @rpath that the OS lacks (and,
    in turn, what those load), sets every copied file's install name to @rpath/<name>, the
    run paths to /usr/lib/swift and @loader_path, and signs what changed. Returns the names
    copied."""
    engine = lib_dir / engine_name
    search = [p for p in rpaths(_run("otool", "-l", str(engine))) if not p.startswith("@")]
    # Then the toolchain's own folders, where its back-deployment libraries are.
    toolchain = Path(_run("xcrun", "--find", "swift").strip()).resolve().parents[1] / "lib"
    search += [str(d) for d in sorted(toolchain.glob("swift*/macosx"), reverse=True)]
    copied, todo = [], [engine]
    while todo:
        current = todo.pop()
        for dep in dependencies(_run("otool", "-L", str(current))):
            if not dep.startswith("@rpath/"):
                continue
            name = dep[len("@rpath/") :]
            if name == engine_name or (lib_dir / name).exists() or in_system(f"{SYSTEM_RPATH}/{name}"):
                continue
            found = next((Path(d) / name for d in search if (Path(d) / name).is_file()), None)
            if found is None:
                raise SystemExit(
                    f"lucid: {current.name} loads @rpath/{name}, which is neither in {SYSTEM_RPATH} "
                    f"nor in its run paths {search}"
                )
            shutil.copyfile(found, lib_dir / name)
            (lib_dir / name).chmod(0o755)
            copied.append(name)
            todo.append(lib_dir / name)
    for target in [engine, *(lib_dir / n for n in copied)]:
        if target != engine:
            subprocess.check_call(["install_name_tool", "-id", f"@rpath/{target.name}", str(target)])
        for old in rpaths(_run("otool", "-l", str(target))):
            subprocess.check_call(["install_name_tool", "-delete_rpath", old, str(target)])
        for new in (SYSTEM_RPATH, OWN_RPATH):
            subprocess.check_call(["install_name_tool", "-add_rpath", new, str(target)])
        subprocess.check_call(["codesign", "--force", "--sign", "-", str(target)])
    return copied
