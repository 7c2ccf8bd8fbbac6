"""The fleet under load: 200 multi-round calls through nginx with the official ``mcp`` Client.

Every call of ``checkout`` takes three rounds: a ``once=True`` hold plus a sampling question and
a roots question, then an elicitation that depends on the sampled note (so a 1 MB note is in the
call's state and goes to Redis by reference), then the body. nginx sends each round to the next
replica, so the rounds of one call land on different replicas.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from deploy.fleet import ROOT, Fleet, find_nginx, render_compose_nginx
from tests.e2e.driver import (
    REPORT,
    FleetClient,
    Numbers,
    check_receipts,
    duplicate_executions,
    note_of,
    replay,
    replicas_of_calls,
    served_counts,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

CALLS = 200
CONCURRENCY = 20
MEGABYTE = 1_000_000


def size_of(n: int) -> int:
    """Every 20th call samples 1 MB, every 4th 8 kB (over the 4 kB spill threshold), else 300."""
    if n % 20 == 0:
        return MEGABYTE
    if n % 4 == 1:
        return 8_000
    return 300


def test_make_fleet_once_starts_checks_and_stops() -> None:
    """``python deploy/fleet.py --once``: the whole topology up, /healthz through nginx, down."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "deploy/fleet.py", "--once", "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "MCP endpoint (nginx, round-robin): http://127.0.0.1:" in done.stdout
    assert '/healthz through nginx: 200 {"replica": "fleet-' in done.stdout
    assert time.monotonic() - started < 60


def test_the_compose_nginx_configuration_passes_nginx_t(tmp_path: Path) -> None:
    """deploy/nginx.conf as nginx -t sees it (hosts → loopback; `resolve` needs nginx 1.27.3)."""
    conf = render_compose_nginx()
    for name in ("replica-1", "replica-2", "replica-3"):
        conf = conf.replace(f"server {name}:", "server 127.0.0.1:")
    conf = conf.replace(" resolve;", ";").replace("pid /var/run/nginx.pid;", "pid nginx.pid;")
    (tmp_path / "nginx.conf").write_text(conf)
    checked = subprocess.run(
        [find_nginx(), "-t", "-p", f"{tmp_path}/", "-c", "nginx.conf", "-e", "error.log"],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr


@pytest.mark.timeout(150)
async def test_200_multi_round_calls_spread_over_the_replicas(fleet: Fleet) -> None:
    sizes = {f"load-{n:04d}": size_of(n) for n in range(CALLS)}
    fc = FleetClient(fleet.url)
    limiter = anyio.CapacityLimiter(CONCURRENCY)

    async def one(tag: str) -> None:
        async with limiter:
            await fc.checkout(tag, sizes[tag])

    started = time.monotonic()
    with anyio.fail_after(120):
        async with fc.open():
            async with anyio.create_task_group() as tg:
                for tag in sizes:
                    tg.start_soon(one, tag)
            elapsed = time.monotonic() - started
            effects = await fc.side_effects("load-")

            # Every call complete and right; the hold placed once per call, the body run once.
            check_receipts(fc, sizes, effects)
            assert sum(effects["once"].values()) == CALLS
            assert sum(effects["body"].values()) == CALLS
            assert not fc.stats.other_errors and not fc.stats.store_errors

            # Three rounds per call; each response names its replica, in the header and _meta.
            exchanges = [e for e in fc.recorder.exchanges if e.tool == "checkout"]
            assert len(exchanges) == 3 * CALLS
            assert all(e.status == 200 for e in exchanges)
            assert all(e.header_replica == e.meta_replica is not None for e in exchanges)
            for tag in sizes:
                assert [e.resumed for e in fc.recorder.by_tag[tag]] == [False, True, True]

            # Rounds of single calls landed on several replicas.
            spread = replicas_of_calls(fc, sizes)
            across = sum(1 for replicas in spread.values() if len(replicas) >= 2)
            assert set().union(*spread.values()) == set(fleet.replicas)
            assert across >= CALLS // 2, f"only {across} calls used more than one replica"
            assert any(len(replicas) == 3 for replicas in spread.values())

            # A 1 MB sampled answer goes to the store by reference: a short token after it.
            for tag, size in sizes.items():
                _, second, third = fc.recorder.by_tag[tag]
                if size == MEGABYTE:
                    assert second.request_bytes > MEGABYTE
                    assert third.state_chars < 1_000, third.state_chars
            spills = sum(
                fleet.metrics(name)["engine_state_spills_total"] for name in fleet.replicas
            )
            assert spills >= sum(1 for size in sizes.values() if size > 4096)

            # A retry of a finished round, on whichever replica: the first response, byte for
            # byte, and no second run of the body.
            replayed = [tag for n, tag in enumerate(sizes) if n % 10 == 0]
            for tag in replayed:
                final = fc.recorder.by_tag[tag][-1]
                again = await replay(fleet.url, final)
                assert again.status_code == 200
                assert again.content == final.response_body, tag
            effects_after = await fc.side_effects("load-")
            assert effects_after["body"] == effects["body"]

    served = sum(
        int(fleet.metrics(name)["engine_duplicates_served_total"]) for name in fleet.replicas
    )
    assert served == len(replayed)
    counts = served_counts(fc)
    big = [e for e in fc.recorder.exchanges if e.request_bytes > MEGABYTE]
    REPORT.append(
        Numbers(
            test="200 calls through nginx",
            calls=CALLS,
            rounds=len(exchanges),
            replicas_hit=len(counts),
            calls_across_replicas=across,
            duplicate_executions=duplicate_executions(effects_after, sizes),
            duplicates_served=served,
            failures=len(fc.stats.other_errors) + len(set(sizes) - set(fc.stats.completed)),
            note=(
                f"{note_of(counts)}; {elapsed:.1f}s at concurrency {CONCURRENCY}; "
                f"{len(big)} rounds carried 1 MB answers; {int(spills)} states spilled; "
                f"{len(replayed)} finished rounds replayed: byte-identical"
            ),
        )
    )
    print(json.dumps({"calls": CALLS, "elapsed_s": round(elapsed, 2), **counts}))
