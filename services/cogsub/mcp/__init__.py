"""The memory tools as an MCP server, over stdio (``cogsub mcp``) and streamable HTTP (``/mcp``).

See docs/mcp.md for the tools, the transports and how a key reaches a bank.
"""

import importlib
from typing import TYPE_CHECKING, Any

from cogsub.api.auth import bearer_key
from cogsub.mcp._catalog import Callers, ToolCall, ToolSpec, input_schema, parse_call
from cogsub.mcp._http import InProcessCallers, mount_mcp
from cogsub.mcp._tools import TOOLS, TOOLS_BY_NAME, offered

if TYPE_CHECKING:
    from cogsub.mcp._server import build_server, error_result, success_result
    from cogsub.mcp._stdio import ProcessCallers, serve_stdio

# What needs the MCP SDK loads on first use: the API app mounts /mcp without loading it.
_LAZY = {
    "build_server": "cogsub.mcp._server",
    "error_result": "cogsub.mcp._server",
    "success_result": "cogsub.mcp._server",
    "ProcessCallers": "cogsub.mcp._stdio",
    "serve_stdio": "cogsub.mcp._stdio",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cogsub.mcp' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "Callers",
    "InProcessCallers",
    "ProcessCallers",
    "TOOLS",
    "TOOLS_BY_NAME",
    "ToolCall",
    "ToolSpec",
    "bearer_key",
    "build_server",
    "error_result",
    "input_schema",
    "mount_mcp",
    "offered",
    "parse_call",
    "serve_stdio",
    "success_result",
]
