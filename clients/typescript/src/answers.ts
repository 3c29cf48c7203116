/**
 * Reading the API's answers, with no I/O: error bodies into error classes, `Retry-After`
 * into a wait, and when a failed attempt may be tried again.
 */
import {
  AuthenticationError,
  CogsubError,
  ConflictError,
  type ErrorDetails,
  type FieldProblem,
  InvalidInputError,
  NotConfiguredError,
  NotFoundError,
  PermissionDeniedError,
  RejectedConflictError,
  RejectedInputError,
  ServerError,
  UnavailableError,
} from "./errors.js";

type ErrorClass = new (message: string, details?: ErrorDetails) => CogsubError;

const BY_STATUS: ReadonlyMap<number, ErrorClass> = new Map<number, ErrorClass>([
  [401, AuthenticationError],
  [403, PermissionDeniedError],
  [404, NotFoundError],
  [409, ConflictError],
  [429, UnavailableError],
  [502, UnavailableError],
  [503, UnavailableError],
  [504, UnavailableError],
]);

interface ErrorBodyRead {
  type: string | undefined;
  message: string | undefined;
  problems: FieldProblem[];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The server's `{"error": {type, message, problems}}`; all undefined when the body is not one. */
export function readErrorBody(text: string): ErrorBodyRead {
  const none: ErrorBodyRead = { type: undefined, message: undefined, problems: [] };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return none;
  }
  const error = isRecord(parsed) ? parsed.error : undefined;
  if (!isRecord(error) || typeof error.message !== "string") return none;
  const problems = Array.isArray(error.problems)
    ? error.problems.filter(isRecord).map((p) => ({ field: String(p.field), rule: String(p.rule) }))
    : [];
  return {
    type: typeof error.type === "string" ? error.type : undefined,
    message: error.message,
    problems,
  };
}

/**
 * `Retry-After` in milliseconds: delta-seconds or an HTTP date; undefined when absent or unreadable.
 */
export function retryAfterMs(header: string | null | undefined, nowMs: number): number | undefined {
  if (header === null || header === undefined || header.trim() === "") return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Only an HTTP date (it ends in GMT): Date.parse would also read "-1" as a year.
  if (!/GMT$/.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/** The error for an HTTP error answer (`status` ≥ 400), as the Python SDK maps it. */
export function errorFor(status: number, bodyText: string, retryAfter?: number): CogsubError {
  const body = readErrorBody(bodyText);
  const message = body.message ?? `HTTP ${status}`;
  const details: ErrorDetails = {
    status,
    type: body.type,
    problems: body.problems,
    retryAfterMs: retryAfter,
  };
  const clientError = status >= 400 && status < 500;
  if (body.type === "rejected" && clientError) {
    if (status === 409) return new RejectedConflictError(message, details);
    const problems = body.problems.length
      ? body.problems
      : [{ field: "(ingestion)", rule: message }];
    return new RejectedInputError(message, { ...details, problems });
  }
  if (body.type === "not_configured" && status === 409)
    return new NotConfiguredError(message, details);
  if (
    status === 413 ||
    status === 422 ||
    (clientError && body.problems.length > 0 && status !== 429)
  ) {
    const fallback = status === 413 ? "(body)" : "(request)";
    const problems = body.problems.length ? body.problems : [{ field: fallback, rule: message }];
    return new InvalidInputError(message, { ...details, problems });
  }
  const kind = BY_STATUS.get(status);
  if (kind !== undefined) return new kind(message, details);
  if (status >= 500) return new ServerError(message, details);
  return new CogsubError(message, details);
}

/** What the retry loop needs to know about one failed attempt. */
export interface FailedAttempt {
  error: CogsubError;
  /** The request may have reached the server and done its work (a timeout, a reset, a 502/504). */
  outcomeUnknown: boolean;
}

/**
 * Whether to try again: only a retryable error, and only when repeating cannot do the work twice —
 * the server said it did nothing (503, 429, a refused connection), or the call is idempotent.
 */
export function mayRetry(failure: FailedAttempt, idempotent: boolean): boolean {
  if (!failure.error.retryable) return false;
  return idempotent || !failure.outcomeUnknown;
}

export interface BackoffPolicy {
  /** First wait without a `Retry-After`, doubled each attempt. */
  baseDelayMs: number;
  /** No wait is longer; a `Retry-After` past it ends the retries instead. */
  maxDelayMs: number;
}

/**
 * How long to wait before attempt `attempt + 1` (attempt 0 was the first), or undefined to stop.
 * The server's `Retry-After` wins; otherwise exponential backoff with full jitter.
 */
export function retryDelayMs(
  attempt: number,
  error: CogsubError,
  policy: BackoffPolicy,
  random: () => number = Math.random,
): number | undefined {
  if (error.retryAfterMs !== undefined) {
    return error.retryAfterMs <= policy.maxDelayMs ? error.retryAfterMs : undefined;
  }
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt);
  return Math.round(ceiling * random());
}
