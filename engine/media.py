"""``Image`` and ``Audio``: a picture or a sound a tool or prompt returns, from a file or from
bytes in memory.

Returned by a tool, listed in a prompt's messages or put in a ``UserMessage``, each becomes an
image or audio content block: the bytes base64-encoded, the MIME type from ``format`` or else
from the file's suffix. A file is read when the result is built, not when the helper is made, so
a server may name a file that is written later.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from engine.types import AudioContent, ImageContent


class Media:
    """What ``Image`` and ``Audio`` share: where the bytes are and what type they are."""

    kind: ClassVar[str]
    """The first part of the MIME type, and the content block's ``type``."""
    unknown_bytes: ClassVar[str]
    """The MIME type of ``data=`` given without a ``format``."""
    by_suffix: ClassVar[Mapping[str, str]]

    def __init__(
        self, path: str | Path | None = None, data: bytes | None = None, format: str | None = None
    ) -> None:
        """Give the file's ``path`` or the ``data`` itself, not both; ``format`` (``"png"``,
        ``"wav"``) names the MIME subtype when the suffix would not, or there is none."""
        if (path is None) == (data is None):
            raise ValueError(
                f"{type(self).__name__} takes a file path= or the bytes as data=, exactly one "
                "of them"
            )
        self.path = Path(path) if path is not None else None
        self.data = data
        self.format = format

    @property
    def mime_type(self) -> str:
        if self.format:
            return f"{self.kind}/{self.format.lower()}"
        if self.path is not None:
            return self.by_suffix.get(self.path.suffix.lower(), "application/octet-stream")
        return self.unknown_bytes

    def base64_data(self) -> str:
        """The bytes, base64-encoded; a file is read now (``OSError`` when it cannot be)."""
        raw = self.path.read_bytes() if self.path is not None else self.data or b""
        return base64.b64encode(raw).decode("ascii")

    def to_content(self) -> ImageContent | AudioContent:
        raise NotImplementedError

    def __repr__(self) -> str:
        source = (
            f"path={str(self.path)!r}"
            if self.path is not None
            else f"{len(self.data or b'')} bytes"
        )
        return f"{type(self).__name__}({source}, mime_type={self.mime_type!r})"


class Image(Media):
    """An image to return from a tool or put in a prompt message."""

    kind = "image"
    unknown_bytes = "image/png"
    by_suffix: ClassVar[Mapping[str, str]] = {
        ".png": "image/png",
        ".jpg": "image/jpeg",
        ".jpeg": "image/jpeg",
        ".gif": "image/gif",
        ".webp": "image/webp",
    }

    def to_image_content(self) -> ImageContent:
        return ImageContent(data=self.base64_data(), mime_type=self.mime_type)

    def to_content(self) -> ImageContent:
        return self.to_image_content()


class Audio(Media):
    """A sound to return from a tool or put in a prompt message."""

    kind = "audio"
    unknown_bytes = "audio/wav"
    by_suffix: ClassVar[Mapping[str, str]] = {
        ".wav": "audio/wav",
        ".mp3": "audio/mpeg",
        ".ogg": "audio/ogg",
        ".flac": "audio/flac",
        ".aac": "audio/aac",
        ".m4a": "audio/mp4",
    }

    def to_audio_content(self) -> AudioContent:
        return AudioContent(data=self.base64_data(), mime_type=self.mime_type)

    def to_content(self) -> AudioContent:
        return self.to_audio_content()


__all__ = ["Audio", "Image", "Media"]
