"""GradScaler on two ranks when only rank 1 sees an infinity; each rank saves in
OUT/rank<r>.json which steps it skipped, its scale after each update and whether its
parameters moved.

    mpiexec -n 2 python tests/distributed/worker_amp.py OUT MODE

MODE: "after-sync" (rank 1 puts an inf into a gradient after DistributedDataParallel has
averaged them), "no-sync" (rank 1's input holds an inf, in a forward under no_sync, so only
its own gradients have it), "unagreed" (as after-sync, with GradScaler's agreement over the
ranks switched off: the control, where the ranks must part).
"""

import json
import sys

import numpy as np

import lucid
import lucid.distributed as dist
import lucid.nn as nn
import lucid.nn.functional as F
from lucid.nn.parallel import DistributedDataParallel

out_dir, mode = sys.argv[1], sys.argv[2]
dist.init()
rank = dist.get_rank()
if mode == "unagreed":
    import lucid.amp.grad_scaler as grad_scaler

    grad_scaler._agree_over_ranks = lambda found_inf: None

lucid.manual_seed(0)
model = DistributedDataParallel(nn.Linear(6, 3))
opt = lucid.optim.SGD(model.parameters(), lr=0.1)
scaler = lucid.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1)
rng = np.random.default_rng(rank)
record = {"skipped": [], "scale": [], "moved": [], "local_inf": []}

for step in range(3):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    y = lucid.tensor(rng.integers(0, 3, 4))
    poisoned = step == 1 and rank == 1
    opt.zero_grad()
    if step == 1 and mode == "no-sync":
        if poisoned:
            x[0, 0] = np.inf
        with model.no_sync():
            scaler.scale(F.cross_entropy(model(lucid.tensor(x)), y)).backward()
    else:
        scaler.scale(F.cross_entropy(model(lucid.tensor(x)), y)).backward()
        if poisoned:
            w = model.module.weight
            g = w.grad.numpy()
            g[0, 0] = np.inf
            w.grad = lucid.tensor(g)
    record["local_inf"].append(bool(any(not np.isfinite(p.grad.numpy()).all() for p in model.parameters())))
    before = [p.numpy() for p in model.parameters()]
    result = scaler.step(opt)
    scaler.update()
    record["skipped"].append(
        result is None and not any(not np.array_equal(b, p.numpy()) for b, p in zip(before, model.parameters()))
    )
    record["moved"].append(any(not np.array_equal(b, p.numpy()) for b, p in zip(before, model.parameters())))
    record["scale"].append(scaler.get_scale())

record["params"] = [p.numpy().tolist() for p in model.parameters()]
with open(f"{out_dir}/rank{rank}.json", "w") as f:
    json.dump(record, f)
