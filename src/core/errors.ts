// The one place errors are built. Every failure that leaves the process (HTTP, MQTT, code engine)
// goes through ApiError and `envelope()`, so clients always get the ClearBlade error shape
// and never a stack trace.

export type ErrorCategory =
  | "Router" | "User" | "User Permissions" | "Data" | "Code" | "Messaging" | "Events" | "Triggers"
  | "Timers" | "Devices" | "Sync" | "Admin" | "Edge" | "Adaptors" | "Throttle" | "Webhooks"
  | "External Database";

interface ErrorKind {
  /** application code (go-utils numbering where one exists) */
  code: number;
  status: number;
  category: ErrorCategory;
  message: string;
}

const kind = (code: number, status: number, category: ErrorCategory, message: string): ErrorKind =>
  ({ code, status, category, message });

/** The catalogue. Tests assert on these codes, not on message text. */
export const ErrorKinds = {
  INVALID_METHOD: kind(101, 405, "Router", "Invalid method"),
  INTERNAL: kind(102, 500, "Router", "Internal error"),
  ROUTE_NOT_FOUND: kind(103, 404, "Router", "Route not found"),
  BAD_JSON: kind(106, 400, "Router", "Malformed JSON"),
  BODY_REQUIRED: kind(110, 400, "Router", "Request body required"),
  INVALID_ARGUMENT: kind(111, 400, "Router", "Invalid argument"),
  PAYLOAD_TOO_LARGE: kind(112, 413, "Router", "Request body too large"),
  // the shared database (PostgreSQL) cannot be reached: answered with Retry-After
  DB_UNAVAILABLE: kind(113, 503, "Router", "Database unavailable"),
  // the disk under the database is full: nothing was written (answered with Retry-After)
  STORAGE_FULL: kind(114, 507, "Router", "Insufficient storage"),
  PERMISSION_DENIED: kind(200, 401, "User Permissions", "Permission denied"),
  FORBIDDEN: kind(200, 403, "User Permissions", "Forbidden"),
  NOT_AUTHORIZED_FOR_SYSTEM: kind(201, 401, "User Permissions", "Not authorized for this system"),
  AUTH_REQUIRED: kind(202, 401, "User", "Authentication required"),
  BAD_CREDENTIALS: kind(203, 401, "User", "Invalid credentials"),
  INVALID_TOKEN: kind(204, 400, "User", "Invalid or expired token"),
  DEVELOPER_ONLY: kind(205, 401, "User Permissions", "Developer authentication required"),
  ADMIN_ONLY: kind(206, 401, "User Permissions", "Platform admin required"),
  ALREADY_EXISTS: kind(207, 400, "User", "Already exists"),
  NOT_FOUND: kind(208, 404, "User", "Not found"),
  INVALID_SECRET: kind(209, 401, "User", "Invalid system key or secret"),
  SYSTEM_NOT_FOUND: kind(210, 404, "Admin", "System not found"),
  // a sign-in code (or a test message) could not go out: no service configured, or it refused
  DELIVERY_FAILED: kind(211, 503, "Admin", "Message not sent"),
  BAD_QUERY: kind(305, 400, "Data", "Invalid query"),
  THROTTLED: kind(429, 429, "Throttle", "Too many requests"),
  EXTERNAL_DB: kind(1301, 400, "External Database", "External database error"),
  THROTTLE_CASE_PROTECTED: kind(430, 403, "Throttle", "Protected built-in case"),
  SERVICE_FAILED: kind(405, 500, "Code", "Code service failed"),
  SERVICE_TIMED_OUT: kind(405, 504, "Code", "Code service timed out"),
  // a service's lock request waited its longest (code services' ClearBlade.Lock)
  LOCK_TIMEOUT: kind(406, 423, "Code", "Lock not granted in time"),
  // the Redis a cluster shares cache values and locks through cannot be reached
  SHARED_STORE_UNAVAILABLE: kind(407, 503, "Code", "Shared store unavailable"),
  // outbound HTTP from code: refused by the egress policy, or failed on the way (timeout, size, network)
  EGRESS_REFUSED: kind(408, 403, "Code", "Outbound connection refused by the egress policy"),
  OUTBOUND_FAILED: kind(409, 502, "Code", "Outbound request failed"),
  WEBHOOK_UNAUTHORIZED: kind(202, 401, "Webhooks", "Webhook authentication failed"),
  WEBHOOK_FORBIDDEN: kind(200, 403, "Webhooks", "Not allowed to run this webhook"),
  EDGE_OFFLINE: kind(1401, 503, "Edge", "The edge is not connected"),
  EDGE_TIMEOUT: kind(1402, 504, "Edge", "The edge did not answer in time"),
  EDGE_UNSUPPORTED: kind(1403, 501, "Edge", "The edge's version does not support this"),
  COMMAND_NOT_ALLOWED: kind(1404, 403, "Edge", "Command not allowed on this edge"),
  // a local write to a definition this edge holds from its platform (its template, a deployment)
  PLATFORM_OWNED: kind(1405, 403, "Edge", "Owned by the platform"),
} as const;

export type ErrorKindName = keyof typeof ErrorKinds;

export class ApiError extends Error {
  readonly kind: ErrorKind;
  readonly detail: string;
  readonly lowLevel: unknown;
  /** seconds after which a retry may succeed: answered as Retry-After (a refusal for now) */
  retryAfterS?: number;
  constructor(kindName: ErrorKindName | ErrorKind, detail?: string, lowLevel?: unknown) {
    const k = typeof kindName === "string" ? ErrorKinds[kindName] : kindName;
    super(detail ?? k.message);
    this.kind = k;
    this.detail = detail ?? k.message;
    this.lowLevel = lowLevel;
  }
  get status() { return this.kind.status; }
  get code() { return this.kind.code; }
}

/** A reason the process will not start, or a command will not run: another process holds the
 *  data directory or a port, the database was written by a newer version, the database engine
 *  cannot be loaded. The CLI prints the message and exits with status 2, never a stack trace. */
export class Refusal extends Error {}

/** Shorthand: `throw refuse("the data directory is in use by process 42")`. */
export const refuse = (message: string) => new Refusal(message);

/** Shorthand: `throw fail("NOT_FOUND", "collection 'x' does not exist")`. */
export const fail = (k: ErrorKindName, detail?: string, lowLevel?: unknown) => new ApiError(k, detail, lowLevel);

/** A refusal for now, answered with Retry-After: `throw failFor(1, "THROTTLED", "queue full")`. */
export const failFor = (retryAfterS: number, k: ErrorKindName, detail?: string) => Object.assign(new ApiError(k, detail), { retryAfterS: Math.max(1, Math.ceil(retryAfterS)) });

/** A missing resource, with the category of the resource kind. */
export const notFound = (what: string, name: string, category: ErrorCategory = "Admin") =>
  new ApiError({ ...ErrorKinds.NOT_FOUND, category }, `${what} '${name}' does not exist`);

export interface ErrorEnvelope {
  error: { id: string; code: number; level: number; category: string; message: string; detail: string; line: string; lowLevelError: Record<string, unknown> };
  statusCode: number;
}

/** Turns any thrown value into the envelope. Unknown errors become a 500 without internals. */
export function envelope(e: unknown): ErrorEnvelope {
  const err = e instanceof ApiError ? e : new ApiError("INTERNAL", "internal error");
  const low = err.lowLevel;
  return {
    error: {
      id: crypto.randomUUID(),
      code: err.kind.code,
      level: err.kind.status >= 500 ? 3 : 1,
      category: err.kind.category,
      message: err.kind.message,
      detail: err.detail,
      line: "",
      lowLevelError: low && typeof low === "object" && !(low instanceof Error) ? (low as Record<string, unknown>) : {},
    },
    statusCode: err.kind.status,
  };
}
