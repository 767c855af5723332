"""The engine's safetensors reader and writer through the C ABI (lucid.save and lucid.load use
them; so do Swift's saveSafetensors and loadSafetensors): byte for byte what the safetensors
package writes, both ways, every dtype; and the fixture the Swift suite loads."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from safetensors import deserialize
from safetensors.numpy import save as reference_save

import lucid
from lucid import _C
from lucid.serialization import _type_name

FIXTURE = Path(__file__).resolve().parent / "data" / "python_state_dict.safetensors"

rng = np.random.default_rng(5)


def every_dtype():
    """An array of every dtype the engine writes, with bits that matter (NaN payloads,
    subnormals, integer extremes), an empty and a 0-d one."""
    f32 = np.array([1.5, np.nan, 1e-45, -0.0], np.float32)
    f32.view(np.uint32)[1] |= 7
    return {
        "f32": f32.reshape(2, 2),
        "f16": np.array([1, 0x7E01, 1, 0xFBFF, 0x8000], np.uint16).view(np.float16),
        "bf16": np.array([0x3FC0, 0x7FC1, 1, 0xFF7F, 0x8000, 0x4049], np.uint16).view(ml_dtypes.bfloat16).reshape(3, 2),
        "f64": np.array([1 / 3, np.nan, 5e-324]),
        "i64": np.array([-(2**63), -1, 2**63 - 1], np.int64),
        "i32": np.array([[-(2**31), 0, 2**31 - 1]], np.int32),
        "i16": np.array([-(2**15), -2, 2**15 - 1], np.int16),
        "i8": np.array([-128, -1, 127], np.int8),
        "u8": np.array([0, 128, 255], np.uint8),
        "u16": np.array([0, 65535], np.uint16),
        "u32": np.array([0, 2**32 - 1], np.uint32),
        "bool": np.array([[True, False], [True, True]]),
        "empty": np.zeros((0, 3), np.float32),
        "scalar": np.array(2.5, np.float64),
        'name "quoted" \\ with\ttab, ü and \x01': rng.standard_normal(3).astype(np.float32),
    }


def engine_write(arrays, metadata):
    return _C.safetensors_write([(k, _type_name(a.dtype), a.shape, a) for k, a in arrays.items()], metadata)


def engine_read(data):
    count, meta_count = _C.safetensors_read(data, len(data))
    tensors = {}
    for i in range(count):
        name, dtype, shape, offset, nbytes = _C.safetensors_tensor(i)
        tensors[name] = (dtype, shape, bytes(data[offset : offset + nbytes]))
    return tensors, dict(_C.safetensors_metadata(i) for i in range(meta_count))


def test_the_engine_writes_what_the_safetensors_package_writes_byte_for_byte():
    arrays = every_dtype()
    for metadata in ({}, {"lucid.structure": '{"a": [1, "\\u00fc"]}'}, {"k": 'v "q" \\ \n ü'}):
        ours = engine_write(arrays, metadata)
        theirs = reference_save(arrays, metadata=metadata or None)
        assert ours == theirs, metadata


def test_the_engine_reads_what_the_package_writes_and_the_package_reads_what_it_writes():
    arrays = every_dtype()
    tensors, metadata = engine_read(reference_save(arrays, metadata={"a": "b"}))
    assert metadata == {"a": "b"} and set(tensors) == set(arrays)
    for name, a in arrays.items():
        dtype, shape, raw = tensors[name]
        assert dtype == _type_name(a.dtype) and shape == a.shape and raw == a.tobytes(), name
    back = dict(deserialize(engine_write(arrays, {})))  # (the numpy API has no BF16)
    for name, a in arrays.items():
        assert back[name]["dtype"] == _type_name(a.dtype) and tuple(back[name]["shape"]) == a.shape, name
        assert bytes(back[name]["data"]) == a.tobytes(), name


def test_lucid_save_and_load_round_trip_every_dtype_through_the_engine(tmp_path):
    arrays = {k: v for k, v in every_dtype().items() if not k.startswith("name")}
    path = tmp_path / "all.safetensors"
    lucid.save(arrays, path)
    back = lucid.load(path)
    for name, a in arrays.items():
        assert back[name].dtype == a.dtype and back[name].tobytes() == a.tobytes(), name
    state = {k: lucid.tensor(v) for k, v in arrays.items() if k not in ("u16", "u32")}
    lucid.save(state, path)
    plain = dict(deserialize(path.read_bytes()))
    for name, t in state.items():
        assert bytes(plain[name]["data"]) == t.numpy().tobytes(), name
    # U16 and U32 tensors load widened, as lucid.tensor widens those arrays.
    (tmp_path / "u.safetensors").write_bytes(reference_save(arrays))
    widened = lucid.load(tmp_path / "u.safetensors")
    assert widened["u16"].dtype == lucid.int32 and widened["u32"].dtype == lucid.int64
    np.testing.assert_array_equal(widened["u32"].numpy(), [0, 2**32 - 1])


def fixture_state():
    return {
        "0.weight": lucid.tensor(np.arange(6, dtype=np.float32).reshape(3, 2) * 0.25 - 0.5),
        "0.bias": lucid.tensor(np.array([0.5, -1.0, 2.0], np.float32)),
        "1.weight": lucid.tensor(np.array([[1.5, -2.25, 3.0]], ml_dtypes.bfloat16)),
        "1.bias": lucid.tensor(np.array([0.125], np.float16)),
        "2.num_batches_tracked": lucid.tensor(np.array(7, np.int64)),
        "2.mask": lucid.tensor(np.array([True, False, True])),
        "3.f64": lucid.tensor(np.array([0.25, -8.0])),
        "3.i32": lucid.tensor(np.array([-3, 4], np.int32)),
        "3.i16": lucid.tensor(np.array([-300, 300], np.int16)),
        "3.i8": lucid.tensor(np.array([-128, 127], np.int8)),
        "3.u8": lucid.tensor(np.array([0, 255], np.uint8)),
    }


def test_the_swift_suites_fixture_is_what_lucid_save_writes(tmp_path):
    # tests/swift/CheckpointTests.swift loads this file, checks these values, and writes it
    # back from Swift byte for byte.
    path = tmp_path / "state.safetensors"
    lucid.save(fixture_state(), path)
    assert path.read_bytes() == FIXTURE.read_bytes()
    back = lucid.load(FIXTURE)
    for name, t in fixture_state().items():
        assert back[name].dtype == t.dtype and back[name].numpy().tobytes() == t.numpy().tobytes(), name


def test_the_abi_refuses_bad_arguments():
    a = np.zeros(2, np.float32)
    with pytest.raises(ValueError, match="needs 8 bytes, got 4"):
        _C.safetensors_write([("w", "F32", (2,), np.zeros(1, np.float32))], {})
    with pytest.raises(TypeError, match="cannot write dtype 'U64'"):
        _C.safetensors_write([("w", "U64", (1,), a)], {})
    with pytest.raises(ValueError, match="named '__metadata__'"):
        _C.safetensors_write([("__metadata__", "F32", (2,), a)], {})
    with pytest.raises(ValueError, match="two tensors are named 'w'"):
        _C.safetensors_write([("w", "F32", (2,), a), ("w", "F32", (2,), a)], {})
    data = engine_write({"w": a}, {})
    assert _C.safetensors_read(data, len(data)) == (1, 0)
    with pytest.raises(IndexError, match="tensor 1 is out of range"):
        _C.safetensors_tensor(1)
    with pytest.raises(ValueError, match="negative"):
        _C.safetensors_read(b"", -1)
    with pytest.raises(TypeError, match="cannot store a numpy array of dtype uint64"):
        lucid.save({"u": np.zeros(1, np.uint64)}, "unused.safetensors")


@pytest.mark.parametrize(
    "header,size",
    [
        (b'{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"data_offsets":[16,40]}}', 40),
        (b'{"__metadata__":{"data_offsets":"x"},"a":{"data_offsets":[0,8]}}', 8),
        (b'{"a":{"data_offsets":[0,1099511627776]}}', 1 << 40),
        (b'{"a":{"data_offsets":[0,-8]}}', 0),
        (b"not json", 0),
        (b"[1, 2]", 0),
        (b"", 0),
    ],
)
def test_the_size_a_stream_header_declares(header, size):
    # What lucid.load reads of a stream after its header: no further than this.
    assert _C.safetensors_declared_size(header, len(header)) == size
