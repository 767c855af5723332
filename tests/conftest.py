import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lucid  # noqa: E402
from lucid import _engine  # noqa: E402


@pytest.fixture(autouse=True)
def no_leaked_autocast_state():
    """Every test starts and ends with autocast off and no live guard on any thread."""
    assert not lucid.amp.is_autocast_enabled()
    before = _engine.autocast_live_guards()
    yield
    assert not lucid.amp.is_autocast_enabled(), "a test left autocast on"
    assert _engine.autocast_live_guards() == before, "a test leaked an autocast guard"
