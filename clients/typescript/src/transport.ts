/**
 * Sending one operation: the bearer key, a timeout per attempt (AbortController), and retries
 * of retryable failures honouring `Retry-After`. Uses the platform `fetch` (Node 20+, browsers).
 */
import {
  type BackoffPolicy,
  errorFor,
  type FailedAttempt,
  mayRetry,
  retryAfterMs,
  retryDelayMs,
} from "./answers.js";
import { CogsubError, UnavailableError } from "./errors.js";

export const USER_AGENT = "cogsub-sdk-ts/0.1.0";

export interface TransportOptions {
  baseUrl: string;
  apiKey?: string | undefined;
  /** Milliseconds for each attempt, from sending to the end of the answer's headers. */
  timeoutMs: number;
  /** Further attempts after the first, for retryable failures only. */
  retries: number;
  backoff: BackoffPolicy;
  /** Named in audit records when the API requires no keys (with keys the server names the key). */
  actor?: string | undefined;
  fetch: typeof fetch;
}

export interface Request {
  method: string;
  /** The path with its parameters filled in and encoded, e.g. `/v1/banks/alice/recall`. */
  path: string;
  query?: Record<string, string | readonly string[]> | undefined;
  json?: unknown;
  body?: string | undefined;
  contentType?: string | undefined;
  accept?: string | undefined;
  /** Repeating it cannot do its work twice (GET, PUT, DELETE, or a retain with its own id). */
  idempotent: boolean;
  signal?: AbortSignal | undefined;
}

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });

function causeCode(error: unknown): string | undefined {
  const cause = (error as { cause?: { code?: unknown } } | undefined)?.cause;
  return typeof cause?.code === "string" ? cause.code : undefined;
}

export class Transport {
  readonly baseUrl: string;
  readonly #options: TransportOptions;

  constructor(options: TransportOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#options = options;
  }

  /**
   * The successful answer with its headers read and its body left to stream, after any retries.
   * The timeout covers the wait for the headers; the caller's signal can end the stream.
   */
  async send(request: Request): Promise<Response> {
    return this.#withRetries(request, async (response) => response);
  }

  /** A JSON answer, parsed; the timeout covers reading its body too. */
  async json<T>(request: Request): Promise<T> {
    const read = async (response: Response) => ({
      status: response.status,
      text: await response.text(),
    });
    const { status, text } = await this.#withRetries(request, read);
    try {
      return JSON.parse(text) as T;
    } catch (cause) {
      const message = `the memory API answered ${request.method} ${request.path} with no JSON`;
      throw new CogsubError(message, { status, cause });
    }
  }

  async #withRetries<T>(request: Request, consume: (response: Response) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt += 1) {
      const outcome = await this.#attempt(request, consume);
      if ("value" in outcome) return outcome.value;
      const delay =
        attempt < this.#options.retries && mayRetry(outcome, request.idempotent)
          ? retryDelayMs(attempt, outcome.error, this.#options.backoff)
          : undefined;
      if (delay === undefined) throw outcome.error;
      await sleep(delay, request.signal);
    }
  }

  #url(request: Request): string {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(request.query ?? {})) {
      for (const one of typeof value === "string" ? [value] : value) params.append(name, one);
    }
    const encoded = params.toString();
    const query = encoded === "" ? "" : `?${encoded}`;
    return `${this.baseUrl}${request.path}${query}`;
  }

  #headers(request: Request): Record<string, string> {
    const headers: Record<string, string> = { Accept: request.accept ?? "application/json" };
    // Browsers refuse to let a page set User-Agent; Node sends it.
    if (typeof (globalThis as { window?: unknown }).window === "undefined")
      headers["User-Agent"] = USER_AGENT;
    if (this.#options.apiKey !== undefined)
      headers.Authorization = `Bearer ${this.#options.apiKey}`;
    if (this.#options.actor !== undefined) headers["X-Cogsub-Actor"] = this.#options.actor;
    if (request.json !== undefined) headers["Content-Type"] = "application/json";
    else if (request.contentType !== undefined) headers["Content-Type"] = request.contentType;
    return headers;
  }

  async #attempt<T>(
    request: Request,
    consume: (response: Response) => Promise<T>,
  ): Promise<{ value: T } | FailedAttempt> {
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), this.#options.timeoutMs);
    const signal = request.signal
      ? AbortSignal.any([request.signal, timeout.signal])
      : timeout.signal;
    try {
      const response = await this.#options.fetch(this.#url(request), {
        method: request.method,
        headers: this.#headers(request),
        body: request.json !== undefined ? JSON.stringify(request.json) : request.body,
        signal,
      });
      if (response.ok) return { value: await consume(response) };
      const wait = retryAfterMs(response.headers.get("Retry-After"), Date.now());
      const error = errorFor(response.status, await response.text(), wait);
      // 503 and 429 come before any work; a proxy's 502/504 may come after it.
      return { error, outcomeUnknown: response.status === 502 || response.status === 504 };
    } catch (cause) {
      if (request.signal?.aborted) throw request.signal.reason;
      return this.#networkFailure(request, cause, timeout.signal.aborted);
    } finally {
      clearTimeout(timer);
    }
  }

  #networkFailure(request: Request, cause: unknown, timedOut: boolean): FailedAttempt {
    const where = `${request.method} ${this.baseUrl}${request.path}`;
    if (timedOut) {
      const message = `the memory API did not answer ${where} within ${this.#options.timeoutMs} ms`;
      return { error: new UnavailableError(message, { cause }), outcomeUnknown: true };
    }
    const code = causeCode(cause);
    const message = `cannot reach the memory API (${where}): ${code ?? String(cause)}`;
    // A refused connection never reached the server; anything else may have.
    return {
      error: new UnavailableError(message, { cause }),
      outcomeUnknown: code !== "ECONNREFUSED",
    };
  }
}
