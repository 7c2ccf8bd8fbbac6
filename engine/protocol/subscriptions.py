"""``subscriptions/listen``: the only place a 2026-07-28 client hears about list changes.

A subscription acknowledges what it will deliver, then forwards each matching notification,
tagged with its ``subscriptionId`` (the JSON-RPC id of the listen request), until the client
goes away. Notifications reach the server from any replica through its bus. With the Tasks
extension, a client may also ask for ``notifications/tasks/status`` of the tasks it names
(``taskIds``, or ``tasksStatus`` as the extension's schema calls it): each change of such a
task comes with the task as ``tasks/get`` would show it. The tasks named are checked as a
``tasks/get`` checks them, before the acknowledgement.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from engine._internal.budgets import over_budget
from engine.errors import INVALID_PARAMS, METHOD_NOT_FOUND, MCPError
from engine.handlers.task_policy import declares_tasks, missing_extension
from engine.protocol.jsonrpc import Message, notification_bytes, parse
from engine.protocol.middleware import message_context, through_middleware
from engine.protocol.modern import (
    MODERN,
    Exchange,
    check_version,
    claimed_version,
    read_meta,
)
from engine.protocol.served import Served
from engine.scope import RequestScope
from engine.tasks.service import STATUS_NOTIFICATION, Tasks

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
_TASK_FILTERS = ("taskIds", "tasksStatus")
"""How a client names the tasks it wants to hear about (the extension's draft and schema)."""
_LIST_FLAGS = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}


class Subscription:
    def __init__(
        self,
        server: Served,
        subscription_id: Any,
        honoured: dict[str, Any],
        scope: RequestScope | None = None,
    ) -> None:
        self.server = server
        self.subscription_id = subscription_id
        self.honoured = honoured
        self.scope = scope
        """The listen request: whose tasks it may hear about."""
        self.methods = {method for flag, method in _LIST_FLAGS.items() if honoured.get(flag)}
        self.uris = set(honoured.get("resourceSubscriptions", []))

    def wants(self, method: str, params: dict[str, Any]) -> bool:
        if method == "notifications/resources/updated":
            return params.get("uri") in self.uris
        return method in self.methods

    def frame(self, method: str, params: dict[str, Any]) -> bytes:
        tagged = dict(params)
        tagged["_meta"] = {**params.get("_meta", {}), SUBSCRIPTION_ID: self.subscription_id}
        return notification_bytes(method, tagged)

    async def run(self, sender: MemoryObjectSendStream[bytes]) -> None:
        """Send the acknowledgement, then every wanted notification, until cancelled."""

        async def listener(method: str, params: dict[str, Any]) -> None:
            if self.wants(method, params):
                # A stream that cannot keep up loses notifications; the server never blocks.
                with contextlib.suppress(anyio.WouldBlock):
                    sender.send_nowait(self.frame(method, params))

        with contextlib.ExitStack() as watching:
            await self._serve(sender, listener, watching)

    async def _serve(
        self,
        sender: MemoryObjectSendStream[bytes],
        listener: Callable[[str, dict[str, Any]], Awaitable[None]],
        watching: contextlib.ExitStack,
    ) -> None:
        async with sender:
            tasks = self.server.tasks
            if tasks is not None and self.scope is not None:
                for key in _TASK_FILTERS:
                    for task_id in self.honoured.get(key, ()):
                        watching.enter_context(
                            tasks.watching(task_id, self._watcher(tasks, task_id, sender))
                        )
            await sender.send(
                self.frame(
                    "notifications/subscriptions/acknowledged", {"notifications": self.honoured}
                )
            )
            self.server.add_listener(listener)
            try:
                await anyio.sleep_forever()
            finally:
                self.server.remove_listener(listener)

    async def admit(self) -> None:
        """Keep, of the tasks named, those the listener may hear about (another principal's
        task, or one that does not exist, is left out of the acknowledgement), before anything
        is streamed: a token without the scopes a named task's call needed is refused
        (:class:`InsufficientScope`), as a ``tasks/get`` of it would be."""
        tasks = self.server.tasks
        scope = self.scope
        if tasks is None or scope is None:
            return
        for key in _TASK_FILTERS:
            if key in self.honoured:
                self.honoured[key] = [
                    task_id
                    for task_id in self.honoured[key]
                    if await tasks.reachable(task_id, scope)
                ]

    def _watcher(
        self, tasks: Tasks, task_id: str, sender: MemoryObjectSendStream[bytes]
    ) -> Callable[[], Awaitable[None]]:
        assert self.scope is not None
        scope = self.scope

        async def changed() -> None:
            try:
                task = await tasks.get(task_id, scope)
            except MCPError:
                return  # expired meanwhile
            with contextlib.suppress(anyio.WouldBlock):
                sender.send_nowait(self.frame(STATUS_NOTIFICATION, task))

        return changed


Stream = Callable[[Subscription], Awaitable[None]]
"""The transport's part of a listen: runs the subscription on the request's stream until the
client goes away."""


async def listen(server: Served, raw: Any, exchange: Exchange, stream: Stream) -> bytes | None:
    """Serve a listen request: its subscription opened and handed to ``stream``.

    Raises :class:`MCPError` when the request is refused (before anything was streamed). With
    middleware, a middleware may answer in the server's place: its serialised result is
    returned, for the transport to send as the response; ``None`` when the stream ran.
    """
    if not server.middleware:
        subscription = open_subscription(server, raw, exchange)
        await subscription.admit()
        await stream(subscription)
        return None
    message = parse(raw)
    streamed = False

    async def serve(rewritten: Message) -> bytes:
        nonlocal streamed
        subscription = _open(server, rewritten, exchange)
        await subscription.admit()
        streamed = True
        await stream(subscription)
        return b"{}"

    version = claimed_version(message) or MODERN
    ctx = message_context(
        server, message, version, exchange.headers, access_token=exchange.access_token
    )
    answered = await through_middleware(server, message, ctx, serve, modern=True)
    return None if streamed else answered


def open_subscription(server: Served, raw: Any, exchange: Exchange) -> Subscription:
    """Validate a listen request; the subscription to run, or :class:`MCPError`."""
    return _open(server, parse(raw), exchange)


def _open(server: Served, message: Message, exchange: Exchange) -> Subscription:
    if not server.serves_subscriptions:
        # The server was made with subscriptions=False: the method is not served at all.
        raise MCPError(METHOD_NOT_FOUND, "Method not found", "subscriptions/listen")
    params = message.params
    version, _, _ = read_meta(params)
    if exchange.validate is not None and exchange.headers is not None:
        exchange.validate(exchange.headers, message.method, params, version)
    check_version(version)
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise MCPError(
            INVALID_PARAMS,
            "Invalid params: 'notifications' (a filter object) is "
            'required, e.g. {"toolsListChanged": true}',
        )
    for flag in _LIST_FLAGS:
        if flag in wanted and type(wanted[flag]) is not bool:
            raise MCPError(INVALID_PARAMS, f"Invalid params: {flag!r} must be true or false")
    honoured: dict[str, Any] = {flag: True for flag in _LIST_FLAGS if wanted.get(flag) is True}
    uris = wanted.get("resourceSubscriptions")
    if uris is not None and (
        not isinstance(uris, list) or not all(isinstance(u, str) for u in uris)
    ):
        raise MCPError(
            INVALID_PARAMS,
            "Invalid params: 'resourceSubscriptions' must be a list of resource URIs (strings)",
        )
    if uris:
        honoured["resourceSubscriptions"] = list(uris)
    _, capabilities, meta = read_meta(params)
    for key in _TASK_FILTERS:
        task_ids = wanted.get(key)
        if task_ids is None:
            continue
        tasks = server.tasks
        if isinstance(task_ids, list) and tasks is not None:
            limit = tasks.settings.max_listen_ids
            if len(task_ids) > limit:
                raise over_budget(
                    tasks.metrics,
                    INVALID_PARAMS,
                    "max_listen_task_ids",
                    limit,
                    f"Invalid params: {key!r} names {len(task_ids)} tasks, more than one listen "
                    "may; listen to fewer, or open another subscription for the rest",
                )
        if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
            raise MCPError(INVALID_PARAMS, f"Invalid params: {key!r} must be a list of task ids")
        if not declares_tasks(capabilities):
            raise missing_extension(f"notifications of tasks ({key})")
        if server.tasks is not None:
            honoured[key] = list(dict.fromkeys(task_ids))
    scope = RequestScope(
        message.id, message.method, version, capabilities, exchange.headers, meta, None
    )
    scope.access_token = exchange.access_token  # whose tasks it may hear about
    return Subscription(server, message.id, honoured, scope)
