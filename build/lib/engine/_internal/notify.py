"""The callback a transport gives a request to send it notifications on its own stream."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
"""``notify(method, params)``: send one notification to the client of this request."""
