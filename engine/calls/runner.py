"""A live round, end to end: token in, :func:`~engine.calls.execute.execute_round`, token or
result out.

Here the sealed requestState is opened and verified, the call's state restored (inline or from
the store), the round executed, and the next state sealed. With a store, the round is also
claimed (single use), its response kept for duplicates, and the round journaled. It knows
nothing about HTTP or JSON-RPC framing.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from engine._internal import logs
from engine._internal.budgets import over_budget
from engine._internal.hangup_guard import uncut
from engine._internal.metrics import Metrics
from engine.auth.provider import principal_of, require_scopes
from engine.calls.execute import (
    Convert,
    Executed,
    Outcome,
    execute_round,
    fails_as_protocol_error,
)
from engine.calls.journal_event import round_event
from engine.calls.reply import CallRequest, Finisher, ReplyKind, RoundReply, TaskStart
from engine.calls.traced import traced_round
from engine.di.overrides import DependencyOverrides
from engine.errors import INTERNAL_ERROR, INVALID_PARAMS, InvalidRequestState, MCPError, ToolError
from engine.handlers.base import Handler
from engine.questions.answers import AnswerSource, StatelessAnswers
from engine.role import Role
from engine.scope import RequestScope, ServerHooks
from engine.settings import JournalSettings, TokenSettings
from engine.state.call import CallState
from engine.state.claims import Binding, Claims, StateRef, new_call_id, principal_tag
from engine.state.seal import KeyRing
from engine.store_services.services import StoreServices
from engine.store_services.single_use import Hold, responses_fingerprint
from stores import StoreUnavailable

log = logging.getLogger("engine.calls")

Principal = Callable[[RequestScope], str | None]
"""The ``principal=`` callback: who is making this request (``None``: nobody in particular)."""


def token_principal(scope: RequestScope) -> str | None:
    """The default ``principal`` of a server with ``auth``: the issuer and subject of the
    request's verified token, so each call belongs to the user who started it (``None``
    without a token: on stdio, which stays unauthenticated)."""
    token = scope.access_token
    return principal_of(token) if token is not None else None


class OversizedState(ToolError):
    """The next round's state is over the inline limit and there is no store to hold it."""


class UnkeptState(ToolError):
    """The next round's state is over the inline limit and the store did not answer to keep it.

    Not a `StoreOutage` ("nothing was recorded, retry"): the round ran, and a retry would run its
    side effects again.
    """


def too_many_answers(given: int, limit: int, metrics: Metrics | None) -> MCPError:
    """The refusal of a request carrying more answers than any round asks (-32602), before
    any is read."""
    return over_budget(
        metrics,
        INVALID_PARAMS,
        "max_input_responses",
        limit,
        f"Invalid params: inputResponses has {given} answers, more than a request may carry; "
        "send only the answers to the inputRequests of the last result",
    )


class RoundRunner:
    """Runs the live rounds of one server: the token policy, the store's part, the journal."""

    def __init__(
        self,
        *,
        keys: KeyRing,
        tokens: TokenSettings,
        journal: JournalSettings,
        spill_threshold: int,
        services: StoreServices | None,
        principal: Principal | None,
        replica_id: str,
        hooks: ServerHooks,
        overrides: DependencyOverrides,
        metrics: Metrics | None = None,
    ) -> None:
        self.metrics = metrics
        """Where refusals at a budget are counted."""
        self.keys = keys
        self.tokens = tokens
        self.journal = journal
        self.spill_threshold = spill_threshold
        self.services = services
        self.binder = principal
        self.replica_id = replica_id
        self.hooks = hooks
        self.overrides = overrides
        self.journal_event = functools.partial(
            round_event, journal.arguments, replica_id, journal.server
        )
        """The journal entry of one round (`round_event` with this server's settings)."""

    def principal(self, scope: RequestScope) -> str | None:
        binder = self.binder
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

    def run(
        self,
        handler: Handler,
        request: CallRequest,
        *,
        in_place: AnswerSource | None = None,
        convert: Convert | None = None,
        task: TaskStart | None = None,
    ) -> Awaitable[RoundReply]:
        """One round; ``convert`` turns a final value into its wire result.

        Questions are answered from the request's state and ``inputResponses`` (2026-07-28),
        or, given ``in_place``, by that source within the round (2025-11-25). The conversion
        runs while the round's claim is held, so a value that cannot be sent gives the claim
        back (or becomes an error result) instead of stranding it. Given ``task``, a round whose
        resolvers are answered may start a task instead of running the body.

        A plain function: the token is opened and checked before anything is awaited, and the
        round is the awaitable returned (under its span, when the request is traced).
        """
        responses = request.input_responses
        if responses is not None:
            if not isinstance(responses, dict):
                raise MCPError(
                    INVALID_PARAMS,
                    "inputResponses must be an object of answers keyed by the inputRequests keys",
                )
            if len(responses) > self.tokens.max_input_responses:
                raise too_many_answers(
                    len(responses), self.tokens.max_input_responses, self.metrics
                )
        try:
            principal = None if self.binder is None else self.principal(request.scope)
        except Exception:
            if request.request_state is not None:
                raise InvalidRequestState("principal callback failed") from None
            raise MCPError(INTERNAL_ERROR, "Internal error") from None
        started = time.perf_counter()
        token = request.request_state
        claims: Claims | None = None
        binding: Binding | None = None  # made when a token is checked or sealed
        if token is None:
            call_id, round_no = new_call_id(), 1
        else:
            claims = Claims.decode(self.keys.open(token, self.tokens.max_token_chars))
            binding = self._binding(request)
            claims.verify(binding, principal, skew=self.tokens.clock_skew)
            if claims.scopes:
                require_scopes(request.scope.access_token, claims.scopes)
            call_id, round_no = claims.call_id, claims.round_no + 1
        self._log_as(handler, call_id, round_no, principal)
        rounds = self._round(
            handler, request, claims, binding, call_id, round_no, principal, started, in_place,
            convert, task,
        )  # fmt: skip
        trace = request.scope.trace
        if trace is None:
            return rounds
        carried = claims.trace if claims is not None else None
        return traced_round(trace, handler, call_id, round_no, carried, rounds)

    async def _round(
        self,
        handler: Handler,
        request: CallRequest,
        claims: Claims | None,
        binding: Binding | None,
        call_id: bytes,
        round_no: int,
        principal: str | None,
        started: float,
        in_place: AnswerSource | None,
        convert: Convert | None,
        task: TaskStart | None,
    ) -> RoundReply:
        """The round after its token checked out: claimed, its state restored, executed."""
        services = self.services
        responses = request.input_responses
        claimed: Hold | None = None
        if claims is not None and services is not None:
            fingerprint = responses_fingerprint(responses)
            admission = await services.claims.admit(call_id.hex(), claims.round_no, fingerprint)
            if admission.cached is not None:
                return RoundReply(
                    ReplyKind.CACHED,
                    cached=admission.cached,
                    call_id=call_id.hex(),
                    round_no=round_no,
                )
            if admission.retry:
                return RoundReply(
                    ReplyKind.INPUT_REQUIRED,
                    request_state=request.request_state,
                    call_id=call_id.hex(),
                    round_no=round_no,
                )
            claimed = admission.hold
        try:
            if claims is None:
                state = CallState({}, {}, {}, request.forwarded)
            else:
                carried = claims.state
                if not isinstance(carried, bytes):
                    carried = await self._fetch_state(carried, call_id, principal)
                state = CallState.decode(carried)
            if claimed is not None and services is not None:
                services.claims.hold(claimed)  # renewed while the round runs
            try:
                call_hex = call_id.hex()
                if in_place is None:
                    answers: AnswerSource = StatelessAnswers(
                        state,
                        responses,
                        request.scope.capabilities,
                        self.tokens.trust_unsolicited_answers,
                    )
                else:
                    answers = in_place
                if claimed is not None and services is not None:  # once: only while held
                    answers.before_once = functools.partial(services.claims.confirm, claimed)
                executed = await execute_round(
                    handler,
                    request.arguments,
                    request.scope,
                    call_hex,
                    round_no,
                    state,
                    answers,
                    hooks=self.hooks,
                    overrides=self.overrides,
                    convert=convert,
                    before_body=None if task is None else task.wanted,
                    target=request.target,
                    input_responses=responses,
                )
                outcome = executed.outcome
                if outcome is Outcome.HANDLER_ASKED and in_place is not None:
                    raise cannot_ask_in_place(handler)
                if outcome is Outcome.SUSPENDED or outcome is Outcome.HANDLER_ASKED:
                    reply = await self._suspended(
                        answers, handler, request, call_id, round_no, binding, principal,
                        None if claims is None else claims.trace, executed.value,
                    )  # fmt: skip
                    if outcome is Outcome.HANDLER_ASKED and reply.kind is ReplyKind.INPUT_REQUIRED:
                        reply.value = executed.returned
                elif outcome is Outcome.DEFERRED:
                    assert task is not None
                    reply = await task.start(
                        request, call_id, round_no, answers.next_state, principal
                    )
                else:
                    reply = _ended(executed, handler, request, call_hex, round_no)
                reply.trace = answers
            finally:  # a plain block, not a context manager: most rounds hold no claim
                if claimed is not None and services is not None:
                    services.claims.let_go(claimed)
        except BaseException:
            if claimed is not None and services is not None:
                await services.claims.abandon(claimed)
            raise
        if services is not None:
            reply.finisher = self._finisher(services, claimed, handler, request, started, principal)
        return reply

    def _log_as(
        self, handler: Handler, call_id: bytes, round_no: int, principal: str | None
    ) -> None:
        if logs.naming_rounds():
            fields = logs.RoundFields(
                call_id.hex(), round_no, handler.name, principal, self.replica_id
            )
            logs.enter_round(fields)

    async def _fetch_state(self, ref: StateRef, call_id: bytes, principal: str | None) -> bytes:
        """State kept by reference: from the store (inline state needs no await)."""
        if self.services is None:
            raise InvalidRequestState("state by reference but no store is configured")
        return await self.services.state.fetch(call_id.hex(), ref, principal)

    async def _suspended(
        self,
        answers: AnswerSource,
        handler: Handler,
        request: CallRequest,
        call_id: bytes,
        round_no: int,
        binding: Binding | None,
        principal: str | None,
        trace_in: bytes | None,
        handler_requests: dict[str, Any] | None = None,
    ) -> RoundReply:
        """The ``input_required`` reply of a round waiting for answers: the next token. It
        carries this round's trace context, or, from a replica that does not trace, the one
        its own token carried (``trace_in``), so the call stays one trace across it.

        The requests are the questions pending in the answer source, or, when the handler
        returned its own, ``handler_requests``."""
        if handler_requests is not None:
            requests = handler_requests
        else:
            assert isinstance(answers, StatelessAnswers), "questions asked in place never suspend"
            requests = {key: rendered.request() for key, rendered in answers.pending.items()}
        call_hex = call_id.hex()
        trace = request.scope.trace
        try:
            sealed = await self.seal(
                answers.next_state,
                binding or self._binding(request),
                principal,
                call_id,
                round_no,
                trace_in if trace is None else trace.carried(),
                handler.scopes,
            )
        except (OversizedState, UnkeptState) as exc:
            executed = Executed(Outcome.FAILED, error=str(exc))
            return _failed(handler, request, executed, call_hex, round_no)
        return RoundReply(ReplyKind.INPUT_REQUIRED, None, call_hex, round_no, requests, sealed)

    async def seal(
        self,
        state: CallState,
        binding: Binding,
        principal: str | None,
        call_id: bytes,
        round_no: int,
        trace: bytes | None = None,
        scopes: tuple[str, ...] = (),
    ) -> str:
        """The requestState of the next round: the state inline, or by reference to the store;
        ``trace`` is the call's trace context, carried for the next round's spans; ``scopes``
        those the call needs (its handler's ``scopes=``), checked again on the next round."""
        tokens = self.tokens
        encoded = state.encode()
        carried: bytes | StateRef = encoded
        services = self.services
        if services is not None and len(encoded) > self.spill_threshold:
            try:
                carried = await services.state.keep(
                    call_id.hex(),
                    encoded,
                    inline_limit=tokens.max_inline_state,
                    principal=principal,
                )
            except StoreUnavailable as exc:
                log.error("could not keep the state of call %s: %s", call_id.hex(), exc)
                raise UnkeptState(
                    f"The call store did not answer while keeping this call's state "
                    f"({len(encoded)} bytes, over the {tokens.max_inline_state} bytes a "
                    "requestState can carry), so the call cannot continue. This round ran: its "
                    "side effects (once=True steps) may have run and are not recorded, so calling "
                    "again would run them again. Check what this call did before starting it "
                    "anew."
                ) from None
        elif services is None and len(encoded) > tokens.max_inline_state:
            raise OversizedState(
                f"This call's state grew to {len(encoded)} bytes, over the inline limit of "
                f"{tokens.max_inline_state} bytes. Configure a store (store='sqlite:///calls.db' "
                "or a redis:// URL) so large state is kept by reference."
            )
        claims = Claims(
            int(time.time()),  # issued_at
            tokens.state_ttl,
            binding.digest(),
            binding.tags(),
            principal_tag(principal) if principal is not None else None,
            call_id,
            round_no,
            carried,
            trace,
            scopes,
        )
        return self.keys.seal(claims.encode())

    def _binding(self, request: CallRequest) -> Binding:
        """What this request's tokens are bound to."""
        return Binding(self.tokens.audience, request.method, request.target, request.arguments)

    def _finisher(
        self,
        services: StoreServices,
        claimed: Hold | None,
        handler: Handler,
        request: CallRequest,
        started: float,
        principal: str | None,
    ) -> Finisher:
        def finish(reply: RoundReply, response: bytes) -> Awaitable[None] | None:
            call_id = reply.call_id or ""
            journal = services.journal
            event = None
            if journal.journals(call_id):
                event = self.journal_event(handler, request, reply, response, started)
                trace = request.scope.trace
                trace_id = trace.recorded_trace() if trace is not None else None
                if trace_id is not None:
                    event["trace_id"] = trace_id  # in the clear: the page links the trace
                if principal is not None:
                    event["principal"] = principal  # sealed with the payload
                    event["has_principal"] = True  # in the clear: a listing says it is sealed
            if claimed is None and (event is None or journal.enqueue(call_id, event)):
                if reply.launch is not None:
                    reply.launch()
                return None  # nothing waits on the store: the journal writers take it from here
            return keep(call_id, event, response, reply.launch)

        async def keep(
            call_id: str,
            event: dict[str, Any] | None,
            response: bytes,
            launch: Callable[[], None] | None,
        ) -> None:
            # The body ran: keeping its response must not be cut short by a client hanging
            # up, or a retry would run it again. Store operations have their own timeout.
            with uncut():
                if claimed is not None:
                    await services.claims.settle(claimed, response)
                if event is not None:
                    await services.journal.record(call_id, event)
            if launch is not None:
                launch()

        return finish


def cannot_ask_in_place(handler: Handler) -> MCPError:
    """The error of a handler that returned its own input requests to a 2025-11-25 client,
    whose protocol has no ``input_required`` result to carry them."""
    log.error(
        "%s %r returned an InputRequiredResult to a 2025-11-25 client, which cannot receive "
        "one; ask with ctx.elicit() / ctx.sample() / ctx.list_roots() or a Resolve(...) "
        "dependency to reach clients of both protocol versions",
        handler.role,
        handler.name,
    )
    return MCPError(
        INTERNAL_ERROR,
        "Handler returned an invalid result",
        {
            "reason": f"{handler.role} {handler.name!r} asked for input by returning an "
            "InputRequiredResult, which protocol 2025-11-25 has no result for; a client must "
            "use protocol 2026-07-28 to call it"
        },
    )


def _ended(
    executed: Executed, handler: Handler, request: CallRequest, call_id: str, round_no: int
) -> RoundReply:
    """The reply of a round that completed or failed."""
    if executed.outcome is Outcome.COMPLETE:
        return RoundReply(ReplyKind.COMPLETE, executed.value, call_id, round_no)
    if executed.unexpected is not None:
        log.error("%s %r failed", handler.role, handler.name, exc_info=executed.unexpected)
    reply = _failed(handler, request, executed, call_id, round_no)
    reply.exception, reply.cause = executed.unexpected, executed.cause
    return reply


def _failed(
    handler: Handler, request: CallRequest, executed: Executed, call_id: str, round_no: int
) -> RoundReply:
    """A tool's failure is an error result; a prompt's or resource's raises a protocol error."""
    text = executed.error or ""
    if not fails_as_protocol_error(handler):
        return RoundReply(ReplyKind.ERROR, error=text, call_id=call_id, round_no=round_no)
    data = {"uri": request.target} if handler.role is Role.RESOURCE else {"name": request.target}
    raise MCPError(executed.code, text, data) from executed.unexpected


__all__ = ["OversizedState", "Principal", "RoundRunner", "UnkeptState", "token_principal"]
