"""lucid.set_num_threads / get_num_threads: the setting, its validation, the libraries that
follow it, and results that do not depend on it."""

import ctypes
import math
import os
import subprocess
import sys
import time

import ml_dtypes
import numpy as np
import pytest

import lucid
from lucid import _native


@pytest.fixture
def restore_threads():
    before = lucid.get_num_threads()
    yield
    lucid.set_num_threads(before)


def test_default_is_the_number_of_online_cores():
    assert lucid.get_num_threads() == os.sysconf("SC_NPROCESSORS_ONLN")


def test_set_and_get(restore_threads):
    for n in (1, 3, 2):
        lucid.set_num_threads(n)
        assert lucid.get_num_threads() == n
    lucid.set_num_threads(np.int64(1))
    assert lucid.get_num_threads() == 1


@pytest.mark.parametrize(
    "bad,exc",
    [
        (0, ValueError),
        (-1, ValueError),
        (1025, ValueError),
        (10**30, ValueError),
        (1.0, TypeError),
        (True, TypeError),
        ("2", TypeError),
        (None, TypeError),
    ],
)
def test_invalid_counts_are_clear_errors_that_change_nothing(bad, exc, restore_threads):
    before = lucid.get_num_threads()
    with pytest.raises(exc, match="set_num_threads"):
        lucid.set_num_threads(bad)
    assert lucid.get_num_threads() == before


def _linked_library(name):
    """The library the engine loaded: OpenBLAS from its package, or the system's libgomp
    (oneDNN's OpenMP runtime), each by the name the process already has it under."""
    if name == "openblas":
        return str(_native.libraries()[0])
    return "libgomp.so.1"


@pytest.mark.skipif(sys.platform == "darwin" or os.environ.get("LUCID_DNNL") == "0", reason="needs oneDNN")
def test_openmps_own_setting_is_left_as_it_was(restore_threads):
    # The OpenMP runtime oneDNN runs on is shared with the rest of the process (PyTorch loads
    # the same libgomp): lucid sets its count only for its own calls, so another library's
    # setting is the same before and after lucid's setting and kernels, in a forked child too.
    import lucid.nn.functional as F

    lib = ctypes.CDLL(_linked_library("gomp"))
    get, put = lib.omp_get_max_threads, lib.omp_set_num_threads
    x = lucid.tensor(np.ones((2, 3, 8, 8), np.float32))
    w = lucid.tensor(np.ones((4, 3, 3, 3), np.float32))
    theirs = get()
    try:
        for n in (1, 2, 3):
            put(5)
            lucid.set_num_threads(n)
            assert get() == 5
            assert float(F.conv2d(x, w).sum().item()) == 2 * 4 * 36 * 27
            assert get() == 5
    finally:
        put(theirs)

    if hasattr(os, "fork"):

        def child():
            before = get()
            ok = float(F.conv2d(x, w).sum().item()) == 2 * 4 * 36 * 27
            return ok and get() == before == theirs

        _in_forked_child(child, "in a oneDNN kernel")


def test_openblas_runs_on_the_calling_thread_whatever_the_setting(restore_threads):
    # OpenBLAS's own threads would spin after each product beside the engine's pool and take
    # its cores: the engine splits the products over its pool instead, each part one call.
    if sys.platform == "darwin":
        pytest.skip("Apple builds use Accelerate, which sizes its own pool")
    if lucid.metal.is_available():
        pytest.skip("the Metal check build runs Apple's Accelerate code (emulated), which sizes its own pool")
    get = ctypes.CDLL(_linked_library("openblas")).scipy_openblas_get_num_threads
    x = lucid.tensor(np.ones((256, 256)))
    for n in (1, 2, 3):
        lucid.set_num_threads(n)
        (x @ x).numpy()
        assert get() == 1


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_products_split_over_the_threads_agree_with_numpy(dtype, restore_threads):
    # Products BLAS serves (float64; float16; bfloat16 where oneDNN has no kernel for it) run
    # as parts on the engine's threads: by batch, by the rows or by the columns of the output,
    # with operands BLAS reads transposed, and with a bias.
    rng = np.random.default_rng(21)
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)

    def arr(*shape):
        return rng.standard_normal(shape).astype(np_dtype)

    def check(got, want):
        got = got.numpy().astype(np.float64)
        rtol = {"float64": 1e-12, "float16": 2e-3, "bfloat16": 1e-2}[dtype]
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())

    f64 = lambda a: a.astype(np.float64)  # noqa: E731
    batched = (arr(3, 96, 80), arr(3, 80, 70))
    tall = (arr(300, 64), arr(64, 40))
    wide = (arr(40, 64), arr(64, 300))
    stored_t = (arr(64, 300), arr(40, 64))  # read as [300, 64] @ [64, 40]
    linear = (arr(300, 64), arr(40, 64), arr(40))
    for n in (1, 2):
        lucid.set_num_threads(n)
        for a, b in (batched, tall, wide):
            check(lucid.tensor(a) @ lucid.tensor(b), f64(a) @ f64(b))
        a, b = stored_t
        check(lucid.tensor(a).mT @ lucid.tensor(b).mT, f64(a).T @ f64(b).T)
        x, w, bias = linear
        got = lucid.nn.functional.linear(lucid.tensor(x), lucid.tensor(w), lucid.tensor(bias))
        check(got, f64(x) @ f64(w).T + f64(bias))


def test_results_do_not_depend_on_the_thread_count(restore_threads):
    rng = np.random.default_rng(5)
    a = rng.standard_normal(1 << 19).astype(np.float32)  # large enough for the parallel loops
    b = rng.standard_normal(1 << 19).astype(np.float32)
    m = rng.standard_normal((300, 200)).astype(np.float32)
    results = []
    for n in (1, 2, 3):
        lucid.set_num_threads(n)
        x, y = lucid.tensor(a), lucid.tensor(b)
        results.append(
            [
                (x + y).numpy(),
                (x * 3.0).numpy(),
                x.exp().numpy(),
                x.relu().numpy(),
                x.to(lucid.bfloat16).numpy().view(np.uint16),
                x.sum().numpy(),
                (lucid.tensor(m) @ lucid.tensor(m).T).numpy(),
            ]
        )
    for got in results[1:]:
        for g, want in zip(got, results[0]):
            np.testing.assert_array_equal(g, want)
    first = results[0]
    np.testing.assert_array_equal(first[0], a + b)
    np.testing.assert_array_equal(first[1], a * np.float32(3))
    np.testing.assert_allclose(first[2], np.exp(a), rtol=1e-6)
    np.testing.assert_array_equal(first[4], a.astype(ml_dtypes.bfloat16).view(np.uint16))
    np.testing.assert_allclose(first[6], m.astype(np.float64) @ m.T, rtol=1e-4, atol=1e-4)


def _in_forked_child(child, what):
    """Runs `child()` in a forked child, which exits 0 when it returns True; fails the test
    when it returns anything else, raises, or has not finished within a minute (`what`)."""
    pid = os.fork()
    if pid == 0:  # the child: any failure is its exit status
        try:
            os._exit(0 if child() is True else 3)
        except BaseException:
            os._exit(4)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child hung {what}")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_runs_parallel_host_loops():
    # The host loops share oneDNN's OpenMP pool, whose threads stay in the parent on fork(); a
    # child must still run them (on another pool) instead of waiting for those threads.
    x = lucid.tensor(np.arange(1 << 21, dtype=np.float32) % 7)
    x.to(lucid.bfloat16)  # a parallel loop in the parent first

    def child():
        return float(x.to(lucid.bfloat16).float().sum().item()) == float((np.arange(1 << 21) % 7).sum())

    _in_forked_child(child, "in a parallel host loop")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_runs_onednn_kernels_its_parent_ran(restore_threads):
    # oneDNN's primitives are built for the threads of the OpenMP pool, which stays in the
    # parent: a child runs them on one thread, with primitives of its own, on any of its
    # threads and whatever set_num_threads says there.
    import threading

    import lucid.nn.functional as F

    rng = np.random.default_rng(5)
    x = lucid.tensor(rng.standard_normal((8, 3, 20, 20)).astype(np.float32), requires_grad=True)
    w = lucid.tensor(rng.standard_normal((16, 3, 3, 3)).astype(np.float32), requires_grad=True)
    m = lucid.tensor(rng.standard_normal((64, 256)).astype(np.float32))
    g = lucid.tensor(rng.standard_normal((1 << 15,)).astype(np.float32))

    def run(x, w):
        y = F.conv2d(x, w, padding=1)
        y.sum().backward()
        with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
            p = m @ m.T
        out = [y, x.grad, w.grad, p, F.gelu(g), F.softmax(m, dim=1)]
        x.grad = w.grad = None
        return [np.asarray(t.detach().float()) for t in out]

    parent = run(x, w)  # every primitive built and run here first

    def child():
        # (The weight gradient sums over the batch in an order that follows the thread count.)
        same = all(np.allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max()) for a, b in zip(run(x, w), parent))
        # A new thread, which OpenMP has not been told about, with a shape not built yet.
        seen = []
        worker = threading.Thread(target=lambda: seen.append(F.conv2d(x[:5, :, :17], w).shape))
        worker.start()
        worker.join()
        lucid.set_num_threads(2)
        wide = F.conv2d(x[:3], w, padding=2)
        return same and seen == [(5, 16, 15, 18)] and wide.shape == (3, 16, 22, 22)

    _in_forked_child(child, "in a oneDNN kernel its parent had run")


def test_large_sums_scans_and_fills_do_not_depend_on_the_thread_count(restore_threads):
    # A sum adds its blocks in parallel (then in order) from 128K elements; past a million the
    # scan for NaN and infinities that keeps oneDNN away from non-finite inputs runs in parallel
    # ranges, and a sum's gradient is filled in parallel: the same bits on one thread or two.
    import lucid.nn.functional as F

    rng = np.random.default_rng(11)
    n = (1 << 20) + 4099  # not a whole number of 4096-value blocks
    a = rng.standard_normal(n).astype(np.float32)
    b = a.copy()
    b[-3], b[n // 2 + 5] = np.inf, np.nan  # in the second range only
    rows = rng.standard_normal((60000, 37)).astype(np.float32)  # many short runs
    c = rng.standard_normal((1100, 1024)).astype(np.float32)
    c[700, 7] = np.nan

    def run():
        x = lucid.tensor(a, requires_grad=True)
        total = x.sum()
        total.backward()
        xb = lucid.tensor(b)
        return [
            np.float32(total.item()),
            np.float32(lucid.tensor(a[: 300_000 + 7]).sum().item()),  # parallel below the streaming grain
            x.grad.numpy(),
            lucid.tensor(rows).sum(dim=1).numpy(),
            F.gelu(xb).numpy(),
            xb.exp().numpy(),
            F.softmax(lucid.tensor(c), dim=-1).numpy(),
        ]

    lucid.set_num_threads(1)
    one = run()
    lucid.set_num_threads(2)
    two = run()
    for p, q in zip(one, two):
        np.testing.assert_array_equal(p, q)
    total, part, grad, row_sums, gelu, exp, soft = two
    for got, values in ((total, a), (part, a[: 300_000 + 7])):
        assert abs(float(got) - values.sum(dtype=np.float64)) <= 1e-6 * np.abs(values).sum(dtype=np.float64)
    np.testing.assert_array_equal(grad, np.ones(n, np.float32))
    np.testing.assert_allclose(row_sums, rows.sum(axis=1, dtype=np.float64), rtol=1e-5, atol=1e-5)
    # The host loops' values at non-finite inputs (oneDNN's gelu turns +inf into NaN, its exp
    # NaN into inf), and the finite ones as elsewhere.
    assert gelu[-3] == np.inf and np.isnan(gelu[n // 2 + 5]) and exp[-3] == np.inf and np.isnan(exp[n // 2 + 5])
    finite = np.isfinite(b)
    want = 0.5 * b[finite].astype(np.float64) * (1 + np.vectorize(math.erf)(b[finite] / math.sqrt(2)))
    np.testing.assert_allclose(gelu[finite], want, rtol=1e-5, atol=1e-6)
    assert np.isnan(soft[700]).all() and not np.isnan(np.delete(soft, 700, axis=0)).any()
    e = np.exp(c[:5] - c[:5].max(axis=1, keepdims=True))
    np.testing.assert_allclose(soft[:5], e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.environ.get("LUCID_DNNL") == "0", reason="needs oneDNN")
def test_onednn_follows_the_setting_on_every_thread_and_after_its_kernels_were_built(restore_threads):
    # OpenMP's thread count is a setting of each thread, and oneDNN fixes a kernel's threads
    # when it builds it: the engine makes its count the calling thread's for each call, and
    # rebuilds what was built for another count (one thread while another process keeps the
    # cores busy: the test suite may be running beside others). A thread that starts a
    # parallel region gets a pool of its own, whose threads show in /proc.
    import threading

    import lucid.nn.functional as F
    from lucid._C import threads_contended as solo

    def threads_of_process():  # by id: a thread of an earlier test may end meanwhile
        return set(os.listdir("/proc/self/task"))

    rng = np.random.default_rng(2)
    x = lucid.tensor(rng.standard_normal((4, 8, 16, 16)).astype(np.float32))
    w = lucid.tensor(rng.standard_normal((8, 8, 3, 3)).astype(np.float32))
    before = F.conv2d(x, w).numpy()  # built for the default count
    for n in (1, 3):
        lucid.set_num_threads(n)
        seen = []

        def work():
            start = threads_of_process()
            got = F.conv2d(x, w).numpy()
            seen.append((got, len(threads_of_process() - start), solo()))

        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
        ((got, pool, alone),) = seen
        assert pool == (0 if alone else n - 1)
        np.testing.assert_allclose(got, before, rtol=1e-5, atol=1e-5)


def test_large_strided_copies_do_not_depend_on_the_thread_count(restore_threads):
    # A large copy between storages runs in parallel parts: of the outermost dimension, or of
    # the one strided run it merges into.
    rng = np.random.default_rng(12)
    a = rng.standard_normal((6, 700, 257)).astype(np.float32)
    b = rng.standard_normal(1 << 22).astype(np.float32)
    cases = [
        (lambda t: t.transpose(0, 2), lambda x: x.transpose(2, 1, 0)),
        (lambda t: t[:, ::3, 5:], lambda x: x[:, ::3, 5:]),
        (lambda t: t.permute(1, 2, 0), lambda x: x.transpose(1, 2, 0)),
    ]
    for n in (1, 2):
        lucid.set_num_threads(n)
        x, y = lucid.tensor(a), lucid.tensor(b)
        for view, want in cases:
            np.testing.assert_array_equal(view(x).contiguous().numpy(), want(a))
        np.testing.assert_array_equal(y[::2].contiguous().numpy(), b[::2])  # one strided run
        np.testing.assert_array_equal(
            x[:1, :1, :1].expand(6, 700, 257).contiguous().numpy(), np.broadcast_to(a[:1, :1, :1], a.shape)
        )


def _runtime_spin(env):
    """The spin count the GNU OpenMP runtime oneDNN loaded took, in a fresh process that imports
    lucid with environment `env` (libgomp reads it once, when it loads)."""
    code = "import ctypes, os, lucid; ctypes.CDLL('libgomp.so.1', mode=os.RTLD_NOLOAD | os.RTLD_NOW).omp_display_env(1)"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    line = next(x for x in (run.stdout + run.stderr).splitlines() if "GOMP_SPINCOUNT" in x)
    return line.split("=", 1)[1].strip().strip("'")


@pytest.mark.skipif(sys.platform != "linux", reason="oneDNN's GNU OpenMP pool is Linux's")
def test_import_sets_a_short_openmp_spin_unless_the_user_chose_one():
    # Two processes sharing the cores otherwise wait on each other's spinning OpenMP threads
    # at every barrier (bench/suite.py measures it); a setting of the user's wins.
    base = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    assert _runtime_spin(base) == "2000"
    assert _runtime_spin({**base, "GOMP_SPINCOUNT": "50"}) == "50"
    assert _runtime_spin({**base, "OMP_WAIT_POLICY": "active"}) not in ("2000", "")
