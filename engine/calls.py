"""One round of a multi-round call, end to end: token in, round, token or result out.

This is where the sealed requestState is opened and verified, the call's state restored, the
round run, and the next state sealed. It knows nothing about HTTP or JSON-RPC framing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.asking import Asker, ReplayAsker
from engine.claims import Binding, Claims, new_call_id, principal_tag
from engine.context import CallScope, Context, RequestScope
from engine.errors import INTERNAL_ERROR, INVALID_PARAMS, InvalidRequestState, MCPError, ToolError
from engine.handlers import Handler
from engine.rounds import Completed, InvalidArguments, Round, validate_arguments
from engine.state import CallState

if TYPE_CHECKING:
    from engine.server import MCPServer

log = logging.getLogger("engine.calls")

Principal = Callable[[RequestScope], str | None]


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
    """What a round produced: a final value, an interim ``input_required``, or a failure."""

    kind: str  # "complete" | "input_required" | "error"
    value: Any = None
    input_requests: dict[str, Any] | None = None
    request_state: str | None = None
    error: str | None = None
    call_id: str | None = None
    round_no: int = 1


class OversizedState(ToolError):
    """The next round's state is over the inline limit and there is no store to hold it."""


class RoundRunner:
    """Runs rounds for one server: owns the key ring, the claims policy and the limits."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server

    def principal(self, scope: RequestScope) -> str | None:
        binder = self.server.principal
        if binder is None:
            return None
        try:
            return binder(scope)
        except Exception:
            log.exception("the principal callback raised; refusing the request")
            raise

    async def run(
        self,
        handler: Handler,
        request: CallRequest,
        args: dict[str, Any] | None = None,
        asker: Asker | None = None,
    ) -> RoundReply:
        server = self.server
        responses = request.input_responses
        if responses is not None and not isinstance(responses, dict):
            raise MCPError(
                INVALID_PARAMS,
                "inputResponses must be an object of answers keyed by the inputRequests keys",
            )
        try:
            principal = self.principal(request.scope)
        except Exception:
            if request.request_state is not None:
                raise InvalidRequestState("principal callback failed") from None
            raise MCPError(INTERNAL_ERROR, "Internal error") from None
        binding = Binding.of(server.audience, request.method, request.target, request.arguments)
        token = request.request_state
        if token is not None:
            state, call_id, round_no = self.restore(token, binding, principal)
        else:
            state, call_id, round_no = CallState(), new_call_id(), 1
        signature = handler.planned(
            server.dependency_overrides, server.dependency_overrides.version
        )
        try:
            arguments = (
                args if args is not None else validate_arguments(signature, request.arguments)
            )
        except InvalidArguments as exc:
            return RoundReply("error", error=str(exc))
        replay = asker is None
        active: Asker
        if asker is None:
            replay_asker = ReplayAsker(
                state,
                responses,
                request.scope.capabilities,
                trust_unsolicited=server.trust_unsolicited_answers,
            )
            active, next_state = replay_asker, replay_asker.next_state
        else:
            active, next_state = asker, CallState()
        call = CallScope(handler.name, active, state, next_state, round_no)
        call.call_id = call_id.hex()
        ctx: Context[Any] = Context(server, request.scope, call)
        try:
            outcome = await Round(signature, signature.plan, ctx, call, active).run(arguments)
        except MCPError:
            raise
        except ToolError as exc:
            return RoundReply(
                "error",
                error=f"{_verb(handler)} {handler.name}: {exc}",
                call_id=call.call_id,
                round_no=round_no,
            )
        except Exception:
            log.exception("%s %r failed", handler.role, handler.name)
            return RoundReply(
                "error",
                error=f"{_verb(handler)} {handler.name}: an unexpected error occurred; the "
                "server log has the details",
                call_id=call.call_id,
                round_no=round_no,
            )
        if isinstance(outcome, Completed):
            return RoundReply("complete", outcome.value, call_id=call.call_id, round_no=round_no)
        assert replay, "a back-channel asker never suspends a round"
        pending = replay_asker.pending
        requests = {key: rendered.request() for key, rendered in pending.items()}
        try:
            sealed = self.seal(next_state, binding, principal, call_id, round_no)
        except OversizedState as exc:
            return RoundReply("error", error=str(exc), call_id=call.call_id, round_no=round_no)
        return RoundReply(
            "input_required",
            input_requests=requests,
            request_state=sealed,
            call_id=call.call_id,
            round_no=round_no,
        )

    def restore(
        self, token: Any, binding: Binding, principal: str | None
    ) -> tuple[CallState, bytes, int]:
        server = self.server
        claims = Claims.decode(server.keys.open(token, server.max_token_chars))
        claims.verify(binding, principal)
        if not isinstance(claims.state, bytes):
            raise InvalidRequestState("state by reference needs a store")
        return CallState.decode(claims.state), claims.call_id, claims.round_no + 1

    def seal(
        self,
        state: CallState,
        binding: Binding,
        principal: str | None,
        call_id: bytes,
        round_no: int,
    ) -> str:
        server = self.server
        encoded = state.encode()
        if len(encoded) > server.max_inline_state:
            raise OversizedState(
                f"This call's state grew to {len(encoded)} bytes, over the inline limit of "
                f"{server.max_inline_state} bytes. Configure a store (store='sqlite:///calls.db' "
                "or a redis:// URL) so large state is kept by reference."
            )
        claims = Claims(
            issued_at=int(time.time()),
            ttl=server.state_ttl,
            binding=binding.digest(),
            tags=binding.tags(),
            principal=principal_tag(principal) if principal is not None else None,
            call_id=call_id,
            round_no=round_no,
            state=encoded,
        )
        return server.keys.seal(claims.encode())


def _verb(handler: Handler) -> str:
    return {
        "tool": "Error executing tool",
        "prompt": "Error getting prompt",
        "resource": "Error reading resource",
    }[handler.role]
