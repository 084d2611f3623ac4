// Contract suite for src/store/db.ts: every driver must behave the same (see the header of db.ts).
// Also src/store/migrations.ts, run on every driver. PostgreSQL runs where its test server answers
// (OUTPOST_TEST_PG, test/pgdb.ts), in a database of this file's own, each test in its own schema.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fromSql, toSql } from "../../../src/core/columns.ts";
import { Refusal } from "../../../src/core/errors.ts";
import { VERSION } from "../../../src/version.ts";
import { databaseBytes, openDb, redactedUrl, schemaMissing, statementTooLarge, type Db, type Executor } from "../../../src/store/db.ts";
import { migrate, MIGRATIONS, type Migration } from "../../../src/store/migrations.ts";
import { createPgDatabase, dropPgDatabase, pgReachable } from "../../pgdb.ts";
import { available } from "../services.ts";

const root = mkdtempSync(join(tmpdir(), "outpost-db-test-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let seq = 0;

interface Driver { name: string; kind: "native" | "client" | "postgres"; file: boolean; open(path?: string): Promise<Db>; path(): string; url(path: string): string }
const PG = available("PostgreSQL (the store contract suite on PostgreSQL)", await pgReachable());
let pgUrl = "";
beforeAll(async () => { if (PG) pgUrl = await createPgDatabase(); });
afterAll(async () => { if (pgUrl) await dropPgDatabase(pgUrl); });
/** The test database with `schema` first on the search path (created on first use). */
const pgSchemaUrl = (schema: string) => `${pgUrl}?options=${encodeURIComponent(`-c search_path=${schema}`)}`;
const DRIVERS: Driver[] = [
  {
    name: "native file", kind: "native", file: true,
    path: () => join(root, `n${seq++}`, "x.db"),
    open(path) { return openDb({ url: `file:${path ?? this.path()}`, driver: "native" }); },
    url: (path) => `file:${path}`,
  },
  {
    name: "client file", kind: "client", file: true,
    path: () => join(root, `c${seq++}`, "y.db"),
    open(path) { return openDb({ url: `file:${path ?? this.path()}`, driver: "client" }); },
    url: (path) => `file:${path}`,
  },
  {
    name: "native :memory:", kind: "native", file: false,
    path: () => ":memory:",
    open() { return openDb({ url: ":memory:", driver: "native" }); },
    url: () => ":memory:",
  },
  ...(PG ? [{
    name: "postgres", kind: "postgres", file: true,
    path: () => `s${seq++}`,
    async open(path?: string) {
      const schema = path ?? this.path();
      const db = await openDb({ url: pgSchemaUrl(schema) });
      await db.run(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      return db;
    },
    url: (path: string) => redactedUrl(pgSchemaUrl(path)),
  } satisfies Driver] : []),
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const count = async (ex: Executor, table = "t") => (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM ${table}`))!.n;
const names = async (ex: Executor) => (await ex.all<{ name: string }>(`SELECT name FROM t ORDER BY id`)).map((r) => r.name);
/** A deferred signal. */
function latch() { let open!: () => void; const p = new Promise<void>((r) => (open = r)); return { p, open }; }
/** Exact decimal text of an integer read back from the database. */
const exact = (v: unknown) => (typeof v === "bigint" ? v.toString() : typeof v === "string" ? v : typeof v === "number" ? BigInt(v).toString() : String(v));

for (const d of DRIVERS) {
  describe(`db contract: ${d.name}`, () => {
    const pg = d.kind === "postgres";
    /** SQLite's implicit row order key, or the key column a test's table has on PostgreSQL */
    const rowid = pg ? "id" : "rowid";
    async function withDb(fn: (db: Db) => Promise<void>, schema = true) {
      const db = await d.open();
      try {
        if (schema) await db.run(db.dialect.ddl(`CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, n INTEGER)`));
        await fn(db);
      } finally {
        await db.close();
      }
    }

    test("reports its driver and url", async () => {
      const path = d.path();
      const db = await d.open(path);
      try {
        expect(db.driver).toBe(d.kind);
        expect(db.url).toBe(d.url(path));
      } finally { await db.close(); }
    });

    test("run: changes and lastInsertRowid (libSQL; 0 on PostgreSQL)", () => withDb(async (db) => {
      const a = await db.run(`INSERT INTO t (name, n) VALUES (?, ?)`, ["a", 1]);
      expect(a).toEqual({ changes: 1, lastInsertRowid: pg ? 0 : 1 });
      const b = await db.run(`INSERT INTO t (name, n) VALUES (?, ?)`, ["b", 1]);
      expect(b).toEqual({ changes: 1, lastInsertRowid: pg ? 0 : 2 });
      expect((await db.run(`UPDATE t SET n = n + 1 WHERE n = ?`, [1])).changes).toBe(2);
      expect((await db.run(`DELETE FROM t WHERE name = ?`, ["zzz"])).changes).toBe(0);
      expect((await db.run(`DELETE FROM t`)).changes).toBe(2);
    }));

    test("RETURNING gives the generated key, in order", () => withDb(async (db) => {
      expect(await db.get(`INSERT INTO t (name, n) VALUES (?, ?) RETURNING id`, ["a", 1])).toEqual({ id: 1 });
      expect(await db.all(`INSERT INTO t (name, n) VALUES ('b', 2), ('c', 3) RETURNING id, name`)).toEqual([{ id: 2, name: "b" }, { id: 3, name: "c" }]);
    }));

    test("all: every row as a plain object of its columns; [] when none", () => withDb(async (db) => {
      expect(await db.all(`SELECT * FROM t`)).toEqual([]);
      await db.run(`INSERT INTO t (name, n) VALUES ('a', 1), ('b', 2), ('c', 3)`);
      const rows = await db.all<{ id: number; name: string; n: number }>(`SELECT id, name, n FROM t WHERE n >= ? ORDER BY n DESC`, [2]);
      expect(rows).toEqual([{ id: 3, name: "c", n: 3 }, { id: 2, name: "b", n: 2 }]);
      for (const r of rows) expect(Object.keys(r)).toEqual(["id", "name", "n"]);
    }));

    test("get: the first row, exactly like all()[0]; undefined when none", () => withDb(async (db) => {
      expect(await db.get(`SELECT * FROM t WHERE id = ?`, [1])).toBeUndefined();
      await db.run(`INSERT INTO t (name, n) VALUES ('a', 1), ('b', 2)`);
      const sql = `SELECT id, name, n FROM t ORDER BY id`;
      const row = await db.get(sql);
      expect(row).toEqual({ id: 1, name: "a", n: 1 });
      expect(row).toEqual((await db.all(sql))[0]!);
      expect(Object.keys(row!)).toEqual(["id", "name", "n"]);
      // rows go straight into JSON responses: nothing but the columns
      expect(JSON.parse(JSON.stringify(row))).toEqual({ id: 1, name: "a", n: 1 });
    }));

    if (pg) test("binding null, number, string, bigint, Uint8Array, boolean, undefined into typed columns", () => withDb(async (db) => {
      await db.run(db.dialect.ddl(`CREATE TABLE v (k INTEGER PRIMARY KEY, i INTEGER, r REAL, s TEXT, b BLOB)`));
      const put = async (col: string, v: unknown) => (await db.get<{ v: unknown }>(`INSERT INTO v (${col}) VALUES (?) RETURNING ${col} AS v`, [v]))!.v;
      expect(await put("s", null)).toBeNull();
      expect(await put("s", undefined)).toBeNull();
      expect(await put("s", "it's \"quoted\" ünï")).toBe("it's \"quoted\" ünï");
      expect(await put("s", "")).toBe("");
      expect(await put("r", 1.5)).toBe(1.5);
      expect(await put("i", 42)).toBe(42);
      expect(await put("i", 5n)).toBe(5);
      expect(await put("i", true)).toBe(1);
      expect(await put("i", false)).toBe(0);
      const blob = await put("b", new Uint8Array([0, 1, 2, 255]));
      expect(blob).toBeInstanceOf(Uint8Array);
      expect([...(blob as Uint8Array)]).toEqual([0, 1, 2, 255]);
    }));

    if (!pg) test("binding null, number, string, bigint, Uint8Array, boolean, undefined", () => withDb(async (db) => {
      const q = async (v: unknown) => {
        const r = await db.get<{ v: unknown; t: string }>(`SELECT ? AS v, typeof(?) AS t`, [v, v]);
        return r && { v: r.v, t: r.t };
      };
      expect(await q(null)).toEqual({ v: null, t: "null" });
      expect(await q(undefined)).toEqual({ v: null, t: "null" });
      expect(await q("it's \"quoted\" ünï")).toEqual({ v: "it's \"quoted\" ünï", t: "text" });
      expect(await q("")).toEqual({ v: "", t: "text" });
      expect(await q(1.5)).toEqual({ v: 1.5, t: "real" });
      expect((await q(42))!.v).toBe(42);
      expect(await q(5n)).toEqual({ v: 5, t: "integer" });
      const t = await q(true), f = await q(false);
      expect(Number(t!.v)).toBe(1);
      expect(Number(f!.v)).toBe(0);
      const blob = await q(new Uint8Array([0, 1, 2, 255]));
      expect(blob!.t).toBe("blob");
      expect(blob!.v).toBeInstanceOf(Uint8Array);
      expect([...(blob!.v as Uint8Array)]).toEqual([0, 1, 2, 255]);
    }));

    test("typed columns keep their values (INTEGER, REAL, TEXT, BLOB, NULL)", () => withDb(async (db) => {
      await db.run(db.dialect.ddl(`CREATE TABLE v (i INTEGER, r REAL, s TEXT, b BLOB, z TEXT)`));
      await db.run(`INSERT INTO v VALUES (?,?,?,?,?)`, [42, 2.25, "x", new Uint8Array([9, 8, 7]), null]);
      const row = (await db.get<{ i: number; r: number; s: string; b: Uint8Array; z: null }>(`SELECT * FROM v`))!;
      expect(row.i).toBe(42);
      if (!pg) expect((await db.get<{ ti: string }>(`SELECT typeof(i) AS ti FROM v`))!.ti).toBe("integer");
      expect(row.r).toBe(2.25);
      expect(row.s).toBe("x");
      expect(row.b).toBeInstanceOf(Uint8Array);
      expect([...row.b]).toEqual([9, 8, 7]);
      expect(row.z).toBeNull();
      if (pg) return; // SQLite's columns take any value
      await db.run(`UPDATE v SET b = ?`, [true]);
      expect((await db.get<{ b: unknown }>(`SELECT b FROM v`))!.b).toBe(1);
    }));

    test("BLOB values come back as Uint8Array from both all() and get()", () => withDb(async (db) => {
      await db.run(db.dialect.ddl(`CREATE TABLE b (id INTEGER PRIMARY KEY, v BLOB)`));
      await db.run(`INSERT INTO b (v) VALUES (?)`, [new Uint8Array([1, 2, 3])]);
      const fromGet = (await db.get<{ v: unknown }>(`SELECT v FROM b`))!.v;
      const fromAll = (await db.all<{ v: unknown }>(`SELECT v FROM b`))[0]!.v;
      for (const v of [fromGet, fromAll]) {
        expect(v).toBeInstanceOf(Uint8Array);
        expect([...(v as Uint8Array)]).toEqual([1, 2, 3]);
      }
    }));

    test("integers beyond 2^53 round-trip exactly (bigint column values)", () => withDb(async (db) => {
      await db.run(db.dialect.ddl(`CREATE TABLE big (id INTEGER PRIMARY KEY, v INTEGER)`));
      const values = [2n ** 62n + 1n, 9223372036854775807n, -9223372036854775808n, 9007199254740993n];
      for (const v of values) await db.run(`INSERT INTO big (v) VALUES (?)`, [v]);
      let rows: { v: unknown }[] = [];
      let error: unknown;
      try { rows = await db.all<{ v: unknown }>(`SELECT v FROM big ORDER BY id`); } catch (e) { error = e; }
      expect(String(error ?? "")).toBe("");
      expect(rows.map((r) => exact(r.v))).toEqual(values.map(String));
    }));

    test("a bigint column value from the wire survives toSql -> db -> fromSql", () => withDb(async (db) => {
      await db.run(db.dialect.ddl(`CREATE TABLE big (v INTEGER)`));
      const wire = "9223372036854775807";
      await db.run(`INSERT INTO big VALUES (?)`, [toSql("bigint", wire, "v")]);
      let out: unknown;
      try { out = fromSql("bigint", (await db.get<{ v: unknown }>(`SELECT v FROM big`))!.v); } catch (e) { out = `error: ${e}`; }
      expect(out).toBe(wire);
    }));

    test("batch: one result per statement", () => withDb(async (db) => {
      const r = await db.batch([
        { sql: `INSERT INTO t (name, n) VALUES (?, ?)`, args: ["a", 1] },
        { sql: `INSERT INTO t (name, n) VALUES (?, ?)`, args: ["b", 2] },
        { sql: `UPDATE t SET n = n * 10` },
      ]);
      expect(r.map((x) => x.changes)).toEqual([1, 1, 2]);
      expect(r[0]!.lastInsertRowid).toBe(pg ? 0 : 1);
      expect(r[1]!.lastInsertRowid).toBe(pg ? 0 : 2);
      expect(await db.all(`SELECT name, n FROM t ORDER BY id`)).toEqual([{ name: "a", n: 10 }, { name: "b", n: 20 }]);
    }));

    test("batch is atomic: a failing statement rolls back the whole batch", () => withDb(async (db) => {
      await db.run(`INSERT INTO t (name, n) VALUES ('keep', 0)`);
      await expect(db.batch([
        { sql: `INSERT INTO t (name, n) VALUES (?, ?)`, args: ["x", 1] },
        { sql: `UPDATE t SET n = 99 WHERE name = 'keep'` },
        { sql: `INSERT INTO t (name, n) VALUES (?, ?)`, args: ["keep", 2] }, // UNIQUE violation
        { sql: `INSERT INTO t (name, n) VALUES (?, ?)`, args: ["y", 3] },
      ])).rejects.toThrow();
      expect(await db.all(`SELECT name, n FROM t`)).toEqual([{ name: "keep", n: 0 }]);
      // and the database is usable afterwards
      await db.batch([{ sql: `INSERT INTO t (name, n) VALUES ('z', 1)` }]);
      expect(await names(db)).toEqual(["keep", "z"]);
    }));

    test("tx commits and returns the callback's value", () => withDb(async (db) => {
      const out = await db.tx(async (tx) => {
        await tx.run(`INSERT INTO t (name, n) VALUES ('a', 1)`);
        await tx.run(`INSERT INTO t (name, n) VALUES ('b', 2)`);
        expect(await count(tx)).toBe(2); // reads its own writes
        return "done";
      });
      expect(out).toBe("done");
      expect(await names(db)).toEqual(["a", "b"]);
    }));

    test("tx rolls back when the callback throws, and rethrows the same error", () => withDb(async (db) => {
      await db.run(`INSERT INTO t (name, n) VALUES ('before', 0)`);
      const boom = new Error("boom");
      let caught: unknown;
      try {
        await db.tx(async (tx) => {
          await tx.run(`INSERT INTO t (name, n) VALUES ('a', 1)`);
          await tx.run(`UPDATE t SET n = 5 WHERE name = 'before'`);
          await sleep(5);
          await tx.run(`INSERT INTO t (name, n) VALUES ('b', 2)`);
          throw boom;
        });
      } catch (e) { caught = e; }
      expect(caught).toBe(boom);
      expect(await db.all(`SELECT name, n FROM t`)).toEqual([{ name: "before", n: 0 }]);
      // usable afterwards
      await db.tx(async (tx) => { await tx.run(`INSERT INTO t (name, n) VALUES ('after', 1)`); });
      expect(await names(db)).toEqual(["before", "after"]);
    }));

    test("tx rolls back when a statement inside fails", () => withDb(async (db) => {
      await expect(db.tx(async (tx) => {
        await tx.run(`INSERT INTO t (name, n) VALUES ('a', 1)`);
        await tx.run(`INSERT INTO t (name, n) VALUES ('a', 2)`); // UNIQUE
      })).rejects.toThrow();
      expect(await count(db)).toBe(0);
    }));

    test("tx: a batch inside the transaction is part of it", () => withDb(async (db) => {
      await expect(db.tx(async (tx) => {
        await tx.batch([{ sql: `INSERT INTO t (name, n) VALUES ('a', 1)` }, { sql: `INSERT INTO t (name, n) VALUES ('b', 2)` }]);
        await db.batch([{ sql: `INSERT INTO t (name, n) VALUES ('c', 3)` }]); // the Db inside its own tx callback
        expect(await count(tx)).toBe(3);
        throw new Error("undo");
      })).rejects.toThrow("undo");
      expect(await count(db)).toBe(0);
    }));

    test("nested tx joins the outer one", () => withDb(async (db) => {
      await db.tx(async (outer) => {
        await outer.run(`INSERT INTO t (name, n) VALUES ('outer', 1)`);
        const v = await db.tx(async (inner) => {
          expect(await names(inner)).toEqual(["outer"]); // sees the outer's uncommitted row
          await inner.run(`INSERT INTO t (name, n) VALUES ('inner', 2)`);
          return 7;
        });
        expect(v).toBe(7);
        expect(await names(outer)).toEqual(["outer", "inner"]);
      });
      expect(await names(db)).toEqual(["outer", "inner"]);
    }));

    test("nested tx: when the outer transaction fails, the inner one's writes are rolled back too", () => withDb(async (db) => {
      await expect(db.tx(async (outer) => {
        await outer.run(`INSERT INTO t (name, n) VALUES ('outer', 1)`);
        await db.tx(async (inner) => { await inner.run(`INSERT INTO t (name, n) VALUES ('inner', 2)`); });
        throw new Error("outer fails");
      })).rejects.toThrow("outer fails");
      expect(await count(db)).toBe(0);
    }));

    test("concurrent transactions are serialised: read-modify-write counters lose no update", () => withDb(async (db) => {
      await db.run(`INSERT INTO t (id, name, n) VALUES (0, 'counter', 0)`);
      const N = 6;
      const inc = (i: number) => db.tx(async (tx) => {
        const r = await tx.get<{ n: number }>(`SELECT n FROM t WHERE id = 0`);
        await sleep(5 + (i % 3) * 3);
        await tx.run(`UPDATE t SET n = ? WHERE id = 0`, [r!.n + 1]);
        await sleep(1);
        await tx.run(`INSERT INTO t (name, n) VALUES (?, ?)`, [`step-${i}`, r!.n + 1]);
        return r!.n + 1;
      });
      const results = await Promise.allSettled(Array.from({ length: N }, (_, i) => inc(i)));
      const errors = results.filter((r) => r.status === "rejected").map((r) => String((r as PromiseRejectedResult).reason));
      expect(errors).toEqual([]);
      expect((await db.get<{ n: number }>(`SELECT n FROM t WHERE id = 0`))!.n).toBe(N);
      // every transaction saw a distinct value: they really ran one after the other
      const seen = results.map((r) => (r as PromiseFulfilledResult<number>).value).sort((a, b) => a - b);
      expect(seen).toEqual(Array.from({ length: N }, (_, i) => i + 1));
    }));

    test("a read issued outside while a tx is open never sees the tx's uncommitted writes", () => withDb(async (db) => {
      for (const outcome of ["commit", "rollback"] as const) {
        await db.run(`DELETE FROM t`);
        const inside = latch();
        const txp = db.tx(async (tx) => {
          await tx.run(`INSERT INTO t (name, n) VALUES ('a', 1)`);
          inside.open();
          await sleep(40);
          await tx.run(`INSERT INTO t (name, n) VALUES ('b', 2)`);
          if (outcome === "rollback") throw new Error("rollback");
        }).catch((e: Error) => e.message);
        await inside.p;
        const seen = await count(db); // issued while the tx is open
        await txp;
        if (outcome === "commit") expect([0, 2]).toContain(seen);
        else expect(seen).toBe(0);
        expect(await count(db)).toBe(outcome === "commit" ? 2 : 0);
      }
    }));

    test("a write issued outside while a tx is open is not part of it: it survives the tx's rollback", () => withDb(async (db) => {
      const inside = latch();
      const txp = db.tx(async (tx) => {
        await tx.run(`INSERT INTO t (name, n) VALUES ('in-tx', 1)`);
        inside.open();
        await sleep(40);
        throw new Error("rollback");
      }).catch((e: Error) => e.message);
      await inside.p;
      const outside = db.run(`INSERT INTO t (name, n) VALUES ('outside', 2)`).then(() => "ok", (e) => `error: ${e}`);
      expect(await txp).toBe("rollback");
      expect(await outside).toBe("ok");
      expect(await names(db)).toEqual(["outside"]);
    }));

    test("a write issued outside while a tx is open waits for it and then sees its committed data", () => withDb(async (db) => {
      const inside = latch();
      const txp = db.tx(async (tx) => {
        await tx.run(`INSERT INTO t (id, name, n) VALUES (1, 'x', 10)`);
        inside.open();
        await sleep(40);
        await tx.run(`UPDATE t SET n = 20 WHERE id = 1`);
      });
      await inside.p;
      // an UPDATE based on the row's current value: must apply to the committed 20, not be lost
      const outside = db.run(`UPDATE t SET n = n + 1 WHERE id = 1`).then((r) => r.changes, (e) => `error: ${e}`);
      await txp;
      expect(await outside).toBe(1);
      expect((await db.get<{ n: number }>(`SELECT n FROM t WHERE id = 1`))!.n).toBe(21);
    }));

    test("work started inside a tx that outlives it is not part of it", () => withDb(async (db) => {
      let later!: Promise<unknown>;
      await expect(db.tx(async (tx) => {
        await tx.run(`INSERT INTO t (name, n) VALUES ('in-tx', 1)`);
        later = sleep(30).then(() => db.run(`INSERT INTO t (name, n) VALUES ('later', 2)`));
        throw new Error("rollback");
      })).rejects.toThrow("rollback");
      await later;
      expect(await names(db)).toEqual(["later"]);
    }));

    test("a statement that failed at run time can run again with good arguments", () => withDb(async (db) => {
      const sql = `SELECT ${db.dialect.jsonField("?", "a", "int")} AS r`;
      await expect(db.get(sql, ["not json"])).rejects.toThrow();
      let out: unknown;
      try { out = (await db.get<{ r: unknown }>(sql, ['{"a":2}']))?.r; } catch (e) { out = `error: ${e}`; }
      expect(out).toBe(2);
      const re = `SELECT ${db.dialect.regexp("CAST(? AS TEXT)", "CAST(? AS TEXT)")} AS r`;
      await expect(db.get(re, ["abc", pg ? "(" : "(?=a)"])).rejects.toThrow();
      try { out = (await db.get<{ r: unknown }>(re, ["abc", "^a"]))?.r; } catch (e) { out = `error: ${e}`; }
      expect(out).toBe(1);
    }));

    test("databaseBytes: the database's size", () => withDb(async (db) => {
      await db.run(`INSERT INTO t (name, n) VALUES ('a', 1)`);
      expect(await databaseBytes(db)).toBeGreaterThan(0);
    }));

    test("foreign keys are enforced", () => withDb(async (db) => {
      await db.run(db.dialect.ddl(`CREATE TABLE p (id INTEGER PRIMARY KEY)`));
      await db.run(db.dialect.ddl(`CREATE TABLE c (id INTEGER PRIMARY KEY, p INTEGER NOT NULL REFERENCES p(id) ON DELETE CASCADE)`));
      await expect(db.run(`INSERT INTO c VALUES (1, 99)`)).rejects.toThrow();
      await db.run(`INSERT INTO p VALUES (1)`);
      await db.run(`INSERT INTO c VALUES (1, 1)`);
      await db.run(`DELETE FROM p WHERE id = 1`);
      expect(await count(db, "c")).toBe(0);
    }, false));

    if (d.kind !== "postgres") test("a statement with more bound values than SQLite takes is reported as too large, other failures are not", () => withDb(async (db) => {
      const n = 40_000;
      const tooMany = await db.all(`SELECT ${Array(n).fill("?").join(", ")}`, Array(n).fill(1)).then(() => null, (e: unknown) => e);
      expect(tooMany).not.toBeNull();
      expect(statementTooLarge(tooMany)).toBe(true);
      expect(statementTooLarge(await db.run(`INSERT INTO nosuch VALUES (1)`).then(() => null, (e: unknown) => e))).toBe(false);
    }));

    test("a statement naming a table or column that is not there is told apart from other failures", () => withDb(async (db) => {
      const failure = (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e);
      await db.run(db.dialect.ddl(`CREATE TABLE probe (id INTEGER PRIMARY KEY, name TEXT UNIQUE)`));
      expect(schemaMissing(await failure(db.all(`SELECT * FROM nosuch`)))).toBe(true);
      expect(schemaMissing(await failure(db.all(`SELECT gone FROM probe`)))).toBe(true);
      expect(schemaMissing(await failure(db.run(`INSERT INTO probe (id, gone) VALUES (1, 2)`)))).toBe(true);
      expect(schemaMissing(await failure(db.tx((tx) => tx.all(`SELECT * FROM nosuch`))))).toBe(true);
      await db.run(`INSERT INTO probe (id, name) VALUES (1, 'a')`);
      expect(schemaMissing(await failure(db.run(`INSERT INTO probe (id, name) VALUES (2, 'a')`)))).toBe(false);
      expect(schemaMissing(await failure(db.all(`SELEC 1`)))).toBe(false);
    }));

    if (d.file) {
      test("data persists across close and reopen, and the other driver reads the same file", async () => {
        const path = d.path();
        const a = await d.open(path);
        await a.run(a.dialect.ddl(`CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)`));
        await a.tx(async (tx) => { await tx.run(`INSERT INTO t (name) VALUES ('persisted')`); });
        await a.close();
        const b = await d.open(path);
        expect(await names(b)).toEqual(["persisted"]);
        await b.close();
        if (pg) return;
        const other = await openDb({ url: `file:${path}`, driver: d.kind === "native" ? "client" : "native" });
        expect(await names(other)).toEqual(["persisted"]);
        await other.close();
      });
    }

    // ------------------------------------------------------------------------------------------
    describe("migrations", () => {
      test("migrate() applies MIGRATIONS once and is idempotent", async () => {
        const db = await d.open();
        try {
          const first = await migrate(db);
          expect(first).toEqual(MIGRATIONS.map((m) => m.version).sort((a, b) => a - b));
          expect(await migrate(db)).toEqual([]);
          expect(await migrate(db)).toEqual([]);
          const rows = await db.all<{ version: number; name: string; applied_at: string }>(`SELECT * FROM schema_migrations ORDER BY version`);
          expect(rows.map((r) => ({ version: r.version, name: r.name }))).toEqual(MIGRATIONS.map((m) => ({ version: m.version, name: m.name })));
          for (const r of rows) expect(Number.isNaN(Date.parse(r.applied_at))).toBe(false);
          const tables = (await db.all<{ name: string }>(db.dialect.tablesSql)).map((r) => r.name);
          for (const t of ["settings", "developers", "systems", "tokens", "users", "custom_columns", "roles", "role_members", "schema_migrations"]) {
            expect(tables).toContain(t);
          }
        } finally { await db.close(); }
      });

      test("a failing migration leaves no partial schema and no schema_migrations row", async () => {
        const db = await d.open();
        try {
          const good: Migration = { version: 1, name: "one", up: [`CREATE TABLE one (id INTEGER PRIMARY KEY)`] };
          const bad: Migration = {
            version: 2, name: "two",
            up: [`CREATE TABLE two (id INTEGER PRIMARY KEY)`, `CREATE INDEX two_x ON two(id)`, `INSERT INTO no_such_table VALUES (1)`],
          };
          await expect(migrate(db, [good, bad])).rejects.toThrow();
          const objects = (await db.all<{ name: string }>(pg ? `SELECT relname AS name FROM pg_class WHERE relnamespace = current_schema()::regnamespace` : `SELECT name FROM sqlite_master`)).map((r) => r.name);
          expect(objects).toContain("one");
          expect(objects).not.toContain("two");
          expect(objects).not.toContain("two_x");
          expect((await db.all<{ version: number }>(`SELECT version FROM schema_migrations`)).map((r) => r.version)).toEqual([1]);
          // fixed, it applies on the next run and only it
          const fixed: Migration = { ...bad, up: bad.up.slice(0, 2) };
          expect(await migrate(db, [good, fixed])).toEqual([2]);
          expect((await db.all<{ version: number }>(`SELECT version FROM schema_migrations ORDER BY version`)).map((r) => r.version)).toEqual([1, 2]);
        } finally { await db.close(); }
      });

      test("a database a newer version has migrated is refused and left as it was", async () => {
        const db = await d.open();
        try {
          const ms: Migration[] = [{ version: 1, name: "a", up: [`CREATE TABLE a (v TEXT)`] }];
          await migrate(db, ms);
          await db.run(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (7, 'from a newer version', '')`);
          const err = await migrate(db, [...ms, { version: 2, name: "b", up: [`CREATE TABLE b (v TEXT)`] }]).catch((e) => e);
          expect(err).toBeInstanceOf(Refusal);
          expect(String(err.message)).toContain(`newer version of Outpost (schema version 7; this one, ${VERSION}, knows up to 2): run that version or a newer one, or restore a backup`);
          expect((await db.all<{ name: string }>(db.dialect.tablesSql)).map((r) => r.name)).not.toContain("b");
        } finally { await db.close(); }
      });

      test("per-asset sync versions: what systems with edges hold is at version 1, statuses too; a refusal's columns", async () => {
        const db = await d.open();
        try {
          const NAME = "per-asset sync versions, an edge's last refusal";
          expect(MIGRATIONS.some((m) => m.name === NAME)).toBe(true);
          await migrate(db, MIGRATIONS.filter((m) => m.name !== NAME));
          const now = new Date().toISOString();
          await db.run(`INSERT INTO developers(id, email, email_lower, password_hash, creation_date) VALUES ('d', 'd@x', 'd@x', 'h', ?)`, [now]);
          for (const sk of ["withedge", "without"]) {
            await db.run(`INSERT INTO systems(system_key, system_secret, name, owner_id, created_at) VALUES (?, 's', ?, 'd', ?)`, [sk, sk, now]);
            for (const svc of ["calc", "fresh"]) await db.run(`INSERT INTO services(system_key, name, code, created_at, updated_at) VALUES (?, ?, '', ?, ?)`, [sk, svc, now, now]);
          }
          await db.run(`INSERT INTO edges(system_key, name, token_hash, created_date) VALUES ('withedge', 'gw', 'h', 1)`);
          // calc changed while the system had its edge (its latest change noted); statuses in log sequence numbers
          await db.run(`INSERT INTO sync_asset_seqs(system_key, asset_type, asset_name, seq) VALUES ('withedge', 'service', 'calc', 41)`);
          await db.run(`INSERT INTO sync_status(system_key, edge_name, asset_type, asset_name, desired_version, applied_version, status, updated_at) VALUES
            ('withedge', 'gw', 'service', 'calc', 41, 41, 'synced', ?), ('withedge', 'gw', 'service', 'fresh', 45, 30, 'pending', ?)`, [now, now]);
          expect(await migrate(db)).toEqual([MIGRATIONS.find((m) => m.name === NAME)!.version]);
          const seqs = await db.all<{ system_key: string; asset_type: string; asset_name: string; seq: number; version: number }>(
            `SELECT system_key, asset_type, asset_name, seq, version FROM sync_asset_seqs ORDER BY system_key, asset_type, asset_name`);
          expect(seqs).toEqual([
            { system_key: "withedge", asset_type: "service", asset_name: "calc", seq: 41, version: 1 },
            { system_key: "withedge", asset_type: "service", asset_name: "fresh", seq: 0, version: 1 },
          ]);
          const st = await db.all<{ asset_name: string; desired_version: number; applied_version: number }>(`SELECT asset_name, desired_version, applied_version FROM sync_status ORDER BY asset_name`);
          expect(st).toEqual([{ asset_name: "calc", desired_version: 1, applied_version: 1 }, { asset_name: "fresh", desired_version: 1, applied_version: 0 }]);
          const e = await db.get<{ last_refusal: string; last_refusal_at: number | null }>(`SELECT last_refusal, last_refusal_at FROM edges`);
          expect(e).toEqual({ last_refusal: "", last_refusal_at: null });
        } finally { await db.close(); }
      });

      test("migrations run in version order whatever the list order", async () => {
        const db = await d.open();
        try {
          const ms: Migration[] = [
            { version: 3, name: "c", up: [`INSERT INTO a (v) VALUES ('three')`] },
            { version: 1, name: "a", up: [`CREATE TABLE a (id INTEGER PRIMARY KEY, v TEXT)`] },
            { version: 2, name: "b", up: [`INSERT INTO a (v) VALUES ('two')`] },
          ];
          expect(await migrate(db, ms)).toEqual([1, 2, 3]);
          expect((await db.all<{ v: string }>(`SELECT v FROM a ORDER BY ${rowid}`)).map((r) => r.v)).toEqual(["two", "three"]);
        } finally { await db.close(); }
      });
    });
  });
}
