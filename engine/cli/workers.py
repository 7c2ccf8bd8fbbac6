"""``serve --workers N``: N server processes on one port, sharing the store.

One process serves on one core; a machine with more serves more calls with more processes. The
supervisor (:mod:`engine.cli.supervisor`) binds the port once and starts N server processes on
it; the kernel hands each new connection to one of them. They are replicas of one server as a
fleet's are: the same keys, the same store (a SQLite file or Redis), so a call's next round may
land on any of them and is still single-use, answered once, and journaled. Each worker is a
replica with an id of its own (``BASE-w1``, ``BASE-w2``...), which the journal records with every
round it serves.

A worker that exits while the others serve is started again under the same id, after a delay
that doubles while it keeps dying soon after starting (a broken store, say), so a crash loop
does not spin. SIGTERM or SIGINT drains every worker (each finishes its requests within its
drain timeout) and then the supervisor exits.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import subprocess
import threading
import time
from dataclasses import dataclass

from engine.cli.shared import CLIError, LocalKeys, StoreChoice, held_logs, load_server
from engine.cli.supervisor import (
    POLL_SECONDS,
    ServerProcesses,
    check_platform,
    endpoint,
    exit_status,
    listen,
    stop_requested,
)

log = logging.getLogger("engine.cli")

FIRST_RESTART_DELAY = 0.5
"""Seconds before a worker that died is started again, the first time."""
MAX_RESTART_DELAY = 30.0
"""The longest wait before a restart, however often the worker died."""
STEADY_SECONDS = 30.0
"""A worker that served this long before dying is restarted after the first delay again."""
STOP_MARGIN = 5.0
"""Seconds past its drain timeout a stopping worker has before it is killed."""


def worker_count(given: str) -> int:
    """``--workers``: a whole number from 1, or ``auto`` (this machine's cores)."""
    if given.strip().lower() == "auto":
        return max(1, _cores())
    try:
        count = int(given)
    except ValueError:
        count = 0
    if count < 1:
        raise CLIError(
            f"--workers {given}: give a number of processes, 1 or more, or auto (one per core: "
            f"{_cores()} here)"
        )
    return count


def _cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform says)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass
class Worker:
    """One of the N places a server process runs in, kept across its restarts."""

    number: int
    replica_id: str
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    delay: float = FIRST_RESTART_DELAY
    """The wait before the next restart."""
    restart_at: float = 0.0


class Workers:
    """N server processes kept running on the supervisor's socket until ``stop`` is set."""

    def __init__(self, processes: ServerProcesses, count: int, base_replica: str) -> None:
        self.processes = processes
        self.workers = [
            Worker(number, f"{base_replica}-w{number}") for number in range(1, count + 1)
        ]

    def run(self, stop: threading.Event) -> None:
        for worker in self.workers:
            self._start(worker)
        while not stop.wait(POLL_SECONDS):
            now = time.monotonic()
            for worker in self.workers:
                if worker.process is not None and worker.process.poll() is not None:
                    self._exited(worker, worker.process.returncode, now)
                if worker.process is None and now >= worker.restart_at:
                    self._start(worker)
            self.processes.reap()

    def _start(self, worker: Worker) -> None:
        worker.process = self.processes.start(environ={"ENGINE_REPLICA_ID": worker.replica_id})
        worker.started_at = time.monotonic()
        log.info(
            "worker %d started: pid %d, replica %s",
            worker.number,
            worker.process.pid,
            worker.replica_id,
        )

    def _exited(self, worker: Worker, code: int, now: float) -> None:
        assert worker.process is not None
        if now - worker.started_at >= STEADY_SECONDS:
            worker.delay = FIRST_RESTART_DELAY
        log.warning(
            "worker %d (pid %d, replica %s) exited (%s); starting it again in %gs",
            worker.number,
            worker.process.pid,
            worker.replica_id,
            exit_status(code),
            worker.delay,
        )
        worker.process = None
        worker.restart_at = now + worker.delay
        worker.delay = min(worker.delay * 2, MAX_RESTART_DELAY)


def requested_workers(args: argparse.Namespace) -> int | None:
    """``--workers`` as a number of processes (``None``: not given), refused beside the options
    it cannot go with."""
    if args.workers is None:
        return None
    if args.reload:
        raise CLIError(
            "--workers and --reload do not go together: --reload serves one process that "
            "restarts on every change, for development; drop one of them"
        )
    if args.stdio:
        raise CLIError(
            "--workers serves HTTP on one port: a host that starts a server over stdio talks to "
            "that one process; drop --stdio, or --workers"
        )
    return worker_count(args.workers)


def serve_in_workers(
    args: argparse.Namespace, count: int, store: StoreChoice, kept: LocalKeys | None
) -> int:
    """``serve --workers N``: the file is loaded here once, so a mistake in it (or a store the
    workers cannot share) is one line before any worker starts; then the workers serve it."""
    base_replica = os.environ.get("ENGINE_REPLICA_ID") or f"pid-{os.getpid()}"
    os.environ["ENGINE_REPLICA_ID"] = base_replica  # each worker's is this, and its number
    with held_logs() as held:
        server = load_server(args.target, traceback=args.traceback)
        held.keep()
    store.announce()
    if kept is not None:
        kept.announce()
    check_shared_store(server.settings.store.store, count)
    if server.settings.replica_id != base_replica:
        log.warning(
            "%s sets replica_id=%r: every worker serves under that id, so the journal cannot "
            "tell them apart; leave it to ENGINE_REPLICA_ID (or --replica) instead",
            args.target,
            server.settings.replica_id,
        )
    return serve_workers(
        args.target,
        host=args.host,
        port=args.port,
        count=count,
        base_replica=base_replica,
        drain_timeout=server.settings.serve.drain_timeout,
        traceback=args.traceback,
    )


def check_shared_store(store: object, count: int) -> None:
    """CLIError unless ``store`` (the server's, a URL or a store object) is one that ``count``
    processes share; a warning for SQLite, which shares data but not notifications."""
    from stores import MemoryStore, SQLiteStore

    if count < 2:
        return
    scheme = store.partition(":")[0].lower() if isinstance(store, str) else None
    if store is None:
        raise CLIError(
            f"--workers {count} needs a store the workers share, and this server has none "
            "(store none): no worker would see another's claims, so a requestState could be "
            "used once on each worker, and no call would be journaled. Serve with the default "
            "SQLite store, --store sqlite:///PATH or --store redis://..., or without --workers"
        )
    if scheme == "memory" or isinstance(store, MemoryStore):
        raise CLIError(
            f"--workers {count} needs a store the workers share, and memory:// lives inside "
            "one process: each worker would keep its own rounds and journal, so a requestState "
            "could be used once on each worker and the journal commands would see nothing. "
            "Serve with the default SQLite store, --store sqlite:///PATH or --store "
            "redis://..., or without --workers"
        )
    if scheme == "sqlite" or isinstance(store, SQLiteStore):
        log.warning(
            "the workers share the SQLite store's rounds, claims and journal, but not its "
            "notifications, which stay in each process: a 2025-11-25 client's answer to a "
            "question, a cancellation or a list change reaches only the worker it lands on. "
            "Serve with --store redis://... when clients of that era, or subscriptions, matter"
        )


def serve_workers(
    target: str,
    *,
    host: str,
    port: int,
    count: int,
    base_replica: str,
    drain_timeout: float,
    traceback: bool,
) -> int:
    """Serve ``target`` in ``count`` processes on ``host:port`` until SIGTERM or Ctrl-C."""
    check_platform("--workers", "run one `serve` per port behind a proxy")
    with (
        stop_requested() as stop,
        contextlib.closing(listen(host, port)) as sock,
        ServerProcesses(
            target, sock, host, traceback=traceback, stop_seconds=drain_timeout + STOP_MARGIN
        ) as processes,
    ):
        log.info(
            "serving %s at %s in %d worker processes (replicas %s-w1 to -w%d); SIGTERM or "
            "Ctrl-C drains them",
            target,
            endpoint(sock, host),
            count,
            base_replica,
            count,
        )
        Workers(processes, count, base_replica).run(stop)
        log.info("draining the workers (up to %gs)", drain_timeout)
    return 0
