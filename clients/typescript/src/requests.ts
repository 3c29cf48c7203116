/**
 * Building requests with no I/O: path parameters checked by the rules the OpenAPI document
 * states and encoded, options objects turned into the wire's snake_case bodies.
 */
import { InvalidInputError } from "./errors.js";
import { type FactType, OPERATIONS, type Operations, type RetainContext } from "./generated.js";

export type OperationId = keyof Operations;
export type Body<K extends OperationId> = Operations[K]["body"];
export type Answer<K extends OperationId> = Operations[K]["response"];

/** A moment: a Date, or ISO 8601 text with its UTC offset. */
export type TimeArg = Date | string;

/** Who and where a memory came from (the event's context). */
export interface RetainContextOptions {
  sessionId?: string;
  userId?: string;
  agentId?: string;
  traceId?: string;
  spanId?: string;
}

interface ParamRule {
  readonly pattern: string | null;
  readonly minLength: number | null;
  readonly maxLength: number | null;
}

/** Why `value` breaks `rule`, or undefined when it keeps it. */
export function brokenRule(value: unknown, rule: ParamRule): string | undefined {
  if (typeof value !== "string") return "must be a string";
  if (rule.minLength !== null && value.length < rule.minLength) {
    return `must have at least ${rule.minLength} character(s)`;
  }
  if (rule.maxLength !== null && value.length > rule.maxLength) {
    return `must have at most ${rule.maxLength} characters`;
  }
  if (rule.pattern !== null && !new RegExp(rule.pattern).test(value)) {
    return `must match ${rule.pattern} (a letter, digit or _ first, then letters, digits and _ . : @ + -)`;
  }
  // The server's rule beyond its pattern (the document says so in words): no `..` anywhere.
  if (value.includes("..")) return "must not contain '..'";
  return undefined;
}

/** The path of operation `id` with `params` checked and percent-encoded into it. */
export function pathOf(id: OperationId, params: Readonly<Record<string, string>>): string {
  const operation = OPERATIONS[id];
  const rules: Readonly<Record<string, ParamRule>> = operation.pathParams;
  return operation.path.replace(/\{([^}]+)\}/g, (_whole, name: string) => {
    const rule = rules[name];
    const value = params[name];
    if (rule === undefined) throw new Error(`operation ${id} has no path parameter ${name}`);
    const broken = brokenRule(value, rule);
    if (broken !== undefined) throw InvalidInputError.forField(name, broken);
    return encodeURIComponent(value as string);
  });
}

export function wireTime(field: string, value: TimeArg | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime()))
      throw InvalidInputError.forField(field, "must be a valid date");
    return value.toISOString();
  }
  return value;
}

export function wireContext(context: RetainContextOptions | undefined): RetainContext | undefined {
  if (context === undefined) return undefined;
  return withoutUndefined({
    session_id: context.sessionId,
    user_id: context.userId,
    agent_id: context.agentId,
    trace_id: context.traceId,
    span_id: context.spanId,
  });
}

/** `object` without its undefined fields: the wire leaves an unset field out, it never sends null. */
export function withoutUndefined<T extends object>(object: T): T {
  return Object.fromEntries(Object.entries(object).filter(([, v]) => v !== undefined)) as T;
}

/** A list argument, refusing a lone string (it would otherwise be read letter by letter). */
export function listArg<T>(field: string, value: readonly T[] | T | undefined): T[] | undefined {
  if (value === undefined) return undefined;
  if (typeof value === "string") return [value as T];
  if (!Array.isArray(value)) throw InvalidInputError.forField(field, "must be a list");
  return [...(value as readonly T[])];
}

export function stepsArg(steps: unknown): string[] {
  if (!Array.isArray(steps) || steps.some((step) => typeof step !== "string")) {
    throw InvalidInputError.forField("steps", "must be a list of strings");
  }
  if (steps.length === 0) throw InvalidInputError.forField("steps", "must have at least one step");
  return [...(steps as string[])];
}

/** Comma-joined values of a list query parameter (`types=world,experience`). */
export function joined(
  values: readonly FactType[] | readonly string[] | undefined,
): string | undefined {
  return values === undefined ? undefined : values.join(",");
}

/** A query object of strings, without unset parameters. */
export function queryOf(
  values: Record<string, string | number | boolean | readonly string[] | null | undefined>,
): Record<string, string | readonly string[]> {
  const query: Record<string, string | readonly string[]> = {};
  for (const [name, value] of Object.entries(values)) {
    if (value === undefined || value === null) continue;
    query[name] = Array.isArray(value) ? value : String(value);
  }
  return query;
}

/**
 * One `tags` parameter per tag. The API takes repeated parameters verbatim and splits a lone
 * one on commas, so a lone tag holding a comma or edge spaces is sent twice.
 */
export function tagParams(tags: readonly string[]): readonly string[] {
  const only = tags.length === 1 ? tags[0] : undefined;
  if (only !== undefined && (only.includes(",") || only !== only.trim())) return [only, only];
  return tags;
}
