"""The msgpack codecs inside a token: exact round trips, and one error for anything hostile.

Both codecs only ever see bytes that passed the seal, but they are written as if they did not:
whatever the bytes, decoding gives back a value or :class:`InvalidRequestState`, never another
exception.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.state.call
from engine.errors import InvalidRequestState
from engine.state.call import STATE_VERSION, CallState, HandlerRequests
from engine.state.claims import (
    CLAIMS_VERSION,
    SCOPED_CLAIMS_VERSION,
    TRACED_CLAIMS_VERSION,
    Claims,
    StateRef,
)

examples = settings(max_examples=200, deadline=None)

# --- strategies --------------------------------------------------------------------------------

fingerprints = st.binary(min_size=8, max_size=8)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=16,
)
call_states = st.builds(
    CallState,
    answers=st.dictionaries(st.text(), st.tuples(fingerprints, json_values), max_size=5),
    asked=st.dictionaries(st.text(), fingerprints, max_size=5),
    checkpoints=st.dictionaries(st.text(), json_values, max_size=5),
    handler=st.none()
    | st.builds(
        HandlerRequests,
        methods=st.dictionaries(st.text(), st.text(), max_size=3),
        state=st.none() | st.text(),
    ),
)
claims = st.builds(
    Claims,
    issued_at=st.integers(min_value=0, max_value=2**40),
    ttl=st.integers(min_value=1, max_value=2**31),
    binding=st.binary(min_size=16, max_size=16),
    tags=st.binary(min_size=3, max_size=3),
    principal=st.none() | st.binary(min_size=20, max_size=20),
    call_id=st.binary(min_size=12, max_size=12),
    round_no=st.integers(min_value=1, max_value=2**31),
    state=st.binary(max_size=256)
    | st.builds(StateRef, st.text(min_size=1, max_size=64), st.binary(min_size=32, max_size=32)),
    trace=st.none() | st.binary(min_size=33, max_size=33),
)
msgpack_ints = st.integers(min_value=-(2**63), max_value=2**64 - 1)
msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | msgpack_ints
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.text(max_size=4) | st.binary(max_size=4) | msgpack_ints, children, max_size=3
        )
    ),
    max_leaves=24,
)

Decode = Callable[[bytes], Any]
DECODERS = [pytest.param(CallState.decode, id="state"), pytest.param(Claims.decode, id="claims")]


def decodes_or_rejects(decode: Decode, data: bytes) -> None:
    """Decoding gives a value or :class:`InvalidRequestState`; any other exception fails."""
    with contextlib.suppress(InvalidRequestState):
        decode(data)


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)  # type: ignore[no-any-return]


# --- round trips -------------------------------------------------------------------------------


@examples
@given(call_states)
def test_a_call_state_round_trips(state: CallState) -> None:
    decoded = CallState.decode(state.encode())
    assert decoded == state
    assert decoded.encode() == state.encode()  # same types too: True stays True, 1.0 stays 1.0


def test_an_empty_call_state_round_trips() -> None:
    assert CallState.decode(CallState().encode()) == CallState()


def test_a_state_whose_handler_asked_nothing_keeps_its_four_fields() -> None:
    plain = CallState(checkpoints={"once#1": 3})
    assert msgpack.unpackb(plain.encode()) == [STATE_VERSION, {}, {}, {"once#1": 3}]
    asking = CallState(handler=HandlerRequests({"who": "elicitation/create"}, "r1"))
    assert msgpack.unpackb(asking.encode())[4] == [{"who": "elicitation/create"}, "r1"]
    assert CallState.decode(asking.encode()) == asking


@pytest.mark.parametrize(
    "handler",
    [["r1"], [{"who": 1}, None], [{"who": "elicitation/create"}, 5], "r1"],
    ids=["one field", "a method not a string", "a state not a string", "not a list"],
)
def test_a_malformed_handler_record_is_rejected(handler: Any) -> None:
    with pytest.raises(InvalidRequestState):
        CallState.decode(pack([STATE_VERSION, {}, {}, {}, handler]))


@examples
@given(claims)
def test_claims_round_trip(original: Claims) -> None:
    decoded = Claims.decode(original.encode())
    assert decoded == original
    assert decoded.encode() == original.encode()


def test_claims_keep_state_by_reference_apart_from_inline_state() -> None:
    ref = StateRef("blob-1", bytes(32))
    base = Claims(1, 600, bytes(16), bytes(3), None, bytes(12), 1, ref)
    assert Claims.decode(base.encode()).state == ref
    inline = Claims(1, 600, bytes(16), bytes(3), None, bytes(12), 1, b"state")
    assert Claims.decode(inline.encode()).state == b"state"


def test_claims_without_a_trace_keep_version_1_and_its_encoding() -> None:
    """What a replica of an earlier release reads: nine parts, version 1, as before tracing."""
    untraced = Claims(1, 600, bytes(16), bytes(3), None, bytes(12), 1, b"state")
    assert msgpack.unpackb(untraced.encode()) == [
        1,
        1,
        600,
        bytes(16),
        bytes(3),
        None,
        bytes(12),
        1,
        b"state",
    ]
    traced = Claims(1, 600, bytes(16), bytes(3), None, bytes(12), 1, b"state", bytes(33))
    raw = msgpack.unpackb(traced.encode())
    assert raw[0] == TRACED_CLAIMS_VERSION and raw[9] == bytes(33) and len(raw) == 10
    assert Claims.decode(traced.encode()).trace == bytes(33)
    assert Claims.decode(claims_with()).trace is None


def test_claims_of_a_call_that_needs_scopes_carry_them() -> None:
    """Only such a call's tokens change version: every other keeps its bytes."""
    scoped = Claims(1, 600, bytes(16), bytes(3), None, bytes(12), 1, b"state", None, ("a", "b:c"))
    raw = msgpack.unpackb(scoped.encode())
    assert raw[0] == SCOPED_CLAIMS_VERSION and raw[9:] == [None, "a b:c"]
    decoded = Claims.decode(scoped.encode())
    assert decoded.scopes == ("a", "b:c") and decoded.trace is None
    traced = Claims(1, 600, bytes(16), bytes(3), None, bytes(12), 1, b"", bytes(33), ("a",))
    decoded = Claims.decode(traced.encode())
    assert decoded.scopes == ("a",) and decoded.trace == bytes(33)
    assert Claims.decode(claims_with()).scopes == ()


# --- hostile bytes -----------------------------------------------------------------------------


@pytest.mark.parametrize("decode", DECODERS)
@examples
@given(data=st.binary(max_size=512))
def test_random_bytes_decode_or_are_rejected(decode: Decode, data: bytes) -> None:
    decodes_or_rejects(decode, data)


@pytest.mark.parametrize("decode", DECODERS)
@examples
@given(value=msgpack_values)
def test_any_msgpack_value_decodes_or_is_rejected(decode: Decode, value: Any) -> None:
    decodes_or_rejects(decode, pack(value))


@examples
@given(st.lists(msgpack_values, min_size=3, max_size=3))
def test_a_state_with_the_right_version_and_wrong_parts_is_rejected_cleanly(
    parts: list[Any],
) -> None:
    decodes_or_rejects(CallState.decode, pack([STATE_VERSION, *parts]))


@examples
@given(st.lists(msgpack_values, min_size=8, max_size=8))
def test_claims_with_the_right_version_and_wrong_parts_are_rejected_cleanly(
    parts: list[Any],
) -> None:
    decodes_or_rejects(Claims.decode, pack([CLAIMS_VERSION, *parts]))


@examples
@given(call_states, st.integers(min_value=0), st.binary(min_size=1, max_size=4))
def test_a_corrupted_state_encoding_is_rejected_cleanly(
    state: CallState, at: int, junk: bytes
) -> None:
    data = state.encode()
    at %= len(data)
    decodes_or_rejects(CallState.decode, data[:at] + junk + data[at + len(junk) :])
    decodes_or_rejects(CallState.decode, data[:at])


@examples
@given(claims, st.integers(min_value=0), st.binary(min_size=1, max_size=4))
def test_a_corrupted_claims_encoding_is_rejected_cleanly(
    original: Claims, at: int, junk: bytes
) -> None:
    data = original.encode()
    at %= len(data)
    decodes_or_rejects(Claims.decode, data[:at] + junk + data[at + len(junk) :])
    decodes_or_rejects(Claims.decode, data[:at])


VALID_STATE = CallState(answers={"q": (bytes(8), {"ok": True})}, asked={"q": bytes(8)})
VALID_CLAIMS = Claims(1, 600, bytes(16), bytes(3), None, bytes(12), 1, VALID_STATE.encode())


def state_with(**parts: Any) -> bytes:
    """A packed empty state with some parts replaced."""
    fields = {"version": STATE_VERSION, "answers": {}, "asked": {}, "checkpoints": {}}
    return pack(list({**fields, **parts}.values()))


def claims_with(**parts: Any) -> bytes:
    """Packed, otherwise valid claims with some parts replaced."""
    fields = {
        "version": CLAIMS_VERSION,
        "issued_at": 1,
        "ttl": 600,
        "binding": bytes(16),
        "tags": bytes(3),
        "principal": None,
        "call_id": bytes(12),
        "round_no": 1,
        "state": b"",
    }
    return pack(list({**fields, **parts}.values()))


def test_the_shape_helpers_make_valid_encodings() -> None:
    assert CallState.decode(state_with()) == CallState()
    assert Claims.decode(claims_with()).state == b""


BAD_STATES = {
    "empty": b"",
    "nil": pack(None),
    "empty-array": pack([]),
    "newer-version": state_with(version=STATE_VERSION + 1),
    "version-0": state_with(version=0),
    "version-as-text": state_with(version="1"),
    "three-parts": pack([STATE_VERSION, {}, {}]),
    "five-parts": pack([STATE_VERSION, {}, {}, {}, {}]),
    "a-map": pack({"version": STATE_VERSION}),
    "answers-array": state_with(answers=[]),
    "asked-array": state_with(asked=[]),
    "checkpoints-array": state_with(checkpoints=[]),
    "answer-without-pair": state_with(answers={"q": b"fp"}),
    "answer-pair-of-one": state_with(answers={"q": [b"fp"]}),
    "answer-text-fingerprint": state_with(answers={"q": ["fp", 1]}),
    "answer-triple": state_with(answers={"q": [b"fp", 1, 2]}),
    "asked-text-fingerprint": state_with(asked={"q": "fp"}),
    "asked-integer-key": state_with(asked={1: b"fp"}),
    "checkpoint-keyed-by-array": b"\x94\x01\x80\x80\x81\x91\x01\x01",
    "trailing-byte": VALID_STATE.encode() + b"\x00",
    "cut-short": VALID_STATE.encode()[:-1],
    "timestamp-extension": b"\x94\x01\x80\x80\x81\xa1k\xd6\xff\x00\x00\x00\x00",
    "invalid-utf8": b"\x94\x01\x80\x80\x81\xa1k\xa2\xff\xfe",
    "never-used-byte": b"\xc1",
}


@pytest.mark.parametrize("data", BAD_STATES.values(), ids=BAD_STATES.keys())
def test_a_state_of_the_wrong_shape_is_rejected(data: bytes) -> None:
    with pytest.raises(InvalidRequestState):
        CallState.decode(data)


BAD_CLAIMS = {
    "empty": b"",
    "nil": pack(None),
    "empty-array": pack([]),
    "newer-version": claims_with(version=SCOPED_CLAIMS_VERSION + 1),
    "scoped-of-nine-parts": claims_with(version=SCOPED_CLAIMS_VERSION),
    "scoped-of-ten-parts": claims_with(version=SCOPED_CLAIMS_VERSION, trace=None),
    "scoped-of-twelve-parts": claims_with(version=SCOPED_CLAIMS_VERSION, t=None, s="a", more=0),
    "scopes-empty": claims_with(version=SCOPED_CLAIMS_VERSION, trace=None, scopes=""),
    "scopes-list": claims_with(version=SCOPED_CLAIMS_VERSION, trace=None, scopes=["a"]),
    "scopes-nil": claims_with(version=SCOPED_CLAIMS_VERSION, trace=None, scopes=None),
    "scoped-trace-text": claims_with(version=SCOPED_CLAIMS_VERSION, trace="00", scopes="a"),
    "scopes-in-version-2": claims_with(version=TRACED_CLAIMS_VERSION, trace=None, scopes="a"),
    "version-as-text": claims_with(version="1"),
    "eight-parts": pack([CLAIMS_VERSION, 1, 600, bytes(16), bytes(3), None, bytes(12), 1]),
    "ten-parts": pack([CLAIMS_VERSION, 1, 600, bytes(16), bytes(3), None, bytes(12), 1, b"", 0]),
    "traced-of-nine-parts": claims_with(version=TRACED_CLAIMS_VERSION),
    "traced-of-eleven-parts": claims_with(version=TRACED_CLAIMS_VERSION, trace=bytes(33), more=0),
    "trace-text": claims_with(version=TRACED_CLAIMS_VERSION, trace="00-trace"),
    "trace-too-long": claims_with(version=TRACED_CLAIMS_VERSION, trace=bytes(65)),
    "trace-in-version-1": claims_with(trace=bytes(33)),
    "seventeen-parts": pack([CLAIMS_VERSION, *[0] * 16]),
    "issued-at-text": claims_with(issued_at="1"),
    "ttl-float": claims_with(ttl=600.0),
    "binding-text": claims_with(binding="binding"),
    "tags-nil": claims_with(tags=None),
    "principal-text": claims_with(principal="alice"),
    "call-id-integer": claims_with(call_id=7),
    "round-nil": claims_with(round_no=None),
    "state-text": claims_with(state="state"),
    "state-ref-of-one": claims_with(state=["blob"]),
    "state-ref-bytes-id": claims_with(state=[b"id", bytes(32)]),
    "state-ref-text-digest": claims_with(state=["id", "digest"]),
    "state-map": claims_with(state={"id": b""}),
    "nine-characters": pack("s" * 9),
    "nine-bytes": pack(bytes([CLAIMS_VERSION]) * 9),
    "trailing-byte": VALID_CLAIMS.encode() + b"\x00",
    "cut-short": VALID_CLAIMS.encode()[:-1],
    "never-used-byte": b"\xc1",
}


@pytest.mark.parametrize("data", BAD_CLAIMS.values(), ids=BAD_CLAIMS.keys())
def test_claims_of_the_wrong_shape_are_rejected(data: bytes) -> None:
    with pytest.raises(InvalidRequestState):
        Claims.decode(data)


NESTING = 100_000


@pytest.mark.parametrize("decode", DECODERS)
@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\x91" * NESTING + b"\xc0", id="nested-arrays"),
        pytest.param(b"\x81\xa1k" * NESTING + b"\xc0", id="nested-maps"),
        pytest.param(
            b"\x94\x01\x80\x80\x81\xa1k" + b"\x91" * NESTING + b"\xc0", id="deep-checkpoint"
        ),
        pytest.param(b"\x99\x01" + b"\x91" * NESTING + b"\xc0", id="deep-claims"),
    ],
)
def test_deeply_nested_input_is_rejected(decode: Decode, data: bytes) -> None:
    with pytest.raises(InvalidRequestState):
        decode(data)


@pytest.mark.parametrize(
    ("decode", "lead"),
    [
        pytest.param(CallState.decode, b"\x94\x01\x80\x80\x81\xa1k", id="state"),
        pytest.param(Claims.decode, b"\x99\x01", id="claims"),
    ],
)
@pytest.mark.parametrize(
    "header",
    [
        pytest.param(b"\xdd\xff\xff\xff\xff", id="array32"),
        pytest.param(b"\xdf\xff\xff\xff\xff", id="map32"),
        pytest.param(b"\xdb\xff\xff\xff\xff", id="str32"),
        pytest.param(b"\xc6\xff\xff\xff\xff", id="bin32"),
        pytest.param(b"\xc9\xff\xff\xff\xff\x01", id="ext32"),
        pytest.param(b"\xdc\xff\xff", id="array16"),
        pytest.param(b"\xde\xff\xff", id="map16"),
    ],
)
@pytest.mark.parametrize("where", ["top", "inside"])
def test_a_huge_declared_length_is_rejected_without_allocating(
    decode: Decode, lead: bytes, header: bytes, where: str
) -> None:
    data = header + b"\x00" * 16 if where == "top" else lead + header + b"\x00" * 16
    with pytest.raises(InvalidRequestState):
        decode(data)


def test_a_state_over_the_size_limit_is_rejected_before_decoding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = CallState(checkpoints={"blob": "x" * 2000}).encode()
    assert CallState.decode(data).checkpoints["blob"] == "x" * 2000
    monkeypatch.setattr(engine.state.call, "MAX_STATE_BYTES", len(data) - 1)
    with pytest.raises(InvalidRequestState) as caught:
        CallState.decode(data)
    assert caught.value.reason == "state too large"
