"""The MCP server over the tool set, whichever transport carries it.

A ``Callers`` (``_catalog``) answers per request which bank the server is pinned
to (if any), whether the caller may use several banks, and which client calls
the API for this caller. Over stdio
that is one client for the process; over HTTP it is a client carrying the
caller's own key (see ``_http``). Anything a tool raises that the project
names (bad arguments, a refused key, a missing memory) comes back as a tool
error with the API's error body, never as a failed request or a dead server.
"""

from __future__ import annotations

import traceback
from typing import Any

import mcp_types as types
import structlog
from pydantic import BaseModel

from cogsub.api.errors import _BY_CLASS as API_ERRORS  # the API's own names
from cogsub.core.context import ContextBlock, ContextFormat
from cogsub.core.errors import CogsubError, InvalidInputError, NotFoundError
from cogsub.mcp._catalog import Callers, input_schema, parse_call
from cogsub.mcp._tools import TOOLS_BY_NAME, offered
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

SERVER_NAME = "cogsub"
INSTRUCTIONS = (
    "Long-term memory of the user and of your own work, in banks (one per user or agent). "
    "Before a task, call context (or recall) with what you are about to do. Keep what you "
    "learn with the retain tools as it happens: a correction the moment the user says 'no, "
    "do it this way', a procedure after a task went right, a preference for a standing rule."
)
log = structlog.get_logger("cogsub.mcp")


def error_type(exc: CogsubError) -> str:
    """The API's name for ``exc`` (``forbidden``, ``invalid_input`` …), as its error body says."""
    for kind, _, name in API_ERRORS:
        if isinstance(exc, kind):
            return name
    return "internal"  # what the API answers for a failure it does not name (a 500)


def error_result(exc: CogsubError) -> types.CallToolResult:
    """A tool error an agent can act on: the error type, message and each broken field."""
    problems = (
        [{"field": p.field, "rule": p.rule} for p in exc.problems]
        if isinstance(exc, InvalidInputError)
        else []
    )
    body = {"error": {"type": error_type(exc), "message": str(exc), "problems": problems}}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{error_type(exc)}: {exc}")],
        structured_content=body,
        is_error=True,
    )


def success_result(result: BaseModel) -> types.CallToolResult:
    """The API's answer as JSON; a markdown context block as the text to put in a prompt."""
    structured = result.model_dump(mode="json")
    if isinstance(result, ContextBlock) and result.format == ContextFormat.MARKDOWN:
        text = result.text
    else:
        text = result.model_dump_json()
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


def build_server(callers: Callers) -> Server[Any]:
    """The MCP server of the memory tools, calling the API through ``callers``."""

    async def list_tools(
        ctx: ServerRequestContext[Any], _: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        pinned = callers.pinned_bank(ctx.request)
        several = callers.several_banks(ctx.request)
        tools = [
            types.Tool(
                name=spec.name,
                description=spec.description,
                input_schema=input_schema(spec, pinned_bank=pinned),
            )
            for spec in offered(pinned_bank=pinned, several_banks=several)
        ]
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        pinned = callers.pinned_bank(ctx.request)
        shown = offered(pinned_bank=pinned, several_banks=callers.several_banks(ctx.request))
        spec = TOOLS_BY_NAME.get(params.name)
        if spec is None or spec not in shown:
            names = ", ".join(s.name for s in shown)
            return error_result(NotFoundError(f"no tool {params.name!r} here; tools: {names}"))
        try:
            call = parse_call(spec, params.arguments, pinned_bank=pinned)
            async with callers.client(ctx.request) as client:
                return success_result(await call.run(client))
        except CogsubError as exc:
            return error_result(exc)
        except Exception as exc:
            # A bug, not the caller's fault: the host gets a tool error, the log the traceback,
            # plain (never exc_info: a rich renderer prints frame locals, the caller's key too).
            log.error(
                "mcp_tool_failed",
                tool=params.name,
                error_type=type(exc).__name__,
                traceback="".join(traceback.format_exception(exc)),
            )
            return error_result(CogsubError(f"tool {params.name!r} failed; see the server log"))

    return Server(
        SERVER_NAME,
        version="0.1.0",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
