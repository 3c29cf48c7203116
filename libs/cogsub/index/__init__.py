"""The associative layer: the MemoryIndex port, its embedded adapter and query building.

The OpenSearch adapter lives in ``cogsub.index.opensearch`` and is imported
only by processes that use it, so that this package stays light.
"""

from cogsub.index.ports import (
    DecayedPage,
    DecayStep,
    DocumentPatch,
    Hit,
    MemoryIndex,
    SearchFilters,
)
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.index.text_query import (
    STOP_WORDS,
    fts5_match_expression,
    query_terms,
    tokenize,
)

__all__ = [
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
