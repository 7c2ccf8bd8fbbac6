"""What a claim finds, decided alike by the stores that decide it in Python (memory and SQLite;
Redis decides in its claim script). The results that carry no response are built once."""

from __future__ import annotations

from .base import Claim, ClaimResult

FRESH = ClaimResult(Claim.FRESH)
CONFLICT = ClaimResult(Claim.CONFLICT)
IN_PROGRESS = ClaimResult(Claim.IN_PROGRESS)


def claim_found(theirs: bytes, response: bytes | None, fingerprint: bytes) -> ClaimResult:
    """The claim of `fingerprint` on a live record of the request `theirs`, whose `response` is
    set once it completed."""
    if theirs != fingerprint:
        return CONFLICT
    if response is not None:
        return ClaimResult(Claim.DUPLICATE, response)
    return IN_PROGRESS
