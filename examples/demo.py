"""Train a handwritten-digit classifier with lucid, in float32 and with mixed precision.

The data is scikit-learn's bundled digits set (1797 images of 8×8 pixels, 10 classes). The
same MLP is trained twice on device "metal", from the same initial weights and with the
same batch order: once in float32, once under ``lucid.amp.autocast()`` with a
``lucid.amp.GradScaler()``. The two runs are then compared on test accuracy, time per
epoch and peak engine memory.

    python examples/demo.py [--epochs 20] [--batch-size 64] [--device metal]
"""

import argparse
import math
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import lucid
import lucid.nn as nn
import lucid.nn.functional as F

SEED = 0
NUM_CLASSES = 10
MAX_ACCURACY_GAP = 5.0  # percentage points autocast may trail float32 by before the demo fails


# ---- setup ------------------------------------------------------------------------------------


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=20, help="passes over the training set (default 20)")
    parser.add_argument("--batch-size", type=int, default=64, help="images per mini-batch (default 64)")
    parser.add_argument("--device", default="metal", choices=["metal", "cpu"], help="default metal")
    parser.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate (default 2e-3)")
    return parser.parse_args()


def describe_device(device):
    """Prints where `device` really runs; "metal" warns once per process when it falls back."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lucid.zeros(1, device=device)
    if device == "metal":
        backend = "Metal" if lucid.metal.is_available() else "host fallback (Metal is unavailable here)"
    else:
        backend = "host CPU"
    print(f"lucid {lucid.__version__} — device {device!r} runs on: {backend}")
    for w in caught:
        print(f"  warning: {w.message}")


def amp_dtype(device):
    # The CPU stream computes float16 in float32, so a CPU scope needs bfloat16 to change anything.
    return lucid.float16 if device == "metal" else lucid.bfloat16


# ---- data -------------------------------------------------------------------------------------


def load_data():
    """Stratified 80/20 split of the digits, standardised with the training set's statistics."""
    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        digits.data, digits.target, test_size=0.2, stratify=digits.target, random_state=SEED
    )
    scaler = StandardScaler().fit(x_train)  # test statistics must not leak into training
    x_train, x_test = (scaler.transform(x).astype(np.float32) for x in (x_train, x_test))
    return x_train, x_test, y_train.astype(np.int64), y_test.astype(np.int64)


def batches(x, y, batch_size, rng, device):
    """Shuffled mini-batches as device tensors; the last one may be smaller."""
    order = rng.permutation(len(x))
    for start in range(0, len(x), batch_size):
        idx = order[start : start + batch_size]
        yield lucid.tensor(x[idx], device=device), lucid.tensor(y[idx], device=device)


# ---- model, loss, metric ----------------------------------------------------------------------


def make_model(device):
    return nn.Sequential(
        nn.Linear(64, 128),
        nn.ReLU(),
        nn.Linear(128, 64),
        nn.ReLU(),
        nn.Linear(64, NUM_CLASSES),
    ).to(device)


def accuracy(model, x, labels, device, use_amp):
    """Test accuracy in percent."""
    with lucid.no_grad(), lucid.amp.autocast(device, dtype=amp_dtype(device), enabled=use_amp):
        logits = model(lucid.tensor(x, device=device))
    target = lucid.tensor(labels, device=device)
    return 100.0 * (logits.argmax(dim=1) == target).float().mean().item()


# ---- progress ---------------------------------------------------------------------------------


class ProgressBar:
    """A plain-text bar: redrawn in place on a terminal, printed once per epoch otherwise."""

    def __init__(self, total, label, width=20, stream=sys.stdout):
        self.total, self.label, self.width, self.stream = total, label, width, stream
        self.live = stream.isatty()
        self._drawn = 0  # length of the line on screen, so a shorter redraw can blank the rest

    def _line(self, done, text):
        filled = self.width * done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        return f"{self.label} [{bar}] {done:>{len(str(self.total))}}/{self.total}  {text}"

    def _draw(self, line, end=""):
        self.stream.write(("\r" if self.live else "") + line.ljust(self._drawn) + end)
        self.stream.flush()
        self._drawn = len(line)

    def update(self, done, running_loss):
        if self.live:
            self._draw(self._line(done, f"loss {running_loss:.4f}"))

    def finish(self, text):
        self._draw(self._line(self.total, text), "\n")


# ---- training ---------------------------------------------------------------------------------


def train_epoch(model, optimizer, scaler, data, use_amp, device, bar):
    """One pass over the training batches; returns the mean training loss."""
    total = 0.0
    for step, (x, target) in enumerate(data, start=1):
        optimizer.zero_grad()
        with lucid.amp.autocast(device, dtype=amp_dtype(device), enabled=use_amp):
            loss = F.cross_entropy(model(x), target)  # float32 under autocast
        # A disabled scaler passes the loss and the step straight through, so one loop serves
        # both runs: the float32 one is the same code with the scaling switched off.
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        total += loss.item()
        bar.update(step, total / step)
    return total / step


def run(name, use_amp, data, args):
    """Trains a fresh model; returns its test accuracy, timing, peak memory and final scale."""
    x_train, x_test, y_train, y_test = data
    lucid.manual_seed(SEED)  # same initial weights in every run
    rng = np.random.default_rng(SEED)  # same batch order in every run
    lucid.reset_peak_memory_stats()

    model = make_model(args.device)
    optimizer = lucid.optim.Adam(model.parameters(), lr=args.lr)
    # Loss scaling guards float16 gradients against underflow; bfloat16 has float32's range.
    scaler = lucid.amp.GradScaler(args.device, enabled=use_amp and amp_dtype(args.device) == lucid.float16)

    print(f"\n{name}")
    steps = math.ceil(len(x_train) / args.batch_size)
    epoch_times, acc = [], 0.0
    for epoch in range(1, args.epochs + 1):
        bar = ProgressBar(steps, f"  epoch {epoch:>{len(str(args.epochs))}}/{args.epochs}")
        t0 = time.perf_counter()
        train_loss = train_epoch(
            model,
            optimizer,
            scaler,
            batches(x_train, y_train, args.batch_size, rng, args.device),
            use_amp,
            args.device,
            bar,
        )
        epoch_times.append(time.perf_counter() - t0)
        acc = accuracy(model, x_test, y_test, args.device, use_amp)
        bar.finish(f"train loss {train_loss:.4f}  test acc {acc:5.1f}%  {epoch_times[-1]:.2f} s")

    return {
        "accuracy": acc,
        "epoch_time": float(np.mean(epoch_times)),
        "peak_memory": lucid.max_memory_allocated(),
        "scale": scaler.get_scale() if scaler.is_enabled() else None,
    }


# ---- report -----------------------------------------------------------------------------------


def kib(n):
    return f"{n / 1024:.1f} KiB"


def print_comparison(fp32, amp, amp_name):
    rows = [
        ("final test accuracy", f"{fp32['accuracy']:.1f} %", f"{amp['accuracy']:.1f} %"),
        ("mean time per epoch", f"{fp32['epoch_time']:.3f} s", f"{amp['epoch_time']:.3f} s"),
        ("peak engine memory", kib(fp32["peak_memory"]), kib(amp["peak_memory"])),
        ("GradScaler final scale", "—", "—" if amp["scale"] is None else f"{amp['scale']:g}"),
    ]
    header = ("", "float32", amp_name)
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(3)]
    print()
    for i, row in enumerate([header] + rows):
        print(f"  {row[0]:<{widths[0]}}   {row[1]:>{widths[1]}}   {row[2]:>{widths[2]}}")
        if i == 0:
            print("  " + "   ".join("-" * w for w in widths))


def main():
    args = parse_args()
    if args.epochs < 1 or args.batch_size < 1:
        sys.exit("--epochs and --batch-size must be positive")
    describe_device(args.device)

    data = load_data()
    x_train, x_test = data[0], data[1]
    print(f"digits: {len(x_train)} train / {len(x_test)} test images, 8×8 pixels, {NUM_CLASSES} classes")
    print(
        f"model: MLP 64-128-64-10 (ReLU), Adam lr={args.lr:g}, batch {args.batch_size}, "
        f"{args.epochs} epochs; loss: cross-entropy"
    )

    amp_name = f"autocast ({amp_dtype(args.device)})".replace("lucid.", "")
    fp32 = run("float32", False, data, args)
    amp = run(amp_name, True, data, args)
    print_comparison(fp32, amp, amp_name)

    if args.device == "metal" and not lucid.metal.is_available():
        print(
            "\n  (on the host fallback float16 operands are widened to float32 for BLAS and every cast\n"
            "   fills a fresh buffer: autocast stores activations in half the bytes but costs time here)"
        )

    gap = fp32["accuracy"] - amp["accuracy"]
    if gap > MAX_ACCURACY_GAP:
        sys.exit(
            f"\nFAILED: {amp_name} ended {gap:.1f} points below float32 "
            f"({amp['accuracy']:.1f}% vs {fp32['accuracy']:.1f}%)"
        )
    print(f"\nDone: {amp_name} reached {amp['accuracy']:.1f}% test accuracy, float32 {fp32['accuracy']:.1f}%.")


if __name__ == "__main__":
    main()
