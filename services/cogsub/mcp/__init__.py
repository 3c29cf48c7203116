"""The memory tools as an MCP server, over stdio (``cogsub mcp``) and streamable HTTP (``/mcp``).

See docs/mcp.md for the tools, the transports and how a key reaches a bank.
"""

from cogsub.mcp._catalog import ToolCall, ToolSpec, input_schema, parse_call
from cogsub.mcp._http import InProcessCallers, bearer_key, mount_mcp
from cogsub.mcp._server import Callers, build_server, error_result, success_result
from cogsub.mcp._stdio import ProcessCallers, serve_stdio
from cogsub.mcp._tools import TOOLS, TOOLS_BY_NAME, offered

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
