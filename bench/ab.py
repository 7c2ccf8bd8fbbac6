"""Interleaved runs of our bench server in several variants: ``bench/ab.py``.

A change to the Redis path moves calls/s by a few percent, less than this machine drifts in a
minute, so `make bench` (every server once per slice, 20 minutes) cannot show it. Here two or
more variants take many short turns instead, the order rotated every round and reversed every
other one, so a drift moves them alike. A variant is ``bench/servers/ours.py`` of a checkout,
inline or with a store, with environment settings of its own:

    .venv/bin/python bench/ab.py inline=. redis=.,redis sampled=.,redis,ENGINE_JOURNAL_SAMPLE=0.1
    .venv/bin/python bench/ab.py --workload chain --rounds 10 before=../old,redis after=.,redis

Each variant is ``NAME=CHECKOUT[,redis|,sqlite|,memory][,jwt][,venv][,workers=N][,VAR=VALUE...]``;
a store may carry options of its URL (``sqlite?synchronous=full``, ``redis?allow_eviction=yes``):

    .venv/bin/python bench/ab.py normal=.,sqlite full=.,sqlite?synchronous=full

``memory``
is the in-process store (what the engine's single-use rounds and journal cost, without a store's
own work); ``venv`` runs the server with the checkout's own ``.venv/bin/python`` instead of this
one, so a checkout made with another Python compares interpreters:

    .venv/bin/python bench/ab.py py311=. py313=../py313,venv

``jwt`` serves it with
auth on: a ``JWTVerifier`` whose key set the server fetches (once, then keeps) from a route of its
own, the load generator sending an RS256 token minted for it with every request:

    .venv/bin/python bench/ab.py open=. jwt=.,jwt

``workers=N`` serves it with ``python -m engine serve bench/servers/ours.py:build --workers N``
(N processes on the port; the server's CPU is theirs and the supervisor's, and the journal check
reads the ``/metrics`` of whichever worker answers):

    .venv/bin/python bench/ab.py one=.,sqlite,workers=1 two=.,sqlite,workers=2

``NAME=typescript`` is the TypeScript SDK v2 peer instead of a checkout
(``bench/servers/typescript/``, installed as `bench/run.py` installs it):

    .venv/bin/python bench/ab.py ts=typescript sqlite=.,sqlite

As in `bench/run.py`, no
``ENGINE_*`` setting of the calling shell reaches a server: only a variant's own do. The Redis is
the bench's (``--redis-url``, as for `bench/run.py`); each variant gets a key prefix of its own,
deleted once the servers have stopped. Prints each variant's medians over the rounds (calls/s,
server CPU per round, Redis's own CPU) and its calls/s over the first variant's: the median of
the rounds' ratios, with their range. A turn with a failed call or none completed, or a journal
event a server dropped, makes the run invalid (exit status 1).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import secrets
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import loadgen
import run
import typescript_peer


@dataclass
class Variant:
    name: str
    checkout: Path
    store: str | None
    """``redis``, ``sqlite``, ``memory`` or ``None`` (inline)."""
    env: dict[str, str]
    store_options: str = ""
    """The query its store URL ends with (``synchronous=full``), or nothing."""
    jwt: bool = False
    """Served with auth on; the load carries a bearer token (see `bearer_token`)."""
    python: str = sys.executable
    """The server's interpreter: this one, or the checkout's own venv's (``venv``)."""
    workers: int | None = None
    """Served by ``python -m engine serve ... --workers N`` (``workers=N``) rather than by
    ``ours.py``'s own ``mcp.run``."""
    typescript: bool = False
    """The TypeScript SDK v2 peer (``NAME=typescript``) rather than ``ours.py``."""
    headers: dict[str, str] = field(default_factory=dict)
    calls_per_s: list[float] = field(default_factory=list)
    cpu_per_round: list[float] = field(default_factory=list)
    store_cores: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def parse_variant(text: str) -> Variant:
    """``NAME=CHECKOUT[,redis|,sqlite|,memory][,jwt][,venv][,workers=N][,VAR=VALUE...]``, with a
    clear error
    for anything else."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give NAME=CHECKOUT[,redis|,sqlite|,memory][,VAR=VALUE...], e.g. "
            "redis=.,redis"
        )
    if not re.fullmatch(r"[\w.-]+", name):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a variant's name is letters, digits, '-', '_' and '.' (it names its "
            "Redis key prefix and its log)"
        )
    if rest == "typescript":
        return Variant(name, run.ROOT, None, {}, typescript=True)
    directory, *options = rest.split(",")
    if not directory:
        raise argparse.ArgumentTypeError(f"{text!r}: name a checkout, e.g. {name}=.")
    checkout = Path(directory).resolve()
    if not (checkout / "bench" / "servers" / "ours.py").is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: {checkout} has no bench/servers/ours.py")
    store: str | None = None
    store_options = ""
    env: dict[str, str] = {}
    jwt = False
    python = sys.executable
    workers: int | None = None
    for option in options:
        if option.startswith("workers="):
            count = option.partition("=")[2]
            if not count.isdigit() or int(count) < 1:
                raise argparse.ArgumentTypeError(f"{text!r}: workers=N takes a number, 1 or more")
            workers = int(count)
        elif option == "jwt":
            jwt = True
        elif option == "venv":
            python = str(checkout / ".venv" / "bin" / "python")
            if not Path(python).is_file():
                raise argparse.ArgumentTypeError(
                    f"{text!r}: {python} does not exist; run make install in {checkout}"
                )
        elif option.partition("?")[0] in ("redis", "sqlite", "memory"):
            if store is not None:
                raise argparse.ArgumentTypeError(f"{text!r}: one store per variant")
            store, _, store_options = option.partition("?")
        elif "=" in option and option.partition("=")[0]:
            key, _, value = option.partition("=")
            env[key] = value
        else:
            raise argparse.ArgumentTypeError(
                f"{text!r}: {option!r} is neither redis, sqlite, memory, jwt, venv nor VAR=VALUE"
            )
    variant = Variant(
        name, checkout, store, env, store_options, jwt, python=python, workers=workers
    )
    if jwt:
        jwks, token = bearer_token()
        variant.env["BENCH_JWKS"] = jwks
        variant.headers["Authorization"] = f"Bearer {token}"
    return variant


JWT_ISSUER = "https://auth.bench.example/realms/bench"
JWT_AUDIENCE = "bench-bookshop"
"""What ``bench/servers/ours.py`` checks a token's ``iss`` and ``aud`` against."""


def bearer_token() -> tuple[str, str]:
    """A fresh RSA key's JWKS (for the server) and an RS256 access token it signed, valid for
    a day, such as Keycloak or Auth0 issue."""
    import json
    import time

    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    jwks = {"keys": [public | {"kid": "bench-1", "use": "sig", "alg": "RS256"}]}
    now = int(time.time())
    claims = {
        "iss": JWT_ISSUER,
        "sub": "f3b1c2d4-bench-user",
        "aud": JWT_AUDIENCE,
        "iat": now,
        "exp": now + 86400,
        "scope": "openid profile shop",
        "azp": "bench-client",
        "client_id": "bench-client",
    }
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "bench-1"})
    return json.dumps(jwks), token


def server_spec(variant: Variant, store_url: str | None) -> run.ServerSpec:
    if variant.typescript:
        try:
            peer = typescript_peer.ensure_typescript_peer()
        except typescript_peer.PeerUnavailable as exc:
            raise SystemExit(f"{variant.name}: {exc}") from None
        return run.ServerSpec(
            f"ab-{variant.name}", variant.name, str(peer.node), peer.argv, [], "typescript"
        )
    server = str(variant.checkout / "bench" / "servers" / "ours.py")
    env = dict(variant.env)
    if variant.workers is None:
        argv = [server]
        if store_url is not None:
            argv += ["--store", store_url]
    else:
        # The bookshop ours.py builds, served by the CLI; the store and keys as ours.py's.
        argv = ["-m", "engine", "serve", f"{server}:build", "--workers", str(variant.workers)]
        argv += ["--store", store_url or "none"]
        env.update(ENGINE_KEYS=run.KEY, PYTHONPATH=str(variant.checkout))
    return run.ServerSpec(
        f"ab-{variant.name}", variant.name, variant.python, argv, [], "ours", env=env
    )


def measure(variants: list[Variant], args: argparse.Namespace, logs: Path) -> None:
    """Start every variant, then run ``args.rounds`` rounds in which each takes one turn; the
    stores' keys and files are deleted once the servers have stopped."""
    redis_url = None
    if any(v.store == "redis" for v in variants):
        redis_url = run.redis_url_from(args)
        if redis_url is None:
            raise SystemExit("no Redis answered: start one, or give --redis-url")
    store_pid = run.redis_pid(redis_url) if redis_url else None
    workload = loadgen.WORKLOADS[args.workload]
    prefixes: list[str] = []
    sqlite_files: list[Path] = []
    try:
        with contextlib.ExitStack() as stack:
            running: dict[str, tuple[int, int]] = {}
            for variant in variants:
                url = None
                if variant.store == "redis":
                    assert redis_url is not None
                    prefixes.append(f"ab-{secrets.token_hex(4)}-{variant.name}")
                    url = run.with_prefix(redis_url, prefixes[-1])
                elif variant.store == "sqlite":
                    sqlite_files.append(logs / f"ab-{secrets.token_hex(4)}.sqlite3")
                    url = f"sqlite:///{sqlite_files[-1].resolve()}"
                elif variant.store == "memory":
                    url = "memory://"
                if url is not None and variant.store_options:
                    url += ("&" if "?" in url else "?") + variant.store_options
                running[variant.name] = stack.enter_context(
                    run.serving(server_spec(variant, url), logs)
                )
            dropped = {
                v.name: run.journal_events_dropped(running[v.name][0]) for v in variants if v.store
            }
            for n in range(args.rounds):
                for variant in run.turn_order(variants, n):
                    port, pid = running[variant.name]
                    result = run.run_turn(
                        port,
                        pid,
                        workload,
                        server=variant.name,
                        connections=args.connections,
                        warmup=args.warmup,
                        duration=args.seconds,
                        store_pid=store_pid if variant.store == "redis" else None,
                        headers=variant.headers,
                    )
                    if not result.valid and len(variant.failures) < 3:
                        variant.failures.append(
                            "; ".join(result.first_errors[:2])
                            or f"{result.calls} calls, {result.failures} failed"
                        )
                    variant.calls_per_s.append(result.calls / args.seconds)
                    if result.rounds:
                        variant.cpu_per_round.append(result.server_cpu / result.rounds * 1e6)
                    variant.store_cores.append(result.store_cpu / args.seconds)
                run.log(
                    f"round {n + 1} of {args.rounds}: "
                    + ", ".join(f"{v.name} {v.calls_per_s[-1]:,.0f}" for v in variants)
                )
            for variant in variants:
                if variant.store:
                    after = run.journal_events_dropped(running[variant.name][0])
                    error = run.dropped_error(dropped[variant.name], after)
                    if error is not None:
                        variant.failures.append(error)
    finally:
        for prefix in prefixes:
            assert redis_url is not None
            run.clean_redis(redis_url, prefix)
        for path in sqlite_files:
            run.remove_sqlite(path)


def report(variants: list[Variant]) -> list[str]:
    """The table of medians, each variant's calls/s against the first's."""
    first = variants[0]
    lines = [
        f"{'variant':16s} {'calls/s':>9s} {'CPU µs/round':>13s} {'Redis cores':>12s}  "
        f"÷ {first.name} (range)"
    ]
    for variant in variants:
        ratios = [a / b for a, b in zip(variant.calls_per_s, first.calls_per_s, strict=True) if b]
        versus = (
            f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
            if ratios
            else "-"
        )
        lines.append(
            f"{variant.name:16s} {statistics.median(variant.calls_per_s):9,.0f} "
            f"{statistics.median(variant.cpu_per_round or [float('nan')]):13.1f} "
            f"{statistics.median(variant.store_cores):12.2f}  {versus}"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", nargs="+", type=parse_variant, metavar="NAME=CHECKOUT,...")
    parser.add_argument("--workload", default="two_round", choices=sorted(loadgen.WORKLOADS))
    parser.add_argument("--rounds", type=int, default=8, help="turns each variant takes")
    parser.add_argument("--seconds", type=float, default=2.0, help="measured per turn")
    parser.add_argument("--warmup", type=float, default=0.7, help="before each turn")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--redis-url", default=None, help="default: as bench/run.py")
    args = parser.parse_args()
    variants: list[Variant] = args.variants
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        parser.error(f"variant names must differ: {', '.join(names)}")
    if args.rounds < 1 or args.connections < 1 or args.seconds <= 0 or args.warmup < 0:
        parser.error(
            "--rounds and --connections must be at least 1, --seconds above 0, --warmup 0 or more"
        )
    run.ensure_server_stack()
    logs = run.RESULTS / "ab"
    logs.mkdir(parents=True, exist_ok=True)
    measure(variants, args, logs)
    run.log("\n" + "\n".join(report(variants)))
    invalid = [v for v in variants if v.failures]
    for variant in invalid:
        run.log(f"INVALID {variant.name}: " + "; ".join(variant.failures))
    return 1 if invalid else 0


if __name__ == "__main__":
    sys.exit(main())
