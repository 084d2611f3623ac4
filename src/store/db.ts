// The storage connection. One interface (drivers/contract.ts), three drivers, chosen here by the
// URL's scheme, one file each under drivers/:
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
import { chmodSync, closeSync, mkdirSync, openSync, statSync } from "node:fs";
import { dirname } from "node:path";
import type { Db, Executor, OpenOptions } from "./drivers/contract.ts";
import { ClientDb } from "./drivers/client.ts";
import { NativeDb } from "./drivers/native.ts";
import { openPg } from "./drivers/postgres.ts";

export type { Db, Executor, LatencySink, OpenOptions, Row, RunResult, SqlValue, Stmt } from "./drivers/contract.ts";
export { redactedUrl } from "./drivers/shared.ts";

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

/** The database's size in bytes (a file's pages, a PostgreSQL database's disk). */
export async function databaseBytes(ex: Executor): Promise<number> {
  return Number((await ex.get<{ n: number }>(ex.dialect.sizeSql))?.n ?? 0);
}
