// Generated from openapi.json by scripts/generate-types.ts: do not edit by hand.
// Regenerate with `npm run generate` after `python -m scripts.dump_openapi > openapi.json`.
/* eslint-disable */

/** The model's answer, the ids it cites (only ids in the block), and the block. */
export interface Answer {
  answer: string;
  cited: string[];
  context: ContextBlock;
}

/** A question answered from the bank's memories by the configured chat model. */
export interface AnswerRequest {
  /** the context block's budget */
  max_tokens?: number;
  question: string;
  /** null: every type */
  types?: FactType[] | null;
}

export interface BankPage {
  banks: BankSummary[];
  /** pass as `cursor` for the next page; null at end */
  next_cursor: string | null;
}

/** One bank: how many memories it holds, by type, and when its newest one happened. */
export interface BankSummary {
  bank_id: string;
  /** memories per fact type (types the bank does not hold are left out) */
  counts: Partial<Record<FactType, number>>;
  /** timestamp of the newest memory; null when empty */
  newest_at: string | null;
  total: number;
}

/** What one consolidation round of a bank produced (ids of new memories). */
export interface ConsolidationReport {
  bank_id: string;
  /** False when the round stopped at its bounds; the next continues */
  complete?: boolean;
  /** Of which the decay pass (about 0 once the epoch is done) */
  decay_ms?: number;
  decayed?: number;
  observations?: string[];
  preferences?: string[];
  procedures?: string[];
  reinforced?: number;
  scanned?: number;
  superseded?: string[];
  /** Wall time of the round, in milliseconds */
  took_ms?: number;
}

/** The latest rounds this process ran or was asked for, newest first. */
export interface ConsolidationRounds {
  rounds: RecordedRound[];
}

/** One recall laid out for a prompt; ``text`` is "" when ``format`` is json. */
export interface ContextBlock {
  bank_id: string;
  format: ContextFormat;
  max_tokens: number;
  query: string;
  sections: ContextSection[];
  text: string;
  /** tokens of the markdown block (what max_tokens bounds) */
  tokens: number;
}

/** How the block is handed back: prompt-ready markdown, or the sections alone. */
export type ContextFormat = "markdown" | "json";

/** One memory in the block. */
export interface ContextItem {
  memory_id: string;
  score: number;
  text: string;
  timestamp: string;
  type: FactType | null;
  /** a procedure's version, else null */
  version?: number | null;
}

/** What to recall for a context block, and how much of it fits the prompt. */
export interface ContextRequest {
  format?: ContextFormat;
  /** the whole block's budget, counted as recall counts tokens */
  max_tokens?: number;
  query: string;
  /** for session-relative novelty */
  session_id?: string | null;
  tags?: string[] | null;
  /** null: every type */
  types?: FactType[] | null;
}

/** The block's memories of one kind, best first. */
export interface ContextSection {
  items: ContextItem[];
  name: SectionName;
}

export interface DeadLetterPage {
  dead_letters: DeadLetterView[];
  next: string | null;
}

/** One dead letter: where, when, why, from where, and the original bytes. */
export interface DeadLetterView {
  bank_id: string | null;
  event_id: string | null;
  id: string;
  key: string | null;
  kind: string;
  offset: number;
  partition: number;
  reason: string;
  source: string | null;
  time: string;
  topic: string;
  value_base64: string;
  value_text: string | null;
}

/** The body of every error answer. */
export interface ErrorBody {
  error: ErrorDetail;
}

export interface ErrorDetail {
  message: string;
  problems?: Problem[];
  type: string;
}

/** The eight memory types, in two families (typed-memory seed). */
export type FactType = "world" | "experience" | "observation" | "procedure" | "reasoning" | "preference" | "correction" | "profile";

export interface FeedbackRequest {
  memory_ids: string[];
  signal: FeedbackSignal;
}

/** How many memories a feedback call updated. */
export interface FeedbackResult {
  bank_id: string;
  updated: number;
}

/** What an agent did with a recalled memory. */
export type FeedbackSignal = "returned" | "used" | "helpful";

/**
 * What ``forget_bank`` erased so far (also passed to progress callbacks).
 *
 * ``complete`` is true only once every memory and record of the bank is gone;
 * a report that does not say so is not complete.
 */
export interface ForgetBankReport {
  audit_key: string;
  bank_id: string;
  complete?: boolean;
  consolidation_objects?: number;
  index_documents?: number;
  memory_objects?: number;
  resumed?: boolean;
}

/** What ``forget`` erased: the memory and everything derived from its content. */
export interface ForgetReport {
  /** archive objects erased (memories and bookkeeping) */
  archive_objects: number;
  audit_key: string;
  bank_id: string;
  /** the memory id first, then what was derived from it */
  forgotten: string[];
  /** index documents deleted by this call */
  index_documents: number;
  memory_id: string;
  /** an interrupted forget was completed */
  resumed?: boolean;
}

export interface HealthStatus {
  status?: "ok";
}

/** What an import did, line by line summed up; ``problems`` lists the first few. */
export interface ImportReport {
  bank_id: string;
  /** the trailer was read and its line count matches */
  complete: boolean;
  /** objects there with other content, left as they were */
  conflicts: number;
  /** objects written */
  imported: number;
  /** memories made recallable */
  indexed: number;
  /** lines that are not a valid object of this bank */
  invalid: number;
  /** object lines read (header and trailer not counted) */
  lines: number;
  /** objects already there, identical */
  present: number;
  problems?: LineProblem[];
}

/** One import line that was not taken: a ``conflict`` or an ``invalid`` line, and why. */
export interface LineProblem {
  key: string | null;
  line: number;
  problem: "conflict" | "invalid";
  reason: string;
}

/** A memory another was derived from or proved by, with the raw event behind it. */
export interface LinkedMemory {
  /** the raw event it came from (its own id when retained as is) */
  event_id?: string | null;
  fact_type?: FactType | null;
  memory_id: string;
  relation: "source" | "evidence" | "correction";
  /** null when it was forgotten */
  text?: string | null;
  timestamp?: string | null;
}

export interface MemoryHistory {
  bank_id: string;
  /** the corrections it was distilled from */
  corrections: LinkedMemory[];
  /** memories that said it again (proof) */
  evidence: LinkedMemory[];
  /** what consolidation derived it as (fact, observation, preference, procedure); null for a retained memory */
  kind: string | null;
  memory: MemoryRecord;
  memory_id: string;
  /** null when the memory is archived but no longer indexed */
  signals: MemorySignals | null;
  /** what it was derived from */
  sources: LinkedMemory[];
  /** what replaced it, by which rule */
  superseded_by: SupersessionRecord | null;
  /** what it replaced, by which rule */
  supersedes: SupersessionRecord[];
  /** the version line this memory belongs to, oldest first (one entry when none) */
  versions: MemoryVersion[];
}

export interface MemoryHit {
  event_type: string;
  explain: ScoreBreakdown;
  fact_type: FactType | null;
  id: string;
  object_storage_key: string;
  proof_count?: number | null;
  rationale?: string | null;
  score: number;
  source_event_id: string;
  steps?: string[] | null;
  superseded_by?: string | null;
  supersedes?: string[];
  tags: string[];
  text: string;
  timestamp: string;
  tokens: number;
  valid_to?: string | null;
  version?: number | null;
}

export interface MemoryPage {
  /** newest first */
  memories: MemoryRecord[];
  /** pass as `cursor` for the next page; null at end */
  next_cursor: string | null;
}

/** One memory with the full archived event behind it. */
export interface MemoryRecord {
  archived_event: Record<string, unknown>;
  bank_id: string;
  fact_type: FactType | null;
  id: string;
  importance_score: number;
  object_storage_key: string;
  retrieval_count: number;
  tags: string[];
  text: string;
  timestamp: string;
}

/** The memory's ranking signals as the index holds them now. */
export interface MemorySignals {
  confidence: number;
  /** 1.0 fresh; decay epochs lower it toward the floor */
  decay_factor: number;
  importance_score: number;
  /** for observations and merged facts: the evidence objects */
  proof_count?: number | null;
  /** recalls, feedback and consolidation replays so far */
  retrieval_count: number;
  reward_score: number;
  superseded: boolean;
}

/**
 * A new version of a memory: the typed block's own fields, the rest carried over.
 *
 * ``content`` for every type but procedures, ``steps`` (and ``rationale``) for
 * procedures; tags and context default to the old version's.
 */
export interface MemoryUpdate {
  content?: string | null;
  /** id of the new version */
  memory_id?: string | null;
  rationale?: string | null;
  steps?: string[] | null;
  tags?: string[] | null;
  /** of the new version; default now */
  timestamp?: string | null;
  /** return only once the new version is recallable */
  wait?: boolean;
}

/** One version in a memory's line, oldest first. */
export interface MemoryVersion {
  /** the version recall returns */
  current: boolean;
  memory_id: string;
  superseded_by?: string | null;
  /** null when this version was forgotten */
  text: string | null;
  timestamp: string | null;
  version: number;
}

/** Who is asking and how far behind the pipeline is. */
export interface OperationsStatus {
  /** the banks the caller's key grants; null: every bank */
  banks: string[] | null;
  keys_required: boolean;
  lag: PipelineLag;
  /** the caller may use every bank (a '*' key, or no keys) */
  operator: boolean;
}

/** Records published but not yet consumed, per stage (null: the bus did not answer). */
export interface PipelineLag {
  /** experience.enriched and consolidation.request records the consolidation group has yet to read */
  extraction: number | null;
  /** experience.raw records the ingestion group has yet to read */
  ingestion: number | null;
}

export interface Problem {
  field: string;
  rule: string;
}

/** How a task was done: distilled steps and why, stored verbatim. */
export interface ProcedureBody {
  context?: RetainContext;
  /** client-chosen id; retrying with the same id is idempotent */
  memory_id?: string | null;
  rationale?: string | null;
  steps: string[];
  /** the memory id of the procedure version this one repairs */
  supersedes?: string | null;
  tags?: string[];
  timestamp?: string | null;
  /** answer only once the memory is recallable */
  wait?: boolean;
}

export interface RecallRequest {
  /** every procedure version, not the newest */
  all_versions?: boolean;
  k?: number;
  max_tokens?: number | null;
  prefer_observations?: boolean;
  query: string;
  /** count this retrieval toward reinforcement (off for probes and evaluations) */
  reinforce?: boolean;
  /** for session-relative novelty */
  session_id?: string | null;
  since?: string | null;
  tags?: string[] | null;
  types?: FactType[] | null;
  until?: string | null;
}

export interface RecallResponse {
  bank_id: string;
  candidates: number;
  query: string;
  results: MemoryHit[];
  tokens: number;
}

/** One finished consolidation round and what it produced. */
export interface RecordedRound {
  /** ISO 8601, UTC */
  finished_at: string;
  report: ConsolidationReport;
}

/** Who and where a memory came from (becomes the event's context). */
export interface RetainContext {
  agent_id?: string | null;
  session_id?: string | null;
  span_id?: string | null;
  trace_id?: string | null;
  user_id?: string | null;
}

/** One memory to keep. Typed blocks (procedure … profile) are stored verbatim. */
export interface RetainRequest {
  content: string;
  context?: RetainContext;
  fact_type?: FactType | null;
  /** client-chosen id; retrying with the same id is idempotent */
  memory_id?: string | null;
  rationale?: string | null;
  steps?: string[] | null;
  /** for a procedure: the memory id of the version it replaces */
  supersedes?: string | null;
  tags?: string[];
  timestamp?: string | null;
  /** return only once the memory is recallable */
  wait?: boolean;
}

export interface RetainResult {
  bank_id: string;
  fact_type: FactType | null;
  memory_id: string;
  object_storage_key: string;
  recallable: boolean;
  /** the bank already held this content as this type: that memory was reinforced and its id returned, nothing new was stored */
  reinforced?: boolean;
  version?: number | null;
}

export interface RetryResult {
  id: string;
  republished_to: string;
}

/** Each signal in [0, 1], its weight, and ``final`` = Σ weight × signal. */
export interface ScoreBreakdown {
  bm25_rank?: number | null;
  bm25_score?: number | null;
  /** relevance multiplier from the query's cues (speaker, time) */
  boost?: number | null;
  /** the part of the BM25 score that came from neighbouring turns */
  context?: number | null;
  cosine?: number | null;
  final: number;
  importance: number;
  /** BM25 share of relevance, neighbours' part included, in [0, 1] */
  lexical?: number | null;
  novelty: number;
  recency: number;
  reinforcement: number;
  relevance: number;
  /** the reranker's score in [0, 1], weighted by weights.rerank (else null) */
  rerank?: number | null;
  /** why this memory won over the ones it supersedes */
  resolution?: string | null;
  reward: number;
  /** cosine share of relevance, in context, scaled to [0, 1] */
  semantic?: number | null;
  type_boost: number;
  vector_rank?: number | null;
  weights: Record<string, number>;
}

/** The block's sections, in the order an agent acts on them. */
export type SectionName = "rules" | "procedures" | "profile" | "facts" | "reasoning";

/** One archived decision: ``memory_id`` lost to ``superseded_by`` under ``rule``. */
export interface SupersessionRecord {
  memory_id: string;
  /** why: `update`, `explicit correction > …`, `procedure version` */
  rule: string;
  superseded_by: string;
  /** until when the loser held (null if not recorded) */
  valid_to: string | null;
}

/** One typed block of text (reasoning, preference, correction, profile), stored verbatim. */
export interface TextBlockBody {
  context?: RetainContext;
  /** client-chosen id; retrying with the same id is idempotent */
  memory_id?: string | null;
  tags?: string[];
  text: string;
  timestamp?: string | null;
  /** answer only once the memory is recallable */
  wait?: boolean;
}

/** Every operation of the API by its operationId: where it listens, what it takes and answers. */
export interface Operations {
  answer: {
    method: "POST";
    path: "/v1/banks/{bank_id}/answer";
    query: Record<string, never>;
    body: AnswerRequest;
    response: Answer;
  };
  consolidate: {
    method: "POST";
    path: "/v1/banks/{bank_id}/consolidate";
    query: Record<string, never>;
    body: never;
    response: ConsolidationReport;
  };
  consolidation_rounds: {
    method: "GET";
    path: "/v1/operations/consolidation-rounds";
    query: {
      bank_id?: string | null;
      limit?: number;
    };
    body: never;
    response: ConsolidationRounds;
  };
  context: {
    method: "POST";
    path: "/v1/banks/{bank_id}/context";
    query: Record<string, never>;
    body: ContextRequest;
    response: ContextBlock;
  };
  exportBank: {
    method: "GET";
    path: "/v1/banks/{bank_id}/export";
    query: Record<string, never>;
    body: never;
    response: string;
  };
  feedback: {
    method: "POST";
    path: "/v1/banks/{bank_id}/feedback";
    query: Record<string, never>;
    body: FeedbackRequest;
    response: FeedbackResult;
  };
  forget: {
    method: "DELETE";
    path: "/v1/banks/{bank_id}/memories/{memory_id}";
    query: Record<string, never>;
    body: never;
    response: ForgetReport;
  };
  forgetBank: {
    method: "DELETE";
    path: "/v1/banks/{bank_id}";
    query: {
      confirm?: string | null;
      scan_archive?: boolean;
    };
    body: never;
    response: ForgetBankReport;
  };
  getMemory: {
    method: "GET";
    path: "/v1/banks/{bank_id}/memories/{memory_id}";
    query: Record<string, never>;
    body: never;
    response: MemoryRecord;
  };
  importBank: {
    method: "POST";
    path: "/v1/banks/{bank_id}/import";
    query: Record<string, never>;
    body: string;
    response: ImportReport;
  };
  listBanks: {
    method: "GET";
    path: "/v1/banks";
    query: {
      cursor?: string | null;
      limit?: number;
    };
    body: never;
    response: BankPage;
  };
  listMemories: {
    method: "GET";
    path: "/v1/banks/{bank_id}/memories";
    query: {
      cursor?: string | null;
      include_superseded?: boolean;
      limit?: number;
      since?: string | null;
      tags?: string[] | null;
      types?: string[] | null;
      until?: string | null;
    };
    body: never;
    response: MemoryPage;
  };
  list_dead_letters: {
    method: "GET";
    path: "/v1/dead-letters";
    query: {
      after?: string | null;
      limit?: number;
      topic?: string | null;
    };
    body: never;
    response: DeadLetterPage;
  };
  liveness: {
    method: "GET";
    path: "/healthz";
    query: Record<string, never>;
    body: never;
    response: HealthStatus;
  };
  memoryHistory: {
    method: "GET";
    path: "/v1/banks/{bank_id}/memories/{memory_id}/history";
    query: Record<string, never>;
    body: never;
    response: MemoryHistory;
  };
  metrics: {
    method: "GET";
    path: "/metrics";
    query: Record<string, never>;
    body: never;
    response: string;
  };
  operations_status: {
    method: "GET";
    path: "/v1/operations/status";
    query: Record<string, never>;
    body: never;
    response: OperationsStatus;
  };
  readiness: {
    method: "GET";
    path: "/readyz";
    query: Record<string, never>;
    body: never;
    response: HealthStatus;
  };
  recall: {
    method: "POST";
    path: "/v1/banks/{bank_id}/recall";
    query: Record<string, never>;
    body: RecallRequest;
    response: RecallResponse;
  };
  retain: {
    method: "POST";
    path: "/v1/banks/{bank_id}/memories";
    query: Record<string, never>;
    body: RetainRequest;
    response: RetainResult;
  };
  retainCorrection: {
    method: "POST";
    path: "/v1/banks/{bank_id}/corrections";
    query: Record<string, never>;
    body: TextBlockBody;
    response: RetainResult;
  };
  retainPreference: {
    method: "POST";
    path: "/v1/banks/{bank_id}/preferences";
    query: Record<string, never>;
    body: TextBlockBody;
    response: RetainResult;
  };
  retainProcedure: {
    method: "POST";
    path: "/v1/banks/{bank_id}/procedures";
    query: Record<string, never>;
    body: ProcedureBody;
    response: RetainResult;
  };
  retainReasoning: {
    method: "POST";
    path: "/v1/banks/{bank_id}/reasonings";
    query: Record<string, never>;
    body: TextBlockBody;
    response: RetainResult;
  };
  retry_dead_letter: {
    method: "POST";
    path: "/v1/dead-letters/{dead_letter_id}/retry";
    query: Record<string, never>;
    body: never;
    response: RetryResult;
  };
  show_dead_letter: {
    method: "GET";
    path: "/v1/dead-letters/{dead_letter_id}";
    query: Record<string, never>;
    body: never;
    response: DeadLetterView;
  };
  updateMemory: {
    method: "PUT";
    path: "/v1/banks/{bank_id}/memories/{memory_id}";
    query: Record<string, never>;
    body: MemoryUpdate;
    response: RetainResult;
  };
  updateProfile: {
    method: "PUT";
    path: "/v1/banks/{bank_id}/profile";
    query: Record<string, never>;
    body: TextBlockBody;
    response: RetainResult;
  };
}

/** The method, path and path-parameter rules of each operation, as the document states them. */
export const OPERATIONS = {
  answer: { method: "POST", path: "/v1/banks/{bank_id}/answer", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  consolidate: { method: "POST", path: "/v1/banks/{bank_id}/consolidate", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  consolidation_rounds: { method: "GET", path: "/v1/operations/consolidation-rounds", pathParams: {} },
  context: { method: "POST", path: "/v1/banks/{bank_id}/context", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  exportBank: { method: "GET", path: "/v1/banks/{bank_id}/export", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  feedback: { method: "POST", path: "/v1/banks/{bank_id}/feedback", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  forget: { method: "DELETE", path: "/v1/banks/{bank_id}/memories/{memory_id}", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 }, memory_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  forgetBank: { method: "DELETE", path: "/v1/banks/{bank_id}", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  getMemory: { method: "GET", path: "/v1/banks/{bank_id}/memories/{memory_id}", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 }, memory_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  importBank: { method: "POST", path: "/v1/banks/{bank_id}/import", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  listBanks: { method: "GET", path: "/v1/banks", pathParams: {} },
  listMemories: { method: "GET", path: "/v1/banks/{bank_id}/memories", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  list_dead_letters: { method: "GET", path: "/v1/dead-letters", pathParams: {} },
  liveness: { method: "GET", path: "/healthz", pathParams: {} },
  memoryHistory: { method: "GET", path: "/v1/banks/{bank_id}/memories/{memory_id}/history", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 }, memory_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  metrics: { method: "GET", path: "/metrics", pathParams: {} },
  operations_status: { method: "GET", path: "/v1/operations/status", pathParams: {} },
  readiness: { method: "GET", path: "/readyz", pathParams: {} },
  recall: { method: "POST", path: "/v1/banks/{bank_id}/recall", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  retain: { method: "POST", path: "/v1/banks/{bank_id}/memories", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  retainCorrection: { method: "POST", path: "/v1/banks/{bank_id}/corrections", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  retainPreference: { method: "POST", path: "/v1/banks/{bank_id}/preferences", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  retainProcedure: { method: "POST", path: "/v1/banks/{bank_id}/procedures", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  retainReasoning: { method: "POST", path: "/v1/banks/{bank_id}/reasonings", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  retry_dead_letter: { method: "POST", path: "/v1/dead-letters/{dead_letter_id}/retry", pathParams: { dead_letter_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  show_dead_letter: { method: "GET", path: "/v1/dead-letters/{dead_letter_id}", pathParams: { dead_letter_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  updateMemory: { method: "PUT", path: "/v1/banks/{bank_id}/memories/{memory_id}", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 }, memory_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  updateProfile: { method: "PUT", path: "/v1/banks/{bank_id}/profile", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
} as const;
