"""/v1/operations and /ui without a server or a browser: the round log, grants, the policy."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.console.mount import CONSOLE_POLICY, static_dir
from cogsub.console.rounds import OperationsSources, RoundLog
from cogsub.core.memory import ConsolidationReport
from cogsub.core.operations import PipelineLag

KEY_A = "operations-key-for-a-0123456789"
KEY_ALL = "operations-key-for-all-0123456789"
START = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _ticking() -> Callable[[], datetime]:
    ticks = iter(range(10_000))
    return lambda: START + timedelta(seconds=next(ticks))


def _log(*banks: str, per_bank: int = 10, most_banks: int = 10) -> RoundLog:
    log = RoundLog(per_bank, banks=most_banks, clock=_ticking())
    for n, bank in enumerate(banks):
        log.record(ConsolidationReport(bank_id=bank, scanned=n))
    return log


def test_rounds_come_newest_first_filtered_by_grant_and_bank() -> None:
    log = _log("a", "b", "a", "c")
    assert [r.report.scanned for r in log.latest(banks=None)] == [3, 2, 1, 0]
    assert [r.report.scanned for r in log.latest(banks={"a", "c"})] == [3, 2, 0]
    assert [r.report.scanned for r in log.latest(banks={"a", "c"}, bank_id="a")] == [2, 0]
    assert log.latest(banks={"b"}, bank_id="a") == []
    assert [r.report.scanned for r in log.latest(banks=None, limit=2)] == [3, 2]
    assert log.latest(banks=None)[0].finished_at == "2026-01-02T03:04:08Z"
    assert log.banks() == ["a", "b", "c"]


def test_the_oldest_round_of_a_bank_falls_off_only_that_banks_rounds() -> None:
    log = _log("a", "b", "b", "b", per_bank=2)
    assert [r.report.scanned for r in log.latest(banks=None)] == [3, 2, 0]


def test_another_tenants_busy_rounds_never_push_a_banks_rounds_out() -> None:
    log = _log("a", *["busy"] * 500, per_bank=5)
    assert [r.report.scanned for r in log.latest(banks={"a"})] == [0]
    assert len(log.latest(banks=None, limit=100)) == 6


def test_past_its_bank_limit_the_log_drops_the_bank_whose_last_round_is_oldest() -> None:
    log = _log("a", "b", "a", "c", most_banks=2)
    assert log.banks() == ["a", "c"]
    assert [r.report.scanned for r in log.latest(banks=None)] == [3, 2, 0]


@pytest.mark.parametrize("limit", [0, 101])
def test_a_limit_out_of_range_is_refused(limit: int) -> None:
    with pytest.raises(ValueError, match="limit must be 1..100"):
        _log("a").latest(banks=None, limit=limit)


def test_a_log_needs_room_for_one_round_of_one_bank() -> None:
    with pytest.raises(ValueError, match="per_bank must be at least 1, got 0"):
        RoundLog(0)
    with pytest.raises(ValueError, match="banks must be at least 1, got 0"):
        RoundLog(banks=0)


def test_the_round_hook_feeds_the_other_hook_too() -> None:
    seen: list[str] = []
    log = RoundLog()
    log.beside(lambda report: seen.append(report.bank_id))(ConsolidationReport(bank_id="z"))
    assert seen == ["z"] and log.banks() == ["z"]


async def _lag() -> PipelineLag:
    return PipelineLag(ingestion=3, extraction=None)


Client = Callable[..., httpx.AsyncClient]


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    opened: list[httpx.AsyncClient] = []

    def make(
        keys: ApiKeys | None, key: str | None = None, console: bool = True
    ) -> httpx.AsyncClient:
        app = create_app(
            service=None,  # type: ignore[arg-type]  # these routes never reach it
            auth=keys,
            limits=ApiLimits(),
            operations=OperationsSources(rounds=_log("a", "b"), lag=_lag),
            console=console,
        )
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        made = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1", headers=headers
        )
        opened.append(made)
        return made

    yield make
    for made in opened:
        await made.aclose()


KEYS = ApiKeys({KEY_A: ["a"], KEY_ALL: ["*"]})


async def test_without_keys_the_caller_is_an_operator(client: Client) -> None:
    status = (await client(None).get("/v1/operations/status")).json()
    assert status == {
        "keys_required": False,
        "operator": True,
        "banks": None,
        "lag": {"ingestion": 3, "extraction": None},
    }


async def test_a_bank_key_sees_its_grant_and_its_banks_rounds_only(client: Client) -> None:
    api = client(KEYS, KEY_A)
    status = (await api.get("/v1/operations/status")).json()
    assert (status["operator"], status["banks"]) == (False, ["a"])
    assert status["lag"] is None  # it counts every tenant's records
    rounds = (await api.get("/v1/operations/consolidation-rounds")).json()["rounds"]
    assert [r["report"]["bank_id"] for r in rounds] == ["a"]
    other = await api.get("/v1/operations/consolidation-rounds", params={"bank_id": "b"})
    assert other.status_code == 403
    everything = await client(KEYS, KEY_ALL).get("/v1/operations/consolidation-rounds")
    assert [r["report"]["bank_id"] for r in everything.json()["rounds"]] == ["b", "a"]
    operator = (await client(KEYS, KEY_ALL).get("/v1/operations/status")).json()
    assert operator["lag"] == {"ingestion": 3, "extraction": None}


async def test_a_bank_key_naming_a_malformed_bank_it_lacks_is_refused_not_validated(
    client: Client,
) -> None:
    answer = await client(KEYS, KEY_A).get(
        "/v1/operations/consolidation-rounds", params={"bank_id": "../b"}
    )
    assert answer.status_code == 403
    malformed = await client(KEYS, KEY_ALL).get(
        "/v1/operations/consolidation-rounds", params={"bank_id": "../b"}
    )
    assert malformed.status_code == 422 and "bank_id" in malformed.text


@pytest.mark.parametrize("key", [None, "an-unknown-key-0123456789"])
async def test_with_keys_a_caller_without_a_known_key_is_refused(
    client: Client, key: str | None
) -> None:
    answer = await client(KEYS, key).get("/v1/operations/status")
    assert answer.status_code == 401
    assert answer.json()["error"]["type"] == "unauthenticated"


async def test_a_limit_out_of_range_names_the_parameter(client: Client) -> None:
    answer = await client(None).get("/v1/operations/consolidation-rounds?limit=0")
    assert answer.status_code == 422
    assert "limit" in answer.text


async def test_every_console_answer_carries_the_self_only_policy(client: Client) -> None:
    api = client(None)
    moved = await api.get("/ui")
    assert moved.status_code == 308 and moved.headers["location"] == "/ui/"
    for path in ("/ui", "/ui/"):  # what `curl -I` sends
        head = await api.head(path)
        assert head.status_code in (200, 308) and not head.content, path
        assert head.headers["content-security-policy"] == CONSOLE_POLICY, path
    for path in ("/ui", "/ui/", "/ui/app.js", "/ui/style.css", "/ui/pages/banks.js"):
        answer = await api.get(path)
        assert answer.headers["content-security-policy"] == CONSOLE_POLICY, path
        assert answer.headers["x-content-type-options"] == "nosniff"
    page = await api.get("/ui/")
    assert page.status_code == 200 and '<script type="module" src="app.js">' in page.text
    script = await api.get("/ui/app.js")
    assert script.headers["content-type"].split(";")[0] in (
        "text/javascript",
        "application/javascript",
    )


async def test_the_console_can_be_turned_off(client: Client) -> None:
    api = client(None, console=False)
    assert (await api.get("/ui/")).status_code == 404
    assert (await api.get("/v1/operations/status")).status_code == 200


def test_the_assets_name_no_other_host_and_every_import_ships() -> None:
    root = static_dir()
    assets = sorted(p for p in root.rglob("*") if p.is_file())
    assert {p.suffix for p in assets} == {".html", ".js", ".css"}
    for asset in assets:
        text = asset.read_text()
        assert not re.search(
            r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text.replace("http://www.w3.org/2000/svg", "")
        ), asset
        for target in re.findall(r'from "(\.{1,2}/[^"]+)"', text):
            assert (asset.parent / target).resolve().is_file(), f"{asset.name} imports {target}"


async def test_an_app_without_sources_ran_no_round_and_knows_no_lag() -> None:
    app = create_app(service=None, auth=None, limits=ApiLimits())  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
        status = (await api.get("/v1/operations/status")).json()
        assert status["lag"] == {"ingestion": None, "extraction": None}
        assert (await api.get("/v1/operations/consolidation-rounds")).json() == {"rounds": []}
        assert (await api.get("/ui/")).status_code == 404  # create_app serves it only if asked
