"""DistributedDataParallel's step time with the averaging overlapped with backward and without
(every bucket all-reduced after backward), on the ranks mpiexec starts:

    mpiexec -n 2 python bench/distributed.py [--steps 8] [--width 2048] [--bucket-mb 25]

The model is an MLP with tens of MB of float32 gradients (36 MB at the default width), so
that the all-reduce takes a share of the step worth hiding. Each setting runs ``--steps``
training steps (forward, backward, SGD step) after two warm-up steps, alternating between the
two settings so that both see the same machine; rank 0 prints the median step times, the
ratio (overlapped / not), and what the backward pass alone and one all-reduce of all the
gradients take, for reading the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import lucid
import lucid.distributed as dist
import lucid.nn as nn
import lucid.nn.functional as F
from lucid.nn.parallel import DistributedDataParallel


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--bucket-mb", type=float, default=25.0)
    args = parser.parse_args()

    dist.init()
    rank, world = dist.get_rank(), dist.get_world_size()
    w = args.width
    lucid.manual_seed(0)

    def make():
        return nn.Sequential(
            nn.Linear(512, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w), nn.Linear(w, 10)
        )

    models = {
        overlap: DistributedDataParallel(make(), bucket_mb=args.bucket_mb, overlap=overlap) for overlap in (True, False)
    }
    optimizers = {k: lucid.optim.SGD(m.parameters(), lr=1e-4) for k, m in models.items()}
    rng = np.random.default_rng(rank)
    x = lucid.tensor(rng.standard_normal((args.batch, 512)).astype(np.float32))
    y = lucid.tensor(rng.integers(0, 10, args.batch))
    grad_bytes = sum(p.numel() * p.dtype.itemsize for p in models[True].parameters())

    def step(overlap):
        model, opt = models[overlap], optimizers[overlap]
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        model.module[0].weight.numpy()  # the step's values exist (the engine may run ahead)
        return time.perf_counter() - t0

    times, waits = {True: [], False: []}, {True: [], False: []}
    for i in range(args.steps + 2):
        for overlap in (True, False):
            waited = models[overlap]._waited
            t = step(overlap)
            if i >= 2:
                times[overlap].append(t)
                waits[overlap].append(models[overlap]._waited - waited)

    # For reading the ratio: backward alone (no averaging), and one all-reduce of every gradient.
    plain = make()
    backward_times = []
    for _ in range(3):
        loss = F.cross_entropy(plain(x), y)
        t0 = time.perf_counter()
        loss.backward()
        plain[0].weight.grad.numpy()
        backward_times.append(time.perf_counter() - t0)
    flat = lucid.zeros(grad_bytes // 4)
    reduce_times = []
    for _ in range(3):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(flat)
        reduce_times.append(time.perf_counter() - t0)
    reduce_time = min(reduce_times)

    if rank == 0:
        on, off = statistics.median(times[True]), statistics.median(times[False])
        buckets = len(models[True]._buckets)
        print(
            f"DistributedDataParallel on {world} ranks, {grad_bytes / 2**20:.0f} MB of float32 gradients in "
            f"{buckets} bucket(s) of <= {args.bucket_mb:g} MB, batch {args.batch} per rank, "
            f"{lucid.get_num_threads()} thread(s) per rank"
        )
        print(f"  step, overlapped:          {on * 1e3:8.1f} ms (median of {args.steps})")
        print(f"  step, averaged after:      {off * 1e3:8.1f} ms")
        print(f"  ratio overlapped / after:  {on / off:8.2f}")
        print(
            f"  waiting for the all-reduce at the end of backward: {statistics.median(waits[True]) * 1e3:.1f} ms "
            f"overlapped, {statistics.median(waits[False]) * 1e3:.1f} ms after"
        )
        print(f"  backward alone:            {min(backward_times) * 1e3:8.1f} ms")
        print(f"  one all-reduce, all grads: {reduce_time * 1e3:8.1f} ms")
        print(f"  buckets started during backward (overlapped model): {models[True]._started_early}")


if __name__ == "__main__":
    main()
