/**
 * `MemoryClient`: the memory API from TypeScript, mirroring the Python `cogsub.sdk.MemoryClient`.
 *
 * Every call takes the bank id first and an options object last; answers are the API's own
 * wire models (src/generated.ts, generated from its OpenAPI document), snake_case as on the wire.
 */
import type {
  Answer as AnswerResult,
  BankPage,
  MemoryHistory,
  MemoryPage,
  ContextBlock,
  ContextFormat,
  ConsolidationReport,
  FactType,
  FeedbackSignal,
  ForgetBankReport,
  ForgetReport,
  ImportReport,
  MemoryRecord,
  RecallResponse,
  RetainResult,
} from "./generated.js";
import { OPERATIONS, SCHEMAS } from "./generated.js";
import { bodyProblems } from "./schema.js";
import {
  type Answer,
  type Body,
  listArg,
  type OperationId,
  pathOf,
  queryOf,
  tagParams,
  type RetainContextOptions,
  stepsArg,
  type TimeArg,
  wireContext,
  wireTime,
  withoutUndefined,
} from "./requests.js";
import { Transport } from "./transport.js";
import { InvalidInputError } from "./errors.js";

export interface MemoryClientOptions {
  /** Where the API listens, e.g. `http://127.0.0.1:8470`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer`; never part of an error message. */
  apiKey?: string;
  /** Milliseconds each attempt may take (default 30,000). */
  timeoutMs?: number;
  /** Further attempts after a retryable failure (default 2; 0: none). */
  retries?: number;
  /** First backoff without a `Retry-After`, doubled per attempt, with jitter (default 250 ms). */
  retryBaseDelayMs?: number;
  /** The longest wait between attempts; a `Retry-After` past it is not waited for (default 30 s). */
  retryMaxDelayMs?: number;
  /** Named in audit records when the API requires no keys, e.g. `billing-bot`. */
  actor?: string;
  /** A `fetch` to send through instead of the platform's. */
  fetch?: typeof fetch;
}

/** Options every call takes. */
export interface CallOptions {
  /** Cancels the call, its retries included. */
  signal?: AbortSignal;
}

export interface WriteOptions extends CallOptions {
  tags?: string[];
  /** When it happened (default: now). */
  timestamp?: TimeArg;
  context?: RetainContextOptions;
  /** A client-chosen id; retrying with the same id and content is idempotent. */
  memoryId?: string;
  /** Answer only once recall can find the memory (`recallable` says whether it could in time). */
  wait?: boolean;
}

export interface RetainOptions extends WriteOptions {
  /** One of the eight memory types; unset: raw experience. */
  factType?: FactType;
}

export interface ProcedureOptions extends WriteOptions {
  rationale?: string;
  /** The memory id of the procedure version this one repairs. */
  supersedes?: string;
}

export type TextBlockOptions = WriteOptions;

export interface RecallOptions extends CallOptions {
  /** Only these types (default: every type). */
  types?: FactType[];
  /** At most this many results (default 10). */
  k?: number;
  /** Stop adding results before their texts pass this many tokens. */
  maxTokens?: number;
  /** Only memories with at least one of these tags. */
  tags?: string[];
  since?: TimeArg;
  until?: TimeArg;
  preferObservations?: boolean;
  /** Rank memories this session has already seen lower. */
  sessionId?: string;
  /** Every version of a procedure, not only the newest. */
  allVersions?: boolean;
  /** Count this recall toward reinforcement (default true; off for probes). */
  reinforce?: boolean;
}

export interface ContextOptions extends CallOptions {
  /** The whole block's token budget (default 1,000). */
  maxTokens?: number;
  types?: FactType[];
  /** `markdown` (default): prompt-ready `text`; `json`: the sections alone. */
  format?: ContextFormat;
  tags?: string[];
  sessionId?: string;
}

export interface AnswerOptions extends CallOptions {
  /** The context block's token budget (default 2,000). */
  maxTokens?: number;
  types?: FactType[];
}

export interface PageOptions extends CallOptions {
  /** Items per page (memories: 1 to 200, default 50). */
  limit?: number;
  /** Resume after the page whose `next_cursor` this is. */
  cursor?: string;
}

export interface ListMemoriesOptions extends PageOptions {
  types?: FactType[];
  /** Only memories with at least one of these tags. */
  tags?: string[];
  /** Inclusive. */
  since?: TimeArg;
  /** Exclusive. */
  until?: TimeArg;
  /** Also memories a newer version or a winning rule superseded. */
  includeSuperseded?: boolean;
}

/** The new content of a memory: `content` for every type but procedures, `steps` for those. */
export interface MemoryChange extends CallOptions {
  content?: string;
  steps?: string[];
  rationale?: string;
  /** Default: the old version's tags. */
  tags?: string[];
  /** Of the new version (default: now). */
  timestamp?: TimeArg;
  /** The new version's id (default: one the server chooses). */
  newMemoryId?: string;
  /** Answer only once the new version is recallable. */
  wait?: boolean;
}

export interface ForgetBankOptions extends CallOptions {
  /** Must repeat the bank id: forgetting a bank cannot be undone. */
  confirm: string;
  /** Also read every raw event for ones the index lacks (slow). */
  scanArchive?: boolean;
}

type TextBlockOperation =
  "retainReasoning" | "retainPreference" | "retainCorrection" | "updateProfile";

interface Send<K extends OperationId> extends CallOptions {
  params: Record<string, string>;
  json?: Body<K>;
  query?: Record<string, string | readonly string[]>;
  idempotent: boolean;
}

const DEFAULTS = { timeoutMs: 30_000, retries: 2, retryBaseDelayMs: 250, retryMaxDelayMs: 30_000 };

export class MemoryClient {
  readonly baseUrl: string;
  protected readonly transport: Transport;

  constructor(options: MemoryClientOptions) {
    if (typeof options?.baseUrl !== "string" || !/^https?:\/\//.test(options.baseUrl)) {
      throw InvalidInputError.forField("baseUrl", "must be an http:// or https:// URL");
    }
    const settings = { ...DEFAULTS, ...withoutUndefined(options) };
    for (const name of ["timeoutMs", "retries", "retryBaseDelayMs", "retryMaxDelayMs"] as const) {
      if (!Number.isFinite(settings[name]) || settings[name] < 0) {
        throw InvalidInputError.forField(name, "must be a number, 0 or more");
      }
    }
    this.transport = new Transport({
      baseUrl: options.baseUrl,
      apiKey: options.apiKey,
      timeoutMs: settings.timeoutMs,
      retries: Math.floor(settings.retries),
      backoff: { baseDelayMs: settings.retryBaseDelayMs, maxDelayMs: settings.retryMaxDelayMs },
      actor: options.actor,
      // Bound to the global: some platforms refuse a fetch called as a method of another object.
      fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
    });
    this.baseUrl = this.transport.baseUrl;
  }

  /** Never the key: a client printed in a log shows where it points, not how it signs in. */
  toString(): string {
    return `MemoryClient(${this.baseUrl})`;
  }

  protected async send<K extends OperationId>(id: K, request: Send<K>): Promise<Answer<K>> {
    const path = pathOf(id, request.params); // the ids first, as the server checks them first
    const schema: string | null = OPERATIONS[id].body;
    if (schema !== null && request.json !== undefined) {
      const problems = bodyProblems(schema, request.json, SCHEMAS);
      if (problems.length > 0) {
        const message = problems.map((p) => `${p.field}: ${p.rule}`).join("; ");
        throw new InvalidInputError(message, { problems });
      }
    }
    return this.transport.json<Answer<K>>({
      method: operationMethod(id),
      path,
      json: request.json,
      query: request.query,
      idempotent: request.idempotent,
      signal: request.signal,
    });
  }

  /** Keep `content` in bank `bankId`; `factType` types it (typed blocks are stored verbatim). */
  async retain(
    bankId: string,
    content: string,
    options: RetainOptions = {},
  ): Promise<RetainResult> {
    return this.send("retain", {
      params: { bank_id: bankId },
      json: withoutUndefined({
        content,
        fact_type: options.factType,
        ...this.#writeFields(options),
      }),
      idempotent: options.memoryId !== undefined,
      signal: options.signal,
    });
  }

  /** Keep how a task was done; `supersedes` names the version this one repairs. */
  async retainProcedure(
    bankId: string,
    steps: string[],
    options: ProcedureOptions = {},
  ): Promise<RetainResult> {
    return this.send("retainProcedure", {
      params: { bank_id: bankId },
      json: withoutUndefined({
        steps: stepsArg(steps),
        rationale: options.rationale,
        supersedes: options.supersedes,
        ...this.#writeFields(options),
      }),
      idempotent: options.memoryId !== undefined,
      signal: options.signal,
    });
  }

  /** Keep why a decision was made. */
  async retainReasoning(
    bankId: string,
    text: string,
    options: TextBlockOptions = {},
  ): Promise<RetainResult> {
    return this.#textBlock("retainReasoning", bankId, text, options);
  }

  /** Keep a conditional rule for how the user wants things done. */
  async retainPreference(
    bankId: string,
    text: string,
    options: TextBlockOptions = {},
  ): Promise<RetainResult> {
    return this.#textBlock("retainPreference", bankId, text, options);
  }

  /** Keep an in-the-moment "no, do it this way", raw. */
  async retainCorrection(
    bankId: string,
    text: string,
    options: TextBlockOptions = {},
  ): Promise<RetainResult> {
    return this.#textBlock("retainCorrection", bankId, text, options);
  }

  /** Record the user's tools, access and normal patterns. */
  async updateProfile(
    bankId: string,
    text: string,
    options: TextBlockOptions = {},
  ): Promise<RetainResult> {
    return this.#textBlock("updateProfile", bankId, text, options);
  }

  /** The best memories of `bankId` for `query`, best first, each with its score breakdown. */
  async recall(
    bankId: string,
    query: string,
    options: RecallOptions = {},
  ): Promise<RecallResponse> {
    return this.send("recall", {
      params: { bank_id: bankId },
      json: withoutUndefined({
        query,
        types: listArg("types", options.types),
        k: options.k,
        max_tokens: options.maxTokens,
        tags: listArg("tags", options.tags),
        since: wireTime("since", options.since),
        until: wireTime("until", options.until),
        prefer_observations: options.preferObservations,
        session_id: options.sessionId,
        all_versions: options.allVersions,
        reinforce: options.reinforce,
      }),
      idempotent: true, // a read; at worst one more retrieval counted
      signal: options.signal,
    });
  }

  /**
   * One recall laid out for a prompt: rules, procedures, profile, facts, reasoning, each line
   * with its memory id, the whole within `maxTokens`.
   */
  async context(
    bankId: string,
    query: string,
    options: ContextOptions = {},
  ): Promise<ContextBlock> {
    return this.send("context", {
      params: { bank_id: bankId },
      json: withoutUndefined({
        query,
        max_tokens: options.maxTokens,
        types: listArg("types", options.types),
        format: options.format,
        tags: listArg("tags", options.tags),
        session_id: options.sessionId,
      }),
      idempotent: true,
      signal: options.signal,
    });
  }

  /**
   * The server's chat model answers `question` over a context block, citing memory ids it holds;
   * NotConfiguredError when the server has no model.
   */
  async answer(
    bankId: string,
    question: string,
    options: AnswerOptions = {},
  ): Promise<AnswerResult> {
    return this.send("answer", {
      params: { bank_id: bankId },
      json: withoutUndefined({
        question,
        max_tokens: options.maxTokens,
        types: listArg("types", options.types),
      }),
      idempotent: true,
      signal: options.signal,
    });
  }

  /** One memory with its archived event; NotFoundError if the bank has no such memory. */
  async getMemory(
    bankId: string,
    memoryId: string,
    options: CallOptions = {},
  ): Promise<MemoryRecord> {
    return this.send("getMemory", {
      params: { bank_id: bankId, memory_id: memoryId },
      idempotent: true,
      signal: options.signal,
    });
  }

  /** One consolidation round of the bank now (idempotent); the ids it produced. */
  async consolidate(bankId: string, options: CallOptions = {}): Promise<ConsolidationReport> {
    return this.send("consolidate", {
      params: { bank_id: bankId },
      idempotent: true,
      signal: options.signal,
    });
  }

  /** Reinforce recalled memories (returned / used / helpful); how many were updated. */
  async feedback(
    bankId: string,
    memoryIds: string[],
    signal: FeedbackSignal = "used",
    options: CallOptions = {},
  ): Promise<number> {
    const memory_ids = listArg("memory_ids", memoryIds) ?? [];
    const result = await this.send("feedback", {
      params: { bank_id: bankId },
      json: { memory_ids, signal },
      idempotent: false,
      signal: options.signal,
    });
    return result.updated;
  }

  /** The banks this key grants (every bank with a `*` key or none), a page at a time. */
  async *listBanks(options: PageOptions = {}): AsyncGenerator<BankPage, void, undefined> {
    yield* this.#pages(
      (cursor) =>
        this.send("listBanks", {
          params: {},
          query: queryOf({ limit: options.limit, cursor }),
          idempotent: true,
          signal: options.signal,
        }),
      options.cursor,
    );
  }

  /**
   * The memories of `bankId`, newest first, a page at a time. The cursor is stable under
   * concurrent writes: a memory present for the whole walk is seen exactly once.
   */
  async *listMemories(
    bankId: string,
    options: ListMemoriesOptions = {},
  ): AsyncGenerator<MemoryPage, void, undefined> {
    const filters = {
      types: listArg("types", options.types)?.join(","),
      tags: optionalTags(listArg("tags", options.tags)),
      since: wireTime("since", options.since),
      until: wireTime("until", options.until),
      include_superseded: options.includeSuperseded,
      limit: options.limit,
    };
    yield* this.#pages(
      (cursor) =>
        this.send("listMemories", {
          params: { bank_id: bankId },
          query: queryOf({ ...filters, cursor }),
          idempotent: true,
          signal: options.signal,
        }),
      options.cursor,
    );
  }

  /**
   * Where a memory came from and what became of it: its versions, what superseded it and by
   * which rule, its sources, evidence and corrections, and its ranking signals now.
   */
  async history(
    bankId: string,
    memoryId: string,
    options: CallOptions = {},
  ): Promise<MemoryHistory> {
    return this.send("memoryHistory", {
      params: { bank_id: bankId, memory_id: memoryId },
      idempotent: true,
      signal: options.signal,
    });
  }

  /**
   * A new version of a memory, superseding the old one (which stays readable by id and in its
   * history; recall returns the new one). Answers with the new memory.
   */
  async update(bankId: string, memoryId: string, change: MemoryChange): Promise<RetainResult> {
    return this.send("updateMemory", {
      params: { bank_id: bankId, memory_id: memoryId },
      json: withoutUndefined({
        content: change.content,
        steps: change.steps === undefined ? undefined : stepsArg(change.steps),
        rationale: change.rationale,
        tags: listArg("tags", change.tags),
        timestamp: wireTime("timestamp", change.timestamp),
        memory_id: change.newMemoryId,
        wait: change.wait,
      }),
      idempotent: change.newMemoryId !== undefined,
      signal: change.signal,
    });
  }

  /** Forget a memory, and what was derived from its content, for good (an audit record stays). */
  async forget(bankId: string, memoryId: string, options: CallOptions = {}): Promise<ForgetReport> {
    return this.send("forget", {
      params: { bank_id: bankId, memory_id: memoryId },
      // Sent again after it worked, it would answer 404 for a memory this very call forgot.
      idempotent: false,
      signal: options.signal,
    });
  }

  /** Forget every memory of `bankId`; `confirm` must repeat the bank id. */
  async forgetBank(bankId: string, options: ForgetBankOptions): Promise<ForgetBankReport> {
    if (options?.confirm !== bankId) {
      throw InvalidInputError.forField(
        "confirm",
        `must be the bank id ${JSON.stringify(bankId)} to forget the bank`,
      );
    }
    return this.send("forgetBank", {
      params: { bank_id: bankId },
      query: queryOf({ confirm: options.confirm, scan_archive: options.scanArchive }),
      idempotent: true,
      signal: options.signal,
    });
  }

  /**
   * The bank as JSON lines (header, objects, trailer), yielded as they stream in.
   * A stream that ends without the trailer line was cut short.
   */
  async *export(
    bankId: string,
    options: CallOptions = {},
  ): AsyncGenerator<string, void, undefined> {
    const response = await this.transport.send({
      method: operationMethod("exportBank"),
      path: pathOf("exportBank", { bank_id: bankId }),
      accept: "application/x-ndjson",
      idempotent: true,
      signal: options.signal,
    });
    yield* lines(response);
  }

  /**
   * Import an export of `bankId`: its lines (`export`'s iterator will do) or the whole text.
   * Never overwrites; one request, so the server's body limit applies.
   */
  async importBank(
    bankId: string,
    lines: string | Iterable<string> | AsyncIterable<string>,
    options: CallOptions = {},
  ): Promise<ImportReport> {
    const body = typeof lines === "string" ? lines : await joinedLines(lines);
    return this.transport.json<ImportReport>({
      method: operationMethod("importBank"),
      path: pathOf("importBank", { bank_id: bankId }),
      body,
      contentType: "application/x-ndjson",
      idempotent: true, // what is already there is counted as present, never written twice
      signal: options.signal,
    });
  }

  async *#pages<P extends { next_cursor: string | null }>(
    fetchPage: (cursor: string | undefined) => Promise<P>,
    first: string | undefined,
  ): AsyncGenerator<P, void, undefined> {
    let cursor = first;
    for (;;) {
      const page = await fetchPage(cursor);
      yield page;
      if (page.next_cursor === null) return;
      cursor = page.next_cursor;
    }
  }

  #writeFields(options: WriteOptions): Record<string, unknown> {
    return {
      tags: listArg("tags", options.tags),
      timestamp: wireTime("timestamp", options.timestamp),
      context: wireContext(options.context),
      memory_id: options.memoryId,
      wait: options.wait,
    };
  }

  #textBlock(
    id: TextBlockOperation,
    bankId: string,
    text: string,
    options: TextBlockOptions,
  ): Promise<RetainResult> {
    return this.send(id, {
      params: { bank_id: bankId },
      json: withoutUndefined({ text, ...this.#writeFields(options) }),
      idempotent: options.memoryId !== undefined,
      signal: options.signal,
    });
  }
}

function operationMethod(id: OperationId): string {
  return OPERATIONS[id].method;
}

async function joinedLines(lines: Iterable<string> | AsyncIterable<string>): Promise<string> {
  const kept: string[] = [];
  for await (const line of lines) kept.push(line.replace(/\r?\n$/, ""));
  return kept.join("\n");
}

/** The non-empty lines of a streamed body, decoded as UTF-8 across chunk boundaries. */
export async function* lines(response: Response): AsyncGenerator<string, void, undefined> {
  if (response.body === null) return;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      pending += done ? decoder.decode() : decoder.decode(value, { stream: true });
      const parts = pending.split("\n");
      pending = done ? "" : (parts.pop() ?? "");
      for (const part of parts) {
        const line = part.replace(/\r$/, "");
        if (line) yield line;
      }
      if (done) return;
    }
  } finally {
    reader.releaseLock();
  }
}

function optionalTags(tags: readonly string[] | undefined): readonly string[] | undefined {
  return tags === undefined ? undefined : tagParams(tags);
}
