"""tools/api_coverage.py: the extractor finds the torch names and keywords a program uses
(through its import aliases)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("api_coverage", ROOT / "tools" / "api_coverage.py")
ac = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ac)

PROGRAM = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader
from torch.optim.lr_scheduler import StepLR as Sched
import torchvision


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(4, 4)))

    def forward(self, x):
        h = self.fc(x).relu()
        return F.softmax(h.masked_fill(self.mask[:2, :2] == 0, 0.0), dim=-1)

    def describe(self):
        return "net"


def train(model, loader, device):
    opt = optim.AdamW(model.parameters(), lr=1e-3, fused=False)
    sched = Sched(opt, step_size=1)
    model.train()
    for x, y in loader:
        x = x.to(device, non_blocking=True)
        loss = F.cross_entropy(model(x), y, reduction="mean")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        print(loss.item(), x.shape, model.describe())
    return torchvision.datasets.MNIST


w = torch.randn(3, requires_grad=True)
for a, b in zip(w.split(1), w.chunk(3)):
    a.add_(b)
names = ["a", "b"]
names.append("c")
words = "a b".split()
cfg = {"k": 1}
cfg.keys()
'''


def uses(source, filename="prog.py"):
    return ac.extract_source(source, filename)


def test_the_extractor_finds_names_and_keywords():
    u = uses(PROGRAM)
    expected = {
        "torch.nn.Module": set(), "torch.nn.Linear": {"bias"}, "torch.tril": set(), "torch.ones": set(),
        "torch.nn.Module.register_buffer": set(), "Tensor.relu": set(), "Tensor.masked_fill": set(),
        "torch.nn.functional.softmax": {"dim"}, "torch.optim.AdamW": {"lr", "fused"},
        "torch.nn.Module.parameters": set(), "torch.optim.lr_scheduler.StepLR": {"step_size"},
        "torch.nn.Module.train": set(), "Tensor.to": {"non_blocking"},
        "torch.nn.functional.cross_entropy": {"reduction"}, "torch.optim.Optimizer.zero_grad": {"set_to_none"},
        "Tensor.backward": set(), "torch.optim.Optimizer.step": set(),
        "torch.optim.lr_scheduler.LRScheduler.step": set(), "Tensor.item": set(), "Tensor.shape": set(),
        "torchvision.datasets.MNIST": set(), "torch.randn": {"requires_grad"}, "Tensor.split": set(),
        "Tensor.chunk": set(), "Tensor.add_": set(),
    }
    for name, kws in expected.items():
        assert name in u, name
        assert set(u[name]["kwargs"]) == kws, name
        assert u[name]["files"] == {"prog.py"}
    # Never a use: modules themselves, lists/str/dict methods, a program's own attributes and
    # methods, and names imported but not used.
    for name in ("torch", "torch.nn", "torch.optim", "torch.nn.functional", "Tensor.append", "Tensor.keys",
                 "Tensor.fc", "Tensor.mask", "torch.nn.Module.fc", "torch.nn.Module.describe",
                 "Tensor.describe", "torch.utils.data.DataLoader"):
        assert name not in u, name
    assert not [n for n in u if not n.startswith(("torch.", "Tensor.", "torchvision."))]


@pytest.mark.parametrize("imports, use, name", [
    ("import torch.nn as nn", "nn.GELU(approximate='tanh')", "torch.nn.GELU"),
    ("from torch import nn", "nn.GELU(approximate='tanh')", "torch.nn.GELU"),
    ("import torch.nn.functional as F", "F.gelu(x, approximate='tanh')", "torch.nn.functional.gelu"),
    ("from torch.nn import functional as F", "F.gelu(x, approximate='tanh')", "torch.nn.functional.gelu"),
    ("from torch.nn.functional import gelu", "gelu(x, approximate='tanh')", "torch.nn.functional.gelu"),
    ("import torch.utils.data as tud", "tud.DataLoader(ds, shuffle=True)", "torch.utils.data.DataLoader"),
    ("from torch.utils.data.dataloader import DataLoader as DL", "DL(ds, shuffle=True)",
     "torch.utils.data.DataLoader"),
    ("import torch.nn.modules.linear", "torch.nn.modules.linear.Linear(2, 2, bias=True)", "torch.nn.Linear"),
    ("from torch import optim", "optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3)",
     "torch.optim.lr_scheduler.CosineAnnealingLR"),
])
def test_the_extractor_resolves_aliases(imports, use, name):
    u = uses(f"{imports}\n\ndef f(x, ds, opt):\n    return {use}\n")
    assert list(u) == [name]
    assert len(u[name]["kwargs"]) == 1


def test_kinds_follow_values_through_the_program():
    u = uses('''
import torch
from torch import Tensor

def scale(x: Tensor) -> Tensor:
    return x.abs()

class Block(torch.nn.Module):
    def forward(self, idx, targets=None):
        return idx.float(), targets.long()

def main():
    m = Block()
    logits, loss = m(torch.zeros(2))
    y = scale(logits)
    y.sigmoid()
    loss.argmax(dim=0)
    for name, p in m.named_parameters():
        p.grad.zero_()
    for v in m.state_dict().values():
        v.numel()
    top = y.topk(2)
    top.indices.flip(0)
''')
    for name in ("Tensor.abs", "Tensor.float", "Tensor.long", "Tensor.sigmoid", "Tensor.argmax", "Tensor.grad",
                 "Tensor.zero_", "Tensor.numel", "Tensor.topk", "Tensor.flip", "torch.nn.Module.named_parameters",
                 "torch.nn.Module.state_dict"):
        assert name in u, name
    assert set(u["Tensor.argmax"]["kwargs"]) == {"dim"}
    assert "Tensor.indices" not in u and "Tensor.values" not in u

