"""What the command line prints of a journal or a server cannot act on the terminal.

A signed token whose ``sub`` holds an escape that sets the window title, one that clears the
screen, a C1 control, a bidi override and a newline followed by a line of the attacker's
making; a tool whose question, description and result text hold the same. One
``python -m engine serve`` with a SQLite store and a real authorization server; the call made
with ``python -m engine call``, then read back with ``calls``, ``show``, ``export`` and
``replay`` and listed with ``list``, each a process of its own, as an operator runs them. No
raw control, format or line-separator character reaches the output (a newline only as the
command's own line break), no line starts with the forged text, and ``--json`` decodes to the
exact values.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import unicodedata
from pathlib import Path

import anyio
import pytest

from tests.auth_server import serve_authorization_server
from tests.cli.test_cli import environment, serve_in_background
from tests.conftest import KEY
from tests.fleet_helpers import ROOT, free_port, healthy_until_stopped

pytestmark = pytest.mark.anyio

FORGED = "FORGED-LINE all calls ok"
HOSTILE = (
    "\x1b]0;pwned\x07"  # sets the terminal's title
    "\x1b[2J"  # clears the screen
    "\x9b31m"  # a C1 CSI
    "\u202etxt.exe"  # shown right to left
    "\r\n" + FORGED + "\u2028" + FORGED
)
SUBJECT = "mallory" + HOSTILE

SERVER = f"""
import os
from typing import Annotated

from pydantic import BaseModel

from engine import AuthSettings, Elicit, JWTVerifier, MCPServer, Resolve

HOSTILE = {HOSTILE!r}
issuer, resource = os.environ["TEST_ISSUER"], os.environ["TEST_RESOURCE"]
mcp = MCPServer(
    "Shelf",
    token_verifier=JWTVerifier(f"{{issuer}}/jwks", issuer=issuer, audience=resource),
    auth=AuthSettings(issuer_url=issuer, resource_server_url=resource, required_scopes=["shop"]),
)


class Note(BaseModel):
    note: str


async def ask_note() -> Elicit[Note]:
    return Elicit("A note?" + HOSTILE, Note)


@mcp.tool(description="Shelves a book." + HOSTILE)
async def shelve(note: Annotated[Note, Resolve(ask_note)]) -> str:
    return "shelved " + note.note + HOSTILE
"""
ANSWER = 'ask_note={"action": "accept", "content": {"note": "fine"}}'
UNSAFE = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def raw_controls(text: str) -> list[str]:
    """The characters of ``text`` that act on a terminal (a newline aside: the output's own)."""
    return [c for c in text if c != "\n" and unicodedata.category(c) in UNSAFE]


def assert_inert(text: str) -> None:
    assert raw_controls(text) == [], text
    assert not any(line.startswith(FORGED) for line in text.splitlines()), text


async def engine(*args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    done = await anyio.run_process(
        [sys.executable, "-m", "engine", *args],
        input=stdin.encode(),
        cwd=ROOT,
        env=environment(**env),
        check=False,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


async def test_journal_and_server_text_reaches_the_terminal_inert(tmp_path: Path) -> None:
    app = tmp_path / "shelf.py"
    app.write_text(textwrap.dedent(SERVER))
    store = f"sqlite:///{tmp_path / 'calls.sqlite3'}"
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with serve_authorization_server() as issuer:
        log = tmp_path / "serve.log"
        process = serve_in_background(
            app, port, store, log, TEST_ISSUER=issuer.issuer, TEST_RESOURCE=url
        )
        with healthy_until_stopped(process, port, log):
            token = issuer.mint(SUBJECT, audience=url)
            called = await engine("call", url, "shelve", "--answer", ANSWER, "--token", token)
            prompted = await engine("call", url, "shelve", "--token", token, stdin="a\nfine\n")
            listed = await engine("list", url, "--token", token)
            listed_json = await engine("list", url, "--token", token, "--json")
    principal = f"{issuer.issuer} {SUBJECT}"

    assert called.returncode == 0, called.stderr
    assert_inert(called.stdout + called.stderr)
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202etxt.exe" in called.stdout
    # The question's message, asked at the prompt, keeps its line break indented.
    assert prompted.returncode == 0, prompted.stderr
    assert_inert(prompted.stdout + prompted.stderr)
    assert "  A note?\\x1b]0;pwned" in prompted.stdout
    assert f"\n  {FORGED}\\u2028{FORGED}\n" in prompted.stdout
    assert listed.returncode == 0, listed.stderr
    assert_inert(listed.stdout)
    assert "Shelves a book.\\x1b]0;pwned" in listed.stdout
    assert_inert(listed_json.stdout)
    (tool,) = json.loads(listed_json.stdout)["tools"]
    assert tool["description"] == "Shelves a book." + HOSTILE

    table = await engine("calls", "--store", store, ENGINE_KEYS=KEY)
    assert table.returncode == 0, table.stderr
    assert_inert(table.stdout)
    _header, *rows = table.stdout.splitlines()  # a row a call: the newlines added none
    escaped = "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202etxt.exe\\r\\n" + FORGED + "\\u2028" + FORGED
    assert len(rows) == 2 and all(row.endswith(f"mallory{escaped}") for row in rows), rows
    listed_calls = await engine("calls", "--store", store, "--json", ENGINE_KEYS=KEY)
    assert_inert(listed_calls.stdout)
    listed_call, _ = json.loads(listed_calls.stdout)
    assert listed_call["principal"] == principal
    call_id = listed_call["call_id"]

    shown = await engine("show", call_id, "--store", store, ENGINE_KEYS=KEY)
    assert shown.returncode == 0, shown.stderr
    assert_inert(shown.stdout)
    lines = shown.stdout.splitlines()
    assert f"  principal {issuer.issuer} mallory\\x1b]0;pwned" in "\n".join(lines)
    # The result's text keeps its line break, as a line indented under the result.
    (result,) = [i for i, line in enumerate(lines) if line.startswith("  result  shelved fine")]
    assert lines[result + 1] == "          " + FORGED + "\\u2028" + FORGED
    shown_json = await engine("show", call_id, "--store", store, "--json", ENGINE_KEYS=KEY)
    assert_inert(shown_json.stdout)
    exported = await engine("export", call_id, "--store", store, ENGINE_KEYS=KEY)
    assert_inert(exported.stdout)
    assert exported.stdout == shown_json.stdout
    events = json.loads(exported.stdout)["events"]
    assert events[-1]["principal"] == principal
    assert events[-1]["response"]["content"][0]["text"] == "shelved fine" + HOSTILE

    # A replay that diverges prints the recorded result beside the live one.
    fixture = tmp_path / "call.json"
    fixture.write_text(exported.stdout, encoding="utf-8")
    changed = tmp_path / "shelf_changed.py"
    changed.write_text(app.read_text().replace('"shelved "', '"put away "'))
    replayed = await engine(
        "replay",
        "--file",
        str(fixture),
        "--app",
        str(changed),
        TEST_ISSUER=issuer.issuer,
        TEST_RESOURCE=url,
        ENGINE_KEYS=KEY,
    )
    assert replayed.returncode == 1, replayed.stderr
    assert_inert(replayed.stdout + replayed.stderr)
    assert "DIVERGED at round 2" in replayed.stdout
    assert "\\u001b]0;pwned" in replayed.stdout
