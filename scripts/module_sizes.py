"""Which Python modules have grown past the size where one idea usually stops.

STYLE.md asks for one idea per module and a split past ~600 lines; a module may stay
longer if it is one idea that reads top to bottom and its docstring says so. This
report only lists the candidates: deciding is a reviewer's job, so it always exits 0
and ``make lint`` prints it without failing on it.

    python -m scripts.module_sizes libs services [--limit 600]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_LIMIT = 600


@dataclass(frozen=True)
class ModuleSize:
    path: Path
    lines: int


def oversized(modules: Iterable[ModuleSize], limit: int) -> list[ModuleSize]:
    """The modules longer than ``limit`` lines, longest first."""
    return sorted(
        (module for module in modules if module.lines > limit),
        key=lambda module: (-module.lines, str(module.path)),
    )


def render(modules: Sequence[ModuleSize], limit: int) -> str:
    if not modules:
        return f"module sizes: no module over {limit} lines"
    rows = [f"{module.lines:6d}  {module.path}" for module in modules]
    heading = f"module sizes: {len(modules)} module(s) over {limit} lines (one idea each?)"
    return "\n".join([heading, *rows])


def measure(roots: Iterable[Path]) -> list[ModuleSize]:
    return [
        ModuleSize(path, _count_lines(path))
        for root in roots
        for path in sorted(root.rglob("*.py"))
        if ".venv" not in path.parts
    ]


def _count_lines(path: Path) -> int:
    with path.open("rb") as source:
        return sum(1 for _ in source)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", type=Path, help="directories to walk")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT)
    args = parser.parse_args(argv)
    print(render(oversized(measure(args.roots), args.limit), args.limit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
