"""``make demo``: one order whose two rounds are served by two different server instances."""

from __future__ import annotations

import json
import secrets
from typing import Any

import anyio

from engine.testing import Client
from examples.bookshop import build


def show(label: str, payload: Any) -> None:
    print(f"\n{label}\n" + json.dumps(payload, indent=2, ensure_ascii=False))


async def main() -> None:
    key = secrets.token_hex(32)
    replica_a, replica_b = build(keys=[key]), build(keys=[key])

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        print(f"\n  [user is asked] {params['message']}  -> answers: yes")
        return {"action": "accept", "content": {"confirm": True}}

    async with Client(replica_a, replica_b, elicitation=answer) as client:
        print("Ordering 'Neuromancer' (out of stock) through two replicas that share one key.")
        result = await client.call_tool("order_book", {"title": "Neuromancer"})
    for number, (served_by, raw) in enumerate(zip(result.servers, result.rounds, strict=True), 1):
        raw = {k: v for k, v in raw.items() if k != "_meta"}
        if "requestState" in raw:
            raw["requestState"] = (
                raw["requestState"][:40] + f"... ({len(raw['requestState'])} chars)"
            )
        show(f"Round {number}, served by replica {'AB'[int(served_by)]}:", raw)
    print(f"\nResult: {result.text}")


if __name__ == "__main__":
    anyio.run(main)
