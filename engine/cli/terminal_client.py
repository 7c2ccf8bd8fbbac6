"""``python -m engine call``: a terminal MCP client, to try a tool by hand or from a script.

Trying a multi-round tool should not need an MCP host. This client speaks 2026-07-28 over
Streamable HTTP on httpx (:mod:`engine.cli.http_session`), runs the whole
loop (send, get ``input_required``, answer, send again with the ``requestState``), and turns
each question into prompts (:mod:`engine.cli.prompts`): a form field by field (types, enums,
defaults, required fields; decline and cancel possible), sampling as "type the model's reply",
roots from the working directory. ``--answer KEY=JSON`` answers a question without prompting,
for scripts and CI.

A tool call that becomes a task (the client declares the Tasks extension) is followed to its
end: its status as it changes, its questions answered with ``tasks/update``, its result; Ctrl-C
cancels it.

Exit status: 0 for a result, 1 for an error result (``isError``) or a cancelled task, 2 for a
protocol error (the server refused the request, could not be reached, or the task failed).
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine._internal.inert import inert
from engine.cli.connections import Connection, open_connection
from engine.cli.http_session import ProtocolFailure, param_headers
from engine.cli.prompts import Console, NoMoreInput, schema_types
from engine.cli.style import Live
from engine.debug.render import describe_result
from engine.questions.kinds import kind_of_request

LOG_LEVEL_META = "io.modelcontextprotocol/logLevel"
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

EXIT_OK, EXIT_ERROR_RESULT, EXIT_PROTOCOL = 0, 1, 2


def parse_argument(pair: str, schema: Mapping[str, Any] | None) -> tuple[str, Any]:
    """``k=v`` → ``(k, value)``: a string where the schema wants one, else JSON."""
    name, sep, text = pair.partition("=")
    if not sep or not name:
        raise ValueError(f"--arg {pair!r}: write NAME=VALUE")
    props = (schema or {}).get("properties") or {}
    kinds = schema_types(props.get(name))
    if "string" in kinds:
        return name, text
    try:
        return name, json.loads(text)
    except ValueError:
        if not kinds:
            return name, text
        raise ValueError(
            f"--arg {name}: the tool wants {' or '.join(sorted(kinds))}, and {text!r} is not "
            "JSON; for example --arg count=3 or --arg tags='[\"a\"]'"
        ) from None


def _is(kind: str, value: Any) -> bool:
    """Whether ``value`` (decoded JSON) is of the JSON schema type ``kind``."""
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, int | float)
    kinds: dict[str, type] = {"string": str, "array": list, "object": dict}
    return kind not in kinds or isinstance(value, kinds[kind])


def answer_problem(request: Mapping[str, Any], answer: Any) -> str | None:
    """What is wrong with a ``--answer`` for this question, checked against what the question
    says it wants (a form's fields, types, choices, bounds); ``None`` when nothing is."""
    if request.get("method") != "elicitation/create":
        return None
    params = request.get("params") or {}
    actions = ("accept", "decline", "cancel")
    if not isinstance(answer, dict) or answer.get("action") not in actions:
        return 'give an object whose "action" is "accept", "decline" or "cancel"'
    if answer["action"] != "accept" or params.get("mode", "form") != "form":
        return None
    content = answer.get("content")
    if not isinstance(content, dict):
        return 'an accepted form needs "content": an object of the form\'s fields'
    schema = params.get("requestedSchema") or {}
    props = schema.get("properties") or {}
    problems = [
        f"content.{name}: required" for name in schema.get("required") or [] if name not in content
    ]
    for name, value in content.items():
        prop = props.get(name)
        if not isinstance(prop, dict):
            problems.append(f"content.{name}: not a field of the form ({', '.join(props)})")
            continue
        problem = _value_problem(prop, value)
        if problem is not None:
            problems.append(f"content.{name}: {problem}")
    return "; ".join(problems) or None


def _value_problem(prop: Mapping[str, Any], value: Any) -> str | None:
    kinds = schema_types(prop)
    shown = json.dumps(value)
    if kinds and not any(_is(kind, value) for kind in kinds):
        return f"expected {' or '.join(sorted(kinds))}, got {shown}"
    choices = prop.get("enum")
    if isinstance(choices, list) and value not in choices:
        return f"expected one of {', '.join(map(json.dumps, choices))}, got {shown}"
    if isinstance(value, int | float) and not isinstance(value, bool):
        low, high = prop.get("minimum"), prop.get("maximum")
        if isinstance(low, int | float) and value < low:
            return f"expected at least {low}, got {shown}"
        if isinstance(high, int | float) and value > high:
            return f"expected at most {high}, got {shown}"
    if isinstance(value, str):
        short, long = prop.get("minLength"), prop.get("maxLength")
        if isinstance(short, int) and len(value) < short:
            return f"expected at least {short} characters, got {shown}"
        if isinstance(long, int) and len(value) > long:
            return f"expected at most {long} characters, got {shown}"
    return None


def parse_answer(pair: str) -> tuple[str, Any]:
    """``KEY=JSON`` → ``(key, answer)``: a question's answer given with ``--answer``."""
    key, sep, text = pair.partition("=")
    if not sep or not key:
        raise ValueError(f"--answer {pair!r}: write KEY=JSON")
    try:
        return key, json.loads(text)
    except ValueError:
        raise ValueError(
            f"--answer {key}: {text!r} is not JSON; for a form write "
            f'--answer \'{key}={{"action": "accept", "content": {{...}}}}\''
        ) from None


@dataclass
class CallOptions:
    url: str | None
    tool: str
    """The tool's name; with ``kind`` ``prompt``, the prompt's; ``resource``, the URI."""
    arguments: dict[str, Any]
    raw_arguments: list[str] = field(default_factory=list)
    answers: dict[str, Any] = field(default_factory=dict)
    max_rounds: int = 20
    timeout: float = 60.0
    stdio: str | None = None
    log_level: str = "info"
    traceback: bool = False
    token: str | None = None
    kind: str = "tool"
    """What is called: a ``tool`` (``tools/call``), a ``prompt`` (``prompts/get``) or a
    ``resource`` (``resources/read``)."""


def run_call(options: CallOptions, console: Console | None = None) -> int:
    """Run the call to its end; the exit status (0 result, 1 error result, 2 protocol error)."""
    console = console or Console()
    live = Live(console.stdout)
    try:
        session = open_connection(
            options.url,
            options.stdio,
            options.timeout,
            traceback=options.traceback,
            token=options.token,
        )
    except ProtocolFailure as exc:
        print(inert(f"error: {exc}"), file=sys.stderr)
        return EXIT_PROTOCOL
    session.notify = live
    try:
        return _run(options, console, session, live)
    except ProtocolFailure as exc:
        live.done()
        print(inert(f"error: {exc}"), file=sys.stderr)
        return EXIT_PROTOCOL
    except NoMoreInput as exc:
        why = f"{exc.args[0]}, and " if exc.args else ""
        print(
            inert(
                f"error: {why}standard input ended while a question needed an answer; answer "
                "it with --answer KEY=JSON (the key is shown in brackets above)"
            ),
            file=sys.stderr,
        )
        return EXIT_PROTOCOL
    finally:
        session.close()


METHODS = {"tool": "tools/call", "prompt": "prompts/get", "resource": "resources/read"}


def _listed(session: Connection, kind: str, name: str) -> dict[str, Any]:
    """The tool or prompt ``name`` as the server lists it (every page); ProtocolFailure naming
    the ones it has when it has no such one."""
    key = f"{kind}s"
    found: dict[str, Any] = {}
    cursor: str | None = None
    for _ in range(1000):
        page = session.request(f"{key}/list", {"cursor": cursor} if cursor else {})
        for item in page.get(key) or []:
            if isinstance(item, dict):
                found[str(item.get("name"))] = item
        cursor = page.get("nextCursor")
        if name in found or not isinstance(cursor, str) or not cursor:
            break
    if name not in found:
        has = ", ".join(map(str, found)) or "none"
        raise ProtocolFailure(f"{session.where} has no {kind} {name!r}; it has: {has}")
    chosen: dict[str, Any] = found[name]
    return chosen


def _request_params(options: CallOptions, session: Connection) -> tuple[dict[str, Any], Any]:
    """The request's params and its headers, the ``--arg`` values read as the schema says."""
    if options.kind == "resource":
        if options.arguments or options.raw_arguments:
            raise ProtocolFailure("a resource takes no arguments: its URI says what to read")
        return {"uri": options.tool}, None
    listed = _listed(session, options.kind, options.tool)
    arguments = dict(options.arguments)
    if options.kind == "prompt":  # a prompt's arguments are strings
        for pair in options.raw_arguments:
            name, sep, text = pair.partition("=")
            if not sep or not name:
                raise ProtocolFailure(f"--arg {pair!r}: write NAME=VALUE")
            arguments[name] = text
        return {"name": options.tool, "arguments": arguments}, None
    try:
        for pair in options.raw_arguments:
            name, value = parse_argument(pair, listed.get("inputSchema"))
            arguments[name] = value
    except ValueError as exc:
        raise ProtocolFailure(str(exc)) from None
    return {"name": options.tool, "arguments": arguments}, param_headers(listed, arguments)


def _run(options: CallOptions, console: Console, session: Connection, live: Live) -> int:
    method = METHODS[options.kind]
    params, headers = _request_params(options, session)
    scripted = dict(options.answers)
    first = json.dumps(params["arguments"]) if "arguments" in params else ""
    sent: dict[str, Any] = {}
    for number in range(1, options.max_rounds + 1):
        answering = params.get("inputResponses") or {}
        about = f"answering {', '.join(answering)}" if answering else first
        console.say(f"round {number} → {method} {options.tool} {about}".rstrip())
        meta = {"progressToken": f"call-{number}", LOG_LEVEL_META: options.log_level}
        result = session.request(method, params, headers, meta)
        live.done()
        kind = result.get("resultType", "complete")
        if kind == "task":
            console.say(f"round {number} ← task (replica {session.replica})")
            return _follow(result, console, session, live, scripted)
        if kind != "input_required":
            shown = "error" if kind == "complete" and result.get("isError") else kind
            console.say(f"round {number} ← {shown} (replica {session.replica})")
            for line in describe_result(result) if options.kind == "tool" else _content(result):
                console.say("  " + line)
            _explain(console, result)
            _unused(console, scripted)
            return EXIT_ERROR_RESULT if result.get("isError") else EXIT_OK
        requests = result.get("inputRequests") or {}
        state = result.get("requestState")
        if not requests:  # "retry now": the same request again, shortly
            console.say(f"round {number} ← the server asks to retry (replica {session.replica})")
            time.sleep(0.2)
            params = {**params, "requestState": state}
            continue
        plural = "s" if len(requests) != 1 else ""
        console.say(
            f"round {number} ← input_required (replica {session.replica}): "
            f"{len(requests)} question{plural}"
        )
        responses = _answers(console, requests, scripted, sent)
        sent = responses
        params = {**params, "inputResponses": responses, "requestState": state}
    raise ProtocolFailure(
        f"no final result after {options.max_rounds} rounds; raise --max-rounds if the tool "
        "really needs more"
    )


def _content(result: Mapping[str, Any]) -> list[str]:
    """A prompt's messages, or a resource's contents, to read: text as it is, the rest as
    what it is."""
    lines: list[str] = []
    if result.get("description"):
        lines.append(f"description  {result['description']}")
    for message in result.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", "?"))
        block = message.get("content")
        label = f"{role:<9}  "
        for line in _block(block if isinstance(block, dict) else {}):
            lines.append(label + line)
            label = " " * len(label)
    for content in result.get("contents") or []:
        if not isinstance(content, dict):
            continue
        kind = f" [{content['mimeType']}]" if content.get("mimeType") else ""
        lines.append(f"{content.get('uri', '?')}{kind}")
        lines.extend("  " + line for line in _block(content))
    return lines or ["(empty)"]


def _block(block: Mapping[str, Any]) -> list[str]:
    if isinstance(block.get("text"), str):
        return block["text"].splitlines() or [""]
    if isinstance(block.get("blob"), str):
        return [f"(binary, {len(block['blob']) * 3 // 4} bytes in base64)"]
    if isinstance(block.get("data"), str):
        return [f"({block.get('type', 'binary')}, {block.get('mimeType', '?')})"]
    if isinstance(block.get("resource"), dict):
        return [f"(embedded resource {block['resource'].get('uri', '?')})"]
    return [json.dumps(block, ensure_ascii=False)]


def _answers(
    console: Console,
    requests: Mapping[str, Any],
    scripted: dict[str, Any],
    sent: Mapping[str, Any],
) -> dict[str, Any]:
    """The answers to the server's questions: from ``--answer`` when given and fitting, else
    asked at the terminal."""
    responses: dict[str, Any] = {}
    for key, request in requests.items():
        method = request.get("method") if isinstance(request, dict) else None
        console.say(f"[{key}] {method}")
        if key in sent:
            console.say(
                f"  the server asked {key} again: it did not take the answer sent "
                f"({json.dumps(sent[key])})"
            )
        rejected = None
        if key in scripted:
            given = scripted.pop(key)
            rejected = answer_problem(request if isinstance(request, dict) else {}, given)
            if rejected is None:
                responses[key] = given
                console.say(f"  answered from --answer: {json.dumps(given)}")
                continue
            console.say(f"  --answer {key} does not fit the question: {rejected}")
        elif unmatched := [given for given in scripted if given not in requests]:
            raise ProtocolFailure(_no_such_question(unmatched, requests))
        kind = kind_of_request(request)
        if kind is None:
            raise ProtocolFailure(f"the server asked {method!r}, which this client cannot answer")
        try:
            responses[key] = kind.prompt(console, request.get("params") or {})
        except NoMoreInput:
            if rejected is None:
                raise
            raise NoMoreInput(f"--answer {key} does not fit the question ({rejected})") from None
    return responses


def _no_such_question(given: list[str], requests: Mapping[str, Any]) -> str:
    """An ``--answer`` whose key the server does not ask, while it asks one that has none: a
    mistyped or miscounted key (a body's ``kind#n`` counts its ``ctx.once`` steps too), never
    one to skip silently."""
    plural = "s" if len(given) > 1 else ""
    return (
        f"--answer {', '.join(given)}: no question with that key{plural}; the server asks "
        f"{', '.join(requests)} (the keys in brackets above): give --answer KEY=JSON with "
        "those keys, or leave --answer out to be asked at the terminal"
    )


def _follow(
    created: Mapping[str, Any],
    console: Console,
    session: Connection,
    live: Live,
    scripted: dict[str, Any],
) -> int:
    """Follow a task to its end: its status as it changes, its questions asked and answered
    with ``tasks/update``, its result. Interrupted (Ctrl-C), it cancels the task."""
    task_id = str(created.get("taskId"))
    status = created.get("status")
    console.say(f"task {task_id}: {status}")
    answered: set[str] = set()
    reported = _StatusMessages(live)
    session.notify = reported
    try:
        while True:
            # A progressToken asks the server to hold the request while the task works, and
            # to send each change meanwhile: no polling needed.
            task = session.request(
                "tasks/get", {"taskId": task_id}, None, {"progressToken": f"task-{task_id}"}
            )
            live.done()
            if task.get("status") != status:
                status = task.get("status")
                message = f": {task['statusMessage']}" if task.get("statusMessage") else ""
                console.say(f"task {task_id}: {status} (replica {session.replica}){message}")
            else:
                reported("notifications/tasks/status", task)  # a poll that found it working
            if status == "completed":
                result = task.get("result") or {}
                for line in describe_result(result):
                    console.say("  " + line)
                _explain(console, result)
                _unused(console, scripted)
                return EXIT_ERROR_RESULT if result.get("isError") else EXIT_OK
            if status == "failed":
                error = task.get("error") or {}
                raise ProtocolFailure(
                    f"the task failed: {error.get('code')} {error.get('message')}"
                )
            if status == "cancelled":
                console.say("  the task was cancelled")
                return EXIT_ERROR_RESULT
            requests = {
                key: request
                for key, request in (task.get("inputRequests") or {}).items()
                if key not in answered
            }
            if status == "input_required" and requests:
                responses = _answers(console, requests, scripted, {})
                answered.update(responses)
                session.request("tasks/update", {"taskId": task_id, "inputResponses": responses})
                console.say(f"task {task_id}: answered {', '.join(responses)}")
                continue
            time.sleep(max(0.05, float(task.get("pollIntervalMs") or 500) / 1000))
    except KeyboardInterrupt:
        console.say(f"interrupted: cancelling task {task_id}")
        try:
            session.request("tasks/cancel", {"taskId": task_id})
        except ProtocolFailure as exc:
            console.say(f"  the cancel did not reach the server: {exc}")
        raise


class _StatusMessages:
    """While a task works, each new ``statusMessage`` it shows (what its body reports as
    progress) as a line; other notifications go to ``live``."""

    def __init__(self, live: Live) -> None:
        self.live = live
        self.shown: str | None = None

    def __call__(self, method: str, params: dict[str, Any]) -> None:
        if method != "notifications/tasks/status":
            self.live(method, params)
            return
        message = params.get("statusMessage")
        working = params.get("status") == "working"
        if working and isinstance(message, str) and message and message != self.shown:
            self.shown = message
            self.live.status(message)


REFUSED_FORM = re.compile(r"could not resolve: elicitation was (decline|cancel)\b")
"""The error a resolver's declined or cancelled form ends a call with: the official SDK's
words, which clients may match, so the wire keeps them and ``call`` says it plainly."""
REFUSALS = {"decline": "declined", "cancel": "cancelled"}


def _explain(console: Console, result: Mapping[str, Any]) -> None:
    """After an error result that only a protocol reader would follow, a plain line."""
    if not result.get("isError"):
        return
    for block in result.get("content") or []:
        text = block.get("text") if isinstance(block, dict) else None
        found = REFUSED_FORM.search(text) if isinstance(text, str) else None
        if found is not None:
            console.say(
                f"  the form was {REFUSALS[found.group(1)]}, so the tool did not run (the "
                "error text is the one MCP servers send for it, kept as it is)"
            )
            return


def _unused(console: Console, scripted: Mapping[str, Any]) -> None:
    for key in scripted:
        console.say(f"note: --answer {key} was not used: the server never asked it")
