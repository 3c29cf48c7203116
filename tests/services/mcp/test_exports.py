"""Pin the public names of ``cogsub.mcp``."""

from __future__ import annotations

import subprocess
import sys

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


def test_building_the_api_app_leaves_the_mcp_sdk_unloaded_until_its_lifespan() -> None:
    # The embedded SDK client reaches the app in-process, with no lifespan: no /mcp to pay for.
    probe = (
        "import sys\n"
        "from cogsub.api import ApiLimits, create_app\n"
        "import cogsub.mcp\n"
        "assert 'mcp' not in sys.modules, 'the MCP SDK was imported'\n"
        "cogsub.mcp.build_server\n"
        "assert 'mcp' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
