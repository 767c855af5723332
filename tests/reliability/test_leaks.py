"""Long runs must not leak: iterations of nested autocast scopes, small ops, a training step
under GradScaler (with a seeded inf/NaN step now and then, which is skipped) and a step of
errors raised mid-scope, in a fresh child process. After a warm-up the engine's counters
(live tensors, live guards, cached autocast casts, bytes allocated on each device) are taken
as the baseline; they must be back to it exactly at every sample and at the end, and the
child's resident memory may grow by at most RSS_BOUND_MIB.
"""

import json
import os
import subprocess
import sys
import threading
import warnings

import numpy as np

from _support import record, scale

ITERATIONS = scale(2_000, 100_000)
WARMUP = 200
SAMPLES = 10
RSS_BOUND_MIB = 64
HERE = os.path.dirname(os.path.abspath(__file__))


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _counters():
    import gc

    import lucid
    from lucid import _engine
    gc.collect()
    return {"live tensors": _engine.live_tensors(), "live guards": _engine.autocast_live_guards(),
            "cached casts": _engine.autocast_cached_casts(),
            "cpu bytes": lucid.memory_allocated("cpu"), "metal bytes": lucid.memory_allocated("metal")}


def _training_loop(iterations):
    """Runs in the child; prints one JSON object with the samples and the RSS figures."""
    warnings.simplefilter("ignore")
    import lucid
    import lucid.nn as nn
    import lucid.nn.functional as F
    from lucid.amp import GradScaler, autocast

    lucid.manual_seed(0)
    rng = np.random.default_rng(0)
    runs = {}
    for device in ("cpu", "metal"):
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(device)
        opt = lucid.optim.Adam(model.parameters(), lr=1e-3) if device == "cpu" else \
            lucid.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
        x = lucid.tensor(rng.standard_normal((8, 8)).astype(np.float32), device=device)
        y = lucid.tensor(rng.integers(0, 4, 8), device=device)
        runs[device] = (model, opt, GradScaler(device, init_scale=2.0 ** 10, growth_interval=50), x, y)
    low = {"cpu": lucid.bfloat16, "metal": lucid.float16}
    skipped = [0]

    def iteration(i):
        device = ("cpu", "metal")[i % 2]
        model, opt, scaler, x, y = runs[device]
        # small ops inside nested scopes on both devices
        with autocast("metal"), autocast("cpu", dtype=lucid.bfloat16):
            a = lucid.randn(4, 6, device=device)
            b = (a @ a.T).relu().sum(dim=1)
            c = a[1:, ::2].reshape(-1).exp().mean() + b.amax()
            with autocast(device, enabled=False):
                d = (a * 2 - 1).softmax(dim=-1)[0]
            c.item(), d.numpy()
        # a training step under autocast and GradScaler; now and then an inf/NaN loss
        with autocast(device, dtype=low[device]):
            loss = F.cross_entropy(model(x), y)
        if i % 97 == 0:
            loss = loss * float("inf" if i % 2 else "nan")
        scale_before = scaler.get_scale()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        skipped[0] += scaler.get_scale() < scale_before
        # errors raised mid-scope leave nothing behind
        with autocast(device):
            try:
                a @ lucid.ones(5, 5, device=device)
            except ValueError:
                pass
            try:
                a.reshape(7)
            except (ValueError, RuntimeError):
                pass

    for i in range(WARMUP):
        iteration(i)
    base, rss_base = _counters(), _rss_bytes()
    samples = []
    every = max(iterations // SAMPLES, 1)
    for i in range(iterations):
        iteration(WARMUP + i)
        if (i + 1) % every == 0:
            samples.append({"iteration": i + 1, **_counters(), "rss": _rss_bytes()})
    runs.clear()
    del model, opt, x, y  # (the last device's, still bound by the set-up loop)
    print(json.dumps({"base": base, "rss_base": rss_base, "samples": samples, "skipped": skipped[0],
                      "after_release": _counters()}))


def test_long_training_run_leaks_no_tensors_guards_bytes_or_resident_memory():
    code = (f"import sys; sys.path.insert(0, {HERE!r}); import test_leaks; "
            f"test_leaks._training_loop({ITERATIONS})")
    env = {k: v for k, v in os.environ.items() if k != "LUCID_METAL_FALLBACK"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800, env=env)
    assert run.returncode == 0, f"the child failed ({run.returncode}):\n{run.stderr[-4000:]}"
    out = json.loads(run.stdout.strip().splitlines()[-1])
    base = out["base"]
    assert base["live guards"] == 0 and base["cached casts"] == 0, base
    for s in out["samples"]:
        for k, v in base.items():
            assert s[k] == v, f"after {s['iteration']} iterations {k} is {s[k]}, {v} after the warm-up"
    growth = (out["samples"][-1]["rss"] - out["rss_base"]) / 2 ** 20
    assert growth <= RSS_BOUND_MIB, f"resident memory grew {growth:.1f} MiB over {ITERATIONS} iterations"
    # The models, optimizers and data of the run released: only what the warm-up made
    # before them remains, which is nothing on either device.
    after = out["after_release"]
    assert after["live tensors"] == 0 and after["cpu bytes"] == 0 and after["metal bytes"] == 0, after
    assert out["skipped"] >= ITERATIONS // 97 // 2, out["skipped"]  # the inf/NaN steps were skipped
    record("Leaks", f"{ITERATIONS:,} iterations after a {WARMUP}-iteration warm-up, alternating devices: "
           "nested scopes on both devices with small ops (matmul, indexing, reductions, softmax), a training "
           "step of an MLP under autocast and GradScaler (Adam on cpu, SGD with momentum on metal; every 97th "
           "loss inf or NaN), shape errors raised inside a scope", ITERATIONS,
           f"live tensors, guards, cached casts and bytes on each device equal to the warm-up's at all "
           f"{len(out['samples'])} samples; resident memory grew {growth:.1f} MiB (bound {RSS_BOUND_MIB} MiB); "
           f"all zero once the run was released; {out['skipped']} steps skipped")


def test_tensors_made_and_dropped_on_other_threads_leak_nothing():
    import lucid
    from lucid.amp import autocast
    rounds = scale(200, 2000)
    shared = lucid.randn(16, 16)
    before = _counters()
    handoff, errors = [], []

    def worker(seed):
        try:
            r = np.random.default_rng(seed)
            for _ in range(rounds // 4):
                with autocast("cpu", dtype=lucid.bfloat16):
                    t = shared @ lucid.tensor(r.standard_normal((16, 4)).astype(np.float32))
                    handoff.append(t)  # made here, dropped by another thread
                    try:
                        t @ shared
                    except ValueError:
                        pass
                while len(handoff) > 8:
                    try:
                        handoff.pop(0)
                    except IndexError:  # (another thread took the last one)
                        break
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors[0]
    handoff.clear()
    assert _counters() == before
    record("Leaks", "tensors made under autocast on 4 threads and released on others, with shape errors "
           "raised mid-scope", rounds, "live tensors, guards, cached casts and bytes back to where they were")
