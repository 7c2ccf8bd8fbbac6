"""Log lines an operator's pipeline can parse: ``ENGINE_LOG_FORMAT=json``.

A replica's log is read by machines first (a log shipper, a query across the fleet), so in JSON
each record is one object on one line, carrying the call it belongs to: the call id, the round,
the tool, the principal and the replica, whichever replica logs it. Those facts come from the
round being run (:func:`enter_round`), so a tool's own ``logging`` calls carry them too.

What never goes into a line: tokens, keys, arguments, answers. The engine logs none of them, and
an exception is written as its type and stack without its message, which may quote a value
(a validation error does).
"""

from __future__ import annotations

import contextvars
import json
import logging
import logging.config
import os
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

LOG_FORMAT_ENV = "ENGINE_LOG_FORMAT"
LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@dataclass(frozen=True, slots=True)
class RoundFields:
    """What a log line says of the round it was written in."""

    call_id: str
    round: int
    tool: str
    principal: str | None
    replica: str


_ROUND: contextvars.ContextVar[RoundFields | None] = contextvars.ContextVar(
    "engine_round", default=None
)
_replica = ""
_naming = False
"""The replica of lines written outside any round (startup, the store's health)."""


def naming_rounds() -> bool:
    """Whether any handler formats JSON lines: only then is a round named (a cost on every
    round otherwise paid for nothing)."""
    return _naming


def enter_round(fields: RoundFields) -> None:
    """Lines written from here on in this task (the round's, the tool's, those of its response
    and its journal write) name this round. Each request runs in a task of its own, which the
    setting does not outlive; a later round in the same task replaces it."""
    _ROUND.set(fields)


def set_replica(replica: str) -> None:
    global _replica
    _replica = replica


def log_format(environ: Mapping[str, str] = os.environ) -> LogFormat:
    """``ENGINE_LOG_FORMAT``: ``text`` (the default) or ``json``."""
    value = environ.get("ENGINE_LOG_FORMAT", "").strip().lower() or "text"
    if value not in ("text", "json"):
        raise ValueError(f"{LOG_FORMAT_ENV} must be 'text' or 'json', not {value[:40]!r}")
    return "json" if value == "json" else "text"


class JsonLines(logging.Formatter):
    """One JSON object per record: ``ts``, ``level``, ``logger``, ``message``, ``replica``, and
    ``call_id``, ``round``, ``tool``, ``principal`` inside a round; ``error`` (``type`` and
    ``stack``) for an exception."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        global _naming
        super().__init__(*args, **kwargs)
        _naming = True

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = _ROUND.get()
        if fields is None:
            line["replica"] = _replica
        else:
            line["replica"] = fields.replica
            line["call_id"] = fields.call_id
            line["round"] = fields.round
            line["tool"] = fields.tool
            if fields.principal is not None:
                line["principal"] = fields.principal
        if record.exc_info and record.exc_info[0] is not None:
            kind, _, tb = record.exc_info
            line["error"] = {
                "type": f"{kind.__module__}.{kind.__qualname__}",
                "stack": traceback.format_tb(tb),
            }
        return json.dumps(line, ensure_ascii=False, default=str)


def _timestamp(created: float) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created % 1 * 1000):03d}Z"


def logging_config(fmt: LogFormat, level: str = "INFO") -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for the root logger and uvicorn's, all on stderr in
    ``fmt``: what ``serve`` applies, and what ``mcp.run`` hands uvicorn in JSON."""
    formatter: dict[str, Any] = {"()": JsonLines} if fmt == "json" else {"format": TEXT_FORMAT}
    handler = {
        "class": "logging.StreamHandler",
        "formatter": "engine",
        "stream": "ext://sys.stderr",
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"engine": formatter},
        "handlers": {"engine": handler},
        "root": {"handlers": ["engine"], "level": level},
        "loggers": {
            name: {"handlers": [], "level": "INFO", "propagate": True}
            for name in ("uvicorn", "uvicorn.error", "uvicorn.access")
        },
    }


def configure(fmt: LogFormat, level: str = "INFO") -> None:
    logging.config.dictConfig(logging_config(fmt, level))


def configure_unless_configured(level: str) -> None:
    """``MCPServer(log_level=...)``: the root logger on stderr at ``level`` (in the format
    ``ENGINE_LOG_FORMAT`` names), unless the program has configured logging already, whose own
    set-up then wins."""
    if logging.getLogger().handlers:
        return
    configure(log_format(), level.upper())


__all__ = [
    "LOG_FORMAT_ENV",
    "JsonLines",
    "LogFormat",
    "RoundFields",
    "configure",
    "configure_unless_configured",
    "enter_round",
    "log_format",
    "logging_config",
    "naming_rounds",
    "set_replica",
]
