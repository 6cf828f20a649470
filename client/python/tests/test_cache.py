"""The Watch cache on its own: generation ordering, shadow mode, cooldowns.
A fake clock that moves only when the test says so; no breakerd, no sleep."""

from __future__ import annotations

import pytest

from breakerd import RejectReason, Source, State
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


# -- local decisions: the notices that are not transitions ---------------------


@pytest.fixture
def local_cache(clock: FakeClock) -> StateCache:
    return StateCache(clock, local_decisions=True)


def test_created_adds_a_local_grant_with_its_generation(local_cache: StateCache) -> None:
    assert local_cache.apply(DEP, State.CLOSED, 0.0, 4, "enforce", True, "created")
    grant = local_cache.grants[DEP]
    assert grant.allowed and grant.source == Source.LOCAL and grant.local_grant
    assert (grant.permit, grant.probe, grant.state, grant.generation) == (0, False, State.CLOSED, 4)
    assert grant.dependency == DEP
    assert local_cache.refusal(DEP) is None


def test_no_grant_unless_closed_enforcing_and_allowed(local_cache: StateCache) -> None:
    local_cache.apply(DEP, State.CLOSED, 0.0, 1, "enforce", False, "created")
    assert DEP not in local_cache.grants  # policy local_decisions off, or ramping
    local_cache.apply(DEP, State.CLOSED, 0.0, 1, "shadow", True, "reload")
    assert DEP not in local_cache.grants  # shadow: always the sidecar
    local_cache.apply(DEP, State.FORCED_CLOSED, 0.0, 2, "enforce", True, "forced_closed")
    assert DEP not in local_cache.grants
    local_cache.apply(DEP, State.OPEN, 30.0, 3, "enforce", True, "consecutive_failures")
    assert DEP not in local_cache.grants
    local_cache.apply(DEP, State.HALF_OPEN, 0.0, 4, "enforce", False, "cooldown_elapsed")
    assert DEP not in local_cache.grants
    local_cache.apply(DEP, State.CLOSED, 0.0, 5, "enforce", True, "probe_succeeded")
    assert local_cache.grants[DEP].generation == 5


def test_equal_generation_notices_switch_local_decisions(local_cache: StateCache) -> None:
    local_cache.apply(DEP, State.CLOSED, 0.0, 7, "enforce", False, "probe_succeeded")  # ramping
    assert DEP not in local_cache.grants
    assert local_cache.apply(DEP, State.CLOSED, 0.0, 7, "enforce", True, "ramp_done")
    assert local_cache.grants[DEP].generation == 7
    assert local_cache.apply(DEP, State.CLOSED, 0.0, 7, "enforce", False, "reload")
    assert DEP not in local_cache.grants  # the policy turned local decisions off
    assert local_cache.apply(DEP, State.CLOSED, 0.0, 7, "enforce", True, "reload")
    assert DEP in local_cache.grants


def test_evicted_forgets_and_a_recreated_breaker_starts_above(local_cache: StateCache) -> None:
    local_cache.apply(DEP, State.CLOSED, 0.0, 3, "enforce", True, "created")
    assert not local_cache.apply(DEP, State.CLOSED, 0.0, 2, "enforce", False, "evicted")
    assert DEP in local_cache.grants  # an older eviction is ignored
    assert local_cache.apply(DEP, State.CLOSED, 0.0, 3, "enforce", False, "evicted")
    assert DEP not in local_cache.grants and local_cache.state(DEP) is None
    assert local_cache.apply(DEP, State.CLOSED, 0.0, 4, "enforce", True, "created")
    assert local_cache.grants[DEP].generation == 4


def test_lower_generation_never_turns_the_fast_path_back_on(local_cache: StateCache) -> None:
    local_cache.apply(DEP, State.OPEN, 30.0, 6, "enforce", False, "consecutive_failures")
    assert not local_cache.apply(DEP, State.CLOSED, 0.0, 5, "enforce", True, "created")
    assert DEP not in local_cache.grants
    assert local_cache.refusal(DEP) is not None


def test_clear_ends_every_local_grant(local_cache: StateCache) -> None:
    local_cache.apply(DEP, State.CLOSED, 0.0, 1, "enforce", True, "initial")
    local_cache.apply("other/dep", State.CLOSED, 0.0, 1, "enforce", True, "initial")
    local_cache.clear()  # the stream ended
    assert local_cache.grants == {}


def test_local_decisions_off_in_the_client_never_grants(cache: StateCache) -> None:
    cache.apply(DEP, State.CLOSED, 0.0, 1, "enforce", True, "created")
    assert cache.grants == {}
    assert cache.state(DEP) == State.CLOSED
