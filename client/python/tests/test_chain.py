"""Issue 18: a named fallback chain. With a chain name, first/first_async
ask breakerd about every remaining candidate (even those the Watch cache
holds open) with the chain and the tier of the first one, so breakerd counts
each decision by tier, or `none`; each call's report carries its tier.
Without breakerd, and without a name, the chain goes on as before."""

from __future__ import annotations

import asyncio
from typing import Callable

import pytest
from conftest import Breakerd, HttpError, MakeClient, unique, wait_for

from breakerd import (
    BreakerOpenError,
    Client,
    InvalidArgumentError,
    Outcome,
    Source,
    State,
    Stats,
)

DECISIONS = "breakerd_chain_decisions_total"
OUTCOMES = "breakerd_chain_outcomes_total"

# What breakerd counted for one chain: decisions by tier, outcomes by
# (tier, class); only the samples that are not zero.
ChainCounts = tuple[dict[str, float], dict[tuple[str, str], float]]


def chain_counts(server: Breakerd, chain: str) -> ChainCounts:
    decisions = {
        labels["tier"]: value for labels, value in server.samples(DECISIONS, chain=chain) if value
    }
    outcomes = {
        (labels["tier"], labels["class"]): value
        for labels, value in server.samples(OUTCOMES, chain=chain)
        if value
    }
    return decisions, outcomes


def expect_chain_counts(server: Breakerd, chain: str, want: ChainCounts) -> None:
    """breakerd's counts for ``chain`` become exactly ``want`` (allowing
    3 s for reports on their way)."""
    try:
        wait_for(lambda: chain_counts(server, chain) == want, 3, f"chain {chain}'s counts")
    except AssertionError:
        assert chain_counts(server, chain) == want


def all_chain_samples(server: Breakerd) -> float:
    return server.metric(DECISIONS) + server.metric(OUTCOMES)


def open_in_cache(client: Client, dependency: str) -> None:
    """Guarded calls that fail with a server error until breakerd refuses
    (three in a row open a breaker: the shared config), then waits until
    the client's Watch cache holds it open (a plain acquire refused LOCAL)."""
    for _ in range(3):
        try:
            with client.guard(dependency):
                raise HttpError(503)
        except HttpError:
            continue
        except BreakerOpenError:
            break
    wait_for(
        lambda: client.acquire(dependency).source == Source.LOCAL,
        10,
        f"{dependency} open in the Watch cache",
    )


def chain_runner(
    client: Client, form: str, dependencies: list[str], call: Callable[[str], str], chain: str
) -> Callable[[], str]:
    """Runs the chain helper ``form`` (first or first_async) over ``call``."""

    async def call_async(dep: str) -> str:
        await asyncio.sleep(0)
        return call(dep)

    def run() -> str:
        if form == "first":
            return client.first(dependencies, call, chain=chain)
        return asyncio.run(client.first_async(dependencies, call_async, chain=chain))

    return run


# conformance: chain
@pytest.mark.parametrize("form", ["first", "first_async"])
def test_a_named_chain_is_counted_by_tier_even_when_the_cache_knows_all_are_open(
    form: str, breakerd: Breakerd, make_client: MakeClient
) -> None:
    # conf-chain-python is the scenario's name; the async form needs its own.
    chain = "conf-chain-python" if form == "first" else "conf-chain-python-async"
    p, s, t = unique("chain-python/p"), unique("chain-python/s"), unique("chain-python/t")
    client = make_client(breakerd)
    called: list[str] = []

    def call(dep: str) -> str:
        called.append(dep)
        if dep == s:
            raise HttpError(503)
        return "answer from " + dep

    run = chain_runner(client, form, [p, s, t], call, chain)

    # 1. every dependency healthy: p runs (tier 0)
    assert run() == "answer from " + p
    assert called == [p]

    # 2. p open in the cache: breakerd refuses it and grants s (tier 1), whose
    # call fails; the chain goes on with [t] from tier 2
    open_in_cache(client, p)
    called.clear()
    assert run() == "answer from " + t
    assert called == [s, t]

    # 3. all three open in the cache: breakerd is still asked, and refuses
    open_in_cache(client, s)
    open_in_cache(client, t)
    called.clear()
    local_rejections = client.stats().local_rejections
    with pytest.raises(BreakerOpenError) as refused:
        run()
    assert called == []
    assert refused.value.source == Source.SIDECAR
    assert client.stats().local_rejections == local_rejections  # the cache skipped nothing

    expect_chain_counts(
        breakerd,
        chain,
        (
            {"0": 1, "1": 1, "2": 1, "none": 1},
            {("0", "success"): 1, ("1", "server_error"): 1, ("2", "success"): 1},
        ),
    )


@pytest.mark.parametrize("form", ["first", "first_async"])
def test_without_a_chain_name_the_cache_skips_and_breakerd_counts_no_chain(
    form: str, breakerd: Breakerd, make_client: MakeClient
) -> None:
    a, b = unique("chain-python/unnamed-a"), unique("chain-python/unnamed-b")
    breakerd.force_open(a)
    client = make_client(breakerd)
    wait_for(lambda: client.cached_state(a) == State.FORCED_OPEN, 10, "FORCED_OPEN event")
    before = all_chain_samples(breakerd)
    called: list[str] = []

    def call(dep: str) -> str:
        called.append(dep)
        return dep

    async def call_async(dep: str) -> str:
        return call(dep)

    if form == "first":
        assert client.first([a, b], call) == b
    else:
        assert asyncio.run(client.first_async([a, b], call_async)) == b
    assert called == [b]
    assert breakerd.acquires(a) == 0  # dropped locally, as before
    assert client.stats().local_rejections == 1
    assert breakerd.reports(b, "success", "counted_success") == 1
    assert all_chain_samples(breakerd) == before


@pytest.mark.parametrize("chain", ["", "two words", "x" * 201, "caf\u00e9"])
def test_an_invalid_chain_name_is_refused_before_any_rpc(
    chain: str, breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("chain-python/invalid")
    client = make_client(breakerd)
    called: list[str] = []

    async def call_async(d: str) -> None:
        called.append(d)

    with pytest.raises(InvalidArgumentError, match=r"^chain: ") as refused:
        client.first([dep], called.append, chain=chain)
    assert repr(chain) in str(refused.value)
    with pytest.raises(InvalidArgumentError, match=r"^chain: "):
        asyncio.run(client.first_async([dep], call_async, chain=chain))
    with pytest.raises(InvalidArgumentError, match=r"^chain: "):
        client.acquire_first([dep], chain=chain)
    with pytest.raises(InvalidArgumentError, match=r"^chain: "):
        client.report(dep, 1, Outcome.SUCCESS, chain=chain)
    assert called == []
    assert breakerd.acquires(dep) == 0
    assert breakerd.metric("breakerd_reports_total", dependency=dep) == 0
    assert client.stats() == Stats()  # nothing failed open or was dropped


def test_acquire_first_with_a_chain_carries_the_tier_to_its_report(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    chain = "chain-python-two-step"
    x, y = unique("chain-python/two-step-x"), unique("chain-python/two-step-y")
    breakerd.force_open(x)
    client = make_client(breakerd)
    wait_for(lambda: client.cached_state(x) == State.FORCED_OPEN, 10, "FORCED_OPEN event")

    granted = client.acquire_first([x, y], chain=chain, first_tier=3)
    assert granted.allowed and granted.source == Source.SIDECAR
    assert (granted.dependency, granted.chain, granted.tier) == (y, chain, 4)
    client.report(
        granted.dependency,
        granted.permit,
        Outcome.from_http_status(503),
        0.01,
        chain=granted.chain,
        tier=granted.tier,
    )
    refused = client.acquire_first([x], chain=chain, first_tier=5)
    assert not refused.allowed and refused.source == Source.SIDECAR
    assert (refused.chain, refused.tier) == (None, 0)
    unnamed = client.acquire_first([y])
    assert unnamed.allowed and (unnamed.chain, unnamed.tier) == (None, 0)
    client.report(y, unnamed.permit, Outcome.SUCCESS)
    assert client.stats().local_rejections == 0  # x asked about both times

    expect_chain_counts(breakerd, chain, ({"4": 1, "none": 1}, {("4", "server_error"): 1}))
    assert breakerd.reports(y, "success", "counted_success") == 1


def test_chain_tiers_out_of_range_are_refused_before_any_rpc(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    chain = "chain-python-tiers"
    x, y = unique("chain-python/tiers-x"), unique("chain-python/tiers-y")
    client = make_client(breakerd)
    for first_tier in (-1, 63):  # 63 puts y at tier 64
        with pytest.raises(InvalidArgumentError, match=r"^first_tier: .*0 to 63"):
            client.acquire_first([x, y], chain=chain, first_tier=first_tier)
    with pytest.raises(InvalidArgumentError, match=r"^first_tier: 1 needs a chain name"):
        client.acquire_first([x, y], first_tier=1)
    for tier in (-1, 64):
        with pytest.raises(InvalidArgumentError, match=r"^tier: .*0 to 63"):
            client.report(x, 1, Outcome.SUCCESS, chain=chain, tier=tier)
    with pytest.raises(InvalidArgumentError, match=r"^tier: 2 needs a chain name"):
        client.report(x, 1, Outcome.SUCCESS, tier=2)
    assert breakerd.acquires(x) == 0 and breakerd.acquires(y) == 0
    assert breakerd.metric("breakerd_reports_total", dependency=x) == 0

    last = client.acquire_first([x], chain=chain, first_tier=63)  # the last tier there is
    assert last.allowed and last.tier == 63
    client.report(x, last.permit, Outcome.SUCCESS, chain=last.chain, tier=last.tier)
    expect_chain_counts(breakerd, chain, ({"63": 1}, {("63", "success"): 1}))


@pytest.mark.parametrize("form", ["first", "first_async"])
def test_a_named_chain_without_breakerd_goes_on_as_without_a_name(
    form: str, own_breakerd: Breakerd, make_client: MakeClient
) -> None:
    a, b = unique("chain-python/away-a"), unique("chain-python/away-b")
    own_breakerd.force_open(a)
    client = make_client(own_breakerd, decision_timeout=0.2)
    wait_for(lambda: client.cached_state(a) == State.FORCED_OPEN, 10, "FORCED_OPEN event")
    called: list[str] = []

    def call(dep: str) -> str:
        called.append(dep)
        return dep

    run = chain_runner(client, form, [a, b], call, "chain-python-away")
    with own_breakerd.paused():
        # Asked with both, unanswered: breakerd is away, and the decision is
        # made as without a name: a skipped (the cache), b failed open.
        assert run() == b
        # Away: no RPC, the same decision.
        assert run() == b
        stats = client.stats()
    assert called == [b, b]
    assert (stats.fail_open, stats.away_decisions, stats.local_rejections) == (2, 1, 2)
