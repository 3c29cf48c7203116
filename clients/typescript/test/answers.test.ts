/** Error bodies into classes, Retry-After, when to retry, and argument checks: no server. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { errorFor, mayRetry, readErrorBody, retryAfterMs, retryDelayMs } from "../src/answers.js";
import {
  AuthenticationError,
  CogsubError,
  ConflictError,
  InvalidInputError,
  NotConfiguredError,
  NotFoundError,
  PermissionDeniedError,
  RejectedConflictError,
  RejectedError,
  RejectedInputError,
  ServerError,
  UnavailableError,
} from "../src/errors.js";
import {
  brokenRule,
  listArg,
  pathOf,
  queryOf,
  stepsArg,
  tagParams,
  wireTime,
} from "../src/requests.js";

const body = (
  type: string,
  message: string,
  problems: { field: string; rule: string }[] = [],
): string => JSON.stringify({ error: { type, message, problems } });

describe("errorFor", () => {
  const cases: [number, string, typeof CogsubError][] = [
    [401, body("unauthenticated", "no key"), AuthenticationError],
    [403, body("forbidden", "not this bank"), PermissionDeniedError],
    [404, body("not_found", "no such memory"), NotFoundError],
    [409, body("conflict", "other content"), ConflictError],
    [409, body("not_configured", "set COGSUB_CHAT__MODEL"), NotConfiguredError],
    [409, body("rejected", "archived with other content"), RejectedConflictError],
    [422, body("rejected", "invalid event"), RejectedInputError],
    [
      422,
      body("invalid_input", "k: too small", [{ field: "k", rule: "too small" }]),
      InvalidInputError,
    ],
    [
      400,
      body("bad_request", "unreadable", [{ field: "(body)", rule: "JSON" }]),
      InvalidInputError,
    ],
    [413, body("payload_too_large", "too big"), InvalidInputError],
    [429, body("rate_limited", "slow down"), UnavailableError],
    [502, "<html>bad gateway</html>", UnavailableError],
    [503, body("unavailable", "index down"), UnavailableError],
    [504, "", UnavailableError],
    [500, body("internal", "boom"), ServerError],
    [501, "", ServerError],
    [418, body("teapot", "short and stout"), CogsubError],
  ];
  for (const [status, text, kind] of cases) {
    test(`${status} ${readErrorBody(text).type ?? "(no body)"} is ${kind.name}`, () => {
      const error = errorFor(status, text);
      assert.equal(error.constructor, kind);
      assert.equal(error.status, status);
      assert.equal(error.name, kind.name);
    });
  }

  test("the server's message and problems are kept", () => {
    const error = errorFor(
      422,
      body("invalid_input", "k: must be ≥ 1", [{ field: "k", rule: "must be ≥ 1" }]),
    );
    assert.equal(error.message, "k: must be ≥ 1");
    assert.deepEqual(error.problems, [{ field: "k", rule: "must be ≥ 1" }]);
  });

  test("an error without problems still names where it broke", () => {
    assert.deepEqual(errorFor(413, "").problems, [{ field: "(body)", rule: "HTTP 413" }]);
    assert.deepEqual(errorFor(422, body("rejected", "bad")).problems, [
      { field: "(ingestion)", rule: "bad" },
    ]);
  });

  test("RejectedError holds for both rejections and nothing else, as in Python", () => {
    const input = errorFor(422, body("rejected", "x"));
    const conflict = errorFor(409, body("rejected", "x"));
    assert.ok(input instanceof RejectedError && input instanceof InvalidInputError);
    assert.ok(conflict instanceof RejectedError && conflict instanceof ConflictError);
    assert.ok(!(errorFor(409, body("conflict", "x")) instanceof RejectedError));
    assert.ok(!(errorFor(422, body("invalid_input", "x")) instanceof RejectedError));
  });

  test("only unavailability is retryable", () => {
    assert.equal(errorFor(503, "").retryable, true);
    assert.equal(errorFor(429, "").retryable, true);
    for (const status of [400, 401, 403, 404, 409, 413, 422, 500])
      assert.equal(errorFor(status, "").retryable, false);
  });

  test("an unreadable body is no error body", () => {
    for (const text of ["", "null", "[]", '{"error": "x"}', '{"error": {"type": 1}}', "{"]) {
      assert.equal(readErrorBody(text).message, undefined, text);
    }
  });
});

describe("Retry-After", () => {
  test("delta seconds and HTTP dates, in milliseconds", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    assert.equal(retryAfterMs("3", now), 3000);
    assert.equal(retryAfterMs(" 0 ", now), 0);
    assert.equal(retryAfterMs("Thu, 01 Jan 2026 00:00:05 GMT", now), 5000);
    assert.equal(retryAfterMs("Wed, 31 Dec 2025 23:59:00 GMT", now), 0);
    for (const bad of [null, undefined, "", "soon", "-1"])
      assert.equal(retryAfterMs(bad, now), undefined);
  });

  test("the server's wait wins; past the ceiling it stops; else exponential backoff with jitter", () => {
    const policy = { baseDelayMs: 100, maxDelayMs: 1000 };
    const asked = errorFor(503, "", 700);
    assert.equal(retryDelayMs(0, asked, policy), 700);
    assert.equal(retryDelayMs(0, errorFor(503, "", 5000), policy), undefined);
    const plain = errorFor(503, "");
    assert.equal(
      retryDelayMs(0, plain, policy, () => 1),
      100,
    );
    assert.equal(
      retryDelayMs(3, plain, policy, () => 1),
      800,
    );
    assert.equal(
      retryDelayMs(9, plain, policy, () => 1),
      1000,
    );
    assert.equal(
      retryDelayMs(2, plain, policy, () => 0.5),
      200,
    );
  });

  test("a call whose outcome is unknown is retried only when idempotent", () => {
    const unavailable = errorFor(503, "");
    assert.equal(mayRetry({ error: unavailable, outcomeUnknown: false }, false), true);
    assert.equal(mayRetry({ error: unavailable, outcomeUnknown: true }, false), false);
    assert.equal(mayRetry({ error: unavailable, outcomeUnknown: true }, true), true);
    assert.equal(mayRetry({ error: errorFor(404, ""), outcomeUnknown: false }, true), false);
  });
});

describe("request arguments", () => {
  const rule = { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 };

  test("ids follow the document's path rules", () => {
    for (const good of ["jane@example.com", "_x", "a.b:c+d-e", "x".repeat(128)])
      assert.equal(brokenRule(good, rule), undefined);
    assert.match(brokenRule("", rule) ?? "", /at least 1/);
    assert.match(brokenRule("x".repeat(129), rule) ?? "", /at most 128/);
    assert.match(brokenRule("-lead", rule) ?? "", /must match/);
    assert.match(brokenRule("a/b", rule) ?? "", /must match/);
    assert.match(brokenRule("a..b", rule) ?? "", /'\.\.'/);
    assert.match(brokenRule(7, rule) ?? "", /string/);
  });

  test("paths are filled and encoded; a broken id names its field", () => {
    assert.equal(
      pathOf("getMemory", { bank_id: "jane@example.com", memory_id: "m+1" }),
      "/v1/banks/jane%40example.com/memories/m%2B1",
    );
    assert.throws(
      () => pathOf("getMemory", { bank_id: "jane", memory_id: "a b" }),
      (error: unknown) => {
        assert.ok(error instanceof InvalidInputError);
        assert.deepEqual(
          error.problems.map((p) => p.field),
          ["memory_id"],
        );
        return true;
      },
    );
  });

  test("steps must be a non-empty list of strings; a lone string is one list item", () => {
    assert.deepEqual(stepsArg(["a", "b"]), ["a", "b"]);
    assert.throws(() => stepsArg("make build"), /steps: must be a list of strings/);
    assert.throws(() => stepsArg([]), /steps: must have at least one step/);
    assert.throws(() => stepsArg(["a", 2]), /steps: must be a list of strings/);
    assert.deepEqual(listArg("types", "procedure"), ["procedure"]);
    assert.equal(listArg("types", undefined), undefined);
  });

  test("times go as ISO 8601; an invalid Date names its field", () => {
    assert.equal(
      wireTime("since", new Date(Date.UTC(2026, 0, 2, 3, 4, 5))),
      "2026-01-02T03:04:05.000Z",
    );
    assert.equal(wireTime("since", "2026-01-02T00:00:00+01:00"), "2026-01-02T00:00:00+01:00");
    assert.throws(() => wireTime("until", new Date("nope")), /until: must be a valid date/);
  });

  test("query values are strings, unset ones left out", () => {
    assert.deepEqual(queryOf({ a: 1, b: true, c: undefined, d: null, e: "x" }), {
      a: "1",
      b: "true",
      e: "x",
    });
  });

  test("tags go one parameter each; a lone tag the API would split is sent twice", () => {
    assert.deepEqual(tagParams(["a", "b,c"]), ["a", "b,c"]);
    assert.deepEqual(tagParams(["plain"]), ["plain"]);
    assert.deepEqual(tagParams(["b,c"]), ["b,c", "b,c"]);
    assert.deepEqual(tagParams([" padded"]), [" padded", " padded"]);
    assert.deepEqual(queryOf({ tags: ["x", "y"], limit: 2 }), { tags: ["x", "y"], limit: "2" });
  });
});
