"""The public names of ``cogsub.rerank`` are pinned: changing them is a decision."""

from __future__ import annotations

import cogsub.rerank


def test_public_names_are_pinned() -> None:
    assert cogsub.rerank.__all__ == [
        "Blended",
        "HttpReranker",
        "NoReranker",
        "RerankApi",
        "Reranker",
        "Reranking",
        "blend",
        "normalised",
        "parse_scores",
        "rerank_request",
    ]


def test_every_public_name_exists() -> None:
    for name in cogsub.rerank.__all__:
        assert getattr(cogsub.rerank, name) is not None
