"""What the tantivy arm's tests look at: its state file, and what its methods answered."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cogsub.index.sqlite.tantivy_text import TantivyText, text_root

READER_THREADS = "cogsub-index-read"


def stored_state(path: Path) -> dict[str, Any]:
    """The tantivy store's ``state.json`` beside the SQLite file ``path``."""
    root = text_root(str(path))
    assert root is not None
    state: dict[str, Any] = json.loads((root / "state.json").read_text())
    return state


def seqs(path: Path) -> tuple[int, int]:
    """(SQLite's committed seq, the seq the tantivy store has applied)."""
    with sqlite3.connect(path) as conn:
        (sqlite_seq,) = conn.execute("SELECT seq FROM index_state").fetchone()
    return sqlite_seq, stored_state(path)["seq"]


def calls_of(monkeypatch: pytest.MonkeyPatch, name: str, *, searches: bool = False) -> list[Any]:
    """Record what each call of ``TantivyText.<name>`` answered (the call still happens).

    ``searches``: only calls on reader threads, where searches run (not a writer's).
    """
    answers: list[Any] = []
    original: Callable[..., Any] = getattr(TantivyText, name)

    def recorded(self: TantivyText, *args: Any) -> Any:
        answer = original(self, *args)
        if not searches or threading.current_thread().name.startswith(READER_THREADS):
            answers.append(answer)
        return answer

    monkeypatch.setattr(TantivyText, name, recorded)
    return answers
