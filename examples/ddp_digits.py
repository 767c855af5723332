"""Train the demo's digits classifier on several processes with DistributedDataParallel.

The model, data and accuracy are examples/demo.py's (scikit-learn's 8×8 digits, an MLP).
Every rank holds a replica; each mini-batch is split between the ranks, each rank runs
forward and backward on its share, and DistributedDataParallel averages the gradients over
MPI so that every replica takes the same optimizer step. The test set is split the same way
and the ranks' correct counts are added up. Rank 0 prints.

    mpiexec -n 2 python examples/ddp_digits.py [--epochs 15] [--amp] [--grad-dtype bfloat16]
    python examples/ddp_digits.py          # one process: world size 1, the same training

Needs ``pip install '.[distributed,demo]'`` (mpi4py, MPICH, scikit-learn); run alone it
needs only scikit-learn.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for demo.py beside this file

import lucid  # noqa: E402
import lucid.distributed as dist  # noqa: E402
import lucid.nn.functional as F  # noqa: E402
from lucid.nn.parallel import DistributedDataParallel  # noqa: E402

import demo  # noqa: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=15, help="passes over the training set (default 15)")
    parser.add_argument("--batch-size", type=int, default=64, help="images per mini-batch, all ranks together")
    parser.add_argument("--device", default="cpu", choices=["metal", "cpu"], help="default cpu")
    parser.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate (default 2e-3)")
    parser.add_argument(
        "--amp", action="store_true", help="autocast (float16 on metal, bfloat16 on cpu), with a GradScaler for float16"
    )
    parser.add_argument(
        "--grad-dtype",
        choices=["bfloat16", "float16"],
        default=None,
        help="compress the gradients to this dtype for the all-reduce",
    )
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1:
        parser.error("--epochs and --batch-size must be positive")
    return args


def say(*args):
    if dist.get_rank() == 0:
        print(*args, flush=True)


def shares(order, batch_size, rank, world):
    """This rank's indices of each mini-batch (rank r takes every world-th image from r). A last
    batch with fewer images than ranks is dropped: every rank must take part in every step."""
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        if len(batch) >= world:
            yield batch[rank::world]


def evaluate(model, x_test, y_test, args, rank, world):
    """(this rank's accuracy on its share of the test set, the accuracy over every rank's)."""
    x, y = x_test[rank::world], y_test[rank::world]
    with lucid.no_grad(), lucid.amp.autocast(args.device, dtype=demo.amp_dtype(args.device), enabled=args.amp):
        logits = model(lucid.tensor(x, device=args.device))
    correct = (logits.argmax(dim=1) == lucid.tensor(y, device=args.device)).sum().item()
    counts = dist.all_reduce(lucid.tensor([correct, len(y)]), op="sum")  # int64: exact
    total_correct, total = counts.tolist()
    return 100.0 * correct / len(y), 100.0 * total_correct / total


def main(argv=None):
    args = parse_args(argv)
    dist.init()
    rank, world = dist.get_rank(), dist.get_world_size()
    x_train, x_test, y_train, y_test = demo.load_data()  # the same split on every rank

    lucid.manual_seed(demo.SEED)  # (DistributedDataParallel gives every rank rank 0's weights anyway)
    grad_dtype = getattr(lucid, args.grad_dtype) if args.grad_dtype else None
    model = DistributedDataParallel(demo.make_model(args.device), grad_dtype=grad_dtype)
    optimizer = lucid.optim.Adam(model.parameters(), lr=args.lr)
    amp_dtype = demo.amp_dtype(args.device)
    scaler = lucid.amp.GradScaler(args.device, enabled=args.amp and amp_dtype == lucid.float16)
    rng = np.random.default_rng(demo.SEED)  # the same batch order on every rank

    say(
        f"lucid {lucid.__version__}: {world} rank(s), device {args.device!r}, batch {args.batch_size} "
        f"(about {args.batch_size // world} per rank), "
        f"{f'autocast {amp_dtype}' if args.amp else 'float32'}".replace("lucid.", "")
        + (f", gradients all-reduced in {args.grad_dtype}" if args.grad_dtype else "")
    )
    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        losses = []
        for idx in shares(rng.permutation(len(x_train)), args.batch_size, rank, world):
            x = lucid.tensor(x_train[idx], device=args.device)
            target = lucid.tensor(y_train[idx], device=args.device)
            optimizer.zero_grad()
            with lucid.amp.autocast(args.device, dtype=amp_dtype, enabled=args.amp):
                loss = F.cross_entropy(model(x), target)
            scaler.scale(loss).backward()  # the gradients are averaged over the ranks here
            scaler.step(optimizer)  # every rank skips the same steps (an inf on any rank)
            scaler.update()
            losses.append(loss.item())
        seconds = time.perf_counter() - t0
        mean_loss = dist.all_reduce(lucid.tensor([float(np.mean(losses))]), op="mean").item()
        mine, accuracy = evaluate(model, x_test, y_test, args, rank, world)
        per_rank = dist.all_gather(lucid.tensor([mine])).reshape(-1).tolist()
        say(
            f"  epoch {epoch:>{len(str(args.epochs))}}/{args.epochs}  train loss {mean_loss:.4f}  "
            f"test acc {accuracy:5.1f}% (per rank: {', '.join(f'{a:.1f}%' for a in per_rank)})  {seconds:.2f} s"
        )

    # The replicas must still be one model: compare every rank's parameters with rank 0's.
    flat = lucid.cat([p.detach().reshape(-1).float().cpu() for p in model.parameters()])
    gathered = dist.all_gather(flat).numpy()
    in_sync = bool((gathered == gathered[0]).all())
    say(f"Done: test accuracy {accuracy:.1f}% over {world} rank(s); replicas identical: {'yes' if in_sync else 'NO'}")
    dist.destroy_process_group()
    if not in_sync:
        sys.exit("FAILED: the ranks' parameters differ")
    return accuracy


if __name__ == "__main__":
    main()
