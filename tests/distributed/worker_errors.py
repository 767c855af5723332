"""Wrong arguments to the collectives, on one rank or on all: each rank records the exception
each case raised (type and message) in OUT/rank<r>.json, then checks that the collectives
still work after them.

    mpiexec -n 2 python tests/distributed/worker_errors.py OUT
"""

import json
import sys

import lucid
import lucid.distributed as dist

out_dir = sys.argv[1]
dist.init()
rank = dist.get_rank()
x = lucid.arange(3, dtype=lucid.float32)

CASES = {
    "not-a-tensor-on-rank-1": lambda: dist.all_reduce([1.0, 2.0] if rank == 1 else x),
    "bad-op": lambda: dist.all_reduce(x, op="product"),
    "mean-of-ints": lambda: dist.all_reduce(lucid.arange(3), op="mean"),
    "shapes-differ": lambda: dist.all_reduce(lucid.zeros(3 + rank)),
    "dtypes-differ": lambda: dist.all_reduce(lucid.zeros(3, dtype=lucid.float16 if rank else lucid.float32)),
    "ops-differ": lambda: dist.all_reduce(x, op="max" if rank else "sum"),
    "src-out-of-range": lambda: dist.broadcast(x, src=2),
    "src-differs": lambda: dist.broadcast(x, src=rank),
    "src-not-an-int": lambda: dist.broadcast(x, src="0"),
    "different-collectives": lambda: dist.broadcast(x, src=0) if rank else dist.all_reduce(x),
    "autograd-history": lambda: dist.all_reduce(lucid.ones(2, requires_grad=True) * 2),
    "gather-shapes-differ": lambda: dist.all_gather(lucid.zeros(2, 1 + rank)),
    "gather-not-a-tensor": lambda: dist.all_gather(None),
    "ddp-not-a-module": lambda: lucid.nn.parallel.DistributedDataParallel(x),
    "ddp-bad-grad-dtype": lambda: lucid.nn.parallel.DistributedDataParallel(
        lucid.nn.Linear(2, 2), grad_dtype=lucid.int32
    ),
    "ddp-models-differ": lambda: lucid.nn.parallel.DistributedDataParallel(lucid.nn.Linear(2, 2 + rank)),
}

raised = {}
for name, case in CASES.items():
    try:
        case()
        raised[name] = None
    except Exception as e:  # noqa: BLE001 - recorded for the test to judge
        raised[name] = [type(e).__name__, str(e)]

# After all of that the ranks are still in step.
total = dist.all_reduce(lucid.tensor([float(rank + 1)]))
raised["after"] = total.tolist()
with open(f"{out_dir}/rank{rank}.json", "w") as f:
    json.dump(raised, f)
