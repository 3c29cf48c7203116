"""The public names of ``cogsub.embeddings`` are pinned: changing them is a decision."""

from __future__ import annotations

import cogsub.embeddings


def test_public_names_are_pinned() -> None:
    assert cogsub.embeddings.__all__ == [
        "MINILM_DIMENSION",
        "MINILM_MAX_TOKENS",
        "MINILM_NAME",
        "Embedder",
        "HashEmbedder",
        "MiniLMEmbedder",
        "OpenAIEmbedder",
        "hash_vector",
    ]


def test_every_public_name_exists() -> None:
    for name in cogsub.embeddings.__all__:
        assert getattr(cogsub.embeddings, name) is not None
