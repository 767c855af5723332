"""Faults during training: exceptions and KeyboardInterrupts inside autocast scopes, failed
backward calls, inf/NaN steps under GradScaler, and checkpoints interrupted mid-save or
killed. After each fault the state must be what it was before (autocast off, parameters and
gradients untouched, the previous checkpoint intact), and training must carry on exactly as
a run without the fault. tests/test_autocast.py, tests/test_grad_scaler.py and
tests/test_serialization.py cover the single-fault cases these build on."""

import _thread
import contextlib
import errno
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import lucid
import lucid.nn as nn
import lucid.nn.functional as F
from lucid import _C
from lucid.amp import GradScaler, autocast
from _support import record, scale

MODES = [("cpu", lucid.bfloat16), ("metal", lucid.float16)]
MODE_IDS = ["cpu-bfloat16", "metal-float16"]


# ---- a small regression task ------------------------------------------------------------------


def data(device, n=64, seed=0):
    r = np.random.default_rng(seed)
    x = r.standard_normal((n, 8)).astype(np.float32)
    y = (np.tanh(x @ r.standard_normal((8, 1))) + 0.05 * r.standard_normal((n, 1))).astype(np.float32)
    return lucid.tensor(x, device=device), lucid.tensor(y, device=device)


class Tripwire(nn.Module):
    """Passes its input through, or raises `fault` once when armed with one."""

    def __init__(self):
        super().__init__()
        self.fault = None

    def forward(self, x):
        if self.fault is not None:
            fault, self.fault = self.fault, None
            raise fault
        return x


def model(device):
    lucid.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), Tripwire(), nn.Linear(16, 1)).to(device)


def parameters(m):
    """Each parameter's bytes and its gradient's bytes (None without one)."""
    return [(p.numpy().tobytes(), None if p.grad is None else p.grad.numpy().tobytes()) for p in m.parameters()]


def weights(m):
    return [p.numpy().tobytes() for p in m.parameters()]


def optimizer_state(opt):
    """Adam's state, per parameter. A parameter with none reads as zero moments at step 0: the
    state a step skipped on the device leaves, which the next step updates as it would none."""
    out = []
    for p in (p for g in opt.param_groups for p in g["params"]):
        s = opt.state.get(p)
        if not s:
            zeros = np.zeros_like(p.detach().numpy()).tobytes()
            out.append((0.0, zeros, zeros))
        else:
            out.append((float(s["step"]), s["exp_avg"].numpy().tobytes(), s["exp_avg_sq"].numpy().tobytes()))
    return out


def assert_autocast_off(when=""):
    for device in ("cpu", "metal"):
        assert not lucid.amp.is_autocast_enabled(device), f"autocast still on for {device} {when}"
    assert lucid.amp.get_autocast_dtype() is None, when
    assert _C.autocast_live_guards() == 0, f"live autocast guards {when}"
    assert _C.autocast_cached_casts() == 0, f"casts still cached {when}"


class Fault(Exception):
    pass


def train_step(m, opt, scaler, x, y, device, dtype):
    opt.zero_grad()
    with autocast(device, dtype=dtype):
        loss = F.mse_loss(m(x).float(), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return loss.item()


def setup(device, dtype):
    m = model(device)
    opt = lucid.optim.Adam(m.parameters(), lr=0.01)
    scaler = GradScaler(device, init_scale=2.0**12, growth_interval=3, enabled=dtype is lucid.float16)
    return m, opt, scaler


def clean_run(device, dtype, steps):
    m, opt, scaler = setup(device, dtype)
    x, y = data(device)
    losses = [train_step(m, opt, scaler, x, y, device, dtype) for _ in range(steps)]
    return losses, weights(m)


# ---- (a) exceptions inside autocast -----------------------------------------------------------


def fault_in_forward(m, x, y, device, dtype):
    m[2].fault = Fault("in the forward pass")
    with autocast(device, dtype=dtype):
        F.mse_loss(m(x).float(), y)


def fault_in_nested_scopes(m, x, y, device, dtype):
    other = "metal" if device == "cpu" else "cpu"
    with autocast(device, dtype=dtype):
        m[0](x)
        with autocast(other, dtype=lucid.bfloat16), autocast(device, enabled=False):
            m[2].fault = Fault("two scopes deeper")
            m(x)


def fault_in_decorated_forward(m, x, y, device, dtype):
    @autocast(device, dtype=dtype)
    def forward(depth):
        return forward(depth - 1) if depth else m(x)

    m[2].fault = Fault("inside a decorated, recursive call")
    forward(3)


def fault_after_backward(m, x, y, device, dtype):
    # The gradients exist by then; the retried step starts with zero_grad, as any step does.
    with autocast(device, dtype=dtype):
        F.mse_loss(m(x).float(), y).backward()
        raise Fault("after backward, still in the scope")


FORWARD_FAULTS = [fault_in_forward, fault_in_nested_scopes, fault_in_decorated_forward, fault_after_backward]


@pytest.mark.parametrize("device,dtype", MODES, ids=MODE_IDS)
def test_exception_in_autocast_leaves_it_off_and_training_matches_a_clean_run(device, dtype):
    steps = scale(8, 40)
    r = random.Random(3)
    faulty_steps = sorted(r.sample(range(steps), steps // 2))
    reference, final = clean_run(device, dtype, steps)
    m, opt, scaler = setup(device, dtype)
    x, y = data(device)
    losses, faults = [], 0
    for step in range(steps):
        if step in faulty_steps:
            before = parameters(m)
            inject = FORWARD_FAULTS[faults % len(FORWARD_FAULTS)]
            with pytest.raises(Fault):
                inject(m, x, y, device, dtype)
            faults += 1
            assert_autocast_off(f"after {inject.__name__}")
            assert weights(m) == [w for w, _ in before]
        losses.append(train_step(m, opt, scaler, x, y, device, dtype))
        assert_autocast_off()
    assert losses == reference and weights(m) == final  # bit for bit
    assert losses[-1] < losses[0]
    record(
        "Faults during training",
        f"exceptions inside autocast scopes ({device}, {dtype}): forward, nested "
        "scopes, decorated recursion, after backward",
        faults,
        "autocast off, no live guard or cached cast; the run matches a fault-free run bit for bit",
    )


# ---- (b) failed backward calls ----------------------------------------------------------------


def failing_backward_calls(m, x, loss, device):
    """Calls that must fail before touching any gradient, with the error each raises."""
    other = "metal" if device == "cpu" else "cpu"
    return [
        ("non-scalar output, no gradient", RuntimeError, lambda: m(x).backward()),
        ("gradient of the wrong shape", ValueError, lambda: loss.backward(lucid.ones(3, device=device))),
        ("gradient of a broadcastable shape", ValueError, lambda: m(x).backward(lucid.ones(1, 1, device=device))),
        ("gradient on the other device", RuntimeError, lambda: loss.backward(lucid.ones((), device=other))),
        ("a tensor that does not require grad", RuntimeError, lambda: x.sum().backward()),
        ("a gradient that is not a tensor", TypeError, lambda: loss.backward(np.ones(()))),
    ]


@pytest.mark.parametrize("device", ["cpu", "metal"])
def test_failed_backward_leaves_parameters_and_gradients_untouched(device):
    steps = scale(4, 30)
    r = random.Random(4)
    x, y = data(device)
    halves = [(x[:32], y[:32]), (x[32:], y[32:])]

    def run(with_faults):
        m = model(device)
        opt = lucid.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        tried = 0
        for _ in range(steps):
            opt.zero_grad()
            for i, (xb, yb) in enumerate(halves):  # two micro-batches: gradients accumulate
                loss = F.mse_loss(m(xb), yb)
                if with_faults:
                    calls = failing_backward_calls(m, xb, loss, device)
                    for name, error, call in r.sample(calls, 3):
                        before = parameters(m)
                        with pytest.raises(error):
                            call()
                        assert parameters(m) == before, name
                        tried += 1
                loss.backward()  # the graph survived the failed calls
                if with_faults and i == 1:
                    after = parameters(m)
                    with pytest.raises(RuntimeError, match="second time"):
                        loss.backward()  # its saved tensors are gone now
                    assert parameters(m) == after
                    tried += 1
            opt.step()
        return weights(m), tried

    reference, _ = run(False)
    final, tried = run(True)
    assert final == reference
    record(
        "Faults during training",
        f"failing backward calls ({device}): non-scalar, wrong shape/device/type, no grad, twice without retain_graph",
        tried,
        "parameters and accumulated .grad unchanged bit for bit; the run matches a fault-free one",
    )


# ---- (c) KeyboardInterrupt --------------------------------------------------------------------


def test_keyboard_interrupt_raised_in_scopes_leaves_autocast_off():
    x, w = lucid.randn(4, 8), lucid.randn(8, 8, requires_grad=True)
    ac = autocast("cpu", dtype=lucid.bfloat16)

    def direct():
        with ac:
            x @ w
            raise KeyboardInterrupt

    def same_object_re_entered():
        with ac, autocast("metal"), ac:
            x @ w
            raise KeyboardInterrupt

    @ac
    def decorated(depth):
        x @ w
        if depth == 0:
            raise KeyboardInterrupt
        with ac:
            decorated(depth - 1)

    def os_signal():
        with ac, ac:
            (x @ w).sum()
            signal.raise_signal(signal.SIGINT)  # the default handler raises KeyboardInterrupt
            for _ in range(100):
                x @ w

    cases = [direct, same_object_re_entered, lambda: decorated(4), os_signal]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    for case in cases:
        with pytest.raises(KeyboardInterrupt):
            case()
        assert_autocast_off()
    with ac:  # the object is still usable
        assert (x @ w).dtype is lucid.bfloat16
    assert_autocast_off()
    record(
        "Faults during training",
        "KeyboardInterrupt raised in scopes: direct, the same object re-entered, "
        "decorated recursion, SIGINT via signal.raise_signal",
        len(cases),
        "autocast off, no live guard",
    )


@contextlib.contextmanager
def one_shot_sigint():
    """Installs a SIGINT handler that raises KeyboardInterrupt once per arming, so the
    interrupts a firing thread has in flight after the first cannot land outside a trial."""
    fired = threading.Event()
    armed = [False]

    def handler(signum, frame):
        if armed[0]:
            armed[0] = False
            fired.set()
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGINT, handler)
    try:
        yield armed, fired
    finally:
        signal.signal(signal.SIGINT, old)


def test_asynchronous_keyboard_interrupts_mid_loop_leave_autocast_off_and_training_exact():
    trials = scale(100, 800)
    r = random.Random(5)
    x, w, b = lucid.randn(16, 32), lucid.randn(24, 32, requires_grad=True), lucid.randn(24, requires_grad=True)
    small = lucid.randn(4, 4)
    outer, inner = autocast("cpu", dtype=lucid.bfloat16), autocast("metal", dtype=lucid.float16)
    xm = x.to("metal")

    @outer
    def decorated():
        return F.linear(x, w, b).relu().sum()

    def body():
        # The same object entered again inside itself (several times, around cheap ops, so
        # that interrupts often land in its exits), another device's scope, a decorator.
        with outer:
            with inner:
                with outer:
                    F.linear(x, w, b).relu().sum().backward()
                for _ in range(3):
                    with outer:
                        small + 1
                (xm @ xm.T).sum()
            decorated()

    main = threading.main_thread().ident
    swallowed = []
    hook = sys.unraisablehook
    sys.unraisablehook = lambda u: swallowed.append((u.exc_type, getattr(u.object, "__qualname__", "")))
    landed = 0
    try:
        with one_shot_sigint() as (armed, fired):
            for trial in range(trials):
                delay, deliver = r.uniform(0, 0.004), r.choice(["interrupt_main", "pthread_kill"])

                def fire():
                    time.sleep(delay)
                    while not fired.is_set():
                        if deliver == "interrupt_main":
                            _thread.interrupt_main()
                        else:
                            signal.pthread_kill(main, signal.SIGINT)
                        time.sleep(0.0002)

                fired.clear()
                armed[0] = True
                thread = threading.Thread(target=fire)
                try:
                    thread.start()
                    while not fired.is_set():
                        body()
                except KeyboardInterrupt:
                    landed += 1
                thread.join()
                assert_autocast_off(f"after interrupt {trial}")
    finally:
        sys.unraisablehook = hook
    # An interrupt that lands in a finalizer is reported there and lost (Python's rule); it
    # must be the interrupt and nothing else.
    assert all(t is KeyboardInterrupt and name == "TensorBase.__del__" for t, name in swallowed), swallowed
    assert landed + len(swallowed) == trials and landed > trials // 2
    # The process is usable: the same scope objects train exactly as fresh ones.
    assert_autocast_off()

    def train(cpu_scope):
        m = model("cpu")
        opt = lucid.optim.Adam(m.parameters(), lr=0.01)
        xs, ys = data("cpu")
        for _ in range(5):
            opt.zero_grad()
            with cpu_scope:
                loss = F.mse_loss(m(xs).float(), ys)
            loss.backward()
            opt.step()
        return weights(m)

    assert train(outer) == train(autocast("cpu", dtype=lucid.bfloat16))
    record(
        "Faults during training",
        "KeyboardInterrupt at a random moment (interrupt_main / pthread_kill SIGINT) "
        "in a loop of ops and backward in nested, re-entered and decorated scopes",
        trials,
        f"autocast off, no live guard ({landed} raised, {len(swallowed)} lost in a finalizer); "
        "training afterwards exact",
    )


# ---- (d) GradScaler with inf/NaN steps --------------------------------------------------------


def torch_scale_rule(scale_, tracker, found_inf, growth, backoff, interval):
    """torch.amp's _amp_update_scale_: back off on inf/NaN; grow after `interval` clean steps,
    unless the grown scale is not finite in float32."""
    if found_inf:
        return scale_ * backoff, 0
    tracker += 1
    if tracker == interval:
        with np.errstate(over="ignore"):
            grown = np.float32(scale_) * np.float32(growth)
        return (float(grown) if np.isfinite(grown) else scale_), 0
    return scale_, tracker


def poison(kind, loss, x):
    """The loss of a step made infinite or NaN in one of the ways a real run meets them."""
    if kind == "loss * inf":
        return loss * float("inf"), x
    if kind == "loss * nan":
        return loss * float("nan"), x
    bad = x.numpy().copy()
    bad[random.Random(len(bad)).randrange(len(bad)), 0] = np.inf if kind == "inf input" else np.nan
    return loss, lucid.tensor(bad, device=x.device)


POISONS = ["loss * inf", "loss * nan", "nan input", "inf input"]


@pytest.mark.parametrize(
    "device,dtype", [("cpu", lucid.float32), ("metal", lucid.float16)], ids=["cpu-float32", "metal-float16"]
)
def test_grad_scaler_skips_inf_nan_steps_untouched_and_matches_a_clean_run(device, dtype):
    steps = scale(24, 160)
    r = random.Random(6)
    # Faults in the first three quarters, so the end shows training resuming.
    faulty = {s: POISONS[i % len(POISONS)] for i, s in enumerate(sorted(r.sample(range(steps * 3 // 4), steps // 4)))}
    growth, backoff, interval = 2.0, 0.5, 3
    x0, y = data(device)

    def run(with_faults, scales=None):
        m = model(device)
        opt = lucid.optim.Adam(m.parameters(), lr=0.02)
        scaler = GradScaler(
            device, init_scale=2.0**10, growth_factor=growth, backoff_factor=backoff, growth_interval=interval
        )
        expected_scale, tracker = 2.0**10, 0
        losses, used = [], []
        for step in range(steps):
            kind = faulty.get(step) if with_faults else None
            if not with_faults and step in faulty:
                continue  # the clean run leaves the faulty steps out
            if scales is not None:
                scaler.update(new_scale=scales[len(used)])  # the scales the faulty run used
            before_w, before_state = weights(m), optimizer_state(opt)
            opt.zero_grad()
            x = x0
            if kind in ("nan input", "inf input"):
                _, x = poison(kind, None, x0)
            with autocast(device, dtype=dtype, enabled=dtype is not lucid.float32):
                loss = F.mse_loss(m(x).float(), y)
            if kind in ("loss * inf", "loss * nan"):
                loss, _ = poison(kind, loss, x0)
            used.append(scaler.get_scale())
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            if kind is not None:
                assert weights(m) == before_w, f"step {step} ({kind}) moved the parameters"
                assert optimizer_state(opt) == before_state, f"step {step} ({kind}) changed Adam's state"
            else:
                assert weights(m) != before_w
                losses.append(loss.item())
            if scales is None:
                expected_scale, tracker = torch_scale_rule(
                    expected_scale, tracker, kind is not None, growth, backoff, interval
                )
                assert scaler.get_scale() == expected_scale, f"scale after step {step}"
        return losses, weights(m), used

    faulty_losses, faulty_final, used = run(True)
    clean_scales = [s for step, s in zip(range(steps), used) if step not in faulty]
    clean_losses, clean_final, _ = run(False, clean_scales)
    assert faulty_losses == clean_losses and faulty_final == clean_final  # the skipped steps left no trace
    # Training resumed: after the last fault the loss goes below anything it was before.
    resumed = len([s for s in range(max(faulty)) if s not in faulty])
    assert clean_losses[-1] < 0.5 * clean_losses[0]
    assert clean_losses[-1] < min(clean_losses[: resumed + 1])
    record(
        "Faults during training",
        f"GradScaler ({device}, {dtype}) with seeded inf/NaN steps (loss * inf/nan, inf/NaN inputs)",
        len(faulty),
        "step skipped with parameters and Adam state untouched; scale per torch.amp's rule; the other steps "
        "match a fault-free run bit for bit; loss keeps falling",
    )


def test_grad_scaler_does_not_grow_past_the_float32_range():
    # Near the top of float32 the scale must stop growing (as torch.amp's does), not
    # overflow every scaled loss into a skipped step.
    m = model("cpu")
    opt = lucid.optim.SGD(m.parameters(), lr=1e-3)
    x, y = data("cpu")
    x = x * 0.01
    scaler = GradScaler("cpu", init_scale=2.0**125, growth_interval=1)
    expected, tracker = 2.0**125, 0
    steps = 8
    for step in range(steps):
        before = weights(m)
        opt.zero_grad()
        scaler.scale(F.mse_loss(m(x), y * 0.01)).backward()
        scaler.step(opt)
        scaler.update()
        assert weights(m) != before, f"step {step} was skipped at scale 2**{np.log2(scaler.get_scale()):.0f}"
        expected, tracker = torch_scale_rule(expected, tracker, False, 2.0, 0.5, 1)
        assert scaler.get_scale() == expected
    assert scaler.get_scale() == 2.0**127
    record(
        "Faults during training",
        "GradScaler growing from 2**125 every step",
        steps,
        "the scale stops at 2**127 as torch.amp's does; no step skipped",
    )


# ---- (e) interrupted and killed saves ---------------------------------------------------------


def saved_state(version):
    """The checkpoint a save of `version` writes: every value tells which version it is."""
    return {"version": version, "w": lucid.full((256, 256), float(version)), "b": lucid.arange(1000) + version}


def assert_checkpoint(path, versions):
    """`path` holds one of `versions`, whole."""
    got = lucid.load(path)
    assert got["version"] in versions
    np.testing.assert_array_equal(got["w"].numpy(), np.full((256, 256), got["version"], np.float32))
    np.testing.assert_array_equal(got["b"].numpy(), np.arange(1000) + got["version"])
    return got["version"]


def temporaries(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".tmp"))


class PartialWrites:
    """os.fdopen whose files write the first `keep` bytes of what they are given, then raise."""

    def __init__(self, real, keep, error):
        self.real, self.keep, self.error = real, keep, error

    def __call__(self, *args, **kwargs):
        f = self.real(*args, **kwargs)
        keep, error = self.keep, self.error

        class Half:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                f.close()

            def write(self, data):
                f.write(data[: keep(len(data))])
                f.flush()
                raise error

            def __getattr__(self, name):
                return getattr(f, name)

        return Half()


def test_save_failing_part_way_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.safetensors"
    lucid.save(saved_state(1), path)
    previous = path.read_bytes()
    r = random.Random(7)
    errors = [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt(), MemoryError()]
    n = scale(12, 120)
    real_fdopen, real_fsync, real_replace = os.fdopen, os.fsync, os.replace
    for i in range(n):
        error = errors[i % len(errors)]
        where = ["write", "fsync", "replace"][i % 3]
        if where == "write":
            fraction = r.random()
            monkeypatch.setattr(os, "fdopen", PartialWrites(real_fdopen, lambda size: int(size * fraction), error))
        else:

            def fail(*args, error=error):
                raise error

            monkeypatch.setattr(os, where, fail)
        with pytest.raises(type(error)):
            lucid.save(saved_state(i + 2), path)
        monkeypatch.setattr(os, "fdopen", real_fdopen)
        monkeypatch.setattr(os, "fsync", real_fsync)
        monkeypatch.setattr(os, "replace", real_replace)
        assert path.read_bytes() == previous and assert_checkpoint(path, {1}) == 1
        assert os.listdir(tmp_path) == ["ckpt.safetensors"], f"{where}: {os.listdir(tmp_path)}"
    lucid.save(saved_state(99), path)  # and the next save goes through
    assert assert_checkpoint(path, {99}) == 99 and os.listdir(tmp_path) == ["ckpt.safetensors"]
    record(
        "Faults during training",
        "lucid.save failing part way (a partial write, fsync, rename; ENOSPC, KeyboardInterrupt, MemoryError)",
        n,
        "the previous checkpoint intact and loadable; no temporary file left",
    )


# A process that imports lucid once and forks savers on request, so that each saver can be
# killed without paying for an interpreter start. Commands and replies are JSON lines.
ZYGOTE = r"""
import itertools, json, os, sys, time
import lucid

def saved_state(version):
    return {"version": version, "w": lucid.full((256, 256), float(version)), "b": lucid.arange(1000) + version}

def saver(cmd):
    if cmd["pause_in"]:
        # Stop inside fsync, the data written and not yet renamed, until told to go on.
        real, paused = os.fsync, os.path.join(cmd["pause_in"], "paused")
        def fsync(fd):
            open(paused, "w").close()
            while not os.path.exists(os.path.join(cmd["pause_in"], "resume")):
                time.sleep(0.001)
            real(fd)
        os.fsync = fsync
        lucid.save(saved_state(cmd["version"]), cmd["path"])
        return
    for version in itertools.count(cmd["version"]):
        lucid.save(saved_state(version), cmd["path"])

for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["op"] == "spawn":
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                saver(cmd)
                code = 0
            finally:
                os._exit(code)
        reply = {"pid": pid}
    else:
        _, status = os.waitpid(cmd["pid"], 0)
        reply = {"signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                 "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}
    print(json.dumps(reply), flush=True)
"""


@pytest.fixture(scope="module")
def savers():
    """spawn(path, version, pause_in=None) -> pid of a process saving to `path` (versions
    from `version` on, or once, pausing in fsync, with `pause_in`); wait(pid) -> how it ended."""
    zygote = subprocess.Popen([sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(**cmd):
        zygote.stdin.write(json.dumps(cmd) + "\n")
        zygote.stdin.flush()
        return json.loads(zygote.stdout.readline())

    class Savers:
        @staticmethod
        def spawn(path, version, pause_in=None):
            return ask(op="spawn", path=str(path), version=version, pause_in=pause_in and str(pause_in))["pid"]

        @staticmethod
        def wait(pid):
            return ask(op="wait", pid=pid)

    yield Savers
    zygote.stdin.close()
    zygote.wait(timeout=30)


def wait_for(path, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.001)


def test_saves_killed_at_random_moments_keep_a_whole_checkpoint(tmp_path, savers):
    kills = scale(4, 30)
    r = random.Random(8)
    directory = tmp_path / "run"
    directory.mkdir()
    path = directory / "ckpt.safetensors"
    lucid.save(saved_state(0), path)
    latest, left, orphans = 0, set(), 0
    for trial in range(1, kills + 1):
        pid = savers.spawn(path, 1000 * trial)
        time.sleep(r.uniform(0.01, 0.15))
        os.kill(pid, signal.SIGKILL)
        assert savers.wait(pid)["signal"] == signal.SIGKILL
        # The checkpoint is the last one saved before, or one the killed process finished.
        latest = assert_checkpoint(path, {latest} | set(range(1000 * trial, 1000 * trial + 1000)))
        # A kill leaves at most the temporary of the save it cut short (earlier ones stay
        # until a save completes).
        now = set(temporaries(directory))
        assert len(now - left) <= 1 and all(n.startswith(".ckpt.safetensors.") for n in now), now
        orphans += len(now - left)
        left = now
    lucid.save(saved_state(-1), path)  # resuming training: its first save clears what the kills left
    assert os.listdir(directory) == ["ckpt.safetensors"] and assert_checkpoint(path, {-1}) == -1
    record(
        "Faults during training",
        "lucid.save in a process SIGKILLed at a random moment",
        kills,
        f"a whole checkpoint every time; the temporaries of killed saves ({orphans}) removed by the next save",
    )


def test_a_killed_saves_temporary_is_removed_but_a_running_saves_is_not(tmp_path, savers):
    directory, control = tmp_path / "run", tmp_path / "control"
    directory.mkdir(), control.mkdir()
    path = directory / "ckpt.safetensors"
    lucid.save(saved_state(1), path)

    # A save paused mid-way, holding its written temporary: another save's sweep leaves it.
    pid = savers.spawn(path, 2, pause_in=control)
    wait_for(control / "paused")
    assert len(temporaries(directory)) == 1
    lucid.save(saved_state(3), path)
    assert len(temporaries(directory)) == 1 and assert_checkpoint(path, {3}) == 3
    (control / "resume").touch()
    assert savers.wait(pid) == {"signal": None, "code": 0}
    assert assert_checkpoint(path, {2}) == 2 and temporaries(directory) == []

    # The same save killed while paused: the checkpoint before it stays, its temporary is an
    # orphan, and the next save removes it.
    (control / "paused").unlink(), (control / "resume").unlink()
    pid = savers.spawn(path, 4, pause_in=control)
    wait_for(control / "paused")
    os.kill(pid, signal.SIGKILL)
    assert savers.wait(pid)["signal"] == signal.SIGKILL
    assert len(temporaries(directory)) == 1 and assert_checkpoint(path, {2}) == 2
    lucid.save(saved_state(5), path)
    assert os.listdir(directory) == ["ckpt.safetensors"] and assert_checkpoint(path, {5}) == 5
    record(
        "Faults during training",
        "a save paused in fsync while another saves, then one killed there",
        2,
        "the running save's temporary kept and its save completes; the killed one's removed by the next save",
    )


def test_saves_racing_each_others_sweeps_all_complete(tmp_path, monkeypatch):
    import fcntl

    from lucid import serialization

    path = tmp_path / "ckpt.safetensors"
    lucid.save(saved_state(0), path)

    # Another save's sweep runs between a save creating its temporary and locking it: the
    # file goes as an orphan, and the save must make another and complete.
    real_flock, swept = fcntl.flock, []

    def flock(fd, operation):
        if operation == fcntl.LOCK_EX and not swept:
            swept.append(True)
            serialization._remove_orphans(str(tmp_path), path.name)
        return real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    lucid.save(saved_state(1), path)
    monkeypatch.undo()
    assert swept and assert_checkpoint(path, {1}) == 1 and os.listdir(tmp_path) == [path.name]

    # Threads saving to one path at once: each save completes and sweeps beside the others.
    rounds, errors = scale(10, 60), []

    def saver(first):
        try:
            for version in range(first, first + rounds):
                lucid.save(saved_state(version), path)
        except BaseException as e:  # reported on the main thread
            errors.append(e)

    threads = [threading.Thread(target=saver, args=(100 * (i + 1),)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    last = {100 * (i + 1) + rounds - 1 for i in range(3)}
    assert assert_checkpoint(path, last) in last and os.listdir(tmp_path) == [path.name]
    record(
        "Faults during training",
        "saves racing: a sweep between a save's create and lock; 3 threads saving to one path",
        1 + 3 * rounds,
        "every save completes; a whole checkpoint; no temporary file left",
    )
