"""Pin the public names of ``cogsub.archive``."""

from __future__ import annotations

import cogsub.archive


def test_public_names_are_pinned_and_sorted() -> None:
    assert cogsub.archive.__all__ == ["ArchiveStore", "FilesystemArchive", "InMemoryArchive"]
    assert cogsub.archive.__all__ == sorted(cogsub.archive.__all__)
    assert all(hasattr(cogsub.archive, name) for name in cogsub.archive.__all__)
