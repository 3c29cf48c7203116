"""The console in a real browser against a live `cogsub run` with seeded memories."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from cogsub.runtime.adapters import build_archive
from cogsub.runtime.wiring import embedded_settings
from tests.console.conftest import PHONE, ConsolePage, ConsoleServer, running_console
from tests.services.api.rejections import occupy_key, retain_body

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

Console = Callable[..., ConsolePage]


def _retain(api: httpx.Client, bank: str, content: str, fact_type: str, **more: object) -> str:
    body = {"content": content, "fact_type": fact_type, "wait": True, **more}
    answer = api.post(f"/v1/banks/{bank}/memories", json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["memory_id"])


def _consolidate(api: httpx.Client, bank: str) -> dict[str, list[str]]:
    answer = api.post(f"/v1/banks/{bank}/consolidate")
    assert answer.status_code == 200, answer.text
    report: dict[str, list[str]] = answer.json()
    return report


def test_the_banks_page_lists_the_banks_with_lag(
    server: ConsoleServer, console: Console, unique_name: str
) -> None:
    banks = [f"{unique_name}-ops", f"{unique_name}-home"]
    with server.client() as api:
        for bank in banks:
            _retain(api, bank, f"{bank} keeps its runbooks in the wiki.", "world")
    tab = console(server)
    tab.open("#/banks")
    rows = tab.page.locator("#banks tbody tr")
    listed = rows.evaluate_all("rows => rows.map(r => r.dataset.bank)")
    assert set(banks) <= set(listed)
    assert tab.page.locator('[data-lag="Ingestion lag"]').inner_text().isdigit()
    row = tab.page.locator(f'#banks tr[data-bank="{banks[0]}"]')
    assert "world 1" in row.inner_text()
    tab.shoot("banks")
    tab.open(f"#/memories/{banks[0]}")
    assert tab.page.locator("#memories tbody tr").count() == 1
    tab.page.check("input[value=procedure]")
    tab.rendered_after(lambda: tab.page.press("input[name=tags]", "Enter"))
    assert tab.page.locator("#no-memories").count() == 1  # no procedure in that bank
    tab.page.go_back()
    tab.page.wait_for_selector("#memories tbody tr")
    tab.shoot("memories")


def test_a_correction_consolidated_shows_its_lineage_on_the_preference(
    server: ConsoleServer, console: Console, unique_name: str
) -> None:
    bank = f"{unique_name}-jane"
    said = "No — for day-planning use my personal Gmail, never the work mail."
    with server.client() as api:
        correction = _retain(api, bank, said, "correction")
        report = _consolidate(api, bank)
    (preference,) = report["preferences"]
    tab = console(server)
    tab.open(f"#/memory/{bank}/{preference}")
    graph = tab.page.locator("#lineage svg.lineage")
    assert graph.locator(f'g.node[data-id="{correction}"]').count() == 1
    assert graph.locator(f'g.node.self[data-id="{preference}"]').count() == 1
    edge = graph.locator(f'g.edge[data-from="{correction}"][data-to="{preference}"]')
    assert edge.count() == 1
    assert "personal Gmail" in tab.page.locator("main").inner_text()
    tab.shoot("memory")
    # The correction's node links to its own page.
    tab.rendered_after(lambda: graph.locator(f'a:has(g[data-id="{correction}"])').click())
    assert correction in tab.page.locator("h1").inner_text()
    tab.open(f"#/operations/{bank}")
    assert preference in tab.page.locator(f'#rounds tr[data-bank="{bank}"]').first.inner_text()


def test_a_procedures_versions_are_drawn_with_the_rule_that_superseded_each(
    server: ConsoleServer, console: Console, unique_name: str
) -> None:
    bank = f"{unique_name}-runbook"
    with server.client() as api:
        first = api.post(
            f"/v1/banks/{bank}/procedures",
            json={"steps": ["make build", "kubectl apply"], "wait": True},
        ).json()["memory_id"]
        second = api.post(
            f"/v1/banks/{bank}/procedures",
            json={
                "steps": ["make build", "kubectl diff", "kubectl apply"],
                "rationale": "see the change first",
                "supersedes": first,
                "wait": True,
            },
        ).json()["memory_id"]
    tab = console(server)
    tab.open(f"#/memory/{bank}/{second}")
    steps = tab.page.locator("ol.steps li").all_inner_texts()
    assert steps == ["make build", "kubectl diff", "kubectl apply"]
    assert "Rationale: see the change first" in tab.page.locator("main").inner_text()
    edge = tab.page.locator(f'#lineage g.edge[data-from="{first}"][data-to="{second}"]')
    assert edge.count() == 1
    rule = edge.get_attribute("data-label") or ""
    assert rule and rule in tab.page.locator("ul.rules").inner_text()
    tab.shoot("procedure")


def test_the_playground_bars_sum_to_each_score(
    server: ConsoleServer, console: Console, unique_name: str
) -> None:
    bank = f"{unique_name}-deploy"
    with server.client() as api:
        for text in (
            "Deploys go out with kubectl apply after make build.",
            "The deploy window is Tuesday morning.",
            "Staging deploys need no approval.",
        ):
            _retain(api, bank, text, "world")
        steps = ["make build", "kubectl apply -f prod.yaml", "curl /health"]
        kept = api.post(
            f"/v1/banks/{bank}/procedures",
            json={"steps": steps, "rationale": "standard prod deploy", "wait": True},
        )
        assert kept.status_code == 201, kept.text
    tab = console(server)
    tab.open(f"#/playground/{bank}")
    tab.page.fill("input[name=query]", "how do I deploy?")
    tab.rendered_after(lambda: tab.page.press("input[name=query]", "Enter"))  # Enter submits
    hits = tab.page.locator("#hits li.hit")
    assert hits.count() == 4
    for n in range(hits.count()):
        hit = hits.nth(n)
        score = float(hit.get_attribute("data-score") or "nan")
        parts = hit.locator(".seg").evaluate_all("s => s.map(e => Number(e.dataset.contribution))")
        assert len(parts) >= 2
        assert sum(parts) == pytest.approx(score, abs=1e-9)
        assert hit.locator(".score").inner_text() == f"{score:.4f}"
        widths = hit.locator(".seg").evaluate_all(
            "s => s.map(e => e.getBoundingClientRect().width)"
        )
        track = hit.locator(".bar").evaluate("b => b.getBoundingClientRect().width")
        best = float(hits.first.get_attribute("data-score") or "nan")
        assert sum(widths) == pytest.approx(track * score / best, abs=1.5)  # px rounding
    tab.shoot("playground")
    phone = console(server, viewport=PHONE, dark=True)
    phone.open(f"#/playground/{bank}?q=deploy")
    assert phone.page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    phone.shoot("playground-phone-dark")


def _retrievals(api: httpx.Client, bank: str, memory_id: str) -> int:
    answer = api.get(f"/v1/banks/{bank}/memories/{memory_id}/history")
    assert answer.status_code == 200, answer.text
    return int(answer.json()["signals"]["retrieval_count"])


def test_the_playground_looks_without_reinforcing_and_its_picker_keeps_the_query(
    server: ConsoleServer, console: Console, unique_name: str
) -> None:
    bank, other = f"{unique_name}-vpn", f"{unique_name}-vpn-other"
    with server.client() as api:
        memory = _retain(api, bank, "The VPN needs a hardware token.", "world")
        _retain(api, other, "The office wifi is open.", "world")
    tab = console(server)
    tab.open(f"#/playground/{bank}?q=VPN+token&k=5&max_tokens=300&types=world")
    assert tab.page.locator(f'#hits li[data-memory="{memory}"]').count() == 1
    assert memory in tab.page.locator("#context-block").inner_text()
    time.sleep(1.5)  # retrieval feedback is flushed within 0.5 s of a recall
    with server.client() as api:
        assert _retrievals(api, bank, memory) == 0
        # The same context call, reinforcing: the count does move, so the check above can fail.
        counted = api.post(f"/v1/banks/{bank}/context", json={"query": "VPN token"})
        assert counted.status_code == 200, counted.text
        deadline = time.monotonic() + 10
        while _retrievals(api, bank, memory) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _retrievals(api, bank, memory) == 1
    tab.rendered_after(lambda: tab.page.select_option("select[name=bank]", other))
    route = tab.page.evaluate("location.hash")
    assert route.startswith(f"#/playground/{other}?")
    for part in ("q=VPN+token", "k=5", "max_tokens=300", "types=world"):
        assert part in route, route


def test_banks_retained_while_the_tab_is_open_appear_without_a_reload(
    server: ConsoleServer, console: Console, unique_name: str
) -> None:
    bank = f"{unique_name}-late"
    tab = console(server)
    tab.open("#/banks")
    assert tab.page.locator(f'#banks tr[data-bank="{bank}"]').count() == 0
    with server.client() as api:
        _retain(api, bank, "The late bank keeps its notes here.", "world")
    tab.open("#/operations")  # a page with a bank picker
    options = tab.page.locator("select[name=bank] option").all_inner_texts()
    assert bank in options
    tab.open("#/banks")
    assert "world 1" in tab.page.locator(f'#banks tr[data-bank="{bank}"]').inner_text()


def test_a_dead_letter_is_republished_from_the_operations_page(
    server: ConsoleServer, console: Console, unique_name: str
) -> None:
    bank = f"{unique_name}-dlq"
    content = "The staging server IP is 10.0.0.5."
    # Ingestion will refuse the retain: its archive key holds other content. (In a thread:
    # Playwright's sync API keeps an event loop running in this one.)
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, _occupy(server.data_dir, bank, "ip-1", content)).result()
    with server.client() as api:
        refused = api.post(f"/v1/banks/{bank}/memories", json=retain_body("ip-1", content))
        assert refused.status_code == 409, refused.text
        before = _letters_of(api, bank, at_least=1)
        assert len(before) == 1, refused.text
    tab = console(server)
    tab.open("#/operations")
    assert tab.page.locator('#readiness [data-state="ok"]').count() == 3
    row = tab.page.locator(f'#dead-letters tr[data-letter="{before[0]}"]')
    assert "conflict" in row.inner_text() and "already archived" in row.inner_text()
    tab.shoot("operations")
    row.get_by_role("button", name="Re-publish").click()
    tab.page.wait_for_function(
        "id => document.querySelector(`tr[data-letter='${id}'] [role=status]`)"
        ".textContent.startsWith('re-published to')",
        arg=before[0],
    )
    # Published again with its cause unfixed, it is refused again: a second letter.
    with server.client() as api:
        assert len(_letters_of(api, bank, at_least=2)) == 2


async def _occupy(data_dir: Path, bank: str, memory_id: str, content: str) -> None:
    archive, _ = build_archive(embedded_settings(data_dir, embedder="hash"))
    try:
        await occupy_key(archive, bank, memory_id, content)
    finally:
        await archive.close()


def _letters_of(api: httpx.Client, bank: str, at_least: int) -> list[str]:
    """The bank's dead letters, once there are ``at_least`` (they are written after the 409)."""
    deadline = time.monotonic() + 20
    while True:
        page = api.get("/v1/dead-letters", params={"limit": 500})
        assert page.status_code == 200, page.text
        found = [d["id"] for d in page.json()["dead_letters"] if d["bank_id"] == bank]
        if len(found) >= at_least or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


KEY_A = "console-key-for-bank-a-0123456789"
KEY_OPS = "console-key-for-every-bank-0123456789"


def test_a_key_for_bank_a_never_shows_bank_b(
    tmp_path: Path, console: Console, unique_name: str
) -> None:
    bank_a, bank_b = f"{unique_name}-alpha", f"{unique_name}-bravo"
    keys = f'{{"{KEY_A}": ["{bank_a}"], "{KEY_OPS}": ["*"]}}'
    (tmp_path / "data").mkdir()
    env = {"COGSUB_API__KEYS": keys}
    with running_console(tmp_path / "data", tmp_path / "run.log", env, KEY_OPS) as keyed:
        with keyed.client() as api:
            _retain(api, bank_a, "Alpha's deploy goes through ArgoCD.", "world")
            _retain(api, bank_b, "Bravo's deploy secret lives in vault.", "world")
            _consolidate(api, bank_b)  # a round of B exists, and must stay unseen
        tab = console(keyed)
        bodies: list[str] = []
        tab.page.on("response", lambda r: bodies.append(_text_of(r)))
        tab.page.goto(f"{keyed.url}/ui/#/banks")
        tab.page.wait_for_function("() => document.body.dataset.page === 'keys'")
        assert tab.page.evaluate("sessionStorage.length") == 0
        tab.shoot("keys")
        tab.page.fill("input[name=key]", KEY_A)
        tab.rendered_after(lambda: tab.page.press("input[name=key]", "Enter"))
        assert tab.page.evaluate("document.body.dataset.page") == "banks"
        assert bank_a in tab.page.locator("#banks").inner_text()
        for route in (
            "#/memories",
            f"#/playground/{bank_a}?q=deploy",
            "#/operations",
            "#/banks",
        ):
            tab.open(route)
            assert bank_b not in tab.page.locator("body").inner_text()
        # The lag counts every tenant's records: a bank key sees a dash and why.
        assert tab.page.locator('[data-lag="Ingestion lag"]').inner_text() == "—"
        assert tab.page.locator("#lag-note").count() == 1
        assert tab.page.evaluate("localStorage.length") == 0
        assert tab.page.evaluate("document.cookie") == ""
        assert not [b for b in bodies if bank_b in b], "bank B reached the page"
        tab.open("#/keys")
        assert tab.page.locator("#who").inner_text() != ""
        tab.rendered_after(lambda: tab.page.get_by_role("button", name="Forget the key").click())
        assert tab.page.evaluate("sessionStorage.length") == 0
        assert tab.page.locator("#who").inner_text() == ""
        assert tab.page.get_by_role("button", name="Forget the key").count() == 0
        assert "No key is set" in tab.page.locator("main").inner_text()


def _text_of(response: object) -> str:
    try:
        return str(response.text())  # type: ignore[attr-defined]
    except Exception:  # a redirect or aborted load has no body to read
        return ""


def test_every_page_fits_a_phone_and_focus_is_visible_from_the_keyboard(
    server: ConsoleServer, console: Console, unique_name: str
) -> None:
    bank = f"{unique_name}-phone"
    with server.client() as api:
        _retain(api, bank, "The on-call phone number rotates every Monday.", "world")
    phone = console(server, viewport=PHONE)
    for route in (
        "#/banks",
        f"#/memories/{bank}",
        f"#/playground/{bank}?q=on-call",
        "#/operations",
        "#/keys",
    ):
        phone.open(route)
        width = phone.page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{route} is {width} px wide"
    tab = console(server)
    tab.open("#/banks")
    # After each navigation the page's heading has focus; Tab goes on into the page.
    assert tab.page.evaluate("document.activeElement.tagName") == "H1"
    tab.page.keyboard.press("Tab")
    focused = tab.page.evaluate(
        "() => { const e = document.activeElement, s = getComputedStyle(e);"
        " return [e.closest('main') !== null, e.tagName, s.outlineStyle,"
        " parseFloat(s.outlineWidth)]; }"
    )
    assert focused[0] and focused[1] in ("A", "INPUT", "BUTTON", "SELECT"), focused
    assert focused[2] != "none" and focused[3] >= 2, focused


def test_the_policy_stops_a_request_to_another_host_and_the_tests_see_it(
    server: ConsoleServer, console: Console
) -> None:
    tab = console(server)
    tab.open("#/banks")
    # Another origin (a loopback port of nobody's): the policy refuses it before it is sent.
    tab.page.evaluate("() => fetch('http://127.0.0.1:9/leak').catch(() => null)")
    tab.page.wait_for_timeout(300)
    assert any("Content Security Policy" in e for e in tab.recorded.errors), tab.recorded.errors
    assert not [u for u in tab.recorded.requests if "127.0.0.1:9/" in u]
    tab.recorded.errors.clear()  # seen and expected: the teardown checks the rest


def test_memories_come_a_page_at_a_time_and_filter_by_tag_and_time(
    server: ConsoleServer, console: Console, unique_name: str
) -> None:
    bank = f"{unique_name}-pages"
    with server.client() as api:
        for n in range(27):
            tags = ["even"] if n % 2 == 0 else []
            _retain(api, bank, f"Ticket {n} was closed.", "experience", tags=tags)
    tab = console(server)
    tab.open(f"#/memories/{bank}")
    first = tab.page.locator("#memories tbody tr").all_inner_texts()
    assert len(first) == 25 and "Ticket 26 was closed." in first[0]  # newest first
    tab.rendered_after(lambda: tab.page.get_by_role("link", name="Next page").click())
    rest = tab.page.locator("#memories tbody tr").all_inner_texts()
    assert [r.split("\t")[2] for r in rest] == ["Ticket 1 was closed.", "Ticket 0 was closed."]
    tab.open(f"#/memories/{bank}")
    tab.page.fill("input[name=tags]", "even")
    tab.rendered_after(lambda: tab.page.press("input[name=tags]", "Enter"))
    assert tab.page.locator("#memories tbody tr").count() == 14
    tab.page.fill("input[name=since]", "2099-01-01T00:00")
    tab.rendered_after(lambda: tab.page.press("input[name=tags]", "Enter"))
    assert tab.page.locator("#no-memories").count() == 1
