/**
 * The committed types are what the generator writes from the committed OpenAPI document
 * (live.test.ts checks that document against the running server's), and the generator
 * maps each JSON-schema shape the API uses to the TypeScript type it means.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { generate, type OpenApiDocument, typeOf } from "../scripts/generate-types.js";

const PACKAGE_DIR = new URL("../..", import.meta.url).pathname;

test("src/generated.ts is generated from openapi.json, unedited", () => {
  const document = JSON.parse(
    readFileSync(join(PACKAGE_DIR, "openapi.json"), "utf8"),
  ) as OpenApiDocument;
  const committed = readFileSync(join(PACKAGE_DIR, "src/generated.ts"), "utf8");
  assert.equal(
    committed,
    generate(document),
    "run `npm run generate` in clients/typescript and commit",
  );
});

test("every operation the client calls is in the document", () => {
  const document = JSON.parse(
    readFileSync(join(PACKAGE_DIR, "openapi.json"), "utf8"),
  ) as OpenApiDocument;
  const ids = new Set(
    Object.values(document.paths).flatMap((item) =>
      Object.values(item).map((op) => op.operationId),
    ),
  );
  const client = readFileSync(join(PACKAGE_DIR, "src/client.ts"), "utf8");
  const used = [...client.matchAll(/(?:send|#textBlock|operationMethod)\("(\w+)"/g)].map(
    (m) => m[1] as string,
  );
  assert.ok(used.length >= 14, `found ${used.length} operations in client.ts`);
  for (const id of used)
    assert.ok(ids.has(id), `client.ts calls ${id}, which the API does not publish`);
});

test("schema shapes map to their TypeScript types", () => {
  assert.equal(typeOf({ $ref: "#/components/schemas/FactType" }), "FactType");
  assert.equal(typeOf({ anyOf: [{ type: "string" }, { type: "null" }] }), "string | null");
  assert.equal(typeOf({ type: "array", items: { type: "integer" } }), "number[]");
  assert.equal(
    typeOf({ type: "array", items: { anyOf: [{ type: "string" }, { type: "null" }] } }),
    "Array<string | null>",
  );
  assert.equal(typeOf({ enum: ["conflict", "invalid"], type: "string" }), '"conflict" | "invalid"');
  assert.equal(typeOf({ const: "ok", type: "string" }), '"ok"');
  assert.equal(typeOf({ type: "object", additionalProperties: true }), "Record<string, unknown>");
  assert.equal(
    typeOf({
      type: "object",
      additionalProperties: { type: "integer" },
      propertyNames: { $ref: "#/components/schemas/FactType" },
    }),
    "Partial<Record<FactType, number>>",
  );
  assert.equal(
    typeOf({
      type: "object",
      properties: { a: { type: "string" }, "b-c": { type: "boolean" } },
      required: ["a"],
    }),
    '{\n  a: string;\n  "b-c"?: boolean;\n}',
  );
  assert.equal(typeOf({}), "unknown");
});

test("a description holding */ cannot end the generated comment early", () => {
  const text = generate({
    paths: {},
    components: { schemas: { Glob: { type: "string", description: "matches logs/*/" } } },
  });
  assert.match(text, /matches logs\/\*\\\//);
  assert.ok(!text.includes("logs/*/ */"));
});
