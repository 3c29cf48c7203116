/**
 * The built package in a real headless chromium (through the repository's Python Playwright)
 * against a live `cogsub run`: the platform fetch, streams and AbortSignal of a browser, no
 * Node globals. Skipped when no browser is installed, unless COGSUB_TEST_REQUIRE_BROWSER=1.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";

import { type LiveServer, REPO_DIR, startServer } from "../test-support/live-server.js";

const PACKAGE_DIR = new URL("../..", import.meta.url).pathname;
const KEY = "browser-key-0123456789ab";
const MISSING_BROWSER = 3;

let server: LiveServer;

before(async () => {
  server = await startServer({ COGSUB_API__KEYS: JSON.stringify({ [KEY]: ["*"] }) });
});

after(async () => {
  await server?.stop();
});

interface BrowserRun {
  missing?: string;
  kept: string;
  recalled: string[];
  steps: string[];
  exportLines: number;
  pages: number[];
  refused: { name: string; notFound: boolean; status: number };
  invalid: { field: string; rule: string }[];
  unauthenticated: boolean;
  elsewhere: string[];
}

async function runInBrowser(bank: string): Promise<BrowserRun> {
  const python = process.env.COGSUB_PYTHON ?? join(REPO_DIR, ".venv/bin/python");
  const script = join(PACKAGE_DIR, "test-support/browser_check.py");
  const args = [script, server.url, KEY, join(PACKAGE_DIR, "dist"), bank];
  try {
    const { stdout } = await promisify(execFile)(python, args, { timeout: 120_000 });
    return JSON.parse(stdout) as BrowserRun;
  } catch (error) {
    const failed = error as { code?: unknown; stdout?: string; stderr?: string };
    if (failed.code === MISSING_BROWSER) return JSON.parse(failed.stdout ?? "{}") as BrowserRun;
    throw new Error(`browser check failed: ${failed.stderr ?? String(error)}`);
  }
}

test("the SDK works in a browser: retain, recall, export, pages, errors", async (t) => {
  const run = await runInBrowser("browser-bank");
  if (run.missing !== undefined) {
    if (process.env.COGSUB_TEST_REQUIRE_BROWSER === "1") assert.fail(run.missing);
    t.skip(run.missing);
    return;
  }
  assert.deepEqual(run.recalled, [run.kept]);
  assert.deepEqual(run.steps, ["drain the pod", "restart the pod"]);
  assert.ok(run.exportLines >= 4, `export lines: ${run.exportLines}`);
  assert.deepEqual(run.pages, [1, 1]);
  assert.deepEqual(run.refused, { name: "NotFoundError", notFound: true, status: 404 });
  assert.deepEqual(run.invalid, [{ field: "k", rule: "must be at least 1" }]);
  assert.equal(run.unauthenticated, true);
  assert.deepEqual(run.elsewhere, [], "the page reached no other origin");
});
