"""``mount_console``: the console's files at ``/ui``, each answer with a strict policy."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONSOLE_PATH = "/ui"
# Only the page's own origin: no CDN, no inline script, nothing framing the console.
CONSOLE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
_HEADERS = (
    (b"content-security-policy", CONSOLE_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-cache"),
)


def static_dir() -> Path:
    """The folder of the console's files, as installed with the package."""
    return Path(str(files("cogsub.console") / "static"))


class _WithPolicy:
    """Adds the console's security headers to every answer of ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_policy(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        await self._app(scope, receive, send_with_policy)


def mount_console(app: FastAPI) -> None:
    """Serve the console at ``/ui/`` (``/ui`` redirects there, so relative URLs resolve)."""

    # HEAD too, as the files under /ui/ answer it: `curl -I /ui` must not meet a 405.
    @app.api_route(CONSOLE_PATH, methods=["GET", "HEAD"], include_in_schema=False)
    async def console_root() -> RedirectResponse:
        redirect = RedirectResponse(f"{CONSOLE_PATH}/", status_code=308)
        for name, value in _HEADERS:
            redirect.headers[name.decode()] = value.decode()
        return redirect

    files_app = StaticFiles(directory=static_dir(), html=True)
    app.mount(CONSOLE_PATH, _WithPolicy(files_app), name="console")
