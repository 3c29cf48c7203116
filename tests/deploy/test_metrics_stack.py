"""Prometheus and the Grafana dashboard agree with the compose file and with ``Metrics``.

Scrape targets name compose services on the port those services serve metrics on;
the data source points at the Prometheus service; every PromQL expression of the
dashboard uses only series that :class:`cogsub.telemetry.metrics.Metrics` defines.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from cogsub.telemetry.metrics import Metrics
from cogsub.telemetry.metrics_server import DEFAULT_METRICS_PORT

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
PROMETHEUS = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
PROVISIONING = ROOT / "deploy/grafana/provisioning"
DASHBOARD: dict[str, Any] = json.loads((PROVISIONING / "dashboards/cogsub.json").read_text())

# Words of PromQL that are not series names.
_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "bool"})
_KEYWORDS |= frozenset({"and", "or", "unless", "offset", "inf", "nan"})


def _environment(service: str) -> dict[str, str]:
    return {k: str(v) for k, v in SERVICES[service].get("environment", {}).items()}


def _mounted(service: str, inside: str) -> Path | None:
    """The repository path mounted at ``inside`` (or at a directory holding it)."""
    for volume in SERVICES[service].get("volumes", []):
        source, _, rest = str(volume).partition(":")
        target = rest.split(":")[0]
        if source.startswith("./") and (inside == target or inside.startswith(target + "/")):
            return ROOT / source / inside.removeprefix(target).lstrip("/")
    return None


def _scrape_targets() -> list[tuple[str, str, int]]:
    """(job, host, port) of every scrape target, static or DNS-discovered."""
    found = []
    for job in PROMETHEUS["scrape_configs"]:
        for sd in job.get("dns_sd_configs", []):
            found += [(job["job_name"], name, int(sd["port"])) for name in sd["names"]]
        for static in job.get("static_configs", []):
            for target in static["targets"]:
                host, _, port = target.rpartition(":")
                found.append((job["job_name"], host, int(port)))
    return found


def _queries() -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in DASHBOARD["panels"]
        for target in panel.get("targets", [])
    ]


def series_in(expr: str) -> set[str]:
    """The series names a PromQL expression reads (labels, functions, ranges left out)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings, e.g. label values
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", "", text)  # groupings
    names = set()
    # Not inside a word, a number or a duration ("5m"), nor a Grafana variable.
    for match in re.finditer(r"(?<![\w:$.])[A-Za-z_:][A-Za-z0-9_:]*", text):
        rest = text[match.end() :].lstrip()
        if rest.startswith("(") or match.group().lower() in _KEYWORDS:
            continue  # a function or an operator word
        names.add(match.group())
    return names


def test_the_series_parser_sees_through_promql() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le, stage) (rate(cogsub_ingest_stage_seconds_bucket"
        '{stage!="x"}[$__rate_interval]))) / on (job) max(up) offset 5m'
    )
    assert series_in(expr) == {"cogsub_ingest_stage_seconds_bucket", "up"}


def test_prometheus_runs_pinned_on_loopback_with_its_config() -> None:
    spec = SERVICES["prometheus"]
    assert re.fullmatch(r"prom/prometheus:v\d+\.\d+\.\d+", spec["image"])
    assert spec["ports"] == ["127.0.0.1:9090:9090"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in spec["command"]
    assert _mounted("prometheus", "/etc/prometheus/prometheus.yml") == (
        ROOT / "deploy/prometheus/prometheus.yml"
    )


def test_every_cogsub_service_is_scraped_and_every_target_is_served() -> None:
    targets = _scrape_targets()
    ours = {name for name, spec in SERVICES.items() if spec.get("command", [""])[0] == "cogsub"}
    assert {host for _, host, _ in targets} >= ours == {"ingestion", "consolidation"}
    for job, host, port in targets:
        if host == "localhost":
            assert port == 9090 and job == "prometheus"  # Prometheus scraping itself
            continue
        assert host in SERVICES, f"{job} scrapes {host}, which compose does not run"
        env = _environment(host)
        assert env["COGSUB_METRICS__PORT"] == str(port) == str(DEFAULT_METRICS_PORT)
        # In a container, loopback would be unreachable from Prometheus.
        assert env["COGSUB_METRICS__HOST"] == "0.0.0.0"
        assert str(port) in [str(p) for p in SERVICES[host].get("expose", [])]
        assert not [p for p in SERVICES[host].get("ports", []) if str(p).endswith(f":{port}")]


def test_grafana_provisions_prometheus_beside_tempo() -> None:
    assert _mounted("grafana", "/etc/grafana/provisioning") == PROVISIONING
    sources = [
        source
        for path in sorted((PROVISIONING / "datasources").glob("*.yaml"))
        for source in yaml.safe_load(path.read_text())["datasources"]
    ]
    by_type = {s["type"]: s for s in sources}
    assert set(by_type) == {"tempo", "prometheus"}
    prometheus = by_type["prometheus"]
    assert prometheus["url"] == "http://prometheus:9090" and prometheus["uid"] == "prometheus"
    assert [s["name"] for s in sources if s.get("isDefault")] == ["Tempo"]
    assert "prometheus" in SERVICES["grafana"]["depends_on"]


def test_the_dashboard_provider_loads_the_dashboard_json() -> None:
    (provider,) = yaml.safe_load((PROVISIONING / "dashboards/cogsub.yaml").read_text())["providers"]
    assert provider["type"] == "file"
    folder = _mounted("grafana", provider["options"]["path"])
    assert folder is not None and (folder / "cogsub.json").is_file()


def test_the_dashboard_is_valid_and_reads_prometheus() -> None:
    assert DASHBOARD["uid"] and DASHBOARD["title"] and DASHBOARD["schemaVersion"] >= 39
    ids = [panel["id"] for panel in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    graphs = [p for p in DASHBOARD["panels"] if p["type"] != "row"]
    assert len(graphs) >= 10
    for panel in graphs:
        assert panel["datasource"] == {"type": "prometheus", "uid": "prometheus"}, panel["title"]
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]


@pytest.mark.parametrize(("title", "expr"), _queries())
def test_every_query_reads_only_series_that_metrics_defines(title: str, expr: str) -> None:
    used = series_in(expr)
    assert used, f"{title}: {expr} reads no series"
    assert used <= Metrics().series_names(), f"{title}: unknown {used - Metrics().series_names()}"


def test_the_dashboard_shows_what_the_issue_asks_for() -> None:
    used = set().union(*(series_in(expr) for _, expr in _queries()))
    wanted = {
        "cogsub_events_archived_total",
        "cogsub_events_indexed_total",
        "cogsub_events_dead_lettered_total",
        "cogsub_ingest_batch_seconds_bucket",
        "cogsub_ingest_stage_seconds_bucket",
        "cogsub_consumer_lag",
        "cogsub_recall_seconds_bucket",
        "cogsub_http_requests_total",
        "cogsub_consolidation_rounds_total",
        "cogsub_consolidation_outputs_total",
    }
    assert wanted <= used
    quantiles = {float(q) for _, e in _queries() for q in re.findall(r"quantile\(([\d.]+)", e)}
    assert {0.5, 0.99} <= quantiles
