// selectRows: the query language over a short list held in memory (a system's triggers, timers).
import { describe, expect, test } from "bun:test";
import { ApiError } from "../../../src/core/errors.ts";
import { parseQuery, selectRows } from "../../../src/core/query.ts";

const rows = [
  { name: "a", frequency: 60, disabled: false, description: "x" },
  { name: "b", frequency: 5, disabled: true, description: null },
  { name: "c", frequency: 600, disabled: false, description: "y" },
];
const FIELDS = new Set(["name", "frequency", "disabled", "description"]);
const pick = (q: unknown) => selectRows(rows, parseQuery(q, { defaultPageSize: 0 }), FIELDS).map((r) => r.name);
const refusal = (q: unknown) => { try { pick(q); } catch (e) { return e instanceof ApiError ? `${e.kind.status} ${e.detail}` : String(e); } return "(no error)"; };

describe("selectRows", () => {
  test("filters: AND within a group, OR across groups; comparisons by value", () => {
    expect(pick(undefined)).toEqual(["a", "b", "c"]);
    expect(pick({ FILTERS: [[{ GT: [{ frequency: 10 }] }]] })).toEqual(["a", "c"]);
    expect(pick({ FILTERS: [[{ GTE: [{ frequency: 60 }] }, { LT: [{ frequency: 600 }] }]] })).toEqual(["a"]);
    expect(pick({ FILTERS: [[{ EQ: [{ name: "a" }] }], [{ EQ: [{ name: "c" }] }]] })).toEqual(["a", "c"]);
    expect(pick({ FILTERS: [[{ EQ: [{ disabled: true }] }]] })).toEqual(["b"]);
    expect(pick({ FILTERS: [[{ NEQ: [{ name: "b" }] }]] })).toEqual(["a", "c"]);
    expect(pick({ FILTERS: [[{ EQ: [{ description: null }] }]] })).toEqual(["b"]);
    expect(pick({ FILTERS: [[{ NEQ: [{ description: null }] }]] })).toEqual(["a", "c"]);
    expect(pick({ FILTERS: [[{ LTE: [{ frequency: "60" }] }]] })).toEqual(["a", "b"]);
    expect(pick([{ EQ: [{ name: "zz" }] }])).toEqual([]);
  });

  test("sort and pages", () => {
    expect(pick({ SORT: [{ DESC: "frequency" }] })).toEqual(["c", "a", "b"]);
    expect(pick({ SORT: [{ ASC: "description" }] })).toEqual(["b", "a", "c"]);
    expect(pick({ SORT: [{ ASC: "frequency" }], PAGESIZE: 2, PAGENUM: 2 })).toEqual(["c"]);
    expect(pick({ PAGESIZE: 1, PAGENUM: 1 })).toEqual(["a"]);
  });

  test("unknown fields, RE and objects are refused as bad queries", () => {
    expect(refusal({ FILTERS: [[{ EQ: [{ nope: 1 }] }]] })).toMatch(/^400 unknown field 'nope'/);
    expect(refusal({ SORT: [{ ASC: "nope" }] })).toMatch(/^400 unknown field 'nope'/);
    expect(refusal({ FILTERS: [[{ RE: [{ name: "(a+)+$" }] }]] })).toMatch(/^400 RE is not supported/);
    expect(refusal({ FILTERS: [[{ EQ: [{ name: { $ne: 1 } }] }]] })).toMatch(/^400 'name' compares with/);
    expect(refusal({ FILTERS: [[{ GT: [{ name: null }] }]] })).toMatch(/^400 GT on 'name' cannot compare with null/);
  });
});
