"""Data-parallel training in which one rank dies (SIGKILL, as a crashed or killed process)
at step 3 while the other goes on into the next averaging.

    mpiexec -n 2 python tests/distributed/worker_dead_rank.py VICTIM

Each rank prints "rank R step S" as it starts a step; a rank that gets to the end prints
"rank R finished", which must not happen.
"""

import os
import signal
import sys

import numpy as np

import lucid
import lucid.distributed as dist
import lucid.nn as nn
import lucid.nn.functional as F
from lucid.nn.parallel import DistributedDataParallel

victim = int(sys.argv[1])
dist.init()
rank = dist.get_rank()
model = DistributedDataParallel(nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 4)), bucket_mb=0.05)
opt = lucid.optim.SGD(model.parameters(), lr=0.01)
rng = np.random.default_rng(rank)
for step in range(200):
    print(f"rank {rank} step {step}", flush=True)
    if step == 3 and rank == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    x = lucid.tensor(rng.standard_normal((16, 32)).astype(np.float32))
    y = lucid.tensor(rng.integers(0, 4, 16))
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
print(f"rank {rank} finished", flush=True)
