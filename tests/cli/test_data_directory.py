"""Where the default journal and the kept keys live: the directories docs/running.md names."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine.cli.shared import user_data_dir


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME")
    return tmp_path


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="the Linux and Unix directories")
def test_the_data_directory_follows_xdg_data_home_when_it_is_absolute(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert user_data_dir() == home / ".local/share/mcp-engine"
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    assert user_data_dir() == home / "data/mcp-engine"
    monkeypatch.setenv("XDG_DATA_HOME", "data")  # relative: the spec says to ignore it
    assert user_data_dir() == home / ".local/share/mcp-engine"
    monkeypatch.setenv("XDG_DATA_HOME", "")
    assert user_data_dir() == home / ".local/share/mcp-engine"


@pytest.mark.skipif(sys.platform != "linux", reason="platformdirs following XDG_DATA_HOME")
def test_on_macos_a_directory_in_application_support_is_still_found(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where platformdirs follows XDG_DATA_HOME on macOS, as it does on Linux (here), the
    directory an earlier engine made in Application Support keeps its journal and keys."""
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    assert user_data_dir() == home / "data/mcp-engine"
    kept = home / "Library/Application Support/mcp-engine"
    kept.mkdir(parents=True)
    assert user_data_dir() == kept
    (home / "data/mcp-engine").mkdir(parents=True)  # one made under XDG_DATA_HOME wins
    assert user_data_dir() == home / "data/mcp-engine"
