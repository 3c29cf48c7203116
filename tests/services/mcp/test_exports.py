"""Pin the public names of ``cogsub.mcp``."""

from __future__ import annotations

import cogsub.mcp


def test_public_names_are_pinned_and_sorted() -> None:
    assert cogsub.mcp.__all__ == [
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
    assert cogsub.mcp.__all__ == sorted(cogsub.mcp.__all__)
    assert all(hasattr(cogsub.mcp, name) for name in cogsub.mcp.__all__)
