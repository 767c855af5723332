"""Runs an installed lucid the way a cluster node would, for tools/check-wheel.sh: every
kernel family that goes to the CPU libraries (OpenBLAS and oneDNN on Linux, Accelerate on
macOS) is checked against numpy, a mixed-precision training step runs, and the process must
have loaded nothing for lucid from outside the venv but the system's own libraries (on
Linux the C runtime, libstdc++ and libgomp; on macOS /usr/lib and /System, the Swift runtime
among them). On macOS the engine's run paths must be /usr/lib/swift and its own folder, and
with ``LUCID_EXPECT_METALLIBS=1`` the wheel must carry the Metal libraries its manifest names
(lucid/_lib/metal/); a Linux wheel must carry none. It never touches "metal": GitHub's hosted
Macs have no GPU Metal compute can use.

Prints ``check-wheel: N passed, M failed`` and exits non-zero on any failure.
"""

import ctypes
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

MACOS = sys.platform == "darwin"
SYSTEM = {
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
BLAS, DNNL = ("Accelerate", "host kernels") if MACOS else ("OpenBLAS", "oneDNN")


def mapped_files():
    """The files of every library in the process: /proc/self/maps on Linux, dyld's image list on macOS."""
    if MACOS:
        dyld = ctypes.CDLL(None)
        dyld._dyld_get_image_name.restype = ctypes.c_char_p
        dyld._dyld_get_image_name.argtypes = [ctypes.c_uint32]
        names = (dyld._dyld_get_image_name(i) for i in range(dyld._dyld_image_count()))
        return {os.fsdecode(n) for n in names if n}
    out = set()
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            out.add(parts[5])
    return out


def system_file(path):
    return MACOS and (path.startswith("/usr/lib/") or path.startswith("/System/"))


results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}{'' if ok else ': ' + detail}", flush=True)


def close(a, b, tol):
    err = float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)))) if np.size(b) else 0.0
    return err <= tol, f"max error {err:.3g} > {tol}"


before = mapped_files()
import lucid  # noqa: E402
import lucid.nn as nn  # noqa: E402
import lucid.nn.functional as F  # noqa: E402

installed = Path(lucid.__file__).resolve().parent
check("lucid is the installed package", Path(sys.prefix).resolve() in installed.parents, str(installed))

rng = np.random.default_rng(0)
a, b = rng.standard_normal((8, 16), np.float32), rng.standard_normal((16, 4), np.float32)
check(f"small float32 matmul ({BLAS})", *close((lucid.tensor(a) @ lucid.tensor(b)).numpy(), a @ b, 1e-4))
a, b = rng.standard_normal((256, 512), np.float32), rng.standard_normal((512, 256), np.float32)
check(
    f"large float32 matmul ({DNNL if not MACOS else BLAS})",
    *close((lucid.tensor(a) @ lucid.tensor(b)).numpy(), a @ b, 1e-3),
)
with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
    c = lucid.tensor(a) @ lucid.tensor(b)
check("bfloat16 autocast matmul is bfloat16", c.dtype == lucid.bfloat16, str(c.dtype))
check(f"bfloat16 autocast matmul ({DNNL})", *close(c.float().numpy(), a @ b, 0.5))

x = rng.standard_normal((4, 3, 12, 12), np.float32)
conv = nn.Conv2d(3, 8, 3, padding=1)
w = conv.weight.numpy()
xt = lucid.tensor(x).requires_grad_()
y = conv(xt)
ref = np.zeros((4, 8, 12, 12), np.float32)
xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
for i in range(3):
    for j in range(3):
        ref += np.einsum("nchw,oc->nohw", xp[:, :, i : i + 12, j : j + 12], w[:, :, i, j])
ref += conv.bias.numpy()[None, :, None, None]
check(f"conv2d forward ({DNNL})", *close(y.numpy(), ref, 1e-3))
y.sum().backward()
grad_ref = np.zeros_like(xp)
for i in range(3):
    for j in range(3):
        grad_ref[:, :, i : i + 12, j : j + 12] += w[:, :, i, j].sum(0)[None, :, None, None]
check(f"conv2d backward data ({DNNL})", *close(xt.grad.numpy(), grad_ref[:, :, 1:-1, 1:-1], 1e-3))

s = rng.standard_normal((64, 1000), np.float32)
e = np.exp(s - s.max(1, keepdims=True))
check(f"softmax ({DNNL})", *close(lucid.tensor(s).softmax(-1).numpy(), e / e.sum(1, keepdims=True), 1e-6))

model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 3))
opt = lucid.optim.AdamW(model.parameters(), lr=1e-2)
scaler = lucid.amp.GradScaler("cpu")
inputs, labels = lucid.tensor(rng.standard_normal((64, 16), np.float32)), lucid.tensor(rng.integers(0, 3, 64))
losses = []
for _ in range(30):
    opt.zero_grad()
    with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
        loss = F.cross_entropy(model(inputs), labels)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    losses.append(loss.item())
check("bfloat16 training reduces the loss", losses[-1] < 0.5 * losses[0], f"{losses[0]:.3f} -> {losses[-1]:.3f}")

venv = Path(sys.prefix).resolve()
native = [f for f in mapped_files() - before if re.search(r"swift|dispatch|BlocksRuntime|dnnl|openblas|lucid", f)]
strays = sorted(f for f in native if not Path(f).resolve().is_relative_to(venv) and not system_file(f))
check(
    "the Swift runtime and the CPU libraries in the process are the venv's or the system's",
    bool(native) and not strays,
    ", ".join(strays) or "none mapped",
)

engine_file = installed / "_lib" / ("liblucid.dylib" if MACOS else "liblucid.so")
odd = []
if MACOS:
    # What the engine loads: the system's libraries and frameworks, and through @rpath the
    # Swift runtime in /usr/lib/swift or what the wheel carries beside it.
    out = subprocess.run(["otool", "-L", str(engine_file)], capture_output=True, text=True).stdout
    for name in re.findall(r"^\s+(\S.*?) \(compatibility version", out, re.MULTILINE)[1:]:
        if system_file(name):
            continue
        if name.startswith("@rpath/") and (
            (engine_file.parent / name[7:]).is_file() or name[7:].startswith("libswift")
        ):
            continue
        odd.append(name)
    out = subprocess.run(["otool", "-l", str(engine_file)], capture_output=True, text=True).stdout
    paths = re.findall(r"cmd LC_RPATH\n\s+cmdsize \d+\n\s+path (.+?) \(offset", out)
    check(
        "the engine's run paths are /usr/lib/swift and its own folder",
        paths == ["/usr/lib/swift", "@loader_path"],
        str(paths),
    )
else:
    # What the engine itself links: its own folder, the two libraries lucid loads first by path
    # (which its run path does not name), and the C runtime.
    out = subprocess.run(["ldd", str(engine_file)], capture_output=True, text=True).stdout
    preloaded = {"libscipy_openblas.so", "libdnnl.so.3"}
    for name, path in re.findall(r"^\s*(\S+)(?: => (.+?))?(?: \(0x[0-9a-f]+\))?$", out, re.MULTILINE):
        if os.path.basename(name) in SYSTEM or name.startswith("linux-vdso"):
            continue
        if path == "not found" and name in preloaded:
            continue
        if path and path != "not found" and Path(path).resolve().parent == engine_file.parent:
            continue
        odd.append(f"{name} => {path}")
check("the engine links only its own folder, the preloaded libraries and the system's", not odd, "; ".join(odd))
engine = [f for f in mapped_files() if Path(f).name == engine_file.name]
check("the engine is the installed one", [Path(f).resolve() for f in engine] == [engine_file.resolve()], str(engine))

# The Metal kernels compiled ahead of time (setup.py, LUCID_METALLIB_DIR): where the engine's
# loader looks for them, each family's library non-empty.
metal_dir = installed / "_lib/metal"
if os.environ.get("LUCID_EXPECT_METALLIBS") == "1":
    manifest = metal_dir / "manifest.json"
    families = json.loads(manifest.read_text())["families"] if manifest.is_file() else {}
    libs = [metal_dir / e["metallib"] for e in families.values()]
    missing = [f.name for f in libs if not f.is_file() or not f.stat().st_size]
    check(
        f"the wheel carries the Metal libraries its manifest names ({len(families)})",
        bool(families) and not missing and len(list(metal_dir.glob("*.metallib"))) == len(families),
        f"manifest {'found' if families else 'missing'}, empty or missing: {missing}",
    )
elif not MACOS:
    check("a Linux wheel carries no Metal libraries", not metal_dir.exists(), str(metal_dir))

failed = results.count(False)
print(f"check-wheel: {len(results) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
