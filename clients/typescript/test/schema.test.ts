/** Request bodies checked against the API's own schemas (generated SCHEMAS), with no server. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { SCHEMAS } from "../src/generated.js";
import { bodyProblems } from "../src/schema.js";

const problems = (schema: string, body: unknown): string[] =>
  bodyProblems(schema, body, SCHEMAS).map((p) => `${p.field}: ${p.rule}`);

test("bodies that keep every rule have no problems", () => {
  assert.deepEqual(
    problems("RetainRequest", { content: "Acme HQ is in Berlin.", fact_type: "world" }),
    [],
  );
  assert.deepEqual(
    problems("ProcedureBody", { steps: ["a", "b"], rationale: "why", wait: true }),
    [],
  );
  assert.deepEqual(problems("RecallRequest", { query: "deploy", types: null, k: 100 }), []);
  assert.deepEqual(
    problems("RecallRequest", { query: "deploy", types: ["procedure"], since: null }),
    [],
  );
});

test("each broken rule names its wire field", () => {
  assert.deepEqual(problems("RetainRequest", { content: "" }), [
    "content: must have at least 1 character(s)",
  ]);
  assert.deepEqual(problems("RecallRequest", { k: 0 }), [
    "query: is required",
    "k: must be at least 1",
  ]);
  assert.deepEqual(problems("RecallRequest", { query: "x", k: 1.5 }), [
    "k: must be a whole number",
  ]);
  assert.deepEqual(problems("RecallRequest", { query: "x", k: 101 }), ["k: must be at most 100"]);
  assert.deepEqual(problems("ProcedureBody", { steps: ["ok", ""] }), [
    "steps.1: must have at least 1 character(s)",
  ]);
  assert.deepEqual(problems("ProcedureBody", { steps: [] }), [
    "steps: must have at least 1 item(s)",
  ]);
  assert.match(
    problems("RetainRequest", { content: "x", fact_type: "rumour" })[0] ?? "",
    /^fact_type: must be one of "world", "experience"/,
  );
  assert.deepEqual(problems("RetainRequest", { content: "x", context: { session_id: 7 } }), [
    "context.session_id: must be a string",
  ]);
  assert.deepEqual(problems("RetainRequest", { content: "x", colour: "red" }), [
    "colour: is not a field here",
  ]);
  assert.deepEqual(problems("TextBlockBody", { text: "x", tags: ["a".repeat(65)] }), [
    "tags.0: must have at most 64 characters",
  ]);
});

test("lengths count characters as the server does, not UTF-16 units", () => {
  const astral = "𝄞".repeat(32_768); // 65,536 UTF-16 units, 32,768 characters: the limit exactly
  assert.deepEqual(problems("RetainRequest", { content: astral }), []);
  assert.deepEqual(problems("RetainRequest", { content: `${astral}𝄞` }), [
    "content: must have at most 32768 characters",
  ]);
});

test("fields left undefined are left out, as on the wire", () => {
  assert.deepEqual(problems("RetainRequest", { content: "x", memory_id: undefined }), []);
});
