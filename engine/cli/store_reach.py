"""The store a server is about to serve with, opened once before it does: what ``serve``,
``serve --reload`` and ``dev`` refuse to start on, each with one line and its exit status."""

from __future__ import annotations

from engine.cli.shared import EXIT_CONFIG, EXIT_TEMPFAIL, CLIError, StoreChoice, shown_url


def reach(store: StoreChoice) -> None:
    """Open the store once before serving: a malformed URL is refused (exit 2), and so is a
    store that does not answer, since a replica that cannot reach its store cannot carry a call
    across rounds: exit status 75 (EX_TEMPFAIL), which a supervisor may retry. A store that
    cannot keep its promises (a Redis that evicts keys) is refused with exit status 78
    (EX_CONFIG). A store lost later is reported by /healthz."""
    import anyio

    from stores import StoreMisconfigured, StoreUnavailable, open_store

    assert store.url is not None
    try:
        opened = open_store(store.url)  # checks the URL before it imports the backend
    except ValueError as exc:
        raise CLIError(f"{store.source}: {exc}") from None
    except Exception as exc:  # a SQLite file that cannot be opened, say
        reason = " ".join(str(exc).split())
        raise CLIError(
            f"{store.source}: cannot open the store {shown_url(store.url)}: {reason}"
        ) from None

    async def ping() -> None:
        try:
            with anyio.fail_after(10):
                await opened.ping()
        finally:
            await opened.aclose()

    shown = shown_url(store.url)
    try:
        anyio.run(ping)
    except StoreMisconfigured as exc:
        raise CLIError(str(exc), code=EXIT_CONFIG) from None
    except (StoreUnavailable, TimeoutError) as exc:
        said = str(exc).partition(" The request can be retried")[0].rstrip(". ")
        reason = " ".join(said.split()) or "no answer in 10 s"
        raise CLIError(
            f"cannot reach the store {shown}: {reason}; start Redis or fix --store "
            "(or ENGINE_STORE); exit status 75 means try again later",
            code=EXIT_TEMPFAIL,
        ) from None
    except Exception as exc:  # the server answered with an error: AUTH, SELECT of a bad index
        reason = " ".join(str(exc).split())
        hint = (
            "; Redis has databases 0-15 unless configured otherwise" if "DB index" in reason else ""
        )
        raise CLIError(f"the store {shown} refused the connection: {reason}{hint}") from None
