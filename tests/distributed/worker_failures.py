"""A rank that fails while rank 0 waits in a collective.

    mpiexec -n 2 python tests/distributed/worker_failures.py MODE

MODE: "raise" (rank 1 raises an uncaught exception), "exit" (rank 1 exits with status 3
without a word), "leave" (rank 1 returns normally without taking part: only the timeout
can end rank 0's wait), "raise-in-backward" (rank 1 raises while rank 0 averages gradients
in DistributedDataParallel's backward).
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
