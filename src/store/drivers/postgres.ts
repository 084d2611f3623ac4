// PostgreSQL through a `pg` pool (`postgres://`, `postgresql://`), the database several platform
// nodes share. Rows come back in the libSQL shapes (see its type parsers), statements are written
// with SQLite's ? placeholders, and what else differs is in src/core/dialect.ts.
import type { Pool, PoolClient, QueryResult } from "pg";
import { postgres } from "../../core/dialect.ts";
import { fail, refuse } from "../../core/errors.ts";
import type { Db, Executor, LatencySink, OpenOptions, Row, RunResult, Stmt } from "./contract.ts";
import { redactedUrl, toArgs, TxGate } from "./shared.ts";

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

  settled(): Promise<void> { return this.gate.drained(); }
  async close(): Promise<void> { await this.gate.drained(); await this.pool.end(); }
}

/** Server answers that no retry changes: a wrong password, a database that does not exist. */
const REFUSED_CODES = new Set(["28P01", "28000", "3D000", "42501"]);
const MAX_RETRY_MS = 10_000;

export async function openPg(opts: OpenOptions): Promise<Db> {
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
