"""DistributedDataParallel's less common paths on two ranks, each checked here against what
one process computes; prints one "ok <case>" line per case that holds.

    mpiexec -n 2 python tests/distributed/worker_ddp_cases.py
"""

import copy

import numpy as np

import lucid
import lucid.distributed as dist
import lucid.nn as nn
from lucid.nn.parallel import DistributedDataParallel

dist.init()
rank, world = dist.get_rank(), dist.get_world_size()
rng = np.random.default_rng(7)
x_all = lucid.tensor(rng.standard_normal((4, 5)).astype(np.float32))
x_mine = x_all[2 * rank : 2 * rank + 2]


def close(a, b, what):
    a, b = a.numpy(), b.numpy()
    assert np.allclose(a, b, rtol=1e-5, atol=1e-6), f"{what}: {a} != {b}"


class Branchy(nn.Module):
    """Rank 1 never uses `extra`; nobody uses `unused`."""

    def __init__(self):
        super().__init__()
        self.main, self.extra, self.unused = nn.Linear(5, 2), nn.Linear(5, 2), nn.Linear(5, 2)

    def forward(self, x, use_extra):
        y = self.main(x)
        return y + self.extra(x) if use_extra else y


# 1. With find_unused_parameters, a parameter one rank did not use is averaged with a zero
#    from that rank; one no rank used keeps .grad None.
lucid.manual_seed(0)
reference = Branchy()
model = DistributedDataParallel(copy.deepcopy(reference), find_unused_parameters=True)
model(x_mine, use_extra=rank == 0).sum().backward()
reference.main(x_all).sum().backward()
reference.extra(x_all[:2]).sum().backward()
for name in ("main", "extra"):
    for a, b in zip(getattr(model.module, name).parameters(), getattr(reference, name).parameters()):
        close(a.grad, b.grad * (1 / world), name)
assert all(p.grad is None for p in model.module.unused.parameters())
print("ok unused parameters", flush=True)

# 2. Two forwards added into one loss are averaged once, after both.
lucid.manual_seed(1)
reference = nn.Linear(5, 3)
model = DistributedDataParallel(copy.deepcopy(reference))
(model(x_mine).sum() + (model(x_mine) ** 2).sum()).backward()
(reference(x_all).sum() + (reference(x_all) ** 2).sum()).backward()
for a, b in zip(model.module.parameters(), reference.parameters()):
    close(a.grad, b.grad * (1 / world), "two forwards")
assert model._syncs == 1
print("ok two forwards, one backward", flush=True)

# 3. BatchNorm's running statistics: each rank's training forwards move its own, and the next
#    forward (here an evaluation one) starts by giving every rank rank 0's.
lucid.manual_seed(2)
model = DistributedDataParallel(nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4)))
for _ in range(2):
    model(x_mine).sum().backward()
mine = model.module[1].running_mean.numpy()
rank0s = dist.broadcast(lucid.tensor(mine), 0).numpy()
assert rank == 0 or not np.allclose(mine, rank0s), "the ranks saw different data"
model.eval()
with lucid.no_grad():
    model(x_mine)  # evaluation: no statistics update, no gradient sync, buffers broadcast
model.train()
after = dist.all_gather(model.module[1].running_mean.detach()).numpy()
assert (after == rank0s).all(), after
assert int(model.module[1].num_batches_tracked.item()) == 2
assert model._syncs == 2
print("ok buffers follow rank 0", flush=True)

dist.barrier()
