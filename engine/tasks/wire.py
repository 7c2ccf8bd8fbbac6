"""A task on the wire: the ``CreateTaskResult`` that hands it to the client, and the
``DetailedTask`` that ``tasks/get`` and status notifications show (see docs/tasks.md for the
fields, which follow the conformance harness where the SEP text differs)."""

from __future__ import annotations

import datetime
import math
from typing import Any

from engine.tasks.record import Status, TaskRecord


def iso(timestamp: float) -> str:
    """ISO 8601 in UTC, to the millisecond: ``2026-07-28T10:30:00.125Z``."""
    moment = datetime.datetime.fromtimestamp(timestamp, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def task_fields(record: TaskRecord) -> dict[str, Any]:
    """What every task shape carries: the ``Task`` of the extension."""
    fields: dict[str, Any] = {
        "taskId": record.task_id,
        "status": record.status.value,
        "createdAt": iso(record.created),
        "lastUpdatedAt": iso(record.updated),
        "ttlMs": max(1, math.ceil(record.ttl * 1000)),
        "pollIntervalMs": record.poll_ms,
    }
    if record.message is not None:
        fields["statusMessage"] = record.message
    return fields


def detailed(record: TaskRecord) -> dict[str, Any]:
    """The task as ``tasks/get`` answers it: with its questions, result or error inline."""
    fields = task_fields(record)
    if record.status is Status.INPUT_REQUIRED:
        fields["inputRequests"] = dict(record.requests)
    elif record.status is Status.COMPLETED and record.result is not None:
        fields["result"] = record.result
    elif record.status is Status.FAILED and record.error is not None:
        fields["error"] = record.error
    return fields


__all__ = ["detailed", "iso", "task_fields"]
