"""The Embedder contract, written once and run against every adapter.

A concrete test class inherits ``EmbedderContract`` and provides an ``embedder``
fixture (an open embedder it closes itself). ``tolerance`` is the largest per-value
difference accepted between two computations of the same text (0 for exact
adapters; float noise for a model whose kernels depend on the batch shape), and
``min_batch_cosine`` the smallest cosine between a text embedded in a batch and alone.
"""

from __future__ import annotations

import math

import pytest

from cogsub.embeddings.ports import Embedder

TEXTS = [
    "The agent deployed the billing service to staging.",
    "Tool call failed: timeout while reading the invoice table",
    "ok",
    "User asked how to rotate the API credentials every 90 days and who approves it.",
    "",
    "a",
]
UNICODE_TEXTS = [
    "Grüße aus Köln — naïve café",
    "日本語のテキストを埋め込みます",
    "emoji 🙂🚀 and combining e\u0301",
    "Ελληνικά και русский текст",
]


def _norm(vector: list[float]) -> float:
    return math.sqrt(math.fsum(v * v for v in vector))


def _cosine(a: list[float], b: list[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / (_norm(a) * _norm(b))


class EmbedderContract:
    """Behaviour every Embedder keeps (see ``cogsub.embeddings.ports``)."""

    tolerance = 0.0
    min_batch_cosine = 1.0 - 1e-12
    long_text_words = 3000

    def assert_close(self, a: list[list[float]], b: list[list[float]]) -> None:
        assert len(a) == len(b)
        for left, right in zip(a, b, strict=True):
            assert max(abs(x - y) for x, y in zip(left, right, strict=True)) <= self.tolerance

    async def test_name_is_a_stable_non_empty_string(self, embedder: Embedder) -> None:
        assert isinstance(embedder.name, str) and embedder.name
        assert embedder.name == embedder.name

    async def test_every_vector_has_the_dimension(self, embedder: Embedder) -> None:
        vectors = await embedder.embed(TEXTS)
        assert len(vectors) == len(TEXTS)
        assert all(len(v) == embedder.dimension for v in vectors)
        assert all(isinstance(x, float) for v in vectors for x in v)

    async def test_vectors_have_unit_norm(self, embedder: Embedder) -> None:
        for vector in await embedder.embed(TEXTS + UNICODE_TEXTS):
            assert _norm(vector) == pytest.approx(1.0, abs=1e-6)

    async def test_same_text_same_vector(self, embedder: Embedder) -> None:
        first = await embedder.embed(TEXTS)
        second = await embedder.embed(TEXTS)
        self.assert_close(first, second)

    async def test_different_texts_different_vectors(self, embedder: Embedder) -> None:
        vectors = await embedder.embed(TEXTS[:4])
        for i in range(len(vectors)):
            for j in range(i + 1, len(vectors)):
                assert _cosine(vectors[i], vectors[j]) < 0.999

    async def test_order_is_preserved(self, embedder: Embedder) -> None:
        forward = await embedder.embed(TEXTS)
        backward = await embedder.embed(list(reversed(TEXTS)))
        self.assert_close(forward, list(reversed(backward)))

    async def test_batch_equals_one_by_one(self, embedder: Embedder) -> None:
        # Texts of very different lengths in one batch: padding must not leak.
        texts = [*TEXTS, " ".join(["memory"] * 120), *UNICODE_TEXTS]
        batched = await embedder.embed(texts)
        for text, vector in zip(texts, batched, strict=True):
            (alone,) = await embedder.embed([text])
            assert _cosine(alone, vector) >= self.min_batch_cosine, text

    async def test_empty_list_gives_empty_list(self, embedder: Embedder) -> None:
        assert await embedder.embed([]) == []

    async def test_unicode_texts_embed(self, embedder: Embedder) -> None:
        vectors = await embedder.embed(UNICODE_TEXTS)
        assert len(vectors) == len(UNICODE_TEXTS)
        assert len({tuple(round(x, 6) for x in v) for v in vectors}) == len(UNICODE_TEXTS)

    async def test_very_long_text_embeds(self, embedder: Embedder) -> None:
        long_text = " ".join(f"word{i % 97}" for i in range(self.long_text_words))
        (vector,) = await embedder.embed([long_text])
        assert len(vector) == embedder.dimension
        assert _norm(vector) == pytest.approx(1.0, abs=1e-6)

    async def test_accepts_a_tuple(self, embedder: Embedder) -> None:
        self.assert_close(await embedder.embed(tuple(TEXTS)), await embedder.embed(TEXTS))
