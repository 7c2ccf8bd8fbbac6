"""A store that refuses writes makes /healthz 503, and it is 200 again once writes succeed.

The full disk is SQLite's own: ``max_page_count`` on the store's connections, so writes fail
with ``SQLITE_FULL`` ("database or disk is full") as they do on a full filesystem.
"""

from pathlib import Path

import pytest

from examples.bookshop import build
from stores import SQLiteStore
from tests.conftest import KEY
from tests.http_helpers import asgi_client, assert_error, first_round, post, retry

pytestmark = pytest.mark.anyio


def cap(store: SQLiteStore, pages: int | None) -> None:
    """Let the file grow to ``pages`` pages at most (``None``: its current size)."""
    for conn in (store._conn, store._quick):
        assert conn is not None
        limit = pages if pages is not None else conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {limit}")


async def test_a_full_sqlite_file_makes_healthz_503_until_writes_succeed(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "calls.db")
    mcp = build(keys=[KEY], store=store)
    async with mcp.running(), asgi_client(mcp.streamable_http_app()) as shop:
        assert (await shop.get("/healthz")).json()["store"] == "ok"
        cap(store, None)
        refused = None
        for n in range(500):  # answered rounds are recorded: they take the free pages
            first = await first_round(shop, title=f"Book {n}")
            answered = await post(shop, retry(first["requestState"], title=f"Book {n}"))
            if answered.status_code != 200:
                assert_error(answered, 503, -32603)
                refused = n
                break
        assert refused is not None, "the capped file never filled up"
        down = await shop.get("/healthz")
        assert down.status_code == 503, down.text
        assert down.json()["status"] == "unavailable"
        reason = down.json()["store"]
        assert "health write" in reason and "full" in reason, reason
        assert (await mcp.core.health())[0] is False

        cap(store, 1_000_000)  # room again
        back = await shop.get("/healthz")
        assert back.status_code == 200, back.text
        assert back.json()["store"] == "ok"
        first = await first_round(shop, title="After")
        assert (await post(shop, retry(first["requestState"], title="After"))).status_code == 200
