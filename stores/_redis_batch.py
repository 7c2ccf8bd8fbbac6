"""Round scripts of concurrent requests, sent to Redis as shared pipelines.

Every retry of a multi-round call claims its round and every finished round keeps its response:
two Redis round trips on the request's path. A round trip costs far more CPU than the script it
carries (the socket write, the wake-up, the read), and under load many requests need one at the
same moment. So while one pipeline is in flight, the scripts issued meanwhile queue up and go
together in the next one: the busier the server, the more requests share each round trip, and a
lone request waits for nothing but its own.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import anyio
from redis import exceptions as rx
from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from ._redis_client import UNAVAILABLE

log = logging.getLogger(__name__)

MAX_BATCH = 256
"""Scripts per pipeline; a longer queue goes in the next one."""


class BatcherStopped(Exception):
    """The batcher stopped before sending this script; the caller sends it by itself."""


@dataclass(slots=True)
class _Queued:
    script: AsyncScript
    keys: list[str]
    args: list[Any]
    reply: asyncio.Future[Any]


class ScriptBatcher:
    """Queues scripts and sends them, a pipeline at a time, while :meth:`run` runs."""

    def __init__(self, client: Redis, op_timeout: float) -> None:
        self._client = client
        self._op_timeout = op_timeout
        self._queue: list[_Queued] = []
        self._ready = asyncio.Event()
        self._stopped = False

    def submit(self, script: AsyncScript, keys: list[str], args: list[Any]) -> asyncio.Future[Any]:
        # A caller that gives up (its deadline, a hang-up) cancels its future: the script may
        # still run, as a script sent on its own may after its caller stopped listening.
        """The script's reply (or its error), once the pipeline that carries it is back."""
        if self._stopped:
            raise BatcherStopped
        reply = asyncio.get_running_loop().create_future()
        self._queue.append(_Queued(script, keys, args, reply))
        self._ready.set()
        return reply

    async def run(self) -> None:
        """Send what is queued, one pipeline at a time, until cancelled."""
        try:
            while True:
                await self._ready.wait()
                self._ready.clear()
                while self._queue:
                    batch = self._queue[:MAX_BATCH]
                    del self._queue[:MAX_BATCH]
                    await self._send(batch)
        finally:
            self._stopped = True
            for queued in self._queue:
                if not queued.reply.done():
                    queued.reply.set_exception(BatcherStopped())
            self._queue.clear()

    async def _send(self, batch: list[_Queued]) -> None:
        live = [queued for queued in batch if not queued.reply.done()]  # a caller gave up
        try:
            # Shielded: the pipeline carries other requests' scripts, which must get replies.
            with anyio.CancelScope(shield=True), anyio.fail_after(self._op_timeout):
                replies = await self._pipeline([(q.script, q.keys, q.args) for q in live])
        except (*UNAVAILABLE, TimeoutError) as exc:
            for queued in live:
                _settle(queued.reply, exc)
            return
        except Exception as exc:  # a bug or a refused reply: each caller sees it, none hangs
            log.warning("a pipeline of %d round scripts failed", len(live), exc_info=True)
            for queued in live:
                _settle(queued.reply, exc)
            return
        for queued, reply in zip(live, replies, strict=True):
            _settle(queued.reply, reply)

    async def _pipeline(self, calls: list[ScriptCall]) -> list[Any]:
        return await run_scripts(self._client, calls)


ScriptCall = tuple[AsyncScript, list[str], list[Any]]
"""A script with its keys and arguments."""


async def run_scripts(client: Redis, calls: list[ScriptCall]) -> list[Any]:
    """Replies of scripts sent in one pipeline by their SHA, errors in place of failed ones.

    Scripts Redis does not know (it restarted, or was flushed) are loaded and sent again; the
    pipeline never spends a round trip asking which scripts are loaded.
    """
    replies = await _evalsha(client, calls)
    unloaded = [i for i, reply in enumerate(replies) if isinstance(reply, rx.NoScriptError)]
    if unloaded:
        retry = [calls[i] for i in unloaded]
        for script in {id(call[0]): call[0] for call in retry}.values():
            await client.script_load(script.script)
        for i, reply in zip(unloaded, await _evalsha(client, retry), strict=True):
            replies[i] = reply
    return replies


async def _evalsha(client: Redis, calls: list[ScriptCall]) -> list[Any]:
    async with client.pipeline(transaction=False) as pipe:
        for script, keys, args in calls:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
    return replies


def _settle(reply: asyncio.Future[Any], value: Any) -> None:
    if reply.done():
        return
    if isinstance(value, BaseException):
        reply.set_exception(value)
    else:
        reply.set_result(value)
