"""Embedded EventBus: a durable log in one SQLite file that several processes may share.

The file runs in WAL mode with ``synchronous=FULL``, so a ``publish`` that
returned survives kill -9 and power loss, and with a busy timeout, so several
processes can share it (``cogsub publish`` appends while the worker consumes).

- :mod:`.file`: the schema, the thread-bound connection, the header codec.
- :mod:`.log`: ``SqliteEventBus``, the writer: group-committed appends,
  retention, stats and reads outside any group.
- :mod:`.consumer`: the leased consumer, one live consumer per group.
"""

from cogsub.bus.sqlite.log import SqliteEventBus

__all__ = ["SqliteEventBus"]
