"""``python -m engine call``: a terminal MCP client, to try a tool by hand or from a script.

Trying a multi-round tool should not need an MCP host. This client speaks 2026-07-28 over
Streamable HTTP with the standard library only, runs the whole loop (send, get
``input_required``, answer, send again with the ``requestState``), and turns each question into
prompts: a form field by field (types, enums, defaults, required fields; decline and cancel
possible), sampling as "type the model's reply", roots from the working directory.
``--answer KEY=JSON`` answers a question without prompting, for scripts and CI.

Exit status: 0 for a result, 1 for an error result (``isError``), 2 for a protocol error (the
server refused the request, or could not be reached).
"""

from __future__ import annotations

import base64
import itertools
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from engine.debug.render import describe_field, describe_result, field_options

PROTOCOL = "2026-07-28"
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
EXIT_OK, EXIT_ERROR_RESULT, EXIT_PROTOCOL = 0, 1, 2
_MISSING = object()


class ProtocolFailure(Exception):
    """The exchange cannot go on; the message says why and what to try."""


class NoMoreInput(Exception):
    """Standard input ended while a question still needed an answer."""


@dataclass
class Console:
    """Where prompts go and answers come from (the terminal, or a script on stdin)."""

    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)

    def say(self, text: str = "") -> None:
        print(text, file=self.stdout, flush=True)

    def ask(self, prompt: str) -> str:
        if self.stdin is sys.stdin and self.stdout is sys.stdout and sys.stdin.isatty():
            try:
                return input(prompt)  # line editing, where the platform has it
            except EOFError:
                self.say()
                raise NoMoreInput from None
        self.stdout.write(prompt)
        self.stdout.flush()
        line = self.stdin.readline()
        if not line:
            self.say()
            raise NoMoreInput
        answer = line.rstrip("\r\n")
        if not self.stdin.isatty():  # a script's answers are shown, as a terminal would echo
            self.say(answer)
        return answer


# --- HTTP ----------------------------------------------------------------------------------------


def _header_text(value: str) -> str:
    """A header value as the protocol wants it: plain when it can be, else ``=?base64?...?=``."""
    if value.isascii() and value.isprintable() and value == value.strip():
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode("ascii") + "?="


class Session:
    """JSON-RPC requests to one Streamable HTTP endpoint, with the 2026-07-28 headers."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self.ids = itertools.count(1)
        self.replica = "?"

    def request(
        self, method: str, params: dict[str, Any], headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        request_id = next(self.ids)
        params = {
            **params,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
                "io.modelcontextprotocol/clientInfo": {"name": "engine-call", "version": "1"},
            },
        }
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        sent = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL,
            "Mcp-Method": method,
            **(headers or {}),
        }
        name = params.get("name", params.get("uri"))
        if isinstance(name, str):
            sent["Mcp-Name"] = _header_text(name)
        http = urllib.request.Request(self.url, body.encode(), sent, method="POST")
        try:
            with urllib.request.urlopen(http, timeout=self.timeout) as response:
                self.replica = response.headers.get("x-engine-replica", "?")
                kind = response.headers.get("content-type", "")
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raw, kind = exc.read(), exc.headers.get("content-type", "")
            message = _message(raw, kind, request_id)
            if message is None:
                text = raw.decode(errors="replace").strip()[:200]
                raise ProtocolFailure(
                    f"HTTP {exc.code} from {self.url}: {text or exc.reason}; is this the MCP "
                    "endpoint (usually ending in /mcp)?"
                ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ProtocolFailure(
                f"cannot reach {self.url} ({reason}); is the server running? Start one with "
                "`python -m engine serve FILE.py`"
            ) from None
        else:
            message = _message(raw, kind, request_id)
            if message is None:
                raise ProtocolFailure(f"{self.url} did not answer with a JSON-RPC response")
        error = message.get("error")
        if isinstance(error, dict):
            data = f" {json.dumps(error['data'])}" if error.get("data") is not None else ""
            raise ProtocolFailure(
                f"{method} failed: {error.get('code')} {error.get('message')}{data}"
            )
        result = message.get("result")
        if not isinstance(result, dict):
            raise ProtocolFailure(f"{method}: the response has no result object")
        meta = result.get("_meta")
        if isinstance(meta, dict) and isinstance(meta.get("engine/replica"), str):
            self.replica = meta["engine/replica"]
        return result


def _message(raw: bytes, kind: str, request_id: int) -> dict[str, Any] | None:
    """The JSON-RPC response in a JSON body or an event stream, or ``None``."""
    if "text/event-stream" in kind:
        for event in raw.decode(errors="replace").split("\n\n"):
            data = "\n".join(
                line[5:].lstrip() for line in event.splitlines() if line.startswith("data:")
            )
            try:
                message = json.loads(data) if data else None
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("id") == request_id:
                return message
        return None
    try:
        message = json.loads(raw)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


# --- arguments -----------------------------------------------------------------------------------


def _types(prop: Mapping[str, Any] | None) -> set[str]:
    if not prop:
        return set()
    kind = prop.get("type")
    found = {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else set()
    for option in prop.get("anyOf") or []:
        if isinstance(option, dict):
            found |= _types(option)
    return found


def parse_argument(pair: str, schema: Mapping[str, Any] | None) -> tuple[str, Any]:
    """``k=v`` → ``(k, value)``: a string where the schema wants one, else JSON."""
    name, sep, text = pair.partition("=")
    if not sep or not name:
        raise ValueError(f"--arg {pair!r}: write NAME=VALUE")
    props = (schema or {}).get("properties") or {}
    kinds = _types(props.get(name))
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


def parse_answer(pair: str) -> tuple[str, Any]:
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


def param_headers(tool: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, str]:
    """``Mcp-Param-*`` headers for the arguments the tool's schema marks with ``x-mcp-header``."""
    headers: dict[str, str] = {}
    props = (tool.get("inputSchema") or {}).get("properties") or {}
    for name, prop in props.items():
        header = prop.get("x-mcp-header") if isinstance(prop, dict) else None
        value = arguments.get(name)
        if not isinstance(header, str) or value is None or isinstance(value, dict | list):
            continue
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        headers[f"Mcp-Param-{header}"] = _header_text(text)
    return headers


# --- answering questions -------------------------------------------------------------------------


def _choose(console: Console, prompt: str, choices: dict[str, str], default: str) -> str:
    while True:
        reply = console.ask(prompt).strip().lower() or default
        for letter, action in choices.items():
            if reply in (letter, action):
                return action
        console.say(f"  please answer {' or '.join(choices)}")


def ask_field(console: Console, name: str, prop: Mapping[str, Any], required: bool) -> Any:
    """Prompt for one form field until the answer fits its type; ``_MISSING`` to leave it out."""
    kinds = _types(prop)
    options = field_options(prop)
    is_list = "array" in kinds
    console.say("  " + describe_field(name, prop, required))
    if options:
        console.say("    " + "  ".join(f"{n}) {v}" for n, v in enumerate(options, 1)))
    hint = "[y/n]" if "boolean" in kinds else "(comma-separated)" if is_list else ""
    default = prop.get("default", _MISSING)
    if default is None:  # optional: an empty answer leaves the field out
        default = _MISSING
    shown = "" if default is _MISSING else f" [{json.dumps(default, ensure_ascii=False)}]"
    while True:
        text = console.ask(f"  {name}{' ' + hint if hint else ''}{shown}: ").strip()
        if not text:
            if default is not _MISSING:
                return default
            if not required:
                return _MISSING
            console.say("    required: please give a value")
            continue
        try:
            return _field_value(text, kinds, options, is_list)
        except ValueError as exc:
            console.say(f"    {exc}")


def _field_value(text: str, kinds: set[str], options: list[Any], is_list: bool) -> Any:
    if is_list:
        return [_pick(part.strip(), options) for part in text.split(",") if part.strip()]
    if options:
        return _pick(text, options)
    if "boolean" in kinds:
        lowered = text.lower()
        if lowered in ("y", "yes", "true", "1"):
            return True
        if lowered in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer y or n")
    if "integer" in kinds:
        try:
            return int(text)
        except ValueError:
            raise ValueError("a whole number, please") from None
    if "number" in kinds:
        try:
            number = float(text)
        except ValueError:
            raise ValueError("a number, please") from None
        return int(number) if number.is_integer() and "." not in text else number
    return text


def _pick(text: str, options: list[Any]) -> Any:
    if text.isdigit() and 1 <= int(text) <= len(options):
        return options[int(text) - 1]
    for option in options:
        if str(option) == text:
            return option
    raise ValueError(f"choose a number from 1 to {len(options)}, or one of the values")


def answer_elicitation(console: Console, params: Mapping[str, Any]) -> dict[str, Any]:
    mode = params.get("mode", "form")
    console.say(f"  {params.get('message', '')}")
    if mode == "url":
        console.say(f"  Open this URL in a browser: {params.get('url')}")
        action = _choose(
            console,
            "  [a]ccept (you opened it), [d]ecline or [c]ancel? [a]: ",
            {"a": "accept", "d": "decline", "c": "cancel"},
            "a",
        )
        return {"action": action}
    action = _choose(
        console,
        "  [a]ccept and fill in the form, [d]ecline or [c]ancel? [a]: ",
        {"a": "accept", "d": "decline", "c": "cancel"},
        "a",
    )
    if action != "accept":
        return {"action": action}
    schema = params.get("requestedSchema") or {}
    required = set(schema.get("required") or [])
    content: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        value = ask_field(console, name, prop if isinstance(prop, dict) else {}, name in required)
        if value is not _MISSING:
            content[name] = value
    return {"action": "accept", "content": content}


def answer_sampling(console: Console, params: Mapping[str, Any]) -> dict[str, Any]:
    console.say("  The server asks the model. You are the model:")
    if params.get("systemPrompt"):
        console.say(f"    system: {params['systemPrompt']}")
    for message in params.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        blocks = content if isinstance(content, list) else [content]
        for block in blocks:
            text = block.get("text") if isinstance(block, dict) else None
            shown = text if isinstance(text, str) else json.dumps(block)
            console.say(f"    {message.get('role', '?')}: {shown}")
    console.say(f"    (at most {params.get('maxTokens')} tokens)")
    reply = console.ask("  Type the model's reply: ")
    return {
        "role": "assistant",
        "content": {"type": "text", "text": reply},
        "model": "typed-by-hand",
        "stopReason": "endTurn",
    }


def answer_roots(console: Console, params: Mapping[str, Any]) -> dict[str, Any]:
    cwd = Path.cwd()
    console.say(f"  roots: {cwd.as_uri()} (the working directory)")
    return {"roots": [{"uri": cwd.as_uri(), "name": cwd.name or str(cwd)}]}


ANSWERERS: dict[str, Callable[[Console, Mapping[str, Any]], dict[str, Any]]] = {
    "elicitation/create": answer_elicitation,
    "sampling/createMessage": answer_sampling,
    "roots/list": answer_roots,
}


# --- the call ------------------------------------------------------------------------------------


@dataclass
class CallOptions:
    url: str
    tool: str
    arguments: dict[str, Any]
    raw_arguments: list[str] = field(default_factory=list)
    answers: dict[str, Any] = field(default_factory=dict)
    max_rounds: int = 20
    timeout: float = 60.0


def run_call(options: CallOptions, console: Console | None = None) -> int:
    """Run the call to its end; the exit status (0 result, 1 error result, 2 protocol error)."""
    console = console or Console()
    session = Session(options.url, options.timeout)
    try:
        return _run(options, console, session)
    except ProtocolFailure as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_PROTOCOL
    except NoMoreInput:
        print(
            "error: standard input ended while a question needed an answer; answer it with "
            "--answer KEY=JSON (the key is shown in brackets above)",
            file=sys.stderr,
        )
        return EXIT_PROTOCOL


def _run(options: CallOptions, console: Console, session: Session) -> int:
    listed = session.request("tools/list", {}).get("tools") or []
    tools = {t.get("name"): t for t in listed if isinstance(t, dict)}
    tool = tools.get(options.tool)
    if tool is None:
        raise ProtocolFailure(
            f"{options.url} has no tool {options.tool!r}; it has: {', '.join(map(str, tools))}"
        )
    arguments = dict(options.arguments)
    try:
        for pair in options.raw_arguments:
            name, value = parse_argument(pair, tool.get("inputSchema"))
            arguments[name] = value
    except ValueError as exc:
        raise ProtocolFailure(str(exc)) from None
    scripted = dict(options.answers)
    headers = param_headers(tool, arguments)
    params: dict[str, Any] = {"name": options.tool, "arguments": arguments}
    for number in range(1, options.max_rounds + 1):
        answering = params.get("inputResponses") or {}
        about = f"answering {', '.join(answering)}" if answering else json.dumps(arguments)
        console.say(f"round {number} → tools/call {options.tool} {about}")
        result = session.request("tools/call", params, headers)
        kind = result.get("resultType", "complete")
        if kind != "input_required":
            console.say(f"round {number} ← {kind} (replica {session.replica})")
            for line in describe_result(result):
                console.say("  " + line)
            for key in scripted:
                console.say(f"note: --answer {key} was not used: the server never asked it")
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
        responses: dict[str, Any] = {}
        for key, request in requests.items():
            method = request.get("method") if isinstance(request, dict) else None
            console.say(f"[{key}] {method}")
            if key in scripted:
                responses[key] = scripted.pop(key)
                console.say(f"  answered from --answer: {json.dumps(responses[key])}")
                continue
            answer = ANSWERERS.get(str(method))
            if answer is None:
                raise ProtocolFailure(
                    f"the server asked {method!r}, which this client cannot answer"
                )
            responses[key] = answer(console, request.get("params") or {})
        params = {**params, "inputResponses": responses, "requestState": state}
    raise ProtocolFailure(
        f"no final result after {options.max_rounds} rounds; raise --max-rounds if the tool "
        "really needs more"
    )
