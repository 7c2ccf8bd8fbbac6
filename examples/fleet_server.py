"""The fleet's example server: every kind of question, a once-per-call side effect, a slow tool.

Served by every replica of ``docker-compose.yml`` and ``deploy/fleet.py``::

    ENGINE_KEYS=... ENGINE_STORE=redis://... python -m engine serve examples/fleet_server.py

Keys come from ``ENGINE_KEYS``, the store from ``ENGINE_STORE`` and the replica id from
``ENGINE_REPLICA_ID`` (``--replica``), so this file holds no configuration of its own.

Side effects are appended to ``$FLEET_EFFECTS_DIR/<replica>.log`` (default ``.engine/effects``),
one line per effect, written with a single ``O_APPEND`` write so a killed replica loses nothing
it had reported. Give every replica the same directory (a shared volume in compose) and any of
them answers ``side_effects`` for the whole fleet.

Tools:

- ``checkout(tag, size)``: three rounds. Round 1 places a hold (``once=True``: the side effect
  happens once per call, whichever replicas serve the rounds) and asks the client for a sampled
  note of ``size`` characters and for its roots, together. Round 2 asks the user to confirm the
  note; the call's state now holds the note, so a large one goes to the store by reference.
  Round 3 runs the body, which records a ``body`` effect and returns a receipt.
- ``slow(tag, seconds)``: two rounds; the second sleeps in the body (a round in flight during a
  drain).
- ``job(tag, seconds)``: a task. Its body places a hold (``ctx.once``: a ``task-once`` effect),
  asks the user to go on, works for ``seconds``, and records a ``task-done`` effect (once,
  too). A body cancelled while it works records ``task-cancelled``.
- ``side_effects(prefix)``: what every replica recorded, per tag.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import anyio
from pydantic import BaseModel, Field

from engine import AcceptedElicitation, Context, Elicit, ListRoots, MCPServer, Resolve, Sample
from engine.types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent

TAG_PATTERN = r"^[A-Za-z0-9_.:-]{1,80}$"
Tag = Annotated[str, Field(pattern=TAG_PATTERN, description="names the call in the effect log")]
MAX_NOTE = 2_000_000
"""The largest note ``checkout`` asks for (characters); 1 MB is the fleet tests' large case."""

EFFECT_LINE = re.compile(
    r"^(?P<ts>\S+) (?P<replica>\S+) (?P<kind>\S+) (?P<tag>\S+) (?P<detail>\S*)$"
)


def effects_dir() -> Path:
    return Path(os.environ.get("FLEET_EFFECTS_DIR") or ".engine/effects")


def record_effect(replica: str, kind: str, tag: str, detail: str = "") -> None:
    """Append one effect line for this replica: a single write, so it is all or nothing."""
    directory = effects_dir()
    directory.mkdir(parents=True, exist_ok=True)
    line = f"{time.time():.6f} {replica} {kind} {tag} {detail}\n".encode()
    fd = os.open(directory / f"{replica}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


class Hold(BaseModel):
    id: str
    tag: str
    replica: str


class Confirm(BaseModel):
    send: bool = Field(description="Send the note?")
    signed_by: str = Field(description="Who signs it")


class Receipt(BaseModel):
    tag: str
    hold: str
    hold_replica: str
    note_bytes: int
    note_sha256: str
    roots: list[str]
    signed_by: str
    sent: bool
    replica: str


class Effects(BaseModel):
    once: dict[str, int]
    body: dict[str, int]
    slow_started: dict[str, int]
    slow: dict[str, int]
    task_once: dict[str, int]
    task_done: dict[str, int]
    task_cancelled: dict[str, str]
    """task tag → the replica whose body was cancelled."""
    running_on: dict[str, str]
    """slow tag → the replica whose body started it."""
    holds: dict[str, str]
    """hold id → tag, for every once-effect (a call abandoned after round 1 leaves one too)."""
    replicas: dict[str, int]


def note_prompt(tag: str, size: int) -> str:
    return f"Write a note of exactly {size} characters for {tag}."


def replica_id() -> str:
    """This process's replica id, as the engine reads it (``--replica`` sets the variable)."""
    return os.environ.get("ENGINE_REPLICA_ID") or f"pid-{os.getpid()}"


def place_hold(tag: str) -> Hold:
    """The side effect: recorded once per call (``once=True`` everywhere it is used)."""
    hold = Hold(id=uuid.uuid4().hex[:16], tag=tag, replica=replica_id())
    record_effect(hold.replica, "once", tag, hold.id)
    return hold


def write_note(tag: str, size: int) -> Sample:
    text = TextContent(text=note_prompt(tag, size))
    return Sample([SamplingMessage(role="user", content=text)], max_tokens=size)


def workspace() -> ListRoots:
    return ListRoots()


def confirm_note(
    hold: Annotated[Hold, Resolve(place_hold, once=True)],
    note: Annotated[CreateMessageResult, Resolve(write_note)],
) -> Elicit[Confirm]:
    text = note_text(note)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return Elicit(f"Send the {len(text)}-character note {digest} with hold {hold.id}?", Confirm)


def note_text(note: CreateMessageResult) -> str:
    return note.content.text if isinstance(note.content, TextContent) else ""


class Go(BaseModel):
    go: bool


def ask_go(tag: str, seconds: float) -> Elicit[Go]:
    return Elicit(f"Start the {seconds}-second job {tag}?", Go)


def build(**options: Any) -> MCPServer:
    """The server: keys, store and replica id from the environment unless ``options`` say."""
    mcp = MCPServer("Fleet", instructions="The engine's fleet example.", **options)

    @mcp.tool()
    def checkout(
        tag: Tag,
        size: Annotated[int, Field(ge=1, le=MAX_NOTE)],
        hold: Annotated[Hold, Resolve(place_hold, once=True)],
        note: Annotated[CreateMessageResult, Resolve(write_note)],
        roots: Annotated[ListRootsResult, Resolve(workspace)],
        confirm: Annotated[Confirm, Resolve(confirm_note)],
    ) -> Receipt:
        """Place a hold (once per call), get a sampled note and the roots, confirm, send."""
        text = note_text(note)
        replica = replica_id()
        record_effect(replica, "body", tag, hold.id)
        return Receipt(
            tag=tag,
            hold=hold.id,
            hold_replica=hold.replica,
            note_bytes=len(text.encode()),
            note_sha256=hashlib.sha256(text.encode()).hexdigest(),
            roots=[str(root.uri) for root in roots.roots],
            signed_by=confirm.signed_by,
            sent=confirm.send,
            replica=replica,
        )

    @mcp.tool()
    async def slow(
        tag: Tag,
        seconds: Annotated[float, Field(ge=0, le=60)],
        go: Annotated[Go, Resolve(ask_go)],
    ) -> str:
        """Ask, then work for ``seconds`` in the body: a round that is in flight for a while."""
        replica = replica_id()
        record_effect(replica, "slow-start", tag)
        await anyio.sleep(seconds)
        record_effect(replica, "slow", tag)
        return f"{tag} done on {replica} after {seconds}s"

    @mcp.tool(task=True)
    async def job(tag: Tag, seconds: Annotated[float, Field(ge=0, le=60)], ctx: Context) -> str:
        """A task: a hold (once), a question, ``seconds`` of work, a done record (once)."""
        hold = await ctx.once(place_task_hold, tag)
        answer = await ctx.elicit(f"Go on with the job {tag} (hold {hold})?", Go)
        if not (isinstance(answer, AcceptedElicitation) and answer.data.go):
            return f"{tag} stopped"
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            record_effect(replica_id(), "task-cancelled", tag)
            raise
        done_by = await ctx.once(finish_task, tag)
        return f"{tag} done (hold {hold}, finished on {done_by})"

    @mcp.tool()
    def side_effects(prefix: str = "") -> Effects:
        """Every side effect the fleet recorded (all replicas' logs), per tag."""
        return read_effects(effects_dir(), prefix)

    return mcp


def place_task_hold(tag: str) -> str:
    """A task's first side effect (in ``ctx.once``): its hold."""
    hold = uuid.uuid4().hex[:16]
    record_effect(replica_id(), "task-once", tag, hold)
    return hold


def finish_task(tag: str) -> str:
    """A task's last side effect (in ``ctx.once``): where it finished."""
    replica = replica_id()
    record_effect(replica, "task-done", tag)
    return replica


def read_effects(directory: Path, prefix: str = "") -> Effects:
    """Count the effect lines of every replica's log under ``directory``."""
    kinds = ("once", "body", "slow-start", "slow", "task-once", "task-done")
    counts: dict[str, Counter[str]] = {kind: Counter() for kind in kinds}
    holds: dict[str, str] = {}
    running_on: dict[str, str] = {}
    cancelled: dict[str, str] = {}
    replicas: Counter[str] = Counter()
    paths = sorted(directory.glob("*.log")) if directory.is_dir() else []
    for path in paths:
        for line in path.read_text(errors="replace").splitlines():
            match = EFFECT_LINE.match(line)
            if match is None or not match["tag"].startswith(prefix):
                continue
            kind = match["kind"]
            replicas[match["replica"]] += 1
            if kind in counts:
                counts[kind][match["tag"]] += 1
            if kind == "once":
                holds[match["detail"]] = match["tag"]
            if kind == "slow-start":
                running_on[match["tag"]] = match["replica"]
            if kind == "task-cancelled":
                cancelled[match["tag"]] = match["replica"]
    return Effects(
        once=dict(counts["once"]),
        body=dict(counts["body"]),
        slow_started=dict(counts["slow-start"]),
        slow=dict(counts["slow"]),
        task_once=dict(counts["task-once"]),
        task_done=dict(counts["task-done"]),
        task_cancelled=cancelled,
        running_on=running_on,
        holds=holds,
        replicas=dict(replicas),
    )


mcp = build()
