// src/core/sqlStatement.ts: statements from code on a system's collections, checked and written
// again. Hostile statements are refused, or written so that they can reach nothing but the
// collections the caller named (which the domain then looks up in the caller's system).
import { beforeAll, describe, expect, test } from "bun:test";
import { ApiError } from "../../../src/core/errors.ts";
import { checkStatement, loadSqlParser } from "../../../src/core/sqlStatement.ts";

beforeAll(() => loadSqlParser());

const table = (name: string) => `"c_${Buffer.from(name).toString("hex").padEnd(30, "0").slice(0, 30)}"`;
let n = 0;
const newId = () => `00000000-0000-0000-0000-${String(++n).padStart(12, "0")}`;

function refusedWith(sql: string, re: RegExp) {
  let thrown: unknown;
  try { checkStatement(sql); } catch (e) { thrown = e; }
  expect(thrown).toBeInstanceOf(ApiError);
  expect((thrown as ApiError).detail).toMatch(re);
}
const written = (sql: string) => checkStatement(sql).write(table, newId);

describe("allowed statements", () => {
  test("a SELECT: the collection becomes its table, aliased to the name written; $n as ?n", () => {
    const st = checkStatement("SELECT id, type FROM assets WHERE id = $1 LIMIT 1");
    expect(st.kind).toBe("select");
    expect([...st.reads]).toEqual(["assets"]);
    expect(st.params).toBe(1);
    expect(st.write(table, newId)).toBe(`SELECT "id", "type" FROM ${table("assets")} AS "assets" WHERE ("id" = ?1) LIMIT 1`);
  });

  test("CTEs, a subquery in FROM, UNION and aggregates name every collection they read", () => {
    const st = checkStatement(`WITH recent AS (SELECT item_id, v, k FROM a WHERE t > $1)
      SELECT count(*), max(r.v) FROM recent r
      WHERE EXISTS (SELECT 1) AND r.v IN (1, 2) GROUP BY r.k HAVING count(*) > 1
      UNION SELECT 1, 2 FROM (SELECT * FROM e) s ORDER BY 1 DESC LIMIT 5 OFFSET 2`);
    expect([...st.reads].sort()).toEqual(["a", "e"]);
    const sql = st.write(table, newId);
    for (const name of ["a", "e"]) expect(sql).toContain(`${table(name)} AS "${name}"`);
    expect(sql).toContain(`FROM "recent" AS "r"`);
  });

  test("a statement's cost stays linear: no joins, no subquery in an expression reading a table", () => {
    for (const sql of ["SELECT * FROM a JOIN b ON a.x = b.x", "SELECT * FROM a, b", "SELECT * FROM a x, a y", "SELECT * FROM a CROSS JOIN b",
      "SELECT * FROM a LEFT JOIN b USING (x)", "SELECT * FROM a NATURAL JOIN b", "WITH c AS (SELECT * FROM a) SELECT count(*) FROM c, c d"])
      refusedWith(sql, /joins are not supported/);
    for (const sql of ["SELECT * FROM a WHERE x IN (SELECT x FROM b)", "SELECT (SELECT count(*) FROM a b WHERE b.x < a.x) FROM a",
      "SELECT 1 FROM a WHERE EXISTS (SELECT 1 FROM a b WHERE b.x <> a.x)", "UPDATE a SET x = 1 WHERE y IN (SELECT y FROM b)",
      "DELETE FROM a WHERE (SELECT count(*) FROM a b WHERE b.x < a.x) > 5", "UPDATE a SET x = (SELECT max(y) FROM b)",
      "INSERT INTO a (item_id, x) VALUES ('i', (SELECT y FROM b))", "WITH c AS (SELECT x FROM a) SELECT 1 FROM a WHERE x IN (SELECT x FROM c)"])
      refusedWith(sql, /reads no collection/);
  });

  test("quoted identifiers stay names: a quoted table is a collection, a quoted column a column", () => {
    expect(written(`SELECT "Name" FROM "My Things" t WHERE t."Name" = 'x'`)).toBe(`SELECT "Name" FROM ${table("My Things")} AS "t" WHERE ("t"."Name" = 'x')`);
    const st = checkStatement(`SELECT * FROM "sqlite_master"`);
    expect([...st.reads]).toEqual(["sqlite_master"]);
    expect(st.write(table, newId)).not.toMatch(/FROM "sqlite_master"/);
  });

  test("an INSERT gets item_ids when it gives none; UPDATE and DELETE name their target", () => {
    n = 0;
    const ins = checkStatement("INSERT INTO a (x, y) VALUES ($1, $2), (3, 'it''s')");
    expect(ins.target).toBe("a");
    expect(ins.columns).toEqual(["x", "y"]);
    expect(ins.write(table, newId)).toBe(`INSERT INTO ${table("a")} ("x", "y", "item_id") VALUES (?1, ?2, '00000000-0000-0000-0000-000000000001'), (3, 'it''s', '00000000-0000-0000-0000-000000000002')`);
    const upd = checkStatement("UPDATE a SET x = x + 1 WHERE y IN ($1, (SELECT 2))");
    expect([upd.target, [...upd.reads]]).toEqual(["a", []]);
    expect(upd.write(table, newId)).toBe(`UPDATE ${table("a")} AS "a" SET "x" = ("x" + 1) WHERE ("y" IN (?1, (SELECT 2)))`);
    const del = checkStatement("DELETE FROM _asset_history WHERE item_id IN ($1, $2)");
    expect([del.target, del.params]).toEqual(["_asset_history", 2]);
  });
});

test("a statement checked once is not parsed again (its writing still is, per system)", () => {
  const sql = "SELECT v FROM kept WHERE k = $1";
  const first = checkStatement(sql);
  expect(checkStatement(sql)).toBe(first);
  expect(first.write((n) => `"t_${n}"`, newId)).toBe(`SELECT "v" FROM "t_kept" AS "kept" WHERE ("k" = ?1)`);
  expect(first.write(table, newId)).toBe(`SELECT "v" FROM ${table("kept")} AS "kept" WHERE ("k" = ?1)`);
});

describe("hostile statements", () => {
  test("another system's collection, or an engine catalog, is only ever a name of the caller's system", () => {
    // the domain looks every name up in the caller's system: none of these reaches another table
    for (const sql of ["SELECT * FROM sqlite_master", "SELECT * FROM sqlite_schema", "SELECT * FROM pg_tables", "SELECT * FROM other_systems_things", 'SELECT * FROM "c_0123456789abcdef0123456789abcd"']) {
      const st = checkStatement(sql);
      const name = [...st.reads][0]!;
      expect(st.write(table, newId)).toBe(`SELECT * FROM ${table(name)} AS "${name}"`);
    }
  });

  test("schemas: pg_catalog, information_schema, main, temp", () => {
    for (const s of ["pg_catalog.pg_tables", "information_schema.tables", "main.sqlite_master", "temp.x", "public.assets"])
      refusedWith(`SELECT * FROM ${s}`, /without a schema/);
    refusedWith("SELECT a.b.c FROM a", /./);
  });

  test("functions outside the list: load_extension, pg_read_file, version, now, readfile", () => {
    for (const f of ["load_extension('x')", "pg_read_file('/etc/passwd')", "version()", "now()", "readfile('x')", "pg_sleep(10)", "current_setting('x')", "set_config('a','b',false)", "lo_import('/etc/passwd')", "dblink('x','y')"])
      refusedWith(`SELECT ${f} FROM a`, /function|could not be parsed/);
    refusedWith("SELECT pg_catalog.lower(x) FROM a", /without a schema|function|could not be parsed/);
  });

  test("a second statement, whether plain, after a comment or inside a string", () => {
    refusedWith("SELECT 1 FROM a; DROP TABLE a", /one statement/);
    refusedWith("SELECT 1 FROM a; SELECT * FROM sqlite_master", /one statement/);
    // inside a string or a comment it is no statement: the text stays a value, the comment goes
    expect(written("SELECT 'x''; DROP TABLE a; --' FROM a -- ; DROP TABLE a")).toBe(`SELECT 'x''; DROP TABLE a; --' FROM ${table("a")} AS "a"`);
    expect(written("SELECT x /* ; DROP TABLE a */ FROM a")).toBe(`SELECT "x" FROM ${table("a")} AS "a"`);
    refusedWith("SELECT E'\\x27; DROP TABLE a' FROM a", /not supported|could not be parsed/);
  });

  test("statements other than one SELECT, INSERT, UPDATE or DELETE", () => {
    for (const sql of ["PRAGMA table_info(a)", "ATTACH DATABASE 'x' AS y", "COPY a TO '/tmp/x'", "SET search_path = x", "BEGIN", "COMMIT", "ROLLBACK",
      "CREATE TABLE x (a int)", "DROP TABLE a", "ALTER TABLE a ADD COLUMN b int", "VACUUM", "TRUNCATE a", "GRANT ALL ON a TO x", "SELECT * FROM a FOR UPDATE",
      "DELETE FROM a RETURNING *", "INSERT INTO a (x) VALUES (1) ON CONFLICT DO NOTHING", "SELECT * INTO b FROM a", "WITH RECURSIVE r AS (SELECT 1) SELECT * FROM r",
      "WITH d AS (DELETE FROM a RETURNING *) SELECT * FROM d", "EXPLAIN SELECT 1", "SHOW ALL", "REINDEX a", "LOCK TABLE a"])
      refusedWith(sql, /SQL not allowed/);
  });

  test("a CTE shadowing a name is its own: in its body the name is still the collection", () => {
    const st = checkStatement("WITH sqlite_master AS (SELECT * FROM sqlite_master) SELECT * FROM sqlite_master");
    expect([...st.reads]).toEqual(["sqlite_master"]);
    expect(st.write(table, newId)).toBe(`WITH "sqlite_master" AS (SELECT * FROM ${table("sqlite_master")} AS "sqlite_master") SELECT * FROM "sqlite_master"`);
    // a later CTE sees an earlier one; the statement sees both
    expect([...checkStatement("WITH a AS (SELECT 1 AS v FROM x), b AS (SELECT v FROM a) SELECT * FROM b").reads]).toEqual(["x"]);
  });

  test("UNION into another table: every branch's tables are the caller's collections", () => {
    const st = checkStatement("SELECT x FROM a UNION ALL SELECT name FROM sqlite_master UNION SELECT tablename FROM pg_tables");
    expect([...st.reads].sort()).toEqual(["a", "pg_tables", "sqlite_master"]);
    expect(st.write(table, newId)).not.toMatch(/FROM "(sqlite_master|pg_tables)"/);
  });

  test("the platform's columns: _hlc, rowid and the engines' system columns", () => {
    for (const c of ["_hlc", "rowid", "_rowid_", "oid", "ctid", "xmin", "tableoid"]) {
      refusedWith(`SELECT ${c} FROM a`, /not a collection column/);
      refusedWith(`UPDATE a SET ${c} = 1`, /not a collection column/);
    }
    refusedWith(`SELECT "_hlc" FROM a`, /not a collection column/);
    refusedWith(`SELECT a."ROWID" FROM a`, /not a collection column/);
    refusedWith("INSERT INTO a (x, _hlc) VALUES (1, 'z')", /not a collection column/);
    refusedWith("UPDATE a SET item_id = 'x'", /item_id cannot be changed/);
  });

  test("operators, casts and parameters outside the list", () => {
    refusedWith("SELECT * FROM a WHERE x ~ $1", /operator/);
    refusedWith("SELECT CAST(x AS regclass) FROM a", /casts/);
    refusedWith("SELECT x::oid FROM a", /casts/);
    refusedWith("SELECT * FROM a WHERE x = ?", /could not be parsed|parameters/);
    refusedWith("SELECT * FROM a WHERE x = :x", /could not be parsed|parameters|not supported/);
    expect(written("SELECT CAST(x AS TEXT), x::int FROM a")).toBe(`SELECT CAST("x" AS TEXT), CAST("x" AS INTEGER) FROM ${table("a")} AS "a"`);
  });

  test("writes: one target, columns listed, INSERT ... SELECT with its item_id", () => {
    refusedWith("INSERT INTO a VALUES (1)", /column list/);
    refusedWith("INSERT INTO a (x) SELECT x FROM b", /must give item_id/);
    expect(checkStatement("INSERT INTO a (item_id, x) SELECT item_id, x FROM b").reads).toEqual(new Set(["b"]));
    expect(written("INSERT INTO a (item_id, x) VALUES ('i', (SELECT 1 + 1))")).toBe(`INSERT INTO ${table("a")} ("item_id", "x") VALUES ('i', (SELECT (1 + 1)))`);
    refusedWith("SELECT * FROM generate_series(1, 10)", /not supported/);
    refusedWith("SELECT * FROM a, LATERAL (SELECT 1) x", /not supported/);
    refusedWith("SELECT row_number() OVER () FROM a", /not supported/);
    refusedWith("SELECT x->>'k' FROM a", /operator/);
    refusedWith("SELECT count(x) FILTER (WHERE y > 1) FROM a", /not supported/);
    refusedWith("SELECT x COLLATE \"C\" FROM a", /not supported/);
    refusedWith("INSERT INTO a (x, y) VALUES (1)", /one value per column|could not be parsed/);
    refusedWith("UPDATE a SET x = 1 FROM b WHERE a.y = b.y", /not supported/);
    refusedWith("DELETE FROM a USING b WHERE a.y = b.y", /./);
  });

  test("no statement, a non-string, a huge one, nesting too deep", () => {
    expect(() => checkStatement("")).toThrow(ApiError);
    expect(() => checkStatement(42)).toThrow(ApiError);
    expect(() => checkStatement(`SELECT '${"x".repeat(100_001)}'`)).toThrow(ApiError);
    refusedWith(`SELECT ${"NOT ".repeat(100)}1 FROM a`, /nested too deep/);
  });
});
