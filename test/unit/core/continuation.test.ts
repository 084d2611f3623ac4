// Paging by position (PAGEAFTER): walking a sorted result page by page from each page's last row
// gives exactly the rows of the whole sorted result, in its order, for every mix of directions,
// repeated values and NULLs; and the first sort key gives the planner an index range.
import { describe, expect, test } from "bun:test";
import Database from "libsql";
import { type ColumnMap, type Continuation, type Query, compileOrder, continueAfter, parseQuery, serializeQuery } from "../../../src/core/query.ts";

const columns: ColumnMap = { a: { sql: `"a"`, type: "int" }, b: { sql: `"b"`, type: "string" }, c: { sql: `"c"`, type: "float" } };

function table() {
  const db = new Database(":memory:");
  db.exec(`CREATE TABLE t (a INTEGER, b TEXT, c REAL)`);
  db.exec(`CREATE INDEX t_a ON t(a)`);
  db.exec(`CREATE INDEX t_b ON t(b)`);
  const ins = db.prepare(`INSERT INTO t VALUES (?, ?, ?)`);
  let seed = 7;
  const rnd = (n: number) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  for (let i = 0; i < 400; i++) ins.run(rnd(9) === 0 ? null : rnd(12), rnd(7) === 0 ? null : `b${rnd(10)}`, rnd(5) === 0 ? null : rnd(4) / 2);
  return db;
}

/** Every page of `size` rows, each read from the position after the page before. */
function walk(db: InstanceType<typeof Database>, sort: Query["sort"], size: number): number[] {
  const order = compileOrder(sort, columns, "rowid");
  const keys = sort.map((s, i) => `"${s.field}" AS _k${i}`);
  const out: number[] = [];
  let after: Continuation | undefined;
  for (let pages = 0; pages < 1000; pages++) {
    const rows: Record<string, unknown>[] = [];
    for (const part of after ? continueAfter(sort, columns, after) : [{ sql: "1", args: [] }]) {
      if (rows.length >= size) break;
      const sql = `SELECT rowid AS _r${keys.map((k) => `, ${k}`).join("")} FROM t WHERE ${part.sql}${order} LIMIT ?`;
      rows.push(...(db.prepare(sql).all(...(part.args as never[]), size - rows.length) as Record<string, unknown>[]));
    }
    if (!rows.length) break;
    out.push(...rows.map((r) => r._r as number));
    const last = rows[rows.length - 1]!;
    after = { values: sort.map((_, i) => last[`_k${i}`]), rowid: last._r as number };
  }
  return out;
}

describe("continueAfter", () => {
  const db = table();
  const sorts: Query["sort"][] = [[]];
  for (const f of ["a", "b", "c"]) for (const desc of [false, true]) sorts.push([{ field: f, desc }]);
  for (const [f, g] of [["a", "b"], ["b", "a"], ["c", "b"], ["b", "c"]]) {
    for (const d1 of [false, true]) for (const d2 of [false, true]) sorts.push([{ field: f!, desc: d1 }, { field: g!, desc: d2 }]);
  }
  sorts.push([{ field: "a", desc: true }, { field: "b", desc: false }, { field: "c", desc: true }]);

  for (const sort of sorts) {
    const name = sort.length ? sort.map((s) => `${s.field} ${s.desc ? "DESC" : "ASC"}`).join(", ") : "rowid";
    test(`${name}: every row once, in order`, () => {
      const whole = (db.prepare(`SELECT rowid AS _r FROM t${compileOrder(sort, columns, "rowid")}`).all() as { _r: number }[]).map((r) => r._r);
      for (const size of [3, 50]) expect(walk(db, sort, size)).toEqual(whole);
    });
  }

  test("the first key bounds an index range", () => {
    const cases: [Query["sort"], number | null][] = [];
    for (const desc of [false, true]) for (const value of [5, null]) cases.push([[{ field: "a", desc }], value]);
    for (const [sort, value] of cases) {
      for (const part of continueAfter(sort, columns, { values: [value], rowid: 10 })) {
        const plan = (db.prepare(`EXPLAIN QUERY PLAN SELECT rowid FROM t WHERE ${part.sql} ORDER BY "a"${sort[0]!.desc ? " DESC" : ""}, rowid LIMIT 5`).all(...(part.args as never[])) as { detail: string }[]).map((r) => r.detail).join(" ");
        expect(plan).toMatch(/USING (COVERING )?INDEX t_a \(a/);
      }
    }
  });

  test("PAGEAFTER round-trips through NEXTPAGEURL's query and is checked", () => {
    const q = parseQuery({ SORT: [{ DESC: "a" }], PAGESIZE: 10 }, { continuation: true });
    const text = serializeQuery(q, 2, { values: [7], rowid: 42 });
    expect(parseQuery(text, { continuation: true }).after).toEqual({ values: [7], rowid: 42 });
    expect(() => parseQuery(text)).toThrow("unknown query key 'PAGEAFTER'");
    for (const bad of [[7], [7, 42, 1], [{ x: 1 }, 42], [7, 4.5], [7, "42"], "x"]) {
      expect(() => parseQuery({ SORT: [{ DESC: "a" }], PAGESIZE: 10, PAGEAFTER: bad }, { continuation: true })).toThrow("PAGEAFTER");
    }
    expect(() => parseQuery({ PAGESIZE: 0, PAGEAFTER: [1] }, { continuation: true })).toThrow("PAGESIZE");
  });
});
