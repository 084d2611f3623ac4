// One contract for every SQL connector, run against the servers that can run here (PostgreSQL
// and MariaDB, started by .ci/run through scripts/test-databases.sh). MongoDB, SQL Server and
// CouchDB cannot be installed here: their request translation is tested in translation.test.ts.
import { afterAll, describe, expect, test } from "bun:test";
import { ApiError } from "../../../src/core/errors.ts";
import { parseQuery } from "../../../src/core/query.ts";
import { type Connector, type Credentials, parseCredentials } from "../../../src/external/connector.ts";
import { mysqlConnector, postgresConnector } from "../../../src/external/sql.ts";
import { available, canConnect } from "../services.ts";

const fromUrl = (type: "postgres" | "mysql", url: string): Credentials => {
  const u = new URL(url);
  return parseCredentials(type, { user: decodeURIComponent(u.username), password: decodeURIComponent(u.password), address: u.hostname, port: u.port, dbname: u.pathname.slice(1) });
};

interface Target { name: string; make: (c: Credentials) => Connector; creds: Credentials; sleep: (s: number) => string; idType: string }
const targets: Target[] = [
  { name: "postgres", make: postgresConnector, creds: fromUrl("postgres", process.env.OUTPOST_TEST_PG ?? "postgres://outpost:outpost-test-pw@127.0.0.1:5432/outpost_test"), sleep: (s) => `SELECT pg_sleep(${s})`, idType: "INTEGER PRIMARY KEY" },
  { name: "mysql (MariaDB)", make: mysqlConnector, creds: fromUrl("mysql", process.env.OUTPOST_TEST_MYSQL ?? "mysql://outpost:outpost-test-pw@127.0.0.1:3306/outpost_test"), sleep: (s) => `SELECT SLEEP(${s})`, idType: "INT PRIMARY KEY" },
];

const expectApiError = async (p: Promise<unknown>, re: RegExp, status = 400) => {
  let err: unknown;
  try { await p; } catch (e) { err = e; }
  expect(err).toBeInstanceOf(ApiError);
  expect((err as ApiError).status).toBe(status);
  expect((err as ApiError).detail).toMatch(re);
};

for (const t of targets) {
  const run = available(`${t.name} at ${t.creds.address}:${t.creds.port}`, await canConnect(Number(t.creds.port), t.creds.address));
  (run ? describe : describe.skip)(`SQL connector contract: ${t.name}`, () => {
    const c = t.make(t.creds);
    const table = `contract_${t.name.replace(/\W/g, "")}_${Date.now().toString(36)}`;
    afterAll(async () => { await c.perform([`DROP TABLE IF EXISTS ${table}`], 5_000).catch(() => {}); await c.close(); });

    test("create, insert with positional arguments, select, update, delete: {Data, Total}", async () => {
      await c.perform([`CREATE TABLE ${table} (id ${t.idType}, label VARCHAR(50), n INT)`], 5_000);
      const ins = await c.perform([`INSERT INTO ${table} (id, label, n) VALUES ($1, $2, $3), ($4, $5, $6)`, 1, "a", 10, 2, "b's", 20], 5_000);
      expect(ins).toEqual({ Data: [], Total: 2 });
      const sel = await c.perform([`SELECT id, label, n FROM ${table} WHERE n >= $1 ORDER BY id`, 5], 5_000);
      expect(sel.Total).toBe(2);
      expect(sel.Data.map((r: any) => [Number(r.id), r.label, Number(r.n)])).toEqual([[1, "a", 10], [2, "b's", 20]]);
      // the same argument twice, out of order, and a $ inside a string literal left alone
      const reuse = await c.perform([`SELECT label FROM ${table} WHERE n = $2 OR (n = $1 AND label <> '$1') OR id = $2 / 10`, 10, 20], 5_000);
      expect(reuse.Data.map((r: any) => r.label).sort()).toEqual(["a", "b's"]);
      expect(await c.perform([`UPDATE ${table} SET n = n + 1 WHERE id = $1`, 2], 5_000)).toEqual({ Data: [], Total: 1 });
      expect(await c.perform([`DELETE FROM ${table} WHERE id = $1`, 1], 5_000)).toEqual({ Data: [], Total: 1 });
      const left = await c.perform([`SELECT n FROM ${table}`], 5_000);
      expect(left.Data.map((r: any) => Number(r.n))).toEqual([21]);
      const none = await c.perform([`SELECT * FROM ${table} WHERE id = $1`, 99], 5_000);
      expect(none).toEqual({ Data: [], Total: 0 });
    });

    test("arguments are parameters, never SQL", async () => {
      const evil = "x'); DROP TABLE " + table + "; --";
      await c.perform([`INSERT INTO ${table} (id, label, n) VALUES ($1, $2, $3)`, 3, evil, 0], 5_000);
      const r = await c.perform([`SELECT label FROM ${table} WHERE id = $1`, 3], 5_000);
      expect((r.Data[0] as any).label).toBe(evil.slice(0, 50));
    });

    test("table operations: the collection query and item writes on a table", async () => {
      const tbl = `${table}_items`;
      await c.perform([`CREATE TABLE ${tbl} (item_id VARCHAR(10), site VARCHAR(20), value INT)`], 5_000);
      try {
        expect(await c.table.insert(tbl, [{ item_id: "a", site: "n", value: 1 }, { item_id: "b", site: "n", value: 5 }, { item_id: "c", site: "s", value: 9 }], 5_000)).toBe(3);
        const q = parseQuery({ FILTERS: [[{ EQ: { site: "n" } }], [{ GT: { value: 8 } }]], SORT: [{ DESC: "value" }], PAGESIZE: 2, PAGENUM: 1 });
        expect((await c.table.fetch(tbl, q, 5_000)).map((r: any) => r.item_id)).toEqual(["c", "b"]);
        expect(await c.table.count(tbl, q, 5_000)).toBe(3);
        expect(await c.table.update(tbl, parseQuery([[{ LT: { value: 5 } }]]), { site: "x" }, 5_000)).toBe(1);
        expect(await c.table.delete(tbl, parseQuery([[{ EQ: { site: "x" } }]]), 5_000)).toBe(1);
        expect(await c.table.count(tbl, parseQuery([]), 5_000)).toBe(2);
      } finally { await c.perform([`DROP TABLE ${tbl}`], 5_000); }
    });

    test("bad SQL is a clear 400", async () => {
      await expectApiError(c.perform(["SELEC nonsense"], 5_000), /database error/i);
      await expectApiError(c.perform([`SELECT * FROM no_such_table_${Date.now()}`], 5_000), /database error/i);
    });

    test("placeholders and arguments must agree", async () => {
      await expectApiError(c.perform([`SELECT * FROM ${table} WHERE id = $1`], 5_000), /\$1 has no argument/);
      await expectApiError(c.perform([`SELECT * FROM ${table}`, 1], 5_000), /argument/);
      await expectApiError(c.perform([42], 5_000), /SQL statement/);
    });

    test("a statement past its time limit is cancelled", async () => {
      const t0 = Date.now();
      await expectApiError(c.perform([t.sleep(5)], 1_000), /did not finish within 1 s/);
      expect(Date.now() - t0).toBeLessThan(4_000);
      // the connector still works afterwards
      expect((await c.perform(["SELECT 1 AS one"], 5_000)).Total).toBe(1);
    }, 10_000);

    test("a wrong password is a clear error", async () => {
      const bad = t.make({ ...t.creds, password: "wrong-password" });
      await expectApiError(bad.perform(["SELECT 1"], 5_000), /could not connect|password|denied|authentication/i);
      await bad.close();
    });

    test("an unreachable server is a clear error, soon", async () => {
      const bad = t.make({ ...t.creds, port: "1" });
      const t0 = Date.now();
      await expectApiError(bad.perform(["SELECT 1"], 5_000), /could not connect|ECONNREFUSED|connect/i);
      expect(Date.now() - t0).toBeLessThan(6_000);
      await bad.close();
    }, 10_000);
  });
}
