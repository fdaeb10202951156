"""Control requests (operator → driver, ftspark.protocol.ControlRequest): the format with the leader's term,
and the driver's decision (ftspark.runtime.control.judge) to obey, refuse or look again."""

from __future__ import annotations

import pytest

from ftspark.protocol import MAX_TERM, ControlRequest
from ftspark.runtime.control import judge

STOP = "stop@2026-01-01T00:00:00+00:00"


def test_a_request_round_trips_with_its_term() -> None:
    for request in (
        ControlRequest("stop", "2026-01-01T00:00:00+00:00", 7),
        ControlRequest("savepoint", "sp-3-a1", 0),
        ControlRequest("stop-savepoint", "upgrade-a2", MAX_TERM),  # the highest a Lease holds
        ControlRequest("promote", "", 3),  # a standby restores the latest checkpoint
        ControlRequest("promote", "41", 3),  # or the batch the operator names
    ):
        assert ControlRequest.parse(str(request)) == request
    assert str(ControlRequest("savepoint", "sp-3-a1", 4)) == "savepoint@sp-3-a1;term=4"


def test_the_format_before_terms_parses_without_a_term() -> None:
    assert ControlRequest.parse(STOP) == ControlRequest("stop", "2026-01-01T00:00:00+00:00", None)
    assert ControlRequest.parse("savepoint@nightly-7") == ControlRequest("savepoint", "nightly-7")


@pytest.mark.parametrize(
    "value",
    [
        "",
        "stop",
        "restart@now;term=1",
        "savepoint@;term=1",  # a savepoint needs its id
        f"{STOP};term=",
        f"{STOP};term=-1",
        f"{STOP};term=+1",
        f"{STOP};term=1e3",
        f"{STOP};term=0x10",
        f"{STOP};term= 1",
        f"{STOP};term=1 ",
        f"{STOP};term=1\n",
        f"{STOP};term=\u0661",  # a digit, but not an ASCII one
        f"{STOP};term={MAX_TERM + 1}",  # past an int32: no Lease holds it
        f"{STOP};term=123456789012345678",  # an int64, still no Lease's
        f"{STOP};term=1;term=9",  # two terms: which one would count?
        f"{STOP};TERM=1",
        "savepoint@a@b;term=1",
        "savepoint@a;b;term=1",
        "STOP@now;term=1",
    ],
)
def test_hostile_values_are_no_request(value: str) -> None:
    assert ControlRequest.parse(value) is None


def test_the_driver_obeys_only_a_term_at_or_above_the_floor() -> None:
    request = ControlRequest("stop", "t", 5)
    assert judge(request, 5)[0] == "obey"
    assert judge(request, 4)[0] == "obey"
    verdict, why = judge(request, 6)
    assert verdict == "refuse"
    assert "term 5" in why and "floor 6" in why


def test_a_request_without_a_term_is_refused_and_an_unreadable_floor_is_tried_again() -> None:
    assert judge(ControlRequest("stop", "t"), 0)[0] == "refuse"
    assert judge(ControlRequest("stop", "t"), None)[0] == "refuse", "no floor is needed to refuse it"
    assert judge(ControlRequest("stop", "t", 5), None)[0] == "retry"
