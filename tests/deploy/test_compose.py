"""docker-compose.yml agrees with the code: settings it names exist, hosts and ports line up.

This machine runs no Docker engine, so the fleet itself is exercised by the
connected suites against wire-compatible servers; this keeps the compose file honest.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from cogsub.runtime import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
OUR_SERVICES = [
    name
    for name, spec in SERVICES.items()
    if "build" in spec or spec.get("image", "").startswith("cognitive-substrate")
]


def _environment(spec: dict[str, Any]) -> dict[str, str]:
    env = spec.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def _settings_field(path: list[str]) -> bool:
    """Whether COGSUB_A__B names field a.b of Settings."""
    model: type[BaseModel] = Settings
    for part in path:
        fields = model.model_fields
        if part not in fields:
            return False
        annotation = fields[part].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        elif part != path[-1]:
            return False
    return True


def test_there_is_a_cogsub_service() -> None:
    assert "ingestion" in OUR_SERVICES


@pytest.mark.parametrize("service", OUR_SERVICES)
def test_every_cogsub_variable_is_a_setting_the_code_reads(service: str) -> None:
    names = [n for n in _environment(SERVICES[service]) if n.startswith("COGSUB_")]
    assert names, f"{service} configures nothing"
    unknown = [
        n for n in names if not _settings_field(n.removeprefix("COGSUB_").lower().split("__"))
    ]
    assert unknown == []


@pytest.mark.parametrize("service", OUR_SERVICES)
def test_the_environment_builds_valid_distributed_settings(
    service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in _environment(SERVICES[service]).items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.backend == "distributed"
    assert settings.kafka.bootstrap_servers == "kafka:9092"
    assert settings.s3.endpoint_url == "http://minio:9000"
    assert settings.opensearch.url == "http://opensearch:9200"


def _host_ports(value: str) -> list[tuple[str, int]]:
    return [(h, int(p)) for h, p in re.findall(r"(?:https?://)?([a-z][a-z0-9-]*):(\d+)", value)]


def _listens(service: str, port: int) -> bool:
    spec = SERVICES[service]
    env = _environment(spec)
    published = [str(p).rsplit(":", 1)[-1] for p in spec.get("ports", [])]
    config_text = "".join(
        (ROOT / v.split(":")[0]).read_text()
        for v in spec.get("volumes", [])
        if v.startswith("./") and (ROOT / v.split(":")[0]).is_file()
    )
    return (
        str(port) in published
        or f":{port}" in env.get("KAFKA_LISTENERS", "")
        or f":{port}" in config_text
    )


def test_every_host_and_port_the_services_name_is_served() -> None:
    checked = 0
    for name, spec in SERVICES.items():
        values = list(_environment(spec).values())
        for volume in spec.get("volumes", []):
            path = ROOT / volume.split(":")[0]
            if volume.startswith("./") and path.is_file():
                values.append(path.read_text())
        for value in values:
            for host, port in _host_ports(value):
                if host in SERVICES:  # localhost and bind-all addresses name no other service
                    assert _listens(host, port), f"{name} expects {host}:{port}"
                    checked += 1
    assert checked >= 6


def test_grafana_provisions_tempo() -> None:
    datasource = yaml.safe_load(
        (ROOT / "deploy/grafana/provisioning/datasources/tempo.yaml").read_text()
    )["datasources"][0]
    assert datasource["type"] == "tempo" and datasource["url"] == "http://tempo:3200"
    tempo = yaml.safe_load((ROOT / "deploy/tempo.yaml").read_text())
    assert tempo["server"]["http_listen_port"] == 3200


def test_collector_exports_to_tempos_otlp_receiver() -> None:
    collector = yaml.safe_load((ROOT / "deploy/otel-collector.yaml").read_text())
    assert collector["exporters"]["otlp/tempo"]["endpoint"] == "tempo:4317"
    assert collector["service"]["pipelines"]["traces"]["exporters"] == ["otlp/tempo"]
    tempo = yaml.safe_load((ROOT / "deploy/tempo.yaml").read_text())
    assert tempo["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].endswith(
        ":4317"
    )


def test_kafka_never_creates_topics_by_accident() -> None:
    assert _environment(SERVICES["kafka"])["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert _environment(SERVICES["kafka"])["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://kafka:9092"


def test_credentials_agree_between_minio_and_the_services() -> None:
    minio = _environment(SERVICES["minio"])
    for service in OUR_SERVICES:
        env = _environment(SERVICES[service])
        assert env["COGSUB_S3__ACCESS_KEY_ID"] == minio["MINIO_ROOT_USER"]
        assert env["COGSUB_S3__SECRET_ACCESS_KEY"] == minio["MINIO_ROOT_PASSWORD"]


def test_published_ports_bind_loopback_only() -> None:
    for name, spec in SERVICES.items():
        for mapping in spec.get("ports", []):
            assert str(mapping).startswith("127.0.0.1:"), (
                f"{name} publishes {mapping} beyond loopback"
            )


def test_the_image_command_is_a_real_cogsub_command() -> None:
    from cogsub.cli.main import _parser

    for service in OUR_SERVICES:
        command = SERVICES[service]["command"]
        assert command[0] == "cogsub"
        _parser().parse_args(command[1:])  # exits (fails the test) on an unknown command
