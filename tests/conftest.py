import os

import pytest

import lucid
from lucid import _C


def pytest_sessionstart(session):
    # `make check-metal` and the macOS workflow run the suite to test the Metal backend: there a
    # "metal" on the host fallback (a failed self-test, a kernel library that did not compile)
    # must fail the run, not skip the Metal tests.
    if os.environ.get("LUCID_REQUIRE_METAL") == "1":
        if not lucid.metal.is_available():
            raise pytest.UsageError(
                "LUCID_REQUIRE_METAL=1, but lucid.metal.is_available() is False (lucid.metal.self_test() tells why)"
            )
        # A kernel family that did not compile or pass runs on the host while the others serve
        # "metal": that must fail the run too.
        failed = [f"{c['op']} ({c['dtype']})" for c in lucid.metal.self_test() if not c["passed"]]
        if failed:
            raise pytest.UsageError(f"LUCID_REQUIRE_METAL=1, but the Metal self-test failed: {', '.join(failed)}")


def _assert_autocast_off(when):
    for device in ("metal", "cpu"):
        assert not lucid.amp.is_autocast_enabled(device), f"autocast on for {device!r} {when}"
        assert lucid.amp.get_autocast_dtype(device) is None, f"autocast dtype set for {device!r} {when}"
    assert not lucid.amp.is_autocast_enabled()
    assert lucid.amp.get_autocast_dtype() is None
    assert _C.autocast_live_guards() == 0, f"live autocast guards {when}"


@pytest.fixture(autouse=True)
def no_leaked_autocast_state():
    """Every test starts and ends with autocast off on both devices and no live guard on any thread."""
    _assert_autocast_off("before the test")
    yield
    _assert_autocast_off("after the test (leaked)")
