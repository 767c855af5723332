"""Runs an installed lucid the way a cluster node would, for tools/check-wheel.sh: every
kernel family that goes to OpenBLAS or oneDNN is checked against numpy, a mixed-precision
training step runs, and the process must have loaded nothing for lucid from outside the
venv but the C runtime, libstdc++ and libgomp.

Prints ``check-wheel: N passed, M failed`` and exits non-zero on any failure.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

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


def mapped_files():
    out = set()
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            out.add(parts[5])
    return out


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
check("small float32 matmul (OpenBLAS)", *close((lucid.tensor(a) @ lucid.tensor(b)).numpy(), a @ b, 1e-4))
a, b = rng.standard_normal((256, 512), np.float32), rng.standard_normal((512, 256), np.float32)
check("large float32 matmul (oneDNN)", *close((lucid.tensor(a) @ lucid.tensor(b)).numpy(), a @ b, 1e-3))
with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
    c = lucid.tensor(a) @ lucid.tensor(b)
check("bfloat16 autocast matmul is bfloat16", c.dtype == lucid.bfloat16, str(c.dtype))
check("bfloat16 autocast matmul (oneDNN)", *close(c.float().numpy(), a @ b, 0.5))

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
check("conv2d forward (oneDNN)", *close(y.numpy(), ref, 1e-3))
y.sum().backward()
grad_ref = np.zeros_like(xp)
for i in range(3):
    for j in range(3):
        grad_ref[:, :, i : i + 12, j : j + 12] += w[:, :, i, j].sum(0)[None, :, None, None]
check("conv2d backward data (oneDNN)", *close(xt.grad.numpy(), grad_ref[:, :, 1:-1, 1:-1], 1e-3))

s = rng.standard_normal((64, 1000), np.float32)
e = np.exp(s - s.max(1, keepdims=True))
check("softmax (oneDNN)", *close(lucid.tensor(s).softmax(-1).numpy(), e / e.sum(1, keepdims=True), 1e-6))

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
native = [f for f in mapped_files() - before if re.search(r"swift|dispatch|BlocksRuntime|dnnl|openblas", f)]
strays = sorted(f for f in native if not Path(f).resolve().is_relative_to(venv))
check(
    "the Swift runtime, OpenBLAS and oneDNN in the process are the venv's",
    bool(native) and not strays,
    ", ".join(strays) or "none mapped",
)

# What the engine itself links: its own folder, the two libraries lucid loads first by path
# (which its run path does not name), and the C runtime.
engine_file = installed / "_lib" / "liblucid.so"
out = subprocess.run(["ldd", str(engine_file)], capture_output=True, text=True).stdout
preloaded = {"libscipy_openblas.so", "libdnnl.so.3"}
odd = []
for name, path in re.findall(r"^\s*(\S+)(?: => (.+?))?(?: \(0x[0-9a-f]+\))?$", out, re.MULTILINE):
    if os.path.basename(name) in SYSTEM or name.startswith("linux-vdso"):
        continue
    if path == "not found" and name in preloaded:
        continue
    if path and path != "not found" and Path(path).resolve().parent == engine_file.parent:
        continue
    odd.append(f"{name} => {path}")
check("the engine links only its own folder, the preloaded libraries and the C runtime", not odd, "; ".join(odd))
engine = [f for f in mapped_files() if f.endswith("/liblucid.so")]
check("the engine is the installed one", engine == [str(engine_file)], str(engine))

failed = results.count(False)
print(f"check-wheel: {len(results) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
