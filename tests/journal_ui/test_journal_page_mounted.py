"""The journal page mounted into a served app: behind the server's tokens, with the journal's
own scope, signed in once from the browser."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest

from engine.auth.settings import AuthSettings
from engine.debug.web.mounted import JOURNAL_SCOPE, journal_ui_app
from examples.bookshop import build
from tests.auth.test_auth_http import ISSUER, HandedOut
from tests.conftest import KEY
from tests.fleet_helpers import ROOT
from tests.http_helpers import assert_result, call, post, serving
from tests.journal_ui.helpers import BOOKSHOP, browser_page, chromium, environment, replica


def test_the_mounted_page_wants_a_token_with_the_journal_scope(tmp_path: Path) -> None:
    chromium()
    verifier = HandedOut()
    settings = AuthSettings(issuer_url=ISSUER, required_scopes=["shop"])
    mcp = build(
        keys=[KEY], token_verifier=verifier, auth=settings, store=f"sqlite:///{tmp_path / 'j.db'}"
    )
    app = mcp.streamable_http_app(mounts={"/journal": journal_ui_app(mcp)})
    shopper = verifier.issue("alice", "shop")
    operator = verifier.issue("olga", "shop", JOURNAL_SCOPE)

    with serving(app) as url:

        async def order() -> None:
            async with httpx.AsyncClient(base_url=url) as client:
                body = call("order_book", {"title": "Dune"})
                answered = await post(client, body, headers={"Authorization": f"Bearer {shopper}"})
                assert assert_result(answered)["content"][0]["text"] == "Ordered 'Dune'."

        anyio.run(order)
        assert httpx.get(f"{url}/journal/").status_code == 401
        listed = httpx.get(f"{url}/journal/", headers={"Authorization": f"Bearer {operator}"})
        assert listed.status_code == 200 and "order_book" in listed.text
        refused = httpx.get(f"{url}/journal/", headers={"Authorization": f"Bearer {shopper}"})
        assert refused.status_code == 403

        with browser_page() as page:
            response = page.goto(f"{url}/journal/")
            assert response is not None and response.status == 401
            page.fill("input[name=token]", shopper)
            page.click("button[type=submit]")
            assert JOURNAL_SCOPE in page.inner_text("#refused")
            page.fill("input[name=token]", operator)
            page.click("button[type=submit]")
            page.wait_for_url(f"{url}/journal/")
            row = page.locator("#calls tr[data-call-id]")
            assert row.count() == 1
            assert row.locator("td.principal").inner_text() == f"{ISSUER} alice"
            row.locator("a").click()
            assert "Ordered 'Dune'." in page.inner_text("#round-1")
            assert "none was" in page.inner_text("main")  # no server file to replay: no form
            assert page.locator("#replay").count() == 0


def test_mounting_needs_auth_and_a_path_prefix(tmp_path: Path) -> None:
    mcp = build(keys=[KEY], store=f"sqlite:///{tmp_path / 'j.db'}")
    with pytest.raises(ValueError, match="mount it into a server with auth"):
        journal_ui_app(mcp)
    with pytest.raises(ValueError, match="'journal' is not a path prefix; give one like"):
        mcp.streamable_http_app(mounts={"journal": mcp.streamable_http_app()})
    with pytest.raises(ValueError, match="/mcp is this app's MCP endpoint"):
        mcp.streamable_http_app(mounts={"/mcp/": mcp.streamable_http_app()})


GUARDED_SERVER = """
from engine.auth.provider import AccessToken
from engine.auth.settings import AuthSettings
from examples.bookshop import build


class Tokens:
    async def verify_token(self, token: str) -> AccessToken | None:
        scopes = {"shopper": ["shop"], "operator": ["shop", "engine:journal"]}.get(token)
        if scopes is None:
            return None
        return AccessToken(token=token, client_id=token, scopes=scopes, subject=token)


mcp = build(
    token_verifier=Tokens(),
    auth=AuthSettings(issuer_url="https://auth.example.com", required_scopes=["shop"]),
)
"""


def test_serve_journal_ui_mounts_the_page_behind_the_servers_tokens(tmp_path: Path) -> None:
    server = tmp_path / "guarded_server.py"
    server.write_text(GUARDED_SERVER)
    served = replica(str(server), "r1", tmp_path / "calls.sqlite3", tmp_path, JOURNAL="1")
    try:
        body = call("order_book", {"title": "Dune"})
        shopper = {"Authorization": "Bearer shopper"}

        async def order() -> None:
            async with httpx.AsyncClient(base_url=served.url) as client:
                assert_result(await post(client, body, headers=shopper))

        anyio.run(order)
        operator = {"Authorization": "Bearer operator"}
        listed = httpx.get(f"{served.url}/journal/", headers=operator)
        assert listed.status_code == 200 and "order_book" in listed.text
        assert httpx.get(f"{served.url}/journal/", headers=shopper).status_code == 403
        assert httpx.get(f"{served.url}/journal/").status_code == 401
    finally:
        served.stop()


def test_serve_journal_ui_refuses_a_server_without_auth(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "engine", "serve", BOOKSHOP, "--journal-ui", "--port", "0"],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--journal-ui: the journal page shows every principal's calls" in done.stderr
