"""The journal page mounted into a served app: behind the server's tokens, with the journal's
own scope, signed in once from the browser."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest

from engine.auth.settings import AuthSettings
from engine.debug.web.mounted import JOURNAL_SCOPE, journal_ui_app
from examples.bookshop import build
from tests.auth.test_auth_http import ISSUER, HandedOut
from tests.conftest import KEY
from tests.http_helpers import assert_result, call, post, serving
from tests.journal_ui.helpers import browser_page, chromium


def test_the_mounted_page_wants_a_token_with_the_journal_scope(tmp_path: Path) -> None:
    chromium()
    verifier = HandedOut()
    settings = AuthSettings(issuer_url=ISSUER, required_scopes=["shop"])
    mcp = build(
        keys=[KEY], token_verifier=verifier, auth=settings, store=f"sqlite:///{tmp_path / 'j.db'}"
    )
    app = mcp.streamable_http_app()
    app.mount("/journal", journal_ui_app(mcp))
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


def test_mounting_needs_auth(tmp_path: Path) -> None:
    mcp = build(keys=[KEY], store=f"sqlite:///{tmp_path / 'j.db'}")
    with pytest.raises(ValueError, match="mount it into a server with auth"):
        journal_ui_app(mcp)
