"""lucid.load on bad files: every truncation and seeded byte flips of real checkpoints, and
hostile headers (lengths, offsets, shapes and dtypes that lie, JSON that is not an object,
nested too deeply or names a key twice). Each must raise ValueError (an OSError for a path
that cannot be read), allocate nothing the file does not hold, and make no tensor at all.
tests/test_serialization.py covers the ordinary round trips and a few bad files."""

import contextlib
import gc
import io
import json
import random
import resource
import tracemalloc
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from safetensors import deserialize
from safetensors.numpy import save as reference_save

import lucid
from _support import record, scale

MiB = 1 << 20


# ---- checkpoints ------------------------------------------------------------------------------

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.int64, np.int32, np.bool_]


def random_array(r):
    dtype = DTYPES[r.randrange(len(DTYPES))]
    shape = tuple(r.randrange(0, 4) for _ in range(r.randrange(0, 3)))
    values = np.random.default_rng(r.randrange(2**32)).standard_normal(shape) * 5
    return (values > 0) if dtype is np.bool_ else values.astype(dtype)


def random_state(r):
    """A nested checkpoint like a training loop saves: tensors, numbers, strings, None,
    tuples and lists, dicts with str and int keys."""

    def value(d):
        kind = r.randrange(9 if d < 3 else 6)
        if kind <= 1:
            return lucid.tensor(random_array(r))
        if kind == 2:
            return r.choice([r.randrange(-(10**12), 10**12), r.random(), float("nan"), float("-inf")])
        if kind == 3:
            return r.choice(["", "run-ü", None, True, False])
        if kind == 4:
            return 2**62 + r.randrange(100)
        if kind == 5:
            return r.random() * 1e300
        if kind == 6:
            return tuple(value(d + 1) for _ in range(r.randrange(3)))
        if kind == 7:
            return [value(d + 1) for _ in range(r.randrange(3))]
        return {(k if r.random() < 0.5 else f"k{k}"): value(d + 1) for k in range(r.randrange(4))}

    return {
        "model": {f"{i}.weight": lucid.tensor(random_array(r)) for i in range(r.randrange(1, 4))},
        "step": r.randrange(10**6),
        "extra": value(0),
    }


def assert_same(got, want, where="root"):
    """Equal values of equal types, tensors bit for bit."""
    assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, lucid.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape, where
        assert got.numpy().tobytes() == want.numpy().tobytes(), where
    elif isinstance(want, dict):
        assert list(got) == list(want), where
        for k in want:
            assert_same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}.{i}")
    elif isinstance(want, float) and want != want:
        assert got != got, where
    else:
        assert got == want, where


def small_checkpoint():
    """A saved file of a few hundred bytes, with tensors of several dtypes and structure."""
    r = random.Random(7)
    state = {
        "model": {
            "0.weight": lucid.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)),
            "0.bias": lucid.tensor(np.array([0.5, -1.5], ml_dtypes.bfloat16)),
            "mask": lucid.tensor(np.array([True, False, True])),
        },
        "optim": {
            "state": {0: {"step": 3, "exp_avg": lucid.tensor(random_array(r).astype(np.float16))}},
            "param_groups": [{"lr": 0.01, "betas": (0.9, 0.999), "params": [0]}],
        },
        "epoch": 2,
        "tag": "run",
    }
    buf = io.BytesIO()
    lucid.save(state, buf)
    return state, buf.getvalue()


def reference_bytes(data):
    """name -> the bytes of that tensor, as the safetensors package itself reads the file."""
    return {name: bytes(view["data"]) for name, view in deserialize(data)}


def header_of(data):
    n = int.from_bytes(data[:8], "little")
    return n, json.loads(data[8 : 8 + n])


def frame(header, body=b""):
    """A safetensors file from a header (a dict, or raw bytes) and its data."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + body


# ---- checks -----------------------------------------------------------------------------------


@contextlib.contextmanager
def no_tensor_made():
    """The block makes no engine tensor and leaves no buffer behind, counted while the
    exception it raised (and the frames that traceback holds) is still alive."""
    gc.disable()  # (a collection inside would free earlier garbage and skew the counts)
    try:
        tensors, allocated = lucid._memory.live_tensors(), lucid.memory_allocated()
        yield
        assert lucid._memory.live_tensors() == tensors, "a failed load left engine tensors behind"
        assert lucid.memory_allocated() == allocated, "a failed load left tensor memory behind"
    finally:
        gc.enable()


def rejected(data, match=None):
    """lucid.load(data) raises a ValueError from lucid.load (naming the problem when `match`
    is given) and makes no tensor. The stream may declare any size (max_bytes has a test of
    its own), so that the checks of the data itself are what is tried."""
    with no_tensor_made(), pytest.raises(ValueError) as info:
        lucid.load(io.BytesIO(data), max_bytes=1 << 80)
    message = str(info.value)
    assert message.startswith("lucid.load: "), message
    if match is not None:
        assert match in message, message
    return message


# ---- round trips ------------------------------------------------------------------------------


def test_random_checkpoints_round_trip_through_paths_and_file_objects(tmp_path):
    n = scale(20, 200)
    r = random.Random(0)
    for i in range(n):
        state = random_state(r)
        path = tmp_path / "ckpt.safetensors"
        lucid.save(state, path)
        assert_same(lucid.load(path), state)
        buf = io.BytesIO()
        lucid.save(state, buf)
        assert buf.getvalue() == path.read_bytes()
        buf.seek(0)
        assert_same(lucid.load(buf), state)
    record(
        "Bad files",
        "random nested checkpoints (6 dtypes, int keys, tuples, NaN) saved and loaded back",
        n,
        "bit-exact round trip through a path and a file object",
    )


# ---- truncation and byte flips ----------------------------------------------------------------


def test_every_truncation_is_a_value_error_and_makes_no_tensor():
    state, data = small_checkpoint()
    n_header, _ = header_of(data)
    offsets = range(len(data))
    if scale(True, False):
        # Every offset in and around the 8-byte length and the header's edges, and a sample.
        edges = set(range(0, 10)) | set(range(n_header, n_header + 12)) | {len(data) - 1}
        offsets = sorted(edges | set(random.Random(1).sample(range(len(data)), 40)))
    for cut in offsets:
        rejected(data[:cut])
    assert_same(lucid.load(io.BytesIO(data)), state)  # the file itself is fine
    record(
        "Bad files",
        f"a {len(data)}-byte checkpoint truncated at each offset tried",
        len(offsets),
        "ValueError from lucid.load, no tensor made",
    )


def data_region_outcome(data, state_bytes, flips):
    """For flips in the tensor data only: the tensor bytes lucid.load must return (name ->
    bytes), or None when the file must be refused (a BOOL byte that is neither 0 nor 1)."""
    n, header = header_of(data)
    out = dict(state_bytes)
    for pos, mask in flips:
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            start, end = (8 + n + o for o in entry["data_offsets"])
            if start <= pos < end:
                b = bytearray(out[name])
                b[pos - start] ^= mask
                out[name] = bytes(b)
                if entry["dtype"] == "BOOL" and b[pos - start] > 1:
                    return None
    return out


def flat_tensors(obj, out=None):
    out = [] if out is None else out
    if isinstance(obj, lucid.Tensor):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            flat_tensors(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            flat_tensors(v, out)
    return out


def test_seeded_byte_flips_load_what_the_file_holds_or_are_value_errors():
    state, data = small_checkpoint()
    n_header, header = header_of(data)
    body = 8 + n_header
    plain = reference_bytes(data)
    r = random.Random(2)
    n = scale(300, 4000)
    loaded = refused = 0
    for _ in range(n):
        # One to three bytes, half the time all of them in the tensor data.
        in_data = r.random() < 0.5
        flips = [
            (r.randrange(body, len(data)) if in_data else r.randrange(body), r.randrange(1, 256))
            for _ in range(r.randrange(1, 4))
        ]
        bad = bytearray(data)
        for pos, mask in flips:
            bad[pos] ^= mask
        bad = bytes(bad)
        if in_data:
            expected = data_region_outcome(data, plain, flips)
            if expected is None:
                rejected(bad, "BOOL")
                refused += 1
                continue
            got = lucid.load(io.BytesIO(bad))
            # Same structure, and every tensor holds exactly the (flipped) bytes of its range.
            assert list(got) == list(state) and got["epoch"] == 2 and got["tag"] == "run"
            by_name = {
                "model.0.weight": got["model"]["0.weight"],
                "model.0.bias": got["model"]["0.bias"],
                "model.mask": got["model"]["mask"],
                "optim.state.0.exp_avg": got["optim"]["state"][0]["exp_avg"],
            }
            assert {k: t.numpy().tobytes() for k, t in by_name.items()} == expected
            loaded += 1
            continue
        try:
            got = lucid.load(io.BytesIO(bad))
        except ValueError as e:
            assert str(e).startswith("lucid.load: "), str(e)
            refused += 1
            continue
        # A flip the header survives (a digit of a float, a letter of a name): what loads
        # is tensors the safetensors reader also finds in that file, bit for bit.
        theirs = set(reference_bytes(bad).values())
        assert all(t.numpy().tobytes() in theirs for t in flat_tensors(got))
        loaded += 1
    assert refused > n // 10 and loaded > n // 10  # both outcomes were exercised
    record(
        "Bad files",
        "seeded flips of 1-3 bytes of a checkpoint (half in the header, half in the data)",
        n,
        f"ValueError ({refused}) or exactly the bytes the file holds ({loaded})",
    )


# ---- hostile headers --------------------------------------------------------------------------

# The hostile files are shared with the Swift suite (tests/swift/CheckpointTests.swift), which
# refuses the same ones through the same engine reader.
HOSTILE_FILE = Path(__file__).resolve().parent.parent / "data" / "safetensors_hostile.json"


def _segments(segments):
    out = b""
    for s in segments:
        if "text" in s:
            out += s["text"].encode() * s.get("repeat", 1)
        elif "hex" in s:
            out += bytes.fromhex(s["hex"])
        else:
            out += bytes(s["zeros"])
    return out


def _hostile_file(case):
    if "raw" in case:
        return _segments(case["raw"])
    return frame(_segments(case["header"]), _segments(case["body"]))


HOSTILE = {
    case["name"]: (_hostile_file(case), case["expect"]) for case in json.loads(HOSTILE_FILE.read_text())["cases"]
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_file_is_a_value_error_naming_the_problem(name, tmp_path):
    data, problem = HOSTILE[name]
    rejected(data, problem)
    # The same through a path.
    path = tmp_path / "hostile.safetensors"
    path.write_bytes(data)
    with no_tensor_made(), pytest.raises(ValueError, match="^lucid.load: "):
        lucid.load(path, map_location="metal")


def test_hostile_headers_are_recorded():
    # One row for the table above, which the parametrized test checks case by case.
    for name, (data, problem) in HOSTILE.items():
        rejected(data, problem)
    record(
        "Bad files",
        "hostile headers: lengths, offsets, shapes, dtypes, JSON that lie (see test_bad_files.HOSTILE)",
        len(HOSTILE),
        "ValueError naming the problem, no tensor made",
    )


# ---- memory -----------------------------------------------------------------------------------


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # (kilobytes on Linux)


@contextlib.contextmanager
def address_space_capped(extra):
    """Lets the process map at most `extra` more bytes while the block runs: a load that
    tried to allocate what a header claims would fail instead of succeeding lazily."""
    with open("/proc/self/statm") as f:
        size = int(f.read().split()[0]) * resource.getpagesize()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (size + extra, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


CLAIMS = [
    "length of a terabyte",
    "length 2**63",
    "offsets of terabytes",
    "dims of 2**40 by 2**40",
    "4 TiB claimed, 8 bytes there",
    "dims overflowing, times zero",
    "length past the end",
]


def test_headers_claiming_terabytes_allocate_almost_nothing():
    rounds = scale(20, 200)
    rss = peak_rss_bytes()
    gc.collect()
    tracemalloc.start()
    try:
        with address_space_capped(256 * MiB):
            for _ in range(rounds):
                for name in CLAIMS:
                    rejected(HOSTILE[name][0])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MiB, f"Python allocations peaked at {peak / MiB:.1f} MiB"
    assert peak_rss_bytes() - rss < 64 * MiB
    record(
        "Bad files",
        "headers claiming terabytes (length field, offsets, shapes), address space capped +256 MiB",
        rounds * len(CLAIMS),
        "ValueError; Python peak < 1 MiB, peak RSS growth < 64 MiB",
    )


def test_loading_is_bounded_by_the_file_size(tmp_path):
    # The file is read whole, then checked: memory is a small multiple of its size, and the
    # engine holds exactly its tensors.
    arrays = {"a": np.ones((512, 512), np.float32), "b": np.arange(2 * MiB // 8, dtype=np.int64)}
    path = tmp_path / "big.safetensors"
    path.write_bytes(reference_save(arrays))
    size = path.stat().st_size
    before = lucid.memory_allocated()
    gc.collect()
    tracemalloc.start()
    try:
        got = lucid.load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * size + MiB, f"peak {peak / MiB:.1f} MiB for a {size / MiB:.1f} MiB file"
    assert lucid.memory_allocated() - before == sum(a.nbytes for a in arrays.values())
    np.testing.assert_array_equal(got["b"].numpy(), arrays["b"])
    del got
    assert lucid.memory_allocated() == before
    record(
        "Bad files",
        "a 3 MiB checkpoint loaded under tracemalloc",
        1,
        "Python peak < 2x the file size; engine memory = the tensors' bytes, freed with them",
    )


# ---- paths and file objects -------------------------------------------------------------------


def test_unreadable_paths_are_os_errors_and_text_files_type_errors(tmp_path):
    _, data = small_checkpoint()
    path = tmp_path / "ckpt.safetensors"
    path.write_bytes(data)
    with no_tensor_made():
        with pytest.raises(FileNotFoundError):
            lucid.load(tmp_path / "missing.safetensors")
        with pytest.raises(IsADirectoryError):
            lucid.load(tmp_path)
        with open(path, encoding="latin-1") as text, pytest.raises(TypeError, match="binary mode"):
            lucid.load(text)
        with pytest.raises(TypeError, match="binary mode"):
            lucid.load(io.StringIO(data.decode("latin-1")))
    record(
        "Bad files",
        "a missing path, a directory, a text-mode file",
        4,
        "FileNotFoundError, IsADirectoryError, TypeError naming binary mode",
    )


class Endless(io.RawIOBase):
    """A stream that gives `prefix`, then zero bytes forever."""

    def __init__(self, prefix):
        self.prefix = prefix

    def readable(self):
        return True

    def readinto(self, buffer):
        n = len(buffer)
        if self.prefix:
            n = min(n, len(self.prefix))
            buffer[:n], self.prefix = self.prefix[:n], self.prefix[n:]
        else:
            buffer[:n] = bytes(n)
        return n


def test_files_that_never_end_are_read_no_further_than_their_header_declares():
    _, data = small_checkpoint()
    streams = {
        "/dev/zero": "/dev/zero",
        "/dev/urandom": "/dev/urandom",
        "a checkpoint, then zeros forever": Endless(data),
        "the same, buffered": io.BufferedReader(Endless(data)),
    }
    gc.collect()
    tracemalloc.start()
    try:
        with address_space_capped(256 * MiB):
            for name, source in streams.items():
                with no_tensor_made(), pytest.raises(ValueError, match="^lucid.load: not a valid safetensors file"):
                    lucid.load(source)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The terabyte claim is read in chunks as far as the data goes, never allocated at once.
    assert peak < 8 * MiB, f"Python allocations peaked at {peak / MiB:.1f} MiB"
    record(
        "Bad files",
        "endless inputs (/dev/zero, /dev/urandom, zeros forever after a checkpoint) and a stream claiming a terabyte",
        len(streams),
        "ValueError; read no further than the header declares",
    )


def test_streams_declaring_more_than_max_bytes_are_refused_before_reading():
    # A header declaring a terabyte of data, then zeros forever: reading it as declared would
    # take memory until there is none.
    terabyte = HOSTILE["offsets of terabytes"][0][:-8]
    streams = {
        "a stream claiming 1 TiB, then zeros forever": Endless(terabyte),
        "the same, buffered": io.BufferedReader(Endless(terabyte)),
        "a pipe-like stream claiming 1 TiB, giving 1 MiB": io.BufferedReader(io.BytesIO(terabyte + bytes(MiB))),
    }
    gc.collect()
    tracemalloc.start()
    try:
        with address_space_capped(256 * MiB):
            for name, source in streams.items():
                with no_tensor_made(), pytest.raises(ValueError, match=r"declares 1099511627776 bytes of tensor data"):
                    lucid.load(source)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * MiB, f"Python allocations peaked at {peak / MiB:.1f} MiB"
    # The limit is the caller's: a real checkpoint through a stream loads within it, not below it.
    _, data = small_checkpoint()
    lucid.load(io.BytesIO(data), max_bytes=len(data))
    with pytest.raises(ValueError, match=f"more than max_bytes={len(data) - 1}"):
        lucid.load(io.BytesIO(data), max_bytes=len(data) - 1)
    with pytest.raises(ValueError, match="max_bytes must be a non-negative int"):
        lucid.load(io.BytesIO(data), max_bytes=-1)
    assert lucid.serialization.default_max_bytes() > 0
    record(
        "Bad files",
        "streams whose header declares a terabyte (endless, and ending after 1 MiB), and "
        "max_bytes around a real checkpoint",
        len(streams) + 3,
        "ValueError naming the declared size before any data is read; Python peak under 2 MiB",
    )
