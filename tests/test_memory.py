import os

import pytest

import lucid


def test_allocation_is_counted_and_released():
    base = lucid.memory_allocated("cpu")
    x = lucid.zeros(250, 1000)
    assert lucid.memory_allocated("cpu") - base == 250 * 1000 * 4
    assert lucid.memory_allocated() >= lucid.memory_allocated("cpu")
    del x
    assert lucid.memory_allocated("cpu") == base


def test_peak_tracks_the_largest_moment_and_resets():
    lucid.reset_peak_memory_stats()
    base = lucid.memory_allocated("cpu")
    x = lucid.zeros(1000, 100, dtype=lucid.float16)
    del x
    assert lucid.max_memory_allocated("cpu") - base == 1000 * 100 * 2
    lucid.reset_peak_memory_stats("cpu")
    assert lucid.max_memory_allocated("cpu") == lucid.memory_allocated("cpu")


def test_counts_stay_exact_when_threads_allocate_at_once():
    # The counts are atomic, not locked: threads making and freeing tensors together must
    # leave the count where it began, and the peak must cover what was live at once.
    import threading

    lucid.reset_peak_memory_stats("cpu")
    base = lucid.memory_allocated("cpu")
    held = [lucid.zeros(64, 1024) for _ in range(4)]  # 1 MiB live throughout
    start = threading.Barrier(4)

    def churn():
        start.wait()
        for i in range(300):
            t = lucid.ones(1000 + i)
            del t

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert lucid.memory_allocated("cpu") == base + 4 * 64 * 1024 * 4
    assert lucid.max_memory_allocated("cpu") >= base + 4 * 64 * 1024 * 4 + 1000 * 4
    del held
    assert lucid.memory_allocated("cpu") == base


def test_devices_are_counted_apart():
    lucid.reset_peak_memory_stats()
    cpu = lucid.memory_allocated("cpu")
    y = lucid.ones(64, device="metal")
    assert lucid.memory_allocated("cpu") == cpu
    assert lucid.memory_allocated("metal") >= 64 * 4
    del y


def test_bad_device_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown device"):
        lucid.memory_allocated("gpu")
    with pytest.raises(ValueError, match="no CUDA device"):
        lucid.memory_allocated("cuda")


def test_freed_buffers_are_reused_and_the_cache_can_be_emptied():
    base = lucid.memory_allocated("cpu")
    a = lucid.full((1000, 1000), 3.0)
    del a
    assert lucid.memory_allocated("cpu") == base  # cached bytes are not allocated bytes
    b = lucid.full((1000, 1000), 5.0)  # served from the cache: every value is rewritten
    assert float(b.numpy().min()) == 5.0 and float(b.numpy().max()) == 5.0
    del b
    assert lucid.empty_cache() >= 1000 * 1000 * 4
    assert lucid.empty_cache() == 0


def test_cache_off_by_environment():
    import subprocess
    import sys

    code = "import lucid; x = lucid.ones(1000, 1000); del x; assert lucid.empty_cache() == 0; print('ok')"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**__import__("os").environ, "LUCID_CACHE_LIMIT_MB": "0"},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_autocast_graph_keeps_no_weight_copies():
    # Under autocast a linear layer's graph keeps its bf16 input (for dW) but not the bf16
    # copy of the weight (re-cast from the parameter in backward).
    import numpy as np

    rng = np.random.default_rng(4)
    layer = lucid.nn.Linear(256, 128, bias=False)
    x_np = rng.standard_normal((64, 256)).astype(np.float32)
    x = lucid.tensor(x_np)
    base = lucid.memory_allocated("cpu")
    with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
        y = layer(x)
    assert lucid.memory_allocated("cpu") - base == 64 * 256 * 2 + 64 * 128 * 2  # the input's cast and y
    g = rng.standard_normal((64, 128)).astype(np.float32)
    (y.float() * lucid.tensor(g)).sum().backward()
    import ml_dtypes

    xb = x_np.astype(ml_dtypes.bfloat16).astype(np.float64)
    gb = g.astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(layer.weight.grad.numpy(), gb.T @ xb, rtol=2e-2, atol=5e-2)
    # With the input also requiring grad, dX reads the weight cast again in backward.
    xl = lucid.tensor(x_np, requires_grad=True)
    with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
        y2 = layer(xl)
    (y2.float() * lucid.tensor(g)).sum().backward()
    wb = layer.weight.numpy().astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(xl.grad.numpy(), gb @ wb, rtol=2e-2, atol=5e-2)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_during_a_release_flush_still_releases():
    from lucid import _C

    _C._calls._flush_lock.acquire()  # as if another thread were flushing when the fork happens
    try:
        pid = os.fork()
        if pid == 0:  # the child: its deferred releases must still reach the engine
            code = 1
            try:
                before = lucid._memory.live_tensors()
                held = [lucid.ones(2) for _ in range(3)]
                code = 0 if lucid._memory.live_tensors() == before + 3 else 2
                del held
                code = code or (0 if lucid._memory.live_tensors() == before else 3)
            finally:
                os._exit(code)
    finally:
        _C._calls._flush_lock.release()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
