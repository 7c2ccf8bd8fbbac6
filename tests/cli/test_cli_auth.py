"""``python -m engine`` against a server that requires a bearer token: ``call --token`` (or
``ENGINE_TOKEN``) sends it, a refusal says what to do, and ``calls`` and ``show`` name the user
who made each call."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import anyio
import pytest

from tests.auth_server import serve_authorization_server
from tests.cli.command_line import run_in_process
from tests.cli.test_cli import ANSWER_YES, serve_in_background
from tests.conftest import KEY
from tests.fleet_helpers import ROOT, free_port, healthy_until_stopped

pytestmark = pytest.mark.anyio

SERVER = """
import os

from engine import AuthSettings, JWTVerifier
from examples.bookshop import build

issuer, resource = os.environ["TEST_ISSUER"], os.environ["TEST_RESOURCE"]
mcp = build(
    token_verifier=JWTVerifier(f"{issuer}/jwks", issuer=issuer, audience=resource),
    auth=AuthSettings(issuer_url=issuer, resource_server_url=resource, required_scopes=["shop"]),
)
"""


async def engine(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m engine ARGS`` in this process, on a worker thread: the loop goes on serving
    the authorization server meanwhile."""
    return await anyio.to_thread.run_sync(lambda: run_in_process(list(args), ROOT, **env))


async def test_a_call_with_a_token_is_recorded_as_its_user(tmp_path: Path) -> None:
    app = tmp_path / "guarded_shop.py"
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
            order = ["call", url, "order_book", "--arg", "title=Neuromancer"]
            refused = await engine(*order, "--answer", ANSWER_YES)
            ada = issuer.mint("ada", audience=url)
            given = await engine(*order, "--answer", ANSWER_YES, "--token", ada)
            from_env = await engine(*order, "--answer", ANSWER_YES, ENGINE_TOKEN=ada)
            listed = await engine("list", url, "--token", ada, "--json")
            narrow = issuer.mint("ada", audience=url, scope="profile")
            forbidden = await engine(*order, "--token", narrow)
            misplaced = await engine("call", str(app), "order_book", "--token", ada)
    assert refused.returncode == 2
    assert f"HTTP 401 from {url}" in refused.stderr
    assert "pass an access token with --token TOKEN or ENGINE_TOKEN" in refused.stderr
    for done in (given, from_env):
        assert done.returncode == 0, done.stderr
        assert "Backordered 'Neuromancer'; it ships in 2-3 weeks." in done.stdout
    assert listed.returncode == 0, listed.stderr
    assert "order_book" in [tool["name"] for tool in json.loads(listed.stdout)["tools"]]
    assert forbidden.returncode == 2
    assert "HTTP 403" in forbidden.stderr and "scope" in forbidden.stderr
    assert misplaced.returncode == 2
    assert "--token is for a server reached over HTTP" in misplaced.stderr

    principal = f"{issuer.issuer} ada"
    table = await engine("calls", "--store", store, ENGINE_KEYS=KEY)
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split()[-1] == "PRINCIPAL"
    assert len(rows) == 2 and all(row.endswith(principal) for row in rows)
    rows_json = json.loads(
        (await engine("calls", "--store", store, "--json", ENGINE_KEYS=KEY)).stdout
    )
    assert [row["principal"] for row in rows_json] == [principal, principal]
    sealed = await engine("calls", "--store", store, ENGINE_KEYS="wrong-" + KEY)
    assert all(row.endswith("(sealed)") for row in sealed.stdout.splitlines()[1:3])

    shown = await engine("show", rows_json[0]["call_id"], "--store", store, ENGINE_KEYS=KEY)
    assert shown.returncode == 0, shown.stderr
    assert f"  principal {principal}" in shown.stdout.splitlines()
