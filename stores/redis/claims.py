"""Single-use rounds on Redis (`ClaimStore`): a hash per round under its call's hash tag, each
operation one Lua script (`stores.redis.lua`), over the shared connection while the store serves.

A duplicate waiting for a round (`wait_complete`) polls the round rather than subscribing to a
notice: a waiter then holds no connection between reads, so a storm of retries cannot drain the
pool. Completions and releases in this process wake it at once.
"""

from __future__ import annotations

from .._checks import check_owner, check_round_key, check_round_op
from .._waiters import Waiters, wait_settled
from ..base import Claim, ClaimResult
from . import lua
from .client import as_bytes
from .core import RedisCore, milliseconds

_CLAIMS = {claim.value.encode(): claim for claim in Claim}
"""The claim script's replies, as Redis sends them."""


class RedisClaims(RedisCore):
    """`ClaimStore` of `RedisStore`."""

    def _open_claims(self, poll_interval: float) -> None:
        """Called by `RedisStore.__init__`."""
        self._poll_interval = poll_interval
        self._waiters = Waiters()
        self._claim = self._client.register_script(lua.CLAIM)
        self._complete = self._client.register_script(lua.COMPLETE)
        self._release = self._client.register_script(lua.RELEASE)
        self._renew = self._client.register_script(lua.RENEW)

    def _round_key(self, call_id: str, round_no: int) -> str:
        return f"{self._call_keys(call_id)}:round:{round_no}"

    async def claim(
        self,
        call_id: str,
        round_no: int,
        fingerprint: bytes,
        ttl: float,
        *,
        owner: bytes | None = None,
    ) -> ClaimResult:
        own = check_round_op(call_id, round_no, ttl, owner)
        key = self._round_key(call_id, round_no)
        args: list[bytes | int] = [bytes(fingerprint), milliseconds(ttl)]
        if own is not None:
            args.append(own)
        reply = await self._script(
            self._claim, [key], args, "claim of call {!r} round {}", call_id, round_no
        )
        status = _CLAIMS.get(as_bytes(reply[0], "a claim")) or Claim(reply[0].decode())
        response = as_bytes(reply[1], "a response") if status is Claim.DUPLICATE else None
        return ClaimResult(status, response)

    async def complete(
        self, call_id: str, round_no: int, fingerprint: bytes, response: bytes, ttl: float
    ) -> None:
        check_round_op(call_id, round_no, ttl)
        key = self._round_key(call_id, round_no)
        args = [bytes(fingerprint), bytes(response), milliseconds(ttl)]
        if await self._script(
            self._complete, [key], args, "complete of call {!r} round {}", call_id, round_no
        ):
            self._waiters.notify(key)

    async def release(
        self, call_id: str, round_no: int, fingerprint: bytes, *, owner: bytes | None = None
    ) -> None:
        check_round_key(call_id, round_no)
        own = check_owner(owner)
        key = self._round_key(call_id, round_no)
        args = [bytes(fingerprint)] if own is None else [bytes(fingerprint), own]
        if await self._call(
            f"release of call {call_id!r} round {round_no}",
            lambda: self._release(keys=[key], args=args),
        ):
            self._waiters.notify(key)

    async def renew(
        self, call_id: str, round_no: int, fingerprint: bytes, owner: bytes, ttl: float
    ) -> bool:
        own = check_round_op(call_id, round_no, ttl, owner)
        if own is None:
            return False
        key = self._round_key(call_id, round_no)
        renewed = await self._call(
            f"renewal of call {call_id!r} round {round_no}",
            lambda: self._renew(keys=[key], args=[bytes(fingerprint), own, milliseconds(ttl)]),
        )
        return bool(renewed)

    async def wait_complete(
        self,
        call_id: str,
        round_no: int,
        fingerprint: bytes,
        timeout: float,  # noqa: ASYNC109 - a bound on the wait, which then returns None
    ) -> bytes | None:
        # Polling rather than a pub/sub notice: a waiter then holds no connection between
        # reads, so a storm of retries cannot drain the pool.
        check_round_key(call_id, round_no)
        key = self._round_key(call_id, round_no)

        async def read() -> tuple[object, bytes | None]:
            fp, response = await self._call(
                f"wait_complete of call {call_id!r} round {round_no}",
                lambda: self._client.hmget(key, ["fp", "response"]),
            )
            return fp, None if response is None else as_bytes(response, "a response")

        return await wait_settled(
            read, fingerprint, self._waiters, key, timeout, poll=self._poll_interval
        )
