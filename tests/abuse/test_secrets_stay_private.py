"""Secrets and recorded calls stay with the server's user: ``--keys-file`` keeps the keys out of
the process list, and the SQLite store's files are the owner's only (0600, a directory it
creates 0700), whatever the umask. Driven through the real ``python -m engine serve``."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.cli.test_cli import environment
from tests.conftest import KEY
from tests.fleet_helpers import ROOT, free_port, healthy_until_stopped
from tests.http_helpers import assert_result, call, headers_for, request, text_of

YES = {"action": "accept", "content": {"confirm": True}}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextlib.contextmanager
def served(*options: str, log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``python -m engine serve`` of the bookshop under umask 022, until it answers /healthz."""
    port = free_port()
    argv = [sys.executable, "-m", "engine", "serve", "examples/bookshop_server.py"]
    with log.open("ab") as out:
        process = subprocess.Popen(
            [*argv, "--port", str(port), *options],
            cwd=ROOT,
            env=environment(),
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: os.umask(0o022),
        )
    with healthy_until_stopped(process, port, log):
        yield f"http://127.0.0.1:{port}", process


def post(base: str, body: dict[str, object]) -> httpx.Response:
    return httpx.post(f"{base}/mcp", json=body, headers=headers_for(body), timeout=30)


def test_keys_from_a_file_stay_out_of_ps_and_a_second_process_resumes_the_call(
    tmp_path: Path,
) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"\n  k1={KEY}  \n\n")
    keys.chmod(0o600)
    store = tmp_path / "private" / "calls.sqlite3"  # the store creates the directory
    options = ["--keys-file", str(keys), "--store", f"sqlite:///{store}"]
    log = tmp_path / "serve.log"
    body = call("order_book", {"title": "Neuromancer"}, capabilities={"elicitation": {}})
    with served(*options, log=log) as (base, process):
        cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        assert KEY.encode() not in cmdline
        assert b"--keys-file" in cmdline
        first = assert_result(post(base, body))
        assert first["resultType"] == "input_required"
        state = first["requestState"]
        files = [store, store.with_name(store.name + "-wal"), store.with_name(store.name + "-shm")]
        for path in files:
            assert mode(path) == 0o600, (path, oct(mode(path)))
        assert mode(store.parent) == 0o700
    params = {
        "name": "order_book",
        "arguments": {"title": "Neuromancer"},
        "inputResponses": {"confirm_backorder": YES},
        "requestState": state,
    }
    with served(*options, log=log) as (base, process):  # another process, the same file
        assert KEY.encode() not in Path(f"/proc/{process.pid}/cmdline").read_bytes()
        done = assert_result(post(base, request("tools/call", params)))
    assert done.get("resultType", "complete") == "complete", done
    assert "Neuromancer" in text_of(done)
    assert "visible" not in log.read_text() and "process list" not in log.read_text()
    assert mode(store) == 0o600


def test_keys_on_the_command_line_warn_once(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with served("--keys", KEY, "--store", "none", log=log):
        pass
    text = log.read_text()
    assert text.count("process list") == 1, text
    assert "--keys-file" in text and "ENGINE_KEYS" in text
    assert KEY not in text


def test_inspect_takes_a_keys_file(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY}\n")
    log = tmp_path / "serve.log"
    body = call("order_book", {"title": "Neuromancer"}, capabilities={"elicitation": {}})
    with served("--keys-file", str(keys), "--store", "none", log=log) as (base, _):
        state = assert_result(post(base, body))["requestState"]
    opened = subprocess.run(
        [sys.executable, "-m", "engine", "inspect", state, "--keys-file", str(keys)],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert opened.returncode == 0, opened.stderr
    assert opened.stderr == ""
    assert "confirm_backorder" in opened.stdout
