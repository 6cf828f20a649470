"""The hand-over of a decision from gRPC's completion thread to the task
awaiting it: whichever order the sender, the loop's settlement and the
task's cancellation come in, exactly one of them ends up with the permit
(the CI saw a permit lost when asyncio.run closed its loop between
scheduling a settlement and running it)."""

from breakerd import Decision, Source
from breakerd._client import _Handoff


def granted(permit: int) -> Decision:
    return Decision(allowed=True, source=Source.SIDECAR, dependency="dep", permit=permit)


def test_handed_over_then_settled_belongs_to_the_settlement() -> None:
    h = _Handoff()
    assert h.hand_over(granted(1))
    assert h.take() == granted(1)
    assert h.give_up() is None  # a later cancellation has nothing to report
    assert h.take() is None


def test_handed_over_then_given_up_belongs_to_the_task() -> None:
    h = _Handoff()
    assert h.hand_over(granted(2))
    assert h.give_up() == granted(2)  # the loop closed before settling
    assert h.take() is None  # a settlement that runs after all does nothing


def test_given_up_first_leaves_it_to_the_sender() -> None:
    h = _Handoff()
    assert h.give_up() is None
    assert not h.hand_over(granted(3))  # the sender reports it
    assert h.take() is None
