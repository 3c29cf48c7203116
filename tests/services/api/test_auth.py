"""API keys per bank: 401 without a valid key, 403 for another bank, and nothing leaks."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cogsub.api import ApiKeys
from cogsub.core.errors import ConfigurationError
from cogsub.runtime.settings import ApiSettings, Settings
from cogsub.runtime.wiring import build_api_keys
from tests.services.api.conftest import KEY_A, KEY_ALL, KEY_B, AppClient, assert_error


async def _retained(api, bank: str, text: str, **extra) -> str:
    response = await api.post(
        f"/v1/banks/{bank}/memories", json={"content": text, "wait": True, **extra}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["memory_id"])


async def test_no_key_or_an_unknown_key_is_401(app_client: AppClient, keys, banks):
    bank_a, _ = banks
    for key in (None, "not-a-configured-key-at-all"):
        response = await app_client(auth=keys, key=key).post(
            f"/v1/banks/{bank_a}/recall", json={"query": "x"}
        )
        assert_error(response, 401, "unauthenticated")
        assert response.headers["www-authenticate"] == "Bearer"
        assert "not-a-configured" not in response.text


async def test_a_key_for_bank_a_gets_403_on_bank_b_whether_or_not_b_has_it(
    app_client: AppClient, keys, banks
):
    bank_a, bank_b = banks
    owner_b = app_client(auth=keys, key=KEY_B)
    secret_id = await _retained(owner_b, bank_b, "B's secret: the vault code is 4711.")
    as_a = app_client(auth=keys, key=KEY_A)
    existing = await as_a.get(f"/v1/banks/{bank_b}/memories/{secret_id}")
    missing = await as_a.get(f"/v1/banks/{bank_b}/memories/no-such-memory")
    assert_error(existing, 403, "forbidden")
    assert_error(missing, 403, "forbidden")
    assert existing.json() == missing.json()  # the same answer: nothing about B leaks
    for method, path, body in (
        ("POST", f"/v1/banks/{bank_b}/recall", {"query": "vault code"}),
        ("POST", f"/v1/banks/{bank_b}/memories", {"content": "planted by A"}),
        ("POST", f"/v1/banks/{bank_b}/procedures", {"steps": ["planted"]}),
        ("PUT", f"/v1/banks/{bank_b}/profile", {"text": "planted by A"}),
    ):
        assert_error(await as_a.request(method, path, json=body), 403, "forbidden")


async def test_bank_a_cannot_reach_b_through_ids_or_filters(app_client: AppClient, keys, banks):
    bank_a, bank_b = banks
    owner_b = app_client(auth=keys, key=KEY_B)
    secret_id = await _retained(owner_b, bank_b, "vault code 4711", tags=["vault"])
    as_a = app_client(auth=keys, key=KEY_A)
    await _retained(as_a, bank_a, "A's own note about lunch")
    # B's memory id asked for inside bank A: just another id A does not have.
    assert_error(await as_a.get(f"/v1/banks/{bank_a}/memories/{secret_id}"), 404, "not_found")
    # Filters that would match B's memory find nothing in A.
    recall = await as_a.post(
        f"/v1/banks/{bank_a}/recall", json={"query": "vault code 4711", "tags": ["vault"]}
    )
    assert recall.status_code == 200 and recall.json()["results"] == []
    everything = await as_a.post(f"/v1/banks/{bank_a}/recall", json={"query": "vault lunch"})
    assert {h["text"] for h in everything.json()["results"]} == {"A's own note about lunch"}
    # Crafted bank ids never land in B.
    for crafted in (f"{bank_a}%2F..%2F{bank_b}", f"{bank_a}%00{bank_b}", f"{bank_b}%20"):
        response = await as_a.post(f"/v1/banks/{crafted}/recall", json={"query": "vault"})
        assert response.status_code in (403, 404), response.text
        assert "4711" not in response.text


async def test_a_key_for_every_bank_reads_both(app_client: AppClient, keys, banks):
    bank_a, bank_b = banks
    admin = app_client(auth=keys, key=KEY_ALL)
    for bank in banks:
        memory_id = await _retained(admin, bank, f"note in {bank}")
        assert (await admin.get(f"/v1/banks/{bank}/memories/{memory_id}")).status_code == 200
    # Health stays open for probes.
    assert (await app_client(auth=keys).get("/healthz")).status_code == 200


def test_keys_are_kept_as_digests_and_never_shown():
    keys = ApiKeys(
        {KEY_A: ["alice"], f"sha256:{hashlib.sha256(KEY_B.encode()).hexdigest()}": ["*"]}
    )
    assert keys.banks_for(KEY_A) == frozenset({"alice"})
    assert keys.banks_for(KEY_B) == frozenset({"*"})
    assert keys.banks_for(KEY_A + "x") is None
    assert keys.allows(KEY_B, "anyone") and not keys.allows(KEY_A, "bob")
    assert KEY_A not in repr(keys) and repr(keys) == "ApiKeys(2 keys)"
    assert all(KEY_A not in str(v) for v in vars(keys).values())


@pytest.mark.parametrize(
    "grants",
    [{"short": ["a"]}, {KEY_A: []}, {KEY_A: ["../b"]}, {"sha256:abcd": ["a"]}],
)
def test_malformed_keys_are_a_configuration_error(grants):
    with pytest.raises(ConfigurationError) as caught:
        ApiKeys(grants)
    assert KEY_A not in str(caught.value)


def test_settings_read_keys_from_json_env_and_a_file(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("COGSUB_API__KEYS", json.dumps({KEY_A: ["alice"]}))
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({KEY_B: ["bob", "carol"]}))
    monkeypatch.setenv("COGSUB_API__KEYS_FILE", str(path))
    settings = Settings()
    assert KEY_A not in repr(settings) and KEY_A not in str(settings)
    keys = build_api_keys(settings.api)
    assert keys is not None and len(keys) == 2
    assert keys.allows(KEY_A, "alice") and keys.allows(KEY_B, "carol")
    assert not keys.allows(KEY_A, "bob")


def test_keys_are_required_off_loopback_and_optional_on_it():
    assert build_api_keys(ApiSettings()) is None  # 127.0.0.1 without keys: open
    with pytest.raises(ConfigurationError, match="COGSUB_API__KEYS"):
        build_api_keys(ApiSettings(host="0.0.0.0"))
    with pytest.raises(ConfigurationError):
        build_api_keys(ApiSettings(require_keys=True))
    assert build_api_keys(ApiSettings(host="0.0.0.0", keys={KEY_A: ["a"]})) is not None
    assert build_api_keys(ApiSettings(host="0.0.0.0", require_keys=False)) is None
    # Keys given on loopback are enforced too: configuring them means wanting them.
    assert build_api_keys(ApiSettings(keys={KEY_A: ["a"]})) is not None


def test_require_keys_and_limits_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("COGSUB_API__REQUIRE_KEYS", "true")
    monkeypatch.setenv("COGSUB_API__MAX_BODY_BYTES", "2048")
    monkeypatch.setenv("COGSUB_API__PORT", "9000")
    api = Settings().api
    assert api.require_keys is True and api.keys_required()
    assert api.max_body_bytes == 2048 and api.url == "http://127.0.0.1:9000"


def test_an_unreadable_keys_file_is_a_configuration_error(tmp_path: Path):
    with pytest.raises(ConfigurationError, match="cannot read"):
        build_api_keys(ApiSettings(keys_file=tmp_path / "absent.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('["not", "a", "mapping"]')
    with pytest.raises(ConfigurationError, match="must map"):
        build_api_keys(ApiSettings(keys_file=bad))
