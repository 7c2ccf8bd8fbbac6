"""Typed, grouped settings: what ``MCPServer(...)`` is given, completed from the environment.

Each setting is declared once, below: its default, bounds and docstring, and as its alias the
keyword ``MCPServer(...)`` takes, whose ``ENGINE_`` variable is that keyword in capitals
(``engine._internal.setting_groups`` says how they are read and checked). The environment is read
here, once, when a server is made: the rest of the engine receives these frozen values and never
looks at ``os.environ``. An argument given in code wins over the environment, which wins over the
default.
"""

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict, Unpack

from pydantic import AfterValidator, BeforeValidator, Field, PlainValidator, model_validator

from engine._internal.setting_groups import (
    CODE_ONLY,
    ENVIRONMENT_ONLY,
    Allowed,
    ChangeableGroup,
    SettingGroup,
    Unit,
    keyword_of,
    settings_of,
)
from engine._internal.tracing import TracingMode
from engine.auth.settings import AuthSettings
from engine.caching import CacheHint, cache_hints_of
from engine.state.claims import CLOCK_SKEW
from engine.state.seal import KeyRing, KeySpec
from engine.types import Icon
from stores.base import Store

Environ = Mapping[str, str]

Seconds = Annotated[float, Unit("seconds")]
Bytes = Annotated[int, Unit("bytes")]

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


class ServerOptions(TypedDict, total=False):
    """The settings keywords of ``MCPServer(...)``, for type checkers: what the groups above
    declare (a test keeps the two the same), as code may give them."""

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


class TokenSettings(SettingGroup):
    """How a requestState is bound, how long it lives and how large it may be."""

    audience: str = Field(alias="audience", min_length=1)
    """What tokens are bound to: the server's name unless given; one per service."""
    state_ttl: int = Field(600, alias="state_ttl", ge=1)
    """Seconds a requestState stays valid (and its rounds are kept in the store)."""
    max_token_chars: int = Field(64 * 1024, alias="max_token_chars", ge=1)
    """Longer requestStates are refused unopened."""
    max_inline_state: Bytes = Field(None, alias="max_inline_state", ge=0)  # type: ignore[assignment]
    """Without a store, the largest state carried in a token; by default, what keeps every
    token under ``max_token_chars``."""
    trust_unsolicited_answers: bool = Field(False, alias="trust_unsolicited_answers")
    """Take answers to questions that were not asked in that form (off: such answers are ignored
    and the question asked again)."""
    clock_skew: Seconds = Field(DEFAULT_CLOCK_SKEW, alias="clock_skew", ge=0)
    """Seconds a token may seem minted in the future, or past its expiry, by this replica's
    clock: other replicas' clocks may be off by that much."""
    max_input_responses: int = Field(64, alias="max_input_responses", ge=1)
    """Answers one request may carry (keys of ``inputResponses``); more are refused unread."""

    @model_validator(mode="before")
    @classmethod
    def _inline_state_fits_a_token(cls, data: Any) -> Any:
        """A sealed token is about 4/3 of the state plus ~100 characters of claims: the default
        keeps every token this server mints under the cap it enforces."""
        if isinstance(data, dict) and data.get("max_inline_state") is None:
            try:  # the environment's text too; a wrong one is refused as max_token_chars
                chars = int(data.get("max_token_chars", 64 * 1024))
            except (TypeError, ValueError):
                chars = 0
            return {**data, "max_inline_state": max(0, chars * 3 // 4 - 256)}
        return data


def _store_given(value: Any) -> str | Store | None:
    """A store URL or object; ``none`` (as ``serve --store none`` takes it) or blank is none."""
    if isinstance(value, str):
        url = value.strip()
        return None if url.lower() in ("", "none") else url
    return value  # type: ignore[no-any-return]


class StoreSettings(SettingGroup):
    """Which store holds what outlives a round, and how rounds use it."""

    store: Annotated[
        str | Store | None, PlainValidator(_store_given), Allowed("a store URL, or none")
    ] = Field(None, alias="store")
    """A URL (``sqlite:///calls.db``, ``redis://...``, ``memory://``) or a ``stores.Store``;
    none by default."""
    spill_threshold: Bytes = Field(4 * 1024, alias="spill_threshold", ge=0)
    """State larger than this goes to the store by reference."""
    duplicate_wait: Seconds = Field(2.0, alias="duplicate_wait", ge=0)
    """Seconds a concurrent duplicate of a round waits for the first one."""
    claim_lease: Seconds = Field(DEFAULT_CLAIM_LEASE, alias="claim_lease", ge=0.001)
    """Seconds a round's claim lives unless renewed by the replica running it: how long the
    round of a replica that died stays taken."""


def _journal_cap(size: int) -> int:
    if size != 0 and size < 64 * 1024:
        raise ValueError("below 65536")
    return size


class JournalSettings(SettingGroup):
    """What the journal keeps of each round, for how long, and of which share of calls."""

    arguments: bool = Field(True, alias="journal_arguments")
    """Journal each call's arguments, sealed like the rest of the journal, so a call replays as
    recorded; an argument annotated ``Annotated[str, Redacted()]`` is never journaled."""
    ttl: Seconds = Field(24 * 3600.0, alias="journal_ttl", ge=0.001)
    """Seconds the journal keeps a call."""
    sample: float = Field(1.0, alias="journal_sample", ge=0, le=1)
    """The share of calls journaled, each with all its rounds: 0 none, 0.1 one in ten, 1 all."""
    max_event_bytes: Bytes = Field(
        JOURNAL_MAX_EVENT_BYTES, alias="journal_max_event_bytes", ge=1024
    )
    """A round's payload (arguments, questions, answers, checkpoints, response) larger than
    this is journaled without its largest parts, marked as truncated."""
    max_bytes: Annotated[
        int,
        AfterValidator(_journal_cap),
        Allowed("0 (no cap) or a whole number of bytes, at least 65536"),
    ] = Field(JOURNAL_MAX_BYTES, alias="journal_max_bytes")
    """Past this many bytes in the store, the journal's oldest calls are purged (0: no cap;
    see `stores.SQLiteStore.trim_journal` for what the SQLite store counts)."""
    server: str = ""
    """The server's name, journaled in the clear with each round: one store often keeps the
    calls of several servers, and ``python -m engine calls`` tells them apart by it."""


class TaskSettings(SettingGroup):
    """How long a task is kept, how often clients are told to poll it, and how its body runs."""

    ttl: Seconds = Field(3600.0, alias="task_ttl", ge=0.001)
    """Seconds a task is kept from its creation, whatever its status."""
    poll_interval: Seconds = Field(0.5, alias="task_poll_interval", ge=0.001)
    """Seconds between polls clients are asked to keep (``pollIntervalMs``)."""
    lease: Seconds = Field(DEFAULT_CLAIM_LEASE, alias="task_lease", ge=0.001)
    """Seconds a running body's hold on its task lives unless renewed: how long the task of a
    replica that died waits before another replica takes it over."""
    max_running: int = Field(100, alias="max_running_tasks", ge=1)
    """Bodies of tasks this replica runs at once; the others wait, their leases renewed."""
    max_takeovers: int = Field(DEFAULT_MAX_TASK_TAKEOVERS, alias="max_task_takeovers", ge=0)
    """Times a task may be taken over from a run whose hold lapsed; at the next, it fails."""
    max_per_principal: int = Field(1000, alias="max_tasks_per_principal", ge=1)
    """Tasks one principal may have kept (made on this replica, not yet past their TTL)."""
    max_per_replica: int = Field(20_000, alias="max_tasks_per_replica", ge=1)
    """Tasks of all principals made on this replica and kept."""
    max_creations_per_minute: int = Field(600, alias="max_task_creations_per_minute", ge=1)
    """Tasks one principal may make on this replica in any minute."""
    max_result_bytes: Bytes = Field(MAX_TASK_RESULT_BYTES, alias="max_task_result_bytes", ge=1024)
    """A task's result, as JSON, at most: a larger one fails the task and is not kept."""
    max_listen_ids: int = Field(256, alias="max_listen_task_ids", ge=1)
    """Tasks one ``subscriptions/listen`` may name; more are refused unread."""


class LegacySettings(SettingGroup):
    """2025-11-25 sessions and questions asked over the back-channel."""

    session_ttl: Seconds = Field(3600.0, alias="session_ttl", ge=0.001)
    """Seconds an idle session lives."""
    answer_timeout: Seconds = Field(300.0, alias="legacy_answer_timeout", ge=0.001)
    """Seconds a question asked on the back-channel waits."""
    max_pending_calls_per_session: int = Field(16, alias="max_pending_calls_per_session", ge=1)
    """Calls of one session that may wait for an answer at once; more are refused."""
    max_pending_calls: int = Field(1000, alias="max_pending_calls", ge=1)
    """Calls of all sessions that may wait for an answer at once on this replica."""
    max_pending_calls_per_principal: int = Field(100, alias="max_pending_calls_per_principal", ge=1)
    """Calls of one principal's sessions that may wait for an answer at once on this replica."""
    max_sessions_per_principal: int = Field(100, alias="max_sessions_per_principal", ge=1)
    """Sessions one principal may have open on this replica (deleted ones, and those unused
    here for ``session_ttl``, do not count)."""


class RegistrySettings(ChangeableGroup):
    """Whether a second function registered under a taken name (or URI) is dropped with a
    warning, as the official server does, or silently; the first is kept either way. Code may
    change them once the server is made (``mcp.settings.warn_on_duplicate_tools = False``): the
    registry reads them at each registration."""

    changeable = frozenset({"tools", "prompts", "resources"})

    tools: bool = Field(True, alias="warn_on_duplicate_tools")
    """Warn when a tool's name is taken."""
    prompts: bool = Field(True, alias="warn_on_duplicate_prompts")
    """Warn when a prompt's name is taken."""
    resources: bool = Field(True, alias="warn_on_duplicate_resources")
    """Warn when a resource's URI is taken."""


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
    ) -> "InfoSettings":
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


class ConnectionLimits(SettingGroup):
    """What one HTTP connection of ``mcp.run()`` may make a replica hold, and for how long."""

    max_head_bytes: Bytes = Field(64 * 1024, alias="max_head_bytes", ge=1024)
    """The request line and headers of one request; longer ones get 431."""
    head_timeout: Seconds = Field(10.0, alias="head_timeout", ge=0.1)
    """Seconds a head may take: from the connection, or from the first byte of a later head."""
    body_timeout: Seconds = Field(30.0, alias="body_timeout", ge=0.1)
    """Seconds a body may go without a byte; also the grace before `min_body_rate` counts."""
    min_body_rate: float = Field(1024.0, alias="min_body_rate", ge=0)
    """Bytes per second a body must average once `body_timeout` has passed (0: no minimum)."""
    max_connections: int | None = Field(None, alias="max_connections", ge=1)
    """Open connections at most; beyond, the oldest serving no request is closed, or the new one
    gets 503. By default, derived from the file-descriptor limit at start (at most 10,000)."""


def _host_names(value: Any) -> Any:
    """``ENGINE_ALLOWED_HOSTS``: comma-separated ``Host`` names."""
    if isinstance(value, str):
        return tuple(host.strip() for host in value.split(",") if host.strip())
    return value


class ServeSettings(SettingGroup):
    """How ``mcp.run()`` serves over HTTP: from the environment only, but for the connection
    limits, which options give too."""

    drain_timeout: Annotated[Seconds, ENVIRONMENT_ONLY] = Field(25.0, alias="drain_timeout", ge=0)
    """Seconds calls in flight are given to finish once a replica is told to stop."""
    gc_freeze: Annotated[bool, ENVIRONMENT_ONLY] = Field(True, alias="gc_freeze")
    """Move what is alive once serving starts out of the garbage collector's sight."""
    access_log: Annotated[bool, ENVIRONMENT_ONLY] = Field(False, alias="access_log")
    """Log uvicorn's line per request."""
    extra_allowed_hosts: Annotated[
        tuple[str, ...],
        ENVIRONMENT_ONLY,
        BeforeValidator(_host_names),
        Allowed("host names, comma-separated"),
    ] = Field((), alias="allowed_hosts")
    """``Host`` names accepted besides loopback names, comma-separated."""
    trust_forwarded: Annotated[bool, ENVIRONMENT_ONLY] = Field(False, alias="trust_forwarded")
    """A proxy in front sets ``X-Forwarded-Proto`` and ``X-Forwarded-Host``, so the protected
    resource metadata URL may be built from them."""
    connections: ConnectionLimits


def _tracing_mode(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


class TracingSettings(SettingGroup):
    """Whether spans are recorded (see ``engine._internal.tracing``), and by which provider."""

    mode: Annotated[TracingMode, ENVIRONMENT_ONLY, BeforeValidator(_tracing_mode)] = Field(
        "auto", alias="tracing"
    )
    """``auto``: once a provider is given or configured; ``on``: through the global provider
    whatever it is; ``off``: never."""
    provider: Annotated[Any, CODE_ONLY] = Field(None, alias="tracer_provider")
    """An OpenTelemetry ``TracerProvider`` this server records its spans with; ``None``: the one
    configured in the process, if any."""


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def _key_ring(keys: Any) -> KeyRing | None:
    """Keys as given: a ring, a list of secrets (or ``(id, secret)`` pairs), or the text of
    ``ENGINE_KEYS`` (comma-separated secrets, each optionally ``id=secret``)."""
    if keys is None or isinstance(keys, KeyRing):
        return keys
    if isinstance(keys, str):
        return KeyRing.from_env(keys)
    if not isinstance(keys, Iterable):
        raise TypeError(
            f"keys must be a list of secrets (or of (id, secret) pairs), got "
            f"{type(keys).__name__}: generate a secret with `python -m engine keygen`"
        )
    return KeyRing(list(keys))


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _subscriptions(value: Any) -> bool:
    """``None`` or ``True`` serves ``subscriptions/listen``, ``False`` does not. A bus object is
    refused: the store carries changes between replicas here."""
    if value is None or isinstance(value, bool):
        return value is not False
    raise TypeError(
        f"subscriptions={value!r}: this server carries change notifications between replicas "
        "through its store, not a subscription bus; pass store='redis://...' (every replica "
        "the same), or subscriptions=False to not serve subscriptions/listen"
    )


def _listed(value: Any) -> list[str]:
    """The package names as given; one name alone is refused rather than read letter by letter."""
    if isinstance(value, str):
        raise ValueError(f"dependencies takes a list of package names, such as [{value!r}]")
    return list(value or ())


class Settings(ChangeableGroup):
    """Everything a server is configured with, grouped by the part of the engine that reads it.

    It is also the official server's ``mcp.settings``: its fields ``debug``, ``log_level``,
    ``dependencies``, ``lifespan`` and ``auth``, and the ``warn_on_duplicate_*`` switches (kept
    in ``registry``), read the same. Code may change those the official server lets it change
    and reads later (``debug`` when the HTTP app is made, ``log_level`` when ``run`` starts
    uvicorn, the switches at each registration); ``lifespan``, read once when the server is
    made, may be set with no effect, as there. ``auth`` and the rest are fixed.
    """

    changeable = frozenset({"debug", "log_level", "dependencies", "lifespan"})
    changeable_properties = frozenset(
        {"warn_on_duplicate_tools", "warn_on_duplicate_prompts", "warn_on_duplicate_resources"}
    )

    keys: Annotated[KeyRing | None, PlainValidator(_key_ring)] = Field(None, alias="keys")
    """The requestState secrets every replica shares; ``None`` when none was given anywhere:
    the runtime makes an ephemeral one, and warns."""
    replica_id: str = Field(
        default_factory=lambda: f"pid-{os.getpid()}", alias="replica_id", min_length=1
    )
    """This process's name in the ``x-engine-replica`` header and logs."""
    list_ttl_ms: int = Field(0, alias="list_ttl_ms", ge=0)
    """The caching hint of listings, in milliseconds."""
    stamp_results: bool = Field(False, alias="stamp_results")
    """Also name the replica and the call in each 2026-07-28 result's ``_meta``
    (``engine/replica``, ``engine/call``); off, results carry what the official server's do."""
    log_level: Annotated[LogLevel, CODE_ONLY, BeforeValidator(_upper)] = Field(
        "INFO", alias="log_level"
    )
    """What Python logging (and uvicorn, under ``mcp.run``) is set to, unless the program
    configured logging itself."""
    debug: Annotated[bool, CODE_ONLY] = Field(False, alias="debug")
    """Starlette's debug pages on the HTTP app's other routes (not on the MCP endpoint)."""
    cache_hints: Annotated[Mapping[str, CacheHint], CODE_ONLY, PlainValidator(cache_hints_of)] = (
        Field(default_factory=dict, alias="cache_hints")
    )
    """Caching hints of the cacheable methods that were given one."""
    subscriptions: Annotated[bool, CODE_ONLY, PlainValidator(_subscriptions)] = Field(
        True, alias="subscriptions"
    )
    """Whether ``subscriptions/listen`` is served."""
    dependencies: Annotated[list[str], CODE_ONLY, PlainValidator(_listed)] = Field(
        default_factory=list, alias="dependencies"
    )
    """The packages the server needs, as given; metadata for tools that install servers."""
    lifespan: Any = None
    """``MCPServer(lifespan=...)``, as given: read once, when the server is made."""
    auth: AuthSettings | None = None
    """``MCPServer(auth=...)``, as the server uses it: fixed, as the token verifier is."""
    tokens: TokenSettings
    store: StoreSettings
    journal: JournalSettings
    tasks: TaskSettings
    legacy: LegacySettings
    serve: ServeSettings
    info: InfoSettings
    registry: RegistrySettings
    tracing: TracingSettings

    @classmethod
    def build(
        cls,
        *,
        name: str,
        environ: Environ | None = None,
        info: InfoSettings | None = None,
        lifespan: Any = None,
        auth: AuthSettings | None = None,
        **options: Unpack[ServerOptions],
    ) -> "Settings":
        """The settings of a server named ``name`` (see ``MCPServer`` for each option): each
        option given (and not ``None``) wins over its ``ENGINE_`` variable in ``environ``
        (default: ``os.environ``), which wins over its default."""
        unknown = sorted(set(options) - SERVER_OPTIONS)
        if unknown:
            raise TypeError(f"unknown server options: {', '.join(unknown)}")
        given: Mapping[str, Any] = options
        env = environ
        serve = ServeSettings.of(given, env, connections=ConnectionLimits.of(given, env))
        if auth is not None and serve.trust_forwarded:  # metadata URLs from the forwarded host
            auth = auth.model_copy(update={"trust_forwarded": True})
        return cls.of(
            given,
            env,
            tokens=TokenSettings.of(given, env, audience=name),
            store=StoreSettings.of(given, env),
            journal=JournalSettings.of(given, env, server=name),
            tasks=TaskSettings.of(given, env),
            legacy=LegacySettings.of(given, env),
            serve=serve,
            info=InfoSettings(None, None, None, ()) if info is None else info,
            lifespan=lifespan,
            auth=auth,
            registry=RegistrySettings.of(given, env),
            tracing=TracingSettings.of(given, env),
        )

    @property
    def warn_on_duplicate_tools(self) -> bool:
        """Warn when a tool's name is taken (``registry.tools``)."""
        return self.registry.tools

    @warn_on_duplicate_tools.setter
    def warn_on_duplicate_tools(self, warn: bool) -> None:
        self.registry.tools = warn

    @property
    def warn_on_duplicate_prompts(self) -> bool:
        """Warn when a prompt's name is taken (``registry.prompts``)."""
        return self.registry.prompts

    @warn_on_duplicate_prompts.setter
    def warn_on_duplicate_prompts(self, warn: bool) -> None:
        self.registry.prompts = warn

    @property
    def warn_on_duplicate_resources(self) -> bool:
        """Warn when a resource's URI is taken (``registry.resources``)."""
        return self.registry.resources

    @warn_on_duplicate_resources.setter
    def warn_on_duplicate_resources(self, warn: bool) -> None:
        self.registry.resources = warn


SETTING_GROUPS: tuple[type[SettingGroup], ...] = (
    Settings,
    TokenSettings,
    StoreSettings,
    JournalSettings,
    TaskSettings,
    LegacySettings,
    RegistrySettings,
    ConnectionLimits,
    ServeSettings,
    TracingSettings,
)
"""Every group, in the order the settings are listed (docs/settings.md)."""

SERVER_OPTIONS = frozenset(
    keyword
    for group in SETTING_GROUPS
    for keyword, field in settings_of(group)
    if keyword_of(field) is not None
)
"""The keywords ``MCPServer(...)`` takes besides its name, instructions, version, principal,
lifespan and the objects after it: those the groups declare."""
