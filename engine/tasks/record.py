"""A task's record: everything a replica needs to answer for the task, run its body again or
take it over from a replica that died.

The store keeps it sealed (`engine.tasks.record_store`); this module is the record and
its msgpack codec, read only after the seal verified.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import msgpack

from engine.errors import InvalidRequestState
from stores.packing import pack

RECORD_VERSION = 1
FIELDS_BEFORE_TAKEOVERS = 22
"""The length of a record written before it counted takeovers (a field was added at its end)."""
FIELDS_BEFORE_SCOPES = 23
"""The length of a record written before it kept its call's scopes (a field was added at its
end): such a task needs the scopes its tool declares now."""


class Status(enum.StrEnum):
    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})


@dataclass(slots=True)
class TaskRecord:
    """One task. Its call is the task: ``task_id`` is the call id, and each run of its body is
    one more round of that call (``round_no``, the last one begun)."""

    task_id: str
    target: str
    """The tool."""
    arguments: Any
    """As the client sent them: each run validates them again, as a round does."""
    capabilities: dict[str, Any]
    """The client capabilities of the request that made the task: what its questions may ask."""
    protocol: str
    principal: bytes | None
    """The tag of the principal that made the task; only that principal reaches it."""
    created: float
    ttl: float
    """Seconds the task is kept from ``created``."""
    poll_ms: int
    state: bytes
    """The call's state (`engine.state.call.CallState`, encoded): answers and checkpoints."""
    round_no: int
    status: Status = Status.WORKING
    updated: float = 0.0
    message: str | None = None
    owner: bytes | None = None
    """The run that holds the task, while one does (``None`` once it gave the task back)."""
    lease_until: float = 0.0
    """Unused: the hold's end is the task's due time, on the store's clock (``due_in``). Kept
    in the record's layout, as 0, for the records earlier versions wrote."""
    questions: dict[str, str] = field(default_factory=dict)
    """Outstanding questions: their wire key (in ``inputRequests``) → the question's key."""
    requests: dict[str, Any] = field(default_factory=dict)
    """Outstanding questions as the client is shown them, by wire key."""
    answers: dict[str, Any] = field(default_factory=dict)
    """Answers given and not yet used by a run, by question key."""
    issued: list[str] = field(default_factory=list)
    """Every wire key this task ever used: none is used twice."""
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    takeovers: int = 0
    """How many times a run took the task over from one that neither finished nor gave it
    back (a replica that died, paused, or lost the store)."""
    scopes: tuple[str, ...] = ()
    """The OAuth scopes the call that made the task needed (its tool's ``scopes=``): every
    request that reaches the task needs them too."""
    version: int = 0
    """The version of the stored task this record was read at (0: never stored)."""
    fence: int = 0
    """The fencing token of the task's hold, as the store keeps it: one more at each run that
    takes the task (`stores.TaskRow.fence`)."""
    due_in: float | None = None
    """When read: seconds until the task is due on the store's clock (0 or less: its hold has
    lapsed), or ``None`` when it is not due."""

    def encode(self) -> bytes:
        return pack(
            [
                RECORD_VERSION,
                self.target,
                self.arguments,
                self.capabilities,
                self.protocol,
                self.principal,
                self.created,
                self.ttl,
                self.poll_ms,
                self.state,
                self.round_no,
                self.status.value,
                self.updated,
                self.message,
                self.owner,
                self.lease_until,
                self.questions,
                self.requests,
                self.answers,
                self.issued,
                self.result,
                self.error,
                self.takeovers,
                list(self.scopes),
            ]
        )

    @classmethod
    def decode(
        cls,
        task_id: str,
        data: bytes,
        version: int,
        fence: int = 0,
        due_in: float | None = None,
    ) -> TaskRecord:
        try:
            raw = msgpack.unpackb(data, raw=False, strict_map_key=True, max_ext_len=0)
            if not isinstance(raw, list) or not raw or raw[0] != RECORD_VERSION:
                raise ValueError("record version")
            if len(raw) == FIELDS_BEFORE_TAKEOVERS:  # written before takeovers were counted
                raw.append(0)
            if len(raw) == FIELDS_BEFORE_SCOPES:  # written before scopes were kept
                raw.append([])
            (
                _,
                target,
                arguments,
                capabilities,
                protocol,
                principal,
                created,
                ttl,
                poll_ms,
                state,
                round_no,
                status,
                updated,
                message,
                owner,
                lease_until,
                questions,
                requests,
                answers,
                issued,
                result,
                error,
                takeovers,
                scopes,
            ) = raw
            if not isinstance(scopes, list) or not all(type(s) is str for s in scopes):
                raise ValueError("scopes")
            return cls(
                task_id,
                target,
                arguments,
                capabilities,
                protocol,
                principal,
                float(created),
                float(ttl),
                int(poll_ms),
                bytes(state),
                int(round_no),
                Status(status),
                float(updated),
                message,
                owner,
                float(lease_until),
                questions,
                requests,
                answers,
                issued,
                result,
                error,
                int(takeovers),
                tuple(scopes),
                version,
                fence,
                due_in,
            )
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            raise InvalidRequestState(f"task record: {type(exc).__name__}") from None

    @staticmethod
    def wire_key(key: str, issued: list[str]) -> str:
        """The ``inputRequests`` key for question ``key``, given the keys ``issued`` so far: its
        own key the first time, then a new one each time it is asked again (a key is never used
        for two requests)."""
        if key not in issued:
            return key
        n = 2
        while f"{key}.{n}" in issued:
            n += 1
        return f"{key}.{n}"


__all__ = ["TERMINAL", "Status", "TaskRecord"]
