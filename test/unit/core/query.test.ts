// src/core/query.ts: the query object and its compilation to parameterised SQL.
// The second half runs the compiled SQL against a real libSQL database.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ApiError } from "../../../src/core/errors.ts";
import { toSql, type ColumnType } from "../../../src/core/columns.ts";
import {
  canonicalQuery, compileLimit, compileOrder, compileWhere, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, OPERATORS, parseQuery,
  plainColumns, selectedColumns, serializeQuery, type Query,
} from "../../../src/core/query.ts";
import { openDb, type Db } from "../../../src/store/db.ts";

/** Runs fn and returns the ApiError it throws (fails the test if it throws anything else or nothing). */
function apiError(fn: () => unknown): ApiError {
  let thrown: unknown;
  try { fn(); } catch (e) { thrown = e; }
  expect(thrown).toBeInstanceOf(ApiError);
  return thrown as ApiError;
}
function expectBadQuery(fn: () => unknown): ApiError {
  const e = apiError(fn);
  expect(e.code).toBe(305);
  expect(e.status).toBe(400);
  return e;
}

const TYPES: Record<string, ColumnType> = {
  id: "int", name: "string", age: "int", score: "double", active: "bool", data: "jsonb", born: "timestamp",
};
const COLS = plainColumns(TYPES);

// ---------------------------------------------------------------------------------------------
describe("parseQuery", () => {
  test("nothing, null, empty and blank strings give the default page", () => {
    for (const input of [undefined, null, "", "   "]) {
      expect(parseQuery(input)).toEqual({ filters: [], sort: [], pageSize: DEFAULT_PAGE_SIZE, pageNum: 1, select: null });
    }
    expect(DEFAULT_PAGE_SIZE).toBe(100);
  });

  test("defaultPageSize option replaces the default page size", () => {
    expect(parseQuery(undefined, { defaultPageSize: 25 }).pageSize).toBe(25);
    expect(parseQuery({ FILTERS: [] }, { defaultPageSize: 25 }).pageSize).toBe(25);
    expect(parseQuery({ PAGESIZE: 7 }, { defaultPageSize: 25 }).pageSize).toBe(7);
  });

  test("the JS client's no-query default {FILTERS:[]} is the default page", () => {
    expect(parseQuery('{"FILTERS":[]}')).toEqual({ filters: [], sort: [], pageSize: 100, pageNum: 1, select: null });
  });

  test("a JSON string and the same object parse identically", () => {
    const obj = {
      FILTERS: [[{ EQ: [{ name: "x" }, { age: 3 }] }, { GT: [{ score: 1.5 }] }], [{ RE: [{ name: "^Jo" }] }]],
      SORT: [{ ASC: "name" }, { DESC: "age" }],
      PAGESIZE: 10, PAGENUM: 3, SELECTCOLUMNS: ["name", "age"],
    };
    const fromObj = parseQuery(obj);
    expect(parseQuery(JSON.stringify(obj))).toEqual(fromObj);
    expect(fromObj).toEqual({
      filters: [
        [
          { op: "EQ", field: "name", value: "x" },
          { op: "EQ", field: "age", value: 3 },
          { op: "GT", field: "score", value: 1.5 },
        ],
        [{ op: "RE", field: "name", value: "^Jo" }],
      ],
      sort: [{ field: "name", desc: false }, { field: "age", desc: true }],
      pageSize: 10, pageNum: 3, select: ["name", "age"],
    });
  });

  test("a bare FILTERS array (PUT/DELETE shape of JS, Node, Py) is taken as FILTERS with the default page", () => {
    const filters = [[{ EQ: [{ name: "a" }] }], [{ LT: [{ age: 5 }] }]];
    const q = parseQuery(filters);
    expect(q.filters).toEqual([[{ op: "EQ", field: "name", value: "a" }], [{ op: "LT", field: "age", value: 5 }]]);
    expect(q.pageSize).toBe(100);
    expect(q.pageNum).toBe(1);
    expect(parseQuery(JSON.stringify(filters))).toEqual(q);
  });

  test("a group sent without its outer array and an operator with a single object are accepted", () => {
    const q = parseQuery({ FILTERS: [{ EQ: { name: "a" } }] });
    expect(q.filters).toEqual([[{ op: "EQ", field: "name", value: "a" }]]);
  });

  test("one singleton with several columns yields one condition per column, all ANDed", () => {
    const q = parseQuery({ FILTERS: [[{ EQ: [{ name: "a", age: 2 }] }]] });
    expect(q.filters).toEqual([[{ op: "EQ", field: "name", value: "a" }, { op: "EQ", field: "age", value: 2 }]]);
  });

  test("empty groups are dropped", () => {
    expect(parseQuery({ FILTERS: [[], [{ EQ: [] }]] }).filters).toEqual([]);
    expect(parseQuery({ FILTERS: [[], [{ EQ: [{ a: 1 }] }]] }).filters).toEqual([[{ op: "EQ", field: "a", value: 1 }]]);
  });

  test("Go's NewQuery shape (PAGENUM 0, PAGESIZE 0, SELECTCOLUMNS null, SORT []) means everything", () => {
    const q = parseQuery({ FILTERS: [], PAGENUM: 0, PAGESIZE: 0, SELECTCOLUMNS: null, SORT: [] });
    expect(q).toEqual({ filters: [], sort: [], pageSize: 0, pageNum: 0, select: null });
  });

  test("PAGESIZE 0 turns paging off whatever PAGENUM says", () => {
    expect(parseQuery({ PAGESIZE: 0, PAGENUM: 4 })).toMatchObject({ pageSize: 0, pageNum: 0 });
  });

  test("PAGENUM 0 with a page size is page 1; PAGENUM alone keeps the default size", () => {
    expect(parseQuery({ PAGESIZE: 20, PAGENUM: 0 })).toMatchObject({ pageSize: 20, pageNum: 1 });
    expect(parseQuery({ PAGENUM: 5 })).toMatchObject({ pageSize: 100, pageNum: 5 });
  });

  test("integer strings are accepted for PAGESIZE and PAGENUM", () => {
    expect(parseQuery({ PAGESIZE: "15", PAGENUM: "2" })).toMatchObject({ pageSize: 15, pageNum: 2 });
  });

  test("PAGESIZE up to MAX_PAGE_SIZE is accepted, above it is rejected", () => {
    expect(parseQuery({ PAGESIZE: MAX_PAGE_SIZE }).pageSize).toBe(MAX_PAGE_SIZE);
    expectBadQuery(() => parseQuery({ PAGESIZE: MAX_PAGE_SIZE + 1 }));
    expectBadQuery(() => parseQuery({ PAGESIZE: 1e9, PAGENUM: 1 }));
  });

  test("negative or non-integer PAGESIZE / PAGENUM are rejected", () => {
    expectBadQuery(() => parseQuery({ PAGESIZE: -1 }));
    expectBadQuery(() => parseQuery({ PAGENUM: -1 }));
    expectBadQuery(() => parseQuery({ PAGESIZE: "-5" }));
    expectBadQuery(() => parseQuery({ PAGESIZE: 2.5 }));
    expectBadQuery(() => parseQuery({ PAGENUM: "two" }));
    expectBadQuery(() => parseQuery({ PAGESIZE: true }));
  });

  test("unknown top-level keys are rejected; GROUPBY and PRIMARYKEY are tolerated", () => {
    const e = expectBadQuery(() => parseQuery({ FILTERS: [], LIMIT: 5 }));
    expect(e.detail).toContain("LIMIT");
    expectBadQuery(() => parseQuery({ filters: [] })); // keys are upper case
    expect(() => parseQuery({ GROUPBY: ["a"], PRIMARYKEY: ["item_id"] })).not.toThrow();
  });

  test("malformed JSON is ApiError 305 with HTTP status 400", () => {
    for (const s of ["{", "{FILTERS:[]}", "[[{\"EQ\":", "nope"]) {
      const e = expectBadQuery(() => parseQuery(s));
      expect(e.kind.category).toBe("Data");
    }
  });

  test("JSON that is neither an object nor an array is rejected", () => {
    for (const s of ["5", "\"text\"", "true"]) expectBadQuery(() => parseQuery(s));
    expectBadQuery(() => parseQuery(42));
  });

  test("FILTERS must be an array of groups of operator objects", () => {
    expectBadQuery(() => parseQuery({ FILTERS: { EQ: [{ a: 1 }] } }));
    expectBadQuery(() => parseQuery({ FILTERS: "a=1" }));
    expectBadQuery(() => parseQuery({ FILTERS: [[5]] }));
    expectBadQuery(() => parseQuery({ FILTERS: [[[{ EQ: [{ a: 1 }] }]]] }));
    expectBadQuery(() => parseQuery({ FILTERS: [[{ EQ: [5] }]] }));
    expectBadQuery(() => parseQuery({ FILTERS: [[{ EQ: [[{ a: 1 }]] }]] }));
    expectBadQuery(() => parseQuery({ FILTERS: [[{ EQ: "a" }]] }));
  });

  test("every wire operator is accepted and maps to its SQL operator", () => {
    for (const op of ["EQ", "NEQ", "GT", "GTE", "LT", "LTE", "RE"] as const) {
      expect(parseQuery({ FILTERS: [[{ [op]: [{ a: "1" }] }]] }).filters[0]![0]!.op).toBe(op);
    }
    expect(OPERATORS).toEqual({ EQ: "=", NEQ: "!=", GT: ">", GTE: ">=", LT: "<", LTE: "<=", RE: "REGEXP" });
  });

  test("an unknown operator is rejected", () => {
    for (const op of ["LIKE", "eq", "=", "IN", ""]) {
      const e = expectBadQuery(() => parseQuery({ FILTERS: [[{ [op]: [{ a: 1 }] }]] }));
      expect(e.detail).toContain("operator");
    }
  });

  test("names inherited from Object.prototype are not operators", () => {
    // `op in OPERATORS` also finds toString, constructor, __proto__ ... on the prototype chain
    const accepted: string[] = [];
    for (const op of ["toString", "constructor", "valueOf", "hasOwnProperty", "__proto__"]) {
      try { parseQuery(`{"FILTERS":[[{"${op}":[{"name":"x"}]}]]}`); accepted.push(op); } catch (e) {
        expect(e).toBeInstanceOf(ApiError);
        expect((e as ApiError).code).toBe(305);
      }
    }
    expect(accepted).toEqual([]);
  });

  test("bad SORT is rejected", () => {
    expectBadQuery(() => parseQuery({ SORT: { ASC: "a" } }));
    expectBadQuery(() => parseQuery({ SORT: "a" }));
    expectBadQuery(() => parseQuery({ SORT: [{ UP: "a" }] }));
    expectBadQuery(() => parseQuery({ SORT: [{ asc: "a" }] }));
    expectBadQuery(() => parseQuery({ SORT: [{ ASC: 1 }] }));
    expectBadQuery(() => parseQuery({ SORT: [{ DESC: ["a"] }] }));
    expectBadQuery(() => parseQuery({ SORT: ["a"] }));
    expectBadQuery(() => parseQuery({ SORT: [null] }));
  });

  test("SELECTCOLUMNS must be an array of strings; an empty one means all", () => {
    expect(parseQuery({ SELECTCOLUMNS: [] }).select).toBeNull();
    expect(parseQuery({ SELECTCOLUMNS: ["a"] }).select).toEqual(["a"]);
    expectBadQuery(() => parseQuery({ SELECTCOLUMNS: "a" }));
    expectBadQuery(() => parseQuery({ SELECTCOLUMNS: ["a", 1] }));
  });
});

// ---------------------------------------------------------------------------------------------
describe("compileWhere (SQL text)", () => {
  const where = (filters: unknown) => compileWhere(parseQuery({ FILTERS: filters }).filters, COLS);

  test("no filters is the always-true expression with no arguments", () => {
    expect(compileWhere([], COLS)).toEqual({ sql: "1 = 1", args: [] });
  });

  test("each comparison operator compiles to its SQL operator with a placeholder", () => {
    for (const [op, sqlOp] of [["EQ", "="], ["GT", ">"], ["GTE", ">="], ["LT", "<"], ["LTE", "<="]] as const) {
      const w = where([[{ [op]: [{ age: 7 }] }]]);
      expect(w.sql).toBe(`"age" ${sqlOp} ?`);
      expect(w.args).toEqual([7]);
    }
    const neq = where([[{ NEQ: [{ age: 7 }] }]]);
    expect(neq.sql).toContain(`"age" != ?`);
    expect(neq.args).toEqual([7]);
    const re = where([[{ RE: [{ name: "^a" }] }]]);
    expect(re.sql).toContain("REGEXP ?");
    expect(re.args).toEqual(["^a"]);
  });

  test("conditions of a group are ANDed, groups are ORed, args in order", () => {
    const w = where([[{ EQ: [{ name: "a" }] }, { GT: [{ age: 1 }] }], [{ LT: [{ score: 2.5 }] }]]);
    expect(w.sql).toBe(`("name" = ? AND "age" > ?) OR ("score" < ?)`);
    expect(w.args).toEqual(["a", 1, 2.5]);
  });

  test("null with EQ / NEQ becomes IS NULL / IS NOT NULL without an argument", () => {
    expect(where([[{ EQ: [{ name: null }] }]])).toEqual({ sql: `"name" IS NULL`, args: [] });
    expect(where([[{ NEQ: [{ name: null }] }]])).toEqual({ sql: `"name" IS NOT NULL`, args: [] });
  });

  test("null with an ordering operator or RE is a bad query", () => {
    for (const op of ["GT", "GTE", "LT", "LTE", "RE"]) expect(apiError(() => where([[{ [op]: [{ age: null }] }]])).status).toBe(400);
    for (const op of ["GT", "GTE", "LT", "LTE"]) expectBadQuery(() => where([[{ [op]: [{ age: null }] }]]));
  });

  test("unknown column -> 305", () => {
    const e = expectBadQuery(() => where([[{ EQ: [{ nope: 1 }] }]]));
    expect(e.detail).toContain("nope");
    // inherited property names are not columns either
    expectBadQuery(() => where([[{ EQ: [{ constructor: 1 }] }]]));
    expectBadQuery(() => where([[{ EQ: [{ toString: "x" }] }]]));
  });

  test("value type mismatch -> 400", () => {
    const cases: [string, unknown][] = [["age", "abc"], ["age", 1.5], ["age", true], ["score", "1.5"], ["name", 5], ["name", { a: 1 }], ["active", "maybe"], ["active", 2], ["born", "not a date"]];
    for (const [col, v] of cases) {
      const e = apiError(() => where([[{ EQ: [{ [col]: v }] }]]));
      expect(e.status).toBe(400);
      expect(e.detail).toContain(col);
    }
  });

  test("values are converted like stored values (bool -> 1/0, timestamp -> ISO, jsonb -> JSON text)", () => {
    expect(where([[{ EQ: [{ active: true }] }]]).args).toEqual([1]);
    expect(where([[{ EQ: [{ active: "false" }] }]]).args).toEqual([0]);
    expect(where([[{ GT: [{ born: "2020-01-02T03:04:05Z" }] }]]).args).toEqual(["2020-01-02T03:04:05.000Z"]);
    expect(where([[{ EQ: [{ data: { a: 1 } }] }]]).args).toEqual(['{"a":1}']);
  });

  test("RE needs a string pattern", () => {
    for (const v of [5, true, { a: 1 }]) expect(apiError(() => where([[{ RE: [{ name: v }] }]])).status).toBe(400);
  });

  test("an invalid regular expression -> 400", () => {
    for (const p of ["(", "[a-", "*a", "a{2,1}"]) {
      const e = apiError(() => where([[{ RE: [{ name: p }] }]]));
      expect(e.status).toBe(400);
    }
  });

  test("col->>key reads a key of a jsonb column", () => {
    const w = where([[{ EQ: [{ "data->>city": "Oslo" }] }]]);
    expect(w.sql).toContain(`json_extract("data", '$.city')`);
    expect(w.args).toEqual(["Oslo"]);
  });

  test("col->>key is refused on non-jsonb columns, unknown columns and odd keys", () => {
    expectBadQuery(() => where([[{ EQ: [{ "name->>x": "a" }] }]]));
    expectBadQuery(() => where([[{ EQ: [{ "nope->>x": "a" }] }]]));
    expectBadQuery(() => where([[{ EQ: [{ "data->>": "a" }] }]]));
    expectBadQuery(() => where([[{ EQ: [{ "->>city": "a" }] }]]));
    expectBadQuery(() => where([[{ EQ: [{ "data->>a.b": "a" }] }]]));
    expectBadQuery(() => where([[{ EQ: [{ "data->>a') OR 1=1 --": "a" }] }]]));
  });

  test("SQL injection text only ever appears in args, never in the SQL string", () => {
    const evil = [`x' OR '1'='1`, `"; DROP TABLE t; --`, `') OR 1=1 --`, `\\'; DELETE FROM t`];
    for (const v of evil) {
      for (const op of ["EQ", "NEQ", "GT", "GTE", "LT", "LTE", "RE"]) {
        let w;
        try { w = where([[{ [op]: [{ name: v }] }]]); } catch (e) {
          // RE may refuse a pattern that is not a valid regex; that is fine, it is still not SQL
          expect(e).toBeInstanceOf(ApiError);
          continue;
        }
        expect(w.sql).not.toContain(v);
        expect(w.sql).not.toContain("DROP");
        expect(w.sql).not.toContain("DELETE");
        expect(w.sql).not.toContain("'1'");
        expect(w.args).toEqual([v]);
      }
    }
    // as a column name it is an unknown column
    for (const v of evil) expectBadQuery(() => where([[{ EQ: [{ [v]: 1 }] }]]));
  });
});

describe("compileOrder / compileLimit / selectedColumns / plainColumns", () => {
  test("compileOrder", () => {
    expect(compileOrder([], COLS)).toBe("");
    expect(compileOrder([], COLS, `"id" ASC`)).toBe(` ORDER BY "id" ASC`);
    expect(compileOrder([{ field: "name", desc: false }, { field: "age", desc: true }], COLS, `"id"`))
      .toBe(` ORDER BY "name" ASC, "age" DESC, "id"`);
    expect(compileOrder([{ field: "data->>n", desc: true }], COLS)).toBe(` ORDER BY json_extract("data", '$.n') DESC`);
    expectBadQuery(() => compileOrder([{ field: "nope", desc: false }], COLS));
    expectBadQuery(() => compileOrder([{ field: "name; DROP TABLE t", desc: false }], COLS));
  });

  test("compileLimit", () => {
    const q = (pageSize: number, pageNum: number): Query => ({ filters: [], sort: [], pageSize, pageNum, select: null });
    expect(compileLimit(q(0, 0))).toBe("");
    expect(compileLimit(q(10, 1))).toBe(" LIMIT 10 OFFSET 0");
    expect(compileLimit(q(10, 3))).toBe(" LIMIT 10 OFFSET 20");
    expect(compileLimit(parseQuery(undefined))).toBe(" LIMIT 100 OFFSET 0");
    expect(compileLimit(parseQuery({ PAGESIZE: 0, PAGENUM: 0 }))).toBe("");
  });

  test("selectedColumns checks names against the column map", () => {
    expect(selectedColumns(parseQuery({}), COLS)).toBeNull();
    expect(selectedColumns(parseQuery({ SELECTCOLUMNS: ["name", "data->>city"] }), COLS)).toEqual(["name", "data->>city"]);
    expectBadQuery(() => selectedColumns(parseQuery({ SELECTCOLUMNS: ["name", "secret"] }), COLS));
  });

  test("plainColumns quotes names and applies a prefix", () => {
    expect(plainColumns({ a: "int", 'we"ird': "string" }, "t.")).toEqual({
      a: { sql: `t."a"`, type: "int" }, 'we"ird': { sql: `t."we""ird"`, type: "string" },
    });
  });
});

describe("serializeQuery", () => {
  test("round-trips through parseQuery with the new page number", () => {
    const q = parseQuery({
      FILTERS: [[{ EQ: [{ name: "a b&c/?" }, { age: 3 }] }, { NEQ: [{ score: null }] }], [{ RE: [{ name: "^x" }] }, { EQ: [{ data: { k: [1, 2] } }] }]],
      SORT: [{ DESC: "age" }, { ASC: "name" }],
      PAGESIZE: 25, PAGENUM: 2, SELECTCOLUMNS: ["name"],
    });
    for (const page of [1, 3, 10]) {
      const s = serializeQuery(q, page);
      expect(typeof s).toBe("string");
      expect(parseQuery(s)).toEqual({ ...q, pageNum: page });
    }
  });

  test("a query without sort or select round-trips too", () => {
    const q = parseQuery([[{ GT: [{ age: 1 }] }]]);
    expect(parseQuery(serializeQuery(q, 4))).toEqual({ ...q, pageNum: 4 });
  });

  test("the serialised text survives URL encoding (NEXTPAGEURL form)", () => {
    const q = parseQuery({ FILTERS: [[{ EQ: [{ name: "/a?b=c&d" }] }]], PAGESIZE: 5 });
    const enc = encodeURIComponent(serializeQuery(q, 2));
    expect(enc).not.toContain("/");
    expect(parseQuery(decodeURIComponent(enc))).toEqual({ ...q, pageNum: 2 });
  });
});

// ---------------------------------------------------------------------------------------------
// Executing the compiled SQL against libSQL.
describe("compiled SQL against a real database", () => {
  let db: Db;
  interface Fixture { id: number; name: string | null; age: number | null; score: number | null; active: boolean | null; data: unknown; born: string | null }
  const ROWS: Fixture[] = [
    { id: 1, name: "John", age: 30, score: 1.5, active: true, data: { city: "Oslo", n: 5 }, born: "1990-05-01T00:00:00Z" },
    { id: 2, name: "Jane", age: 25, score: 2.5, active: false, data: { city: "Rome", n: 10 }, born: "1999-12-31T23:59:59Z" },
    { id: 3, name: "Bob", age: 40, score: null, active: true, data: { city: "Oslo", n: 7 }, born: "1980-01-01T00:00:00Z" },
    { id: 4, name: "Alice", age: null, score: 3, active: null, data: null, born: null },
    { id: 5, name: "Johnny", age: 30, score: 0.5, active: false, data: { city: "Paris", n: 1 }, born: "2001-02-03T04:05:06Z" },
    { id: 6, name: null, age: 18, score: 9.75, active: true, data: { city: "Rome" }, born: "2005-06-07T08:09:10Z" },
  ];

  beforeAll(async () => {
    db = await openDb({ url: ":memory:" });
    await db.run(`CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, age INTEGER, score REAL, active INTEGER, data TEXT, born TEXT)`);
    for (const r of ROWS) {
      await db.run(`INSERT INTO t (id, name, age, score, active, data, born) VALUES (?,?,?,?,?,?,?)`,
        (Object.keys(TYPES) as (keyof Fixture)[]).map((k) => toSql(TYPES[k]!, r[k], k)));
    }
  });
  afterAll(async () => { await db.close(); });

  async function ids(filters: unknown): Promise<number[]> {
    const w = compileWhere(parseQuery({ FILTERS: filters }).filters, COLS);
    return (await db.all<{ id: number }>(`SELECT id FROM t WHERE ${w.sql} ORDER BY id`, w.args)).map((r) => r.id);
  }
  const expected = (pred: (r: Fixture) => boolean) => ROWS.filter(pred).map((r) => r.id);

  test("EQ", async () => {
    expect(await ids([[{ EQ: [{ name: "John" }] }]])).toEqual(expected((r) => r.name === "John"));
    expect(await ids([[{ EQ: [{ age: 30 }] }]])).toEqual(expected((r) => r.age === 30));
    expect(await ids([[{ EQ: [{ score: 2.5 }] }]])).toEqual(expected((r) => r.score === 2.5));
    expect(await ids([[{ EQ: [{ active: true }] }]])).toEqual(expected((r) => r.active === true));
    expect(await ids([[{ EQ: [{ active: "false" }] }]])).toEqual(expected((r) => r.active === false));
    expect(await ids([[{ EQ: [{ born: "1980-01-01T00:00:00Z" }] }]])).toEqual([3]);
    expect(await ids([[{ EQ: [{ name: "john" }] }]])).toEqual([]);
  });

  test("NEQ (also matches rows where the column is empty)", async () => {
    expect(await ids([[{ NEQ: [{ age: 30 }] }]])).toEqual(expected((r) => r.age !== 30));
    expect(await ids([[{ NEQ: [{ name: "John" }] }]])).toEqual(expected((r) => r.name !== "John"));
    expect(await ids([[{ NEQ: [{ active: true }] }]])).toEqual(expected((r) => r.active !== true));
  });

  test("GT / GTE / LT / LTE on integers, reals and timestamps", async () => {
    const num = (v: number | null) => v !== null;
    expect(await ids([[{ GT: [{ age: 30 }] }]])).toEqual(expected((r) => num(r.age) && r.age! > 30));
    expect(await ids([[{ GTE: [{ age: 30 }] }]])).toEqual(expected((r) => num(r.age) && r.age! >= 30));
    expect(await ids([[{ LT: [{ age: 30 }] }]])).toEqual(expected((r) => num(r.age) && r.age! < 30));
    expect(await ids([[{ LTE: [{ age: 30 }] }]])).toEqual(expected((r) => num(r.age) && r.age! <= 30));
    expect(await ids([[{ GT: [{ score: 1.5 }] }]])).toEqual(expected((r) => num(r.score) && r.score! > 1.5));
    expect(await ids([[{ LTE: [{ score: 1.5 }] }]])).toEqual(expected((r) => num(r.score) && r.score! <= 1.5));
    const t = (r: Fixture) => (r.born ? Date.parse(r.born) : NaN);
    expect(await ids([[{ GTE: [{ born: "1999-12-31T23:59:59Z" }] }]])).toEqual(expected((r) => t(r) >= Date.parse("1999-12-31T23:59:59Z")));
    expect(await ids([[{ LT: [{ born: 946684800 }] }]])).toEqual(expected((r) => t(r) < 946684800_000)); // seconds since epoch
  });

  test("GT / LT on strings compare as text", async () => {
    expect(await ids([[{ GT: [{ name: "Jane" }] }]])).toEqual(expected((r) => r.name !== null && r.name > "Jane"));
    expect(await ids([[{ LT: [{ name: "C" }] }]])).toEqual(expected((r) => r.name !== null && r.name < "C"));
  });

  test("RE is a case-sensitive regular-expression match", async () => {
    for (const p of ["^Jo", "n$", "^J.n", "an|ob", "^[AB]", "o{2}", "hn+y?$"]) {
      const re = new RegExp(p);
      expect(await ids([[{ RE: [{ name: p }] }]])).toEqual(expected((r) => r.name !== null && re.test(r.name)));
    }
    expect(await ids([[{ RE: [{ name: "^jo" }] }]])).toEqual([]);
  });

  test("RE on a numeric column matches its text", async () => {
    expect(await ids([[{ RE: [{ age: "^3" }] }]])).toEqual(expected((r) => r.age !== null && /^3/.test(String(r.age))));
  });

  test("RE: every pattern compileWhere accepts runs in the database with regular-expression semantics", async () => {
    // compileWhere validates patterns with JS RegExp; the SQL engine must then agree, or refuse the
    // pattern up front with a 400 instead of failing (500) or silently matching something else.
    const mismatches: unknown[] = [];
    for (const p of ["(?:Jo)hn", "J.+?n", "(?=Ja)J", "\\w+ny"]) {
      let w;
      try { w = compileWhere(parseQuery({ FILTERS: [[{ RE: [{ name: p }] }]] }).filters, COLS); } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 400) mismatches.push({ pattern: p, compile: String(e) });
        continue;
      }
      const re = new RegExp(p);
      const want = expected((r) => r.name !== null && re.test(r.name));
      try {
        // fresh SQL text per pattern so the statement cache cannot mix results
        const got = (await db.all<{ id: number }>(`SELECT id FROM t WHERE ${w.sql} ORDER BY id -- ${p}`, w.args)).map((r) => r.id);
        if (JSON.stringify(got) !== JSON.stringify(want)) mismatches.push({ pattern: p, got, want });
      } catch (e) {
        mismatches.push({ pattern: p, executeError: String(e) });
      }
    }
    expect(mismatches).toEqual([]);
  });

  test("EQ null / NEQ null", async () => {
    expect(await ids([[{ EQ: [{ age: null }] }]])).toEqual(expected((r) => r.age === null));
    expect(await ids([[{ NEQ: [{ age: null }] }]])).toEqual(expected((r) => r.age !== null));
    expect(await ids([[{ EQ: [{ data: null }] }]])).toEqual(expected((r) => r.data === null));
  });

  test("AND within a group, OR between groups", async () => {
    expect(await ids([[{ EQ: [{ age: 30 }, { active: true }] }]])).toEqual(expected((r) => r.age === 30 && r.active === true));
    expect(await ids([[{ EQ: [{ age: 30 }] }, { RE: [{ name: "ny$" }] }]])).toEqual([5]);
    expect(await ids([[{ EQ: [{ name: "John" }] }], [{ GT: [{ age: 35 }] }]])).toEqual(expected((r) => r.name === "John" || (r.age ?? 0) > 35));
    expect(await ids([[{ GTE: [{ age: 25 }] }, { LT: [{ score: 2 }] }], [{ EQ: [{ name: null }] }]]))
      .toEqual(expected((r) => (r.age !== null && r.age >= 25 && r.score !== null && r.score < 2) || r.name === null));
  });

  test("jsonb: col->>key with strings and numbers", async () => {
    const d = (r: Fixture) => r.data as Record<string, unknown> | null;
    expect(await ids([[{ EQ: [{ "data->>city": "Oslo" }] }]])).toEqual(expected((r) => d(r)?.city === "Oslo"));
    expect(await ids([[{ NEQ: [{ "data->>city": "Oslo" }] }]])).toEqual(expected((r) => d(r)?.city !== "Oslo"));
    expect(await ids([[{ GT: [{ "data->>city": "Paris" }] }]])).toEqual(expected((r) => typeof d(r)?.city === "string" && (d(r)!.city as string) > "Paris"));
    expect(await ids([[{ EQ: [{ "data->>n": null }] }]])).toEqual(expected((r) => d(r)?.n === undefined));
    expect(await ids([[{ RE: [{ "data->>city": "^R" }] }]])).toEqual(expected((r) => /^R/.test(String(d(r)?.city ?? ""))));
  });

  test("jsonb: col->>key compares numeric JSON values with numbers", async () => {
    // the JSON value of a key has no declared type, so a number must be usable as the operand
    const n = (r: Fixture) => (r.data as { n?: unknown } | null)?.n;
    expect(await ids([[{ GT: [{ "data->>n": 6 }] }]])).toEqual(expected((r) => typeof n(r) === "number" && (n(r) as number) > 6));
    expect(await ids([[{ LTE: [{ "data->>n": 5 }] }]])).toEqual(expected((r) => typeof n(r) === "number" && (n(r) as number) <= 5));
    expect(await ids([[{ EQ: [{ "data->>n": 7 }] }]])).toEqual(expected((r) => n(r) === 7));
  });

  test("jsonb: whole-document EQ compares the stored JSON text", async () => {
    expect(await ids([[{ EQ: [{ data: { city: "Oslo", n: 5 } }] }]])).toEqual([1]);
  });

  test("no filters returns every row", async () => {
    expect(await ids([])).toEqual(ROWS.map((r) => r.id));
  });

  test("injection attempts in values match nothing and leave the table intact", async () => {
    for (const v of [`x' OR '1'='1`, `John' --`, `"; DROP TABLE t; --`, `1 OR 1=1`]) {
      expect(await ids([[{ EQ: [{ name: v }] }]])).toEqual([]);
      expect(await ids([[{ GT: [{ "data->>city": v }] }]])).toEqual(expected((r) => typeof (r.data as { city?: string } | null)?.city === "string" && (r.data as { city: string }).city > v));
    }
    expect((await db.get<{ n: number }>(`SELECT count(*) AS n FROM t`))!.n).toBe(ROWS.length);
  });

  test("ORDER BY and LIMIT/OFFSET page through the rows", async () => {
    const q = parseQuery({ SORT: [{ DESC: "age" }, { ASC: "name" }], PAGESIZE: 2, PAGENUM: 1 });
    const sorted = [...ROWS].sort((a, b) => {
      // SQLite: NULLs first ascending, last descending
      if (a.age !== b.age) return a.age === null ? 1 : b.age === null ? -1 : b.age - a.age;
      if (a.name === b.name) return a.id - b.id;
      return a.name === null ? -1 : b.name === null ? 1 : a.name < b.name ? -1 : 1;
    }).map((r) => r.id);
    const pages: number[][] = [];
    for (let page = 1; page <= 4; page++) {
      const sql = `SELECT id FROM t${compileOrder(q.sort, COLS, `"id"`)}${compileLimit({ ...q, pageNum: page })}`;
      pages.push((await db.all<{ id: number }>(sql)).map((r) => r.id));
    }
    expect(pages).toEqual([sorted.slice(0, 2), sorted.slice(2, 4), sorted.slice(4, 6), []]);
    const all = parseQuery({ SORT: [{ ASC: "id" }], PAGESIZE: 0, PAGENUM: 0 });
    expect((await db.all<{ id: number }>(`SELECT id FROM t${compileOrder(all.sort, COLS)}${compileLimit(all)}`)).map((r) => r.id))
      .toEqual(ROWS.map((r) => r.id));
  });

  test("ORDER BY a jsonb key", async () => {
    const sql = `SELECT id FROM t WHERE data IS NOT NULL AND json_extract(data, '$.n') IS NOT NULL${compileOrder([{ field: "data->>n", desc: false }], COLS)}`;
    const want = ROWS.filter((r) => typeof (r.data as { n?: number } | null)?.n === "number")
      .sort((a, b) => (a.data as { n: number }).n - (b.data as { n: number }).n).map((r) => r.id);
    expect((await db.all<{ id: number }>(sql)).map((r) => r.id)).toEqual(want);
  });

  test("a compiled where clause is usable with extra leading arguments (repository pattern)", async () => {
    const w = compileWhere(parseQuery([[{ EQ: [{ active: true }] }], [{ EQ: [{ active: false }] }]]).filters, COLS);
    const rows = await db.all<{ id: number }>(`SELECT id FROM t WHERE age >= ? AND (${w.sql}) ORDER BY id`, [30, ...w.args]);
    expect(rows.map((r) => r.id)).toEqual(expected((r) => r.age !== null && r.age >= 30 && r.active !== null));
  });
});

describe("canonicalQuery", () => {
  test("equal queries however spelled give one text, and a parse's text is kept with it", () => {
    const a = parseQuery(JSON.stringify({ FILTERS: [[{ EQ: [{ sensor: "s-1" }] }]], PAGESIZE: 10 }), { continuation: true });
    const b = parseQuery(JSON.stringify({ PAGESIZE: 10, FILTERS: [[{ EQ: [{ sensor: "s-1" }] }]], PAGENUM: 1 }), { continuation: true });
    const c = parseQuery(JSON.stringify({ FILTERS: [[{ EQ: [{ sensor: "s-2" }] }]], PAGESIZE: 10 }), { continuation: true });
    expect(canonicalQuery(a)).toBe(canonicalQuery(b));
    expect(canonicalQuery(a)).not.toBe(canonicalQuery(c));
    expect(canonicalQuery(a)).toBe(canonicalQuery(a));
    expect(JSON.parse(canonicalQuery(c)).FILTERS).toEqual([[{ EQ: [{ sensor: "s-2" }] }]]);
  });
});
