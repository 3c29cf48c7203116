"""Pin the public names of ``cogsub.api``."""

from __future__ import annotations

import cogsub.api


def test_public_names_are_pinned_and_sorted() -> None:
    assert cogsub.api.__all__ == ["ApiKeys", "ApiLimits", "ApiServer", "ErrorBody", "create_app"]
    assert cogsub.api.__all__ == sorted(cogsub.api.__all__)
    assert all(hasattr(cogsub.api, name) for name in cogsub.api.__all__)
