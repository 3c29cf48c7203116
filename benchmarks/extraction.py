"""`python -m benchmarks.extraction`: the offline extractor's cost per event, and its date rules.

Runs the offline extractor (``extract_facts``) over ``--events`` texts from the soak's event
generator (``make_events``, the soak's first calibration seed) and times, per text, the whole
extraction and date resolution. The date rules are timed twice in the same run: as extraction
runs them (a rule only on texts holding one of its cues) and with every rule tried on every
text, the baseline. Every rule is what a text that is not ASCII gets, so the baseline is the
same texts with `` é`` appended; the two must find the same mentions, which is checked.

Dates are resolved here on whole texts; extraction resolves them per clause, so its own share
differs. The soak's texts hold few date words, so most rules are skipped there: a best case.
The LoCoMo dev turns (``--locomo``, where the file is) are conversation, with dates in it."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.ingest import make_events
from benchmarks.results import record
from cogsub.core.events import EventType
from cogsub.evaluation.locomo_data import load_locomo
from cogsub.extraction.dates import resolve_dates
from cogsub.extraction.offline import extract_facts
from cogsub.extraction.ports import ExtractionInput

Text = tuple[str, datetime]  # a text and the time it was said at


def per_text_us(
    work: Callable[[str, datetime], object], texts: Sequence[Text], repeats: int
) -> float:
    """Best of ``repeats`` passes over ``texts``, in microseconds per text."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for text, when in texts:
            work(text, when)
        best = min(best, time.perf_counter() - started)
    return best / len(texts) * 1e6


LOCOMO = Path(__file__).resolve().parents[2] / "shared/datasets/locomo-dev/locomo-dev.json"
WHEN = datetime.fromisoformat("2026-05-01T12:00:00+00:00")


def soak_texts(count: int, seed: int) -> list[Text]:
    return [(str(e["input"]["text"]), WHEN) for e in make_events(count, seed=seed)]


def locomo_texts(path: Path) -> list[Text]:
    return [(t.content, t.timestamp) for c in load_locomo(path) for t in c.turns]


def extract(text: str, when: datetime) -> object:
    item = ExtractionInput(
        source_event_id="bench", text=text, event_time=when, event_type=EventType.USER_INPUT
    )
    return extract_facts(item)


def every_rule(text: str, when: datetime) -> object:
    # A text that is not ASCII is scanned by every rule; `` é`` after a space moves no mention.
    return resolve_dates(f"{text} \u00e9", when)


def measure(name: str, texts: list[Text], repeats: int) -> dict[str, Any]:
    """Print one corpus's rows and return them, with whether both readings found the same."""
    same = [resolve_dates(t, w) for t, w in texts] == [every_rule(t, w) for t, w in texts]
    rows = {
        "extraction, whole": per_text_us(extract, texts, repeats),
        "date rules, tried on their cues": per_text_us(resolve_dates, texts, repeats),
        "date rules, every rule (baseline)": per_text_us(every_rule, texts, repeats),
    }
    print(f"{name}: {len(texts)} texts")
    for row, micros in rows.items():
        print(f"{row:>36}: {micros:7.1f} µs per text")
    ratio = rows["date rules, every rule (baseline)"] / rows["date rules, tried on their cues"]
    print(f"{'ratio':>36}: {ratio:7.1f}× (same mentions: {same})", flush=True)
    return {
        "texts": len(texts),
        "us_per_text": {row: round(micros, 1) for row, micros in rows.items()},
        "ratio": round(ratio, 2),
        "same_mentions": same,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5_000, help="soak events to extract")
    parser.add_argument("--repeats", type=int, default=5, help="passes; the best is kept")
    parser.add_argument("--seed", type=int, default=11, help="event generator seed")
    parser.add_argument("--locomo", type=Path, default=LOCOMO, help="LoCoMo-format file")
    args = parser.parse_args(argv)
    if args.events < 1 or args.repeats < 1:
        parser.error("--events and --repeats must be at least 1")
    corpora = {
        "soak events": measure("soak events", soak_texts(args.events, args.seed), args.repeats)
    }
    if args.locomo.is_file():
        corpora["LoCoMo turns"] = measure("LoCoMo turns", locomo_texts(args.locomo), args.repeats)
    else:
        print(f"LoCoMo turns: skipped, no file at {args.locomo}")
    record("extraction", corpora, argv)
    return 0 if all(corpus["same_mentions"] for corpus in corpora.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
