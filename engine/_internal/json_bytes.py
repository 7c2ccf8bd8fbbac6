"""Compact JSON bytes: the one serializer for what the engine writes, on the wire and in the
journal, so a cached response, a journal entry and a back-channel request are encoded alike."""

from __future__ import annotations

from pydantic_core import to_json

dumps = to_json
"""``dumps(value)``: compact JSON bytes (pydantic-core's serializer, called directly)."""
