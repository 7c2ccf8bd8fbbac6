"""A server without requestState keys warns; one given a key chosen for this process does not."""

from __future__ import annotations

import logging

import pytest

from engine import MCPServer
from engine.testing import ephemeral_keys

WARNING = "No requestState keys configured"


def test_a_server_without_keys_warns_that_no_other_replica_can_resume_its_calls(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ENGINE_KEYS", raising=False)
    with caplog.at_level(logging.WARNING, logger="engine.seal"):
        MCPServer("Shop")
    assert any(WARNING in record.getMessage() for record in caplog.records)


def test_an_ephemeral_key_chosen_on_purpose_is_quiet(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ENGINE_KEYS", raising=False)
    with caplog.at_level(logging.WARNING, logger="engine.seal"):
        a, b = MCPServer("Shop", keys=ephemeral_keys()), MCPServer("Shop", keys=ephemeral_keys())
    assert not any(WARNING in record.getMessage() for record in caplog.records)
    assert a.keys.labels != b.keys.labels  # each one its own key
