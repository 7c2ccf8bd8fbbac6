"""The table of question kinds: every kind has every facet, an unknown kind is an error, and a
kind defined outside the engine is asked and answered in both eras once it is registered."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Annotated, Any

import httpx2
import pytest
from pydantic import BaseModel

from engine import Context, MCPServer, Resolve
from engine.cli.prompts import Console
from engine.errors import InvalidRequestState
from engine.fleet.sessions import bounded_capabilities
from engine.questions import kinds
from engine.questions.kinds import (
    KINDS,
    Elicit,
    ElicitURL,
    ListRoots,
    Question,
    Sample,
    UnknownQuestionKind,
    declared_capabilities,
    kind_named,
    kind_of_request,
    trace_labels,
)
from engine.questions.question import BadAnswer, QuestionKind, Terminal
from engine.questions.rendering import Rendered
from engine.questions.restore import restore_question
from engine.testing import Client, ProtocolError
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi

TIMEOUT = 20.0


class Name(BaseModel):
    name: str


EXAMPLES: dict[str, Question] = {
    "elicit": Elicit("Whose card?", Name),
    "elicit_url": ElicitURL("Sign in", "https://example.test/sign-in"),
    "sample": Sample([{"role": "user", "content": {"type": "text", "text": "Hi"}}], max_tokens=9),
    "roots": ListRoots(),
}
"""A question of each kind the engine ships."""


def scripted_console(*lines: str) -> Console:
    return Console(stdin=io.StringIO("".join(f"{line}\n" for line in lines)), stdout=io.StringIO())


def test_every_kind_has_an_example_here() -> None:
    assert set(EXAMPLES) == set(KINDS), "a new kind needs an example question in EXAMPLES"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_kind_has_every_facet(name: str) -> None:
    kind = KINDS[name]
    question = EXAMPLES[name]
    request = Rendered.of(question).request()
    params = question.render()
    assert kind.kind == name == question.kind
    assert isinstance(question, kind.question)
    assert kind_named(name) is kind
    # what the client sees, in either era, is told apart from every other kind's
    assert kind_of_request(request) is kind
    assert kind.back_channel(dict(params)).items() >= params.items()
    # a client declaring the kind's capability is asked it; one declaring nothing is not
    assert question.missing_capability(dict(kind.capability)) is None
    assert question.missing_capability(declared_capabilities()) is None
    assert question.missing_capability({}) is not None
    kept = bounded_capabilities(json.loads(json.dumps(dict(kind.capability))))
    assert question.missing_capability(kept) is None
    assert set(kind.capability) <= set(kind.session_keeps)
    # rebuilt from its params, it renders the same and reads answers as the original does
    restored = restore_question(name, params, Name)
    assert restored.render() == params
    assert trace_labels({"q": request}) == [kind.trace_label]
    assert kind.callback
    # the terminal client answers it, and the answer is one the question takes
    answer = kind.prompt(scripted_console("a", "Ada", "Hello."), request.get("params") or {})
    outcome = question.parse(answer)
    assert restored.parse(answer) == outcome


def test_kinds_sharing_a_method_are_told_apart_by_their_params() -> None:
    form = {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {}}}
    url = {"method": "elicitation/create", "params": {"mode": "url", "url": "https://x.test"}}
    assert kind_of_request(form) is KINDS["elicit"]
    assert kind_of_request(url) is KINDS["elicit_url"]
    assert kind_of_request({"method": "survey/ask"}) is None
    assert kind_of_request("not a request") is None


def test_a_checkpoint_of_an_unknown_kind_ends_the_call() -> None:
    with pytest.raises(InvalidRequestState) as refused:
        restore_question("survey", {"topic": "tea"}, None)
    assert "unknown kind 'survey'" in refused.value.reason


def test_a_question_of_an_unregistered_kind_is_not_rendered() -> None:
    with pytest.raises(UnknownQuestionKind) as refused:
        Rendered.of(Survey("tea"))
    message = str(refused.value)
    assert "Survey asks a question of kind 'survey', which is not registered" in message
    assert "How to add a question kind" in message


def test_an_unknown_kind_by_name_says_which_are_known() -> None:
    with pytest.raises(UnknownQuestionKind, match="known: elicit, elicit_url, sample, roots"):
        kind_named("survey")


def test_a_kind_must_be_named_as_its_question_and_registered_once() -> None:
    with pytest.raises(ValueError, match="give them the same name"):
        kinds.register(QuestionKind(**{**_facets(SURVEY), "kind": "poll"}))
    with pytest.raises(ValueError, match="already registered"):
        kinds.register(QuestionKind(**{**_facets(KINDS["roots"]), "trace_label": "other"}))
    assert kinds.register(KINDS["roots"]) is KINDS["roots"]  # the same kind again is no change


def _facets(kind: QuestionKind) -> dict[str, Any]:
    return {name: getattr(kind, name) for name in QuestionKind.__dataclass_fields__}


# --- a kind defined here, not in the engine -----------------------------------------------------


class Survey(Question):
    """How many stars, out of five, the user gives a topic."""

    method = "survey/ask"
    kind = "survey"

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def render(self) -> dict[str, Any]:
        return {"topic": self.topic}

    def missing_capability(self, capabilities: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        survey = capabilities.get("survey")
        if isinstance(survey, dict) and "stars" in survey:
            return None
        return "survey", {"survey": {"stars": {}}}

    def parse(self, answer: Any) -> int:
        stars = answer.get("stars") if isinstance(answer, dict) else None
        if not isinstance(stars, int) or isinstance(stars, bool) or not 1 <= stars <= 5:
            raise BadAnswer("a survey answer is 1 to 5 stars")
        return stars

    def kept(self, outcome: int) -> Any:
        return {"stars": outcome}


def _ask_stars(terminal: Terminal, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"stars": int(terminal.ask(f"  Stars for {params.get('topic')} (1-5): "))}


SURVEY = QuestionKind(
    kind="survey",
    question=Survey,
    capability={"survey": {"stars": {}}},
    session_keeps={"survey": ("stars",)},
    trace_label="survey",
    restore=lambda params, form_model: Survey(params.get("topic", "")),
    prompt=_ask_stars,
    callback="survey",
)


@pytest.fixture
def survey_registered() -> Iterator[None]:
    kinds.register(SURVEY)
    try:
        yield
    finally:
        del KINDS["survey"]


async def rating(topic: str) -> Survey:
    return Survey(topic)


def survey_server() -> MCPServer:
    mcp = MCPServer("Surveys", keys=[KEY])

    @mcp.tool()
    async def rate(topic: str, stars: Annotated[int, Resolve(rating, once=True)]) -> str:
        return f"{topic}: {stars} stars"

    @mcp.tool()
    async def rate_twice(topic: str, ctx: Context) -> str:
        first, second = await ctx.ask(Survey(topic)), await ctx.ask(Survey(topic + " again"))
        return f"{topic}: {first} then {second} stars"

    return mcp


@pytest.mark.usefixtures("survey_registered")
def test_a_registered_kind_reaches_every_reader() -> None:
    request = {"method": "survey/ask", "params": {"topic": "tea"}}
    assert kind_of_request(request) is SURVEY
    assert trace_labels({"survey#1": request}) == ["survey"]
    assert declared_capabilities()["survey"] == {"stars": {}}
    assert declared_capabilities(["elicitation"]) == {"elicitation": {"form": {}, "url": {}}}
    kept = bounded_capabilities({"survey": {"stars": {"detail": "x" * 9000}, "extra": {}}})
    assert kept["survey"] == {"stars": {}}
    assert Survey("tea").parse(SURVEY.prompt(scripted_console("4"), request["params"])) == 4


@pytest.mark.anyio
@pytest.mark.usefixtures("survey_registered")
async def test_a_registered_kind_is_asked_and_answered_on_2026_07_28() -> None:
    topics: list[str] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        topics.append(params["topic"])
        return {"stars": 5 if "again" in params["topic"] else 4}

    mcp = survey_server()
    async with Client(mcp, mcp, callbacks={"survey": answer}) as client:
        once = await client.call_tool("rate", {"topic": "tea"})
        body = await client.call_tool("rate_twice", {"topic": "cake"})
    assert once.text == "tea: 4 stars"
    assert once.rounds[0]["inputRequests"] == {
        "rating": {"method": "survey/ask", "params": {"topic": "tea"}}
    }
    assert body.text == "cake: 4 then 5 stars"
    assert topics == ["tea", "cake", "cake again"]


@pytest.mark.anyio
@pytest.mark.usefixtures("survey_registered")
async def test_a_client_without_the_kinds_capability_is_told_which_it_lacks() -> None:
    async with Client(survey_server()) as client:
        with pytest.raises(ProtocolError) as refused:
            await client.call_tool("rate", {"topic": "tea"})
    assert refused.value.message == (
        "Client did not declare the survey capability required by resolver 'rating'"
    )
    assert refused.value.data == {"requiredCapabilities": {"survey": {"stars": {}}}}


LEGACY_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
}


async def _legacy_session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"survey": {"stars": {}}},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    response = await http.post(url, json=initialize, headers=LEGACY_HEADERS)
    assert response.status_code == 200, response.text
    headers = {
        **LEGACY_HEADERS,
        "MCP-Session-Id": response.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await http.post(url, json=initialized, headers=headers)
    return headers


async def _events(response: httpx2.Response) -> AsyncIterator[Any]:
    data = ""
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data += line[5:].strip()
        elif not line and data:
            yield json.loads(data)
            data = ""


@pytest.mark.anyio
@pytest.mark.usefixtures("survey_registered")
async def test_a_registered_kind_is_asked_and_answered_on_2025_11_25() -> None:
    async with (
        serve_asgi(survey_server().streamable_http_app()) as base,
        httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http,
    ):
        url = base + "/mcp"
        headers = await _legacy_session(http, url)
        results: dict[str, Any] = {}
        asked: list[Any] = []
        for request_id, (tool, topic) in enumerate([("rate", "tea"), ("rate_twice", "cake")], 2):
            call = {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": tool, "arguments": {"topic": topic}},
            }
            async with http.stream("POST", url, json=call, headers=headers) as response:
                async for message in _events(response):
                    if message.get("method") == "survey/ask":
                        asked.append(message["params"])
                        stars = 5 if "again" in message["params"]["topic"] else 3
                        reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"stars": stars}}
                        posted = await http.post(url, json=reply, headers=headers)
                        assert posted.status_code == 202
                    elif message.get("id") == request_id:
                        results[tool] = message["result"]["content"][0]["text"]
    assert asked == [{"topic": "tea"}, {"topic": "cake"}, {"topic": "cake again"}]
    assert results == {"rate": "tea: 3 stars", "rate_twice": "cake: 3 then 5 stars"}
