"""The journal's web page in a real browser: the calls list and its filters, a call served by
two replicas on its timeline, values that must stay inert, the export, replay against changed
code, and the page without the keys or with the wrong ones."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from engine import MCPServer
from engine.testing import Client
from stores import SQLiteStore
from tests.conftest import KEY, OTHER_KEY
from tests.fleet_helpers import ROOT
from tests.http_helpers import assert_result, first_round, post, retry
from tests.journal_ui.helpers import (
    BOOKSHOP,
    Served,
    browser_page,
    chromium,
    environment,
    export_cli,
    journal_page,
    outside_the_browser,
    replica,
)

HOSTILE_TEXT = (
    "<script>window.pwned = 1</script>\x1b]0;owned\x07\x1b[31mred\u202e" + "x" * 1_000_000
)


def hostile_server(db: Path) -> MCPServer:
    mcp = MCPServer(
        "Hostile", keys=[KEY], store=f"sqlite:///{db}", journal_max_event_bytes=8_000_000
    )

    @mcp.tool()
    async def echo(text: str) -> str:
        """Says it back."""
        return text

    return mcp


async def make_calls(r1: Served, r2: Served, db: Path) -> dict[str, str]:
    """A 2-round call served by r1 then r2, one left waiting, and one holding hostile text."""
    made: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=r1.url) as a, httpx.AsyncClient(base_url=r2.url) as b:
        asked = await first_round(a)
        done = assert_result(await post(b, retry(asked["requestState"])))
        assert done["content"][0]["text"] == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
        made["two_replicas"] = await last_call(db, "order_book", 2)
        await first_round(a, "The Difference Engine")
        made["waiting"] = await last_call(db, "order_book", 1, {made["two_replicas"]})
    async with Client(hostile_server(db)) as client:
        await client.call_tool("echo", {"text": HOSTILE_TEXT})
    made["hostile"] = await last_call(db, "echo", 1)
    return made


async def last_call(db: Path, tool: str, rounds: int, besides: Collection[str] = ()) -> str:
    """The id of the newest call of ``tool`` but those ``besides``, once its journal has
    ``rounds`` rounds (the journal is written after a round answers)."""
    store = SQLiteStore(db)
    try:
        with anyio.fail_after(20):
            while True:
                found = await store.calls(target=tool, limit=1)
                if found and found[0].call_id not in besides and found[0].events == rounds:
                    return found[0].call_id
                await anyio.sleep(0.05)
    finally:
        await store.aclose()


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    chromium()
    root = tmp_path_factory.mktemp("journal-page")
    db = root / "calls.sqlite3"
    started: list[Served] = []
    try:
        r1 = replica(BOOKSHOP, "r1", db, root)
        started.append(r1)
        r2 = replica(BOOKSHOP, "r2", db, root)
        started.append(r2)
        calls = anyio.run(make_calls, r1, r2, db)
        page = journal_page(db, root, "--app", BOOKSHOP)
        started.append(page)
        yield {"db": db, "root": root, "calls": calls, "page": page, "r1": r1, "r2": r2}
    finally:
        for served in started:
            served.stop()


def rows(page: Any) -> list[str]:
    return [
        str(id)
        for id in page.locator("#calls tr[data-call-id]").evaluate_all(
            "rows => rows.map(row => row.dataset.callId)"
        )
    ]


def test_the_calls_list_shows_every_call_and_keeps_up_as_calls_arrive(
    journal: dict[str, Any],
) -> None:
    calls = journal["calls"]
    with browser_page() as page:
        page.goto(journal["page"].url + "/")
        assert rows(page) == [calls["hostile"], calls["waiting"], calls["two_replicas"]]
        row = page.locator(f'tr[data-call-id="{calls["two_replicas"]}"]')
        assert row.locator("td.tool").inner_text() == "order_book"
        assert row.locator("td.rounds").inner_text() == "2"
        assert row.locator("td.last").inner_text() == "complete"
        assert row.locator("td.server").inner_text() == "Bookshop"
        assert page.locator(f'tr[data-call-id="{calls["hostile"]}"] td.server').inner_text() == (
            "Hostile"
        )

        async def one_more() -> str:
            async with httpx.AsyncClient(base_url=journal["r2"].url) as b:
                await first_round(b, "Count Zero")
            return await last_call(journal["db"], "order_book", 1, set(calls.values()))

        newest = outside_the_browser(one_more)
        page.locator(f'tr[data-call-id="{newest}"]').wait_for()  # no reload: the page polls
        assert rows(page)[0] == newest


def test_the_calls_list_filters_by_tool_outcome_and_server(journal: dict[str, Any]) -> None:
    calls = journal["calls"]
    with browser_page() as page:
        page.goto(journal["page"].url + "/")
        page.fill("input[name=tool]", "echo")
        page.click("#filters button")
        page.wait_for_url("**tool=echo**")
        assert rows(page) == [calls["hostile"]]

        page.fill("input[name=tool]", "order_book")
        page.select_option("select[name=outcome]", "complete")
        page.click("#filters button")
        page.wait_for_url("**outcome=complete**")
        assert rows(page) == [calls["two_replicas"]]

        page.goto(journal["page"].url + "/?server=Hostile&since=1h")
        assert rows(page) == [calls["hostile"]]
        page.goto(journal["page"].url + "/?tool=order_book&limit=1")
        newest = rows(page)
        page.click("#older")
        assert rows(page) != newest and len(rows(page)) == 1
        page.click("#newest")
        assert rows(page) == newest
        page.goto(journal["page"].url + "/?since=yesterday")
        assert "Filters not applied: give a time like" in page.inner_text("p.problem")
        page.goto(journal["page"].url + "/?outcome=bogus")
        assert "Filters not applied: outcome: give one of complete" in page.inner_text("p.problem")

        page.goto(journal["page"].url + "/?until=2001-01-01")
        assert rows(page) == []
        assert "No recorded calls match." in page.locator("#calls").inner_text()


def test_a_call_served_by_two_replicas_has_two_lanes(journal: dict[str, Any]) -> None:
    call_id = journal["calls"]["two_replicas"]
    with browser_page() as page:
        page.goto(journal["page"].url + "/")
        page.click(f'tr[data-call-id="{call_id}"] a')
        page.wait_for_url(f"**/call/{call_id}")
        lanes = page.locator("svg.timeline g.lane.replica")
        assert lanes.evaluate_all("lanes => lanes.map(l => l.dataset.lane)") == ["r1", "r2"]
        assert page.locator("svg.timeline g.lane.client g.gap").count() == 1
        assert page.locator("svg.timeline g.lane[data-lane=r1] g.bar").count() == 1
        assert page.locator("svg.timeline g.lane[data-lane=r2] g.bar").count() == 1
        first, second = page.locator("section.round").all()
        assert "replica r1" in first.locator("h3").inner_text()
        assert "Question confirm_backorder" in first.inner_text()
        assert "out of stock" in first.inner_text()
        assert "replica r2" in second.locator("h3").inner_text()
        assert "Answer confirm_backorder" in second.inner_text()
        assert "Backordered" in second.inner_text()
        shot = journal["root"] / "journal-call.png"
        page.screenshot(path=str(shot), full_page=False)
        if os.environ.get("ENGINE_UPDATE_SCREENSHOTS"):
            shutil.copy(shot, ROOT / "docs" / "journal-call.png")


def test_markup_escapes_and_a_megabyte_stay_inert(journal: dict[str, Any]) -> None:
    call_id = journal["calls"]["hostile"]
    with browser_page() as page:
        page.goto(journal["page"].url + "/")  # the list holds the value's call too
        started = time.monotonic()
        page.goto(f"{journal['page'].url}/call/{call_id}")
        loaded = time.monotonic() - started
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.locator("script").count() == 1  # the page's own
        arguments = page.locator("pre.json").first.inner_text()
        assert "<script>window.pwned = 1</script>" in arguments
        assert "\\u001b]0;owned\\u0007\\u001b[31mred\\u202e" in arguments
        assert "\x1b" not in page.content()
        assert "more characters" in arguments  # the megabyte is cut, the export keeps it
        assert len(page.content()) < 200_000
        assert page.evaluate("1 + 1") == 2  # the page still answers
        assert loaded < 15, loaded  # generous: it is a few kilobytes, not a megabyte


def test_the_export_downloads_what_the_export_command_prints(journal: dict[str, Any]) -> None:
    call_id = journal["calls"]["two_replicas"]
    with browser_page() as page:
        page.goto(f"{journal['page'].url}/call/{call_id}")
        with page.expect_download() as download_info:
            page.click("#export")
        download = download_info.value
        saved = journal["root"] / "downloaded.json"
        download.save_as(saved)
    assert download.suggested_filename == f"call-{call_id}.json"
    assert saved.read_text() == export_cli(journal["db"], call_id)
    assert json.loads(saved.read_text())["call_id"] == call_id


def changed_bookshop(where: Path) -> Path:
    """The bookshop with its question reworded: a deploy that strands waiting calls."""
    source = (ROOT / "examples" / "bookshop.py").read_text()
    assert "Order anyway?" in source
    (where / "bookshop_changed.py").write_text(source.replace("Order anyway?", "Wait for it?"))
    server = where / "changed_server.py"
    server.write_text("from bookshop_changed import build\n\nmcp = build()\n")
    return server


def test_replay_from_the_page_shows_the_first_divergence_side_by_side(
    journal: dict[str, Any],
) -> None:
    call_id = journal["calls"]["two_replicas"]
    changed = changed_bookshop(journal["root"])
    store_before = export_cli(journal["db"], call_id)
    with browser_page() as page:
        page.goto(f"{journal['page'].url}/call/{call_id}")
        assert page.input_value("#replay-app") == BOOKSHOP  # the one the page was started with
        page.click("#replay button")
        page.locator("#replay-verdict").wait_for(timeout=60_000)
        assert page.inner_text("#replay-verdict") == "Every replayed round matches the record."

        page.fill("#replay-app", str(changed))
        page.click("#replay button")
        page.locator("#divergence").wait_for(timeout=60_000)
        assert page.inner_text("#replay-verdict") == "The live code diverges."
        assert "round 1, question confirm_backorder" in page.inner_text("#divergence")
        changed_rows = page.locator("table.diff tr.changed")
        assert "Order anyway?" in changed_rows.locator("td.recorded").all_inner_texts()[0]
        assert "Wait for it?" in changed_rows.locator("td.live").all_inner_texts()[0]

        page.fill("#replay-app", str(journal["root"] / "missing.py"))
        page.click("#replay button")
        page.locator("#replay-problem").wait_for(timeout=60_000)
        assert "missing.py is not a file" in page.inner_text("#replay-problem")
    assert export_cli(journal["db"], call_id) == store_before  # nothing written


def test_a_replay_not_posted_by_the_page_is_refused(journal: dict[str, Any]) -> None:
    call_id = journal["calls"]["two_replicas"]
    url = f"{journal['page'].url}/call/{call_id}/replay"
    refused = httpx.post(url, data={"app": BOOKSHOP})
    assert refused.status_code == 403
    elsewhere = httpx.get(journal["page"].url + "/", headers={"Host": "attacker.example"})
    assert elsewhere.status_code == 421


def test_without_keys_values_are_sealed_and_with_wrong_keys_one_line_says_so(
    journal: dict[str, Any],
) -> None:
    call_id = journal["calls"]["two_replicas"]
    root = journal["root"]
    without = journal_page(journal["db"], root, keys=False)
    env = environment(ENGINE_KEYS=OTHER_KEY)
    wrong = Served(
        ["journal-ui", "--store", f"sqlite:///{journal['db']}"],
        env,
        root / "journal-ui-wrong.log",
        "/static/journal.js",
    )
    try:
        with browser_page() as page:
            response = page.goto(f"{without.url}/call/{call_id}")
            assert response is not None and response.status == 200
            assert page.locator("section.round .sealed").count() == 2
            assert page.locator("svg.timeline g.lane.replica").count() == 2
            assert "sealed with the server's keys" in page.inner_text("#keys-problem")

            response = page.goto(f"{wrong.url}/call/{call_id}")
            assert response is not None and response.status == 200
            problem = page.inner_text("#keys-problem")
            assert "not among the keys given" in problem
            assert "\n" not in problem
            page.goto(f"{wrong.url}/")
            assert call_id in rows(page)
    finally:
        without.stop()
        wrong.stop()
