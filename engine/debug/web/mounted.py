"""The journal's page mounted into a served app, behind the server's bearer tokens.

A fleet's operators open the journal from any one replica: they all read the same store.
Mounted, the page reads the server's own store with the server's own keys, and every request
must carry a token the server's verifier accepts, with the scope :data:`JOURNAL_SCOPE` besides
the scopes ``/mcp`` requires (the journal holds every principal's calls, more than any one
principal may see). A browser cannot add a header to a page it opens, so the page also takes
the token once from a form and keeps it in a cookie only this app's pages send
(``HttpOnly``, ``SameSite=Strict``); the token is checked again at every request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from engine.auth.metadata import ResourceMetadata
from engine.auth.provider import AccessToken
from engine.debug.web import pages
from engine.debug.web.app import (
    SECURITY_HEADERS,
    JournalSource,
    ReplaySettings,
    checked_trace_url,
    journal_ui,
)
from engine.debug.web.markup import attr, text
from engine.transports._bearer import BearerGate, Refusal
from stores import Store, StoreUnavailable

if TYPE_CHECKING:
    from engine.app import MCPServer

JOURNAL_SCOPE = "engine:journal"
"""The scope a token needs to read the journal, besides those the MCP endpoint requires."""
COOKIE = "engine_journal_token"


def journal_ui_app(
    mcp: MCPServer,
    *,
    replay_app: str | None = None,
    scope: str = JOURNAL_SCOPE,
    trace_url: str | None = None,
) -> Starlette:
    """The journal's page for ``mcp``, to mount into its served app::

        app = mcp.streamable_http_app()
        app.mount("/journal", journal_ui_app(mcp, replay_app="server.py"))

    ``replay_app``: the server file replay runs (``FILE.py[:ATTR]``, as ``serve`` takes it);
    without it the page does not replay. The page never runs a file a request names.
    ``trace_url``: where a round's trace is seen, ``{trace_id}`` standing for its id.
    """
    core = mcp.core
    auth, verifier = core.auth, core.token_verifier
    if auth is None or verifier is None:
        raise ValueError(
            "the journal page shows every principal's calls: mount it into a server with "
            "auth=AuthSettings(...) and a token_verifier, whose tokens it then requires (with "
            f"the scope {scope!r}); on your own machine, run `python -m engine journal-ui` "
            "instead"
        )
    # The page checks tokens and never serves the resource metadata, so no Host of its
    # requests names the resource.
    metadata = ResourceMetadata(auth, core.declared_scopes, lambda host: False)
    gate = BearerGate(verifier, metadata, core.metrics, "/mcp")

    def store() -> Store:
        found = mcp.store
        if found is None:
            raise StoreUnavailable(
                "the server has no store, so it keeps no journal: serve it with a store "
                "(store='sqlite:///calls.db' or a redis:// URL)"
            )
        return found

    def base(request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/")

    def sign_in_page(request: Request, said: str, status: int) -> HTMLResponse:
        body = (
            f'<h1>Sign in to the journal</h1><p class="problem" id="refused">{text(said)}'
            f'</p><form method="post" action="{attr(base(request))}/sign-in">'
            '<label>Access token <input name="token" type="password" autocomplete="off" '
            'size="60"></label> <button type="submit">Sign in</button></form>'
            f"<p>A token of this server with the scope <code>{text(scope)}</code>.</p>"
        )
        page = pages.layout("Sign in", body, base(request), "")
        return HTMLResponse(page, status, headers=SECURITY_HEADERS)

    async def verified(token: str) -> AccessToken | Refusal:
        checked = await gate.authenticate({"authorization": f"Bearer {token}"})
        if isinstance(checked, Refusal):
            return checked
        return gate.scope_check(checked, [scope]) or checked

    async def authorize(request: Request) -> Response | None:
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header[:7].lower() == "bearer " else ""
        token = token or request.cookies.get(COOKIE, "")
        if not token:
            return sign_in_page(request, "The journal needs an access token of this server.", 401)
        checked = await verified(token)
        if isinstance(checked, Refusal):
            return sign_in_page(request, checked.description, checked.status)
        return None

    async def sign_in(request: Request) -> Response:
        form = await request.form()
        token = str(form.get("token") or "").strip()
        checked = await verified(token) if token else None
        if not isinstance(checked, AccessToken):
            said = checked.description if checked is not None else "Give an access token."
            return sign_in_page(request, said, checked.status if checked is not None else 400)
        response = RedirectResponse(f"{base(request)}/", 303, headers=SECURITY_HEADERS)
        response.set_cookie(
            COOKIE,
            token,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=f"{base(request)}/",
        )
        return response

    return journal_ui(
        JournalSource(store, lambda: mcp.keys),
        ReplaySettings(replay_app, anywhere=False),
        authorize=authorize,
        routes=[Route("/sign-in", sign_in, methods=["POST"])],
        trace_url=checked_trace_url(trace_url) if trace_url is not None else None,
    )


__all__ = ["JOURNAL_SCOPE", "journal_ui_app"]
