"""Data-parallel training with DistributedDataParallel; each rank saves its parameters (and
more) in OUT/rank<r>.npz. Run alone (world size 1) on the whole batches, it is the reference
the two-rank run must match.

    mpiexec -n 2 python tests/distributed/worker_ddp.py OUT MODE DEVICE
    python tests/distributed/worker_ddp.py OUT MODE DEVICE

MODE: "float32"; "bfloat16" (under bfloat16 autocast); "accumulate" (two micro-batches per
step, the first under no_sync); "unsynced" (every forward under no_sync: no averaging, the
control a check must tell apart); "compress-bfloat16" and "compress-float16" (one backward
with grad_dtype, saving the averaged gradients and the local ones).
"""

import sys
import warnings

import numpy as np

import lucid
import lucid.distributed as dist
import lucid.nn as nn
import lucid.nn.functional as F
from lucid.nn.parallel import DistributedDataParallel

warnings.simplefilter("ignore")
out_dir, mode, device = sys.argv[1], sys.argv[2], sys.argv[3]
BATCH, STEPS = 16, 4

dist.init()
rank, world = dist.get_rank(), dist.get_world_size()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
        self.register_buffer("shift", lucid.full((4,), float(rank)))  # rank 0's must win

    def forward(self, x):
        return self.body(x) + self.shift


def batch(step, micro=0):
    rng = np.random.default_rng(100 * step + micro)
    x = rng.standard_normal((BATCH, 10)).astype(np.float32)
    y = rng.integers(0, 4, BATCH)
    n = BATCH // world  # this rank's share: the same size on every rank
    return (
        lucid.tensor(x[rank * n : (rank + 1) * n], device=device),
        lucid.tensor(y[rank * n : (rank + 1) * n], device=device),
    )


lucid.manual_seed(rank)  # different initial weights on each rank: the wrapper broadcasts rank 0's
net = Net().to(device)
grad_dtype = {"compress-bfloat16": lucid.bfloat16, "compress-float16": lucid.float16}.get(mode)
model = DistributedDataParallel(net, bucket_mb=0.001, grad_dtype=grad_dtype)  # several small buckets
saved = {"initial": [p.numpy() for p in net.parameters()], "shift": net.shift.numpy()}
opt = lucid.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)


def loss_of(x, y):
    dtype = lucid.bfloat16 if mode == "bfloat16" else None
    with lucid.amp.autocast(device, dtype=dtype, enabled=mode == "bfloat16"):
        return F.cross_entropy(model(x), y)


if mode.startswith("compress"):
    x, y = batch(0)
    # The local gradient, from a plain copy of the (broadcast) model on this rank's share.
    import copy

    local = copy.deepcopy(net)
    F.cross_entropy(local(x), y).backward()
    saved["local"] = [p.grad.numpy() for p in local.parameters()]
    loss_of(x, y).backward()
    saved["averaged"] = [p.grad.numpy() for p in net.parameters()]
else:
    for step in range(STEPS):
        opt.zero_grad()
        if mode == "accumulate":
            with model.no_sync():
                loss_of(*batch(step, 1)).backward()
        if mode == "unsynced":
            with model.no_sync():
                loss_of(*batch(step)).backward()
        else:
            loss_of(*batch(step)).backward()
        opt.step()
saved["final"] = [p.numpy() for p in net.parameters()]
saved["syncs"] = model._syncs

flat = {"shift": saved["shift"], "syncs": saved["syncs"], "world": world}
for key in ("initial", "final", "local", "averaged"):
    for i, a in enumerate(saved.get(key, [])):
        flat[f"{key}{i}"] = a
np.savez(f"{out_dir}/rank{rank}.npz", **flat)
