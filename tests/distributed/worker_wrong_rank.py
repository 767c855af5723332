"""Every rank claims to be rank 0, as a program that computed its rank wrongly would: rank 1's
init_process_group raises, and the job ends at once instead of leaving rank 0 waiting.

    mpiexec -n 2 python tests/distributed/worker_wrong_rank.py
"""

import lucid
import lucid.distributed as dist

dist.init_process_group(backend="mpi", init_method="env://", world_size=2, rank=0)
print(f"rank {dist.get_rank()} ready", flush=True)
dist.all_reduce(lucid.ones(2))
print(f"rank {dist.get_rank()} was not stopped", flush=True)
