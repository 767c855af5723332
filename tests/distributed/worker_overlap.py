"""Data-parallel training that must end bit for bit where a one-process reference ends; each
rank saves its parameters (and counters) in OUT/rank<r>.npz.

    mpiexec -n 2 python tests/distributed/worker_overlap.py OUT MODE   # the ranks
    python tests/distributed/worker_overlap.py OUT MODE                # the reference

The reference runs alone and plays both ranks itself: for each rank's share of a batch it
runs a replica of the model (the same ops on the same values as that rank), sums the two
gradients and halves them in float32 (what the ranks' all-reduce computes: a sum of two
float32 numbers does not depend on their order), and steps one optimizer. So every mode must
match it exactly, not within a tolerance.

MODE:
  overlap       DistributedDataParallel with small buckets, SGD with momentum: buckets are
                all-reduced during backward
  no-overlap    the same with overlap=False (every bucket at the end of backward)
  no_sync       three micro-batches per step, the first two under no_sync()
  unused        rank 1's forward skips a layer (and no rank uses another): buckets started
                during backward on rank 0 are only started at the end on rank 1
  zero          ZeroRedundancyOptimizer(Adam) over DistributedDataParallel; rank 0 also saves
                the consolidated optimizer state
  zero-amp      the same under bfloat16 autocast with GradScaler; at step 1 rank 1's
                gradients hold an infinity (after the averaging), so every rank skips it
  amp           DistributedDataParallel with SGD under bfloat16 autocast with GradScaler
                (the two-host test runs this one)
"""

import copy
import sys

import numpy as np

import lucid
import lucid.distributed as dist
import lucid.nn as nn
import lucid.nn.functional as F
from lucid.distributed.optim import ZeroRedundancyOptimizer
from lucid.nn.parallel import DistributedDataParallel

out_dir, mode = sys.argv[1], sys.argv[2]
RANKS, BATCH, STEPS = 2, 8, 4
POISONED_STEP = 1  # zero-amp: rank 1's gradients hold an infinity at this step

lucid.set_num_threads(1)  # the same kernels' splits in the ranks and in the reference
dist.init()
world, rank = dist.get_world_size(), dist.get_rank()
assert world in (1, RANKS), f"run on 1 (the reference) or {RANKS} ranks, not {world}"
amp = mode in ("amp", "zero-amp")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 48)
        self.b = nn.Linear(48, 48)
        if mode == "unused":
            self.skipped = nn.Linear(48, 48)  # rank 1 does not use it
            self.unused = nn.Linear(48, 48)  # no rank does
        self.c = nn.Linear(48, 5)

    def forward(self, x, skip=False):
        h = F.relu(self.a(x))
        h = F.relu(self.b(h))
        if mode == "unused" and not skip:
            h = h + F.relu(self.skipped(h))
        return self.c(h)


def shard(step, r, micro=0):
    rng = np.random.default_rng(1000 * step + 10 * micro)
    x = rng.standard_normal((BATCH, 12)).astype(np.float32)
    y = rng.integers(0, 5, BATCH)
    n = BATCH // RANKS
    return lucid.tensor(x[r * n : (r + 1) * n]), lucid.tensor(y[r * n : (r + 1) * n])


def loss_of(model, step, r, micro=0, scaler=None):
    x, y = shard(step, r, micro)
    with lucid.amp.autocast("cpu", dtype=lucid.bfloat16, enabled=amp):
        loss = F.cross_entropy(model(x, skip=mode == "unused" and r == 1), y)
    return scaler.scale(loss) if scaler is not None else loss


def micro_batches():
    return 3 if mode == "no_sync" else 1


def make_optimizer(params):
    if mode.startswith("zero"):
        if world == 1:
            return lucid.optim.Adam(params, lr=0.01)
        return ZeroRedundancyOptimizer(params, lucid.optim.Adam, lr=0.01)
    return lucid.optim.SGD(params, lr=0.1, momentum=0.9)


def poison(params):
    g = params[0].grad.numpy()
    g[0, 0] = np.inf
    params[0].grad = lucid.tensor(g)


lucid.manual_seed(rank)  # the ranks differ until DDP broadcasts rank 0's (the reference's)
net = Net()
scaler = lucid.amp.GradScaler("cpu", init_scale=256.0, growth_interval=2) if amp else None
saved = {}

if world == 1:
    opt = make_optimizer(net.parameters())
    for step in range(STEPS):
        opt.zero_grad()
        local = []
        for r in range(RANKS):
            replica = copy.deepcopy(net)
            for micro in range(micro_batches()):
                loss_of(replica, step, r, micro, scaler).backward()
            grads = [None if p.grad is None else p.grad.numpy() for p in replica.parameters()]
            local.append(grads)
        for p, g0, g1 in zip(net.parameters(), *local):
            if g0 is None and g1 is None:
                continue
            g0 = np.zeros_like(g1) if g0 is None else g0
            g1 = np.zeros_like(g0) if g1 is None else g1
            p.grad = lucid.tensor((g0 + g1) * np.float32(0.5))
        if mode == "zero-amp" and step == POISONED_STEP:
            poison(list(net.parameters()))
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
    if mode.startswith("zero"):
        saved["state"] = opt.state_dict()
else:
    model = DistributedDataParallel(
        net, bucket_mb=0.005, overlap=mode != "no-overlap", find_unused_parameters=mode == "unused"
    )
    opt = make_optimizer(model.parameters())
    for step in range(STEPS):
        opt.zero_grad()
        for micro in range(micro_batches()):
            if micro < micro_batches() - 1:
                with model.no_sync():
                    loss_of(model, step, rank, micro, scaler).backward()
            else:
                loss_of(model, step, rank, micro, scaler).backward()
        if mode == "zero-amp" and step == POISONED_STEP and rank == 1:
            poison(list(net.parameters()))
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
    saved["syncs"] = model._syncs
    saved["started_early"] = model._started_early
    saved["buckets"] = len(model._buckets)
    if mode.startswith("zero"):
        saved["owned"] = sum(p.numel() for p in opt._params_of(rank))
        opt.consolidate_state_dict(to=0)
        if rank == 0:
            saved["state"] = opt.state_dict()

flat = {f"param{i}": p.numpy() for i, p in enumerate(net.parameters())}
flat["grad_is_none"] = np.array([p.grad is None for p in net.parameters()])
if scaler is not None:
    flat["scale"] = np.float32(scaler.get_scale())
for key in ("syncs", "started_early", "buckets", "owned"):
    if key in saved:
        flat[key] = np.int64(saved[key])
if "state" in saved:
    for i, s in saved["state"]["state"].items():
        for k, v in s.items():
            flat[f"state{i}.{k}"] = v.numpy() if hasattr(v, "numpy") else np.asarray(v)
np.savez(f"{out_dir}/rank{rank}.npz", **flat)
print(f"rank {rank} done", flush=True)
