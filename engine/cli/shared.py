"""What the commands share: the error a user can fix, the server file, the store, JSON options."""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import logging
import os
import re
import secrets
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.app import MCPServer

log = logging.getLogger("engine.cli")


class CLIError(Exception):
    """A problem the user can fix; printed as ``error: ...`` with exit status ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


EXIT_USAGE = 2
"""A mistake in what was given (a flag, a file, a URL): retrying will not help."""
EXIT_TEMPFAIL = 75
"""``EX_TEMPFAIL``: the store cannot be reached now; a supervisor may start the process again."""
EXIT_CONFIG = 78
"""``EX_CONFIG``: the store answers but is set up so that it cannot keep its promises (a Redis
that evicts keys); starting again will not help until it is changed."""


# --- the server file --------------------------------------------------------------------------

TRACEBACK_ENV = "ENGINE_TRACEBACK"
"""Set to 1 (or pass ``--traceback``) to see the traceback behind ``importing ... failed``."""


def tracebacks_wanted(flag: bool = False) -> bool:
    return flag or os.environ.get(TRACEBACK_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def split_target(target: str) -> tuple[Path, str, str]:
    """``FILE.py[:ATTR]`` → the file's resolved path, the path as given, and ATTR (or "");
    a file that is not there is a one-line :class:`CLIError`."""
    path_text, _, attr = target.partition(":")
    if len(path_text) == 1 and attr and "\\" in attr:  # a Windows drive letter
        path_text, _, attr = target.rpartition(":")
    path = Path(path_text).resolve()
    if not path.is_file():
        kind = "a directory" if path.is_dir() else "not found"
        raise CLIError(f"{path_text} is not a file ({kind}); give FILE.py or FILE.py:ATTR")
    return path, path_text, attr


def load_server(target: str, *, traceback: bool = False) -> MCPServer:
    """``FILE.py[:ATTR]`` → the MCPServer it defines (``mcp`` or the only one).

    Every way this goes wrong is a one-line :class:`CLIError`: no such file, an exception while
    importing it (its traceback printed first only when asked for), no such attribute, or an
    attribute that is something else. Log records made while importing (the warning about
    missing keys, say) are shown only once the server is found, so a failure is one line.
    """
    path, path_text, attr = split_target(target)
    with held_logs() as held:
        module = _import_file(path, path_text, traceback)
        server = _find_server(module, path, path_text, attr, traceback)
        held.keep()
    return server


def _import_file(path: Path, shown: str, traceback: bool) -> Any:
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise CLIError(f"cannot import {shown}: give a Python file (FILE.py)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code: anything may come out of it
        sys.modules.pop(path.stem, None)
        raise CLIError(_failure(f"importing {shown}", exc, path, traceback)) from None
    return module


def _failure(doing: str, exc: BaseException, path: Path, traceback: bool) -> str:
    """``importing server.py failed: ValueError: ... (server.py line 5; ...)``, one line."""
    if tracebacks_wanted(traceback):
        import traceback as tb

        tb.print_exception(exc)
    line = None
    for filename, number in _frames(exc):
        with contextlib.suppress(OSError, ValueError):
            if Path(filename).resolve() == path:
                line = number
    notes = [f"{path.name} line {line}"] if line is not None else []
    if not tracebacks_wanted(traceback):
        notes.append(f"--traceback or {TRACEBACK_ENV}=1 shows the traceback")
    text = " ".join(str(exc).split()) or "(no message)"
    return f"{doing} failed: {type(exc).__name__}: {text} ({'; '.join(notes)})"


def _frames(exc: BaseException) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    tb = exc.__traceback__
    while tb is not None:
        found.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        found.append((exc.filename, exc.lineno))
    return found


def _servers_in(module: Any) -> list[str]:
    return [name for name, value in vars(module).items() if isinstance(value, MCPServer)]


def _official_servers_in(module: Any) -> list[str]:
    """Names of servers made with the official ``mcp`` SDK's class: a file not yet ported."""
    return [
        name
        for name, value in vars(module).items()
        if type(value).__name__ == "MCPServer" and type(value).__module__.startswith("mcp.")
    ]


def _named(module: Any) -> str:
    names = _servers_in(module)
    if not names:
        return "it defines no MCPServer object"
    return "it defines MCPServer objects named: " + ", ".join(names)


def _not_ported(shown: str, official: list[str]) -> CLIError:
    return CLIError(
        f"{shown}:{official[0]} is an MCPServer of the official mcp SDK; import it from this "
        "package instead (from engine import MCPServer) and serve it again (docs/porting.md)"
    )


def _find_server(module: Any, path: Path, shown: str, attr: str, traceback: bool) -> MCPServer:
    if not attr:
        servers = _servers_in(module)
        if "mcp" in servers:
            others = [name for name in servers if name != "mcp"]
            if others:
                log.warning(
                    "serving %s:mcp; it also defines %s (serve one as %s:%s)",
                    shown,
                    ", ".join(others),
                    shown,
                    others[0],
                )
            served: MCPServer = module.mcp
            return served
        if len(servers) == 1:
            only: MCPServer = getattr(module, servers[0])
            return only
        if not servers and (official := _official_servers_in(module)):
            raise _not_ported(shown, official)
        if not servers:
            raise CLIError(
                f'{shown} defines no MCPServer object; create one (mcp = MCPServer("name")) '
                "or name a function returning one as FILE.py:ATTR"
            )
        raise CLIError(
            f"{shown} defines {len(servers)} MCPServer objects ({', '.join(servers)}); name "
            f"one as {shown}:{servers[0]}"
        )
    found: Any = module
    walked: list[str] = []
    for part in attr.split("."):
        if not hasattr(found, part):
            owner = f"{shown}:{'.'.join(walked)}" if walked else shown
            raise CLIError(f"{owner} has no attribute {part!r}; {_named(module)}")
        found = getattr(found, part)
        walked.append(part)
    if isinstance(found, MCPServer):
        return found
    where = f"{shown}:{attr}"
    if attr in _official_servers_in(module):
        raise _not_ported(shown, [attr])
    if _is_factory(found):
        try:
            made = found()
        except Exception as exc:
            raise CLIError(_failure(f"calling {where}()", exc, path, traceback)) from None
        if isinstance(made, MCPServer):
            return made
        raise CLIError(f"{where}() returned {_what(made)}, not an MCPServer; {_named(module)}")
    servers = _servers_in(module)
    point = f"point at the MCPServer ({shown}:{servers[0]})" if servers else _named(module)
    if _is_asgi_app(found):
        raise CLIError(
            f"{where} is {_what(found)}, not an MCPServer; {point} or serve the "
            f"{type(found).__name__} app with uvicorn"
        )
    raise CLIError(f"{where} is {_what(found)}, not an MCPServer; {point}")


def _is_factory(value: Any) -> bool:
    """A function (or method) callable with no arguments: ``FILE.py:build`` may name one."""
    if not (inspect.isfunction(value) or inspect.ismethod(value)):
        return False
    try:
        inspect.signature(value).bind()
    except (TypeError, ValueError):
        return False
    return True


def _is_asgi_app(value: Any) -> bool:
    framework = type(value).__module__.partition(".")[0] in ("starlette", "fastapi")
    return framework or (callable(value) and hasattr(value, "router"))


def _what(value: Any) -> str:
    kind = type(value)
    if value is None:
        return "None"
    if kind.__module__.partition(".")[0] in ("starlette", "fastapi"):
        return f"a {kind.__name__} application"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    if inspect.isfunction(value) or inspect.ismethod(value):
        return f"a function that takes arguments ({value.__name__})"
    article = "an" if kind.__name__[:1].lower() in "aeiou" else "a"
    return f"{article} {kind.__name__}"


class _Held(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.kept = False

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def keep(self) -> None:  # not ``release``: a Handler's lock already has that name
        self.kept = True


@contextlib.contextmanager
def held_logs() -> Iterator[_Held]:
    """Hold the root logger's records; replay them if ``keep()`` was called, else drop them."""
    root = logging.getLogger()
    held = _Held()
    handlers = root.handlers[:]
    root.handlers = [held]
    try:
        yield held
    finally:
        root.handlers = handlers
        if held.kept:
            for record in held.records:
                root.handle(record)


# --- keys -------------------------------------------------------------------------------------


def check_keys(text: str, source: str) -> None:
    """``--keys`` / ``ENGINE_KEYS``: ``SECRET[,SECRET2]``, each optionally ``id=SECRET``, each
    secret at least 32 bytes. CLIError naming the entry at fault (never the secret itself)."""
    from engine.state.seal import MIN_SECRET_BYTES, KeyRing

    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        raise CLIError(
            f"{source} is empty; give SECRET[,SECRET2] (`python -m engine keygen` makes one)"
        )
    try:
        KeyRing.from_env(text)
    except ValueError as exc:
        refused = exc
    else:
        return
    for number, part in enumerate(parts, 1):
        if not part or len(part.encode()) >= MIN_SECRET_BYTES:
            continue  # empty entries are skipped; a long one is a secret, '=' or not
        label, sep, secret = part.partition("=")
        if sep and label and not secret:
            raise CLIError(f"{source}: key {label!r} has nothing after '='; write ID=SECRET")
        which = f"key {label!r}" if sep and label else f"entry {number}"
        size = len((secret if sep and label else part).encode())
        raise CLIError(
            f"{source}: {which} has a secret of {size} bytes; a secret needs at least "
            f"{MIN_SECRET_BYTES}: generate one with `python -m engine keygen`"
        )
    raise CLIError(f"{source}: {refused}")


KEYS_VISIBLE = (
    "warning: --keys puts the secrets in the process list, where other users of this machine "
    "can read them; pass --keys-file PATH or set ENGINE_KEYS instead"
)


def given_keys(keys: str | None, keys_file: str | None) -> str | None:
    """The secrets from ``--keys``, ``--keys-file`` or ``ENGINE_KEYS`` (in that order), checked;
    None when none is given. ``--keys`` warns, once, that the process list shows it."""
    if keys and keys_file:
        raise CLIError("give --keys or --keys-file, not both (--keys-file keeps them out of ps)")
    if keys:
        check_keys(keys, "--keys")
        print(KEYS_VISIBLE, file=sys.stderr)
        return keys
    if keys_file:
        text = read_keys_file(keys_file)
        check_keys(text, f"--keys-file {keys_file}")
        return text
    env = os.environ.get("ENGINE_KEYS")
    if env:
        check_keys(env, "ENGINE_KEYS")
        return env
    return None


KEYS_FILE = "keys"


@dataclass(frozen=True)
class LocalKeys:
    """The secret kept in this user's data directory, for a server given no keys: tokens it
    seals outlive a restart, and the journal commands open its journal without being told."""

    secret: str
    path: Path
    created: bool

    def announce(self) -> None:
        made = "generated and kept in" if self.created else "from"
        log.info(
            "requestState keys: %s %s (this user's; a fleet gives every replica the same keys "
            "with --keys-file PATH or ENGINE_KEYS)",
            made,
            self.path,
        )


def local_keys(*, create: bool) -> LocalKeys | None:
    """This user's kept secret; with ``create``, one is generated (0600) when there is none.
    None when there is none and it cannot (or need not) be made: the server then runs on an
    ephemeral key, with its warning."""
    try:
        path = user_data_dir() / KEYS_FILE
    except ValueError:
        return None
    with contextlib.suppress(OSError, UnicodeDecodeError):
        secret = path.read_text(encoding="utf-8").strip()
        if secret:
            return LocalKeys(secret, path, created=False)
    if not create:
        return None
    from stores.sqlite import create_private_directories

    draft = path.with_name(f".{KEYS_FILE}-{os.getpid()}")
    try:
        create_private_directories(path)
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(secrets.token_hex(32) + "\n")
        # Linked into place, never overwritten: of two servers starting at once, one secret wins
        # and both read it.
        try:
            os.link(draft, path)
            created = True
        except FileExistsError:
            created = False
        secret = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        log.warning("cannot keep requestState keys in %s (%s)", path, exc.strerror or exc)
        return None
    finally:
        with contextlib.suppress(OSError):
            os.remove(draft)
    return LocalKeys(secret, path, created) if secret else None


def read_keys_file(path: str) -> str:
    """``--keys-file``: what ``ENGINE_KEYS`` holds, the secrets separated by commas or newlines;
    whitespace around them and blank lines are ignored. Comma-separated, as ``ENGINE_KEYS``."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CLIError(
            f"--keys-file {path}: cannot read it ({reason}); give a file this user can read, "
            "holding SECRET[,SECRET2]"
        ) from None
    parts = [part.strip() for line in text.splitlines() for part in line.split(",")]
    if not any(parts):
        raise CLIError(
            f"--keys-file {path} is empty; write SECRET[,SECRET2] in it "
            "(`python -m engine keygen` makes one)"
        )
    return ",".join(part for part in parts if part)


# --- the store --------------------------------------------------------------------------------

APP_NAME = "mcp-engine"
STORE_FILE = "calls.sqlite3"


def user_data_dir() -> Path:
    """This user's application data directory, as platformdirs names it: ``$XDG_DATA_HOME``
    (when absolute) or ``~/.local/share`` on Linux and other Unixes, ``~/Library/Application
    Support`` on macOS, ``%LOCALAPPDATA%`` on Windows; then ``mcp-engine``. Newer platformdirs
    follow ``$XDG_DATA_HOME`` on macOS too: there a directory already in Application Support
    (made by an engine that put it only there) is still the one used. ValueError when there is
    no absolute home to put it under."""
    import platformdirs

    try:
        found = platformdirs.user_data_path(APP_NAME, appauthor=False)
    except RuntimeError:  # platformdirs' word for a home it cannot resolve
        found = Path()
    if sys.platform == "darwin":
        kept = Path(os.path.expanduser("~/Library/Application Support")) / APP_NAME
        if kept != found and kept.is_absolute() and kept.is_dir() and not found.is_dir():
            found = kept
    if not found.is_absolute():
        raise ValueError("there is no home directory to keep it in")
    return found


def sqlite_url(path: Path) -> str:
    """``sqlite:///`` then the path: four slashes in all for an absolute POSIX path."""
    return "sqlite:///" + path.as_posix()


def default_store() -> str:
    """The default store's URL, as the journal commands read it (nothing is created)."""
    try:
        return sqlite_url(user_data_dir() / STORE_FILE)
    except ValueError:
        return sqlite_url(Path.home() / STORE_FILE)


DEFAULT_STORE_SHOWN = f"sqlite:///<your data directory>/{APP_NAME}/{STORE_FILE}"
"""How help texts name the default store (``serve`` prints the real path when it starts)."""


@dataclass(frozen=True)
class StoreChoice:
    """The store ``serve`` runs with, and the line to log once the server has loaded."""

    url: str | None
    note: str
    level: int = logging.INFO
    source: str = "the default store"

    def announce(self) -> None:
        log.log(self.level, "%s", self.note)


def serving_environment(args: Any) -> tuple[StoreChoice, LocalKeys | None]:
    """The keys (``--keys``, ``--keys-file``, else the local ones, made when missing), the
    replica id and the store a served file runs with, put in the environment where the server,
    and any process it starts, reads them. Returns the store and the local keys (``None`` when
    keys were given), whose lines are logged once the server has loaded."""
    keys = given_keys(args.keys, args.keys_file)
    kept = local_keys(create=True) if keys is None else None
    if kept is not None:
        keys = kept.secret
    if keys is not None:
        os.environ["ENGINE_KEYS"] = keys
    if args.replica:
        os.environ["ENGINE_REPLICA_ID"] = args.replica
    store = store_url(args.store)
    if store.url is None:
        os.environ.pop("ENGINE_STORE", None)
    else:
        os.environ["ENGINE_STORE"] = store.url
    return store, kept


def store_url(given: str | None) -> StoreChoice:
    """``--store``, else ``ENGINE_STORE``, else the default file in the user's data directory;
    ``none`` disables. A given URL is checked (CLIError when it is malformed) and a SQLite
    file's directory created; when the default's cannot be, the server runs on ``memory://``
    with a warning: a stdio server that a desktop host launches anywhere must still start."""
    env = os.environ.get("ENGINE_STORE", "").strip()
    source = "--store" if given else "ENGINE_STORE" if env else None
    if source is None:
        return _default_store_created()
    url = (given or env).strip()
    if url.lower() == "none":
        return StoreChoice(None, f"store: none ({source} none): calls live in their tokens only")
    path = Path(url[len("sqlite:///") :])
    if url.startswith("sqlite:///") and path.name and not {"?", "#"} & set(url):
        from stores.sqlite import create_private_directories

        try:
            create_private_directories(path)
        except OSError as exc:
            raise CLIError(
                f"{source}: cannot create {path.parent} for the SQLite store "
                f"({exc.strerror or exc}); give a file in a directory this user can write"
            ) from None
    return StoreChoice(url, f"store: {shown_url(url)} (from {source})", source=source)


def shown_url(url: str) -> str:
    """``url`` with the password of ``//user:password@`` masked, for a log or an error line."""
    return re.sub(r"(//[^/?#:@]*:)[^/?#]*@", r"\1***@", url)


def _default_store_created() -> StoreChoice:
    from stores.sqlite import create_private_file

    try:
        path = user_data_dir() / STORE_FILE
        if not create_private_file(path):  # 0600: it holds arguments and results
            with path.open("ab"):  # a probe: as root, permission bits say nothing
                pass
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        where = f" {exc.filename}" if isinstance(exc, OSError) and exc.filename else ""
        return StoreChoice(
            "memory://",
            f"cannot create the default store{where} ({reason}): serving with memory://, so "
            "calls do not outlive this process and the journal commands cannot read them; pass "
            "--store URL (or ENGINE_STORE) to keep them",
            logging.WARNING,
        )
    url = sqlite_url(path)
    return StoreChoice(url, f"store: {url} (the default; --store URL or ENGINE_STORE changes it)")


EXAMPLE_OBJECT = '{"title": "Dune"}'


def json_object(text: str, option: str) -> dict[str, Any]:
    """An option's JSON object (``call --json``, ``replay --args``); CLIError otherwise."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CLIError(
            f"{option}: not JSON ({exc}); give an object like '{EXAMPLE_OBJECT}'"
        ) from None
    if not isinstance(value, dict):
        raise CLIError(f"{option}: give a JSON object, like '{EXAMPLE_OBJECT}'")
    return value
