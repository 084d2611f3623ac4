// The storage connection. One interface, three drivers:
//  - NativeDb: the `libsql` engine in-process for `file:` and `:memory:` databases, with a cache of
//    prepared statements. @libsql/client's file backend wraps this same engine but prepares every
//    statement on every call (measured 17k point selects/s against 108k with the cache).
//  - ClientDb: @libsql/client for `libsql://`, `http(s)://` and `ws(s)://` servers (and for `file:`
//    when forced), so a platform can move to a libSQL server without code changes.
//  - PgDb: PostgreSQL through a `pg` pool (`postgres://`, `postgresql://`), the database several
//    platform nodes share. Rows come back in the libSQL shapes (see its type parsers), statements
//    are written with SQLite's ? placeholders, and what else differs is in dialect.ts.
// All run the same contract suite (test/unit/store/db.test.ts).
// The libSQL drivers are imported when a database is opened, not when this module is: loading
// either loads the native addon, which `--help` must not need and which must find a directory it
// can be loaded from first (store/native.ts).
import { AsyncLocalStorage } from "node:async_hooks";
import { chmodSync, closeSync, mkdirSync, openSync, statSync } from "node:fs";
import { dirname } from "node:path";
import type Database from "libsql";
import type { Client, InValue, Transaction } from "@libsql/client";
import type { Pool, PoolClient, QueryResult } from "pg";
import { LruMap } from "../core/cache.ts";
import { fail, refuse } from "../core/errors.ts";
import { type Dialect, postgres, sqlite } from "../core/dialect.ts";

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
  close(): Promise<void>;
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

export const isPostgresUrl = (url: string) => /^postgres(ql)?:\/\//i.test(url);

export async function openDb(opts: OpenOptions): Promise<Db> {
  const db = await openEngine(opts);
  if (opts.latency) db.latency = opts.latency;
  return db;
}

async function openEngine(opts: OpenOptions): Promise<Db> {
  const url = opts.url;
  if (isPostgresUrl(url)) return openPg(opts);
  const local = url === ":memory:" || url.startsWith("file:");
  const driver = opts.driver === "client" || !local ? "client" : "native";
  if (driver === "native") {
    const path = url === ":memory:" ? ":memory:" : url.slice("file:".length).replace(/^\/\/(?=\/)/, "");
    if (path !== ":memory:") privateFile(path);
    const { default: Database } = await import("libsql");
    return new NativeDb(url, path, Database);
  }
  if (url.startsWith("file:")) privateFile(url.slice(5));
  const { createClient } = await import("@libsql/client");
  const client = createClient({ url, authToken: opts.authToken, intMode: "bigint" });
  const db = new ClientDb(url, client);
  if (url.startsWith("file:")) {
    await client.execute("PRAGMA journal_mode=WAL");
    await client.execute("PRAGMA busy_timeout=5000");
  }
  return db;
}

/** A database file readable by this process alone (it holds password hashes and tokens): made 0600
 *  before the engine opens it, so its -wal and -shm files, which the engine gives the database
 *  file's mode, are 0600 too; one left readable by an earlier version is narrowed. */
function privateFile(path: string) {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  closeSync(openSync(path, "a", 0o600));
  for (const p of [path, `${path}-wal`, `${path}-shm`]) {
    let mode: number;
    try { mode = statSync(p).mode & 0o777; } catch { continue; }
    if (mode & 0o077) chmodSync(p, mode & 0o700);
  }
}

const toArgs = (args: readonly unknown[] | undefined): SqlValue[] =>
  (args ?? []).map((a) => (typeof a === "boolean" ? (a ? 1 : 0) : a === undefined ? null : (a as SqlValue)));

// ---------------------------------------------------------------------------------------------

/** One transaction at a time from this process, in arrival order. Async work started inside a
 *  transaction (tracked with AsyncLocalStorage) runs straight through; `open` turns false at the
 *  end so work that outlives the transaction (an event handler started in it) queues like any other. */
class TxGate<X> {
  private queue: Promise<unknown> = Promise.resolve();
  active = false;
  private readonly als = new AsyncLocalStorage<{ open: boolean; ex: X }>();

  /** The executor of the transaction the caller is running inside, if any. */
  current(): X | undefined { const s = this.als.getStore(); return s?.open ? s.ex : undefined; }

  /** Waits while another caller's transaction is open. */
  async idle(): Promise<void> {
    while (this.active && !this.current()) await this.queue.catch(() => {});
  }

  async run<T>(begin: () => Promise<X>, fn: (ex: X) => Promise<T>, commit: (ex: X) => Promise<void>, rollback: (ex: X) => Promise<void>): Promise<T> {
    const prev = this.queue;
    let release!: () => void;
    this.queue = prev.then(() => new Promise<void>((r) => (release = r)));
    await prev.catch(() => {});
    this.active = true;
    let marker: { open: boolean; ex: X } | undefined;
    try {
      const ex = await begin();
      marker = { open: true, ex };
      const out = await this.als.run(marker, () => fn(ex)).catch(async (e) => { await rollback(ex); throw e; });
      // a COMMIT that fails (another process holds the file past the busy timeout) leaves the
      // transaction open: roll it back, or every later BEGIN on this connection fails
      await commit(ex).catch(async (e) => { await rollback(ex).catch(() => {}); throw e; });
      return out;
    } finally {
      if (marker) marker.open = false;
      this.active = false;
      release();
    }
  }

  drained() { return this.queue.catch(() => {}); }
}

type Connection = InstanceType<typeof Database>;
type NativeStatement = ReturnType<Connection["prepare"]>;

const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER), MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** One shape of row from both drivers: integers are numbers when they fit exactly and bigint
 *  otherwise (the drivers read integers as bigint so nothing is rounded); blobs are Uint8Array
 *  (the native driver hands out ArrayBuffer from all() and Buffer from get()). */
function fixValue(v: unknown): unknown {
  if (typeof v === "bigint") return v >= MIN_SAFE && v <= MAX_SAFE ? Number(v) : v;
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  return v;
}
function fixRow(r: Row): Row {
  for (const k in r) { const v = r[k]; if (typeof v === "bigint" || v instanceof ArrayBuffer) r[k] = fixValue(v); }
  return r;
}

class NativeDb implements Db {
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

  async close(): Promise<void> {
    await this.gate.drained();
    this.stmts.clear();
    this.conn.close();
  }
}

// ---------------------------------------------------------------------------------------------

function rowsOf(rs: { columns: string[]; rows: ArrayLike<unknown>[] }): Row[] {
  const cols = rs.columns;
  return rs.rows.map((r) => {
    const o: Row = {};
    for (let i = 0; i < cols.length; i++) {
      o[cols[i]!] = fixValue(r[i]);
    }
    return o;
  });
}

class ClientExecutor implements Executor {
  readonly dialect = sqlite;
  latency: LatencySink | null = null;
  constructor(protected readonly c: Client | Transaction) {}
  private async execute(sql: string, args: readonly unknown[] | undefined) {
    const t0 = this.latency ? performance.now() : 0;
    const r = await this.c.execute({ sql, args: toArgs(args) as InValue[] });
    this.latency?.observe((performance.now() - t0) / 1000);
    return r;
  }
  async all<T = Row>(sql: string, args?: readonly unknown[]): Promise<T[]> {
    return rowsOf(await this.execute(sql, args)) as T[];
  }
  async get<T = Row>(sql: string, args?: readonly unknown[]): Promise<T | undefined> {
    return (await this.all<T>(sql, args))[0];
  }
  async run(sql: string, args?: readonly unknown[]): Promise<RunResult> {
    const r = await this.execute(sql, args);
    return { changes: r.rowsAffected, lastInsertRowid: Number(r.lastInsertRowid ?? 0) };
  }
  async batch(stmts: readonly Stmt[]): Promise<RunResult[]> {
    if ("commit" in this.c) {
      const out: RunResult[] = [];
      for (const s of stmts) out.push(await this.run(s.sql, s.args));
      return out;
    }
    const rs = await (this.c as Client).batch(stmts.map((s) => ({ sql: s.sql, args: toArgs(s.args) as InValue[] })), "write");
    return rs.map((r) => ({ changes: r.rowsAffected, lastInsertRowid: Number(r.lastInsertRowid ?? 0) }));
  }
}

/** @libsql/client: transactions (and writes outside them) are serialised through one gate, since
 *  the client gives each transaction its own connection and concurrent writers would meet
 *  SQLITE_BUSY; reads go straight through. */
class ClientDb extends ClientExecutor implements Db {
  readonly driver = "client" as const;
  private readonly gate = new TxGate<ClientExecutor>();
  constructor(readonly url: string, private readonly client: Client) { super(client); }

  override all<T = Row>(sql: string, args?: readonly unknown[]) { const t = this.gate.current(); return t ? t.all<T>(sql, args) : super.all<T>(sql, args); }
  override get<T = Row>(sql: string, args?: readonly unknown[]) { const t = this.gate.current(); return t ? t.get<T>(sql, args) : super.get<T>(sql, args); }
  override async run(sql: string, args?: readonly unknown[]) {
    const t = this.gate.current();
    if (t) return t.run(sql, args);
    await this.gate.idle();
    return super.run(sql, args);
  }
  override async batch(stmts: readonly Stmt[]) {
    const t = this.gate.current();
    if (t) return t.batch(stmts);
    await this.gate.idle();
    return super.batch(stmts);
  }

  async tx<T>(fn: (tx: Executor) => Promise<T>): Promise<T> {
    const outer = this.gate.current();
    if (outer) return fn(outer);
    let t: Transaction | undefined;
    return this.gate.run(
      async () => { t = await this.client.transaction("write"); return Object.assign(new ClientExecutor(t), { latency: this.latency }); },
      fn,
      async () => { await t!.commit(); t!.close(); },
      async () => { if (!t!.closed) await t!.rollback().catch(() => {}); t!.close(); },
    );
  }

  async close(): Promise<void> { await this.gate.drained(); this.client.close(); }
}

// ---------------------------------------------------------------------------------------------

/** SQLite's placeholders (? and ?N) as PostgreSQL's ($N). A bare ? takes the number after the
 *  largest one used so far, as in SQLite; quoted text, quoted names and comments are left alone. */
export function numberPlaceholders(sql: string): string {
  let out = "", from = 0, max = 0;
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i];
    if (c === "'" || c === '"') {
      for (i++; i < sql.length; i++) if (sql[i] === c) { if (sql[i + 1] === c) i++; else break; }
    } else if (c === "-" && sql[i + 1] === "-") {
      const end = sql.indexOf("\n", i);
      i = end < 0 ? sql.length : end;
    } else if (c === "/" && sql[i + 1] === "*") {
      const end = sql.indexOf("*/", i + 2);
      i = end < 0 ? sql.length : end + 1;
    } else if (c === "?") {
      let j = i + 1;
      while (j < sql.length && sql.charCodeAt(j) >= 48 && sql.charCodeAt(j) <= 57) j++;
      const n = j > i + 1 ? Number(sql.slice(i + 1, j)) : max + 1;
      max = Math.max(max, n);
      out += sql.slice(from, i) + "$" + n;
      from = j;
      i = j - 1;
    }
  }
  return from === 0 ? sql : out + sql.slice(from);
}

/** Integers as libSQL gives them: numbers when exact, bigint beyond. */
const int8 = (s: string) => { const n = Number(s); return Number.isSafeInteger(n) ? n : BigInt(s); };
/** What `pg` makes of a column's text, in the libSQL shapes the repositories expect: BIGINT (and
 *  the NUMERIC that sum() of BIGINTs gives) as numbers, BOOLEAN as 1 and 0, JSON as its text (the
 *  repositories parse what they read); BYTEA stays a Buffer (a Uint8Array). */
const PG_PARSERS: Record<number, (s: string) => unknown> = {
  20: int8,
  1700: (s) => (/^-?\d+$/.test(s) ? int8(s) : Number(s)),
  16: (s) => (s === "t" ? 1 : 0),
  114: (s) => s,
  3802: (s) => s,
};

/** SQLSTATEs and socket errors of a server gone or not reachable: the request may succeed later. */
const UNREACHABLE_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN", "57P01", "57P02", "57P03", "53300"]);
function unreachable(e: unknown): boolean {
  const code = String((e as { code?: unknown })?.code ?? "");
  if (UNREACHABLE_CODES.has(code) || code.startsWith("08")) return true;
  return /Connection terminated|not queryable|timeout exceeded when trying to connect|Connection refused/i.test(String((e as Error)?.message ?? ""));
}

/** Errors of the database server as the rest of Outpost knows them: a server that cannot be
 *  reached is a 503 the client may retry (the envelope carries no detail of the server). */
function pgError(e: unknown): unknown {
  if (unreachable(e)) return fail("DB_UNAVAILABLE", "the database cannot be reached at the moment; try again shortly", undefined);
  // a JSON value with \u0000 (jsonb refuses it), bytes that are not UTF-8
  const code = (e as { code?: unknown })?.code;
  if (code === "22P05" || code === "22021") return fail("INVALID_ARGUMENT", "text holding a NUL character (\\u0000) or invalid UTF-8 cannot be stored");
  return e;
}

/** A unique constraint a write ran into, on either engine, and the column when the engine names
 *  it; null for any other error. */
export function uniqueViolation(e: unknown): { column: string | null } | null {
  const err = e as { code?: unknown; message?: unknown; detail?: unknown };
  if (err?.code === "23505") {
    const m = /^Key \(("?)([^)]+?)\1\)=/.exec(String(err.detail ?? ""));
    return { column: m && !m[2]!.includes(",") ? m[2]! : null };
  }
  const msg = String(err?.message ?? e);
  if (!/UNIQUE constraint failed/i.test(msg)) return null;
  return { column: /UNIQUE constraint failed: \S+\.("?)(\w+)\1/.exec(msg)?.[2] ?? null };
}

/** Whether a statement failed for its size: more bound values than SQLite takes in one statement,
 *  or a value over its length limit. */
export function statementTooLarge(e: unknown): boolean {
  return /too many SQL variables|string or blob too big/i.test(String((e as { message?: unknown })?.message ?? e));
}

/** Whether a statement named a table or a column that does not exist (any more): SQLite's
 *  messages, PostgreSQL's undefined_table and undefined_column. */
export function schemaMissing(e: unknown): boolean {
  const code = (e as { code?: unknown })?.code;
  if (code === "42P01" || code === "42703") return true;
  return /no such table|no such column|has no column named/i.test(String((e as { message?: unknown })?.message ?? e));
}

/** Whether a write failed for want of space: SQLite's SQLITE_FULL ("database or disk is full"),
 *  PostgreSQL's disk_full, or the file system's ENOSPC. */
export function diskFull(e: unknown): boolean {
  const code = (e as { code?: unknown })?.code;
  if (code === "SQLITE_FULL" || code === "53100" || code === "ENOSPC") return true;
  return /database or disk is full|no space left on device/i.test(String((e as { message?: unknown })?.message ?? ""));
}

/** A statement that only reads (a SELECT; not a data-modifying WITH or a locking read). */
const isRead = (sql: string) => /^\s*SELECT\b/i.test(sql) && !/\bFOR (UPDATE|SHARE)\b/i.test(sql);

/** Names given to statements prepared on the server (once per connection, then only bound and
 *  run): the SQL of the repositories repeats, so a few thousand cover it; beyond that (queries
 *  built from many different filters) statements are parsed each time. */
const MAX_NAMED = 4000;

class PgExecutor implements Executor {
  readonly dialect = postgres;
  constructor(protected readonly db: PgDb, private readonly client: PoolClient | Pool) {}
  async all<T = Row>(sql: string, args?: readonly unknown[]): Promise<T[]> { return (await this.db.query(this.client, sql, args)).rows as T[]; }
  async get<T = Row>(sql: string, args?: readonly unknown[]): Promise<T | undefined> { return (await this.db.query(this.client, sql, args)).rows[0] as T | undefined; }
  async run(sql: string, args?: readonly unknown[]): Promise<RunResult> {
    return { changes: (await this.db.query(this.client, sql, args)).rowCount ?? 0, lastInsertRowid: 0 };
  }
  async batch(stmts: readonly Stmt[]): Promise<RunResult[]> {
    const out: RunResult[] = [];
    for (const s of stmts) out.push(await this.run(s.sql, s.args));
    return out;
  }
}

/** PostgreSQL through a pool. Transactions from this process run one at a time, as on libSQL, and
 *  statements outside one wait for it (a change a transaction notifies its readers of is
 *  committed by the time they look); other nodes' transactions run alongside under the server's
 *  row locks. Reads outside a transaction take any free connection; writes outside one run one
 *  after the other in the order they were issued, as on libSQL's single connection (an MQTT
 *  queue's packets are enqueued without waiting for each other, and keep their order). */
class PgDb implements Db {
  readonly driver = "postgres" as const;
  readonly dialect = postgres;
  private readonly gate = new TxGate<PgExecutor>();
  private readonly direct: PgExecutor;
  private readonly text = new Map<string, { text: string; name?: string }>();
  private named = 0;
  private writes: Promise<unknown> = Promise.resolve();
  latency: LatencySink | null = null;

  constructor(readonly url: string, private readonly pool: Pool) { this.direct = new PgExecutor(this, pool); }

  async query(client: PoolClient | Pool, sql: string, args: readonly unknown[] | undefined): Promise<QueryResult> {
    let t = this.text.get(sql);
    if (!t) {
      t = { text: numberPlaceholders(sql), name: this.text.size < MAX_NAMED ? `s${this.named++}` : undefined };
      this.text.set(sql, t);
    }
    let values = toArgs(args);
    // PostgreSQL's text cannot hold NUL (SQLite's can), so no stored text equals a value holding
    // one: a statement looking for it gets a character no stored text holds in its place (U+FFFF,
    // a noncharacter) and finds nothing; one storing it is refused as bad input
    if (values.some((v) => typeof v === "string" && v.includes("\u0000"))) {
      if (/^\s*INSERT\b/i.test(sql)) throw fail("INVALID_ARGUMENT", "text holding a NUL character (\\u0000) cannot be stored");
      values = values.map((v) => (typeof v === "string" ? v.replaceAll("\u0000", "\uffff") : v));
    }
    const t0 = this.latency ? performance.now() : 0;
    try {
      const r = await client.query({ text: t.text, name: t.name, values });
      this.latency?.observe((performance.now() - t0) / 1000);
      return r;
    } catch (e) {
      // a table changed under a prepared statement (a column dropped and added again with another
      // type): parsed again under a new name
      if ((e as { code?: string }).code === "0A000" && t.name && /cached plan/.test(String((e as Error).message))) {
        this.text.delete(sql);
        return this.query(client, sql, args);
      }
      throw pgError(e);
    }
  }

  all<T = Row>(sql: string, args?: readonly unknown[]) { return this.on((ex) => ex.all<T>(sql, args), isRead(sql)); }
  get<T = Row>(sql: string, args?: readonly unknown[]) { return this.on((ex) => ex.get<T>(sql, args), isRead(sql)); }
  run(sql: string, args?: readonly unknown[]) { return this.on((ex) => ex.run(sql, args), isRead(sql)); }
  async batch(stmts: readonly Stmt[]): Promise<RunResult[]> {
    const t = this.gate.current();
    return t ? t.batch(stmts) : this.tx((tx) => tx.batch(stmts));
  }

  /** Runs on the caller's transaction, or after the open one on any connection (a write after
   *  the writes issued before it). */
  private async on<R>(use: (ex: PgExecutor) => Promise<R>, read: boolean): Promise<R> {
    const t = this.gate.current();
    if (t) return use(t);
    if (read) {
      if (this.gate.active) await this.gate.idle();
      return use(this.direct);
    }
    const done = this.writes.then(async () => {
      if (this.gate.active) await this.gate.idle();
      return use(this.direct);
    });
    this.writes = done.catch(() => {});
    return done;
  }

  /** A transaction that another node's deadlocked with (the server aborted it to break the cycle)
   *  runs again, a few times: it wrote nothing, and its work is the same. */
  async tx<T>(fn: (tx: Executor) => Promise<T>): Promise<T> {
    const outer = this.gate.current();
    if (outer) return fn(outer);
    for (let attempt = 1; ; attempt++) {
      try { return await this.txOnce(fn); } catch (e) {
        const code = (e as { code?: unknown })?.code;
        if (attempt >= 3 || (code !== "40P01" && code !== "40001")) throw e;
      }
    }
  }

  private txOnce<T>(fn: (tx: Executor) => Promise<T>): Promise<T> {
    let client: PoolClient | undefined;
    let broken = false;
    return this.gate.run(
      async () => {
        try { client = await this.pool.connect(); } catch (e) { throw pgError(e); }
        try { await this.query(client, "BEGIN", undefined); } catch (e) { client.release(true); throw e; }
        return new PgExecutor(this, client);
      },
      fn,
      async () => {
        try { await this.query(client!, "COMMIT", undefined); }
        catch (e) { broken = true; throw e; }
        finally { client!.release(broken); }
      },
      async () => {
        try { await this.query(client!, "ROLLBACK", undefined); } catch { broken = true; }
        client!.release(broken);
      },
    );
  }

  async close(): Promise<void> { await this.gate.drained(); await this.pool.end(); }
}

/** The database's size in bytes (a file's pages, a PostgreSQL database's disk). */
export async function databaseBytes(ex: Executor): Promise<number> {
  return Number((await ex.get<{ n: number }>(ex.dialect.sizeSql))?.n ?? 0);
}

/** A connection URL without its password, for messages and logs. */
export function redactedUrl(url: string): string {
  return url.replace(/^([a-z]+:\/\/[^:/@]*):[^@]*@/i, "$1:***@");
}

/** Server answers that no retry changes: a wrong password, a database that does not exist. */
const REFUSED_CODES = new Set(["28P01", "28000", "3D000", "42501"]);
const MAX_RETRY_MS = 10_000;

async function openPg(opts: OpenOptions): Promise<Db> {
  const { default: pg } = await import("pg");
  const max = opts.poolMax ?? 10;
  const pool = new pg.Pool({
    connectionString: opts.url, max, idleTimeoutMillis: 30_000, connectionTimeoutMillis: 10_000,
    application_name: "outpost",
    types: { getTypeParser: ((oid: number, format?: string) => (format !== "binary" && PG_PARSERS[oid]) || pg.types.getTypeParser(oid, format as "text")) as typeof pg.types.getTypeParser },
  });
  // an idle connection the server dropped (a restart, a failover): the pool forgets it and the next
  // statement opens another; without a listener the process would end
  pool.on("error", () => {});
  const url = redactedUrl(opts.url);
  for (let delay = 250; ; delay = Math.min(delay * 2, MAX_RETRY_MS)) {
    try {
      const c = await pool.connect();
      c.release();
      return new PgDb(url, pool);
    } catch (e) {
      const code = String((e as { code?: unknown }).code ?? "");
      if (REFUSED_CODES.has(code) || !unreachable(e)) {
        await pool.end().catch(() => {});
        throw refuse(`the database ${url} refused the connection: ${(e as Error).message}`);
      }
      opts.onRetry?.(e as Error, delay);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
