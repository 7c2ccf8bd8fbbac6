"""Server→client requests of the 2025-11-25 era, and the routing of their responses.

A question asked on the back-channel becomes a JSON-RPC request on the call's stream; its id
names this process (``<instance>-<n>``). The client posts the response to any replica: the one
that holds the waiting call takes it directly, any other forwards it over the store's bus. So
legacy clients need no sticky sessions.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from engine._internal.budgets import ANONYMOUS, over_budget
from engine._internal.json_bytes import dumps
from engine._internal.metrics import Metrics
from engine.errors import INTERNAL_ERROR, TOO_MANY_PENDING_CALLS, MCPError, ToolError
from engine.questions.kinds import BadAnswer
from engine.questions.rendering import Rendered
from engine.state.call import CallState

log = logging.getLogger("engine.backchannel")

Outbox = Callable[[bytes], Awaitable[None]]
"""Writes one message on the stream of the call that asks."""
Forward = Callable[[str, dict[str, Any], str | None], Awaitable[None]]
"""Sends a response to the process named by the instance id (over the store's bus)."""


class ClientRefused(MCPError):
    """The client answered a server→client request with a JSON-RPC error: the request that
    asked fails with that error, its code, message and data as the client gave them."""


class UnusableAnswers(ValueError):
    """The client kept answering a question with answers that do not fit it. The call fails
    as a crash would: the client learns only that it failed, the server log says why."""


@dataclass(slots=True)
class _Waiting:
    session_id: str | None
    """Only the session that was asked may answer."""
    done: anyio.Event = field(default_factory=anyio.Event)
    message: dict[str, Any] | None = None
    ended: str | None = None
    """Why the wait was ended without an answer (the replica shuts down)."""


class BackChannel:
    """This process's open server→client requests, and the calls waiting on them.

    A call waiting for an answer holds its request, its stream and its round until the answer
    comes or the answer timeout passes, even once its client has gone; so how many may wait is
    bounded, per session and in all, and a call beyond the bound is refused before it asks.
    """

    def __init__(
        self,
        forward: Forward | None = None,
        *,
        max_pending_per_session: int = 16,
        max_pending_per_principal: int = 100,
        max_pending: int = 1000,
        metrics: Metrics | None = None,
    ) -> None:
        self.instance = secrets.token_hex(4)
        self._waiting: dict[str, _Waiting] = {}
        self.forward = forward
        self.max_pending_per_session = max_pending_per_session
        self.max_pending_per_principal = max_pending_per_principal
        self.max_pending = max_pending
        self.metrics = metrics
        self._pending: dict[str | None, int] = {}
        """Calls waiting for an answer, by session."""
        self._by_principal: dict[str, int] = {}
        """Calls waiting for an answer, by principal key (``principal_key``)."""
        self.pending_total = 0

    def admit(self, session_id: str | None, principal: str = ANONYMOUS) -> None:
        """Count one more call of ``session_id`` (of the principal keyed ``principal``) waiting
        for an answer, or refuse it: at the session's bound, the principal's, or the replica's."""
        held = self._pending.get(session_id, 0)
        if held >= self.max_pending_per_session:
            raise self._refusal(
                "max_pending_calls_per_session",
                self.max_pending_per_session,
                f"This session already has {held} calls waiting for an answer: answer their "
                "questions or cancel them (notifications/cancelled), then call again",
            )
        by_principal = self._by_principal.get(principal, 0)
        if by_principal >= self.max_pending_per_principal:
            raise self._refusal(
                "max_pending_calls_per_principal",
                self.max_pending_per_principal,
                f"Your sessions already have {by_principal} calls waiting for an answer on this "
                "replica: answer their questions or cancel them (notifications/cancelled), then "
                "call again",
            )
        if self.pending_total >= self.max_pending:
            raise self._refusal(
                "max_pending_calls",
                self.max_pending,
                f"This server already has {self.max_pending} calls waiting for their clients' "
                "answers; call again shortly (another replica may have room)",
            )
        self._pending[session_id] = held + 1
        self._by_principal[principal] = by_principal + 1
        self.pending_total += 1

    def _refusal(self, setting: str, limit: int, text: str) -> MCPError:
        return over_budget(
            self.metrics, TOO_MANY_PENDING_CALLS, setting, limit, text, "too_many_pending_calls"
        )

    def release(self, session_id: str | None, principal: str = ANONYMOUS) -> None:
        """A call of ``session_id`` no longer waits: its slot is free."""
        held = self._pending.pop(session_id, 0) - 1
        if held > 0:
            self._pending[session_id] = held
        by_principal = self._by_principal.pop(principal, 0) - 1
        if by_principal > 0:
            self._by_principal[principal] = by_principal
        self.pending_total -= 1

    def end_all(self, reason: str) -> int:
        """End every wait for an answer here, each call failing with ``reason``: a shutdown
        ends them as answers would, instead of cancelling each (a traceback each). How many."""
        ended = 0
        for waiting in self._waiting.values():
            if not waiting.done.is_set():
                waiting.ended = reason
                waiting.done.set()
                ended += 1
        return ended

    def pending(self, session_id: str | None) -> int:
        """How many calls of ``session_id`` wait for an answer."""
        return self._pending.get(session_id, 0)

    async def request(
        self,
        outbox: Outbox,
        method: str,
        params: dict[str, Any] | None,
        wait: float,
        session_id: str | None = None,
    ) -> Any:
        """Send a request on ``outbox`` and wait (bounded) for the session's result.

        The id names this process and is otherwise random, so nobody can guess another
        session's question; an answer counts only when it comes from the session asked.
        """
        request_id = f"{self.instance}-{secrets.token_urlsafe(12)}"
        waiting = self._waiting[request_id] = _Waiting(session_id)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params:
            message["params"] = params
        try:
            await outbox(dumps(message))
            with anyio.fail_after(wait):
                await waiting.done.wait()
        except TimeoutError:
            raise ToolError(
                f"The client did not answer {method} within {wait:g} s; call the tool again "
                "when the user is ready"
            ) from None
        finally:
            self._waiting.pop(request_id, None)
        if waiting.ended is not None:
            raise ToolError(f"The client was asked {method}, but {waiting.ended}")
        assert waiting.message is not None
        if "error" in waiting.message:
            error = waiting.message["error"]
            code = error.get("code") if isinstance(error, dict) else None
            text = error.get("message") if isinstance(error, dict) else None
            if type(code) is not int or not isinstance(text, str):
                code, text = INTERNAL_ERROR, f"The client refused {method} with a malformed error"
            raise ClientRefused(code, text, error.get("data") if isinstance(error, dict) else None)
        return waiting.message.get("result")

    async def deliver(self, message: dict[str, Any], session_id: str | None) -> bool:
        """Route a session's response: to a call waiting here, or over the bus to its process."""
        request_id = message.get("id")
        if not isinstance(request_id, str):
            log.info("ignored a response to unknown request id %r", request_id)
            return False
        if request_id in self._waiting:
            return self._accept(request_id, message, session_id)
        instance, _, _ = request_id.partition("-")
        if instance != self.instance and self.forward is not None:
            await self.forward(instance, message, session_id)
            return True
        log.info("ignored a response to unknown request id %r", request_id)
        return False

    def accept_forwarded(
        self, instance: str, message: dict[str, Any], session_id: str | None
    ) -> None:
        """A response another replica received for one of our requests."""
        if instance == self.instance:
            self._accept(str(message.get("id")), message, session_id)

    def _accept(self, request_id: str, message: dict[str, Any], session_id: str | None) -> bool:
        waiting = self._waiting.get(request_id)
        if waiting is None:
            log.info("ignored a response to unknown request id %r", request_id)
            return False
        if waiting.session_id != session_id:
            log.warning("ignored a response to request %r from another session", request_id)
            return False
        waiting.message = message
        waiting.done.set()
        return True


class BackChannelAnswers:
    """Answers questions by asking the client in place (the 2025-11-25 era).

    The same capability checks and error texts as the replayed era; an unusable answer is asked
    again (up to ``attempts`` times), then the call fails with a message saying why.
    """

    answer = None
    """Every answer is waited for: the client is asked during the round."""

    def __init__(
        self,
        channel: BackChannel,
        outbox: Outbox,
        capabilities: dict[str, Any],
        *,
        timeout: float,
        attempts: int = 3,
        session_id: str | None = None,
        principal: str = ANONYMOUS,
    ) -> None:
        self.session_id = session_id
        self.principal = principal
        """Whose budget of waiting calls this call draws on (``principal_key``)."""
        self.channel = channel
        self.outbox = outbox
        self.capabilities = capabilities
        self.timeout = timeout
        self.attempts = attempts
        self.next_state = CallState()
        self.accepted: dict[str, Any] = {}
        self.asked_in_place: dict[str, dict[str, Any]] = {}
        self.on_checkpoint: Callable[[str], Awaitable[None]] | None = None
        self.before_once: Callable[[str], Awaitable[None]] | None = None
        self._asking = 0
        """Questions of this call waiting now: the call holds one pending slot while any do."""

    @contextlib.contextmanager
    def _waiting_slot(self) -> Iterator[None]:
        if self._asking == 0:
            self.channel.admit(self.session_id, self.principal)
        self._asking += 1
        try:
            yield
        finally:
            self._asking -= 1
            if self._asking == 0:
                self.channel.release(self.session_id, self.principal)

    def new_checkpoints(self) -> dict[str, Any]:
        return dict(self.next_state.checkpoints)  # the call had none before this one round

    async def ask(self, key: str, question: Rendered, asker: str) -> Any:
        if not question.from_body:
            # A body's question goes to the client whatever it declared: a client that cannot
            # answer says so, and its error ends the call.
            error = question.question.capability_error(self.capabilities, asker)
            if error is not None:
                raise error
        params = question.kind.back_channel(question.params)
        for _ in range(self.attempts):
            with self._waiting_slot():
                answer = await self.channel.request(
                    self.outbox, question.question.method, params, self.timeout, self.session_id
                )
            try:
                outcome = question.question.parse(answer)
            except BadAnswer as exc:
                log.info("%s got an unusable answer (%s); asking again", asker, exc)
                continue
            if not question.settles(outcome):
                raise ToolError(
                    f"{asker} sent the user to {params.get('url')}; finish there, then call the "
                    "tool again"
                )
            self.accepted[key] = question.question.kept(outcome)
            self.asked_in_place[key] = question.request()
            return outcome
        raise UnusableAnswers(
            f"{asker} got {self.attempts} unusable answers to {question.question.method}; the "
            "client's answers do not match the question"
        )
