"""A rank that fails while rank 0 waits in a collective.

    mpiexec -n 2 python tests/distributed/worker_failures.py MODE

MODE: "raise" (rank 1 raises an uncaught exception), "exit" (rank 1 exits with status 3
without a word), "leave" (rank 1 returns normally without taking part: only the timeout
can end rank 0's wait), "raise-in-backward" (rank 1 raises while rank 0 averages gradients
in DistributedDataParallel's backward), "unused-everywhere" and "unused-on-rank-1" (a
parameter gets no gradient on every rank, or on rank 1 only, without find_unused_parameters:
the next forward raises instead of anything waiting for it).
"""

import os
import sys

import lucid
import lucid.distributed as dist
import lucid.nn as nn
from lucid.nn.parallel import DistributedDataParallel

mode = sys.argv[1]
dist.init()
rank = dist.get_rank()

if mode.startswith("unused"):

    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 2), nn.Linear(4, 2)

        def forward(self, x, use_b):
            return self.a(x) + self.b(x) if use_b else self.a(x)

    model = DistributedDataParallel(TwoHeads())
    for step in range(3):
        print(f"rank {rank} step {step}", flush=True)
        model(lucid.randn(3, 4), use_b=mode == "unused-on-rank-1" and rank == 0).sum().backward()
    print(f"rank {rank} was not stopped", flush=True)
    sys.exit(0)
model = DistributedDataParallel(nn.Linear(4, 2))
print(f"rank {rank} ready", flush=True)

if rank == 1:
    if mode in ("raise", "raise-in-backward"):
        raise ValueError("rank 1 failed on purpose")
    if mode == "exit":
        os._exit(3)
    if mode == "leave":
        sys.exit(0)
else:
    if mode == "raise-in-backward":
        model(lucid.randn(3, 4)).sum().backward()
    else:
        dist.all_reduce(lucid.ones(4))
    print("rank 0 was not stopped", flush=True)
