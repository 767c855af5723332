"""The data-parallel training loop of the guide's distributed page (docs/guide/distributed.rst),
run as written on tiny data; prints whether every rank's parameters agree after it.

    mpiexec -n 2 python tests/distributed/worker_readme.py
"""

import re
import textwrap
import warnings
from pathlib import Path

import numpy as np

import lucid
import lucid.nn as nn
import lucid.nn.functional as F

warnings.simplefilter("ignore")
PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "distributed.rst"
# The page's `.. code-block:: python` blocks, dedented; exactly one is the training loop.
(block,) = [
    b
    for b in (
        textwrap.dedent(b)
        for b in re.findall(r"^\.\. code-block:: python\n\n((?:(?: {3}.*)?\n)+)", PAGE.read_text(), re.M)
    )
    if "DistributedDataParallel(" in b
]

rng = np.random.default_rng(0)  # the same batches on every rank
scope = {
    "lucid": lucid,
    "make_model": lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to("metal"),
    "loss_fn": F.cross_entropy,
    "batches": [
        (
            lucid.tensor(rng.standard_normal((8, 4)).astype(np.float32), device="metal"),
            lucid.tensor(rng.integers(0, 3, 8), device="metal"),
        )
        for _ in range(3)
    ],
}
lucid.manual_seed(int(__import__("os").environ.get("PMI_RANK", "0")))  # replicas start apart
exec(compile(block, str(PAGE), "exec"), scope)
dist = scope["dist"]
flat = lucid.cat([p.detach().reshape(-1).float() for p in scope["model"].parameters()])
gathered = dist.all_gather(flat).numpy()
print(
    f"rank {dist.get_rank()} of {dist.get_world_size()}: replicas identical "
    f"{bool((gathered == gathered[0]).all())}, scale {scope['scaler'].get_scale():g}",
    flush=True,
)
