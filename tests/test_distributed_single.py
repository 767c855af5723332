"""lucid.distributed without mpiexec: ``import lucid`` never imports mpi4py, and a program
written for several ranks runs alone as world size 1, with mpi4py (MPI as a singleton) and
without it. The runs on two MPI processes are in tests/distributed (make test-distributed)."""

import importlib.util
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lucid
import lucid.distributed as dist

# Hides mpi4py from a child process, as if it were not installed.
_WITHOUT_MPI4PY = """
import sys
class _NoMpi4py:
    def find_spec(self, name, path=None, target=None):
        if name == "mpi4py" or name.startswith("mpi4py."):
            raise ImportError("No module named 'mpi4py' (hidden by the test)")
        return None
sys.meta_path.insert(0, _NoMpi4py())
"""

# A world-size-1 run of everything: collectives on each dtype and device, DDP training that
# matches the bare model's, and GradScaler's step.
_WORLD_OF_ONE = """
import warnings
import numpy as np
import lucid, lucid.distributed as dist, lucid.nn as nn
from lucid.nn.parallel import DistributedDataParallel
warnings.simplefilter("ignore")
dist.init()
assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
print("backend", dist._group.current().name)
for dtype in (lucid.float32, lucid.float16, lucid.bfloat16, lucid.int32, lucid.int64, lucid.bool_):
    for device in ("cpu", "metal"):
        values = np.arange(6).reshape(2, 3) % 2 if dtype is lucid.bool_ else np.arange(6).reshape(2, 3) - 2
        t = lucid.tensor(values, dtype=dtype, device=device)
        for op in ("sum", "max") + (("mean",) if dtype.is_floating_point else ()):
            assert dist.all_reduce(t, op=op) is t
            assert np.array_equal(t.numpy(), lucid.tensor(values, dtype=dtype).numpy()), (dtype, device, op)
        assert dist.broadcast(t, 0) is t and np.array_equal(t.numpy(), lucid.tensor(values, dtype=dtype).numpy())
        g = dist.all_gather(t)
        assert g.shape == (1, 2, 3) and g.device == device and np.array_equal(g.numpy()[0], t.numpy())
dist.barrier()

def train(wrap):
    lucid.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    net = DistributedDataParallel(model, grad_dtype=lucid.bfloat16) if wrap else model
    opt = lucid.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    scaler = lucid.amp.GradScaler("cpu", init_scale=256.0)
    x = lucid.tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4))
    y = lucid.tensor([0, 1, 2, 1, 0])
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return [p.numpy() for p in model.parameters()], scaler.get_scale()

bare, wrapped = train(False), train(True)
assert bare[1] == wrapped[1] == 256.0
for a, b in zip(bare[0], wrapped[0]):
    assert np.array_equal(a, b)  # world size 1: nothing to average, nothing compressed
# state_dict: the bare module's keys, which load into the bare model; load_state_dict takes
# PyTorch's "module." prefix too.
inner = nn.Linear(3, 2)
ddp = DistributedDataParallel(inner)
assert ddp.module is inner and list(ddp.state_dict()) == ["weight", "bias"]
assert [n for n, _ in ddp.named_parameters()] == ["module.weight", "module.bias"]
nn.Linear(3, 2).load_state_dict(ddp.state_dict())
ddp.load_state_dict({"module." + k: v * 0 for k, v in ddp.state_dict().items()})
assert all(not p.numpy().any() for p in inner.parameters()) and all(p.is_leaf for p in inner.parameters())
ddp.load_state_dict({k: v + 1 for k, v in ddp.state_dict().items()})
assert all((p.numpy() == 1).all() for p in inner.parameters())

dist.destroy_process_group()
assert not dist.is_initialized()
# PyTorch's spelling of the same: its arguments, async work, the backend's name.
dist.init_process_group(backend=dist.get_default_backend_for_device("cuda"), init_method="env://", world_size=1, rank=0)
assert dist.get_backend() == "mpi" and dist.get_world_size() == 1
t = lucid.tensor([3.0])
work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
assert work.wait() and work.is_completed() and float(t.numpy()[0]) == 3.0
assert dist.barrier(async_op=True).wait() and dist.all_gather(t, async_op=True).result()[0].shape == (1, 1)
try:
    dist.init_process_group(world_size=2)
except ValueError as e:
    assert "come from mpiexec" in str(e), e
else:
    raise AssertionError("world_size=2 in a world of one was accepted")
dist.destroy_process_group()
print("world of one ok")
"""


def _python(code, env=None, timeout=120):
    import os

    full = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")
    }
    full.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=full)


def test_import_lucid_does_not_import_mpi4py():
    run = _python(
        "import sys, lucid, lucid.distributed, lucid.nn.parallel\n"
        "assert 'mpi4py' not in sys.modules, sorted(m for m in sys.modules if 'mpi' in m)\n"
        "print('ok')"
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


def test_a_world_of_one_without_mpi4py():
    run = _python(_WITHOUT_MPI4PY + _WORLD_OF_ONE)
    assert run.returncode == 0, run.stderr
    assert "backend local" in run.stdout and "world of one ok" in run.stdout


def test_a_world_of_one_over_mpi():
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip(
            "mpi4py is not installed here (make test-distributed installs it): the run without it is "
            "test_a_world_of_one_without_mpi4py"
        )
    run = _python(_WORLD_OF_ONE)
    assert run.returncode == 0, run.stderr
    assert "backend mpi" in run.stdout and "world of one ok" in run.stdout


def test_started_by_mpiexec_without_mpi4py_says_what_to_install():
    code = _WITHOUT_MPI4PY + textwrap.dedent("""
        import lucid.distributed as dist
        try:
            dist.init()
        except ImportError as e:
            print("ImportError:", e)
    """)
    run = _python(code, env={"PMI_RANK": "0", "PMI_SIZE": "2"})
    assert run.returncode == 0, run.stderr
    assert "ImportError:" in run.stdout and "pip install 'lucid[distributed]'" in run.stdout


def test_the_ddp_digits_example_runs_as_one_process():
    pytest.importorskip("sklearn")
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "ddp_digits.py"
    run = subprocess.run([sys.executable, str(example), "--epochs", "2"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "1 rank(s)" in run.stdout and "replicas identical: yes" in run.stdout and "epoch 2/2" in run.stdout


def test_everything_before_init_raises_a_clear_error():
    assert not dist.is_initialized()
    x = lucid.ones(2)
    for call in (
        dist.get_rank,
        dist.get_world_size,
        dist.barrier,
        lambda: dist.all_reduce(x),
        lambda: dist.broadcast(x, 0),
        lambda: dist.all_gather(x),
        lambda: lucid.nn.parallel.DistributedDataParallel(lucid.nn.Linear(2, 2)),
    ):
        with pytest.raises(RuntimeError, match=r"not initialised; call lucid.distributed.init\(\) first"):
            call()
    assert np.array_equal(x.numpy(), [1, 1])


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"backend": "nccl"}, ValueError, "'mpi' backend only"),
        ({"timeout": 0}, ValueError, "positive number of seconds"),
        ({"timeout": "soon"}, ValueError, "positive number of seconds"),
    ],
)
def test_init_refuses_wrong_arguments(kwargs, error, words):
    with pytest.raises(error, match=words):
        dist.init(**kwargs)
    assert not dist.is_initialized()


def test_reduce_op_names_are_the_strings():
    assert (dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MAX) == ("sum", "mean", "max")
    assert dist.is_available() == (importlib.util.find_spec("mpi4py") is not None)


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"module": "model"}, TypeError, "wraps a lucid.nn.Module, got str"),
        ({"bucket_mb": 0}, ValueError, "bucket_mb must be a positive number"),
        ({"bucket_mb": True}, ValueError, "bucket_mb must be a positive number"),
        ({"grad_dtype": lucid.float32}, ValueError, "grad_dtype must be None, lucid.bfloat16 or lucid.float16"),
        ({"broadcast_buffers": 1}, TypeError, "broadcast_buffers must be a bool"),
        ({"overlap": "yes"}, TypeError, "overlap must be a bool"),
    ],
)
def test_distributed_data_parallel_refuses_wrong_arguments(kwargs, error, words):
    kwargs = {"module": lucid.nn.Linear(2, 2), **kwargs}
    with pytest.raises(error, match=words):
        lucid.nn.parallel.DistributedDataParallel(**kwargs)


# ---- PyTorch's names and keywords ---------------------------------------------------------------


@pytest.fixture
def world_of_one(monkeypatch):
    """init() in this process as world size 1 without MPI (as when mpi4py is not installed);
    the group is left again afterwards."""
    from lucid.distributed import _group

    monkeypatch.setattr(_group, "is_available", lambda: False)
    monkeypatch.setattr(_group, "_launched_by_mpiexec", lambda: False)
    assert not dist.is_initialized()
    yield
    dist.destroy_process_group()


def test_init_process_group_takes_pytorchs_arguments(world_of_one):
    dist.init_process_group(
        backend=dist.get_default_backend_for_device("cuda"),
        init_method="env://",
        timeout=__import__("datetime").timedelta(minutes=5),
        world_size=1,
        rank=0,
        store=None,
        group_name="trainers",
        pg_options=None,
        device_id="metal",
    )
    assert dist.is_initialized() and (dist.get_rank(), dist.get_world_size()) == (0, 1)
    assert dist.get_backend() == "mpi" and dist.get_backend(None) == "mpi"
    assert (dist.get_rank(group=None), dist.get_world_size(None)) == (0, 1)
    dist.destroy_process_group(None)
    assert not dist.is_initialized()
    dist.init_process_group("mpi", "tcp://127.0.0.1:23456", world_size=-1, rank=-1)
    assert dist.is_initialized()
    dist.init_process_group(rank=0)  # again: nothing changes
    assert dist.is_initialized()


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"world_size": 2}, ValueError, r"world_size=2 \(MPI's is 1\): lucid's ranks and world size come from mpiexec"),
        ({"world_size": 4, "rank": 3}, ValueError, r"world_size=4 \(MPI's is 1\) and rank=3 \(MPI's is 0\)"),
        ({"rank": 1, "world_size": 1}, ValueError, r"rank=1 is not a rank of a world of 1"),
        ({"world_size": 0}, ValueError, "world_size must be positive"),
        ({"rank": "0"}, TypeError, "rank must be an int"),
        ({"world_size": 2.0}, TypeError, "world_size must be an int"),
        ({"init_method": 5}, TypeError, "init_method must be a URL string"),
        ({"backend": "nccl"}, ValueError, "'mpi' backend only"),
    ],
)
def test_init_process_group_refuses_what_mpiexec_did_not_set(world_of_one, kwargs, error, words):
    with pytest.raises(error, match=words):
        dist.init_process_group(**kwargs)
    assert not dist.is_initialized()  # left as it was


def test_init_process_group_with_a_wrong_rank_leaves_an_existing_group(world_of_one):
    dist.init()
    with pytest.raises(ValueError, match=r"rank=5 \(MPI's is 0\)"):
        dist.init_process_group(rank=5)
    assert dist.is_initialized()


def test_backend_names():
    for device in ("cpu", "cuda", "metal", "mps", None):
        assert dist.get_default_backend_for_device(device) == "mpi"
    with pytest.raises(RuntimeError, match="not initialised"):
        dist.get_backend()


def test_async_op_gives_a_completed_work(world_of_one):
    dist.init()
    t = lucid.tensor([1.0, 2.0])
    assert dist.all_reduce(t, dist.ReduceOp.SUM, None, False) is t  # lucid returns the tensor
    work = dist.all_reduce(t, op=dist.ReduceOp.SUM, async_op=True)
    assert isinstance(work, dist.Work) and work.wait() is True and work.is_completed() is True
    assert work.is_success() and work.exception() is None and work.result()[0] is t
    assert np.array_equal(t.numpy(), [1, 2])
    work = dist.broadcast(t, src=0, async_op=True)
    assert work.wait(timeout=1.0) and work.result() == [t]
    work = dist.all_gather(t, async_op=True)
    assert work.wait() and np.array_equal(work.result()[0].numpy(), [[1, 2]])
    assert dist.barrier() is None and dist.barrier(group=None, device_ids=[0]) is None
    work = dist.barrier(async_op=True, device_ids=[0])
    assert work.wait() is True and work.is_completed() and work.result() == []


@pytest.mark.parametrize(
    "call, error, words",
    [
        (
            lambda t: dist.all_reduce(t, group="world"),
            ValueError,
            "all_reduce: lucid.distributed has one process group",
        ),
        (
            lambda t: dist.broadcast(t, 0, group=object()),
            ValueError,
            "broadcast: lucid.distributed has one process group",
        ),
        (lambda t: dist.all_gather(t, group=1), ValueError, "all_gather: lucid.distributed has one process group"),
        (lambda t: dist.barrier(group="world"), ValueError, "barrier: lucid.distributed has one process group"),
        (lambda t: dist.get_backend("world"), ValueError, "get_backend: lucid.distributed has one process group"),
        (lambda t: dist.get_rank("world"), ValueError, "get_rank: lucid.distributed has one process group"),
        (lambda t: dist.get_world_size(2), ValueError, "get_world_size: lucid.distributed has one process group"),
        (lambda t: dist.destroy_process_group("world"), ValueError, "destroy_process_group: lucid.distributed has one"),
        (lambda t: dist.all_reduce(t, async_op=1), TypeError, "async_op must be a bool"),
        (lambda t: dist.broadcast(t, 0, async_op="yes"), TypeError, "async_op must be a bool"),
        (lambda t: dist.all_gather(t, async_op=None), TypeError, "async_op must be a bool"),
        (lambda t: dist.barrier(async_op=0), TypeError, "async_op must be a bool"),
        (lambda t: dist.barrier(device_ids=0), TypeError, "device_ids must be None or a list of device indices"),
        (lambda t: dist.barrier(device_ids=["cuda:0"]), TypeError, "device_ids must be None or a list"),
    ],
)
def test_collective_keywords_refuse_wrong_values(world_of_one, call, error, words):
    dist.init()
    t = lucid.tensor([1.0, 2.0])
    with pytest.raises(error, match=words):
        call(t)
    assert np.array_equal(t.numpy(), [1, 2])


def test_distributed_data_parallel_takes_pytorchs_keywords(world_of_one):
    from lucid.nn.parallel import DistributedDataParallel

    dist.init()
    for kwargs in (
        {"device_ids": None, "output_device": None},
        {"device_ids": [0], "output_device": 0},
        {"device_ids": ["cpu"], "output_device": "cpu"},
        {"device_ids": (lucid.device("cpu"),)},
        {"find_unused_parameters": True, "gradient_as_bucket_view": True, "static_graph": True},
        {"dim": 1, "broadcast_buffers": False, "process_group": None},
        {"bucket_cap_mb": 1},
    ):
        inner = lucid.nn.Linear(3, 2)
        ddp = DistributedDataParallel(inner, **kwargs)
        assert ddp.module is inner
        loss = ddp(lucid.ones(4, 3)).sum()
        loss.backward()
        assert np.allclose(inner.bias.grad.numpy(), [4, 4]), kwargs  # world of one: the local gradient
    assert DistributedDataParallel(lucid.nn.Linear(3, 2), [0], 0, 0, True).bucket_bytes == 25 * 2**20
    assert DistributedDataParallel(lucid.nn.Linear(3, 2), bucket_cap_mb=2).bucket_bytes == 2 * 2**20
    assert DistributedDataParallel(lucid.nn.Linear(3, 2), bucket_mb=2, bucket_cap_mb=2).bucket_bytes == 2 * 2**20
    on_metal = lucid.nn.Linear(3, 2).to("metal")
    assert DistributedDataParallel(on_metal, device_ids=["metal"], output_device="metal").module is on_metal
    assert DistributedDataParallel(lucid.nn.ReLU(), device_ids=["metal"]).module is not None  # no parameters


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (
            {"device_ids": [1]},
            ValueError,
            r"device_ids=\[1\] does not name this rank's device.*'cpu' or this rank's "
            r"local rank 0 .*in a one-element list",
        ),
        ({"device_ids": [0, 1]}, ValueError, r"device_ids=\[0, 1\] does not name this rank's device"),
        ({"device_ids": []}, ValueError, r"device_ids=\[\] does not name"),
        ({"device_ids": 0}, ValueError, r"device_ids=0 does not name"),
        ({"device_ids": ["metal"]}, ValueError, r"device_ids=\['metal'\] does not name this rank's device"),
        ({"device_ids": ["cuda:0"]}, ValueError, r"device_ids=\['cuda:0'\] does not name"),
        ({"device_ids": [True]}, ValueError, r"device_ids=\[True\] does not name"),
        ({"device_ids": 25}, ValueError, r"bucket_mb and grad_dtype are keyword arguments"),
        ({"output_device": 3}, ValueError, r"output_device=3 does not name this rank's device"),
        ({"output_device": [0]}, ValueError, r"output_device=\[0\] does not name"),
        ({"process_group": "world"}, ValueError, "one process group"),
        ({"bucket_mb": 1, "bucket_cap_mb": 2}, ValueError, "name the same size; give one of them"),
        ({"bucket_cap_mb": 0}, ValueError, "bucket_mb must be a positive number"),
        ({"find_unused_parameters": "yes"}, TypeError, "find_unused_parameters must be a bool"),
        ({"gradient_as_bucket_view": 1}, TypeError, "gradient_as_bucket_view must be a bool"),
        ({"static_graph": None}, TypeError, "static_graph must be a bool"),
        ({"dim": 0.0}, TypeError, "dim must be an int"),
    ],
)
def test_distributed_data_parallel_refuses_what_pytorch_would_not_mean_here(world_of_one, kwargs, error, words):
    dist.init()
    with pytest.raises(error, match=words):
        lucid.nn.parallel.DistributedDataParallel(lucid.nn.Linear(2, 2), **kwargs)


# ---- DataParallel: one device per process, so the module runs as it is --------------------------


def test_data_parallel_runs_the_module_as_it_is():
    from lucid.nn.parallel import DataParallel, data_parallel

    assert lucid.nn.DataParallel is DataParallel and "DataParallel" in lucid.nn.__all__
    lucid.manual_seed(0)
    inner = lucid.nn.Sequential(lucid.nn.Linear(3, 4), lucid.nn.ReLU(), lucid.nn.Linear(4, 2))
    x = lucid.tensor(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3))
    for model in (
        DataParallel(inner),
        DataParallel(inner, device_ids=[0, 1], output_device=0, dim=0),
        DataParallel(inner, device_ids=("cpu",), dim=1),
    ):
        assert model.module is inner and model.device_ids == [] and model.output_device is None
        out = model(x)
        assert out.shape == (5, 2) and np.array_equal(out.numpy(), inner(x).numpy())
        assert [p is q for p, q in zip(model.parameters(), inner.parameters())] == [True] * 4
    model = DataParallel(inner)
    model(x).sum().backward()
    assert inner[0].weight.grad is not None and inner[0].weight.grad.shape == (4, 3)
    assert np.array_equal(data_parallel(inner, (x,)).numpy(), inner(x).numpy())
    assert np.array_equal(data_parallel(inner, x, device_ids=[0], module_kwargs={}).numpy(), inner(x).numpy())


def test_data_parallel_state_dict_has_pytorchs_module_prefix():
    inner = lucid.nn.Linear(3, 2)
    model = lucid.nn.DataParallel(inner)
    assert list(model.state_dict()) == ["module.weight", "module.bias"]
    assert [n for n, _ in model.named_parameters()] == ["module.weight", "module.bias"]
    saved = {k: v + 1 for k, v in model.state_dict().items()}
    other = lucid.nn.DataParallel(lucid.nn.Linear(3, 2))
    other.load_state_dict(saved)
    assert np.array_equal(other.module.weight.numpy(), saved["module.weight"].numpy())
    lucid.nn.Linear(3, 2).load_state_dict(model.module.state_dict())  # the bare keys
    with pytest.raises(Exception):
        lucid.nn.Linear(3, 2).load_state_dict(model.state_dict())  # prefixed: not the bare model's


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: lucid.nn.DataParallel("model"), TypeError, "wraps a lucid.nn.Module, got str"),
        (
            lambda: lucid.nn.DataParallel(lucid.nn.Linear(2, 2), device_ids=0),
            TypeError,
            "device_ids must be None or a list",
        ),
        (lambda: lucid.nn.DataParallel(lucid.nn.Linear(2, 2), dim=None), TypeError, "dim must be an int"),
        (
            lambda: lucid.nn.parallel.data_parallel(lucid.nn.Linear(2, 2), lucid.ones(1, 2), device_ids="cuda"),
            TypeError,
            "data_parallel: device_ids must be None or a list",
        ),
    ],
)
def test_data_parallel_refuses_wrong_arguments(call, error, words):
    with pytest.raises(error, match=words):
        call()


# ---- ZeroRedundancyOptimizer ------------------------------------------------------------------


def test_zero_redundancy_optimizer_of_one_rank_is_its_optimizer(world_of_one):
    """Alone, the one rank owns every parameter: the same steps and state as the optimizer
    itself, and the consolidated state loads into it."""
    from lucid.distributed.optim import ZeroRedundancyOptimizer

    dist.init()
    lucid.manual_seed(0)
    a, b = lucid.nn.Linear(4, 3), lucid.nn.Linear(4, 3)
    b.load_state_dict(a.state_dict())
    zero = ZeroRedundancyOptimizer(a.parameters(), lucid.optim.Adam, lr=0.1, betas=(0.8, 0.9))
    plain = lucid.optim.Adam(b.parameters(), lr=0.1, betas=(0.8, 0.9))
    x = lucid.randn(5, 4)
    for _ in range(3):
        for model, opt in ((a, zero), (b, plain)):
            opt.zero_grad()
            (model(x) ** 2).sum().backward()
            opt.step()
    for p, q in zip(a.parameters(), b.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    assert zero.param_groups[0]["betas"] == (0.8, 0.9) and zero.param_groups[0]["eps"] == 1e-8
    with pytest.raises(RuntimeError, match="call consolidate_state_dict"):
        zero.state_dict()
    zero.consolidate_state_dict(to=0)
    state = zero.state_dict()
    want = plain.state_dict()
    assert state["param_groups"] == want["param_groups"]
    for i, s in want["state"].items():
        for k, v in s.items():
            np.testing.assert_array_equal(state["state"][i][k].numpy(), v.numpy())
    zero.load_state_dict(want)
    np.testing.assert_array_equal(zero.state[a.weight]["exp_avg"].numpy(), plain.state[b.weight]["exp_avg"].numpy())


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"optimizer_class": "Adam"}, TypeError, "optimizer_class must be a lucid.optim.Optimizer subclass"),
        ({"process_group": object()}, ValueError, "one process group"),
        ({"overlap_with_ddp": True}, ValueError, "overlap_with_ddp=True"),
        ({"parameters_as_bucket_view": 1}, TypeError, "parameters_as_bucket_view must be a bool"),
        ({"lr": -1.0}, ValueError, "invalid lr"),
    ],
)
def test_zero_redundancy_optimizer_refuses_wrong_arguments(world_of_one, kwargs, error, words):
    from lucid.distributed.optim import ZeroRedundancyOptimizer

    dist.init()
    kwargs = {"optimizer_class": lucid.optim.SGD, **kwargs}
    with pytest.raises(error, match=words):
        ZeroRedundancyOptimizer(lucid.nn.Linear(2, 2).parameters(), **kwargs)


def test_zero_redundancy_optimizer_checks_its_calls(world_of_one):
    from lucid.distributed.optim import ZeroRedundancyOptimizer

    with pytest.raises(RuntimeError, match="not initialised"):
        ZeroRedundancyOptimizer(lucid.nn.Linear(2, 2).parameters(), lucid.optim.SGD, lr=0.1)
    dist.init()
    zero = ZeroRedundancyOptimizer(lucid.nn.Linear(2, 2).parameters(), lucid.optim.SGD, lr=0.1)
    with pytest.raises(ValueError, match="to=1 is not a rank"):
        zero.consolidate_state_dict(to=1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        zero.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValueError, match="has 1 parameters where this optimizer's has 2"):
        zero.load_state_dict({"state": {}, "param_groups": [{"lr": 0.1, "params": [0]}]})


def test_zero_redundancy_optimizer_follows_a_schedulers_learning_rate(world_of_one):
    """A scheduler sets ``param_groups[i]["lr"]`` on the wrapper; the local optimizer steps
    with it."""
    from lucid.distributed.optim import ZeroRedundancyOptimizer

    dist.init()
    model = lucid.nn.Linear(3, 1)
    zero = ZeroRedundancyOptimizer(model.parameters(), lucid.optim.SGD, lr=1.0)
    scheduler = lucid.optim.lr_scheduler.StepLR(zero, step_size=1, gamma=0.0)
    before = model.weight.numpy()
    zero.zero_grad()
    model(lucid.ones(2, 3)).sum().backward()
    zero.step()
    moved = model.weight.numpy()
    np.testing.assert_allclose(moved, before - 2.0, rtol=1e-6)  # lr 1, gradient 2 per weight
    scheduler.step()
    assert zero.param_groups[0]["lr"] == 0.0
    zero.step()
    np.testing.assert_array_equal(model.weight.numpy(), moved)
    assert zero.optim.param_groups[0]["lr"] == 0.0
