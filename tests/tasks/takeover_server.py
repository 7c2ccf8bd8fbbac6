"""A replica whose task bodies take their time: a ``once`` step, then a nap (the tests of
takeover kill it in between). ``TASK_EFFECTS`` is the file each ``once`` step appends a line to;
``TASK_NAP`` the seconds the body sleeps after it."""

from __future__ import annotations

import os
from pathlib import Path

import anyio

from engine import Context, MCPServer

mcp = MCPServer("takeover", task_lease=1.0, task_poll_interval=0.05)


@mcp.tool(task=True)
async def slow_once(n: int, ctx: Context) -> str:
    """Records ``n`` once, then naps."""

    def record() -> int:
        with Path(os.environ["TASK_EFFECTS"]).open("a") as effects:
            effects.write(f"{ctx.call_id} {n}\n")
        return n * 10

    value = await ctx.once(record)
    await anyio.sleep(float(os.environ.get("TASK_NAP", "3")))
    return f"{n} became {value}"


@mcp.tool(task=True)
async def nap_then_once(n: int, ctx: Context) -> str:
    """Naps, then records ``n`` once: a replica paused in its nap must not record it too."""
    naps = Path(os.environ["TASK_EFFECTS"] + ".naps")
    await anyio.to_thread.run_sync(_append, naps, f"{ctx.call_id} {os.getpid()}\n")
    await anyio.sleep(float(os.environ.get("TASK_NAP", "3")))

    def record() -> int:
        with Path(os.environ["TASK_EFFECTS"]).open("a") as effects:
            effects.write(f"{ctx.call_id} {n} {os.getpid()}\n")
        return n * 10

    value = await ctx.once(record)
    return f"{n} became {value}"


def _append(path: Path, line: str) -> None:
    with path.open("a") as file:
        file.write(line)
