/**
 * The wire types of src/generated.ts, written from the API's OpenAPI document.
 *
 *   node .test-build/scripts/generate-types.js openapi.json src/generated.ts
 *
 * The document is the server's own (`python -m scripts.dump_openapi`), so the
 * SDK's request and response types are the pydantic models of cogsub.core,
 * never a second hand-written copy. test/drift.test.ts fails when the committed
 * file is not what this generator writes from the committed document.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

export interface Schema {
  $ref?: string;
  type?: string;
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  items?: Schema;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  propertyNames?: Schema;
  description?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
}

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema: Schema;
}

interface MediaTypes {
  [mediaType: string]: { schema?: Schema };
}

interface Operation {
  operationId?: string;
  parameters?: Parameter[];
  requestBody?: { content: MediaTypes; required?: boolean };
  responses: Record<string, { content?: MediaTypes }>;
}

export interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
}

const HTTP_METHODS = ["get", "put", "post", "delete", "patch"];
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function refName(ref: string): string {
  const name = ref.split("/").pop();
  if (!name) throw new Error(`unreadable $ref: ${ref}`);
  return name;
}

function union(parts: string[]): string {
  const unique = [...new Set(parts)];
  return unique.length === 0 ? "never" : unique.join(" | ");
}

function arrayOf(item: string): string {
  return /^[A-Za-z0-9_.]+$/.test(item) ? `${item}[]` : `Array<${item}>`;
}

function propertyKey(name: string): string {
  return IDENTIFIER.test(name) ? name : JSON.stringify(name);
}

function comment(text: string | undefined, indent: string): string {
  if (!text) return "";
  // A description may hold "*/" (a glob, a path): it would end the comment early.
  const lines = text.trim().replaceAll("*/", "*\\/").split("\n");
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  const body = lines.map((line) => `${indent} *${line ? ` ${line}` : ""}`).join("\n");
  return `${indent}/**\n${body}\n${indent} */\n`;
}

function objectType(schema: Schema, indent: string): string {
  const properties = schema.properties ?? {};
  const names = Object.keys(properties).sort();
  if (names.length === 0) return mapType(schema, indent);
  const required = new Set(schema.required ?? []);
  const inner = `${indent}  `;
  const fields = names.map((name) => {
    const property = properties[name] as Schema;
    const optional = required.has(name) ? "" : "?";
    const type = typeOf(property, inner);
    return `${comment(property.description, inner)}${inner}${propertyKey(name)}${optional}: ${type};`;
  });
  return `{\n${fields.join("\n")}\n${indent}}`;
}

function mapType(schema: Schema, indent: string): string {
  const extra = schema.additionalProperties;
  const value = typeof extra === "object" ? typeOf(extra, indent) : "unknown";
  if (schema.propertyNames?.$ref || schema.propertyNames?.enum) {
    // A dict keyed by an enum holds some of its keys, not necessarily all.
    return `Partial<Record<${typeOf(schema.propertyNames, indent)}, ${value}>>`;
  }
  return `Record<string, ${value}>`;
}

/** The TypeScript type of one JSON schema. */
export function typeOf(schema: Schema, indent = ""): string {
  if (schema.$ref) return refName(schema.$ref);
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) return union(alternatives.map((s) => typeOf(s, indent)));
  if (schema.allOf?.length === 1) return typeOf(schema.allOf[0] as Schema, indent);
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.enum) return union(schema.enum.map((v) => JSON.stringify(v)));
  switch (schema.type) {
    case "string":
      return "string";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "null":
      return "null";
    case "array":
      return arrayOf(schema.items ? typeOf(schema.items, indent) : "unknown");
    case "object":
      return objectType(schema, indent);
    default:
      return "unknown";
  }
}

function declaration(name: string, schema: Schema): string {
  const doc = comment(schema.description, "");
  if (schema.type === "object" && schema.properties) {
    return `${doc}export interface ${name} ${objectType(schema, "")}\n`;
  }
  return `${doc}export type ${name} = ${typeOf(schema)};\n`;
}

function jsonSchemaOf(content: MediaTypes | undefined): Schema | undefined {
  return content?.["application/json"]?.schema;
}

function successContent(operation: Operation): MediaTypes | undefined {
  const status = Object.keys(operation.responses)
    .filter((code) => code.startsWith("2"))
    .sort()[0];
  return status === undefined ? undefined : operation.responses[status]?.content;
}

function responseType(operation: Operation): string {
  const content = successContent(operation);
  const schema = jsonSchemaOf(content);
  if (schema) return typeOf(schema, "    ");
  return content && Object.keys(content).length > 0 ? "string" : "void";
}

function bodyType(operation: Operation): string {
  const content = operation.requestBody?.content;
  if (!content) return "never";
  const schema = jsonSchemaOf(content);
  return schema ? typeOf(schema, "    ") : "string";
}

function queryType(parameters: Parameter[]): string {
  const query = parameters
    .filter((p) => p.in === "query")
    .sort((a, b) => (a.name < b.name ? -1 : 1));
  if (query.length === 0) return "Record<string, never>";
  const fields = query.map((p) => {
    const optional = p.required ? "" : "?";
    return `      ${propertyKey(p.name)}${optional}: ${typeOf(p.schema, "      ")};`;
  });
  return `{\n${fields.join("\n")}\n    }`;
}

interface Found {
  id: string;
  method: string;
  path: string;
  operation: Operation;
}

function operations(document: OpenApiDocument): Found[] {
  const found: Found[] = [];
  for (const path of Object.keys(document.paths).sort()) {
    const item = document.paths[path] ?? {};
    for (const method of HTTP_METHODS) {
      const operation = item[method];
      if (operation?.operationId) {
        found.push({ id: operation.operationId, method: method.toUpperCase(), path, operation });
      }
    }
  }
  return found.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

function pathRules(parameters: Parameter[]): string {
  const rules = parameters
    .filter((p) => p.in === "path")
    .sort((a, b) => (a.name < b.name ? -1 : 1))
    .map((p) => {
      const pattern = JSON.stringify(p.schema.pattern ?? null);
      const lengths = `minLength: ${p.schema.minLength ?? null}, maxLength: ${p.schema.maxLength ?? null}`;
      return `${propertyKey(p.name)}: { pattern: ${pattern}, ${lengths} }`;
    });
  return rules.length === 0 ? "{}" : `{ ${rules.join(", ")} }`;
}

function operationTable(document: OpenApiDocument): string {
  const found = operations(document);
  const types = found.map(({ id, method, path, operation }) => {
    const parameters = operation.parameters ?? [];
    return [
      `  ${propertyKey(id)}: {`,
      `    method: ${JSON.stringify(method)};`,
      `    path: ${JSON.stringify(path)};`,
      `    query: ${queryType(parameters)};`,
      `    body: ${bodyType(operation)};`,
      `    response: ${responseType(operation)};`,
      "  };",
    ].join("\n");
  });
  const values = found.map(({ id, method, path, operation }) => {
    const rules = pathRules(operation.parameters ?? []);
    const ref = jsonSchemaOf(operation.requestBody?.content)?.$ref;
    const body = JSON.stringify(ref === undefined ? null : refName(ref));
    return `  ${propertyKey(id)}: { method: ${JSON.stringify(method)}, path: ${JSON.stringify(path)}, body: ${body}, pathParams: ${rules} },`;
  });
  return [
    "/** Every operation of the API by its operationId: where it listens, what it takes and answers. */",
    `export interface Operations {\n${types.join("\n")}\n}\n`,
    "/** Each operation's method, path, body schema and path-parameter rules, as the document states them. */",
    `export const OPERATIONS = {\n${values.join("\n")}\n} as const;\n`,
  ].join("\n");
}

// What src/schema.ts checks a body with; titles, descriptions and defaults only make it longer.
const VALIDATION_KEYWORDS = new Set([
  "$ref",
  "type",
  "enum",
  "const",
  "anyOf",
  "items",
  "properties",
  "required",
  "additionalProperties",
  "minLength",
  "maxLength",
  "minItems",
  "maxItems",
  "minimum",
  "maximum",
  "pattern",
]);

/** `schema` with only its validation keywords, at every depth, keys sorted. */
export function validationSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(validationSchema);
  if (typeof schema !== "object" || schema === null) return schema;
  const kept: Record<string, unknown> = {};
  for (const key of Object.keys(schema).sort()) {
    const value = (schema as Record<string, unknown>)[key];
    if (key === "properties") {
      const properties = value as Record<string, unknown>;
      kept[key] = Object.fromEntries(
        Object.keys(properties)
          .sort()
          .map((name) => [name, validationSchema(properties[name])]),
      );
    } else if (VALIDATION_KEYWORDS.has(key)) {
      kept[key] = validationSchema(value);
    }
  }
  return kept;
}

function schemaTable(schemas: Record<string, Schema>): string {
  const entries = Object.keys(schemas)
    .sort()
    .map((name) => `  ${propertyKey(name)}: ${JSON.stringify(validationSchema(schemas[name]))},`);
  return [
    "/** Every component schema's validation rules: what src/schema.ts checks request bodies with. */",
    `export const SCHEMAS: Schemas = {\n${entries.join("\n")}\n};\n`,
  ].join("\n");
}

/** The whole text of src/generated.ts for ``document``. */
export function generate(document: OpenApiDocument): string {
  const schemas = document.components.schemas;
  const declarations = Object.keys(schemas)
    .sort()
    .map((name) => declaration(name, schemas[name] as Schema));
  return [
    "// Generated from openapi.json by scripts/generate-types.ts: do not edit by hand.",
    "// Regenerate with `npm run generate` after `python -m scripts.dump_openapi > openapi.json`.",
    "/* eslint-disable */",
    'import type { Schemas } from "./schema.js";',
    "",
    declarations.join("\n"),
    operationTable(document),
    schemaTable(schemas),
  ].join("\n");
}

function main(argv: string[]): void {
  const [source, target] = argv;
  if (!source || !target) {
    throw new Error("usage: generate-types <openapi.json> <generated.ts>");
  }
  const document = JSON.parse(readFileSync(source, "utf8")) as OpenApiDocument;
  writeFileSync(target, generate(document));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2));
}
