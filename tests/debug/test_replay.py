"""Replay: a recorded call re-run against the live code, and the first place it diverges."""

import copy
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import pytest
from pydantic import BaseModel

from engine import Context, Elicit, MCPServer, Resolve, ToolError
from engine.debug.journal import RecordedCall, load_call
from engine.debug.render import timeline
from engine.state.seal import KeyRing
from engine.store_services.journal_records import open_rounds
from engine.testing import Client, ReplayError, replay, replay_call
from examples import bookshop
from examples.bookshop import build
from stores import MemoryStore, Store
from tests.conftest import KEY

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GOOD = FIXTURES / "order_book_neuromancer.json"
REWORDED = FIXTURES / "order_book_reworded.json"
YES = {"action": "accept", "content": {"confirm": True}}
NORTH = {"action": "accept", "content": {"store": "north"}}


# --- a tool with every kind of recorded step ------------------------------------------------------

RESERVATIONS: list[str] = []
RECEIPTS: list[str] = []


class Confirm(BaseModel):
    confirm: bool


class Pickup(BaseModel):
    store: Literal["north", "south"] = "north"


async def reserve(title: str) -> str:
    RESERVATIONS.append(title)  # a side effect: once per call
    return f"R-{len(RESERVATIONS)}"


async def confirm_hold(
    title: str, reservation: Annotated[str, Resolve(reserve, once=True)]
) -> Elicit[Confirm]:
    return Elicit(f"Hold {title!r} as {reservation}?", Confirm)


def print_receipt(title: str) -> str:
    RECEIPTS.append(title)  # a side effect in the body: once per call
    return f"receipt for {title}"


def library(store: Store | None = None, *, broken: bool = False) -> MCPServer:
    """Three rounds: a once resolver and a question, then a ctx.once step and a body question."""
    mcp = MCPServer("Library", keys=[KEY], store=store, journal_arguments=True)

    @mcp.tool()
    async def hold(
        title: str,
        reservation: Annotated[str, Resolve(reserve, once=True)],
        ok: Annotated[Confirm, Resolve(confirm_hold)],
        ctx: Context,
    ) -> str:
        """Hold a book for pickup."""
        if not ok.confirm:
            return "Nothing held."
        receipt = await ctx.once(print_receipt, title)
        pickup = await ctx.elicit("Where do you pick it up?", Pickup)
        if broken:
            raise RuntimeError("the pickup desk is closed")
        return f"{title} held as {reservation} at {pickup.data.store} ({receipt})"

    return mcp


def answers(params: dict[str, Any]) -> dict[str, Any]:
    return NORTH if params["message"].startswith("Where") else YES


async def record(app: MCPServer, store: Store, tool: str, arguments: dict[str, Any]) -> str:
    """Run one call against ``app`` and return its call id."""
    async with Client(app, elicitation=answers) as client:
        await client.call_tool(tool, arguments)
    [summary] = await store.calls(limit=1)
    return summary.call_id


async def snapshot(store: Store) -> list[Any]:
    return [(c, await store.events(c.call_id)) for c in await store.calls(limit=1000)]


# --- replaying a recorded call --------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_recorded_three_round_call_replays_identically_without_side_effects() -> None:
    store = MemoryStore()
    app = library(store)
    call_id = await record(app, store, "hold", {"title": "Dune"})
    call = await load_call(store, call_id, keys=[KEY])
    assert [r.kind for r in call.rounds] == ["input_required", "input_required", "complete"]
    side_effects = (list(RESERVATIONS), list(RECEIPTS))
    before = await snapshot(store)

    report = await replay_call(app, call)

    assert report.ok, report.render()
    assert [(c.round, c.live_kind, c.asked) for c in report.rounds] == [
        (1, "input_required", ["confirm_hold"]),
        (2, "input_required", ["elicit#2"]),
        (3, "complete", []),
    ]
    assert (list(RESERVATIONS), list(RECEIPTS)) == side_effects  # once steps came from the record
    assert await snapshot(store) == before  # nothing written to the store
    assert "All 3 rounds match the record." in report.render()


@pytest.mark.anyio
async def test_a_reworded_question_is_the_divergence_with_its_round_and_key() -> None:
    store = MemoryStore()
    call_id = await record(
        build(keys=[KEY], store=store, journal_arguments=True),
        store,
        "order_book",
        {"title": "Neuromancer"},
    )
    call = await load_call(store, call_id, keys=[KEY])

    async def reworded(
        title: str, stock: Annotated[bookshop.Stock, Resolve(bookshop.check_stock)]
    ) -> bookshop.Backorder | Elicit[bookshop.Backorder]:
        return Elicit(f"{title!r} is sold out. Wait for it?", bookshop.Backorder)

    live = build(keys=[KEY])
    live.dependency_overrides[bookshop.confirm_backorder] = reworded
    report = await replay_call(live, call)

    assert not report.ok
    divergence = report.divergence
    assert divergence is not None
    assert (divergence.round, divergence.what, divergence.key) == (
        1,
        "question",
        "confirm_backorder",
    )
    assert divergence.recorded["params"]["message"].endswith("Order anyway?")
    assert divergence.live["params"]["message"] == "'Neuromancer' is sold out. Wait for it?"
    assert report.code_changed
    text = report.render()
    assert "the code of order_book changed since this call was recorded" in text
    assert "DIVERGED at round 1, question 'confirm_backorder'" in text
    assert '-    "message": "\'Neuromancer\' is out of stock' in text


@pytest.mark.anyio
async def test_a_changed_result_is_reported_on_the_last_round_as_a_diff() -> None:
    store = MemoryStore()
    call_id = await record(library(store), store, "hold", {"title": "Dune"})
    call = await load_call(store, call_id, keys=[KEY])

    live = MCPServer("Library", keys=[KEY])

    @live.tool()
    async def hold(
        title: str,
        reservation: Annotated[str, Resolve(reserve, once=True)],
        ok: Annotated[Confirm, Resolve(confirm_hold)],
        ctx: Context,
    ) -> str:
        receipt = await ctx.once(print_receipt, title)
        pickup = await ctx.elicit("Where do you pick it up?", Pickup)
        return f"{title} is waiting at {pickup.data.store} ({receipt}, {reservation})"

    report = await replay_call(live, call)

    assert report.divergence is not None
    assert (report.divergence.round, report.divergence.what) == (3, "result")
    assert [c.matched for c in report.rounds] == [True, True, False]
    assert '+      "text": "Dune is waiting at north' in report.render()


@pytest.mark.anyio
async def test_a_recorded_answer_the_live_question_rejects_is_named() -> None:
    call = RecordedCall.load(GOOD)
    document = copy.deepcopy(call.to_document())
    document["events"][1]["answers"]["confirm_backorder"]["content"]["confirm"] = "maybe"
    tampered = RecordedCall.from_document(document)

    report = await replay_call(build(keys=[KEY]), tampered)

    assert report.divergence is not None
    assert (report.divergence.round, report.divergence.key) == (2, "confirm_backorder")
    assert "the recorded answer was not accepted" in report.divergence.summary


def pages_server(store: Store | None = None) -> MCPServer:
    mcp = MCPServer("Shop", keys=[KEY], store=store, journal_arguments=True)
    pages = {"Dune": 412}

    @mcp.tool()
    async def reading_time(title: str, pages_per_day: int) -> str:
        """Days to read a book."""
        return f"{pages[title] / pages_per_day:.0f} days"

    return mcp


@pytest.mark.anyio
async def test_a_handler_that_raises_shows_its_traceback() -> None:
    store = MemoryStore()
    call_id = await record(
        pages_server(store), store, "reading_time", {"title": "Dune", "pages_per_day": 0}
    )
    call = await load_call(store, call_id, keys=[KEY])
    assert call.rounds[-1].response["isError"] is True

    report = await replay_call(pages_server(), call)

    assert report.ok, report.render()  # it fails the same way it did
    text = report.render()
    assert "the handler raised (as recorded)" in text
    assert "ZeroDivisionError: division by zero" in text
    assert 'return f"{pages[title] / pages_per_day:.0f} days"' in text


@pytest.mark.anyio
async def test_a_failed_round_replays_with_the_answers_it_received() -> None:
    store = MemoryStore()
    call_id = await record(library(store, broken=True), store, "hold", {"title": "Dune"})
    call = await load_call(store, call_id, keys=[KEY])
    side_effects = (list(RESERVATIONS), list(RECEIPTS))

    report = await replay_call(library(broken=True), call)

    assert report.ok, report.render()
    assert [c.round for c in report.rounds] == [1, 2, 3]
    assert report.rounds[-1].live_kind == "error"
    assert (list(RESERVATIONS), list(RECEIPTS)) == side_effects


@pytest.mark.anyio
async def test_a_tool_error_result_replays_as_recorded() -> None:
    store = MemoryStore()
    mcp = MCPServer("Shop", keys=[KEY], store=store, journal_arguments=True)

    @mcp.tool()
    async def refuse(title: str) -> str:
        raise ToolError(f"{title} is not for sale")

    call_id = await record(mcp, store, "refuse", {"title": "Dune"})
    report = await replay_call(mcp, await load_call(store, call_id, keys=[KEY]))
    assert report.ok, report.render()
    assert report.rounds[0].live_kind == "error"


# --- what replay needs ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_without_recorded_arguments_replay_says_how_to_get_them() -> None:
    store = MemoryStore()
    app = build(keys=[KEY], store=store, journal_arguments=False)  # the opt-out
    call_id = await record(app, store, "order_book", {"title": "Neuromancer"})
    call = await load_call(store, call_id, keys=[KEY])
    assert call.arguments is None

    with pytest.raises(ReplayError) as caught:
        await replay_call(app, call)
    message = str(caught.value)
    assert "recorded without its arguments" in message
    assert "journal_arguments=True" in message
    assert "ENGINE_JOURNAL_ARGUMENTS=1" in message
    assert "--args" in message

    report = await replay_call(app, call, arguments={"title": "Neuromancer"})
    assert report.ok, report.render()


@pytest.mark.anyio
async def test_an_unknown_tool_or_a_gap_in_the_journal_cannot_be_replayed() -> None:
    call = RecordedCall.load(GOOD)
    with pytest.raises(ReplayError, match="no tool named 'order_book' \\(it has: hold\\)"):
        await replay_call(library(), call)

    document = call.to_document()
    gap = RecordedCall.from_document({**document, "events": document["events"][1:]})
    with pytest.raises(ReplayError, match=r"lacks round\(s\) \[1\]"):
        await replay_call(build(keys=[KEY]), gap)


def test_a_file_that_is_not_an_exported_call_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"events": []}))
    with pytest.raises(ReplayError, match="python -m engine export"):
        RecordedCall.load(path)
    with pytest.raises(ReplayError, match="cannot read"):
        RecordedCall.load(tmp_path / "missing.json")


# --- the pytest helper on the committed fixtures --------------------------------------------------


def test_the_recorded_neuromancer_order_still_replays() -> None:
    report = replay(build(keys=[KEY]), GOOD)
    assert report.ok
    assert not report.code_changed  # the fixture was recorded with this very code
    assert [c.round for c in report.rounds] == [1, 2]


def test_rounds_appended_out_of_order_are_read_in_order(tmp_path: Path) -> None:
    """Two replicas (or two workers of one ``serve``) append the events of one call on their
    own: round 1's may land after round 2's. The call is told and replayed in round order."""
    recorded = json.loads(GOOD.read_text())
    recorded["events"].reverse()
    call = RecordedCall(recorded["call_id"], recorded["events"])
    assert [r.round for r in call.rounds] == [1, 2]
    assert "2 rounds, complete" in timeline(call).splitlines()[0]
    reversed_fixture = tmp_path / "reversed.json"
    reversed_fixture.write_text(json.dumps(recorded))
    assert [c.round for c in replay(build(keys=[KEY]), reversed_fixture).rounds] == [1, 2]


def test_an_order_recorded_with_other_wording_fails_the_helper() -> None:
    with pytest.raises(AssertionError) as caught:
        replay(build(keys=[KEY]), REWORDED)
    text = str(caught.value)
    assert "DIVERGED at round 1, question 'confirm_backorder'" in text
    assert "is sold out for now. Backorder it?" in text  # recorded
    assert "is out of stock (2-3 weeks). Order anyway?" in text  # live


def test_the_helper_refuses_to_run_inside_an_event_loop() -> None:
    async def inside() -> None:
        replay(build(keys=[KEY]), GOOD)

    with pytest.raises(RuntimeError, match=r"await engine\.testing\.replay_call"):
        anyio.run(inside)


# --- prompts and resources replay the same way ----------------------------------------------------


class Mood(BaseModel):
    mood: Literal["calm", "thrilling"]


def ask_mood() -> Elicit[Mood]:
    return Elicit("What are you in the mood for?", Mood)


def shelf(store: Store | None = None) -> MCPServer:
    mcp = MCPServer("Shelf", keys=[KEY], store=store, journal_arguments=True)

    @mcp.prompt()
    def recommend(genre: str, mood: Annotated[Mood, Resolve(ask_mood)]) -> str:
        return f"Recommend a {mood.mood} {genre} book."

    @mcp.resource("shelf://{genre}/picks", mime_type="text/plain")
    def picks(genre: str, mood: Annotated[Mood, Resolve(ask_mood)]) -> str:
        return f"{mood.mood} {genre}: Dune, Hyperion"

    return mcp


@pytest.mark.anyio
async def test_prompts_and_resource_templates_replay_like_tools() -> None:
    store = MemoryStore()
    app = shelf(store)
    calm = {"action": "accept", "content": {"mood": "calm"}}
    async with Client(app, elicitation=lambda params: calm) as client:
        await client.get_prompt("recommend", {"genre": "science fiction"})
        await client.read_resource("shelf://sf/picks")
    for summary in await store.calls():
        report = await replay_call(shelf(), await load_call(store, summary.call_id, keys=[KEY]))
        assert report.ok, report.render()
        assert [c.live_kind for c in report.rounds] == ["input_required", "complete"]


# --- a call served to a 2025-11-25 client ---------------------------------------------------------


@pytest.mark.anyio
async def test_a_legacy_call_is_journaled_with_its_questions_and_answers_and_replays() -> None:
    import httpx2
    import mcp_types as types

    from tests.fleet_helpers import serve_asgi
    from tests.protocol.test_legacy import TIMEOUT, legacy_client

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        reply = answers(params.model_dump())
        return types.ElicitResult(action=reply["action"], content=reply["content"])

    store = MemoryStore()
    app = library(store)
    async with (
        serve_asgi(app.streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base.rstrip("/") + "/mcp"
        async with legacy_client(url, http, elicitation_callback=answer) as client:
            result = await client.call_tool("hold", {"title": "Dune"})
    assert not result.is_error

    [summary] = await store.calls(limit=1)
    [stored] = await store.events(summary.call_id)
    [event] = open_rounds(stored, KeyRing([KEY]))
    assert (event["protocol"], event["round"], event["kind"]) == ("2025-11-25", 1, "complete")
    assert {k: q["method"] for k, q in event["questions"].items()} == {
        "confirm_hold": "elicitation/create",
        "elicit#2": "elicitation/create",
    }
    assert event["answers"] == {"confirm_hold": YES, "elicit#2": NORTH}
    assert sorted(event["checkpoints"]) == ["once#1", "reserve"]  # the once steps it took

    call = await load_call(store, summary.call_id, keys=[KEY])
    shown = timeline(call)
    assert "→ complete  (2025-11-25: asked and answered in place)" in shown
    assert "  asked   confirm_hold: elicitation/create (form) \"Hold 'Dune' as R-" in shown
    side_effects = (list(RESERVATIONS), list(RECEIPTS))
    report = await replay_call(app, call)
    assert report.ok, report.render()
    assert [(c.round, c.live_kind, c.asked) for c in report.rounds] == [
        (1, "complete", ["confirm_hold", "elicit#2"])
    ]
    assert (list(RESERVATIONS), list(RECEIPTS)) == side_effects  # once steps came from the record

    async def reworded(
        title: str, reservation: Annotated[str, Resolve(reserve, once=True)]
    ) -> Elicit[Confirm]:
        return Elicit(f"Really hold {title!r}?", Confirm)

    live = library()
    live.dependency_overrides[confirm_hold] = reworded
    diverged = await replay_call(live, call)
    assert diverged.divergence is not None
    assert (diverged.divergence.round, diverged.divergence.what, diverged.divergence.key) == (
        1,
        "question",
        "confirm_hold",
    )
