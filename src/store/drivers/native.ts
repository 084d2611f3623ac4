// The `libsql` engine in-process, for `file:` and `:memory:` databases, with a cache of prepared
// statements (see src/store/db.ts for why not @libsql/client's file backend). The engine itself is
// loaded by openDb and handed in: loading it loads the native addon (src/store/native.ts).
import type Database from "libsql";
import { LruMap } from "../../core/cache.ts";
import { sqlite } from "../../core/dialect.ts";
import type { Db, Executor, LatencySink, Row, RunResult, Stmt } from "./contract.ts";
import { fixRow, toArgs, TxGate } from "./shared.ts";

type Connection = InstanceType<typeof Database>;
type NativeStatement = ReturnType<Connection["prepare"]>;

export class NativeDb implements Db {
  readonly driver = "native" as const;
  readonly dialect = sqlite;
  private readonly conn: Connection;
  /** prepared statements by SQL, the least recently used dropped past 1,000 */
  private readonly stmts = new LruMap<string, NativeStatement>(1_000);
  /** A single connection is shared: while a transaction is open, everyone else waits. */
  private readonly gate = new TxGate<NativeDb>();
  latency: LatencySink | null = null;

  constructor(readonly url: string, path: string, Engine: typeof Database) {
    // milliseconds: how long a write waits for another process holding the file (platform nodes
    // sharing it, a backup) before it fails with "database is locked"
    this.conn = new Engine(path, { timeout: 5_000 });
    if (path !== ":memory:") {
      this.conn.exec("PRAGMA journal_mode=WAL");
      this.conn.exec("PRAGMA synchronous=NORMAL");
    }
    this.conn.exec("PRAGMA foreign_keys=ON");
    this.conn.defaultSafeIntegers(true);
  }

  /** Runs `use` on the cached statement; a statement that failed is dropped from the cache,
   *  because the engine may keep it in a failed state. */
  private withStmt<R>(sql: string, use: (s: NativeStatement) => R): R {
    let s = this.stmts.get(sql);
    if (!s) {
      s = this.conn.prepare(sql);
      this.stmts.set(sql, s);
    }
    const latency = this.latency;
    const t0 = latency ? performance.now() : 0;
    try {
      const r = use(s);
      if (latency) latency.observe((performance.now() - t0) / 1000);
      return r;
    } catch (e) { this.stmts.delete(sql); throw e; }
  }

  allSync<T>(sql: string, args?: readonly unknown[]): T[] {
    const rows = this.withStmt(sql, (s) => s.all(toArgs(args)) as Row[]);
    for (const r of rows) fixRow(r);
    return rows as T[];
  }
  getSync<T>(sql: string, args?: readonly unknown[]): T | undefined {
    const r = this.withStmt(sql, (s) => s.get(toArgs(args)) as Row | undefined);
    if (!r) return undefined;
    delete r._metadata;
    return fixRow(r) as T;
  }
  runSync(sql: string, args?: readonly unknown[]): RunResult {
    const r = this.withStmt(sql, (s) => s.run(toArgs(args)) as { changes: number; lastInsertRowid: number | bigint });
    return { changes: Number(r.changes), lastInsertRowid: Number(r.lastInsertRowid) };
  }

  async all<T = Row>(sql: string, args?: readonly unknown[]): Promise<T[]> {
    if (this.gate.active) await this.gate.idle();
    return this.allSync<T>(sql, args);
  }
  async get<T = Row>(sql: string, args?: readonly unknown[]): Promise<T | undefined> {
    if (this.gate.active) await this.gate.idle();
    return this.getSync<T>(sql, args);
  }
  async run(sql: string, args?: readonly unknown[]): Promise<RunResult> {
    if (this.gate.active) await this.gate.idle();
    return this.runSync(sql, args);
  }
  async batch(stmts: readonly Stmt[]): Promise<RunResult[]> {
    if (this.gate.current()) return stmts.map((s) => this.runSync(s.sql, s.args));
    return this.tx(async () => stmts.map((s) => this.runSync(s.sql, s.args)));
  }

  async tx<T>(fn: (tx: Executor) => Promise<T>): Promise<T> {
    if (this.gate.current()) return fn(this); // nested: part of the outer transaction
    return this.gate.run(
      async () => { this.conn.exec("BEGIN IMMEDIATE"); return this; },
      fn,
      async () => { this.conn.exec("COMMIT"); },
      async () => { if (this.conn.inTransaction) this.conn.exec("ROLLBACK"); },
    );
  }

  release(): void {
    if (this.gate.active) return;
    this.stmts.clear();
    this.conn.exec("PRAGMA shrink_memory");
  }

  settled(): Promise<void> { return this.gate.drained(); }

  async close(): Promise<void> {
    await this.gate.drained();
    this.stmts.clear();
    this.conn.close();
  }
}
