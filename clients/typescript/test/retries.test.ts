/**
 * Timeouts and retries against real loopback HTTP servers that misbehave on purpose:
 * a 503 with Retry-After, a 429, a server that never answers, a closed port.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { inspect } from "node:util";
import { after, test } from "node:test";

import { CogsubError, MemoryClient, UnavailableError } from "../src/index.js";

type Handler = (request: IncomingMessage, response: ServerResponse, count: number) => void;

const servers: Server[] = [];

async function serve(handler: Handler): Promise<{ url: string; count: () => number }> {
  let count = 0;
  const server = createServer((request, response) => {
    count += 1;
    request.resume();
    handler(request, response, count);
  });
  servers.push(server);
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, count: () => count };
}

after(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((done) => server.close(done));
  }
});

const RECORD = {
  id: "m-1",
  bank_id: "jane",
  fact_type: null,
  text: "hello",
  timestamp: "2026-01-01T00:00:00Z",
  tags: [],
  object_storage_key: "k",
  importance_score: 0.5,
  retrieval_count: 0,
  archived_event: {},
};

function answer(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  response.writeHead(status, { "Content-Type": "application/json", ...headers });
  response.end(JSON.stringify(body));
}

const unavailable = { error: { type: "unavailable", message: "index briefly down", problems: [] } };

test("a 503 is retried after its Retry-After, then the answer is returned", async () => {
  const api = await serve((_req, res, n) =>
    n === 1 ? answer(res, 503, unavailable, { "Retry-After": "1" }) : answer(res, 200, RECORD),
  );
  const cm = new MemoryClient({ baseUrl: api.url, retries: 2 });
  const started = performance.now();
  const record = await cm.getMemory("jane", "m-1");
  const waited = performance.now() - started;
  assert.equal(record.text, "hello");
  assert.equal(api.count(), 2);
  assert.ok(waited >= 950, `waited ${waited.toFixed(0)} ms for Retry-After: 1`);
});

test("retries stop after `retries` more attempts with the last error", async () => {
  const api = await serve((_req, res) =>
    answer(res, 429, { error: { type: "rate_limited", message: "slow down" } }),
  );
  const cm = new MemoryClient({ baseUrl: api.url, retries: 2, retryBaseDelayMs: 1 });
  await assert.rejects(cm.getMemory("jane", "m-1"), (error: unknown) => {
    assert.ok(error instanceof UnavailableError);
    assert.equal(error.status, 429);
    assert.equal(error.message, "slow down");
    return true;
  });
  assert.equal(api.count(), 3);
});

test("a Retry-After past the longest wait is not waited for", async () => {
  const api = await serve((_req, res) => answer(res, 503, unavailable, { "Retry-After": "120" }));
  const cm = new MemoryClient({ baseUrl: api.url, retries: 3, retryMaxDelayMs: 1000 });
  await assert.rejects(cm.getMemory("jane", "m-1"), (error: unknown) => {
    assert.ok(error instanceof UnavailableError && error.retryAfterMs === 120_000);
    return true;
  });
  assert.equal(api.count(), 1);
});

test("errors that are not retryable are never retried", async () => {
  const api = await serve((_req, res) =>
    answer(res, 404, { error: { type: "not_found", message: "no such memory" } }),
  );
  const cm = new MemoryClient({ baseUrl: api.url, retries: 3, retryBaseDelayMs: 1 });
  await assert.rejects(cm.getMemory("jane", "m-1"), CogsubError);
  assert.equal(api.count(), 1);
});

test("a silent server times out; a read is retried, a retain without an id is not", async () => {
  const api = await serve(() => undefined); // takes the request, never answers
  const cm = new MemoryClient({
    baseUrl: api.url,
    timeoutMs: 150,
    retries: 1,
    retryBaseDelayMs: 1,
  });
  await assert.rejects(cm.getMemory("jane", "m-1"), (error: unknown) => {
    assert.ok(error instanceof UnavailableError);
    assert.match(error.message, /did not answer .* within 150 ms/);
    return true;
  });
  assert.equal(api.count(), 2);
  await assert.rejects(cm.retain("jane", "might be stored twice"), UnavailableError);
  assert.equal(api.count(), 3, "a retain that may have been stored is not sent again");
  await assert.rejects(
    cm.retain("jane", "same id, same content", { memoryId: "m-2" }),
    UnavailableError,
  );
  assert.equal(api.count(), 5, "a retain with its own id is idempotent, so retried");
});

test("an answer whose body stalls after its headers times out too", async () => {
  const api = await serve((_req, res) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.write('{"id": "m-1",'); // and never the rest
  });
  const cm = new MemoryClient({ baseUrl: api.url, timeoutMs: 200, retries: 0 });
  await assert.rejects(cm.getMemory("jane", "m-1"), /did not answer .* within 200 ms/);
});

test("a closed port is UnavailableError, retried since nothing was sent", async () => {
  const api = await serve(() => undefined);
  const port = new URL(api.url).port;
  const closing = servers.pop() as Server;
  await new Promise((done) => closing.close(done));
  const cm = new MemoryClient({
    baseUrl: `http://127.0.0.1:${port}`,
    retries: 2,
    retryBaseDelayMs: 1,
  });
  await assert.rejects(cm.retain("jane", "x"), (error: unknown) => {
    assert.ok(error instanceof UnavailableError);
    assert.match(error.message, /ECONNREFUSED/);
    return true;
  });
});

test("the caller's signal cancels the call and its retries", async () => {
  const api = await serve((_req, res) => answer(res, 503, unavailable, { "Retry-After": "5" }));
  const cm = new MemoryClient({ baseUrl: api.url, retries: 3 });
  const controller = new AbortController();
  setTimeout(() => controller.abort(new Error("caller gave up")), 200);
  const started = performance.now();
  await assert.rejects(
    cm.getMemory("jane", "m-1", { signal: controller.signal }),
    /caller gave up/,
  );
  assert.ok(performance.now() - started < 2000);
  assert.equal(api.count(), 1);
});

test("the key goes as a bearer token, with the actor", async () => {
  let seen: IncomingMessage | undefined;
  const api = await serve((req, res) => {
    seen = req;
    answer(res, 200, RECORD);
  });
  const cm = new MemoryClient({
    baseUrl: `${api.url}/`,
    apiKey: "k-0123456789abcdef",
    actor: "billing-bot",
  });
  await cm.getMemory("jane", "m-1");
  assert.equal(seen?.headers.authorization, "Bearer k-0123456789abcdef");
  assert.equal(seen?.headers["x-cogsub-actor"], "billing-bot");
  assert.equal(seen?.url, "/v1/banks/jane/memories/m-1");
  assert.equal(String(cm), `MemoryClient(${api.url})`);
  assert.ok(!inspect(cm, { showHidden: true, depth: 10 }).includes("k-0123456789abcdef"));
});

test("bad options name the option", () => {
  assert.throws(() => new MemoryClient({ baseUrl: "localhost:8470" }), /baseUrl: must be an http/);
  assert.throws(
    () => new MemoryClient({ baseUrl: "http://x", timeoutMs: -1 }),
    /timeoutMs: must be a number/,
  );
  assert.throws(
    () => new MemoryClient({ baseUrl: "http://x", retries: Number.NaN }),
    /retries: must be a number/,
  );
});
