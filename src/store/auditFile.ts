// Where the audit trail's rows are written. On a libSQL file the trail has a file of its own
// (`<name>.audit.db` beside the database) written by a thread of its own (auditWorker.ts): its
// inserts, commits and checkpoints (with their fsyncs) never hold the thread that serves the API
// nor its connection's write lock. Binding and inserting a row is most of what an audited write
// costs (about 3.5 of 4.4 µs of CPU, measured in-process), and the API's thread pays none of it.
// Anywhere else (PostgreSQL, a libSQL server, :memory:) the rows go to the database's own `audit`
// table, through its own connections.
//
// The thread starts with the first row (or the first read of the trail): an instance that audits
// nothing does not pay for it.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { sqlite } from "../core/dialect.ts";
import { auditRepo, type AuditValues } from "./audit.ts";
import type { Db, Executor, Row, RunResult, Stmt } from "./db.ts";

export interface AuditStore {
  /** Where the trail is read, trimmed and removed (auditRepo's queries run on it). */
  readonly executor: Executor;
  /** Writes the rows in order, in one transaction. */
  insert(rows: AuditValues[]): Promise<void>;
  /** Whether the trail may hold rows (false: nothing was ever written, nothing to trim). */
  hasRows(): boolean;
  close(): Promise<void>;
}

/** The trail in the database's own table (the connection the API uses). */
export function inlineAuditStore(db: Db): AuditStore {
  return {
    executor: db,
    insert: (rows) => db.tx((tx) => auditRepo.insertMany(tx, rows)),
    hasRows: () => true,
    close: async () => {},
  };
}

/** The file of the trail of a libSQL file database; null when the trail stays in the database. */
export function auditFileOf(db: Db): string | null {
  if (db.driver !== "native" || !db.url.startsWith("file:")) return null;
  const path = db.url.slice("file:".length).replace(/^\/\/(?=\/)/, "");
  return join(dirname(path), `${path.slice(dirname(path).length + 1).replace(/\.db$/, "")}.audit.db`);
}

/** The store of a database's trail: a file of its own for a libSQL file (`nativeDir`: where the
 *  thread may write libSQL's addon, as the main thread does), its own table otherwise. */
export function openAuditStore(db: Db, nativeDir: () => string): AuditStore {
  const file = auditFileOf(db);
  return file ? new AuditFile(file, nativeDir(), existsSync(file)) : inlineAuditStore(db);
}

const WORKER_URL = import.meta.url.startsWith("file:///$bunfs/") ? "/$bunfs/root/store/auditWorker.ts" : new URL("./auditWorker.ts", import.meta.url).href;

/** What the thread is asked (one at a time, answered in order). */
export type AuditRequest =
  | { id: number; t: "open"; path: string; nativeDir: string }
  | { id: number; t: "insert"; rows: AuditValues[] }
  | { id: number; t: "all" | "get" | "run"; sql: string; args: readonly unknown[] }
  | { id: number; t: "close" };
type Unsent<T> = T extends unknown ? Omit<T, "id"> : never;
export type AuditAnswer = { id: number; ok: true; v?: unknown } | { id: number; ok: false; error: string };

/** The trail in a file of its own, written by its own thread. */
export class AuditFile implements AuditStore, Executor {
  readonly dialect = sqlite;
  readonly executor: Executor = this;
  private worker: Worker | null = null;
  private nextId = 0;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private opened = false;

  /** `existed`: the file was there at start (rows from an earlier run may be in it). */
  constructor(private readonly path: string, private readonly nativeDir: string, private readonly existed: boolean) {}

  hasRows() { return this.opened || this.existed; }

  private send<T>(m: Unsent<AuditRequest>): Promise<T> {
    const w = this.thread();
    const id = ++this.nextId;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      w.postMessage(JSON.stringify({ ...m, id }));
    });
  }

  /** The thread, started (and the file opened) on first use; a thread that failed is replaced. */
  private thread(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(WORKER_URL);
    this.worker = w;
    this.opened = true;
    w.onmessage = (e: MessageEvent) => {
      const a = JSON.parse(e.data as string) as AuditAnswer;
      const p = this.waiting.get(a.id);
      if (!p) return;
      this.waiting.delete(a.id);
      if (a.ok) p.resolve(a.v);
      else p.reject(new Error(a.error));
    };
    w.onerror = (e: ErrorEvent) => this.lost(new Error(`the audit trail's thread failed: ${e.message}`));
    // first in its queue: every later request finds the file open
    const id = ++this.nextId;
    this.waiting.set(id, { resolve: () => {}, reject: (err) => { if (this.worker === w) this.lost(err); } });
    w.postMessage(JSON.stringify({ t: "open", id, path: this.path, nativeDir: this.nativeDir } satisfies AuditRequest));
    return w;
  }

  private lost(err: Error) {
    this.worker?.terminate();
    this.worker = null;
    for (const p of this.waiting.values()) p.reject(err);
    this.waiting.clear();
  }

  insert(rows: AuditValues[]): Promise<void> { return this.send({ t: "insert", rows }); }

  all<T = Row>(sql: string, args: readonly unknown[] = []): Promise<T[]> { return this.send({ t: "all", sql, args }); }
  get<T = Row>(sql: string, args: readonly unknown[] = []): Promise<T | undefined> { return this.send({ t: "get", sql, args }); }
  run(sql: string, args: readonly unknown[] = []): Promise<RunResult> { return this.send({ t: "run", sql, args }); }
  async batch(stmts: readonly Stmt[]): Promise<RunResult[]> {
    const out: RunResult[] = [];
    for (const s of stmts) out.push(await this.run(s.sql, s.args ?? []));
    return out;
  }

  /** Closes the file (its last checkpoint written) and ends the thread, once what was asked is done. */
  async close(): Promise<void> {
    if (!this.worker) return;
    try { await this.send({ t: "close" }); } finally {
      this.worker?.terminate();
      this.worker = null;
    }
  }
}
