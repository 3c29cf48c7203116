"""The embedded MemoryIndex: one SQLite file for documents and BM25, numpy for vectors.

- :mod:`.index`: ``SqliteMemoryIndex``, the port's facade.
- :mod:`.connections`: the writer thread, the reader pool, the owed WAL truncate.
- :mod:`.schema`: tables, indexes and the migrations of older files.
- :mod:`.rows`: inserts, patches, decay and deletes, in SQL.
- :mod:`.reads`: lookups, scans, neighbours, and filters as SQL.
- :mod:`.text`: FTS5 tables per bank and staged BM25 ranking.
- :mod:`.vectors`: the in-memory vector cache and its exact search (no SQL).
- :mod:`.columns`: how a document's fields are stored.

Deleting erases: ``secure_delete`` zeroes what a delete frees, every
``delete_many`` merges the bank's FTS table so the deleted rows' terms leave it too
(an FTS5 delete otherwise only appends a marker), and then truncates the WAL,
so a forgotten memory's text is readable in none of the files.

Semantics beyond the port: ``since`` is inclusive and ``until`` exclusive (both
on the event timestamp; naive datetimes are UTC); ``tags_any`` matches tags
exactly; an empty ``fact_types``/``tags_any`` set matches nothing; embeddings
come back rounded to float32; the same ``event_id`` in two banks is two
documents (schema 3; an index of schema 2, where ``event_id`` alone was unique,
is rebuilt in place when opened).
"""

from cogsub.index.sqlite.connections import WAL_CHECKPOINT_PAGES
from cogsub.index.sqlite.index import SqliteMemoryIndex
from cogsub.index.sqlite.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "WAL_CHECKPOINT_PAGES", "SqliteMemoryIndex"]
