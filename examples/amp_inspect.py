"""Find where float16 hurts with ``lucid.amp.inspect()``, fix it with one override.

A small classifier whose last layer scales its logits (a low softmax temperature) is trained
under float16 autocast with a GradScaler. The scaled logits pass float16's largest value
(65504), so the loss is not finite and the scaler skips step after step. The inspection's
report names the module and op that made the infinities; setting that module's
``autocast_policy`` to float32 keeps it out of float16, and the loss curve then follows a
bfloat16 run's. The curves are saved as a PNG when matplotlib is installed, and printed as
text sparklines either way.

    python examples/amp_inspect.py [--steps 60] [--device metal] [--plot amp_inspect.png]
"""

import argparse
import math

import numpy as np

import lucid
import lucid.nn as nn
import lucid.nn.functional as F

SEED = 0
FEATURES, HIDDEN, CLASSES = 32, 64, 8


class ScaledLogits(nn.Module):
    """Logits over a low temperature: ``proj(x) * scale``."""

    def __init__(self, hidden, classes, scale):
        super().__init__()
        self.proj = nn.Linear(hidden, classes)
        self.scale = scale

    def forward(self, x):
        return self.proj(x) * self.scale


class Classifier(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU())
        self.logits = ScaledLogits(HIDDEN, CLASSES, scale)

    def forward(self, x):
        return self.logits(self.encoder(x))


def make_data(n, rng):
    """Gaussian clusters, one per class."""
    centers = rng.standard_normal((CLASSES, FEATURES)).astype(np.float32) * 2
    labels = rng.integers(0, CLASSES, n)
    x = centers[labels] + rng.standard_normal((n, FEATURES)).astype(np.float32)
    return x, labels.astype(np.int64)


def train(dtype, steps, device, scale, policies=(), batch=64):
    """Losses of `steps` steps under autocast to `dtype`, from the same weights and batches
    each time; `policies` are (module path, autocast_policy) pairs set before training."""
    lucid.manual_seed(SEED)
    model = Classifier(scale).to(device)
    for path, policy in policies:
        model.get_submodule(path).autocast_policy = policy
    opt = lucid.optim.Adam(model.parameters(), lr=1e-3)
    scaler = lucid.amp.GradScaler(device, enabled=dtype == lucid.float16)
    rng = np.random.default_rng(SEED)
    x_all, y_all = make_data(steps * batch, rng)
    losses = []
    for step in range(steps):
        x = lucid.tensor(x_all[step * batch : (step + 1) * batch], device=device)
        y = lucid.tensor(y_all[step * batch : (step + 1) * batch], device=device)
        with lucid.amp.autocast(device, dtype=dtype):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return losses


def sparkline(values, width=60):
    """The values as one line of block characters (non-finite ones as '!')."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return "!" * min(len(values), width)
    lo, hi = min(finite), max(finite)
    bars = "▁▂▃▄▅▆▇█"
    step = max(1, len(values) // width)
    out = []
    for v in values[::step]:
        out.append("!" if not math.isfinite(v) else bars[int((v - lo) / (hi - lo + 1e-12) * (len(bars) - 1))])
    return "".join(out)


def plot(curves, path):
    """Saves the curves as a PNG with matplotlib; False when it is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, losses in curves.items():
        ax.plot([v if math.isfinite(v) else float("nan") for v in losses], label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--device", default="metal")
    parser.add_argument("--scale", type=float, default=1e5, help="the logits' scale (1 / temperature)")
    parser.add_argument("--plot", default="amp_inspect.png", help="where to save the loss curves (needs matplotlib)")
    args = parser.parse_args(argv)

    # 1. float16 as it is, inspected.
    with lucid.amp.inspect() as inspection:
        plain = train(lucid.float16, args.steps, args.device, args.scale)
    report = inspection.report
    print("## float16, inspected\n")
    print(report.to_markdown())
    risky = {path: verdict for path, verdict in report.modules.items() if verdict != lucid.amp.inspect.SAFE_FLOAT16}
    print(f"\nmodules to keep out of float16: {risky or 'none'}")

    # 2. The report's modules kept in float32, the rest in float16; and bfloat16 for reference.
    policies = [(path, "float32") for path in risky]
    fixed = train(lucid.float16, args.steps, args.device, args.scale, policies=policies)
    bf16 = train(lucid.bfloat16, args.steps, args.device, args.scale)
    curves = {
        "float16": plain,
        f"float16, {', '.join(p for p, _ in policies) or 'nothing'} in float32": fixed,
        "bfloat16": bf16,
    }
    print("\n## loss curves\n")
    for label, losses in curves.items():
        print(f"{label:>40}  {sparkline(losses)}  last {losses[-1]:.4g}")
    if plot(curves, args.plot):
        print(f"\nsaved {args.plot}")
    return report, curves


if __name__ == "__main__":
    main()
