// What a database gives the repositories, whichever driver opened it (src/store/db.ts chooses the
// driver by the URL's scheme and re-exports these).
import type { Dialect } from "../../core/dialect.ts";

export type SqlValue = null | string | number | bigint | Uint8Array;
export type Row = Record<string, unknown>;
export interface Stmt { sql: string; args?: readonly unknown[] }
/** lastInsertRowid: libSQL only (0 on PostgreSQL): a repository that needs a generated key reads
 *  it with RETURNING, which both engines have. */
export interface RunResult { changes: number; lastInsertRowid: number }

/** What repositories need: run statements. Both a Db and an open transaction are Executors. */
export interface Executor {
  /** How this engine's SQL differs (dialect.ts). */
  readonly dialect: Dialect;
  all<T = Row>(sql: string, args?: readonly unknown[]): Promise<T[]>;
  get<T = Row>(sql: string, args?: readonly unknown[]): Promise<T | undefined>;
  run(sql: string, args?: readonly unknown[]): Promise<RunResult>;
  /** Runs the statements atomically. */
  batch(stmts: readonly Stmt[]): Promise<RunResult[]>;
}

/** Where statement durations go (a histogram on /metrics). */
export interface LatencySink { observe(seconds: number): void }

export interface Db extends Executor {
  readonly driver: "native" | "client" | "postgres";
  readonly url: string;
  /** told each statement's duration (OpenOptions.latency) */
  latency: LatencySink | null;
  /** Runs `fn` in one write transaction; commits when it resolves, rolls back when it throws. */
  tx<T>(fn: (tx: Executor) => Promise<T>): Promise<T>;
  /** Resolves once the transactions begun before it have ended (committed or rolled back): what
   *  another process reads after that sees them. */
  settled(): Promise<void>;
  close(): Promise<void>;
  /** Gives back memory held for statements run once (the migrations'): prepared statements and
   *  cached pages; the work refills what it uses. */
  release?(): void;
}

export interface OpenOptions {
  url: string;
  authToken?: string;
  driver?: "auto" | "native" | "client";
  /** PostgreSQL: most connections held open (at least 2: a transaction holds one) */
  poolMax?: number;
  /** PostgreSQL: called before each new attempt while the server cannot be reached at start */
  onRetry?: (err: Error, delayMs: number) => void;
  /** told each statement's duration */
  latency?: LatencySink;
}
