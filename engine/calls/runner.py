"""One round of a multi-round call, end to end: token in, round, token or result out.

This is where the sealed requestState is opened and verified, the call's state restored (inline
or from the store), the round run, and the next state sealed. With a store, the round is also
claimed (single use), its response kept for duplicates, and the round journaled. It knows
nothing about HTTP or JSON-RPC framing.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine._internal.hangup import uncut
from engine.calls.arguments import InvalidArguments, validate_arguments
from engine.calls.walk import SUSPENDED, Round
from engine.context import CallScope, RequestScope
from engine.errors import INTERNAL_ERROR, INVALID_PARAMS, InvalidRequestState, MCPError, ToolError
from engine.handlers import Handler
from engine.questions.answers import Asker, ReplayAsker
from engine.state.call import CallState
from engine.state.claims import Binding, Claims, StateRef, new_call_id, principal_tag
from engine.store_services.services import StoreServices
from engine.store_services.single_use import Hold, responses_fingerprint

if TYPE_CHECKING:
    from engine.app import MCPServer

log = logging.getLogger("engine.calls.runner")

_NOT_HOLDING = contextlib.nullcontext()
Principal = Callable[[RequestScope], str | None]
Finisher = Callable[["RoundReply", bytes], Awaitable[None] | None]
"""Keeps a round's response and journals it; ``None`` when nothing is left to wait for."""


@dataclass(slots=True)
class CallRequest:
    """A ``tools/call``, ``prompts/get`` or ``resources/read`` as the round runner sees it."""

    method: str
    target: str
    arguments: Any
    input_responses: Any
    request_state: Any
    scope: RequestScope


@dataclass(slots=True)
class RoundReply:
    """What a round produced.

    ``kind`` is ``complete`` (``value``), ``input_required`` (``input_requests`` and
    ``request_state``), ``error`` (an error result's text) or ``cached`` (the serialised result
    of an earlier attempt of the same round). :meth:`finish` must be called with the serialised
    result (and what it returns awaited): it keeps the response for duplicates and journals the
    round.
    """

    kind: str
    value: Any = None
    call_id: str | None = None
    round_no: int = 1
    input_requests: dict[str, Any] | None = None
    request_state: str | None = None
    error: str | None = None
    cached: bytes | None = None
    finisher: Finisher | None = None
    """Keeps the response and journals the round, when there is a store. It is given the
    reply rather than holding it: a reply and a closure over it would form a reference cycle,
    and every round would leave its whole request for the garbage collector."""
    trace: Asker | None = None
    """The round's asker: what it asked in place, accepted and recorded, for the journal."""

    def finish(self, response: bytes) -> Awaitable[None] | None:
        """Keep and journal the round; an awaitable when that must wait for the store."""
        finisher = self.finisher
        return None if finisher is None else finisher(self, response)


class OversizedState(ToolError):
    """The next round's state is over the inline limit and there is no store to hold it."""


class RoundRunner:
    """Runs rounds for one server: owns the claims policy, the limits and the store's use."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server

    def principal(self, scope: RequestScope) -> str | None:
        binder = self.server.principal
        if binder is None:
            return None
        try:
            principal = binder(scope)
        except Exception:
            log.exception("the principal callback raised; refusing the request")
            raise
        if principal is not None and not isinstance(principal, str):
            log.error("the principal callback returned %s, not str or None", type(principal))
            raise TypeError("the principal callback must return str or None")
        return principal

    async def run(
        self,
        handler: Handler,
        request: CallRequest,
        args: dict[str, Any] | None = None,
        asker: Asker | None = None,
        convert: Callable[[Any], Any] | None = None,
    ) -> RoundReply:
        """One round; ``convert`` turns a final value into its wire result.

        The conversion runs while the round's claim is held, so a value that cannot be sent
        gives the claim back (or becomes an error result) instead of stranding it.
        """
        server = self.server
        services = server.store_services
        responses = request.input_responses
        if responses is not None and not isinstance(responses, dict):
            raise MCPError(
                INVALID_PARAMS,
                "inputResponses must be an object of answers keyed by the inputRequests keys",
            )
        try:
            principal = None if server.principal is None else self.principal(request.scope)
        except Exception:
            if request.request_state is not None:
                raise InvalidRequestState("principal callback failed") from None
            raise MCPError(INTERNAL_ERROR, "Internal error") from None
        started = time.perf_counter()
        token = request.request_state
        claimed: Hold | None = None
        binding: Binding | None = None  # made when a token is checked or sealed
        if token is None:
            state, call_id, round_no = CallState({}, {}, {}), new_call_id(), 1
        else:
            claims = Claims.decode(server.keys.open(token, server.max_token_chars))
            binding = _binding(server, request)
            claims.verify(binding, principal)
            call_id, round_no = claims.call_id, claims.round_no + 1
            if services is not None:
                fingerprint = responses_fingerprint(responses)
                admission = await services.claims.admit(call_id.hex(), claims.round_no, fingerprint)
                if admission.cached is not None:
                    return RoundReply(
                        "cached", cached=admission.cached, call_id=call_id.hex(), round_no=round_no
                    )
                if admission.retry:
                    return RoundReply(
                        "input_required",
                        request_state=token,
                        call_id=call_id.hex(),
                        round_no=round_no,
                    )
                claimed = admission.hold
        try:
            if token is not None:
                carried = claims.state
                if not isinstance(carried, bytes):
                    carried = await self._fetch_state(carried, call_id)
                state = CallState.decode(carried)
            holding = _NOT_HOLDING if services is None else services.claims.keep_alive(claimed)
            with holding:
                reply = await self._execute(
                    handler,
                    request,
                    args,
                    asker,
                    convert,
                    state,
                    call_id,
                    round_no,
                    binding,
                    principal,
                )
        except BaseException:
            if claimed is not None and services is not None:
                await services.claims.abandon(claimed)
            raise
        if services is not None:
            reply.finisher = self._finisher(services, claimed, handler, request, started)
        return reply

    async def _fetch_state(self, ref: StateRef, call_id: bytes) -> bytes:
        """State kept by reference: from the store (inline state needs no await)."""
        services = self.server.store_services
        if services is None:
            raise InvalidRequestState("state by reference but no store is configured")
        return await services.state.fetch(call_id.hex(), ref)

    async def _execute(
        self,
        handler: Handler,
        request: CallRequest,
        args: dict[str, Any] | None,
        asker: Asker | None,
        convert: Callable[[Any], Any] | None,
        state: CallState,
        call_id: bytes,
        round_no: int,
        binding: Binding | None,
        principal: str | None,
    ) -> RoundReply:
        server = self.server
        call_hex = call_id.hex()
        signature = handler.planned(
            server.dependency_overrides, server.dependency_overrides.version
        )
        try:
            arguments = (
                args if args is not None else validate_arguments(signature, request.arguments)
            )
        except InvalidArguments as exc:
            return _failed(handler, request, str(exc), call_hex, round_no)
        replay: ReplayAsker | None = None
        if asker is None:
            replay = ReplayAsker(
                state,
                request.input_responses,
                request.scope.capabilities,
                server.trust_unsolicited_answers,
            )
            active: Asker = replay
        else:
            active = asker
        next_state = active.next_state
        call = CallScope(handler.name, active, state, next_state, round_no)
        call.call_id = call_hex
        try:
            outcome = await Round(signature, server, request.scope, call, active).run(arguments)
            if convert is not None and outcome is not SUSPENDED:
                # Inside the same guard as the body: a value that cannot be sent fails like
                # the body did, while the round's claim is still held.
                outcome = convert(outcome)
        except MCPError:
            raise
        except ToolError as exc:
            text = f"{_verb(handler)} {handler.name}: {exc}"
            return _traced(_failed(handler, request, text, call_hex, round_no), active)
        except Exception:
            log.exception("%s %r failed", handler.role, handler.name)
            text = (
                f"{_verb(handler)} {handler.name}: an unexpected error occurred; the server log "
                "has the details"
            )
            return _traced(_failed(handler, request, text, call_hex, round_no), active)
        if outcome is not SUSPENDED:
            reply = RoundReply("complete", outcome, call_hex, round_no)
        else:
            assert replay is not None, "a back-channel asker never suspends a round"
            requests = {key: rendered.request() for key, rendered in replay.pending.items()}
            if binding is None:
                binding = _binding(server, request)
            try:
                sealed = await self.seal(next_state, binding, principal, call_id, round_no)
            except OversizedState as exc:
                return _traced(_failed(handler, request, str(exc), call_hex, round_no), active)
            reply = RoundReply("input_required", None, call_hex, round_no, requests, sealed)
        return _traced(reply, active)

    async def seal(
        self,
        state: CallState,
        binding: Binding,
        principal: str | None,
        call_id: bytes,
        round_no: int,
    ) -> str:
        server = self.server
        encoded = state.encode()
        carried: bytes | StateRef = encoded
        services = server.store_services
        if services is not None and len(encoded) > server.spill_threshold:
            carried = await services.state.spill(call_id.hex(), encoded)
        elif services is None and len(encoded) > server.max_inline_state:
            raise OversizedState(
                f"This call's state grew to {len(encoded)} bytes, over the inline limit of "
                f"{server.max_inline_state} bytes. Configure a store (store='sqlite:///calls.db' "
                "or a redis:// URL) so large state is kept by reference."
            )
        claims = Claims(
            int(time.time()),  # issued_at
            server.state_ttl,
            binding.digest(),
            binding.tags(),
            principal_tag(principal) if principal is not None else None,
            call_id,
            round_no,
            carried,
        )
        return server.keys.seal(claims.encode())

    def _finisher(
        self,
        services: StoreServices,
        claimed: Hold | None,
        handler: Handler,
        request: CallRequest,
        started: float,
    ) -> Finisher:
        server = self.server

        def finish(reply: RoundReply, response: bytes) -> Awaitable[None] | None:
            call_id = reply.call_id or ""
            journal = services.journal
            event = None
            if journal.journals(call_id):
                event = journal_event(server, handler, request, reply, response, started)
            if claimed is None and (event is None or journal.enqueue(call_id, event)):
                return None  # nothing waits on the store: the journal writers take it from here
            return keep(call_id, event, response)

        async def keep(call_id: str, event: dict[str, Any] | None, response: bytes) -> None:
            # The body ran: keeping its response must not be cut short by a client hanging
            # up, or a retry would run it again. Store operations have their own timeout.
            with uncut():
                if claimed is not None:
                    await services.claims.settle(claimed, response)
                if event is not None:
                    await services.journal.record(call_id, event)

        return finish


def journal_event(
    server: MCPServer,
    handler: Handler,
    request: CallRequest,
    reply: RoundReply,
    response: bytes,
    started: float,
) -> dict[str, Any]:
    """The journal entry of one round: what was asked, answered, checkpointed and returned."""
    trace = reply.trace
    event: dict[str, Any] = {
        "v": 1,
        "ts": time.time(),
        "kind": reply.kind,
        "target": handler.name,
        "method": request.method,
        "protocol": request.scope.protocol_version,
        "round": reply.round_no,
        "arguments": (request.arguments or {}) if server.journal_arguments else None,
        "arguments_recorded": server.journal_arguments,
        "questions": reply.input_requests
        or (dict(trace.asked_in_place) if trace is not None else {}),
        "answers": trace.accepted if trace is not None else {},
        "checkpoints": trace.new_checkpoints() if trace is not None else {},
        "response": response,
        "duration_ms": int((time.perf_counter() - started) * 1e6) / 1000,  # µs resolution
        "replica": server.replica_id,
        "code": handler.code_fingerprint,
    }
    return event


def _binding(server: MCPServer, request: CallRequest) -> Binding:
    """What this request's tokens are bound to."""
    return Binding(server.audience, request.method, request.target, request.arguments)


def _traced(reply: RoundReply, asker: Asker) -> RoundReply:
    """Keep what the round asked, accepted and recorded, for the journal, whatever its outcome."""
    reply.trace = asker
    return reply


def _failed(
    handler: Handler, request: CallRequest, text: str, call_id: str, round_no: int
) -> RoundReply:
    """A tool failure is an error *result*; a prompt or resource failure is a protocol error."""
    if handler.role == "tool":
        return RoundReply("error", error=text, call_id=call_id, round_no=round_no)
    data = {"uri": request.target} if handler.role == "resource" else {"name": request.target}
    raise MCPError(INVALID_PARAMS, text, data)


def _verb(handler: Handler) -> str:
    return {
        "tool": "Error executing tool",
        "prompt": "Error getting prompt",
        "resource": "Error reading resource",
    }[handler.role]
