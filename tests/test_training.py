"""Training end to end: an MLP, a small CNN and a small attention model each learn a
synthetic task under autocast + GradScaler (float16 on "metal", bfloat16 on "cpu") and end
close to the same model trained in float32."""

import numpy as np
import pytest

import lucid
import lucid.nn as nn
import lucid.nn.functional as F

MODES = [("metal", lucid.float16), ("cpu", lucid.bfloat16)]


def mlp():
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Dropout(0.1), nn.Linear(32, 4))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.pool = nn.MaxPool2d(2)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv1(x))))
        x = F.silu(self.conv2(x))
        return self.head(self.gap(x).flatten(1))


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(8, 16)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 4)

    def forward(self, ids):
        x = self.embed(ids)
        y, _ = self.attn(x, x, x, need_weights=False)
        return self.head(self.norm(x + y).mean(1))


def data(kind, n=128):
    rng = np.random.default_rng(1)
    if kind == "mlp":
        x = rng.standard_normal((n, 16)).astype(np.float32)
        y = (x[:, :4] * np.arange(1, 5)).argmax(1)
    elif kind == "cnn":
        y = rng.integers(0, 4, n)
        x = rng.standard_normal((n, 1, 8, 8)).astype(np.float32) * 0.3
        for i, c in enumerate(y):  # a bright quadrant per class
            x[i, 0, (c // 2) * 4 : (c // 2) * 4 + 4, (c % 2) * 4 : (c % 2) * 4 + 4] += 1.0
    else:
        x = rng.integers(0, 8, (n, 6))
        y = x.max(1) % 4  # needs every position
    return x, y


MODELS = {"mlp": mlp, "cnn": CNN, "attention": Attn}


def train(kind, device, low, amp, steps=40):
    lucid.manual_seed(0)
    model = MODELS[kind]().to(device)
    x_np, y_np = data("mlp" if kind == "mlp" else ("cnn" if kind == "cnn" else "attn"))
    x, y = lucid.tensor(x_np, device=device), lucid.tensor(y_np, device=device)
    opt = lucid.optim.AdamW(model.parameters(), lr=1e-2)
    sched = lucid.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    scaler = lucid.amp.GradScaler(device, enabled=amp and low == lucid.float16)
    losses = []
    for step in range(steps):
        with lucid.amp.autocast(device, dtype=low, enabled=amp):
            loss = F.cross_entropy(model(x), y, label_smoothing=0.05)
        assert loss.dtype == lucid.float32
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        scaler.step(opt)
        scaler.update()
        sched.step()
        losses.append(loss.item())
    model.eval()
    with lucid.no_grad(), lucid.amp.autocast(device, dtype=low, enabled=amp):
        acc = (model(x).argmax(1) == y).float().mean().item()
    return losses, acc


@pytest.mark.parametrize("kind", sorted(MODELS))
@pytest.mark.parametrize("device,low", MODES, ids=["metal-float16", "cpu-bfloat16"])
def test_mixed_precision_training_tracks_float32(kind, device, low):
    ref, ref_acc = train(kind, device, low, amp=False)
    mixed, acc = train(kind, device, low, amp=True)
    assert ref[-1] < 0.5 * ref[0], f"float32 {kind} did not learn: {ref[0]:.3f} -> {ref[-1]:.3f}"
    assert mixed[-1] < 0.5 * mixed[0], f"{low} {kind} did not learn: {mixed[0]:.3f} -> {mixed[-1]:.3f}"
    # Same start, and the end within a small margin of float32 training.
    assert abs(mixed[0] - ref[0]) < 0.02
    assert abs(mixed[-1] - ref[-1]) < 0.1 + 0.1 * ref[-1]
    assert acc > 0.8 and abs(acc - ref_acc) < 0.1
