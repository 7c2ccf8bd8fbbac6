"""The methods of the Tasks extension (2026-07-28): ``tasks/get``, ``tasks/update`` and
``tasks/cancel``, and the extension in ``server/discover``.

A request that does not declare the extension is refused with -32021 before any task is looked
up; a task that does not exist, or that another principal made, is -32602. ``tasks/result`` and
``tasks/list`` were removed from the extension, and are no methods here (-32601).
"""

from __future__ import annotations

from typing import Any

from engine.calls.runner import too_many_answers
from engine.errors import INVALID_PARAMS, METHOD_NOT_FOUND, MCPError
from engine.handlers.task_policy import EXTENSION, declares_tasks, missing_extension
from engine.protocol.common import string_param
from engine.protocol.served import Served
from engine.scope import RequestScope
from engine.tasks.service import Tasks


def with_extension(server: Served, capabilities: dict[str, Any]) -> dict[str, Any]:
    """The server's capabilities, with the extension when it has tasks: a store, and a tool
    that runs as one."""
    tasks = server.tasks
    if tasks is None or not tasks.offered:
        return capabilities
    extensions = {**capabilities.get("extensions", {}), EXTENSION: {}}
    return {**capabilities, "extensions": extensions}


def _tasks(server: Served, scope: RequestScope) -> Tasks:
    tasks = server.tasks
    if tasks is None:
        raise MCPError(
            METHOD_NOT_FOUND,
            f"Method not found: {scope.method} (this server has no store, so no tasks)",
        )
    if not declares_tasks(scope.capabilities):
        raise missing_extension(scope.method)
    return tasks


async def _get(server: Served, params: dict[str, Any], scope: RequestScope) -> dict[str, Any]:
    """The task; a request that asks for notifications (a ``progressToken`` in its ``_meta``)
    waits while the task works, and hears each change as ``notifications/tasks/status``."""
    tasks = _tasks(server, scope)
    task_id = string_param(params, "taskId")
    if scope.notify is not None and "progressToken" in scope.meta:
        return await tasks.watch_get(task_id, scope, scope.notify)
    return await tasks.get(task_id, scope)


async def _update(server: Served, params: dict[str, Any], scope: RequestScope) -> dict[str, Any]:
    tasks = _tasks(server, scope)
    task_id = string_param(params, "taskId")
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise MCPError(
            INVALID_PARAMS,
            "Invalid params: 'inputResponses' must be an object of answers keyed by the task's "
            "inputRequests keys",
        )
    limit = tasks.runner.tokens.max_input_responses
    if len(responses) > limit:
        raise too_many_answers(len(responses), limit, tasks.metrics)
    await tasks.update(task_id, responses, scope)
    return {}


async def _cancel(server: Served, params: dict[str, Any], scope: RequestScope) -> dict[str, Any]:
    tasks = _tasks(server, scope)
    await tasks.cancel(string_param(params, "taskId"), scope)
    return {}


TASK_OPERATIONS = {"tasks/get": _get, "tasks/update": _update, "tasks/cancel": _cancel}

__all__ = ["TASK_OPERATIONS", "with_extension"]
