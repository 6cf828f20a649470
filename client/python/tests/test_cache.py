"""The Watch cache on its own: generation ordering, shadow mode, cooldowns.
A fake clock that moves only when the test says so; no breakerd, no sleep."""

from __future__ import annotations

import pytest

from breakerd import RejectReason, State
from breakerd._cache import StateCache

DEP = "payments/psp"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cache(clock: FakeClock) -> StateCache:
    return StateCache(clock)


def test_older_open_after_newer_closed_is_ignored(cache: StateCache) -> None:
    assert cache.apply(DEP, State.CLOSED, 0.0, 6, "enforce")
    assert not cache.apply(DEP, State.OPEN, 30.0, 5, "enforce")
    assert cache.state(DEP) == State.CLOSED
    assert cache.refusal(DEP) is None


def test_newer_closed_after_older_open_is_applied(cache: StateCache) -> None:
    assert cache.apply(DEP, State.OPEN, 30.0, 5, "enforce")
    assert cache.refusal(DEP) is not None
    assert cache.apply(DEP, State.CLOSED, 0.0, 6, "enforce")
    assert cache.state(DEP) == State.CLOSED
    assert cache.refusal(DEP) is None


def test_reload_at_the_same_generation_switches_to_shadow(cache: StateCache) -> None:
    assert cache.apply(DEP, State.OPEN, 30.0, 6, "enforce")
    assert cache.refusal(DEP) is not None
    assert cache.apply(DEP, State.OPEN, 29.0, 6, "shadow")  # reason "reload"
    assert cache.state(DEP) == State.OPEN
    assert cache.refusal(DEP) is None


def test_shadow_never_refuses_even_forced_open(cache: StateCache) -> None:
    cache.apply(DEP, State.OPEN, 30.0, 1, "shadow")
    assert cache.refusal(DEP) is None
    cache.apply(DEP, State.FORCED_OPEN, 0.0, 2, "shadow")
    assert cache.refusal(DEP) is None
    cache.apply(DEP, State.FORCED_OPEN, 0.0, 2, "enforce")  # reloaded back
    refusal = cache.refusal(DEP)
    assert refusal is not None and refusal.reason == RejectReason.FORCED_OPEN


def test_empty_mode_from_an_older_sidecar_enforces(cache: StateCache, clock: FakeClock) -> None:
    cache.apply(DEP, State.OPEN, 30.0, 3, "")
    refusal = cache.refusal(DEP)
    assert refusal is not None
    assert (refusal.state, refusal.reason, refusal.retry_after) == (
        State.OPEN,
        RejectReason.OPEN,
        30.0,
    )
    clock.now += 10
    refusal = cache.refusal(DEP)
    assert refusal is not None and refusal.retry_after == 20.0


def test_open_past_its_cooldown_is_not_refused(cache: StateCache, clock: FakeClock) -> None:
    cache.apply(DEP, State.OPEN, 5.0, 1, "enforce")
    clock.now += 4.9
    assert cache.refusal(DEP) is not None
    clock.now += 0.1
    assert cache.refusal(DEP) is None
    assert cache.state(DEP) == State.OPEN


def test_generations_are_per_dependency_and_start_over_after_clear(cache: StateCache) -> None:
    cache.apply(DEP, State.CLOSED, 0.0, 9, "enforce")
    assert cache.apply("other/dep", State.OPEN, 30.0, 1, "enforce")  # its own generation
    assert cache.refusal("other/dep") is not None
    cache.clear()  # the stream ended; a restarted breakerd counts from 0 again
    assert cache.state(DEP) is None
    assert cache.apply(DEP, State.OPEN, 30.0, 1, "enforce")
    assert cache.refusal(DEP) is not None
