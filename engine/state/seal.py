"""AES-256-GCM sealing with a key ring: what makes a requestState safe to hand to a client.

Token format: ``PREFIX + base64url(kid ‖ nonce ‖ ciphertext+tag)`` without padding. The prefix and
the 4-byte key id are bound as associated data, so neither can be swapped. The token never names
its algorithm: the prefix is a format version, and a new format gets a new prefix.

Rotation is three phases, each deployed everywhere before the next starts:
``[old]`` → ``[old, new]`` (everyone opens new tokens) → ``[new, old]`` (new seals) → ``[new]``
once one token TTL has passed.
"""

from __future__ import annotations

import binascii
import hashlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from engine._internal.random_pool import random_bytes
from engine.errors import InvalidRequestState

PREFIX = "s1."
_PREFIX_BYTES = PREFIX.encode()
_INFO = b"engine/request-state/v1/aes-256-gcm"
_KID_LEN = 4
_NONCE_LEN = 12
_TAG_LEN = 16
MIN_SECRET_BYTES = 32
_LABEL = re.compile(r"[A-Za-z0-9_.-]{1,32}")


KeySpec = str | bytes | tuple[str, str | bytes]
"""A secret, or ``(key id, secret)`` to name the key explicitly."""


@dataclass(frozen=True, slots=True)
class SealKey:
    kid: bytes
    label: str
    aead: AESGCM


def _secret_bytes(secret: object, index: int) -> bytes:
    """The secret of the ring's key at ``index``; an error that names that place otherwise."""
    if isinstance(secret, str):
        secret = secret.encode()
    if not isinstance(secret, bytes | bytearray):
        raise TypeError(
            f"keys[{index}] is a {type(secret).__name__}; a requestState key is a str or bytes"
        )
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(
            f"keys[{index}] has {len(secret)} bytes; a requestState key needs at least "
            f"{MIN_SECRET_BYTES} bytes of secret randomness: generate one with "
            "`python -m engine keygen`"
        )
    return bytes(secret)


def derive(spec: KeySpec, index: int = 0) -> SealKey:
    """HKDF-SHA256 from an operator secret to an AES-256-GCM key, with its key id; ``index``,
    the key's place in its ring, names it in an error."""
    label: str | None = None
    secret: object = spec
    if isinstance(spec, tuple) and len(spec) == 2:
        label, secret = spec
    material = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(
        _secret_bytes(secret, index)
    )
    if label is not None:
        kid = hashlib.sha256(b"engine/kid-label\0" + label.encode()).digest()[:_KID_LEN]
    else:
        kid = hashlib.sha256(b"engine/kid\0" + material).digest()[:_KID_LEN]
        label = kid.hex()
    return SealKey(kid=kid, label=label, aead=AESGCM(material))


class KeyRing:
    """The first key seals; every key opens. Key ids are explicit or derived from the key."""

    def __init__(self, keys: Sequence[KeySpec]) -> None:
        if not keys:
            raise ValueError("A key ring needs at least one key")
        derived = [derive(spec, index) for index, spec in enumerate(keys)]
        self._by_kid: dict[bytes, SealKey] = {}
        for key in derived:
            if key.kid in self._by_kid:
                raise ValueError(f"Duplicate key in the ring (key id {key.label})")
            self._by_kid[key.kid] = key
        self.primary = derived[0]
        self.ephemeral = False

    @classmethod
    def ephemeral_ring(cls) -> KeyRing:
        """A key made now, known to this process only."""
        ring = cls([secrets.token_bytes(32)])
        ring.ephemeral = True
        return ring

    @classmethod
    def from_env(cls, value: str) -> KeyRing:
        """``ENGINE_KEYS``: comma-separated secrets, each optionally ``id=secret``."""
        specs: list[KeySpec] = []
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            label, sep, secret = part.partition("=")
            named = sep and _LABEL.fullmatch(label) and len(secret) >= MIN_SECRET_BYTES
            specs.append((label, secret) if named else part)
        return cls(specs)

    @property
    def labels(self) -> list[str]:
        return [k.label for k in self._by_kid.values()]

    def seal(self, plaintext: bytes) -> str:
        raw = self.seal_record(plaintext, _PREFIX_BYTES)
        return PREFIX + binascii.b2a_base64(raw, newline=False).translate(_TO_URLSAFE).rstrip(
            b"="
        ).decode("ascii")

    def open(self, token: str, max_chars: int) -> bytes:
        """The plaintext of a token; :class:`InvalidRequestState` on any failure."""
        if not isinstance(token, str):
            raise InvalidRequestState("non-string requestState")
        if len(token) > max_chars:
            raise InvalidRequestState("oversized")
        if not token.startswith(PREFIX):
            raise InvalidRequestState("malformed")
        raw = _b64decode(token[len(PREFIX) :])
        if raw is None:
            raise InvalidRequestState("malformed")
        return self.open_record(raw, _PREFIX_BYTES)

    def seal_record(self, plaintext: bytes, purpose: bytes) -> bytes:
        """``kid ‖ nonce ‖ ciphertext+tag`` with the primary key: what a token encodes, and
        what the store keeps of a journal event, a spilled state or a kept response.

        ``purpose`` is bound as associated data with the key id, so a record sealed for one
        use never opens as another (a journal payload is no requestState).
        """
        key = self.primary
        nonce = random_bytes(_NONCE_LEN)
        return key.kid + nonce + key.aead.encrypt(nonce, plaintext, purpose + key.kid)

    def open_record(self, raw: bytes, purpose: bytes) -> bytes:
        """Inverse of :meth:`seal_record`; :class:`InvalidRequestState` with the reason
        (``malformed``, ``unknown key``, ``seal``) on any failure."""
        if len(raw) < _KID_LEN + _NONCE_LEN + _TAG_LEN:
            raise InvalidRequestState("malformed")
        key = self._by_kid.get(bytes(raw[:_KID_LEN]))
        if key is None:
            raise InvalidRequestState("unknown key")
        nonce = raw[_KID_LEN : _KID_LEN + _NONCE_LEN]
        try:
            return key.aead.decrypt(nonce, raw[_KID_LEN + _NONCE_LEN :], purpose + key.kid)
        except InvalidTag:
            raise InvalidRequestState("seal") from None

    def has_key(self, kid: bytes) -> bool:
        """Whether a record sealed under key id ``kid`` can open with this ring."""
        return bytes(kid) in self._by_kid


def record_key_id(raw: bytes) -> str:
    """The key id a sealed record names, in hex (how a ring's derived labels read)."""
    return bytes(raw[:_KID_LEN]).hex()


_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_TO_STANDARD_STRICT = bytes.maketrans(b"-_+/=", b"+/***")
"""base64url to the standard alphabet; ``+``, ``/`` and ``=`` to a character no decoder takes."""
_URLSAFE = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_LAST_CHARACTERS = {
    2: frozenset(_URLSAFE[::16]),  # after 2 characters, 4 spare bits: they must be zero
    3: frozenset(_URLSAFE[::4]),  # after 3, 2 spare bits
}
"""The characters that can end a canonical encoding, by its length modulo 4 (0: any)."""
_PADDING = (b"", b"", b"==", b"=")


def _b64decode(text: str) -> bytes | None:
    """Strict, canonical base64url without padding; ``None`` when it is not.

    Only the one canonical spelling of the bytes opens. The strict decoder refuses anything
    outside the alphabet, ``+``, ``/`` and padding included (they are translated to a character
    it refuses), and a length one more than a multiple of 4; a last character with spare bits
    set is refused here.
    """
    try:
        data = text.encode("ascii")
    except UnicodeEncodeError:
        return None
    tail = len(data) % 4
    if tail > 1 and data[-1] not in _LAST_CHARACTERS[tail]:
        return None
    try:
        return binascii.a2b_base64(
            data.translate(_TO_STANDARD_STRICT) + _PADDING[tail], strict_mode=True
        )
    except binascii.Error:
        return None
