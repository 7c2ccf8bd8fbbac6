"""A journal record as stored: a call's rounds sealed for the journal alone (compressed where that
pays), what a listing reads in the clear, a round's largest parts left out (and named) past the
cap; records of the previous format still open."""

import pytest

from engine.errors import InvalidRequestState
from engine.state.seal import KeyRing
from engine.store_services.journal_records import open_rounds, rounds_in, seal_rounds
from tests.conftest import KEY, OTHER_KEY
from tests.store_services.helpers import v2_record

ROUND_1 = {
    "v": 1,
    "ts": 1.0,
    "kind": "input_required",
    "target": "order",
    "server": "Shop",
    "round": 1,
    "arguments": {"title": "Dune"},
    "questions": {"q": {"method": "elicitation/create", "params": {"message": "Sure?"}}},
    "answers": {},
    "checkpoints": {},
    "response": b'{"resultType":"input_required","inputRequests":{}}',
}
ROUND_2 = {
    **ROUND_1,
    "ts": 2.0,
    "kind": "complete",
    "round": 2,
    "questions": {},
    "answers": {"q": {"action": "decline"}},
    "response": b'{"content":[{"type":"text","text":"No order placed."}]}',
}


def without_v(event: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in event.items() if k != "v"}


def test_a_calls_rounds_are_one_record_sealed_and_opened_with_a_ring_that_holds_its_key() -> None:
    stored = seal_rounds([dict(ROUND_1), dict(ROUND_2)], KeyRing([KEY]), 64 * 1024)
    assert {"arguments", "answers", "response", "round"}.isdisjoint(stored)
    listing = {k: stored[k] for k in ("ts", "target", "kind", "server")}
    assert listing == {"ts": 2.0, "target": "order", "kind": "complete", "server": "Shop"}
    assert rounds_in(stored) == 2
    assert b"Dune" not in stored["sealed"]
    opened = open_rounds(stored, KeyRing([OTHER_KEY, KEY]))  # rotated: [new, old]
    assert opened == [without_v(ROUND_1), without_v(ROUND_2)]
    with pytest.raises(InvalidRequestState) as refused:
        open_rounds(stored, KeyRing([OTHER_KEY]))
    assert refused.value.reason == "unknown key"


def test_a_record_is_compressed_when_that_pays() -> None:
    chatty = {**ROUND_2, "response": b'{"text":"' + b"all work and no play " * 100 + b'"}'}
    stored = seal_rounds([chatty], KeyRing([KEY]), 64 * 1024)
    assert len(stored["sealed"]) < 600 < len(chatty["response"])
    assert open_rounds(stored, KeyRing([KEY]))[0]["response"] == chatty["response"]


def test_a_journal_record_never_opens_as_a_token() -> None:
    ring = KeyRing([KEY])
    sealed = seal_rounds([dict(ROUND_2)], ring, 64 * 1024)["sealed"]
    with pytest.raises(InvalidRequestState) as refused:
        ring.open_record(sealed, b"s1.")
    assert refused.value.reason == "seal"


def test_past_the_cap_a_rounds_largest_parts_are_left_out_and_named() -> None:
    event = {**ROUND_2, "response": b"r" * 5000}
    stored = seal_rounds([dict(ROUND_1), event], KeyRing([KEY]), 1024)
    first, second = open_rounds(stored, KeyRing([KEY]))
    assert "truncated" not in first
    assert list(second["truncated"]) == ["response"] and second["truncated"]["response"] > 5000
    assert second["response"] is None and second["arguments"] == {"title": "Dune"}


def test_a_record_of_the_previous_format_opens_as_one_round() -> None:
    stored = v2_record(dict(ROUND_2), KeyRing([KEY]))
    assert rounds_in(stored) == 1 and "answers" not in stored
    [opened] = open_rounds(stored, KeyRing([KEY]))
    assert without_v(opened) == without_v(ROUND_2)


def test_a_record_altered_in_the_store_does_not_open() -> None:
    stored = seal_rounds([dict(ROUND_1)], KeyRing([KEY]), 64 * 1024)
    sealed = stored["sealed"]
    stored["sealed"] = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(InvalidRequestState) as refused:
        open_rounds(stored, KeyRing([KEY]))
    assert refused.value.reason == "seal"


ASKING = {
    **ROUND_1,
    "questions": {"q": {"method": "elicitation/create", "params": {"message": "Sure?"}}},
    "response": b'{"resultType":"input_required","inputRequests":{"q":{"method":'
    b'"elicitation/create","params":{"message":"Sure?"}}},"requestState":"(not journaled)"}',
    "asked_in_response": True,
}


def test_questions_sent_in_the_response_are_kept_there_once_and_read_back() -> None:
    keys = KeyRing([KEY])
    apart = seal_rounds([{**ASKING, "asked_in_response": False}], keys, 64 * 1024)
    once = seal_rounds([dict(ASKING)], keys, 64 * 1024)
    assert len(once["sealed"]) < len(apart["sealed"])
    expected = {k: v for k, v in without_v(ASKING).items() if k != "asked_in_response"}
    assert open_rounds(once, keys) == [expected]
    # past the cap the response is left out, and the questions are kept on their own
    [capped] = open_rounds(seal_rounds([dict(ASKING)], keys, 120), keys)
    assert capped["response"] is None and capped["truncated"] == {"response": 149}
    assert capped["questions"] == ASKING["questions"]
