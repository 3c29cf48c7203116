// Generated from openapi.json by scripts/generate-types.ts: do not edit by hand.
// Regenerate with `npm run generate` after `python -m scripts.dump_openapi > openapi.json`.
/* eslint-disable */
import type { Schemas } from "./schema.js";

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
  /** for session-relative novelty */
  session_id?: string | null;
  tags?: string[] | null;
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

/**
 * The latest rounds this API process ran or was asked for, newest first.
 *
 * Not those a separate consolidator process ran (a fleet's scheduled rounds).
 */
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
  /** count this retrieval toward reinforcement (off for probes and previews) */
  reinforce?: boolean;
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
  /** null for a key that does not grant every bank: the lag spans every tenant */
  lag: PipelineLag | null;
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

/** Each operation's method, path, body schema and path-parameter rules, as the document states them. */
export const OPERATIONS = {
  answer: { method: "POST", path: "/v1/banks/{bank_id}/answer", body: "AnswerRequest", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  consolidate: { method: "POST", path: "/v1/banks/{bank_id}/consolidate", body: null, pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  consolidation_rounds: { method: "GET", path: "/v1/operations/consolidation-rounds", body: null, pathParams: {} },
  context: { method: "POST", path: "/v1/banks/{bank_id}/context", body: "ContextRequest", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  exportBank: { method: "GET", path: "/v1/banks/{bank_id}/export", body: null, pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  feedback: { method: "POST", path: "/v1/banks/{bank_id}/feedback", body: "FeedbackRequest", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  forget: { method: "DELETE", path: "/v1/banks/{bank_id}/memories/{memory_id}", body: null, pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 }, memory_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  forgetBank: { method: "DELETE", path: "/v1/banks/{bank_id}", body: null, pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  getMemory: { method: "GET", path: "/v1/banks/{bank_id}/memories/{memory_id}", body: null, pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 }, memory_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  importBank: { method: "POST", path: "/v1/banks/{bank_id}/import", body: null, pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  listBanks: { method: "GET", path: "/v1/banks", body: null, pathParams: {} },
  listMemories: { method: "GET", path: "/v1/banks/{bank_id}/memories", body: null, pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  list_dead_letters: { method: "GET", path: "/v1/dead-letters", body: null, pathParams: {} },
  liveness: { method: "GET", path: "/healthz", body: null, pathParams: {} },
  memoryHistory: { method: "GET", path: "/v1/banks/{bank_id}/memories/{memory_id}/history", body: null, pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 }, memory_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  metrics: { method: "GET", path: "/metrics", body: null, pathParams: {} },
  operations_status: { method: "GET", path: "/v1/operations/status", body: null, pathParams: {} },
  readiness: { method: "GET", path: "/readyz", body: null, pathParams: {} },
  recall: { method: "POST", path: "/v1/banks/{bank_id}/recall", body: "RecallRequest", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  retain: { method: "POST", path: "/v1/banks/{bank_id}/memories", body: "RetainRequest", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  retainCorrection: { method: "POST", path: "/v1/banks/{bank_id}/corrections", body: "TextBlockBody", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  retainPreference: { method: "POST", path: "/v1/banks/{bank_id}/preferences", body: "TextBlockBody", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  retainProcedure: { method: "POST", path: "/v1/banks/{bank_id}/procedures", body: "ProcedureBody", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  retainReasoning: { method: "POST", path: "/v1/banks/{bank_id}/reasonings", body: "TextBlockBody", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  retry_dead_letter: { method: "POST", path: "/v1/dead-letters/{dead_letter_id}/retry", body: null, pathParams: { dead_letter_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  show_dead_letter: { method: "GET", path: "/v1/dead-letters/{dead_letter_id}", body: null, pathParams: { dead_letter_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  updateMemory: { method: "PUT", path: "/v1/banks/{bank_id}/memories/{memory_id}", body: "MemoryUpdate", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 }, memory_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
  updateProfile: { method: "PUT", path: "/v1/banks/{bank_id}/profile", body: "TextBlockBody", pathParams: { bank_id: { pattern: "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$", minLength: 1, maxLength: 128 } } },
} as const;

/** Every component schema's validation rules: what src/schema.ts checks request bodies with. */
export const SCHEMAS: Schemas = {
  Answer: {"additionalProperties":false,"properties":{"answer":{"type":"string"},"cited":{"items":{"type":"string"},"type":"array"},"context":{"$ref":"#/components/schemas/ContextBlock"}},"required":["answer","cited","context"],"type":"object"},
  AnswerRequest: {"additionalProperties":false,"properties":{"max_tokens":{"maximum":100000,"minimum":1,"type":"integer"},"question":{"maxLength":4096,"minLength":1,"type":"string"},"session_id":{"anyOf":[{"maxLength":4096,"type":"string"},{"type":"null"}]},"tags":{"anyOf":[{"items":{"maxLength":64,"minLength":1,"type":"string"},"maxItems":64,"type":"array"},{"type":"null"}]},"types":{"anyOf":[{"items":{"$ref":"#/components/schemas/FactType"},"type":"array"},{"type":"null"}]}},"required":["question"],"type":"object"},
  BankPage: {"additionalProperties":false,"properties":{"banks":{"items":{"$ref":"#/components/schemas/BankSummary"},"type":"array"},"next_cursor":{"anyOf":[{"type":"string"},{"type":"null"}]}},"required":["banks","next_cursor"],"type":"object"},
  BankSummary: {"additionalProperties":false,"properties":{"bank_id":{"type":"string"},"counts":{"additionalProperties":{"type":"integer"},"type":"object"},"newest_at":{"anyOf":[{"type":"string"},{"type":"null"}]},"total":{"minimum":0,"type":"integer"}},"required":["bank_id","total","counts","newest_at"],"type":"object"},
  ConsolidationReport: {"additionalProperties":false,"properties":{"bank_id":{"type":"string"},"complete":{"type":"boolean"},"decay_ms":{"minimum":0,"type":"integer"},"decayed":{"type":"integer"},"observations":{"items":{"type":"string"},"type":"array"},"preferences":{"items":{"type":"string"},"type":"array"},"procedures":{"items":{"type":"string"},"type":"array"},"reinforced":{"type":"integer"},"scanned":{"type":"integer"},"superseded":{"items":{"type":"string"},"type":"array"},"took_ms":{"minimum":0,"type":"integer"}},"required":["bank_id"],"type":"object"},
  ConsolidationRounds: {"additionalProperties":false,"properties":{"rounds":{"items":{"$ref":"#/components/schemas/RecordedRound"},"type":"array"}},"required":["rounds"],"type":"object"},
  ContextBlock: {"additionalProperties":false,"properties":{"bank_id":{"type":"string"},"format":{"$ref":"#/components/schemas/ContextFormat"},"max_tokens":{"type":"integer"},"query":{"type":"string"},"sections":{"items":{"$ref":"#/components/schemas/ContextSection"},"type":"array"},"text":{"type":"string"},"tokens":{"minimum":0,"type":"integer"}},"required":["bank_id","query","format","tokens","max_tokens","text","sections"],"type":"object"},
  ContextFormat: {"enum":["markdown","json"],"type":"string"},
  ContextItem: {"additionalProperties":false,"properties":{"memory_id":{"type":"string"},"score":{"type":"number"},"text":{"type":"string"},"timestamp":{"type":"string"},"type":{"anyOf":[{"$ref":"#/components/schemas/FactType"},{"type":"null"}]},"version":{"anyOf":[{"type":"integer"},{"type":"null"}]}},"required":["memory_id","type","text","timestamp","score"],"type":"object"},
  ContextRequest: {"additionalProperties":false,"properties":{"format":{"$ref":"#/components/schemas/ContextFormat"},"max_tokens":{"maximum":100000,"minimum":1,"type":"integer"},"query":{"maxLength":4096,"minLength":1,"type":"string"},"reinforce":{"type":"boolean"},"session_id":{"anyOf":[{"maxLength":4096,"type":"string"},{"type":"null"}]},"tags":{"anyOf":[{"items":{"maxLength":64,"minLength":1,"type":"string"},"maxItems":64,"type":"array"},{"type":"null"}]},"types":{"anyOf":[{"items":{"$ref":"#/components/schemas/FactType"},"type":"array"},{"type":"null"}]}},"required":["query"],"type":"object"},
  ContextSection: {"additionalProperties":false,"properties":{"items":{"items":{"$ref":"#/components/schemas/ContextItem"},"type":"array"},"name":{"$ref":"#/components/schemas/SectionName"}},"required":["name","items"],"type":"object"},
  DeadLetterPage: {"properties":{"dead_letters":{"items":{"$ref":"#/components/schemas/DeadLetterView"},"type":"array"},"next":{"anyOf":[{"type":"string"},{"type":"null"}]}},"required":["dead_letters","next"],"type":"object"},
  DeadLetterView: {"properties":{"bank_id":{"anyOf":[{"type":"string"},{"type":"null"}]},"event_id":{"anyOf":[{"type":"string"},{"type":"null"}]},"id":{"type":"string"},"key":{"anyOf":[{"type":"string"},{"type":"null"}]},"kind":{"type":"string"},"offset":{"type":"integer"},"partition":{"type":"integer"},"reason":{"type":"string"},"source":{"anyOf":[{"type":"string"},{"type":"null"}]},"time":{"type":"string"},"topic":{"type":"string"},"value_base64":{"type":"string"},"value_text":{"anyOf":[{"type":"string"},{"type":"null"}]}},"required":["id","topic","partition","offset","time","kind","reason","source","bank_id","event_id","key","value_text","value_base64"],"type":"object"},
  ErrorBody: {"properties":{"error":{"$ref":"#/components/schemas/ErrorDetail"}},"required":["error"],"type":"object"},
  ErrorDetail: {"properties":{"message":{"type":"string"},"problems":{"items":{"$ref":"#/components/schemas/Problem"},"type":"array"},"type":{"type":"string"}},"required":["type","message"],"type":"object"},
  FactType: {"enum":["world","experience","observation","procedure","reasoning","preference","correction","profile"],"type":"string"},
  FeedbackRequest: {"additionalProperties":false,"properties":{"memory_ids":{"items":{"maxLength":128,"minLength":1,"type":"string"},"maxItems":100,"minItems":1,"type":"array"},"signal":{"$ref":"#/components/schemas/FeedbackSignal"}},"required":["memory_ids","signal"],"type":"object"},
  FeedbackResult: {"additionalProperties":false,"properties":{"bank_id":{"type":"string"},"updated":{"type":"integer"}},"required":["bank_id","updated"],"type":"object"},
  FeedbackSignal: {"enum":["returned","used","helpful"],"type":"string"},
  ForgetBankReport: {"additionalProperties":false,"properties":{"audit_key":{"type":"string"},"bank_id":{"type":"string"},"complete":{"type":"boolean"},"consolidation_objects":{"type":"integer"},"index_documents":{"type":"integer"},"memory_objects":{"type":"integer"},"resumed":{"type":"boolean"}},"required":["bank_id","audit_key"],"type":"object"},
  ForgetReport: {"additionalProperties":false,"properties":{"archive_objects":{"type":"integer"},"audit_key":{"type":"string"},"bank_id":{"type":"string"},"forgotten":{"items":{"type":"string"},"type":"array"},"index_documents":{"type":"integer"},"memory_id":{"type":"string"},"resumed":{"type":"boolean"}},"required":["bank_id","memory_id","forgotten","index_documents","archive_objects","audit_key"],"type":"object"},
  HealthStatus: {"properties":{"status":{"const":"ok","type":"string"}},"type":"object"},
  ImportReport: {"additionalProperties":false,"properties":{"bank_id":{"type":"string"},"complete":{"type":"boolean"},"conflicts":{"type":"integer"},"imported":{"type":"integer"},"indexed":{"type":"integer"},"invalid":{"type":"integer"},"lines":{"type":"integer"},"present":{"type":"integer"},"problems":{"items":{"$ref":"#/components/schemas/LineProblem"},"type":"array"}},"required":["bank_id","lines","imported","present","conflicts","invalid","indexed","complete"],"type":"object"},
  LineProblem: {"additionalProperties":false,"properties":{"key":{"anyOf":[{"type":"string"},{"type":"null"}]},"line":{"type":"integer"},"problem":{"enum":["conflict","invalid"],"type":"string"},"reason":{"type":"string"}},"required":["line","key","problem","reason"],"type":"object"},
  LinkedMemory: {"additionalProperties":false,"properties":{"event_id":{"anyOf":[{"type":"string"},{"type":"null"}]},"fact_type":{"anyOf":[{"$ref":"#/components/schemas/FactType"},{"type":"null"}]},"memory_id":{"type":"string"},"relation":{"enum":["source","evidence","correction"],"type":"string"},"text":{"anyOf":[{"type":"string"},{"type":"null"}]},"timestamp":{"anyOf":[{"type":"string"},{"type":"null"}]}},"required":["memory_id","relation"],"type":"object"},
  MemoryHistory: {"additionalProperties":false,"properties":{"bank_id":{"type":"string"},"corrections":{"items":{"$ref":"#/components/schemas/LinkedMemory"},"type":"array"},"evidence":{"items":{"$ref":"#/components/schemas/LinkedMemory"},"type":"array"},"kind":{"anyOf":[{"type":"string"},{"type":"null"}]},"memory":{"$ref":"#/components/schemas/MemoryRecord"},"memory_id":{"type":"string"},"signals":{"anyOf":[{"$ref":"#/components/schemas/MemorySignals"},{"type":"null"}]},"sources":{"items":{"$ref":"#/components/schemas/LinkedMemory"},"type":"array"},"superseded_by":{"anyOf":[{"$ref":"#/components/schemas/SupersessionRecord"},{"type":"null"}]},"supersedes":{"items":{"$ref":"#/components/schemas/SupersessionRecord"},"type":"array"},"versions":{"items":{"$ref":"#/components/schemas/MemoryVersion"},"type":"array"}},"required":["bank_id","memory_id","memory","kind","versions","superseded_by","supersedes","sources","evidence","corrections","signals"],"type":"object"},
  MemoryHit: {"additionalProperties":false,"properties":{"event_type":{"type":"string"},"explain":{"$ref":"#/components/schemas/ScoreBreakdown"},"fact_type":{"anyOf":[{"$ref":"#/components/schemas/FactType"},{"type":"null"}]},"id":{"type":"string"},"object_storage_key":{"type":"string"},"proof_count":{"anyOf":[{"type":"integer"},{"type":"null"}]},"rationale":{"anyOf":[{"type":"string"},{"type":"null"}]},"score":{"type":"number"},"source_event_id":{"type":"string"},"steps":{"anyOf":[{"items":{"type":"string"},"type":"array"},{"type":"null"}]},"superseded_by":{"anyOf":[{"type":"string"},{"type":"null"}]},"supersedes":{"items":{"type":"string"},"type":"array"},"tags":{"items":{"type":"string"},"type":"array"},"text":{"type":"string"},"timestamp":{"type":"string"},"tokens":{"type":"integer"},"valid_to":{"anyOf":[{"type":"string"},{"type":"null"}]},"version":{"anyOf":[{"type":"integer"},{"type":"null"}]}},"required":["id","text","fact_type","event_type","timestamp","tags","source_event_id","object_storage_key","score","tokens","explain"],"type":"object"},
  MemoryPage: {"additionalProperties":false,"properties":{"memories":{"items":{"$ref":"#/components/schemas/MemoryRecord"},"type":"array"},"next_cursor":{"anyOf":[{"type":"string"},{"type":"null"}]}},"required":["memories","next_cursor"],"type":"object"},
  MemoryRecord: {"additionalProperties":false,"properties":{"archived_event":{"additionalProperties":true,"type":"object"},"bank_id":{"type":"string"},"fact_type":{"anyOf":[{"$ref":"#/components/schemas/FactType"},{"type":"null"}]},"id":{"type":"string"},"importance_score":{"type":"number"},"object_storage_key":{"type":"string"},"retrieval_count":{"type":"integer"},"tags":{"items":{"type":"string"},"type":"array"},"text":{"type":"string"},"timestamp":{"type":"string"}},"required":["id","bank_id","fact_type","text","timestamp","tags","object_storage_key","importance_score","retrieval_count","archived_event"],"type":"object"},
  MemorySignals: {"additionalProperties":false,"properties":{"confidence":{"type":"number"},"decay_factor":{"type":"number"},"importance_score":{"type":"number"},"proof_count":{"anyOf":[{"type":"integer"},{"type":"null"}]},"retrieval_count":{"type":"integer"},"reward_score":{"type":"number"},"superseded":{"type":"boolean"}},"required":["importance_score","decay_factor","retrieval_count","reward_score","confidence","superseded"],"type":"object"},
  MemoryUpdate: {"additionalProperties":false,"properties":{"content":{"anyOf":[{"maxLength":32768,"minLength":1,"type":"string"},{"type":"null"}]},"memory_id":{"anyOf":[{"maxLength":128,"minLength":1,"type":"string"},{"type":"null"}]},"rationale":{"anyOf":[{"maxLength":4096,"type":"string"},{"type":"null"}]},"steps":{"anyOf":[{"items":{"maxLength":2000,"minLength":1,"type":"string"},"maxItems":100,"minItems":1,"type":"array"},{"type":"null"}]},"tags":{"anyOf":[{"items":{"maxLength":64,"minLength":1,"type":"string"},"maxItems":60,"type":"array"},{"type":"null"}]},"timestamp":{"anyOf":[{"type":"string"},{"type":"null"}]},"wait":{"type":"boolean"}},"type":"object"},
  MemoryVersion: {"additionalProperties":false,"properties":{"current":{"type":"boolean"},"memory_id":{"type":"string"},"superseded_by":{"anyOf":[{"type":"string"},{"type":"null"}]},"text":{"anyOf":[{"type":"string"},{"type":"null"}]},"timestamp":{"anyOf":[{"type":"string"},{"type":"null"}]},"version":{"minimum":1,"type":"integer"}},"required":["memory_id","version","timestamp","text","current"],"type":"object"},
  OperationsStatus: {"additionalProperties":false,"properties":{"banks":{"anyOf":[{"items":{"type":"string"},"type":"array"},{"type":"null"}]},"keys_required":{"type":"boolean"},"lag":{"anyOf":[{"$ref":"#/components/schemas/PipelineLag"},{"type":"null"}]},"operator":{"type":"boolean"}},"required":["keys_required","operator","banks","lag"],"type":"object"},
  PipelineLag: {"additionalProperties":false,"properties":{"extraction":{"anyOf":[{"type":"integer"},{"type":"null"}]},"ingestion":{"anyOf":[{"type":"integer"},{"type":"null"}]}},"required":["ingestion","extraction"],"type":"object"},
  Problem: {"properties":{"field":{"type":"string"},"rule":{"type":"string"}},"required":["field","rule"],"type":"object"},
  ProcedureBody: {"additionalProperties":false,"properties":{"context":{"$ref":"#/components/schemas/RetainContext"},"memory_id":{"anyOf":[{"maxLength":128,"minLength":1,"type":"string"},{"type":"null"}]},"rationale":{"anyOf":[{"maxLength":4096,"type":"string"},{"type":"null"}]},"steps":{"items":{"maxLength":2000,"minLength":1,"type":"string"},"maxItems":100,"minItems":1,"type":"array"},"supersedes":{"anyOf":[{"maxLength":128,"minLength":1,"type":"string"},{"type":"null"}]},"tags":{"items":{"maxLength":64,"minLength":1,"type":"string"},"maxItems":62,"type":"array"},"timestamp":{"anyOf":[{"type":"string"},{"type":"null"}]},"wait":{"type":"boolean"}},"required":["steps"],"type":"object"},
  RecallRequest: {"additionalProperties":false,"properties":{"all_versions":{"type":"boolean"},"k":{"maximum":100,"minimum":1,"type":"integer"},"max_tokens":{"anyOf":[{"maximum":1000000,"minimum":1,"type":"integer"},{"type":"null"}]},"prefer_observations":{"type":"boolean"},"query":{"maxLength":4096,"minLength":1,"type":"string"},"reinforce":{"type":"boolean"},"session_id":{"anyOf":[{"maxLength":4096,"type":"string"},{"type":"null"}]},"since":{"anyOf":[{"type":"string"},{"type":"null"}]},"tags":{"anyOf":[{"items":{"maxLength":64,"minLength":1,"type":"string"},"type":"array"},{"type":"null"}]},"types":{"anyOf":[{"items":{"$ref":"#/components/schemas/FactType"},"type":"array"},{"type":"null"}]},"until":{"anyOf":[{"type":"string"},{"type":"null"}]}},"required":["query"],"type":"object"},
  RecallResponse: {"additionalProperties":false,"properties":{"bank_id":{"type":"string"},"candidates":{"type":"integer"},"query":{"type":"string"},"results":{"items":{"$ref":"#/components/schemas/MemoryHit"},"type":"array"},"tokens":{"type":"integer"}},"required":["bank_id","query","results","candidates","tokens"],"type":"object"},
  RecordedRound: {"additionalProperties":false,"properties":{"finished_at":{"type":"string"},"report":{"$ref":"#/components/schemas/ConsolidationReport"}},"required":["finished_at","report"],"type":"object"},
  RetainContext: {"additionalProperties":false,"properties":{"agent_id":{"anyOf":[{"maxLength":4096,"type":"string"},{"type":"null"}]},"session_id":{"anyOf":[{"maxLength":4096,"type":"string"},{"type":"null"}]},"span_id":{"anyOf":[{"maxLength":4096,"type":"string"},{"type":"null"}]},"trace_id":{"anyOf":[{"maxLength":4096,"type":"string"},{"type":"null"}]},"user_id":{"anyOf":[{"maxLength":4096,"type":"string"},{"type":"null"}]}},"type":"object"},
  RetainRequest: {"additionalProperties":false,"properties":{"content":{"maxLength":32768,"minLength":1,"type":"string"},"context":{"$ref":"#/components/schemas/RetainContext"},"fact_type":{"anyOf":[{"$ref":"#/components/schemas/FactType"},{"type":"null"}]},"memory_id":{"anyOf":[{"maxLength":128,"minLength":1,"type":"string"},{"type":"null"}]},"rationale":{"anyOf":[{"maxLength":4096,"type":"string"},{"type":"null"}]},"steps":{"anyOf":[{"items":{"maxLength":2000,"minLength":1,"type":"string"},"maxItems":100,"type":"array"},{"type":"null"}]},"supersedes":{"anyOf":[{"maxLength":128,"minLength":1,"type":"string"},{"type":"null"}]},"tags":{"items":{"maxLength":64,"minLength":1,"type":"string"},"maxItems":62,"type":"array"},"timestamp":{"anyOf":[{"type":"string"},{"type":"null"}]},"wait":{"type":"boolean"}},"required":["content"],"type":"object"},
  RetainResult: {"additionalProperties":false,"properties":{"bank_id":{"type":"string"},"fact_type":{"anyOf":[{"$ref":"#/components/schemas/FactType"},{"type":"null"}]},"memory_id":{"type":"string"},"object_storage_key":{"type":"string"},"recallable":{"type":"boolean"},"reinforced":{"type":"boolean"},"version":{"anyOf":[{"type":"integer"},{"type":"null"}]}},"required":["memory_id","bank_id","fact_type","object_storage_key","recallable"],"type":"object"},
  RetryResult: {"properties":{"id":{"type":"string"},"republished_to":{"type":"string"}},"required":["id","republished_to"],"type":"object"},
  ScoreBreakdown: {"additionalProperties":false,"properties":{"bm25_rank":{"anyOf":[{"type":"integer"},{"type":"null"}]},"bm25_score":{"anyOf":[{"type":"number"},{"type":"null"}]},"boost":{"anyOf":[{"type":"number"},{"type":"null"}]},"context":{"anyOf":[{"type":"number"},{"type":"null"}]},"cosine":{"anyOf":[{"type":"number"},{"type":"null"}]},"final":{"type":"number"},"importance":{"type":"number"},"lexical":{"anyOf":[{"type":"number"},{"type":"null"}]},"novelty":{"type":"number"},"recency":{"type":"number"},"reinforcement":{"type":"number"},"relevance":{"type":"number"},"rerank":{"anyOf":[{"type":"number"},{"type":"null"}]},"resolution":{"anyOf":[{"type":"string"},{"type":"null"}]},"reward":{"type":"number"},"semantic":{"anyOf":[{"type":"number"},{"type":"null"}]},"type_boost":{"type":"number"},"vector_rank":{"anyOf":[{"type":"integer"},{"type":"null"}]},"weights":{"additionalProperties":{"type":"number"},"type":"object"}},"required":["relevance","importance","recency","reward","reinforcement","novelty","type_boost","weights","final"],"type":"object"},
  SectionName: {"enum":["rules","procedures","profile","facts","reasoning"],"type":"string"},
  SupersessionRecord: {"additionalProperties":false,"properties":{"memory_id":{"type":"string"},"rule":{"type":"string"},"superseded_by":{"type":"string"},"valid_to":{"anyOf":[{"type":"string"},{"type":"null"}]}},"required":["memory_id","superseded_by","rule","valid_to"],"type":"object"},
  TextBlockBody: {"additionalProperties":false,"properties":{"context":{"$ref":"#/components/schemas/RetainContext"},"memory_id":{"anyOf":[{"maxLength":128,"minLength":1,"type":"string"},{"type":"null"}]},"tags":{"items":{"maxLength":64,"minLength":1,"type":"string"},"maxItems":62,"type":"array"},"text":{"maxLength":32768,"minLength":1,"type":"string"},"timestamp":{"anyOf":[{"type":"string"},{"type":"null"}]},"wait":{"type":"boolean"}},"required":["text"],"type":"object"},
};
