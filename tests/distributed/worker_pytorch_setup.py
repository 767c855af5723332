"""PyTorch's spelling of a data-parallel job on each rank: init_process_group with the rank
and world size, DistributedSampler with its defaults from lucid.distributed, and
DistributedDataParallel(device_ids=[local rank]); each rank saves its sampler's indices and
what it was told in OUT/rank<r>.npz.

    mpiexec -n 2 python tests/distributed/worker_pytorch_setup.py OUT
"""

import os
import sys
import warnings

import numpy as np

import lucid
import lucid.distributed as dist
from lucid.nn.parallel import DistributedDataParallel
from lucid.utils.data import DataLoader, DistributedSampler, TensorDataset
from sampler_cases import CASES, key

warnings.simplefilter("ignore")
out_dir = sys.argv[1]
mpi_rank = int(os.environ["PMI_RANK"])  # what a PyTorch program reads from RANK and WORLD_SIZE
dist.init_process_group(backend="mpi", init_method="env://", world_size=int(os.environ["PMI_SIZE"]), rank=mpi_rank)
rank, world = dist.get_rank(), dist.get_world_size()
local_rank = dist._group.current().local_rank
got = {"rank": rank, "world": world, "local_rank": local_rank}

for n, drop_last, shuffle, epoch in CASES:
    sampler = DistributedSampler(TensorDataset(lucid.arange(n)), shuffle=shuffle, drop_last=drop_last, seed=3)
    sampler.set_epoch(epoch)
    got[key(n, drop_last, shuffle, epoch)] = np.array(list(sampler), dtype=np.int64)

# The loader over this rank's share, as a training loop reads it.
ds = TensorDataset(lucid.arange(10))
sampler = DistributedSampler(ds, shuffle=True)
sampler.set_epoch(1)
got["loader"] = np.concatenate([xb.numpy() for (xb,) in DataLoader(ds, batch_size=2, sampler=sampler)])

# A rank and world size that mpiexec did not give are refused.
try:
    dist.init_process_group(world_size=world + 1)
except ValueError as e:
    got["wrong_world"] = str(e)

model = DistributedDataParallel(lucid.nn.Linear(3, 2), device_ids=[local_rank], output_device=local_rank)
try:
    DistributedDataParallel(lucid.nn.Linear(3, 2), device_ids=[local_rank + 1])
except ValueError as e:
    got["wrong_device"] = str(e)
work = dist.all_reduce(lucid.tensor([float(rank + 1)]), op=dist.ReduceOp.SUM, async_op=True)
got["async_sum"] = work.result()[0].numpy() if work.wait() and work.is_completed() else np.array([-1.0])
dist.barrier(device_ids=[local_rank])
np.savez(os.path.join(out_dir, f"rank{rank}.npz"), **got)
