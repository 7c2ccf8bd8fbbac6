"""A recorded call as data: the journal events of one call, read from a store or a fixture.

The engine journals every round it serves (its questions, the answers it accepted, the values
``once`` steps recorded, its result, the code it ran), of every call or of the share
``journal_sample`` picks. :class:`RecordedCall` holds one call's events as JSON-compatible
dicts and reads them as :class:`RecordedRound` s; it comes from a store (:func:`load_call`) or
from an exported fixture (:func:`load_fixture`), and exports itself as that fixture.
Replaying (:mod:`engine.debug.replay`) and rendering (:mod:`engine.debug.render`) both start here.

A store keeps each event's payload sealed with the server's key ring, so reading a call from a
store takes the server's keys; an exported fixture holds it opened.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine._internal.inert import inert_json
from engine.errors import InvalidRequestState
from engine.protocol.modern import MODERN
from engine.state.seal import KeyRing, KeySpec, record_key_id
from engine.store_services.journal_records import is_sealed, open_rounds, outline_of
from stores import JournalStore

Keys = KeyRing | Sequence[KeySpec] | None
"""The keys a journal is read with: the server's ring, or its secrets as ``keys=`` takes them."""

HOW_TO_GIVE_KEYS = (
    "pass the server's keys: --keys-file PATH, ENGINE_KEYS or --keys on the command line, "
    "keys=[...] in Python"
)

SEALED_PAYLOAD = "sealed_payload"
"""Marks an event read without the keys that open its payload (:meth:`RecordedCall.readable`)."""

FORMAT = "engine-call/1"
"""The ``format`` of an exported call (a fixture)."""


class ReplayError(Exception):
    """The call cannot be replayed or read; the message says what to do about it.

    Defined here, where a journal or fixture is first found unreadable; :mod:`engine.debug.replay`
    re-exports it.
    """


@dataclass(frozen=True, slots=True)
class RecordedRound:
    """One journal event, as the replayer and the timeline read it."""

    round: int
    kind: str
    ts: float | None
    method: str
    target: str
    arguments: Any
    questions: dict[str, Any]
    answers: dict[str, Any]
    checkpoints: dict[str, Any]
    response: Any
    """The result as the client received it (decoded JSON), ``_meta`` included."""
    duration_ms: float | None
    replica: str | None
    code: str | None
    protocol: str | None = None
    """The protocol version the round was served in (absent from older journals)."""
    truncated: dict[str, int] = field(default_factory=dict)
    """Payload fields left out of the journal as too large (``journal_max_event_bytes``), with
    their sizes in bytes: the round cannot be replayed exactly."""
    redacted: tuple[str, ...] = ()
    """Arguments marked ``Redacted()``: never journaled, so replay needs them given."""
    principal: str | None = None
    """Who made the round (a server with ``auth``: the token's issuer and subject)."""

    @classmethod
    def of(cls, event: Mapping[str, Any]) -> RecordedRound:
        number = event.get("round")
        if isinstance(number, bool) or not isinstance(number, int):
            raise ReplayError(
                f"a journal event has no round number ({sorted(event)}); was it written by "
                "this engine?"
            )
        ts = event.get("ts")
        duration = event.get("duration_ms")
        return cls(
            round=number,
            kind=str(event.get("kind") or "?"),
            ts=float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else None,
            method=str(event.get("method") or "tools/call"),
            target=str(event.get("target") or "?"),
            arguments=event.get("arguments"),
            questions=_mapping(event.get("questions")),
            answers=_mapping(event.get("answers")),
            checkpoints=_mapping(event.get("checkpoints")),
            response=event.get("response"),
            duration_ms=float(duration) if isinstance(duration, int | float) else None,
            replica=event.get("replica") if isinstance(event.get("replica"), str) else None,
            code=event.get("code") if isinstance(event.get("code"), str) else None,
            protocol=event.get("protocol") if isinstance(event.get("protocol"), str) else None,
            truncated={
                str(k): int(v)
                for k, v in _mapping(event.get("truncated")).items()
                if isinstance(v, int)
            },
            redacted=tuple(str(name) for name in event.get("redacted") or () if name),
            principal=event.get("principal") if isinstance(event.get("principal"), str) else None,
        )

    @property
    def answered_in_place(self) -> bool:
        """Served in 2025-11-25: its questions were asked and answered within the round."""
        return self.protocol is not None and self.protocol != MODERN

    @property
    def result(self) -> Any:
        """The result without ``_meta`` (what the code decided, not where it ran)."""
        if isinstance(self.response, dict):
            return {k: v for k, v in self.response.items() if k != "_meta"}
        return self.response


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


@dataclass(slots=True)
class RecordedCall:
    """Every journaled round of one call, from a store or from an exported fixture."""

    call_id: str
    events: list[dict[str, Any]]
    """The journal events as JSON-compatible dicts (the response decoded), in append order."""
    rounds: list[RecordedRound] = field(init=False)
    """The rounds by number (append order within one): replicas append each round's event on
    their own, so a round's event may be appended after the next round's."""

    def __post_init__(self) -> None:
        if not self.events:
            raise ReplayError(f"call {self.call_id} has no journal events")
        recorded = [RecordedRound.of(event) for event in self.events]
        self.rounds = sorted(recorded, key=lambda each: each.round)

    @property
    def events_by_round(self) -> list[dict[str, Any]]:
        """The events in the order of :attr:`rounds`: each round's event at its index."""
        return sorted(self.events, key=lambda event: int(event["round"]))

    @property
    def principal(self) -> str | None:
        """Who made the call: the principal its first round was made by."""
        return next((r.principal for r in self.rounds if r.principal is not None), None)

    @classmethod
    def from_events(
        cls, call_id: str, events: Iterable[Mapping[str, Any]], *, keys: Keys = None
    ) -> RecordedCall:
        """From a store's records (bytes and all), their rounds opened with ``keys``."""
        ring = keys if isinstance(keys, KeyRing) or keys is None else KeyRing(list(keys))
        return cls(
            call_id,
            [_jsonable_event(r) for record in events for r in opened(call_id, record, ring)],
        )

    @classmethod
    def readable(
        cls, call_id: str, events: Iterable[Mapping[str, Any]], *, keys: Keys = None
    ) -> tuple[RecordedCall, str | None]:
        """From a store's events, for reading rather than replaying: the events the keys open
        are opened, the others keep their fields in the clear and are marked
        ``"sealed_payload": True``; with why the first of those did not open (``None`` when
        every one did)."""
        ring = keys if isinstance(keys, KeyRing) or keys is None else KeyRing(list(keys))
        read: list[dict[str, Any]] = []
        problem: str | None = None
        for record in events:
            try:
                read.extend(_jsonable_event(r) for r in opened(call_id, record, ring))
            except ReplayError as exc:
                problem = problem or str(exc)
                read.extend(
                    {**_jsonable_event(clear), SEALED_PAYLOAD: True}
                    for clear in _clear_rounds(call_id, record)
                )
        return cls(call_id, read), problem

    @classmethod
    def from_document(cls, document: Any, source: str = "the fixture") -> RecordedCall:
        """From what :meth:`to_document` produced (an exported fixture)."""
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ReplayError(
                f"{source} is not an exported call (expected a JSON object with "
                f'"format": "{FORMAT}"); make one with `python -m engine export CALL_ID`'
            )
        events = document.get("events")
        call_id = document.get("call_id")
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            raise ReplayError(f'{source} has no "events" list of journal events')
        return cls(str(call_id or "?"), [_jsonable_event(event) for event in events])

    @classmethod
    def load(cls, path: str | Path) -> RecordedCall:
        """Read an exported fixture."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ReplayError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise ReplayError(f"{path} is not JSON ({exc})") from None
        return cls.from_document(document, str(path))

    def to_document(self) -> dict[str, Any]:
        return {"format": FORMAT, "call_id": self.call_id, "events": self.events}

    def dumps(self) -> str:
        """The fixture text: indented JSON, one call, its control and bidi characters escaped
        (it is printed by ``show --json`` and ``export``)."""
        return inert_json(self.to_document(), indent=2) + "\n"

    @property
    def first(self) -> RecordedRound:
        return self.rounds[0]

    @property
    def method(self) -> str:
        return self.first.method

    @property
    def target(self) -> str:
        return self.first.target

    @property
    def arguments(self) -> Any:
        """The arguments, if the server recorded them (``None`` otherwise)."""
        for recorded in self.rounds:
            if recorded.arguments is not None:
                return recorded.arguments
        return None

    @property
    def arguments_missing(self) -> str:
        """Why :attr:`arguments` is ``None``, and what records them next time."""
        for recorded in self.rounds:
            size = recorded.truncated.get("arguments")
            if size is not None:
                return (
                    f"left out of the journal: {size} bytes, over journal_max_event_bytes; serve "
                    "with a larger one (ENGINE_JOURNAL_MAX_EVENT_BYTES) to record them"
                )
        return "not recorded: serve with ENGINE_JOURNAL_ARGUMENTS=1 to record them"

    def ordered_rounds(self) -> list[RecordedRound]:
        """Rounds 1..n, one event each; :class:`ReplayError` if the journal has a gap."""
        by_round: dict[int, RecordedRound] = {}
        for recorded in self.rounds:
            by_round.setdefault(recorded.round, recorded)  # a retried append is kept once
        numbers = sorted(by_round)
        missing = sorted(set(range(1, numbers[-1] + 1)) - set(numbers))
        if missing:
            raise ReplayError(
                f"the journal of call {self.call_id} lacks round(s) {missing}: they expired "
                "(journal_ttl) or were not written while the store was down, so the call "
                "cannot be replayed"
            )
        return [by_round[n] for n in numbers]


def opened(call_id: str, event: Mapping[str, Any], keys: KeyRing | None) -> list[Mapping[str, Any]]:
    """The rounds of a store's record, opened; :class:`ReplayError` saying which keys it needs
    when ``keys`` do not open it."""
    if not isinstance(event, dict) or not is_sealed(event):
        return [event]  # written before journals were sealed, or by hand
    where = f"round {event['round']} of call {call_id}" if "round" in event else f"call {call_id}"
    if keys is None:
        raise ReplayError(
            f"the journal of {where} is sealed with the server's keys: {HOW_TO_GIVE_KEYS}"
        )
    try:
        return list(open_rounds(event, keys))
    except InvalidRequestState as exc:
        sealed = event.get("sealed")
        kid = record_key_id(sealed) if isinstance(sealed, bytes) else "?"
        if exc.reason == "unknown key":
            ephemeral = (
                " The server had no keys configured, so it sealed with a key that lived only "
                "as long as its process: configure keys (`python -m engine keygen`, ENGINE_KEYS) "
                "for journals that outlive it."
                if event.get("ephemeral_key")
                else ""
            )
            raise ReplayError(
                f"the journal of {where} is sealed with key id {kid}, which is not among the "
                f"keys given (ids {', '.join(keys.labels)}): pass the keys the server had when "
                f"it served the call; a key removed from the ring no longer opens what it "
                f"sealed.{ephemeral}"
            ) from None
        raise ReplayError(
            f"the journal of {where} does not open with the given keys (key id {kid}): it was "
            "altered, or sealed with another secret; pass the server's exact keys"
        ) from None


def _clear_rounds(call_id: str, record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What a record that does not open tells of its rounds in the clear."""
    try:
        return outline_of(dict(record))
    except InvalidRequestState:
        raise ReplayError(
            f"the journal of call {call_id} is malformed: a record's outline of its rounds "
            "does not read"
        ) from None


def _jsonable_event(event: Mapping[str, Any]) -> dict[str, Any]:
    out = {str(k): jsonable(v) for k, v in event.items()}
    response = event.get("response")
    if isinstance(response, bytes | bytearray):
        try:
            out["response"] = json.loads(response)
        except ValueError:
            out["response"] = {"$bytes": base64.b64encode(response).decode("ascii")}
    return out


def jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    return value


async def load_call(store: JournalStore, call_id: str, *, keys: Keys = None) -> RecordedCall:
    """A call's journal from a store, opened with the server's ``keys``; :class:`ReplayError`
    when the store does not have it or the keys do not open it."""
    events = await store.events(call_id)
    if not events:
        raise ReplayError(
            f"no call {call_id!r} in the store (its journal may have expired after journal_ttl, "
            "or the server journals only some calls: journal_sample); list the recorded calls "
            "with `python -m engine calls`"
        )
    return RecordedCall.from_events(call_id, events, keys=keys)


def load_fixture(path: str | Path) -> RecordedCall:
    """An exported call (``python -m engine export CALL_ID > fixture.json``)."""
    return RecordedCall.load(path)


__all__ = [
    "FORMAT",
    "HOW_TO_GIVE_KEYS",
    "SEALED_PAYLOAD",
    "Keys",
    "RecordedCall",
    "RecordedRound",
    "ReplayError",
    "jsonable",
    "load_call",
    "load_fixture",
]
