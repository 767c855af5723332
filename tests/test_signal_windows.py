"""lucid.signal.windows against numpy's windows and the windows' formulas: symmetric and
periodic forms, dtypes, and the errors of wrong arguments."""

import numpy as np
import pytest

import lucid
from lucid.signal import windows as W


def close(t, want):
    np.testing.assert_allclose(t.numpy().astype(np.float64), want, rtol=1e-6, atol=1e-7)


def periodic(fn, M, **kw):
    """The periodic window as the first M points of the symmetric one of M + 1."""
    return fn(M + 1, **kw)[:M]


NUMPY = {"hann": np.hanning, "hamming": np.hamming, "blackman": np.blackman, "bartlett": np.bartlett}


@pytest.mark.parametrize("name", sorted(NUMPY))
@pytest.mark.parametrize("M", [0, 1, 2, 5, 8])
def test_windows_numpy_has(name, M):
    fn, ref = getattr(W, name), NUMPY[name]
    close(fn(M), ref(M))
    close(fn(M, sym=False), ref(M) if M <= 1 else periodic(ref, M))


@pytest.mark.parametrize("M", [0, 1, 2, 6, 9])
def test_kaiser_gaussian_exponential_cosine_nuttall(M):
    n = np.arange(M)
    close(W.kaiser(M, beta=5.0), np.kaiser(M, 5.0))
    if M > 1:
        close(W.kaiser(M, beta=5.0, sym=False), periodic(np.kaiser, M, beta=5.0))
    close(W.gaussian(M, std=1.7), np.exp(-((n - (M - 1) / 2) ** 2) / (2 * 1.7**2)))
    close(W.exponential(M, tau=2.5), np.exp(-np.abs(n - (M - 1) / 2) / 2.5))
    if M > 1:
        close(W.exponential(M, tau=2.5, sym=False, center=1.0), np.exp(-np.abs(n - 1.0) / 2.5))
        close(W.gaussian(M, std=1.7, sym=False), np.exp(-((n - M / 2) ** 2) / (2 * 1.7**2)))
    close(W.cosine(M), np.sin(np.pi * (n + 0.5) / max(M, 1)))
    a = [0.3635819, 0.4891775, 0.1365995, 0.0106411]
    if M > 1:
        want = sum((-1) ** k * c * np.cos(2 * np.pi * k * n / (M - 1)) for k, c in enumerate(a))
    else:
        want = np.ones(M)
    close(W.nuttall(M), want)
    close(W.general_cosine(M, a=a), want)
    close(W.general_hamming(M, alpha=0.6), np.ones(M) if M == 1 else 0.6 - 0.4 * np.cos(2 * np.pi * n / max(M - 1, 1)))


def test_window_dtypes_devices_and_grad():
    assert W.hann(4).dtype is lucid.get_default_dtype()
    assert W.hann(4, dtype=lucid.float64).dtype is lucid.float64
    w = W.blackman(3, requires_grad=True)
    assert w.requires_grad
    assert W.kaiser(3, device="metal").device == "metal"


def test_window_errors():
    with pytest.raises(ValueError, match=r"hann\(\): M must be non-negative, got -1"):
        W.hann(-1)
    with pytest.raises(TypeError, match=r"M must be an integer"):
        W.hamming(2.5)
    with pytest.raises(ValueError, match=r"expected a floating-point dtype"):
        W.bartlett(3, dtype=lucid.int64)
    with pytest.raises(ValueError, match=r"gaussian\(\): std must be positive"):
        W.gaussian(3, std=0.0)
    with pytest.raises(ValueError, match=r"exponential\(\): tau must be positive"):
        W.exponential(3, tau=-1.0)
    with pytest.raises(ValueError, match=r"center must be None for a symmetric window"):
        W.exponential(3, center=1.0)
    with pytest.raises(ValueError, match=r"a needs at least one coefficient"):
        W.general_cosine(3, a=[])
    with pytest.raises(ValueError, match=r"kaiser\(\): beta must be non-negative"):
        W.kaiser(3, beta=-1.0)
