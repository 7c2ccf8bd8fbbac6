"""Faults on a live fleet: a replica SIGKILLed, Redis restarted, a replica drained by SIGTERM.

Each test starts its own fleet (nginx, three replicas, Redis) and drives calls through nginx
with the official ``mcp`` Client; the side-effect logs of the example server say how many times
each call's ``once=True`` hold and body ran, whatever happened to the processes that ran them.
"""

from __future__ import annotations

import signal
import socket
import time
from collections import Counter

import anyio
import pytest

from deploy.fleet import LOOPBACK, Fleet, Replica, http_get
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
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

MEGABYTE = 1_000_000

NGINX_KEEPALIVE_SECONDS = 4
"""How long nginx keeps an idle connection to a replica (``keepalive_timeout 4s``): a draining
replica closes every connection after its next response, so after this nothing reaches it."""


def refuses_connections(port: int) -> bool:
    try:
        socket.create_connection((LOOPBACK, port), timeout=0.2).close()
    except OSError:
        return True
    return False


def across(fc: FleetClient, tags: list[str]) -> int:
    return sum(1 for replicas in replicas_of_calls(fc, tags).values() if len(replicas) >= 2)


def retried_by_nginx(fleet: Fleet) -> int:
    """Requests nginx sent to a second replica after the first refused (its access log)."""
    assert fleet.nginx is not None
    log = fleet.nginx.access_log.read_text()
    return sum(1 for line in log.splitlines() if "upstream=" in line and ", " in line)


# --- a replica killed between rounds --------------------------------------------------------------


@pytest.mark.timeout(90)
async def test_sigkill_a_replica_between_rounds_every_call_finishes_on_the_others(
    fleet: Fleet,
) -> None:
    calls = 30
    sizes = {f"kill-{n:02d}": MEGABYTE if n < 2 else 300 for n in range(calls)}
    tags = list(sizes)
    arrived = 0
    all_waiting = anyio.Event()
    release = anyio.Event()

    async def hold_at_confirmation(message: str) -> None:
        """Each call waits here between rounds 2 and 3 until the replica is dead."""
        nonlocal arrived
        arrived += 1
        if arrived == calls:
            all_waiting.set()
        await release.wait()

    fc = FleetClient(fleet.url, before_confirm=hold_at_confirmation)
    with anyio.fail_after(60):
        async with fc.open():
            async with anyio.create_task_group() as tg:
                for tag in tags:
                    tg.start_soon(fc.checkout, tag, sizes[tag])
                await all_waiting.wait()
                # Every call is between rounds: two answered, nothing in flight.
                assert all(e.done_at > 0 for e in fc.recorder.exchanges)
                assert all(len(fc.recorder.by_tag[tag]) == 2 for tag in tags)
                seconds = Counter(fc.recorder.by_tag[tag][1].header_replica for tag in tags)
                victim_name, stranded = seconds.most_common(1)[0]
                assert victim_name is not None
                victim = fleet.replicas[victim_name]
                victim.signal(signal.SIGKILL)
                assert await anyio.to_thread.run_sync(victim.wait, 10) == -signal.SIGKILL
                await anyio.sleep(0.3)
                release.set()
            effects = await fc.side_effects("kill-")

    check_receipts(fc, sizes, effects)
    assert not fc.stats.other_errors
    finals = [fc.recorder.by_tag[tag][2] for tag in tags]
    assert all(e.status == 200 for e in finals)
    assert victim_name not in {e.header_replica for e in finals}
    # The calls whose last round the victim served were resumed by the survivors.
    resumed_elsewhere = [
        tag for tag in tags if fc.recorder.by_tag[tag][1].header_replica == victim_name
    ]
    assert len(resumed_elsewhere) == stranded >= 1
    # Holds the victim placed before it died count once, in its own effect log.
    assert any(
        fc.stats.completed[t].structured_content["hold_replica"] == victim_name for t in tags
    )
    counts = served_counts(fc)
    REPORT.append(
        Numbers(
            test="SIGKILL a replica between rounds",
            calls=calls,
            rounds=sum(counts.values()),
            replicas_hit=len(counts),
            calls_across_replicas=across(fc, tags),
            duplicate_executions=duplicate_executions(effects, tags),
            duplicates_served=0,
            failures=len(fc.stats.other_errors),
            note=(
                f"killed {victim_name} with {stranded} calls waiting on it; all finished on the "
                f"others; nginx moved {retried_by_nginx(fleet)} requests off the dead replica; "
                f"{note_of(counts)}"
            ),
        )
    )


# --- Redis restarted under load -------------------------------------------------------------------


@pytest.mark.timeout(120)
async def test_redis_restart_during_load_loses_nothing_and_runs_nothing_twice(
    durable_fleet: Fleet,
) -> None:
    fleet = durable_fleet
    calls, concurrency = 60, 12
    sizes = {f"redis-{n:02d}": MEGABYTE if n % 20 == 3 else 300 for n in range(calls)}
    tags = list(sizes)
    fc = FleetClient(fleet.url)
    limiter = anyio.CapacityLimiter(concurrency)
    outage: dict[str, float | int | str] = {}
    any_replica = next(iter(fleet.replicas.values()))

    async def one(tag: str) -> None:
        async with limiter:
            await fc.checkout(tag, sizes[tag], retry_store_errors=True, deadline=60)

    async def restart_redis_midway() -> None:
        with anyio.fail_after(30):
            await wait_until(lambda: len(fc.stats.completed) >= 10)
        outage["completed_before"] = len(fc.stats.completed)
        await anyio.to_thread.run_sync(fleet.kill_redis)
        down = time.monotonic()
        # While Redis is down, /healthz says so: 503, naming the store.
        status, body, _ = await anyio.to_thread.run_sync(
            lambda: http_get(any_replica.port, "/healthz", timeout=10.0)
        )
        outage["healthz_down"] = status
        outage["healthz_body"] = body.decode()
        await anyio.sleep(max(0.0, 1.5 - (time.monotonic() - down)))
        await anyio.to_thread.run_sync(fleet.start_redis)
        outage["down_s"] = round(time.monotonic() - down, 2)

    with anyio.fail_after(100):
        async with fc.open():
            async with anyio.create_task_group() as tg:
                tg.start_soon(restart_redis_midway)
                for tag in tags:
                    tg.start_soon(one, tag)
            for name in fleet.replicas:
                await anyio.to_thread.run_sync(fleet.wait_healthy, name)
            effects = await fc.side_effects("redis-")

            # Clear errors while it was down: -32603 naming the store; nothing else failed.
            assert fc.stats.store_errors, "the outage refused no round: it came too late"
            assert {code for _, code, _ in fc.stats.store_errors} == {-32603}
            messages = {message for _, _, message in fc.stats.store_errors}
            assert messages == {
                "The call store is unavailable; nothing was recorded for this round. Retry the "
                "request shortly."
            }
            assert not fc.stats.other_errors
            assert outage["healthz_down"] == 503
            assert '"store":"unavailable: ' in str(outage["healthz_body"])

            # Every call completed, its hold placed once and its body run once.
            check_receipts(fc, sizes, effects)

            # No acknowledged result lost: every finished call's last round, sent again after
            # the restart, gets its first response byte for byte (from Redis's AOF), and no
            # body runs again.
            for tag in tags:
                final = fc.recorder.by_tag[tag][-1]
                with anyio.fail_after(20):
                    while True:
                        again = await replay(fleet.url, final)
                        if again.content == final.response_body:
                            break
                        # A response kept while the store was down is written in the background
                        # once it is back; until then a retry is told to retry.
                        assert b'"resultType":"input_required"' in again.content, again.content
                        await anyio.sleep(0.25)
            effects_after = await fc.side_effects("redis-")
            assert effects_after["body"] == effects["body"]

    served = sum(
        int(fleet.metrics(name)["engine_duplicates_served_total"]) for name in fleet.replicas
    )
    assert served >= calls
    counts = served_counts(fc)
    REPORT.append(
        Numbers(
            test="Redis restarted under load",
            calls=calls,
            rounds=sum(counts.values()),
            replicas_hit=len(counts),
            calls_across_replicas=across(fc, tags),
            duplicate_executions=duplicate_executions(effects_after, tags),
            duplicates_served=served,
            failures=len(fc.stats.other_errors),
            note=(
                f"Redis SIGKILLed after {outage['completed_before']} calls, back after "
                f"{outage['down_s']}s; {len(fc.stats.store_errors)} rounds refused with -32603 "
                f"and retried ({fc.stats.resumes} resumed, "
                f"{sum(fc.stats.restarts.values())} restarted); all {calls} final rounds "
                "replayed after the restart: byte-identical"
            ),
        )
    )


# --- a replica drained by SIGTERM -----------------------------------------------------------------


@pytest.mark.timeout(90)
async def test_sigterm_drains_a_replica(fleet: Fleet) -> None:
    slow_calls, slow_seconds = 6, 3.0
    slow_tags = [f"drain-slow-{n}" for n in range(slow_calls)]
    background_tags = [f"drain-bg-{n:03d}" for n in range(60)]
    after_tags = [f"drain-after-{n:02d}" for n in range(30)]
    fc = FleetClient(fleet.url)
    slow_results: dict[str, str] = {}
    moments: dict[str, float] = {}
    victim: Replica | None = None

    async def slow(tag: str) -> None:
        result = await fc.call("slow", {"tag": tag, "seconds": slow_seconds})
        assert not result.is_error, result.content
        [block] = result.content
        slow_results[tag] = getattr(block, "text", "")
        moments[f"done:{tag}"] = time.monotonic()

    async def background() -> None:
        """Calls that keep coming while the replica drains: none may fail."""
        limiter = anyio.CapacityLimiter(4)

        async def one(tag: str) -> None:
            async with limiter:
                await fc.checkout(tag, 300)
                await anyio.sleep(0.02)

        async with anyio.create_task_group() as tg:
            for tag in background_tags:
                tg.start_soon(one, tag)

    with anyio.fail_after(70):
        async with fc.open():
            async with anyio.create_task_group() as tg:
                for tag in slow_tags:
                    tg.start_soon(slow, tag)
                # Wait until every slow body is running, then pick the replica running most.
                while True:
                    effects = await fc.side_effects("drain-slow-")
                    if len(effects["running_on"]) == slow_calls:
                        break
                    await anyio.sleep(0.05)
                running = Counter(effects["running_on"].values())
                victim = fleet.replicas[running.most_common(1)[0][0]]
                in_flight_on_victim = running[victim.name]
                tg.start_soon(background)
                await anyio.sleep(0.2)

                victim.signal(signal.SIGTERM)
                moments["term"] = time.monotonic()
                await wait_until(lambda: refuses_connections(victim.port))
                moments["closed"] = time.monotonic()
                assert victim.alive(), "the replica exited with rounds still in flight"

                # New calls after the listener closed never reach the draining replica.
                async with anyio.create_task_group() as after:
                    for tag in after_tags:
                        after.start_soon(fc.checkout, tag, 300)
                code = await anyio.to_thread.run_sync(victim.wait, 20)
                moments["exited"] = time.monotonic()
            effects = await fc.side_effects("drain-")

    assert victim is not None
    assert code == 0, victim.log_tail()
    log = victim.log()
    assert "Shutting down" in log and "Finished server process" in log
    # The rounds in flight on the victim finished there, before it exited.
    on_victim = [t for t in slow_tags if effects["running_on"][t] == victim.name]
    assert len(on_victim) == in_flight_on_victim >= 1
    for tag in slow_tags:
        assert slow_results[tag] == f"{tag} done on {effects['running_on'][tag]} after 3.0s"
        assert effects["slow"][tag] == 1
    for tag in on_victim:
        assert fc.recorder.by_tag[tag][-1].header_replica == victim.name
        assert moments[f"done:{tag}"] <= moments["exited"]
    # New connections go elsewhere once the listener closed; only a connection nginx already
    # held may still carry a round there (each such response closes it), and those rounds
    # succeed like the rest (checked below).
    late = [e for e in fc.recorder.exchanges if e.sent_at > moments["closed"]]
    late_on_victim = [e for e in late if e.header_replica == victim.name]
    assert late
    assert all(e.sent_at < moments["closed"] + NGINX_KEEPALIVE_SECONDS + 1 for e in late_on_victim)
    # Nothing failed, nothing ran twice.
    sizes = {tag: 300 for tag in background_tags + after_tags}
    check_receipts(fc, sizes, effects)
    assert not fc.stats.other_errors
    assert all(e.status == 200 for e in fc.recorder.exchanges)
    counts = served_counts(fc)
    REPORT.append(
        Numbers(
            test="SIGTERM drains a replica",
            calls=len(sizes) + slow_calls,
            rounds=len(fc.recorder.exchanges),
            replicas_hit=len(counts),
            calls_across_replicas=across(fc, list(sizes)),
            duplicate_executions=duplicate_executions(effects, list(sizes)),
            duplicates_served=0,
            failures=len(fc.stats.other_errors),
            note=(
                f"{victim.name} stopped listening {moments['closed'] - moments['term']:.2f}s "
                f"after SIGTERM, finished {in_flight_on_victim} slow rounds in flight, exited 0 "
                f"after {moments['exited'] - moments['term']:.2f}s; {len(late)} rounds sent "
                f"meanwhile, {len(late_on_victim)} of them to it on connections nginx held; "
                f"{note_of(counts)}"
            ),
        )
    )
