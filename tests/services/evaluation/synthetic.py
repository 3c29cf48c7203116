"""A tiny conversation in LoCoMo's format, written by the tests themselves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SESSION_1 = [
    ("Alice", "Hi Bob! How was your weekend?"),
    ("Bob", "Great, I finally repaired the old sailboat."),
    ("Alice", "Which instrument are you learning these days?"),
    ("Bob", "The cello, with a teacher from the conservatory."),
    ("Alice", "Lovely. My sister moved to Lisbon last month."),
]
SESSION_2 = [
    ("Bob", "Hey Alice, I went hiking near the lake yesterday."),
    ("Alice", "Did you see the old lighthouse?"),
    ("Bob", "Yes, and a heron!"),
]


def _turns(session: int, lines: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [
        {"speaker": speaker, "dia_id": f"D{session}:{i}", "text": text}
        for i, (speaker, text) in enumerate(lines, start=1)
    ]


def sample(sample_id: str) -> dict[str, Any]:
    session_2 = _turns(2, SESSION_2)
    session_2[2]["blip_caption"] = "a photo of a grey heron on a rock"
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Alice",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": _turns(1, SESSION_1),
            "session_2_date_time": "10:37 am on 27 June, 2023",
            "session_2": session_2,
        },
        "qa": [
            {
                "question": "What instrument is he learning these days?",
                "answer": "cello",
                "evidence": ["D1:4"],
                "category": 4,
            },
            {
                "question": "Where did Alice's sister move?",
                "answer": "Lisbon",
                "evidence": ["D1:5"],
                "category": 1,
            },
            {
                "question": "What did Bob see at the lake?",
                "answer": "a lighthouse and a heron",
                "evidence": ["D2:2; D2:3"],
                "category": 1,
            },  # two ids in one string, as in LoCoMo
            {
                "question": "When did Bob go hiking?",
                "answer": "26 June 2023",
                "evidence": ["D2:1"],
                "category": 2,
            },
            {
                "question": "What did Bob say about Mars?",
                "answer": "nothing",
                "evidence": [],
                "category": 5,
            },  # adversarial: never asked
            {
                "question": "What is Bob's dog called?",
                "answer": "?",
                "evidence": ["D9:9"],
                "category": 4,
            },  # evidence not in the conversation: skipped
        ],
    }


def write(path: Path, *sample_ids: str) -> Path:
    path.write_text(json.dumps([sample(s) for s in sample_ids or ("conv-a",)]))
    return path
