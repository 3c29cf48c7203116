"""The ArchiveStore port and its embedded adapters (filesystem, in-memory fake)."""

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.archive.memory import InMemoryArchive
from cogsub.archive.ports import ArchiveStore

__all__ = [
    "ArchiveStore",
    "FilesystemArchive",
    "InMemoryArchive",
]
