// Throwaway PostgreSQL databases for tests (unit suites under Bun, black-box suites under Node):
// each suite, or each platform a black-box test starts, gets a database of its own, dropped when
// done. The server is the one scripts/test-databases.sh sets up (its account may create
// databases); OUTPOST_TEST_PG points elsewhere.
import { randomBytes } from "node:crypto";
import pg from "pg";

export const PG_TEST_URL = process.env.OUTPOST_TEST_PG ?? "postgres://outpost:outpost-test-pw@127.0.0.1:5432/outpost_test";

/** The test server's URL with another database name. */
export function pgUrlFor(database: string): string {
  const u = new URL(PG_TEST_URL);
  u.pathname = `/${database}`;
  return u.toString();
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: PG_TEST_URL, connectionTimeoutMillis: 3000 });
  await c.connect();
  try { return await fn(c); } finally { await c.end().catch(() => {}); }
}

/** Whether the test server answers. */
export async function pgReachable(): Promise<boolean> {
  try { await admin((c) => c.query("SELECT 1")); return true; } catch { return false; }
}

const NAME_RE = /^[a-z0-9_]+$/;

/** Creates the database `name` (a fresh random one when omitted) unless it exists; its URL. */
export async function createPgDatabase(name = `outpost_t_${randomBytes(6).toString("hex")}`): Promise<string> {
  if (!NAME_RE.test(name)) throw new Error(`bad test database name ${name}`);
  await admin(async (c) => {
    const exists = (await c.query("SELECT 1 FROM pg_database WHERE datname = $1", [name])).rowCount;
    if (!exists) await c.query(`CREATE DATABASE ${name}`).catch((e) => { if (e.code !== "42P04") throw e; });
  });
  return pgUrlFor(name);
}

/** Drops a test database, closing whatever sessions still use it. */
export async function dropPgDatabase(urlOrName: string): Promise<void> {
  const name = urlOrName.includes("://") ? new URL(urlOrName).pathname.slice(1) : urlOrName;
  if (!NAME_RE.test(name)) throw new Error(`bad test database name ${name}`);
  // FORCE cannot end a backend of another role (an autovacuum worker on the new database, under
  // load): it goes soon, so the drop is tried again; a database left behind is only clutter
  for (let attempt = 1; ; attempt++) {
    try { await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)); return; }
    catch (e) {
      if ((e as { code?: string }).code !== "42501") throw e;
      if (attempt === 10) { console.warn(`test database ${name} left behind: ${(e as Error).message}`); return; }
      await new Promise((r) => setTimeout(r, 300));
    }
  }
}
