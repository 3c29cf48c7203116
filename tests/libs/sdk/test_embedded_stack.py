"""The SDK finds the embedded stack by its entry point, never by importing the services."""

from __future__ import annotations

import inspect

import pytest

from cogsub.core.errors import ConfigurationError
from cogsub.sdk.embedded import EmbeddedStack, find_embedded_stack


def test_the_installed_stack_is_the_services_embedded_client() -> None:
    stack = find_embedded_stack()

    assert inspect.ismodule(stack)
    assert stack.__name__ == "cogsub.runtime.embedded_client"
    for name in ("transport", "async_transport"):
        expected = inspect.signature(getattr(EmbeddedStack, name)).parameters
        provided = inspect.signature(getattr(stack, name)).parameters
        assert list(provided) == [p for p in expected if p != "self"]


def test_without_a_registered_stack_the_error_says_what_to_install() -> None:
    with pytest.raises(ConfigurationError, match="no embedded stack is installed"):
        find_embedded_stack("cogsub.embedded-nowhere")


def test_an_unknown_embedder_is_refused_before_anything_starts(tmp_path) -> None:
    stack = find_embedded_stack()

    with pytest.raises(ValueError, match="unknown embedder 'bert'"):
        stack.async_transport(tmp_path, "bert")
    assert list(tmp_path.iterdir()) == []
