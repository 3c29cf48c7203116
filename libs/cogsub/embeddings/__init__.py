"""Embedders: text in, unit-length vectors out.

Three adapters of the :class:`Embedder` port:

- :class:`HashEmbedder` — deterministic stub, no dependencies (tests, demos);
- :class:`MiniLMEmbedder` — all-MiniLM-L6-v2 int8 ONNX, local and offline;
- :class:`OpenAIEmbedder` — any OpenAI-compatible ``/v1/embeddings`` endpoint.
"""

from cogsub.embeddings.hash import HashEmbedder, hash_vector
from cogsub.embeddings.minilm import (
    MINILM_DIMENSION,
    MINILM_MAX_TOKENS,
    MINILM_NAME,
    MiniLMEmbedder,
)
from cogsub.embeddings.openai import OpenAIEmbedder
from cogsub.embeddings.ports import Embedder

__all__ = [
    "MINILM_DIMENSION",
    "MINILM_MAX_TOKENS",
    "MINILM_NAME",
    "Embedder",
    "HashEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "hash_vector",
]
