"""A journal event as stored: listing fields in the clear, the payload sealed for the journal
alone, its largest parts left out (and named) past the cap."""

import pytest

from engine.errors import InvalidRequestState
from engine.state.seal import KeyRing
from engine.store_services.journal_records import open_event, seal_event
from tests.conftest import KEY, OTHER_KEY

EVENT = {
    "v": 1,
    "ts": 1.0,
    "kind": "complete",
    "target": "order",
    "round": 1,
    "arguments": {"title": "Dune"},
    "questions": {},
    "answers": {"q": {"action": "decline"}},
    "checkpoints": {},
    "response": b'{"content": []}',
}


def test_the_payload_is_sealed_and_opens_with_a_ring_that_holds_its_key() -> None:
    stored = seal_event(dict(EVENT), KeyRing([KEY]), 64 * 1024)
    assert {"arguments", "answers", "response"}.isdisjoint(stored)
    assert (stored["kind"], stored["target"], stored["round"], stored["v"]) == (
        "complete",
        "order",
        1,
        2,
    )
    assert b"Dune" not in stored["sealed"]
    opened = open_event(stored, KeyRing([OTHER_KEY, KEY]))  # rotated: [new, old]
    assert {k: opened[k] for k in EVENT if k != "v"} == {k: v for k, v in EVENT.items() if k != "v"}
    with pytest.raises(InvalidRequestState) as refused:
        open_event(stored, KeyRing([OTHER_KEY]))
    assert refused.value.reason == "unknown key"


def test_a_journal_record_never_opens_as_a_token() -> None:
    ring = KeyRing([KEY])
    sealed = seal_event(dict(EVENT), ring, 64 * 1024)["sealed"]
    with pytest.raises(InvalidRequestState) as refused:
        ring.open_record(sealed, b"s1.")
    assert refused.value.reason == "seal"


def test_past_the_cap_the_largest_parts_are_left_out_and_named() -> None:
    event = {**EVENT, "response": b"r" * 5000}
    stored = seal_event(event, KeyRing([KEY]), 1024)
    assert list(stored["truncated"]) == ["response"] and stored["truncated"]["response"] > 5000
    opened = open_event(stored, KeyRing([KEY]))
    assert opened["response"] is None and opened["arguments"] == {"title": "Dune"}
