/** The Cognitive Substrate memory API from TypeScript: `new MemoryClient({ baseUrl, apiKey })`. */
export {
  MemoryClient,
  type AnswerOptions,
  type CallOptions,
  type ContextOptions,
  type ForgetBankOptions,
  type ListMemoriesOptions,
  type MemoryChange,
  type PageOptions,
  type MemoryClientOptions,
  type ProcedureOptions,
  type RecallOptions,
  type RetainOptions,
  type TextBlockOptions,
  type WriteOptions,
} from "./client.js";
export {
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
  RejectedError,
  RejectedInputError,
  ServerError,
  UnavailableError,
} from "./errors.js";
export type { RetainContextOptions, TimeArg } from "./requests.js";
export type * from "./generated.js";
export { OPERATIONS } from "./generated.js";
