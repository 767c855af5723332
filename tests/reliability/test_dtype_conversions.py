"""float32 -> float16 and float32 -> bfloat16 over every one of the 2**32 float32 bit patterns,
bit for bit against numpy (float16) and ml_dtypes (bfloat16). About 40 s, so they run under
`make reliability` (or when this file is named); `make test` runs the sampled form in
tests/test_dtypes.py (every sign and exponent at each rounding boundary, the special values and
a fixed-seed random sample)."""

import os
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np

import lucid
from _helpers import mismatches as _mismatches, numpy_f16_bits as _numpy_f16_bits

CHUNK = 1 << 24
N_CHUNKS = (1 << 32) // CHUNK
WORKERS = max(1, min(4, os.cpu_count() or 1))


def _chunk_bits(c):
    return np.arange(CHUNK, dtype=np.uint32) + np.uint32(c * CHUNK)


def _run_chunks(check):
    failures, total = [], 0
    with ThreadPoolExecutor(WORKERS) as pool:
        for msgs, n in pool.map(check, range(N_CHUNKS)):
            failures.extend(msgs)
            total += n
    return failures, total


# ---- float32 -> float16 / bfloat16 over every float32 bit pattern ---------------------------

# numpy's float16 cast runs a vector path for float32 exponents 113..142 (float16 normals) and
# 255 (inf/NaN) and a slow scalar path elsewhere. Every exponent whose float16 result depends
# on the mantissa (102..142: subnormals, normals, rounding into inf at 142; 255: NaN payloads)
# gets numpy's reference for all 2**23 mantissas. Below 102 every value rounds to a signed zero
# and from 143 to 254 every value overflows to a signed infinity: there numpy's reference is
# computed on all low 14 mantissa bits combined with a set of high-bit patterns, and must be
# a single value, which lucid's result must match for every one of the 2**23 mantissas.
F16_FULL_EXPONENTS = set(range(102, 143)) | {255}
_HIGH_PATTERNS = np.array([0x000, 0x001, 0x0AA, 0x100, 0x155, 0x1FE, 0x1FF, 0x0F0, 0x10F], dtype=np.uint32)
_SAMPLE_MANTISSAS = ((_HIGH_PATTERNS[:, None] << 14) | np.arange(1 << 14, dtype=np.uint32)[None, :]).ravel()


def _check_f16_chunk(c):
    bits = _chunk_bits(c)
    f32 = bits.view(np.float32)
    got = lucid.tensor(f32).to(lucid.float16).numpy().view(np.uint16)
    assert got.shape == (CHUNK,)
    msgs, n = [], 0
    half = CHUNK // 2
    for k in range(2):
        sl = slice(k * half, (k + 1) * half)
        exponent = (int(bits[sl.start]) >> 23) & 0xFF
        if exponent in F16_FULL_EXPONENTS:
            want = _numpy_f16_bits(f32[sl])
        else:
            sample = _numpy_f16_bits(f32[sl][_SAMPLE_MANTISSAS])
            values = np.unique(sample)
            if len(values) != 1:
                msgs.append(f"reference not constant for exponent {exponent}: {values[:4]}")
                n += 1
                continue
            want = np.full(half, values[0], dtype=np.uint16)
        m, cnt = _mismatches(got[sl], want, bits[sl])
        msgs.extend(m)
        n += cnt
    return msgs, n


def _check_bf16_chunk(c):
    bits = _chunk_bits(c)
    f32 = bits.view(np.float32)
    got = lucid.tensor(f32).to(lucid.bfloat16).numpy().view(np.uint16)
    with np.errstate(all="ignore"):
        want = f32.astype(ml_dtypes.bfloat16).view(np.uint16)
    return _mismatches(got, want, bits)


def test_float32_to_float16_every_bit_pattern():
    failures, total = _run_chunks(_check_f16_chunk)
    assert total == 0, f"{total} float32->float16 mismatches, e.g. {failures[:8]}"


def test_float32_to_bfloat16_every_bit_pattern():
    failures, total = _run_chunks(_check_bf16_chunk)
    assert total == 0, f"{total} float32->bfloat16 mismatches, e.g. {failures[:8]}"
