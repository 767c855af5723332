"""Every collective on every dtype and device; each rank saves what it got in OUT/rank<r>.npz.

mpiexec -n 2 python tests/distributed/worker_collectives.py OUT
"""

import sys
import warnings

import numpy as np

import lucid
import lucid.distributed as dist
from mpi_cases import DEVICES, DTYPES, FLOATS, rank_values, storable

warnings.simplefilter("ignore")  # "metal" on the host fallback warns once
out_dir = sys.argv[1]
dist.init()
rank, world = dist.get_rank(), dist.get_world_size()
got = {}


def make(dtype, device, values=None):
    values = rank_values(dtype, rank) if values is None else values
    return lucid.tensor(values, dtype=getattr(lucid, "bool_" if dtype == "bool" else dtype), device=device)


for dtype in DTYPES:
    for device in DEVICES:
        key = f"{dtype}-{device}"
        ops = ("sum", "max", "mean") if dtype in FLOATS else ("sum", "max")
        for op in ops:
            t = make(dtype, device)
            result = dist.all_reduce(t, op=op)
            assert result is t, "all_reduce returns the tensor it updated"
            assert t.dtype is result.dtype and t.device == device and tuple(t.shape) == (3, 5)
            got[f"{key}-{op}"] = storable(t.numpy())
        t = make(dtype, device)
        assert dist.broadcast(t, src=world - 1) is t
        got[f"{key}-broadcast"] = storable(t.numpy())
        t = make(dtype, device)
        gathered = dist.all_gather(t)
        assert gathered.device == device and gathered.dtype is t.dtype
        got[f"{key}-gather"] = storable(gathered.numpy())
        got[f"{key}-gather-input"] = storable(t.numpy())  # all_gather leaves its input alone

# A view that is not contiguous (the transpose) takes the result, and so does its base.
base = make("float32", "cpu")
view = base.T
dist.all_reduce(view, op="sum")
got["view"], got["view-base"] = view.numpy(), base.numpy()
# A 0-d tensor and an empty one.
got["scalar"] = dist.all_reduce(lucid.tensor(float(rank + 1)), op="sum").numpy()
got["empty"] = dist.all_reduce(lucid.zeros(0, 4), op="sum").numpy()
# A parameter keeps requires_grad, stays a leaf and keeps its gradient.
p = lucid.nn.Parameter(lucid.tensor(rank_values("float32", rank)))
(p * 3).sum().backward()
dist.all_reduce(p, op="mean")
assert p.requires_grad and p.is_leaf, "the parameter stays a leaf that requires grad"
got["param"], got["param-grad"] = p.detach().numpy(), p.grad.numpy()
# ReduceOp names work as the strings.
got["reduceop-avg"] = dist.all_reduce(make("float32", "cpu"), op=dist.ReduceOp.AVG).numpy()

got["threads"] = lucid.get_num_threads()  # init split the cores between the two ranks here

dist.barrier()
np.savez(f"{out_dir}/rank{rank}.npz", world=world, **got)
