"""The clients of a nemesis run: tasks and 2-round calls through nginx, each recorded in the
history as a client saw it.

- A **task** (``job``: a ``ctx.once`` hold, a question, ``seconds`` of work, a ``ctx.once``
  done step): made, its question answered, then polled until it ends or the run gives up on it.
  Its end is ``ok`` (completed, with the body's result), ``fail`` (failed, with the error the
  server gave, or never made: the server refused it plainly) or ``info`` (the client cannot
  tell: the call that makes it was lost, or it had not ended when the run gave up).
- A **call** (``slow``: a question, then a body that records a line): round 1, then round 2
  until it is answered or two minutes pass; then, a little later, round 2 is sent again
  (``replay``): an acknowledged round is answered again with the very result it was answered
  with, whatever happened meanwhile.

Requests that fail in transit (a dropped connection, a timeout, a 502 from nginx, a 503 from a
replica whose store is away) are sent again, as a client behind a proxy retries; every other
answer is taken as the server's word.
"""

from __future__ import annotations

import contextlib
import random
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from tests.faults.tasks import ENDED, GO, rpc
from tests.http_helpers import post
from tests.nemesis.history import History

RETRY_FOR = 120.0
"""Seconds a client keeps sending a request that fails in transit before it gives up (info)."""
POLL = 0.5
"""Seconds between two ``tasks/get`` of one task: the server's ``pollIntervalMs``."""


class InTransit(Exception):
    """The request may or may not have reached the server: sent again, or given up as info."""


async def ask(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC answer to ``body``, or `InTransit` for an answer that is no answer."""
    try:
        response = await post(client, body)
    except httpx.HTTPError as exc:
        raise InTransit(type(exc).__name__) from exc
    if response.status_code >= 500:
        raise InTransit(f"HTTP {response.status_code}")
    try:
        message: dict[str, Any] = response.json()
    except ValueError as exc:
        raise InTransit(f"HTTP {response.status_code}, not JSON") from exc
    return message


@dataclass
class Workload:
    """``tasks`` tasks and ``calls`` calls started evenly over ``seconds`` through ``base``."""

    base: str
    history: History
    seed: int
    tasks: int
    calls: int
    seconds: float
    task_work: tuple[float, float] = (0.5, 6.0)
    """The range of each task body's ``seconds`` of work."""
    replay_after: tuple[float, float] = (0.5, 20.0)
    """The range of seconds after its acknowledgement that a call's final round is replayed."""
    max_in_flight: int = 128
    """Tasks and calls at work at once (a call waiting for its replay is not at work)."""
    give_up: anyio.Event = field(default_factory=anyio.Event)
    """Set by the runner when the run is over: tasks still running are recorded as info."""

    async def run(self) -> None:
        """Start every task and call on its schedule; return when every one has ended."""
        random_of = random.Random(self.seed)
        starts = [(self.seconds * n / max(1, self.tasks), "task", n) for n in range(self.tasks)]
        starts += [(self.seconds * n / max(1, self.calls), "call", n) for n in range(self.calls)]
        starts.sort()
        limit = anyio.Semaphore(self.max_in_flight)
        limits = httpx.Limits(max_connections=self.max_in_flight + 32)
        began = time.monotonic()
        async with (
            httpx.AsyncClient(base_url=self.base, timeout=15, limits=limits) as client,
            anyio.create_task_group() as tg,
        ):
            for at, kind, n in starts:
                await anyio.sleep(max(0.0, at - (time.monotonic() - began)))
                await limit.acquire()
                if kind == "task":
                    work = round(random_of.uniform(*self.task_work), 2)
                    tg.start_soon(self._limited, limit, self.task(client, f"t{n:05d}", work))
                else:
                    later = random_of.uniform(*self.replay_after)
                    call = self.call(client, f"c{n:05d}", later, limit)
                    tg.start_soon(self._limited, limit, call)

    async def ask(
        self, client: httpx.AsyncClient, body: dict[str, Any], process: str
    ) -> dict[str, Any]:
        """`ask`, with a request that failed in transit recorded (``transit``: what the client
        saw, for what each fault costs)."""
        try:
            return await ask(client, body)
        except InTransit as exc:
            self.history.add(process, "info", "transit", str(exc))
            raise

    async def ask_until_answered(
        self, client: httpx.AsyncClient, body: dict[str, Any], process: str
    ) -> dict[str, Any]:
        """`ask`, sent again while it fails in transit, for up to `RETRY_FOR` seconds."""
        deadline = time.monotonic() + RETRY_FOR
        pause = 0.1
        while True:
            try:
                return await self.ask(client, body, process)
            except InTransit:
                if time.monotonic() > deadline or self.give_up.is_set():
                    raise
            await anyio.sleep(pause)
            pause = min(pause * 2, 2.0)

    async def _limited(self, limit: anyio.Semaphore, job: Any) -> None:
        try:
            await job
        finally:
            limit.release()

    # --- a task ---------------------------------------------------------------------------

    async def task(self, client: httpx.AsyncClient, tag: str, work: float) -> None:
        process = f"task-{tag}"
        self.history.add(process, "invoke", "task", tag, seconds=work)
        made = rpc("tools/call", {"name": "job", "arguments": {"tag": tag, "seconds": work}})
        try:
            answer = await self.ask(
                client, made, process
            )  # not sent again: a second one is another task
        except InTransit as exc:
            self.history.add(process, "info", "task", tag, task_id=None, error=str(exc))
            return
        result = answer.get("result")
        if not isinstance(result, dict) or result.get("resultType") != "task":
            error = answer.get("error") or result
            self.history.add(process, "fail", "task", tag, task_id=None, error=error)
            return
        task_id = str(result["taskId"])
        answered: float | None = None
        last: dict[str, Any] = {}
        while not self.give_up.is_set():
            try:
                got = await self.ask(client, rpc("tasks/get", {"taskId": task_id}), process)
            except InTransit:
                await anyio.sleep(POLL)
                continue
            if "error" in got:
                last = {"error": got["error"]}
                if got["error"].get("code") == -32602:
                    break  # the task is not found: it was lost
                await anyio.sleep(POLL)
                continue
            last = got["result"]
            if last.get("status") == "input_required":
                answers = dict.fromkeys(last.get("inputRequests") or {}, GO)
                update = rpc("tasks/update", {"taskId": task_id, "inputResponses": answers})
                with contextlib.suppress(InTransit):  # answering twice is harmless
                    await self.ask(client, update, process)
                answered = answered or self.history.now()
            elif last.get("status") in ENDED:
                break
            await anyio.sleep(POLL)
        self._record_task_end(process, tag, task_id, last, answered)

    def _record_task_end(
        self,
        process: str,
        tag: str,
        task_id: str,
        last: dict[str, Any],
        answered: float | None,
    ) -> None:
        status = last.get("status")
        waited = None if answered is None else round(self.history.now() - answered, 3)
        common = {"task_id": task_id, "status": status, "waited": waited}
        if status == "completed":
            content = (last.get("result") or {}).get("content") or [{}]
            text = content[0].get("text")
            self.history.add(process, "ok", "task", tag, text=text, **common)
        elif status == "failed":
            error = last.get("error") or (last.get("result") or {}).get("content")
            message = error.get("message") if isinstance(error, dict) else error
            self.history.add(process, "fail", "task", tag, error=message, **common)
        else:
            self.history.add(process, "info", "task", tag, last=last, **common)

    # --- a call ---------------------------------------------------------------------------

    async def call(
        self, client: httpx.AsyncClient, tag: str, replay_after: float, limit: anyio.Semaphore
    ) -> None:
        process = f"call-{tag}"
        self.history.add(process, "invoke", "call", tag)
        params: dict[str, Any] = {"name": "slow", "arguments": {"tag": tag, "seconds": 0}}
        try:
            first = await self.ask(client, rpc("tools/call", params), process)
        except InTransit as exc:
            self.history.add(process, "info", "call", tag, error=str(exc), round=1)
            return
        asked = first.get("result")
        if not isinstance(asked, dict) or asked.get("resultType") != "input_required":
            self.history.add(process, "fail", "call", tag, error=first.get("error"), round=1)
            return
        (key,) = asked["inputRequests"]
        params["inputResponses"] = {key: GO}
        params["requestState"] = asked["requestState"]
        final = rpc("tools/call", params)
        try:
            answer = await self.ask_until_answered(client, final, process)
        except InTransit as exc:
            self.history.add(process, "info", "call", tag, error=str(exc), round=2)
            return
        result = answer.get("result")
        if not isinstance(result, dict) or result.get("resultType") != "complete":
            self.history.add(process, "fail", "call", tag, error=answer.get("error") or result)
            return
        self.history.add(process, "ok", "call", tag, result=result)
        limit.release()  # its place goes to the next one while it waits
        try:
            await anyio.sleep(replay_after)
        finally:
            await limit.acquire()
        self.history.add(process, "invoke", "replay", tag)
        try:
            again = await self.ask_until_answered(client, final, process)
        except InTransit as exc:
            self.history.add(process, "info", "replay", tag, error=str(exc))
            return
        if isinstance(again.get("result"), dict):
            self.history.add(process, "ok", "replay", tag, result=again["result"])
        else:
            self.history.add(process, "fail", "replay", tag, error=again.get("error"))
