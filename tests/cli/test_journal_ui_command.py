"""``python -m engine journal-ui``: a mistake on its command line is one line, as ``serve``'s
are, and the address it prints is the one it listens on."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import KEY
from tests.fleet_helpers import ROOT


def journal_ui(*args: str, home: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    env.update(ENGINE_KEYS=KEY, PYTHONPATH=str(ROOT), XDG_DATA_HOME=str(home), PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "engine", "journal-ui", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def refused(*args: str, home: Path) -> tuple[int, str]:
    process = journal_ui(*args, home=home)
    _, err = process.communicate(timeout=60)
    return process.returncode, err


@pytest.fixture
def journal(tmp_path: Path) -> str:
    path = tmp_path / "calls.db"
    sqlite3.connect(path).close()
    return f"sqlite:///{path}"


def test_a_store_url_it_cannot_open_is_one_line(tmp_path: Path) -> None:
    status, err = refused("--store", "postgres://db/calls", home=tmp_path)
    assert status == 2
    assert err.startswith("error: unsupported store URL 'postgres://db/calls'; accepted forms:")
    assert len(err.splitlines()) == 1  # no traceback, no address printed first


def test_a_port_out_of_range_is_one_line(tmp_path: Path, journal: str) -> None:
    status, err = refused("--store", journal, "--port", "99999", home=tmp_path)
    assert (status, err.strip()) == (
        2,
        "error: --port 99999: a port is a number from 1 to 65535 (0 picks any free one)",
    )


def test_a_port_in_use_is_one_line(tmp_path: Path, journal: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, err = refused("--store", journal, "--port", str(port), home=tmp_path)
    assert (status, err.strip()) == (
        2,
        f"error: port {port} on 127.0.0.1 is in use; stop the server listening there or serve "
        "on another with --port N",
    )


def test_port_0_prints_the_port_it_got_and_serves_there(tmp_path: Path, journal: str) -> None:
    process = journal_ui("--store", journal, "--port", "0", home=tmp_path)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        prefix = f"The journal of {journal}: http://127.0.0.1:"
        assert line.startswith(prefix) and line.endswith("/ (Ctrl-C to stop)\n"), line
        port = int(line[len(prefix) :].partition("/")[0])
        assert port != 0
        deadline = time.monotonic() + 30
        while True:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/", trust_env=False)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert page.status_code == 200
    finally:
        process.terminate()
        process.wait(30)
