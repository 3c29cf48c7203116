"""Rerankers: a query and candidate texts in, one relevance score per text out.

Two adapters of the :class:`Reranker` port:

- :class:`NoReranker` — the default: no model, no call, the ranking unchanged;
- :class:`HttpReranker` — a TEI- or Cohere/Jina-compatible ``/rerank`` endpoint.

:class:`Reranking` is how recall uses one: bounded candidates, a hard deadline,
failures degrading to the unreranked order, and the blend of :mod:`.blend`.
"""

from cogsub.rerank.blend import Blended, blend, normalised
from cogsub.rerank.bounded import Reranking
from cogsub.rerank.http import HttpReranker, RerankApi, parse_scores, rerank_request
from cogsub.rerank.none import NoReranker
from cogsub.rerank.ports import Reranker

__all__ = [
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
