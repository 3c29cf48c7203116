"""Pin the public names of ``cogsub.index``."""

from __future__ import annotations

import cogsub.index


def test_public_names_are_pinned_and_sorted() -> None:
    assert cogsub.index.__all__ == [
        "DecayStep",
        "DecayedPage",
        "DocumentPatch",
        "Hit",
        "MemoryIndex",
        "STOP_WORDS",
        "SearchFilters",
        "SqliteMemoryIndex",
        "fts5_match_expression",
        "query_terms",
        "tokenize",
    ]
    assert cogsub.index.__all__ == sorted(cogsub.index.__all__)
    assert all(hasattr(cogsub.index, name) for name in cogsub.index.__all__)
