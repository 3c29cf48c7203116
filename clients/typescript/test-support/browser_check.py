"""Run the built SDK in a real headless chromium against a live API; print what it saw as JSON.

    python browser_check.py API_URL API_KEY DIST_DIR

The page and the SDK's modules are served from the API's own origin (Playwright answers
``/__sdk/...`` from DIST_DIR; the API sends no CORS headers, so a browser client is
same-origin with it, e.g. behind one reverse proxy). Only requests to that origin are
allowed. Used by test/browser.test.ts; exits 3 when no browser or Playwright is available.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome")
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
PAGE = "<!doctype html><title>sdk</title>"

# Runs in the page: the seed's calls through the SDK as a browser loads it.
SCENARIO = """
async ([apiKey, bank]) => {
  const sdk = await import("/__sdk/index.js");
  const cm = new sdk.MemoryClient({ baseUrl: location.origin, apiKey, timeoutMs: 20000 });
  const kept = await cm.retainProcedure(bank, ["drain the pod", "restart the pod"],
    { rationale: "safe restart", wait: true });
  await cm.retain(bank, "Acme HQ is in Berlin.", { factType: "world", wait: true });
  const found = await cm.recall(bank, "how do I restart?", { types: ["procedure"] });
  const lines = [];
  for await (const line of cm.export(bank)) lines.push(line);
  const pages = [];
  for await (const page of cm.listMemories(bank, { limit: 1 })) pages.push(page.memories.length);
  let refused = null;
  try { await cm.getMemory(bank, "no-such-memory"); } catch (e) {
    refused = { name: e.name, notFound: e instanceof sdk.NotFoundError, status: e.status };
  }
  let invalid = null;
  try { await cm.recall(bank, "x", { k: 0 }); } catch (e) { invalid = e.problems; }
  const anonymous = new sdk.MemoryClient({ baseUrl: location.origin, retries: 0 });
  let unauthenticated = null;
  try { await anonymous.recall(bank, "x"); } catch (e) {
    unauthenticated = e instanceof sdk.AuthenticationError;
  }
  return { kept: kept.memory_id, recalled: found.results.map((h) => h.id),
           steps: found.results[0]?.steps, exportLines: lines.length, pages, refused,
           invalid, unauthenticated };
}
"""


def _browser() -> str | None:
    return next((found for name in BROWSER_NAMES if (found := shutil.which(name))), None)


def main(api_url: str, api_key: str, dist: Path, bank: str) -> int:
    executable = _browser()
    try:
        from playwright.sync_api import Route, sync_playwright
    except ImportError:
        executable = None
    if executable is None:
        print(json.dumps({"missing": "chromium and Playwright's Python package are needed"}))
        return 3
    origin = api_url.rstrip("/")
    elsewhere: list[str] = []

    def serve_sdk(route: Route) -> None:
        name = route.request.url.removeprefix(f"{origin}/__sdk/")
        if name == "page.html":
            route.fulfill(body=PAGE, content_type="text/html")
            return
        path = (dist / name).resolve()
        if path.parent != dist.resolve() or not path.is_file():
            route.fulfill(status=404, body="")
            return
        route.fulfill(body=path.read_text(), content_type="text/javascript")

    def only_the_api(route: Route) -> None:
        if not route.request.url.startswith(f"{origin}/"):
            elsewhere.append(route.request.url)
            route.abort()
            return
        route.continue_()

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=executable, args=LAUNCH_ARGS)
        try:
            page = browser.new_page()
            page.route("**/*", only_the_api)
            page.route(f"{origin}/__sdk/**", serve_sdk)
            page.goto(f"{origin}/__sdk/page.html")
            result = page.evaluate(SCENARIO, [api_key, bank])
        finally:
            browser.close()
    print(json.dumps({**result, "elsewhere": elsewhere}))
    return 0


if __name__ == "__main__":
    api, key, dist_dir, bank_id = sys.argv[1:5]
    raise SystemExit(main(api, key, Path(dist_dir), bank_id))
