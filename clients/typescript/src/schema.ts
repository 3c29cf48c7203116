/**
 * Checking a request body against the API's own JSON schema before it is sent, so a bad
 * argument fails at once naming the wire field and the rule (as the Python SDK does with the
 * server's pydantic models). The server checks again; this only spares the round trip.
 */
import type { FieldProblem } from "./errors.js";

/** The validation keywords of the OpenAPI document's schemas (the generator keeps only these). */
export interface JsonSchema {
  readonly $ref?: string;
  readonly type?: string;
  readonly enum?: readonly unknown[];
  readonly const?: unknown;
  readonly anyOf?: readonly JsonSchema[];
  readonly items?: JsonSchema;
  readonly properties?: Readonly<Record<string, JsonSchema>>;
  readonly required?: readonly string[];
  readonly additionalProperties?: boolean | JsonSchema;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly minItems?: number;
  readonly maxItems?: number;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly pattern?: string;
}

export type Schemas = Readonly<Record<string, JsonSchema>>;

const ROOT = "(body)";

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function child(at: string, name: string | number): string {
  return at === ROOT ? String(name) : `${at}.${name}`;
}

function typeProblem(type: string, value: unknown): string | undefined {
  const fits: Record<string, (v: unknown) => boolean> = {
    string: (v) => typeof v === "string",
    integer: (v) => Number.isInteger(v),
    number: (v) => typeof v === "number" && Number.isFinite(v),
    boolean: (v) => typeof v === "boolean",
    null: (v) => v === null,
    array: Array.isArray,
    object: isObject,
  };
  const fit = fits[type];
  if (fit === undefined || fit(value)) return undefined;
  return type === "integer"
    ? "must be a whole number"
    : `must be ${type === "array" ? "a list" : `a ${type}`}`;
}

function stringProblems(schema: JsonSchema, value: string): string[] {
  const length = [...value].length; // characters, as the server counts them, not UTF-16 units
  const broken: string[] = [];
  if (schema.minLength !== undefined && length < schema.minLength) {
    broken.push(`must have at least ${schema.minLength} character(s)`);
  }
  if (schema.maxLength !== undefined && length > schema.maxLength) {
    broken.push(`must have at most ${schema.maxLength} characters`);
  }
  if (schema.pattern !== undefined && !new RegExp(schema.pattern, "u").test(value)) {
    broken.push(`must match ${schema.pattern}`);
  }
  return broken;
}

function numberProblems(schema: JsonSchema, value: number): string[] {
  const broken: string[] = [];
  if (schema.minimum !== undefined && value < schema.minimum) {
    broken.push(`must be at least ${schema.minimum}`);
  }
  if (schema.maximum !== undefined && value > schema.maximum) {
    broken.push(`must be at most ${schema.maximum}`);
  }
  return broken;
}

function arrayProblems(schema: JsonSchema, value: unknown[], at: string, schemas: Schemas) {
  const problems: FieldProblem[] = [];
  if (schema.minItems !== undefined && value.length < schema.minItems) {
    problems.push({ field: at, rule: `must have at least ${schema.minItems} item(s)` });
  }
  if (schema.maxItems !== undefined && value.length > schema.maxItems) {
    problems.push({ field: at, rule: `must have at most ${schema.maxItems} items` });
  }
  const items = schema.items;
  if (items !== undefined) {
    value.forEach((item, index) =>
      problems.push(...problemsOf(items, item, child(at, index), schemas)),
    );
  }
  return problems;
}

function objectProblems(
  schema: JsonSchema,
  value: Record<string, unknown>,
  at: string,
  schemas: Schemas,
): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const properties = schema.properties ?? {};
  for (const name of schema.required ?? []) {
    if (value[name] === undefined) problems.push({ field: child(at, name), rule: "is required" });
  }
  for (const [name, field] of Object.entries(value)) {
    if (field === undefined) continue; // left out on the wire
    const known = properties[name];
    const extra = schema.additionalProperties;
    if (known !== undefined) problems.push(...problemsOf(known, field, child(at, name), schemas));
    else if (extra === false)
      problems.push({ field: child(at, name), rule: "is not a field here" });
    else if (isObject(extra)) problems.push(...problemsOf(extra, field, child(at, name), schemas));
  }
  return problems;
}

/** Every rule of `schema` that `value` breaks, each naming its wire field (`steps.0`). */
export function problemsOf(
  schema: JsonSchema,
  value: unknown,
  at: string,
  schemas: Schemas,
): FieldProblem[] {
  if (schema.$ref !== undefined) {
    const target = schemas[schema.$ref.split("/").pop() ?? ""];
    return target === undefined ? [] : problemsOf(target, value, at, schemas);
  }
  if (schema.anyOf !== undefined) {
    const tried = schema.anyOf.map((option) => problemsOf(option, value, at, schemas));
    if (tried.some((problems) => problems.length === 0)) return [];
    // The alternative that is not null says what was meant: "must be a string", not "or null".
    return tried.find((_, i) => schema.anyOf?.[i]?.type !== "null") ?? tried[0] ?? [];
  }
  if (schema.const !== undefined && value !== schema.const) {
    return [{ field: at, rule: `must be ${JSON.stringify(schema.const)}` }];
  }
  if (schema.enum !== undefined && !schema.enum.includes(value)) {
    return [
      { field: at, rule: `must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}` },
    ];
  }
  const wrongType = schema.type === undefined ? undefined : typeProblem(schema.type, value);
  if (wrongType !== undefined) return [{ field: at, rule: wrongType }];
  if (typeof value === "string")
    return stringProblems(schema, value).map((rule) => ({ field: at, rule }));
  if (typeof value === "number")
    return numberProblems(schema, value).map((rule) => ({ field: at, rule }));
  if (Array.isArray(value)) return arrayProblems(schema, value, at, schemas);
  if (isObject(value)) return objectProblems(schema, value, at, schemas);
  return [];
}

/** The problems of a whole request body against the named component schema. */
export function bodyProblems(name: string, body: unknown, schemas: Schemas): FieldProblem[] {
  return problemsOf({ $ref: `#/components/schemas/${name}` }, body, ROOT, schemas);
}
