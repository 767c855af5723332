"""tools/api_coverage.py: the extractor finds the torch names and keywords a program uses
(through its import aliases), the checker tells names lucid has from names it lacks, and the
committed tools/api_corpus.json is what the extractor writes."""

import json
import re
from pathlib import Path

import pytest

from _helpers import load_file

ROOT = Path(__file__).resolve().parent.parent
ac = load_file("tools/api_coverage.py")

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
v = torch.matmul(w, torch.tensor([1.0, 2.0, 3.0]))
torch.backends.cuda.matmul.allow_tf32 = True
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
        "torch.nn.Module": set(),
        "torch.nn.Linear": {"bias"},
        "torch.tril": set(),
        "torch.ones": set(),
        "torch.nn.Module.register_buffer": set(),
        "Tensor.relu": set(),
        "Tensor.masked_fill": set(),
        "torch.nn.functional.softmax": {"dim"},
        "torch.optim.AdamW": {"lr", "fused"},
        "torch.nn.Module.parameters": set(),
        "torch.optim.lr_scheduler.StepLR": {"step_size"},
        "torch.nn.Module.train": set(),
        "Tensor.to": {"non_blocking"},
        "torch.nn.functional.cross_entropy": {"reduction"},
        "torch.optim.Optimizer.zero_grad": {"set_to_none"},
        "Tensor.backward": set(),
        "torch.optim.Optimizer.step": set(),
        "torch.optim.lr_scheduler.LRScheduler.step": set(),
        "Tensor.item": set(),
        "Tensor.shape": set(),
        "torchvision.datasets.MNIST": set(),
        "torch.randn": {"requires_grad"},
        "Tensor.split": set(),
        "Tensor.chunk": set(),
        "Tensor.add_": set(),
        "torch.matmul": set(),
        "torch.tensor": set(),
        "torch.backends.cuda.matmul.allow_tf32": set(),
    }
    for name, kws in expected.items():
        assert name in u, name
        assert set(u[name]["kwargs"]) == kws, name
        assert u[name]["files"] == {"prog.py"}
    # Never a use: modules themselves, lists/str/dict methods, a program's own attributes and
    # methods, and names imported but not used.
    for name in (
        "torch",
        "torch.nn",
        "torch.optim",
        "torch.nn.functional",
        "torch.backends.cuda.matmul",
        "Tensor.append",
        "Tensor.keys",
        "Tensor.fc",
        "Tensor.mask",
        "torch.nn.Module.fc",
        "torch.nn.Module.describe",
        "Tensor.describe",
        "torch.utils.data.DataLoader",
    ):
        assert name not in u, name
    assert not [n for n in u if not n.startswith(("torch.", "Tensor.", "torchvision."))]


@pytest.mark.parametrize(
    "imports, use, name",
    [
        ("import torch.nn as nn", "nn.GELU(approximate='tanh')", "torch.nn.GELU"),
        ("from torch import nn", "nn.GELU(approximate='tanh')", "torch.nn.GELU"),
        ("import torch.nn.functional as F", "F.gelu(x, approximate='tanh')", "torch.nn.functional.gelu"),
        ("from torch.nn import functional as F", "F.gelu(x, approximate='tanh')", "torch.nn.functional.gelu"),
        ("from torch.nn.functional import gelu", "gelu(x, approximate='tanh')", "torch.nn.functional.gelu"),
        ("import torch.utils.data as tud", "tud.DataLoader(ds, shuffle=True)", "torch.utils.data.DataLoader"),
        (
            "from torch.utils.data.dataloader import DataLoader as DL",
            "DL(ds, shuffle=True)",
            "torch.utils.data.DataLoader",
        ),
        ("import torch.nn.modules.linear", "torch.nn.modules.linear.Linear(2, 2, bias=True)", "torch.nn.Linear"),
        (
            "from torch import optim",
            "optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3)",
            "torch.optim.lr_scheduler.CosineAnnealingLR",
        ),
    ],
)
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
    for name in (
        "Tensor.abs",
        "Tensor.float",
        "Tensor.long",
        "Tensor.sigmoid",
        "Tensor.argmax",
        "Tensor.grad",
        "Tensor.zero_",
        "Tensor.numel",
        "Tensor.topk",
        "Tensor.flip",
        "torch.nn.Module.named_parameters",
        "torch.nn.Module.state_dict",
    ):
        assert name in u, name
    assert set(u["Tensor.argmax"]["kwargs"]) == {"dim"}
    assert "Tensor.indices" not in u and "Tensor.values" not in u


def test_kinds_cross_files_of_a_repository_and_branches(tmp_path):
    repo = tmp_path / "someone" / "gpt"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "model.py").write_text('''
import torch
import torch.nn as nn
import torch.nn.functional as F

class GPT(nn.Module):
    def forward(self, idx, targets=None):
        logits = idx.float()
        if targets is not None:
            loss = F.cross_entropy(logits, targets)
        else:
            loss = None
        return logits, loss

    def make_optimizer(self):
        return torch.optim.AdamW(self.parameters())
''')
    (repo / "train.py").write_text('''
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from pkg.model import GPT

model = GPT()
opt = model.make_optimizer()
scaler = torch.amp.GradScaler(enabled=True)
if ddp:
    model = DDP(model)
raw = model.module if ddp else model
logits, loss = model(x, y)
scaler.scale(loss).backward()
scaler.step(opt)
opt.zero_grad(set_to_none=True)
''')
    data = ac.extract(tmp_path, [("someone/gpt", "0" * 40)])
    names = data["names"]
    assert data["corpus"] == [{"repo": "someone/gpt", "commit": "0" * 40}]
    for name in (
        "torch.nn.parallel.DistributedDataParallel.module",
        "torch.amp.GradScaler.scale",
        "torch.amp.GradScaler.step",
        "Tensor.backward",
        "torch.optim.Optimizer.zero_grad",
    ):
        assert names[name]["files"] == ["someone/gpt/train.py"], name
    assert names["torch.amp.GradScaler"]["kwargs"] == {"enabled": ["someone/gpt/train.py"]}
    assert "Tensor.make_optimizer" not in names and "torch.nn.Module.make_optimizer" not in names


def corpus(names):
    return {
        "format": ac.FORMAT,
        "corpus": [],
        "names": {n: {"files": ["a.py"], "kwargs": {kw: ["a.py"] for kw in kws}} for n, kws in names.items()},
    }


def test_the_checker_tells_covered_from_missing():
    result = ac.check(
        corpus(
            {
                "torch.zeros": ["dtype", "no_such_keyword_in_lucid"],
                "torch.no_such_function_in_lucid": ["dim"],
                "Tensor.sum": ["keepdim"],
                "Tensor.no_such_method_in_lucid": [],
                "torch.nn.Linear": ["bias"],
                "torch.nn.Module.parameters": [],
                "torch.nn.Module.training": [],
                "torch.cuda.synchronize": [],
                "torch.optim.Optimizer.param_groups": [],
                "torchvision.transforms.ToTensor": [],
            }
        )
    )
    rows = {r["name"]: r for r in result["rows"]}
    covered = {n for n, r in rows.items() if r["covered"]}
    assert covered == {
        "torch.zeros",
        "Tensor.sum",
        "torch.nn.Linear",
        "torch.nn.Module.parameters",
        "torch.nn.Module.training",
        "torch.optim.Optimizer.param_groups",
    }
    assert rows["torch.zeros"]["kwargs"]["dtype"]["covered"]
    assert not rows["torch.zeros"]["kwargs"]["no_such_keyword_in_lucid"]["covered"]
    assert not rows["torch.no_such_function_in_lucid"]["kwargs"]["dim"]["covered"]
    assert rows["Tensor.sum"]["kwargs"]["keepdim"]["covered"]
    assert "CUDA" in rows["torch.cuda.synchronize"]["out_of_scope"]
    assert "torchvision" in rows["torchvision.transforms.ToTensor"]["out_of_scope"]
    missing = {(m["name"], m["keyword"]) for m in ac.missing(result)}
    assert missing == {
        ("torch.zeros", "no_such_keyword_in_lucid"),
        ("torch.no_such_function_in_lucid", None),
        ("torch.no_such_function_in_lucid", "dim"),
        ("Tensor.no_such_method_in_lucid", None),
    }
    # 6 of 8 in-scope names and 3 of 5 keywords.
    assert ac.coverage(result) == pytest.approx(100 * 9 / 13)


def test_device_choice_queries_stay_in_scope():
    assert ac.out_of_scope("torch.cuda.is_available") is None
    assert ac.out_of_scope("torch.cuda.Stream")
    assert ac.out_of_scope("torch.compile") and ac.out_of_scope("torch.jit.script")
    assert ac.out_of_scope("torch.distributed.all_reduce") is None


def test_check_min_sets_the_exit_status(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(corpus({"torch.zeros": [], "torch.no_such_function_in_lucid": []})))
    assert ac.main(["--corpus", str(path), "--check", "50"]) == 0
    assert ac.main(["--corpus", str(path), "--check", "51"]) == 1
    assert "| **total** | 2 | 0 | 1 / 2 | 0 / 0 | 50.0 % |" in capsys.readouterr().out
    assert ac.main(["--corpus", str(path), "--table"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "| **total** | 2 | 0 | 1 / 2 | 0 / 0 | 50.0 % |"
    assert ac.main(["--corpus", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["coverage"] == 50.0
    assert out["missing"] == [{"name": "torch.no_such_function_in_lucid", "keyword": None, "files": ["a.py"]}]


def test_the_committed_corpus_is_the_extractors_format():
    committed = json.loads((ROOT / "tools" / "api_corpus.json").read_text())
    fresh = ac.to_json(uses(PROGRAM), ac.CORPUS)
    assert set(committed) == set(fresh)
    assert committed["format"] == ac.FORMAT
    assert committed["corpus"] == fresh["corpus"]  # pinned to the commits the tool names
    repos = tuple(f"{c['repo']}/" for c in committed["corpus"])
    assert len(committed["names"]) > 100
    for name, entry in committed["names"].items():
        assert set(entry) == {"files", "kwargs"}
        assert name.startswith(("torch.", "Tensor.", "torchvision.", "torchtext.", "torchaudio.")), name
        assert entry["files"] == sorted(entry["files"]) and all(f.startswith(repos) for f in entry["files"])
        for kw, files in entry["kwargs"].items():
            assert kw.isidentifier() and files == sorted(files) and set(files) <= set(entry["files"])
    assert list(committed["names"]) == sorted(committed["names"])


def test_the_docstring_says_which_commits_to_check_out():
    for repo, commit in ac.CORPUS:
        assert re.search(rf"^    {re.escape(repo)} +{commit}$", ac.__doc__, re.M), repo


def test_the_readme_shows_the_coverage_the_tool_measures():
    readme = (ROOT / "README.md").read_text()
    shown = readme.split("<!-- api-coverage:begin -->\n")[1].split("\n<!-- api-coverage:end -->")[0]
    measured = ac.table(ac.check(json.loads(ac.DEFAULT_JSON.read_text())))
    assert shown.strip() == measured.strip(), (
        "README.md's coverage table is stale: paste in the output of python tools/api_coverage.py --table"
    )
