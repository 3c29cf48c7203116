/**
 * The API's error answers as classes: the same tree as the Python SDK (cogsub.core.errors).
 *
 *     CogsubError
 *     ├── InvalidInputError          400, 413, 422 (`problems` names each field and rule)
 *     │   └── RejectedInputError     422 `rejected`: ingestion refused it (a RejectedError too)
 *     ├── NotFoundError              404
 *     ├── ConflictError              409
 *     │   ├── RejectedConflictError  409 `rejected`: it clashes with what is archived
 *     │   └── NotConfiguredError     409 `not_configured`: the server lacks a setting
 *     ├── UnavailableError           503, 502, 504, 429, network failures, timeouts (retryable)
 *     ├── AuthenticationError        401: no key, or a key the server does not know
 *     ├── PermissionDeniedError      403: the key does not grant that bank
 *     └── ServerError                500 and any other 5xx
 *
 * `RejectedError` is both kinds of rejection: `error instanceof RejectedError` is true
 * for a RejectedInputError and a RejectedConflictError, as in Python.
 */

/** One broken rule: `field` is the wire path (`context.session_id`), `rule` what it must be. */
export interface FieldProblem {
  field: string;
  rule: string;
}

export interface ErrorDetails {
  /** The HTTP status, when the server answered. */
  status?: number | undefined;
  /** The error body's `type` (`invalid_input`, `not_found`...), when the server sent one. */
  type?: string | undefined;
  problems?: readonly FieldProblem[] | undefined;
  /** How long the server asked to wait before trying again (`Retry-After`), in ms. */
  retryAfterMs?: number | undefined;
  cause?: unknown;
}

/** Root of every error this client raises on purpose. */
export class CogsubError extends Error {
  /** Whether the same call may succeed later. */
  readonly retryable: boolean = false;
  readonly status: number | undefined;
  readonly type: string | undefined;
  readonly problems: readonly FieldProblem[];
  readonly retryAfterMs: number | undefined;

  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.status = details.status;
    this.type = details.type;
    this.problems = details.problems ?? [];
    this.retryAfterMs = details.retryAfterMs;
  }
}

/** Input broke one or more rules; nothing was stored. */
export class InvalidInputError extends CogsubError {
  constructor(message: string, details: ErrorDetails = {}) {
    const problems = details.problems?.length
      ? details.problems
      : [{ field: "(request)", rule: message }];
    super(message, { ...details, problems });
  }

  /** An argument of this client broke a rule: named the way the wire names it. */
  static forField(field: string, rule: string): InvalidInputError {
    return new InvalidInputError(`${field}: ${rule}`, { problems: [{ field, rule }] });
  }
}

/** The thing asked for does not exist (in this bank). */
export class NotFoundError extends CogsubError {}

/** The same identity arrived again with different content. */
export class ConflictError extends CogsubError {}

/** A feature whose server settings are not set (e.g. no chat model for `answer`). */
export class NotConfiguredError extends ConflictError {}

/** The API cannot serve now; the same call may succeed later. */
export class UnavailableError extends CogsubError {
  override readonly retryable: boolean = true;
}

/** The request carried no API key, or one the server does not know. */
export class AuthenticationError extends CogsubError {}

/** The API key is valid but does not grant the bank asked for. */
export class PermissionDeniedError extends CogsubError {}

/** The server failed in a way it did not classify. */
export class ServerError extends CogsubError {}

/** Ingestion found a `wait: true` memory invalid, or could not process it (HTTP 422). */
export class RejectedInputError extends InvalidInputError {}

/** A `wait: true` memory's id is archived with other content (HTTP 409). */
export class RejectedConflictError extends ConflictError {}

/**
 * The API took the memory, then ingestion dead-lettered it: it never becomes recallable.
 *
 * Never thrown itself: one of its two kinds is, and `instanceof RejectedError` holds for both
 * (a class cannot extend two others, so membership is declared here).
 */
export abstract class RejectedError extends CogsubError {
  static readonly errorType = "rejected";

  static override [Symbol.hasInstance](value: unknown): boolean {
    return value instanceof RejectedInputError || value instanceof RejectedConflictError;
  }
}
