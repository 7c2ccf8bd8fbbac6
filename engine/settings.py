"""Typed, grouped settings: what ``MCPServer(...)`` is given, completed from the environment.

The environment (``ENGINE_*``) is read here, once, when a server is made: the rest of the engine
receives these frozen values and never looks at ``os.environ``. An argument given in code wins
over the environment, which wins over the default.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

from engine._internal.tracing import TRACING_MODES, TracingMode
from engine.caching import CacheHint, cache_hints_of
from engine.state.claims import CLOCK_SKEW
from engine.state.seal import KeyRing, KeySpec
from engine.types import Icon

if TYPE_CHECKING:
    from stores.base import Store

Environ = Mapping[str, str]


class ServerOptions(TypedDict, total=False):
    """What ``MCPServer(...)`` may be given besides its name, instructions, version, principal
    and lifespan: declared here once, documented on ``MCPServer``, defaulted by
    :meth:`Settings.build`."""

    keys: Iterable[KeySpec] | KeyRing | None
    audience: str | None
    state_ttl: int
    max_token_chars: int
    max_inline_state: int | None
    trust_unsolicited_answers: bool
    store: str | Store | None
    spill_threshold: int
    duplicate_wait: float
    claim_lease: float
    journal_arguments: bool | None
    journal_ttl: float
    journal_sample: float | None
    journal_max_event_bytes: int | None
    journal_max_bytes: int | None
    session_ttl: float
    legacy_answer_timeout: float
    max_pending_calls_per_session: int
    max_pending_calls: int
    max_pending_calls_per_principal: int
    max_sessions_per_principal: int
    max_input_responses: int
    list_ttl_ms: int
    replica_id: str | None
    stamp_results: bool | None
    warn_on_duplicate_tools: bool
    warn_on_duplicate_prompts: bool
    warn_on_duplicate_resources: bool
    max_head_bytes: int
    head_timeout: float
    body_timeout: float
    min_body_rate: float
    max_connections: int | None
    task_ttl: float
    task_poll_interval: float
    task_lease: float
    max_running_tasks: int
    max_task_takeovers: int
    max_tasks_per_principal: int
    max_tasks_per_replica: int
    max_task_creations_per_minute: int
    max_task_result_bytes: int | None
    max_listen_task_ids: int
    clock_skew: float
    tracer_provider: Any
    log_level: str
    debug: bool
    cache_hints: Mapping[str, Any] | None
    subscriptions: Any
    dependencies: Iterable[str] | None


SERVER_OPTIONS = ServerOptions.__optional_keys__

DEFAULT_CLAIM_LEASE = 10.0
"""Seconds a round's claim lives unless renewed: how long the round of a replica that died stays
taken before a retry may run it (renewing costs one store write per running round per quarter of
it)."""

DEFAULT_MAX_TASK_TAKEOVERS = 3
"""Takeovers of a lapsed hold after which a task fails instead of running again."""

DEFAULT_CLOCK_SKEW = CLOCK_SKEW
"""Seconds two replicas' clocks may be apart before one refuses the other's requestStates as
minted in the future or expired (and, for that, the seconds rounds and spilled state are kept
beyond their TTL on each side)."""

JOURNAL_MAX_EVENT_BYTES = 64 * 1024
"""The default cap on a journal event's payload."""

JOURNAL_MAX_BYTES = 256 * 1024 * 1024
"""The default cap on the journal's size in the store: a day of a busy laptop's calls, far
less than its disk."""

MAX_TASK_RESULT_BYTES = 4 * 1024 * 1024
"""The default cap on a task's result, as JSON: a larger one fails the task instead of being
kept."""

_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")


@dataclass(frozen=True, slots=True)
class TokenSettings:
    """How a requestState is bound, how long it lives and how large it may be."""

    audience: str
    state_ttl: int
    max_token_chars: int
    max_inline_state: int
    trust_unsolicited_answers: bool
    clock_skew: float = DEFAULT_CLOCK_SKEW
    """Seconds a token may seem minted in the future, or past its expiry, by this replica's
    clock: other replicas' clocks may be off by that much."""
    max_input_responses: int = 64
    """Answers one request may carry (keys of ``inputResponses``); more are refused unread."""


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Which store holds what outlives a round, and how rounds use it."""

    store: str | Store | None
    spill_threshold: int
    duplicate_wait: float
    claim_lease: float


@dataclass(frozen=True, slots=True)
class JournalSettings:
    """What the journal keeps of each round, for how long, and of which share of calls."""

    arguments: bool
    ttl: float
    sample: float
    max_event_bytes: int
    """A round's payload (arguments, questions, answers, checkpoints, response) larger than
    this is journaled without its largest parts, marked as truncated."""
    max_bytes: int = JOURNAL_MAX_BYTES
    """Past this many bytes in the store, the journal's oldest calls are purged (0: no cap;
    see `stores.SQLiteStore.trim_journal` for what the SQLite store counts)."""
    server: str = ""
    """The server's name, journaled in the clear with each round: one store often keeps the
    calls of several servers, and ``python -m engine calls`` tells them apart by it."""


@dataclass(frozen=True, slots=True)
class TaskSettings:
    """How long a task is kept, how often clients are told to poll it, and how its body runs."""

    ttl: float
    """Seconds a task is kept from its creation, whatever its status."""
    poll_interval: float
    """Seconds between polls clients are asked to keep (``pollIntervalMs``)."""
    lease: float
    """Seconds a running body's hold on its task lives unless renewed: how long the task of a
    replica that died waits before another replica takes it over."""
    max_running: int
    """Bodies of tasks this replica runs at once; the others wait, their leases renewed."""
    max_takeovers: int = DEFAULT_MAX_TASK_TAKEOVERS
    """Times a task may be taken over from a run whose hold lapsed; at the next, it fails."""
    max_per_principal: int = 1000
    """Tasks one principal may have kept (made on this replica, not yet past their TTL)."""
    max_per_replica: int = 20_000
    """Tasks of all principals made on this replica and kept."""
    max_creations_per_minute: int = 600
    """Tasks one principal may make on this replica in any minute."""
    max_result_bytes: int = MAX_TASK_RESULT_BYTES
    """A task's result, as JSON, at most: a larger one fails the task and is not kept."""
    max_listen_ids: int = 256
    """Tasks one ``subscriptions/listen`` may name; more are refused unread."""


@dataclass(frozen=True, slots=True)
class LegacySettings:
    """2025-11-25 sessions and questions asked over the back-channel."""

    session_ttl: float
    answer_timeout: float
    max_pending_calls_per_session: int
    """Calls of one session that may wait for an answer at once; more are refused."""
    max_pending_calls: int
    """Calls of all sessions that may wait for an answer at once on this replica."""
    max_pending_calls_per_principal: int = 100
    """Calls of one principal's sessions that may wait for an answer at once on this replica."""
    max_sessions_per_principal: int = 100
    """Sessions one principal may have open on this replica (deleted ones, and those unused
    here for ``session_ttl``, do not count)."""


Duplicates = Literal["warn", "keep"]
"""What registering a second function under a taken name does: keep the first, with a warning
(the default, as the official server does) or without one."""


@dataclass(frozen=True, slots=True)
class RegistrySettings:
    """What a name (or URI) already taken does to the next registration, per kind."""

    tools: Duplicates
    prompts: Duplicates
    resources: Duplicates


def _duplicates(flag: bool | None) -> Duplicates:
    return "keep" if flag is False else "warn"


@dataclass(frozen=True, slots=True)
class InfoSettings:
    """What clients are told about the server besides its name and version (``serverInfo``)."""

    title: str | None
    description: str | None
    website_url: str | None
    icons: tuple[Icon, ...]

    @classmethod
    def of(
        cls,
        title: str | None,
        description: str | None,
        website_url: str | None,
        icons: Iterable[Icon | Mapping[str, Any]] | None,
    ) -> InfoSettings:
        """Icons as given: ``engine.types.Icon``, a dict (``src``, ``mimeType``, ``sizes``,
        ``theme``), or another pydantic model of those fields (the official ``mcp_types.Icon``)."""
        return cls(title, description, website_url, tuple(Icon.of(icon) for icon in icons or ()))

    def server_info(self, name: str, version: str) -> dict[str, Any]:
        """The wire ``serverInfo`` (an ``Implementation``): only the fields that were given."""
        info: dict[str, Any] = {"name": name, "version": version}
        if self.title is not None:
            info["title"] = self.title
        if self.description is not None:
            info["description"] = self.description
        if self.website_url is not None:
            info["websiteUrl"] = self.website_url
        if self.icons:
            info["icons"] = [icon.to_wire() for icon in self.icons]
        return info


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What one HTTP connection of ``mcp.run()`` may make a replica hold, and for how long."""

    max_head_bytes: int
    """The request line and headers of one request, in bytes."""
    head_timeout: float
    """Seconds a head may take: from the connection, or from the first byte of a later head."""
    body_timeout: float
    """Seconds a body may go without a byte; also the grace before `min_body_rate` counts."""
    min_body_rate: float
    """Bytes per second a body must average once `body_timeout` has passed (0: no minimum)."""
    max_connections: int | None
    """Open connections at most; ``None``: derived from the file-descriptor limit at start."""


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """How ``mcp.run()`` serves over HTTP; from the environment only, but for the connection
    limits, which options give too."""

    drain_timeout: float
    gc_freeze: bool
    access_log: bool
    extra_allowed_hosts: tuple[str, ...]
    connections: ConnectionLimits
    trust_forwarded: bool = False
    """``ENGINE_TRUST_FORWARDED``: a proxy in front sets ``X-Forwarded-Proto`` and
    ``X-Forwarded-Host``, so the protected resource metadata URL may be built from them."""


@dataclass(frozen=True, slots=True)
class TracingSettings:
    """Whether spans are recorded (see ``engine._internal.tracing``), and by which provider."""

    mode: TracingMode
    """``ENGINE_TRACING``: ``auto`` (a provider is given or configured), ``on`` or ``off``."""
    provider: Any = None
    """An OpenTelemetry ``TracerProvider`` given as ``tracer_provider=``; ``None``: the global
    one."""


def _tracing(provider: Any, env: Environ) -> TracingSettings:
    mode = env.get("ENGINE_TRACING", "").strip().lower() or "auto"
    if mode not in TRACING_MODES:
        raise ValueError(
            f"ENGINE_TRACING must be one of {', '.join(TRACING_MODES)}, got {mode!r}; unset it "
            "to trace once OpenTelemetry has a tracer provider"
        )
    return TracingSettings(mode, provider)


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a server is configured with, grouped by the part of the engine that reads it."""

    keys: KeyRing | None
    """``None`` when no key was given anywhere: the runtime makes an ephemeral one, and warns."""
    replica_id: str
    list_ttl_ms: int
    tokens: TokenSettings
    store: StoreSettings
    journal: JournalSettings
    tasks: TaskSettings
    legacy: LegacySettings
    serve: ServeSettings
    info: InfoSettings
    registry: RegistrySettings
    tracing: TracingSettings
    log_level: str = "INFO"
    """What ``log_level=`` asked of Python logging (and uvicorn, under ``mcp.run``)."""
    debug: bool = False
    """Starlette's debug pages on the HTTP app's other routes (not on the MCP endpoint)."""
    cache_hints: Mapping[str, CacheHint] = field(default_factory=dict)
    """Caching hints of the cacheable methods that were given one (``cache_hints=``)."""
    subscriptions: bool = True
    """Whether ``subscriptions/listen`` is served (``subscriptions=False``: it is not)."""
    dependencies: list[str] = field(default_factory=list)
    """The packages the server needs, as given; metadata for tools that install servers."""
    stamp_results: bool = False
    """Whether each 2026-07-28 result names the replica and the call in its ``_meta``."""

    @classmethod
    def build(
        cls,
        *,
        name: str,
        environ: Environ | None = None,
        info: InfoSettings | None = None,
        **options: Unpack[ServerOptions],
    ) -> Settings:
        """The settings of a server named ``name`` (see ``MCPServer`` for each option).

        An option not given takes its default, here. Those with an ``ENGINE_*`` variable
        (``keys``, ``store``, ``replica_id``, ``stamp_results``, ``journal_arguments``,
        ``journal_sample``, ``journal_max_event_bytes``, ``journal_max_bytes``) read it
        from ``environ`` (default: ``os.environ``) when not given or ``None``.
        """
        env = os.environ if environ is None else environ
        state_ttl = options.get("state_ttl", 600)
        if int(state_ttl) < 1:
            raise ValueError("state_ttl must be a whole number of seconds, at least 1")
        max_token_chars = options.get("max_token_chars", 64 * 1024)
        max_inline_state = options.get("max_inline_state")
        journal_arguments = options.get("journal_arguments")
        if journal_arguments is None:
            journal_arguments = env_flag(env, "ENGINE_JOURNAL_ARGUMENTS", default=True)
        journal_sample = options.get("journal_sample")
        if journal_sample is None:
            journal_sample = env_number(
                env, "ENGINE_JOURNAL_SAMPLE", default=1.0, hint="from 0 to 1"
            )
        journal_max_event_bytes: float | None = options.get("journal_max_event_bytes")
        if journal_max_event_bytes is None:
            journal_max_event_bytes = env_number(
                env,
                "ENGINE_JOURNAL_MAX_EVENT_BYTES",
                default=JOURNAL_MAX_EVENT_BYTES,
                hint="of bytes, at least 1024",
            )
        journal_max_bytes: float | None = options.get("journal_max_bytes")
        if journal_max_bytes is None:
            journal_max_bytes = env_number(
                env,
                "ENGINE_JOURNAL_MAX_BYTES",
                default=JOURNAL_MAX_BYTES,
                hint="of bytes, 0 for no cap or at least 65536",
            )
        store = options.get("store")
        return cls(
            keys=_key_ring(options.get("keys"), env),
            replica_id=(
                options.get("replica_id") or env.get("ENGINE_REPLICA_ID") or f"pid-{os.getpid()}"
            ),
            list_ttl_ms=options.get("list_ttl_ms", 0),
            tokens=TokenSettings(
                audience=options.get("audience") or name,
                state_ttl=int(state_ttl),
                max_token_chars=max_token_chars,
                # A sealed token is about 4/3 of the state plus ~100 characters of claims: the
                # default keeps every token this server mints under the cap it enforces.
                max_inline_state=(
                    max_inline_state
                    if max_inline_state is not None
                    else max_token_chars * 3 // 4 - 256
                ),
                trust_unsolicited_answers=options.get("trust_unsolicited_answers", False),
                clock_skew=_clock_skew(options, env),
                max_input_responses=_at_least_one(
                    "max_input_responses", options.get("max_input_responses", 64)
                ),
            ),
            store=StoreSettings(
                store=store if store is not None else _store_from(env),
                spill_threshold=options.get("spill_threshold", 4 * 1024),
                duplicate_wait=options.get("duplicate_wait", 2.0),
                claim_lease=options.get("claim_lease", DEFAULT_CLAIM_LEASE),
            ),
            journal=JournalSettings(
                arguments=journal_arguments,
                ttl=options.get("journal_ttl", 24 * 3600),
                sample=check_journal_sample(journal_sample),
                max_event_bytes=check_max_event_bytes(journal_max_event_bytes),
                max_bytes=check_journal_max_bytes(journal_max_bytes),
                server=name,
            ),
            tasks=_task_settings(options, env),
            legacy=LegacySettings(
                session_ttl=options.get("session_ttl", 3600),
                answer_timeout=options.get("legacy_answer_timeout", 300),
                max_pending_calls_per_session=_at_least_one(
                    "max_pending_calls_per_session",
                    options.get("max_pending_calls_per_session", 16),
                ),
                max_pending_calls=_at_least_one(
                    "max_pending_calls", options.get("max_pending_calls", 1000)
                ),
                max_pending_calls_per_principal=_at_least_one(
                    "max_pending_calls_per_principal",
                    options.get("max_pending_calls_per_principal", 100),
                ),
                max_sessions_per_principal=_at_least_one(
                    "max_sessions_per_principal", options.get("max_sessions_per_principal", 100)
                ),
            ),
            serve=ServeSettings(
                drain_timeout=env_number(
                    env, "ENGINE_DRAIN_TIMEOUT", default=25.0, hint="of seconds"
                ),
                gc_freeze=env_flag(env, "ENGINE_GC_FREEZE", default=True),
                access_log=env_flag(env, "ENGINE_ACCESS_LOG", default=False),
                extra_allowed_hosts=tuple(
                    host.strip()
                    for host in env.get("ENGINE_ALLOWED_HOSTS", "").split(",")
                    if host.strip()
                ),
                connections=_connection_limits(options, env),
                trust_forwarded=env_flag(env, "ENGINE_TRUST_FORWARDED", default=False),
            ),
            info=InfoSettings(None, None, None, ()) if info is None else info,
            registry=RegistrySettings(
                tools=_duplicates(options.get("warn_on_duplicate_tools")),
                prompts=_duplicates(options.get("warn_on_duplicate_prompts")),
                resources=_duplicates(options.get("warn_on_duplicate_resources")),
            ),
            tracing=_tracing(options.get("tracer_provider"), env),
            log_level=_log_level(options.get("log_level", "INFO")),
            debug=bool(options.get("debug", False)),
            cache_hints=cache_hints_of(options.get("cache_hints")),
            subscriptions=_subscriptions(options.get("subscriptions")),
            dependencies=list(options.get("dependencies") or ()),
            stamp_results=(
                env_flag(env, "ENGINE_STAMP_RESULTS", default=False)
                if options.get("stamp_results") is None
                else bool(options.get("stamp_results"))
            ),
        )


def _task_settings(options: ServerOptions, env: Environ) -> TaskSettings:
    """The task settings, each checked: a mistake is one error at start. ``task_ttl`` and
    ``task_lease`` also read ``ENGINE_TASK_TTL`` and ``ENGINE_TASK_LEASE``."""
    ttl = options.get("task_ttl")
    lease = options.get("task_lease")
    values = {
        "task_ttl": (
            ttl
            if ttl is not None
            else env_number(env, "ENGINE_TASK_TTL", default=3600.0, hint="of seconds")
        ),
        "task_poll_interval": options.get("task_poll_interval", 0.5),
        "task_lease": (
            lease
            if lease is not None
            else env_number(
                env, "ENGINE_TASK_LEASE", default=DEFAULT_CLAIM_LEASE, hint="of seconds"
            )
        ),
    }
    for option, value in values.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0.001
        ):
            raise ValueError(f"{option} must be a positive number of seconds, got {value!r}")
    running = options.get("max_running_tasks", 100)
    if isinstance(running, bool) or not isinstance(running, int) or running < 1:
        raise ValueError(f"max_running_tasks must be a whole number, at least 1, got {running!r}")
    takeovers: float | None = options.get("max_task_takeovers")
    if takeovers is None:
        takeovers = env_number(
            env,
            "ENGINE_MAX_TASK_TAKEOVERS",
            default=DEFAULT_MAX_TASK_TAKEOVERS,
            hint="a whole number, at least 0",
        )
    if (
        isinstance(takeovers, bool)
        or not isinstance(takeovers, (int, float))
        or not math.isfinite(takeovers)
        or takeovers != int(takeovers)
        or takeovers < 0
    ):
        raise ValueError(
            f"max_task_takeovers must be a whole number, at least 0, got {takeovers!r}"
        )
    result_bytes: float | None = options.get("max_task_result_bytes")
    if result_bytes is None:
        result_bytes = env_number(
            env,
            "ENGINE_MAX_TASK_RESULT_BYTES",
            default=MAX_TASK_RESULT_BYTES,
            hint="of bytes, at least 1024",
        )
    if (
        isinstance(result_bytes, bool)
        or not isinstance(result_bytes, (int, float))
        or not math.isfinite(result_bytes)
        or result_bytes != int(result_bytes)
        or result_bytes < 1024
    ):
        raise ValueError(
            "max_task_result_bytes (ENGINE_MAX_TASK_RESULT_BYTES) must be a whole number of "
            f"bytes, at least 1024, got {result_bytes!r}; the default is {MAX_TASK_RESULT_BYTES}"
        )
    return TaskSettings(
        ttl=float(values["task_ttl"]),
        poll_interval=float(values["task_poll_interval"]),
        lease=float(values["task_lease"]),
        max_running=running,
        max_takeovers=int(takeovers),
        max_per_principal=_at_least_one(
            "max_tasks_per_principal", options.get("max_tasks_per_principal", 1000)
        ),
        max_per_replica=_at_least_one(
            "max_tasks_per_replica", options.get("max_tasks_per_replica", 20_000)
        ),
        max_creations_per_minute=_at_least_one(
            "max_task_creations_per_minute", options.get("max_task_creations_per_minute", 600)
        ),
        max_result_bytes=int(result_bytes),
        max_listen_ids=_at_least_one(
            "max_listen_task_ids", options.get("max_listen_task_ids", 256)
        ),
    )


def _store_from(env: Mapping[str, str]) -> str | None:
    """``ENGINE_STORE``; ``none`` (as ``serve --store none`` takes it) or empty is no store."""
    url = env.get("ENGINE_STORE", "").strip()
    return None if url.lower() in ("", "none") else url


def _clock_skew(options: ServerOptions, env: Environ) -> float:
    """``clock_skew``, or ``ENGINE_CLOCK_SKEW``, or the default; checked."""
    skew: float | None = options.get("clock_skew")
    if skew is None:
        skew = env_number(env, "ENGINE_CLOCK_SKEW", default=DEFAULT_CLOCK_SKEW, hint="of seconds")
    if isinstance(skew, bool) or not isinstance(skew, (int, float)) or not 0 <= skew < math.inf:
        raise ValueError(f"clock_skew must be a number of seconds, at least 0, got {skew!r}")
    return float(skew)


def _connection_limits(options: ServerOptions, env: Environ) -> ConnectionLimits:
    """The connection limits: an option given wins over ``ENGINE_*``, which wins over the
    default; each checked, so a mistake is one error at start rather than a replica that
    refuses every request."""

    def number(option: str, variable: str, default: float, *, whole: bool, low: float) -> float:
        given = options.get(option)
        if given is None:
            given = env_number(env, variable, default=default, hint=f"of at least {low:g}")
        if (
            isinstance(given, bool)
            or not isinstance(given, (int, float))
            or not math.isfinite(given)
            or given < low
            or (whole and given != int(given))
        ):
            kind = "a whole number" if whole else "a number"
            raise ValueError(
                f"{option} ({variable}) must be {kind} of at least {low:g}, got {given!r}; "
                f"leave it unset for the default"
            )
        return given

    connections = None  # derived at start from the file-descriptor limit
    if options.get("max_connections") is not None or env.get("ENGINE_MAX_CONNECTIONS", "").strip():
        connections = int(number("max_connections", "ENGINE_MAX_CONNECTIONS", 0, whole=True, low=1))
    return ConnectionLimits(
        max_head_bytes=int(
            number("max_head_bytes", "ENGINE_MAX_HEAD_BYTES", 64 * 1024, whole=True, low=1024)
        ),
        head_timeout=number("head_timeout", "ENGINE_HEAD_TIMEOUT", 10.0, whole=False, low=0.1),
        body_timeout=number("body_timeout", "ENGINE_BODY_TIMEOUT", 30.0, whole=False, low=0.1),
        min_body_rate=number("min_body_rate", "ENGINE_MIN_BODY_RATE", 1024, whole=False, low=0),
        max_connections=connections,
    )


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _log_level(level: Any) -> str:
    if not isinstance(level, str) or level.upper() not in LOG_LEVELS:
        raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    return level.upper()


def _subscriptions(value: Any) -> bool:
    """``subscriptions=``: ``None`` or ``True`` serves ``subscriptions/listen``, ``False`` does
    not. A bus object is refused: the store carries changes between replicas here."""
    if value is None or isinstance(value, bool):
        return value is not False
    raise TypeError(
        f"subscriptions={value!r}: this server carries change notifications between replicas "
        "through its store, not a subscription bus; pass store='redis://...' (every replica "
        "the same), or subscriptions=False to not serve subscriptions/listen"
    )


def _at_least_one(option: str, value: Any) -> int:
    """A count that must allow at least one: a whole number, 1 or more."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{option} must be a whole number, at least 1, got {value!r}")
    return value


def _key_ring(keys: Iterable[KeySpec] | KeyRing | None, env: Environ) -> KeyRing | None:
    if isinstance(keys, KeyRing):
        return keys
    if keys is not None:
        return KeyRing(list(keys))
    text = env.get("ENGINE_KEYS")
    return KeyRing.from_env(text) if text else None


def check_journal_sample(sample: Any) -> float:
    """The share of calls to journal, checked: a number from 0 (none) to 1 (every call)."""
    if (
        isinstance(sample, bool)
        or not isinstance(sample, (int, float))
        or not math.isfinite(sample)
        or not 0 <= sample <= 1
    ):
        raise ValueError(
            "journal_sample (ENGINE_JOURNAL_SAMPLE) must be a number from 0 (journal no call) "
            f"to 1 (every call), got {sample!r}; 0.1 journals one call in ten, each with all its "
            "rounds"
        )
    return float(sample)


def check_max_event_bytes(size: Any) -> int:
    """The cap on a journal event's payload, checked: a whole number of bytes, at least 1 KiB."""
    whole = (
        not isinstance(size, bool)
        and isinstance(size, (int, float))
        and math.isfinite(size)
        and size == int(size)
    )
    if not whole or size < 1024:
        raise ValueError(
            "journal_max_event_bytes (ENGINE_JOURNAL_MAX_EVENT_BYTES) must be a whole number of "
            f"bytes, at least 1024, got {size!r}; the default is {JOURNAL_MAX_EVENT_BYTES}"
        )
    return int(size)


def check_journal_max_bytes(size: Any) -> int:
    """The cap on the journal's size, checked: 0 (no cap) or a whole number of bytes of at
    least 64 KiB (a cap smaller than a few calls would purge each call as it is written)."""
    whole = (
        not isinstance(size, bool)
        and isinstance(size, (int, float))
        and math.isfinite(size)
        and size == int(size)
    )
    if not whole or (size != 0 and size < 64 * 1024):
        raise ValueError(
            "journal_max_bytes (ENGINE_JOURNAL_MAX_BYTES) must be 0 (no cap) or a whole number "
            f"of bytes, at least 65536, got {size!r}; the default is {JOURNAL_MAX_BYTES}"
        )
    return int(size)


def env_flag(env: Environ, name: str, *, default: bool) -> bool:
    """A yes/no setting: ``1/true/yes/on`` or ``0/false/no/off`` (any case); ``default`` when
    unset or spelled otherwise."""
    value = env.get(name, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    return default


def env_number(env: Environ, name: str, *, default: float, hint: str) -> float:
    """A number; ``default`` when unset or empty. ``hint`` says which numbers it takes."""
    value = env.get(name, "").strip()
    if not value:
        return default
    try:
        return float(value)
    except ValueError:
        raise ValueError(
            f"{name} must be a number {hint}, got {value!r}; unset it for {default:g}"
        ) from None
