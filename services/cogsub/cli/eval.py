"""`cogsub eval locomo PATH`: evidence recall of the real pipeline beside BM25 and vector alone.

``main.py`` registers this module with :func:`add_parser` and dispatches to
:func:`run`; ``python -m cogsub.cli.eval locomo PATH`` runs it standalone.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cogsub.recall.policy import RankingPolicy
from cogsub.runtime import Settings, build_embedder
from cogsub.telemetry import configure_logging

EMBEDDERS = ("minilm", "hash")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``eval`` (with its ``locomo`` subcommand) to the ``cogsub`` subcommands."""
    evaluate = subparsers.add_parser("eval", help="measure recall on a benchmark file")
    kinds = evaluate.add_subparsers(dest="eval_command", required=True)
    locomo = kinds.add_parser(
        "locomo", help="evidence-turn recall@k on a LoCoMo-format file (pipeline, bm25, vector)"
    )
    locomo.add_argument("path", type=Path, help="a LoCoMo-format JSON file")
    locomo.add_argument(
        "--k", type=int, action="append", dest="ks", metavar="K", help="cut-off (repeatable)"
    )
    locomo.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    # SUPPRESS: a value given before the subcommand (`cogsub --embedder hash eval ...`) survives.
    locomo.add_argument("--embedder", choices=EMBEDDERS, default=argparse.SUPPRESS)
    locomo.add_argument(
        "--limit-conversations", type=int, metavar="N", help="only the first N conversations"
    )
    locomo.add_argument(
        "--no-captions", action="store_true", help="leave shared photos' captions out of turns"
    )
    locomo.add_argument(
        "--folds",
        action="store_true",
        help="leave-one-conversation-out: each conversation as a held-out fold, and the spread",
    )
    locomo.add_argument(
        "--set",
        action="append",
        default=[],
        dest="overrides",
        metavar="FIELD=VALUE",
        help="a ranking policy field for this run (repeatable)",
    )
    locomo.add_argument(
        "--tune",
        metavar="FIELD=V1,V2,...",
        help="choose the field's value per fold on the other conversations (the first on ties)",
    )


def run(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Run the subcommand; 0 on success, 2 when the file cannot be read."""
    from cogsub.evaluation import DEFAULT_KS, CachingEmbedder, LocomoOptions, evaluate_locomo

    path: Path = args.path
    if not path.is_file():
        print(f"cogsub: no such file: {path}", file=sys.stderr)
        return 2
    ks = tuple(args.ks) if args.ks else DEFAULT_KS
    if any(k < 1 for k in ks):
        print("cogsub: --k must be at least 1", file=sys.stderr)
        return 2
    try:
        policy = policy_with(RankingPolicy(), args.overrides)
        candidates = tuned(policy, args.tune) if args.tune else ()
    except ValueError as exc:
        print(f"cogsub: {exc}", file=sys.stderr)
        return 2
    kind = getattr(args, "embedder", None) or settings.embedder.kind
    embedder = CachingEmbedder(build_embedder(settings.embedder.model_copy(update={"kind": kind})))
    options = LocomoOptions(
        ks=ks,
        limit_conversations=args.limit_conversations,
        captions=not args.no_captions,
        policy=policy,
        folds=args.folds,
        candidates=candidates,
    )
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )

    async def evaluate() -> dict[str, Any]:
        try:
            return await evaluate_locomo(
                path, embedder=embedder, options=options, progress=progress
            )
        finally:
            await embedder.close()

    with progress:
        report = asyncio.run(evaluate())
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report, console)
    return 0


def policy_with(policy: RankingPolicy, assignments: Sequence[str]) -> RankingPolicy:
    """``policy`` with each ``FIELD=VALUE`` applied, the value read as the field's type.

    Raises:
        ValueError: no such field, no ``=``, or a value the field's type cannot hold.
    """
    changes: dict[str, object] = {}
    for assignment in assignments:
        name, equals, raw = assignment.partition("=")
        if not equals:
            raise ValueError(f"--set {assignment!r}: expected FIELD=VALUE")
        changes[name.strip()] = _field_value(policy, name.strip(), raw.strip())
    return dataclasses.replace(policy, **changes)  # type: ignore[arg-type]


def tuned(policy: RankingPolicy, spec: str) -> tuple[RankingPolicy, ...]:
    """One candidate policy per value of ``FIELD=V1,V2,...`` (in that order)."""
    name, equals, raw = spec.partition("=")
    values = [v for v in raw.split(",") if v.strip()]
    if not equals or not values:
        raise ValueError(f"--tune {spec!r}: expected FIELD=V1,V2,...")
    return tuple(policy_with(policy, [f"{name}={value}"]) for value in values)


def _field_value(policy: RankingPolicy, name: str, raw: str) -> object:
    if name not in {f.name for f in dataclasses.fields(policy)}:
        raise ValueError(f"the ranking policy has no field {name!r}")
    current = getattr(policy, name)
    if isinstance(current, bool):
        if raw.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"{name} takes true or false, not {raw!r}")
        return raw.lower() in ("true", "1")
    if isinstance(current, int | float):
        try:
            return type(current)(raw)
        except ValueError:
            raise ValueError(f"{name} takes a {type(current).__name__}, not {raw!r}") from None
    return raw


def print_report(report: dict[str, Any], console: Console) -> None:
    """Tables of recall@k per arm, overall and per category."""
    ks: list[int] = report["k"]
    console.print(
        f"LoCoMo {report['dataset']}: {report['conversations']} conversations, "
        f"{report['turns']} turns, {report['questions']} questions "
        f"({report['skipped_questions']} without evidence skipped), embedder {report['embedder']}"
    )
    scopes: list[tuple[str, dict[str, Any]]] = [("all", report)]
    scopes += [(f"category {c}", v) for c, v in report["categories"].items()]
    table = Table(title="evidence recall")
    for column in ("scope", "questions", "arm"):
        table.add_column(column)
    for k in ks:
        table.add_column(f"any@{k}", justify="right")
        table.add_column(f"all@{k}", justify="right")
    for scope, values in scopes:
        for arm, rates in (
            ("pipeline", values),
            ("bm25", values["bm25"]),
            ("vector", values["vector"]),
        ):
            cells = [f"{rates[f'recall_{kind}@{k}']:.3f}" for k in ks for kind in ("any", "all")]
            table.add_row(scope if arm == "pipeline" else "", str(values["questions"]), arm, *cells)
    console.print(table)
    if "folds" in report:
        _print_folds(report, ks, console)
    latency = report["latency_ms"]
    console.print(
        f"recall latency p50 {latency['recall_p50']} ms, p95 {latency['recall_p95']} ms "
        f"(query embedding p50 {latency['query_embed_p50']} ms, excluded); "
        f"ingestion {report['ingest_s']} s"
    )


def _print_folds(report: dict[str, Any], ks: list[int], console: Console) -> None:
    """The pipeline's rates on each held-out conversation, per category, and their spread."""
    table = Table(title="leave one conversation out (pipeline)")
    for column in ("held out", "candidate", "scope", "questions"):
        table.add_column(column)
    for k in ks:
        table.add_column(f"any@{k}", justify="right")
        table.add_column(f"all@{k}", justify="right")
    for fold in report["folds"]:
        scopes = [("all", fold), *((f"category {c}", v) for c, v in fold["categories"].items())]
        for scope, rates in scopes:
            cells = [f"{rates[f'recall_{kind}@{k}']:.3f}" for k in ks for kind in ("any", "all")]
            first = scope == "all"
            name, candidate = (fold["held_out"], str(fold["candidate"])) if first else ("", "")
            table.add_row(name, candidate, scope, str(rates["questions"]), *cells)
    console.print(table)
    spread = report["spread"]
    console.print(
        "spread across folds (min–max): "
        + ", ".join(
            f"{kind}@{k} {spread[f'recall_{kind}@{k}']['min']:.3f}–"
            f"{spread[f'recall_{kind}@{k}']['max']:.3f}"
            for k in ks
            for kind in ("any", "all")
        )
    )
    if "candidates" in report:
        console.print(f"candidates: {report['candidates']}")


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point (``python -m cogsub.cli.eval locomo PATH ...``)."""
    parser = argparse.ArgumentParser(prog="cogsub")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["eval", *(argv if argv is not None else sys.argv[1:])])
    settings = Settings()
    configure_logging(format=settings.log_format, level=settings.log_level)  # to stderr
    return run(args, settings, Console(highlight=False, soft_wrap=True))


if __name__ == "__main__":
    raise SystemExit(main())
