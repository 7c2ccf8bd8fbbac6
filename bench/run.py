"""Benchmarks side by side with the official MCP Python SDK and the TypeScript SDK v2:
``make bench``.

Run with the project venv's Python:

    .venv/bin/python bench/run.py            # the full run; writes docs/benchmarks.md
    .venv/bin/python bench/run.py --quick    # a smoke run (3 s per workload), docs untouched

What it does, in order:

1. Makes ``bench/.venv-official`` (once) with the pinned official SDK, ``mcp==2.3.0``, and
   ``uvicorn[standard]``; checks that the project venv has uvicorn, uvloop and httptools
   (runtime dependencies of the package; installed there if missing); installs the TypeScript
   SDK v2 peer (``bench/typescript_peer.py``: pinned packages and a pinned node from npm, cached
   under ``~/.cache/engine-bench``; skipped with a note when npm cannot install it, or with
   ``--no-typescript``).
2. Runs the in-process micro-benchmarks of the engine alone (``bench/micro.py``).
3. Starts the servers, each on a free loopback port, all under the same uvicorn settings
   (one worker, uvloop, httptools, logs and access log off): the do-nothing ASGI floor, the
   official SDK's ``MCPServer`` (``bench/servers/official.py``), the TypeScript SDK v2 server
   (``bench/servers/typescript/server.mjs``, under node rather than uvicorn), ours inline and
   ours with the SQLite and Redis stores (``bench/servers/ours.py``; single-use rounds and
   journal are on whenever a store is configured). The Redis prefix is random, and its keys
   are deleted (and the SQLite file) after each repeat, so every repeat starts from the same
   empty store.
4. Drives one server at a time with the same load generator (``bench/loadgen.py``): N
   keep-alive connections running the multi-round loop themselves. Workload by workload, each
   server's measured window is cut into slices (``--slices``: 5, or 1 with ``--quick``) that
   the servers take in turn, the order rotated every slice and reversed every other one, each
   after a warm-up: servers compared on a workload are measured within seconds of each other,
   so a machine whose speed drifts (a shared virtual machine's does) moves them alike. A run
   with any failed call is invalid, and so is a store run whose server dropped journal events
   (its writers fell behind: the store did less work than it should have).
5. Prints the table, and (unless ``--quick`` / ``--no-docs``) writes ``docs/benchmarks.md``
   (keeping its hand-written last section, ``KEPT_SECTION``, as it is) and the chart
   ``bench/benchmarks.png`` (matplotlib, bench extra; skipped with a note without it).
   Raw results go to ``bench/results/`` (git-ignored).

``--profile`` also samples our server with py-spy during an extra 2-round run and lists the
hottest functions (``bench/results/profile-*.txt``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.util
import json
import os
import platform
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import loadgen  # noqa: E402
import typescript_peer  # noqa: E402

T = TypeVar("T")

OFFICIAL_VENV = BENCH / ".venv-official"
OFFICIAL_PINS = ["mcp==2.3.0", "uvicorn[standard]"]
OFFICIAL_STAMP = OFFICIAL_VENV / ".bench-installed"
CONSTRAINTS = ROOT / ".ci" / "constraints.txt"
"""The versions both sides run with (``make lock``): the peer gets the same uvicorn as ours."""
RESULTS = BENCH / "results"
DOC = ROOT / "docs" / "benchmarks.md"
KEPT_SECTION = "## Measurements behind design choices"
"""The section of ``DOC`` written by hand, from its heading to the end: kept when the page is
written again."""
CHART = BENCH / "benchmarks.png"
KEY = "bench-shared-secret-0123456789abcdef-0123456789"
HOST = "127.0.0.1"

TARGETS = {
    "two_round_calls": 8.0,
    "two_round_p99": 1 / 5,
    "one_round_calls": 6.0,
    "token_share": 0.5,
    "token_after_1mb": 300,
    "redis_share": 0.7,
    "engine_us_per_round": 30.0,
}


def log(message: str) -> None:
    print(message, flush=True)


# --- environments ------------------------------------------------------------------------------


def official_python() -> Path:
    return OFFICIAL_VENV / "bin" / "python"


def ensure_official_venv() -> Path:
    """``bench/.venv-official`` with the pinned official SDK, made once."""
    python = official_python()
    pins = "\n".join([*OFFICIAL_PINS, CONSTRAINTS.read_text()])
    if python.exists() and OFFICIAL_STAMP.exists() and OFFICIAL_STAMP.read_text() == pins:
        return python
    log(f"creating {OFFICIAL_VENV.relative_to(ROOT)} with {' '.join(OFFICIAL_PINS)}")
    if OFFICIAL_VENV.exists():
        shutil.rmtree(OFFICIAL_VENV)
    subprocess.run([sys.executable, "-m", "venv", str(OFFICIAL_VENV)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-c", str(CONSTRAINTS), *OFFICIAL_PINS],
        check=True,
    )
    OFFICIAL_STAMP.write_text(pins)
    return python


def ensure_server_stack() -> None:
    """uvloop and httptools in the project venv (dependencies of the package, so missing only
    from a venv made without them)."""
    missing = [m for m in ("uvloop", "httptools") if importlib.util.find_spec(m) is None]
    if missing:
        if sys.prefix == sys.base_prefix:
            raise SystemExit(
                f"missing {', '.join(missing)}: run bench/run.py with the project venv's python "
                "(make bench), or pip install uvloop httptools"
            )
        log(f"installing into the project venv: {' '.join(missing)}")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)
    if importlib.util.find_spec("engine") is None:
        sys.path.insert(0, str(ROOT))


def version_of(python: Path | str, *modules: str) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try: out[name] = m.version(name)\n"
        "    except Exception: out[name] = 'missing'\n"
        "print(json.dumps(out))"
    )
    done = subprocess.run(
        [str(python), "-c", code, *modules], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def machine_info() -> dict[str, Any]:
    cpu = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = "?"
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    commit = "?"
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "engine", "stores"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if dirty:
            commit += " (engine/ or stores/ modified)"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": mem,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "commit": commit,
        "loadavg_start": loadavg(),
    }


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


# --- servers -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerSpec:
    key: str
    label: str
    python: str
    argv: list[str]
    workloads: list[str]
    side: str
    """``ours``, ``official``, ``official-sse``, ``typescript`` or ``floor``."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment settings of this server's own (``bench/ab.py`` variants)."""


@contextlib.contextmanager
def serving(spec: ServerSpec, logs: Path) -> Iterator[tuple[int, int]]:
    """Start one server; yield ``(port, pid)``; stop it."""
    port = free_port()
    # The servers run with the defaults: no engine setting of the caller's shell reaches them.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    env.update(BENCH_KEY=KEY, PYTHONDONTWRITEBYTECODE="1", **spec.env)
    log_file = open(logs / f"server-{spec.key}.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [spec.python, *spec.argv, "--port", str(port)],
        cwd=str(ROOT),
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{spec.label} exited with {proc.returncode}; see {log_file.name}"
                )
            try:
                with socket.create_connection((HOST, port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{spec.label} did not listen within 60 s") from None
                time.sleep(0.1)
        yield port, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log_file.close()


def redis_url_from(args: argparse.Namespace) -> str | None:
    url = (
        args.redis_url
        or os.environ.get("ENGINE_BENCH_REDIS_URL")
        or os.environ.get("ENGINE_TEST_REDIS_URL")
        or "redis://127.0.0.1:6379/0"
    )
    try:
        import redis
    except ImportError:
        return None
    try:
        client = redis.Redis.from_url(url, socket_timeout=1)
        client.ping()
        client.close()
    except Exception:
        return None
    return url


def remove_sqlite(path: Path) -> None:
    """Delete the SQLite store's file and its write-ahead log and index."""
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            Path(f"{path}{suffix}").unlink()


def clean_redis(url: str, prefix: str) -> int:
    """Delete every key of the bench's prefix; the number deleted."""
    import redis

    client = redis.Redis.from_url(url)
    deleted = 0
    try:
        batch: list[bytes] = []
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                deleted += client.delete(*batch)
                batch = []
        if batch:
            deleted += client.delete(*batch)
        left = sum(1 for _ in client.scan_iter(match=f"{prefix}:*", count=1000))
        if left:
            log(f"warning: {left} keys of {prefix} remain in Redis")
    finally:
        client.close()
    return deleted


def redis_pid(url: str) -> int | None:
    """The pid of the Redis server behind ``url`` when it runs on this machine, else ``None``.

    Its CPU is then counted apart from "busy elsewhere", which is left to other work.
    """
    import redis

    try:
        client = redis.Redis.from_url(url, socket_timeout=1)
        try:
            pid = int(client.info("server")["process_id"])
        finally:
            client.close()
        loadgen.process_cpu_seconds(pid)
    except Exception:
        return None
    return pid


TYPESCRIPT_WORKLOADS = ("one_round", "two_round", "chain")
"""What the TypeScript SDK peer is measured on (its server has every tool but the task)."""

DISTURBED = 0.25
"""Cores of other work during a window above which its row is marked disturbed."""


# --- running -----------------------------------------------------------------------------------


def measure_repeat(
    specs: list[ServerSpec], workloads: list[str], args: argparse.Namespace, logs: Path
) -> list[dict[str, Any]]:
    """One repeat: every server up at once, then workload by workload, the servers take turns.

    Each server's window on a workload is cut into ``args.slices`` slices, run in turn with the
    other servers' slices for that workload, in an order that is rotated every slice and
    reversed every other one (so no server always follows the same one). Servers compared on
    one workload are so measured within seconds of each other: a machine that slows down for a
    minute slows all of them alike, instead of only the one whose turn it was. A server that is
    up but not under load does nothing (it waits on its socket).
    """
    out: list[dict[str, Any]] = []
    slice_seconds = args.duration / args.slices
    with contextlib.ExitStack() as stack:
        running = {spec.key: stack.enter_context(serving(spec, logs)) for spec in specs}
        for key in workloads:
            workload = loadgen.WORKLOADS[key]
            group = [spec for spec in specs if key in spec.workloads]
            if not group:
                continue
            log(f"\n== {workload.label}")
            load_before = loadavg()
            parts: dict[str, list[loadgen.RunResult]] = {spec.key: [] for spec in group}
            warmups = {spec.key: args.warmup for spec in group}
            stores = [spec for spec in group if spec.key in ("ours-redis", "ours-sqlite")]
            dropped_before = {
                spec.key: journal_events_dropped(running[spec.key][0]) for spec in stores
            }
            for n in range(args.slices):
                for spec in turn_order(group, n):
                    port, pid = running[spec.key]
                    result = run_turn(
                        port,
                        pid,
                        workload,
                        server=spec.key,
                        connections=args.connections,
                        warmup=warmups[spec.key],
                        duration=slice_seconds,
                        store_pid=args.redis_pid,
                    )
                    parts[spec.key].append(result)
                    # Later slices start on new connections, all at once: warm up long enough
                    # for each to have finished calls (2 of this server's slowest), so the
                    # window opens on connections out of step, as in a long run.
                    slowest = max(result.latencies, default=0.0)
                    warmups[spec.key] = max(args.slice_warmup, 2 * slowest)
            for spec in group:
                summary = loadgen.RunResult.combined(parts[spec.key]).summary()
                if spec in stores:
                    before = dropped_before[spec.key]
                    after = journal_events_dropped(running[spec.key][0])
                    lost = None if before is None or after is None else after - before
                    summary["journal_events_dropped"] = lost
                    error = dropped_error(before, after)
                    if error is not None:
                        summary["valid"] = False
                        summary["errors"].append(error)
                summary["loadavg_before"] = load_before
                summary["side"] = spec.side
                summary["slices"] = args.slices
                summary["calls_per_s_slices"] = [
                    round(part.calls / part.duration, 1) for part in parts[spec.key]
                ]
                out.append(summary)
                status = "ok" if summary["valid"] else f"INVALID ({summary['failures']} failures)"
                log(
                    f"   {spec.label:48s} {summary['calls_per_s']:9.1f} calls/s "
                    f"{summary['rounds_per_s']:9.1f} rounds/s  p50 {fmt(summary['p50_ms'], 2)} ms "
                    f"p99 {fmt(summary['p99_ms'], 2)} ms  cpu/round "
                    f"{fmt(summary['server_cpu_us_per_round'], 0)} µs  "
                    f"waiting for a CPU {summary['server_waiting_share']:.2f}  "
                    f"redis {summary['store_cpu_share']:.2f} cores  "
                    f"busy elsewhere {summary['other_cpu_share']:.2f} cores  {status}"
                )
                for error in summary["errors"]:
                    log(f"      ! {error}")
    return out


_LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Straight to the loopback server, whatever proxy the environment names."""


def turn_order(items: list[T], n: int) -> list[T]:
    """The order of turn ``n``: rotated by one every turn and reversed every other one, so that
    no server always follows the same one."""
    turn = n % len(items)
    order = items[turn:] + items[:turn]
    if n % 2:
        order.reverse()
    return order


def run_turn(
    port: int,
    pid: int,
    workload: loadgen.Workload,
    *,
    server: str,
    connections: int,
    warmup: float,
    duration: float,
    store_pid: int | None,
    headers: Mapping[str, str] | None = None,
) -> loadgen.RunResult:
    """One measured window of one server, on an event loop of its own."""
    loop = loadgen.new_event_loop()
    try:
        return loop.run_until_complete(
            loadgen.run_load(
                HOST,
                port,
                workload,
                server=server,
                server_pid=pid,
                connections=connections,
                warmup=warmup,
                duration=duration,
                store_pid=store_pid,
                headers=headers,
            )
        )
    finally:
        loop.close()


def with_prefix(url: str, prefix: str) -> str:
    """A store URL with its key prefix."""
    return f"{url}{'&' if '?' in url else '?'}prefix={prefix}"


def dropped_error(before: int | None, after: int | None) -> str | None:
    """What makes a store server's run invalid, from its dropped journal events before and
    after: some were dropped (the store did less than it should: figures would flatter it), or
    the count could not be read."""
    if before is None or after is None:
        return "could not read the server's dropped journal events from /metrics"
    if after != before:
        return f"{after - before} journal events dropped by the server"
    return None


def journal_events_dropped(port: int) -> int | None:
    """``engine_journal_events_dropped_total`` of our server on ``port``, from ``/metrics``;
    ``None`` when it cannot be read (the run is then marked invalid, not the bench stopped)."""
    try:
        with _LOCAL.open(f"http://{HOST}:{port}/metrics", timeout=10) as response:
            exposition = response.read().decode()
    except OSError as exc:
        log(f"      ! /metrics did not answer: {exc}")
        return None
    for line in exposition.splitlines():
        if line.startswith("engine_journal_events_dropped_total "):
            return int(float(line.split()[1]))
    return None


def profile_ours(args: argparse.Namespace, logs: Path, stamp: str) -> dict[str, Any] | None:
    """py-spy samples of our server (inline) while the 2-round workload runs."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(py_spy).exists():
        log("\n(profile skipped: py-spy is not installed; pip install py-spy)")
        return None
    spec = ServerSpec(
        "ours-profile",
        "ours (inline) under py-spy",
        sys.executable,
        ["bench/servers/ours.py"],
        ["two_round"],
        "ours",
    )
    raw = RESULTS / f"profile-{stamp}.raw.txt"
    seconds = max(3, int(args.duration))
    log(f"\n== profiling ours on the 2-round workload with py-spy ({seconds} s)")
    with serving(spec, logs) as (port, pid):
        spy = subprocess.Popen(
            [
                py_spy,
                "record",
                "--pid",
                str(pid),
                "--rate",
                "200",
                "--duration",
                str(seconds + 1),
                "--format",
                "raw",
                "--nonblocking",
                "--output",
                str(raw),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        loop = loadgen.new_event_loop()
        try:
            loop.run_until_complete(
                loadgen.run_load(
                    HOST,
                    port,
                    loadgen.WORKLOADS["two_round"],
                    server="ours-profile",
                    server_pid=pid,
                    connections=args.connections,
                    warmup=0.5,
                    duration=seconds,
                )
            )
        finally:
            loop.close()
        _, err = spy.communicate(timeout=60)
    if spy.returncode != 0 or not raw.exists():
        log(f"(profile failed: {err.decode(errors='replace').strip()[:300]})")
        return None
    report = summarize_profile(raw)
    text_path = RESULTS / f"profile-{stamp}.txt"
    text_path.write_text(render_profile(report))
    log(render_profile(report, top=15))
    log(f"(full profile: {text_path.relative_to(ROOT)}; raw stacks: {raw.relative_to(ROOT)})")
    return report


def summarize_profile(raw: Path) -> dict[str, Any]:
    """Self and inclusive sample shares per function from py-spy's collapsed stacks."""
    self_counts: dict[str, int] = {}
    incl_counts: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [f for f in stack.split(";") if f]
        if not frames:
            continue
        names = [_frame_name(f) for f in frames]
        self_counts[names[-1]] = self_counts.get(names[-1], 0) + count
        for name in set(names):
            incl_counts[name] = incl_counts.get(name, 0) + count
    return {"total": total, "self": self_counts, "inclusive": incl_counts}


def _frame_name(frame: str) -> str:
    """``function (path:line)`` → ``function (short/path.py)``, dropping the line."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", str(ROOT) + "/", "lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{name} ({path})"


def render_profile(report: dict[str, Any], top: int = 40) -> str:
    total = report["total"] or 1
    lines = [f"py-spy samples: {report['total']}", "", "self time (leaf frames):"]
    for name, count in sorted(report["self"].items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {count / total * 100:5.1f}%  {name}")
    lines += ["", "inclusive time:"]
    for name, count in sorted(report["inclusive"].items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {count / total * 100:5.1f}%  {name}")
    return "\n".join(lines)


# --- reporting ---------------------------------------------------------------------------------


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def index(results: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["server"], r["workload"]): r for r in results}


MEDIAN_FIGURES = (
    "calls_per_s",
    "rounds_per_s",
    "p50_ms",
    "p99_ms",
    "token_bytes_per_round",
    "token_bytes_max",
    "token_after_first_answer",
    "server_cpu_us_per_round",
    "server_cpu_share",
    "server_waiting_share",
    "client_cpu_share",
    "store_cpu_share",
    "other_cpu_share",
)


def _median(values: list[float]) -> float | None:
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def aggregate(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (server, workload): the median of each figure over the repeats."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["server"], run["workload"]), []).append(run)
    rows = []
    for group in groups.values():
        row = dict(group[0])
        for figure in MEDIAN_FIGURES:
            row[figure] = _median([g[figure] for g in group])
        row["valid"] = all(g["valid"] for g in group)
        row["failures"] = sum(g["failures"] for g in group)
        row["calls"] = sum(g["calls"] for g in group)
        row["rounds"] = sum(g["rounds"] for g in group)
        row["errors"] = [e for g in group for e in g["errors"]][:5]
        row["repeats"] = len(group)
        row["calls_per_s_each"] = [round(g["calls_per_s"], 1) for g in group]
        row["calls_per_s_slices"] = [g.get("calls_per_s_slices") for g in group]
        row["loadavg_before"] = [g.get("loadavg_before") for g in group]
        rows.append(row)
    return rows


def evaluate(
    results: list[dict[str, Any]], micro: dict[str, Any]
) -> list[tuple[str, str, str, bool | None]]:
    """``(target, required, measured, met)`` for every target the bench checks."""
    by = index(results)

    def get(server: str, workload: str, figure: str) -> float | None:
        row = by.get((server, workload))
        if row is None or not row["valid"]:
            return None
        value = row.get(figure)
        return float(value) if value is not None else None

    rows: list[tuple[str, str, str, bool | None]] = []

    def each_repeat(server: str, other: str, workload: str) -> list[float]:
        """calls/s of ``server`` ÷ ``other`` within each repeat: the spread between repeats
        shows how much the ratio moves from one run to the next on this machine."""
        a, b = by.get((server, workload)), by.get((other, workload))
        if a is None or b is None or len(a["calls_per_s_each"]) != len(b["calls_per_s_each"]):
            return []
        pairs = zip(a["calls_per_s_each"], b["calls_per_s_each"], strict=True)
        return [x / y for x, y in pairs if y]

    def add(
        name: str,
        required: str,
        value: float | None,
        ok: bool | None,
        unit: str,
        each: list[float] | None = None,
    ) -> None:
        shown = "–" if value is None else f"{value:,.2f}{unit}"
        if value is not None and ok is False and shown.removesuffix(unit) in required:
            shown = f"{value:,.4f}{unit}"  # rounded, it would read as the bound it missed
        if value is not None and each and len(each) > 1:
            shown += " (repeats: " + ", ".join(f"{v:.2f}" for v in each) + ")"
        rows.append((name, required, shown, ok))

    def calls_vs_official(workload: str, label: str, bound: float) -> None:
        r = ratio(get("ours", workload, "calls_per_s"), get("official", workload, "calls_per_s"))
        ok = None if r is None else r >= bound
        each = each_repeat("ours", "official", workload)
        add(f"{label} calls/s vs official", f"≥ {bound:g}×", r, ok, "×", each)

    calls_vs_official("two_round", "2-round order_book", 8)
    r = ratio(get("ours", "two_round", "p99_ms"), get("official", "two_round", "p99_ms"))
    add("2-round order_book p99 vs official", "≤ 0.20×", r, None if r is None else r <= 0.2, "×")
    calls_vs_official("one_round", "1-round reserve_book", 6)
    for workload in ("two_round", "chain"):
        r = ratio(
            get("ours", workload, "token_bytes_per_round"),
            get("official", workload, "token_bytes_per_round"),
        )
        label = loadgen.WORKLOADS[workload].label.split(":")[0]
        add(
            f"token bytes vs official ({label})", "≤ 0.50×", r, None if r is None else r <= 0.5, "×"
        )
    value = get("ours-redis", "sample_1mb", "token_after_first_answer")
    add(
        "token after a 1 MB sampled answer (Redis store)",
        "≤ 300 B",
        value,
        None if value is None else value <= 300,
        " B",
    )
    for workload in ("two_round", "one_round", "chain"):
        r = ratio(get("ours-redis", workload, "calls_per_s"), get("ours", workload, "calls_per_s"))
        label = loadgen.WORKLOADS[workload].label.split(":")[0].split(" ")[0]
        add(
            f"Redis calls/s vs inline ({label})",
            "≥ 0.70×",
            r,
            None if r is None else r >= 0.7,
            "×",
            each_repeat("ours-redis", "ours", workload),
        )
    for workload in ("two_round", "one_round"):
        # Contention-robust view: server CPU per round, official ÷ ours (capacity per core).
        r = ratio(
            get("official", workload, "server_cpu_us_per_round"),
            get("ours", workload, "server_cpu_us_per_round"),
        )
        label = loadgen.WORKLOADS[workload].label.split(":")[0]
        need = 8.0 if workload == "two_round" else 6.0
        add(
            f"(reference) {label}: official ÷ ours server CPU per round",
            f"≥ {need:g}× to match",
            r,
            None,
            "×",
        )
    # The default path (SQLite store) against the official server as its docs start it
    # (default mode, SSE responses) and in its JSON response mode.
    for workload, server, base, figure, bound in (
        ("two_round", "ours-sqlite", "official-sse", "calls_per_s", 6.0),
        ("two_round", "ours-sqlite", "official", "calls_per_s", 4.0),
        ("chain", "ours-sqlite", "official-sse", "calls_per_s", 4.5),
        ("chain", "ours-sqlite", "official", "calls_per_s", None),
        ("two_round", "ours-sqlite", "official-sse", "p99_ms", 0.2),
        ("two_round", "ours", "official-sse", "calls_per_s", 8.0),
    ):
        label = loadgen.WORKLOADS[workload].label.split(":")[0]
        how = "SQLite store (the default)" if server == "ours-sqlite" else "inline"
        r = ratio(get(server, workload, figure), get(base, workload, figure))
        name = "calls/s" if figure == "calls_per_s" else "p99"
        above = figure == "calls_per_s"
        add(
            f"{'' if bound else '(reference) '}{label}, {how}, {name} vs {SERVER_LABEL[base]}",
            "n/a" if bound is None else f"{'≥' if above else '≤'} {bound:g}×",
            r,
            None if r is None or bound is None else (r >= bound if above else r <= bound),
            "×",
            each_repeat(server, base, workload) if above else None,
        )
    for workload, bound in (("two_round", 4.0), ("chain", None), ("one_round", None)):
        # The TypeScript SDK v2 server, against the default store and against inline state.
        label = loadgen.WORKLOADS[workload].label.split(":")[0]
        for server, how in (("ours-sqlite", "SQLite store (the default)"), ("ours", "inline")):
            r = ratio(
                get(server, workload, "calls_per_s"), get("typescript", workload, "calls_per_s")
            )
            measured = bound if server == "ours-sqlite" else None
            add(
                f"{'' if measured else '(reference) '}{label}, {how}, calls/s vs TypeScript SDK v2",
                f"≥ {measured:g}×" if measured else "n/a",
                r,
                None if r is None or measured is None else r >= measured,
                "×",
                each_repeat(server, "typescript", workload),
            )
    for server, store in (("ours-redis", "Redis"), ("ours-sqlite", "SQLite")):
        # The official server has no tasks: its best equivalent is the plain 2-round call.
        r = ratio(get(server, "task", "calls_per_s"), get("official", "two_round", "calls_per_s"))
        add(
            f"(reference) task (create, polls, answer, result), {store} store, calls/s vs "
            "official 2-round order_book",
            "n/a",
            r,
            None,
            "×",
        )
    us = micro.get("dispatch", {}).get("us_per_round")
    add(
        "engine alone, order_book (dispatch)",
        "≤ 30 µs/round",
        us,
        None if us is None else us <= 30,
        " µs",
    )
    return rows


SERVER_LABEL = {
    "floor": "do-nothing ASGI (floor)",
    "official": "official SDK 2.3.0 (JSON mode)",
    "official-sse": "official SDK 2.3.0 (default mode)",
    "typescript": f"TypeScript SDK v2 {typescript_peer.SERVER_VERSION} (JSON mode)",
    "ours": "ours, inline state",
    "ours-redis": "ours, Redis store",
    "ours-sqlite": "ours, SQLite store",
}


def table_rows(results: list[dict[str, Any]]) -> list[list[str]]:
    by = index(results)
    floor = by.get(("floor", "one_round"))
    floor_rps = floor["rounds_per_s"] if floor and floor["valid"] else None
    rows = []
    for key, workload in loadgen.WORKLOADS.items():
        official = by.get(("official", key))
        for server in (
            "official",
            "official-sse",
            "typescript",
            "ours",
            "ours-redis",
            "ours-sqlite",
            "floor",
        ):
            row = by.get((server, key))
            if row is None:
                continue
            valid = row["valid"]
            is_ours = server.startswith("ours")

            def vs(
                figure: str,
                row: dict[str, Any] = row,
                is_ours: bool = is_ours,
                base: dict[str, Any] | None = official,
            ) -> str:
                if not is_ours or base is None or not base["valid"] or not row["valid"]:
                    return ""
                r = ratio(row[figure], base[figure])
                return "" if r is None else f" ({r:.2f}×)"

            if not valid:
                rows.append(
                    [
                        workload.label,
                        SERVER_LABEL[server],
                        f"INVALID: {row['failures']} failed",
                        *[""] * (len(HEADERS) - 3),
                    ]
                )
                continue
            rows.append(
                [
                    workload.label,
                    SERVER_LABEL[server],
                    fmt(row["calls_per_s"]) + vs("calls_per_s"),
                    fmt(row["rounds_per_s"]),
                    fmt(row["p50_ms"], 2) + vs("p50_ms"),
                    fmt(row["p99_ms"], 2) + vs("p99_ms"),
                    fmt(row["token_bytes_per_round"], 0) + vs("token_bytes_per_round")
                    if row["token_bytes_per_round"] is not None
                    else "–",
                    fmt(row["server_cpu_us_per_round"], 0) + vs("server_cpu_us_per_round"),
                    f"{row.get('server_waiting_share', 0.0):.2f}",
                    f"{row['rounds_per_s'] / floor_rps:.2f}" if floor_rps else "",
                    f"{row.get('store_cpu_share', 0.0):.2f}",
                    f"{row['other_cpu_share']:.2f}"
                    + (" (disturbed)" if row["other_cpu_share"] > DISTURBED else ""),
                ]
            )
    return rows


HEADERS = [
    "workload",
    "server",
    "calls/s",
    "rounds/s",
    "p50 ms",
    "p99 ms",
    "token B/round",
    "server CPU µs/round",
    "server waiting for a CPU",
    "rounds/s ÷ floor",
    "Redis (cores)",
    "busy elsewhere (cores)",
]


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(out)


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "-" * len(line)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def micro_rows(micro: dict[str, Any]) -> list[list[str]]:
    rows = [
        [
            "the ASGI app in process (headers and JSON body in, response out), order_book",
            f"{micro['asgi']['us_per_round']:.1f} µs/round "
            f"(mean of all batches {micro['asgi']['mean_us_per_round']:.1f})",
        ],
        [
            "dispatch(server, message, Exchange()), order_book",
            f"{micro['dispatch']['us_per_round']:.1f} µs/round "
            f"(mean of all batches {micro['dispatch']['mean_us_per_round']:.1f})",
        ],
        [
            "server.operations.call_tool(CallRequest(...)), order_book",
            f"{micro['call_tool']['us_per_round']:.1f} µs/round "
            f"(mean of all batches {micro['call_tool']['mean_us_per_round']:.1f})",
        ],
    ]
    for key in ("seal_1k", "seal_64k"):
        r = micro[key]
        rows.append(
            [
                f"KeyRing seal + open, {r['bytes'] // 1024} KiB",
                f"{r['seal_open_us']:.1f} µs (seal {r['seal_us']:.1f} + open {r['open_us']:.1f}; "
                f"token {r['token_chars']:,} chars)",
            ]
        )
    return rows


def write_chart(results: list[dict[str, Any]], path: Path) -> str | None:
    """A bar chart of calls/s and p99 per workload; ``None`` when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    by = index(results)
    servers = [
        s
        for s in ("official", "typescript", "ours", "ours-redis", "ours-sqlite")
        if any(k[0] == s for k in by)
    ]
    keys = list(loadgen.WORKLOADS)
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    width = 0.8 / max(1, len(servers))
    colours = {
        "official": "#888888",
        "typescript": "#9467bd",
        "ours": "#1f77b4",
        "ours-redis": "#ff7f0e",
        "ours-sqlite": "#2ca02c",
    }
    for panel, (figure, title, log_scale) in enumerate(
        [
            ("calls_per_s", "calls/s (higher is better, log scale)", True),
            ("p99_ms", "p99 call latency, ms (lower is better, log scale)", True),
        ]
    ):
        ax = axes[panel]
        for i, server in enumerate(servers):
            values = []
            for key in keys:
                row = by.get((server, key))
                values.append(row[figure] if row and row["valid"] and row[figure] else 0)
            positions = [k + (i - (len(servers) - 1) / 2) * width for k in range(len(keys))]
            ax.bar(positions, values, width, label=SERVER_LABEL[server], color=colours[server])
        if figure == "calls_per_s":
            floor = by.get(("floor", "one_round"))
            if floor and floor["valid"]:
                ax.axhline(
                    floor["calls_per_s"],
                    color="black",
                    linestyle=":",
                    linewidth=1,
                    label="do-nothing ASGI floor (requests/s)",
                )
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([loadgen.WORKLOADS[k].key.replace("_", "\n") for k in keys])
        ax.set_title(title, fontsize=10)
        if log_scale:
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    fig.suptitle("engine vs the official MCP SDKs (Python, TypeScript v2) — same load generator")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def render_doc(
    results: list[dict[str, Any]],
    micro: dict[str, Any],
    targets: list[tuple[str, str, str, bool | None]],
    info: dict[str, Any],
    versions: dict[str, Any],
    args: argparse.Namespace,
    command: str,
    chart: str | None,
    notes: list[str],
    profile: dict[str, Any] | None = None,
) -> str:
    mark = {True: "met", False: "**not met**", None: "n/a"}
    target_table = markdown_table(
        ["target", "required", "measured", "status"],
        [[n, req, val, mark[ok]] for n, req, val, ok in targets],
    )
    by = index(results)
    floor = by.get(("floor", "one_round"))
    lines = [
        "# Benchmarks: engine vs the official MCP Python SDK",
        "",
        'Generated by `bench/run.py`; every number up to "Machine and command" is from one '
        "real run, described there. Re-run with `make bench`.",
        "",
        "## How it is measured",
        "",
        "- **Same tools on both servers.** `bench/servers/official.py` (official SDK, "
        f"`mcp=={versions['official'].get('mcp', '?')}` in its own virtualenv "
        "`bench/.venv-official`) and `bench/servers/ours.py` (this repository) register the same "
        "bookshop tools with the same logic; every resolver is `async`. Both seal state with a "
        "fixed shared key (AES-256-GCM on both sides).",
        "- **Same server stack.** Each server is under load alone, one at a time, on a free "
        "loopback port "
        "under uvicorn with one worker, `loop=uvloop`, `http=httptools`, logging and access log "
        'off. Ours is started the way its docs start a server, `mcp.run("streamable-http", '
        "uvicorn_options=...)`, which also leaves the objects alive after startup out of later "
        "garbage collections (`gc.freeze`; it matters with a store, where requests wait on it). "
        "The floor is a do-nothing ASGI app under the same settings that answers every POST "
        "with a canned JSON-RPC result.",
        "- **Same client.** `bench/loadgen.py`: "
        f"{args.connections} keep-alive HTTP/1.1 connections over raw asyncio streams, each "
        "running whole calls back to back and driving the multi-round loop itself (answers every "
        "`inputRequests` entry, retries with `inputResponses` + `requestState`); 2026-07-28 "
        "headers and `_meta` (elicitation, sampling, roots). Every result is checked (text and "
        "round count); a run with a single failed call is marked INVALID. "
        f"{args.duration:g} s measured per server and workload. Every server stays up for a "
        "whole repeat and waits idle while another is measured; workload by workload, the "
        "servers take turns"
        + (
            f", in {args.slices} slices of {args.duration / args.slices:g} s each (the order "
            "rotated every slice and reversed every other one), so servers compared on a "
            "workload are measured within seconds of each other and a machine whose speed "
            "drifts moves them alike. A server's first slice of a workload follows a "
            f"{args.warmup:g} s warm-up, each later one (on new connections) a warm-up of "
            f"{args.slice_warmup:g} s or twice its slowest call so far, whichever is longer. "
            "calls/s counts the calls that end in a slice; latencies are of the calls that "
            "start in it, however long they run"
            if args.slices > 1
            else f", each after a {args.warmup:g} s warm-up"
        )
        + (
            f". The whole run was repeated {args.repeat} times, and each figure is the median "
            "over the repeats."
            if args.repeat > 1
            else "."
        ),
        "- **Official SDK mode.** Its streamable HTTP app in JSON response mode "
        "(`json_response=True`, its fastest, and the same wire shape as ours). Its default "
        "(SSE-capable) mode is shown too for the 1- and 2-round calls.",
        "- **TypeScript SDK v2.** `bench/servers/typescript/server.mjs`: the same tools on "
        f"`@modelcontextprotocol/server` {typescript_peer.SERVER_VERSION}, under node "
        f"{typescript_peer.NODE_VERSION} (both from npm, pinned by "
        "`bench/servers/typescript/package-lock.json`), served as the SDK's HTTP guide serves "
        "a handler on `node:http`: `createMcpHandler` (stateless, a fresh server per request) "
        "in JSON response mode behind the localhost Host and Origin guards. Its tools ask with "
        "`inputRequired(...)` and carry what a call has learned in `requestState`, minted and "
        "verified by the SDK's `createRequestStateCodec` (HMAC-SHA256, the bench's key). One "
        "node process, as every other server is one process; shown for the 1-round, 2-round "
        "and chain calls.",
        '- **Ours with Redis**: `store="redis://…?prefix=bench-<random>"`: state above 4 KiB '
        "by reference, single-use rounds and the journal are on (the prefix's keys are deleted "
        "after each repeat, so each repeat starts empty; a run in which the server "
        "dropped a journal event is invalid). Ours inline raises `max_token_chars` to 4 MiB "
        "(the official SDK's body cap) so the 1 MB answer can travel inline as it does there; "
        "the default refuses it and asks for a store.",
        '- **Ours with SQLite**: `store="sqlite:///…"`, the embedded default of '
        "`python -m engine serve`, with the same single-use rounds, state by reference and "
        "journal, in a file on the local disk that is deleted after each repeat.",
        "- **Figures.** calls/s and rounds/s over the measured window; p50/p99 of whole-call "
        "latency (first POST to final result); token B/round = mean `requestState` length per "
        "`input_required` round; server CPU µs/round = the server process's utime+stime "
        "(`/proc/<pid>/stat`) over the window ÷ rounds. In parentheses: ours ÷ official "
        "(JSON mode) in the same run. Server waiting for a CPU = the share of the window the "
        "server's event loop was ready to run but had no core (`/proc/<pid>/schedstat`): the "
        "load generator, Redis and the server share 2 cores, and where this is high the row "
        "is bound by the machine's CPU rather than by waiting on the network or Redis. "
        "rounds/s ÷ floor = rounds/s ÷ the floor's requests/s. "
        "Redis = the Redis server's own CPU during the window, in cores (when it runs on this "
        "machine). Busy elsewhere = CPU used on the machine during the window by anything else "
        "(`/proc/stat`, which counts time a virtual machine's host kept from it), in cores "
        f"out of 2; above {DISTURBED} a row is marked disturbed: its calls/s and latencies "
        "measure the neighbours as much as the server.",
        "",
        "- **Running it.** `make bench` (the project venv, the bench extra "
        "`pip install matplotlib py-spy pyinstrument`, a Redis: the machine's on "
        "127.0.0.1:6379 or a private `redis-server`), or `.venv/bin/python bench/run.py` "
        "`[--quick] [--repeat N] [--slices N] [--profile] [--duration S] [--workloads a,b]`. "
        "The bench extra is for the bench only, never a runtime dependency. A change worth a "
        "few percent is below what this machine drifts between slices: compare builds or "
        "settings with `bench/ab.py` (for instance `.venv/bin/python bench/ab.py inline=. "
        "redis=.,redis`), whose variants take many short turns.",
        "",
        "## Results",
        "",
        markdown_table(HEADERS, table_rows(results)),
        "",
    ]
    if chart:
        lines += [f"![calls/s and p99 per workload](../bench/{Path(chart).name})", ""]
    else:
        lines += ["(Chart skipped: matplotlib is not installed; `pip install matplotlib`.)", ""]
    lines += [
        "Workloads: 1-round `reserve_book(Dune)`; 2-round `order_book(Neuromancer)` (one "
        "elicitation); `recommend_and_order`: Sample → Elicit → Elicit, three dependent questions "
        "so four rounds on both servers; `publish_draft`: a 1,000,000-character sampled answer "
        "then one elicitation (3 rounds); `slow_pair`: two independent resolvers of 50 ms each "
        "(1 round); `order_as_task`: order_book's question asked by the body of a task, which "
        "the client creates, polls back to back until it asks, answers with `tasks/update` and "
        "polls until it completes (a store's servers only: tasks need one; its rounds are those "
        "requests, and the official server's best equivalent is the 2-round call).",
        "",
        "## Against the performance targets",
        "",
        target_table,
        "",
        "## The engine alone (in process, no HTTP)",
        "",
        markdown_table(["what", "time"], micro_rows(micro)),
        "",
        "`bench/micro.py`: whole two-round `order_book(Neuromancer)` calls, timing only the "
        "engine call (the ASGI row is everything our server does per request but uvicorn's "
        "parsing and the socket: compare it with the server CPU per round above); seal and "
        "open with `engine.state.seal.KeyRing` on random plaintexts. Timed in "
        "batches; the best batch is the figure (the least disturbed by other work on the "
        "machine), the mean of all batches is shown beside it.",
        "",
    ]
    if profile is not None:
        total = profile["total"] or 1
        top_self = sorted(profile["self"].items(), key=lambda kv: -kv[1])[:12]
        top_incl = sorted(profile["inclusive"].items(), key=lambda kv: -kv[1])
        ours_incl = [kv for kv in top_incl if "engine/" in kv[0] or "stores/" in kv[0]][:12]
        lines += [
            "## Profile of our server (2-round order_book, py-spy)",
            "",
            f"{profile['total']:,} samples of the server process (wall-clock samples of a busy "
            "thread: a process waiting for a CPU on a loaded machine is sampled where it waits).",
            "",
            markdown_table(
                ["self %", "function (leaf)"],
                [[f"{c / total * 100:.1f}", f"`{n}`"] for n, c in top_self],
            ),
            "",
            markdown_table(
                ["inclusive %", "engine function"],
                [[f"{c / total * 100:.1f}", f"`{n}`"] for n, c in ours_incl],
            ),
            "",
        ]
    if notes:
        lines += ["## Notes on this run", ""] + [f"- {n}" for n in notes] + [""]
    lines += [
        "## Machine and command",
        "",
        f"- CPU: {info['cpu']}, {info['cores']} cores; memory {info['memory']}; Linux "
        f"{info['kernel']}; Python {info['python']}.",
        f"- Load average at start: {info['loadavg_start']}; "
        f"at end: {info.get('loadavg_end', '?')}. "
        "The load generator, the server under test (and Redis in Redis mode) share the 2 cores, "
        "beside the other servers, up and idle; other work may have been running on the "
        "machine.",
        f"- engine commit {info['commit']}; ours: uvicorn {versions['ours'].get('uvicorn')}, "
        f"uvloop {versions['ours'].get('uvloop')}, httptools {versions['ours'].get('httptools')}; "
        f"official venv: mcp {versions['official'].get('mcp')}, uvicorn "
        f"{versions['official'].get('uvicorn')}, uvloop {versions['official'].get('uvloop')}, "
        f"httptools {versions['official'].get('httptools')}"
        + (
            "; TypeScript peer: "
            + ", ".join(f"{name} {v}" for name, v in versions["typescript"].items())
            if versions.get("typescript")
            else ""
        )
        + ".",
        f"- Date: {info['date']}.",
        f"- Command: `{command}`",
        "",
    ]
    if floor and floor["valid"]:
        lines.insert(
            lines.index("## Against the performance targets"),
            f"The floor answered {floor['calls_per_s']:,.0f} requests/s with its server at "
            f"{floor['server_cpu_share'] * 100:.0f}% of a core and the load generator at "
            f"{floor['client_cpu_share'] * 100:.0f}%.\n",
        )
    return "\n".join(lines)


def kept_section(path: Path) -> str:
    """The hand-written section of the page at ``path`` (``KEPT_SECTION`` to the end), to put
    back after a new run's sections; empty when there is none."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return ""
    at = text.find("\n" + KEPT_SECTION + "\n")
    return "" if at < 0 else "\n" + text[at + 1 :]


# --- main --------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description="engine vs the official MCP Python SDK")
    parser.add_argument("--quick", action="store_true", help="3 s per workload; docs untouched")
    parser.add_argument("--duration", type=float, default=None, help="measured seconds (10)")
    parser.add_argument("--warmup", type=float, default=None, help="warm-up seconds (2)")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument(
        "--repeat", type=int, default=1, help="run the whole sequence N times; medians"
    )
    parser.add_argument(
        "--slices",
        type=int,
        default=None,
        help="cut each window into N slices taken in turn with the other servers (5; quick: 1)",
    )
    parser.add_argument(
        "--slice-warmup",
        type=float,
        default=0.5,
        help="least warm-up seconds before a later slice (at least twice the slowest call)",
    )
    parser.add_argument(
        "--workloads", default=",".join(loadgen.WORKLOADS), help="comma-separated subset"
    )
    parser.add_argument("--redis-url", default=None, help="default: redis://127.0.0.1:6379/0")
    parser.add_argument("--no-redis", action="store_true")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--no-official", action="store_true")
    parser.add_argument("--no-typescript", action="store_true", help="leave out the TS SDK peer")
    parser.add_argument("--profile", action="store_true", help="py-spy our server (2-round)")
    parser.add_argument("--docs", dest="docs", action="store_true", default=None)
    parser.add_argument("--no-docs", dest="docs", action="store_false")
    args = parser.parse_args()
    args.duration = args.duration or (3.0 if args.quick else 10.0)
    args.warmup = args.warmup if args.warmup is not None else (1.0 if args.quick else 2.0)
    if args.slices is None:
        args.slices = 1 if args.quick else 5
    if args.slices < 1 or args.repeat < 1:
        parser.error("--slices and --repeat must be at least 1")
    if args.slice_warmup < 0:
        parser.error("--slice-warmup must not be negative")
    write_docs = args.docs if args.docs is not None else not args.quick
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in workloads if w not in loadgen.WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; choose from {list(loadgen.WORKLOADS)}")

    command = "python bench/run.py " + " ".join(sys.argv[1:])
    ensure_server_stack()
    official_py = None if args.no_official else ensure_official_venv()
    typescript, typescript_missing = None, None
    if not args.no_typescript:
        try:
            typescript = typescript_peer.ensure_typescript_peer()
        except typescript_peer.PeerUnavailable as exc:
            typescript_missing = str(exc)
            log(f"(TypeScript SDK peer skipped: {exc})")
    RESULTS.mkdir(exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    logs = RESULTS / f"logs-{stamp}"
    logs.mkdir()
    info = machine_info()
    info["date"] = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    versions = {
        "ours": version_of(sys.executable, "uvicorn", "uvloop", "httptools", "pydantic"),
        "official": version_of(official_py, "mcp", "uvicorn", "uvloop", "httptools")
        if official_py
        else {},
        "typescript": typescript.versions if typescript else {},
    }
    notes: list[str] = []
    if args.quick:
        notes.append("Quick smoke run (--quick): short windows, numbers are indicative only.")
    if typescript_missing:
        notes.append(f"The TypeScript SDK peer was skipped: {typescript_missing}")
    log(f"machine: {info['cpu']}, {info['cores']} cores, load {info['loadavg_start']}")

    log("\n== engine alone (in process)")
    import micro

    micro_results = micro.run_all(1.0 if args.quick else 2.0)
    for what, value in micro_rows(micro_results):
        log(f"   {what:52s} {value}")

    specs = [
        ServerSpec(
            "floor",
            SERVER_LABEL["floor"],
            sys.executable,
            ["bench/servers/floor.py"],
            ["one_round"],
            "floor",
        )
    ]
    if official_py:
        specs.append(
            ServerSpec(
                "official",
                SERVER_LABEL["official"],
                str(official_py),
                ["bench/servers/official.py", "--json-response"],
                [w for w in workloads if not loadgen.WORKLOADS[w].task],
                "official",
            )
        )
        specs.append(
            ServerSpec(
                "official-sse",
                SERVER_LABEL["official-sse"],
                str(official_py),
                ["bench/servers/official.py"],
                [w for w in workloads if w in ("one_round", "two_round", "chain")],
                "official",
            )
        )
    if typescript:
        specs.append(
            ServerSpec(
                "typescript",
                SERVER_LABEL["typescript"],
                str(typescript.node),
                typescript.argv,
                [w for w in workloads if w in TYPESCRIPT_WORKLOADS],
                "typescript",
            )
        )
    specs.append(
        ServerSpec(
            "ours",
            SERVER_LABEL["ours"],
            sys.executable,
            ["bench/servers/ours.py"],
            [w for w in workloads if not loadgen.WORKLOADS[w].task],  # tasks need a store
            "ours",
        )
    )
    sqlite_file = logs / "bench-store.sqlite3"
    if not args.no_sqlite:
        specs.append(
            ServerSpec(
                "ours-sqlite",
                SERVER_LABEL["ours-sqlite"],
                sys.executable,
                ["bench/servers/ours.py", "--store", f"sqlite:///{sqlite_file.resolve()}"],
                workloads,
                "ours",
            )
        )
    redis_url = None if args.no_redis else redis_url_from(args)
    args.redis_pid = redis_pid(redis_url) if redis_url else None
    prefix = f"bench-{secrets.token_hex(6)}"
    if redis_url:
        specs.append(
            ServerSpec(
                "ours-redis",
                SERVER_LABEL["ours-redis"],
                sys.executable,
                ["bench/servers/ours.py", "--store", with_prefix(redis_url, prefix)],
                workloads,
                "ours",
            )
        )
    elif not args.no_redis:
        notes.append("Redis mode skipped: no Redis answered (set --redis-url).")
        log("(Redis mode skipped: no Redis answered)")

    runs: list[dict[str, Any]] = []
    try:
        for repeat in range(args.repeat):
            if args.repeat > 1:
                log(f"\n######## repeat {repeat + 1} of {args.repeat}")
            runs += measure_repeat(specs, workloads, args, logs)
            if redis_url:  # every repeat starts from no keys
                clean_redis(redis_url, prefix)
            remove_sqlite(sqlite_file)  # and from a new file
    finally:
        if redis_url:
            deleted = clean_redis(redis_url, prefix)
            log(f"\n(deleted {deleted} Redis keys under {prefix}:)")

    results = aggregate(runs)
    profile = profile_ours(args, logs, stamp) if args.profile else None
    info["loadavg_end"] = loadavg()
    targets = evaluate(results, micro_results)

    log("\n" + text_table(HEADERS, table_rows(results)))
    log("\nTargets:")
    for name, required, value, ok in targets:
        state = {True: "met", False: "NOT MET", None: "n/a"}[ok]
        log(f"   {name:52s} {required:>14s}  {value:>12s}  {state}")

    busy = _median([r["other_cpu_share"] for r in results])
    disturbed = [r for r in results if r["other_cpu_share"] > DISTURBED]
    if disturbed or (busy is not None and busy > DISTURBED):
        notes.append(
            f"The machine was not idle: {len(disturbed)} of {len(results)} rows are disturbed "
            f"(over {DISTURBED} of the 2 cores busy with other work than the server under test, "
            "the load generator and Redis; a median of "
            f"{busy or 0.0:.2f} cores over all rows). That depresses calls/s and inflates "
            "latencies unevenly between runs, and compresses the calls/s ratios; server CPU "
            "µs/round is the figure least affected by it."
        )
    invalid = [r for r in results if not r["valid"]]
    if invalid:
        notes.append(
            "INVALID runs (failed calls): "
            + ", ".join(f"{r['server']}/{r['workload']}" for r in invalid)
        )
    raw = {
        "info": info,
        "versions": versions,
        "args": vars(args),
        "command": command,
        "micro": micro_results,
        "results": results,
        "runs": runs,
        "targets": targets,
        "profile_top": None
        if profile is None
        else {
            "total": profile["total"],
            "self": sorted(profile["self"].items(), key=lambda kv: -kv[1])[:40],
            "inclusive": sorted(profile["inclusive"].items(), key=lambda kv: -kv[1])[:40],
        },
    }
    out = RESULTS / f"results-{stamp}.json"
    out.write_text(json.dumps(raw, indent=1, default=str))
    log(f"\nraw results: {out.relative_to(ROOT)}")
    if write_docs:
        chart = write_chart(results, CHART)
        if chart is None:
            log("(chart skipped: matplotlib is not installed; pip install matplotlib)")
        kept = kept_section(DOC)
        DOC.write_text(
            render_doc(
                results,
                micro_results,
                targets,
                info,
                versions,
                args,
                command,
                chart,
                notes,
                profile,
            )
            + kept
        )
        log(f"wrote {DOC.relative_to(ROOT)}" + (f" and {CHART.relative_to(ROOT)}" if chart else ""))
    return 1 if invalid else 0


if __name__ == "__main__":
    sys.exit(main())
