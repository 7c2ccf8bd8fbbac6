"""Sealing with the operator's own codec: ``RequestStateSecurity(codec=...)``.

A codec is any object with ``seal(bytes) -> str`` and ``unseal(str) -> bytes`` (a KMS-held key,
an HSM, a format of its own); ``unseal`` raises :class:`~engine.errors.InvalidRequestState` for a
token it did not mint. :class:`CodecRing` puts one where a :class:`~engine.state.seal.KeyRing`
goes: it seals requestStates and what the store keeps (journal payloads, spilled states, kept
responses, task records) with the codec, so a server given a codec needs no keys of ours.

A record's purpose is sealed inside the payload (its length in four bytes, then itself), so what
the codec authenticates binds it as the key ring's associated data does: a record sealed for one
use never opens as another.
"""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from engine.errors import InvalidRequestState
from engine.state.seal import KeyRing

log = logging.getLogger("engine.seal")


@runtime_checkable
class RequestStateCodec(Protocol):
    """What ``RequestStateSecurity(codec=...)`` takes: authenticated sealing, both ways
    synchronous (keep key material in memory rather than calling a service per token)."""

    def seal(self, payload: bytes) -> str:
        """An opaque, URL-safe token protecting ``payload``."""
        ...

    def unseal(self, token: str) -> bytes:
        """The payload of a token this codec sealed unchanged; ``InvalidRequestState`` for any
        other."""
        ...


class CodecRing(KeyRing):
    """A key ring whose sealing is the operator's codec. Whatever the codec raises, a token or
    record that does not open is :class:`InvalidRequestState` (the codec's own reason when it
    raises one, ``codec error`` otherwise); a codec that fails to seal raises as it does."""

    def __init__(self, codec: RequestStateCodec) -> None:  # no keys of ours: not KeyRing's
        if not isinstance(codec, RequestStateCodec):
            raise TypeError(
                f"codec {codec!r} needs seal(payload: bytes) -> str and unseal(token: str) -> "
                "bytes methods"
            )
        self.codec = codec
        self.ephemeral = False

    @property
    def labels(self) -> list[str]:
        return [f"codec:{type(self.codec).__name__}"]

    def seal(self, plaintext: bytes) -> str:
        token = self.codec.seal(plaintext)
        if not isinstance(token, str):
            raise TypeError(
                f"{type(self.codec).__name__}.seal returned {type(token).__name__}, not str"
            )
        return token

    def open(self, token: str, max_chars: int) -> bytes:
        if not isinstance(token, str):
            raise InvalidRequestState("non-string requestState")
        if len(token) > max_chars:
            raise InvalidRequestState("oversized")
        return self._unseal(token)

    def seal_record(self, plaintext: bytes, purpose: bytes) -> bytes:
        return self.seal(_framed(purpose) + plaintext).encode("utf-8", "surrogatepass")

    def open_record(self, raw: bytes, purpose: bytes) -> bytes:
        try:
            token = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequestState("malformed") from None
        payload = self._unseal(token)
        frame = _framed(purpose)
        if not payload.startswith(frame):
            raise InvalidRequestState("seal")
        return payload[len(frame) :]

    def has_key(self, kid: bytes) -> bool:
        """A codec names no keys of ours: whether it opens a record is known by trying."""
        return True

    def _unseal(self, token: str) -> bytes:
        try:
            payload = self.codec.unseal(token)
        except InvalidRequestState:
            raise
        except Exception:
            log.exception("the requestState codec raised while opening a token")
            raise InvalidRequestState("codec error") from None
        if not isinstance(payload, bytes | bytearray):
            log.error("the requestState codec's unseal returned %s, not bytes", type(payload))
            raise InvalidRequestState("codec error")
        return bytes(payload)


def _framed(purpose: bytes) -> bytes:
    return len(purpose).to_bytes(4, "big") + purpose


__all__ = ["CodecRing", "RequestStateCodec"]
