"""Fuzzing the Python API: random programs of creation, elementwise, reduction, shape, indexing,
matmul, conv, attention, loss, autograd and autocast calls, with shapes that include 0-d and
empty ones, every dtype, both devices and bad arguments (negative and huge sizes, wrong types,
NaN and inf, dimensions and indices out of range, mismatched devices).

Each program runs in a child process forked from a server that has lucid imported. The child
may only raise the documented exceptions (ValueError, TypeError, IndexError, RuntimeError);
a signal, an abort, a hang or another exception fails the test with the program that did it,
which tests/reliability/_api_programs.py runs again by hand. Results are compared with numpy
there (see Interpreter).
"""

import multiprocessing

from hypothesis import HealthCheck, given, settings, strategies as st

from _api_programs import Interpreter, run_in_child
from _support import FULL, record, scale

PROGRAMS = scale(60, 600)
CHILD_TIMEOUT = 120  # seconds; a child still running then is reported as hung

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(["lucid", "numpy", "ml_dtypes", "_api_programs"])


def _mostly(good, bad):
    """`good` nine times in ten, `bad` otherwise (hypothesis shrinks towards `good`)."""
    return st.one_of(*[good] * 9, bad)


JUNK = st.sampled_from(["0", 1.5, float("nan"), None, [], 2**64, -(2**63) - 1, True])
SIZE = _mostly(st.sampled_from([1, 2, 3, 0, 4, 5]), st.sampled_from([-1, -3, 2**40, 2**63 - 1, 2**63, 2.5, "3"]))
SHAPE = st.lists(SIZE, max_size=4)
GOOD_SHAPE = st.lists(st.integers(0, 4), max_size=4)
DIM = _mostly(st.integers(-4, 4), st.one_of(st.sampled_from([-(2**63), 2**63 - 1, 64]), JUNK))
DTYPE = _mostly(
    st.sampled_from(["float32", "bfloat16", "float16", "int64", "int32", "bool"]),
    st.sampled_from(["float64", "complex64", "", None, 3]),
)
FLOAT_DTYPE = st.sampled_from(["float32", "bfloat16", "float16"])
DEVICE = _mostly(st.sampled_from(["cpu", "metal"]), st.sampled_from(["cuda", "gpu", "", "metal:1", None, 0]))
FLOAT = st.one_of(
    st.floats(-10, 10, width=32),
    st.sampled_from(
        [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e38, 3.5e38, 1e-45, 65504.0, 70000.0, 1e300]
    ),
)
SCALAR = st.one_of(FLOAT, st.integers(-5, 5), st.booleans(), st.sampled_from([2**70, -(2**63), 2**63 - 1]))
INDEX = st.integers(0, 40)


def _tensor_step():
    def build(shape, data):
        n = 1
        for s in shape:
            n *= s
        return st.tuples(st.just("tensor"), st.just(shape), st.lists(FLOAT, min_size=n, max_size=n), DTYPE, DEVICE)

    return GOOD_SHAPE.flatmap(lambda shape: build(shape, None))


def _matmul_step():
    def build(m, k, n, batch, vec_a, vec_b, k_off):
        a = batch + ([k] if vec_a else [m, k])
        b = [k + k_off] if vec_b else batch[-1:] + [k + k_off, n]
        return a, b

    shapes = st.builds(
        build,
        st.integers(0, 5),
        st.integers(0, 6),
        st.integers(0, 5),
        st.lists(st.integers(1, 3), max_size=2),
        st.booleans(),
        st.booleans(),
        _mostly(st.just(0), st.integers(1, 2)),
    )
    return shapes.flatmap(
        lambda ab: st.tuples(
            st.just("matmul"),
            st.just(ab[0]),
            st.just(ab[1]),
            FLOAT_DTYPE,
            st.sampled_from(["cpu", "metal"]),
            _mostly(st.sampled_from(["cpu", "metal"]), st.just("cuda")),
            st.integers(0, 1000),
        )
    )


def _conv_step():
    def build(n, cg, groups, og, h, w, kh, kw, stride, padding, dilation, dtype, seed):
        return (
            "conv",
            [n, cg * max(groups, 1), h, w],
            [og * max(groups, 1), cg, kh, kw],
            stride,
            padding,
            dilation,
            groups,
            dtype,
            seed,
        )

    return st.builds(
        build,
        st.integers(0, 2),
        st.integers(1, 2),
        _mostly(st.integers(1, 2), st.sampled_from([0, -1, 3])),
        st.integers(1, 2),
        st.integers(0, 6),
        st.integers(0, 6),
        st.integers(1, 3),
        st.integers(1, 3),
        _mostly(st.integers(1, 2), st.sampled_from([0, -1])),
        _mostly(st.integers(0, 2), st.just(-1)),
        _mostly(st.integers(1, 2), st.just(0)),
        FLOAT_DTYPE,
        st.integers(0, 1000),
    )


STEP = st.one_of(
    _tensor_step(),
    st.tuples(st.just("full"), SHAPE, SCALAR, DTYPE, DEVICE),
    st.tuples(st.just("zeros"), SHAPE, st.booleans(), DTYPE, DEVICE),
    st.tuples(
        st.just("arange"),
        st.integers(-20, 20),
        _mostly(st.integers(-20, 40), st.sampled_from([1e30, float("inf"), float("nan"), 2**40])),
        _mostly(st.sampled_from([1, 2, 3, -1, 0.5]), st.sampled_from([0, float("nan"), -0.0])),
        DTYPE,
        DEVICE,
    ),
    st.tuples(st.just("randn"), SHAPE, st.booleans(), DTYPE, DEVICE),
    st.tuples(st.just("unary"), st.sampled_from(sorted(Interpreter.UNARY)), INDEX),
    st.tuples(st.just("binary"), st.sampled_from(sorted(Interpreter.BINARY)), INDEX, INDEX),
    st.tuples(st.just("scalar"), st.sampled_from(sorted(Interpreter.BINARY)), INDEX, SCALAR, st.booleans()),
    st.tuples(
        st.just("reduce"),
        st.sampled_from(["sum", "mean", "amax", "amin", "argmax", "var", "std", "logsumexp"]),
        INDEX,
        st.one_of(st.none(), DIM),
        st.booleans(),
    ),
    st.tuples(st.just("softmax"), INDEX, DIM, st.booleans()),
    st.tuples(
        st.just("reshape"), INDEX, st.lists(_mostly(st.integers(-1, 6), st.sampled_from([-2, 2**62, "2"])), max_size=4)
    ),
    st.tuples(st.just("transpose"), INDEX, DIM, DIM),
    st.tuples(st.just("permute"), INDEX, st.lists(st.integers(-4, 4), max_size=4)),
    st.tuples(st.just("squeeze"), INDEX, DIM, st.booleans()),
    st.tuples(
        st.just("expand"), INDEX, st.lists(_mostly(st.integers(-1, 4), st.sampled_from([-2, 2**40])), max_size=5)
    ),
    st.tuples(st.just("narrow"), INDEX, DIM, st.integers(-4, 4), _mostly(st.integers(0, 3), st.just(-1))),
    st.tuples(st.just("cat"), INDEX, INDEX, DIM, st.booleans()),
    st.tuples(
        st.just("index"),
        INDEX,
        st.lists(
            st.one_of(
                st.tuples(st.just("int"), _mostly(st.integers(-4, 4), st.just(2**63))),
                st.tuples(
                    st.just("slice"),
                    st.tuples(
                        st.one_of(st.none(), st.integers(-5, 5)),
                        st.one_of(st.none(), st.integers(-5, 5)),
                        st.one_of(st.none(), st.sampled_from([1, 2, 3, -1, 0])),
                    ),
                ),
                st.tuples(st.just("none"), st.none()),
                st.tuples(st.just("ellipsis"), st.none()),
                st.tuples(st.just("ints"), st.lists(st.integers(-4, 4), max_size=4)),
                st.tuples(st.just("mask"), st.lists(st.booleans(), max_size=4)),
            ),
            max_size=3,
        ),
    ),
    st.tuples(st.just("item"), INDEX, st.sampled_from(["item", "tolist", "bool"])),
    st.tuples(st.just("to"), INDEX, DTYPE, DEVICE),
    _matmul_step(),
    _conv_step(),
    st.tuples(
        st.just("attention"),
        st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(0, 5), st.integers(1, 8)),
        st.integers(0, 5),
        st.booleans(),
        st.booleans(),
        FLOAT_DTYPE,
        st.integers(0, 1000),
    ),
    st.tuples(
        st.just("loss"),
        st.integers(0, 4),
        st.integers(0, 4),
        _mostly(st.just(0), st.sampled_from([1, -1, 5])),
        st.integers(0, 1000),
    ),
    st.tuples(st.just("grad"), INDEX, st.sampled_from(sorted(Interpreter.GRAD)), st.sampled_from(["sum", "mean"])),
    st.tuples(st.just("backward_misuse"), INDEX, st.sampled_from(["twice", "nonscalar", "wrong_grad"])),
    st.tuples(
        st.just("enter"),
        DEVICE,
        st.booleans(),
        _mostly(
            st.sampled_from(["bfloat16", "float16", "float32", None]), st.sampled_from(["int32", "float64", "bool"])
        ),
    ),
    st.tuples(st.just("exit"), st.integers(0, 3)),
)
PROGRAM = st.lists(STEP, min_size=1, max_size=scale(12, 24))


class Tally:
    programs = steps = checked = refused = 0


def run_program(program):
    """Runs one program in a fresh child; returns (checked, refused) or fails with the program."""
    receive, send = _context.Pipe(duplex=False)
    child = _context.Process(target=run_in_child, args=(program, send), daemon=True)
    child.start()
    send.close()
    report = receive.recv() if receive.poll(CHILD_TIMEOUT) else None
    child.join(CHILD_TIMEOUT if report else 5)
    if child.is_alive():
        child.kill()
        child.join()
        raise AssertionError(f"the child hung running {program!r}")
    assert child.exitcode == 0 and report is not None, (
        f"the child died (exit code {child.exitcode}; negative is a signal) running\n  {program!r}"
    )
    assert report[0] == "ok", f"{report[0]}: {report[1]}\nrunning\n  {program!r}"
    return report[1], report[2]


@settings(
    max_examples=PROGRAMS,
    deadline=None,
    derandomize=not FULL,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(PROGRAM)
def _fuzz(program):
    checked, refused = run_program(program)
    Tally.programs += 1
    Tally.steps += len(program)
    Tally.checked += checked
    Tally.refused += refused


def test_random_programs_raise_only_documented_errors_and_agree_with_numpy():
    _fuzz()
    assert Tally.programs >= PROGRAMS and Tally.checked > Tally.programs  # the programs did real work
    record(
        "Python API fuzz",
        f"random programs of up to {scale(12, 24)} calls over creation, elementwise, "
        "reduction, shape, indexing, matmul, conv, attention, loss, autograd and autocast, with 0-d, empty and "
        f"bad arguments ({Tally.steps} calls, {Tally.refused} refused with a documented error, "
        f"{Tally.checked} results compared with numpy)",
        Tally.programs,
        "each in a child process: no crash, hang or undocumented exception; numpy agreed; autocast state "
        "matched the open scopes after every call",
    )
