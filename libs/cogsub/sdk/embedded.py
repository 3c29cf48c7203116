"""How the SDK finds the embedded stack without importing the services.

The embedded stack is the service layer itself (event log, archive, index,
workers, the API app), and a library must not import a service. So the SDK
names only what it needs, :class:`EmbeddedStack`, and looks the provider up
by name in the installed package metadata: the ``stack`` entry point of the
``cogsub.embedded`` group (``cogsub.runtime.embedded_client`` in this
project's ``pyproject.toml``). Nothing of the services is loaded until a
program asks for an embedded client, and another distribution could provide
a different stack under the same name.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol, cast

import httpx

from cogsub.core.errors import ConfigurationError

EMBEDDED_GROUP = "cogsub.embedded"
STACK_NAME = "stack"


class EmbeddedStack(Protocol):
    """Opens transports into an API app that runs in this process over ``data_dir``."""

    def transport(self, data_dir: Path, embedder: str) -> httpx.BaseTransport:
        """A blocking transport; the stack starts before this returns."""
        ...

    def async_transport(self, data_dir: Path, embedder: str) -> httpx.AsyncBaseTransport:
        """An async transport; the stack starts on the first request."""
        ...


def find_embedded_stack(group: str = EMBEDDED_GROUP) -> EmbeddedStack:
    """The installed provider of the embedded stack.

    Raises:
        ConfigurationError: no installed distribution registers one (the SDK
            was installed without the services, or the project's metadata is
            stale: reinstall it with ``pip install -e .``).
    """
    found = entry_points(group=group, name=STACK_NAME)
    if not found:
        raise ConfigurationError(
            f"no embedded stack is installed (entry point {group}:{STACK_NAME}); install "
            "cognitive-substrate with its services, or use MemoryClient(url) against an API"
        )
    return cast(EmbeddedStack, next(iter(found)).load())
