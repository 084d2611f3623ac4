// src/core/columns.ts: column types, names, and value conversion wire <-> SQLite <-> JSON documents.
import { describe, expect, test } from "bun:test";
import { ApiError } from "../../../src/core/errors.ts";
import {
  checkName, COLUMN_TYPES, type ColumnType, fromSql, ident, parseColumnType, sqlType, toJsonValue, toSql,
} from "../../../src/core/columns.ts";

function apiError(fn: () => unknown): ApiError {
  let thrown: unknown;
  try { fn(); } catch (e) { thrown = e; }
  expect(thrown).toBeInstanceOf(ApiError);
  return thrown as ApiError;
}

/** A value of the wrong type: ApiError, HTTP 400, detail naming the column and the type. */
function expectRejected(type: ColumnType, v: unknown) {
  const col = `col_${type}`;
  let e: ApiError;
  try { e = apiError(() => toSql(type, v, col)); } catch (err) {
    throw new Error(`toSql(${type}, ${typeof v === "bigint" ? v + "n" : JSON.stringify(v)}) was not rejected: ${(err as Error).message}`);
  }
  expect(e.status).toBe(400);
  expect(e.detail).toContain(`'${col}'`);
  expect(e.detail).toContain(type);
  // toJsonValue shares the same checks
  expect(() => toJsonValue(type, v, col)).toThrow(ApiError);
}

describe("parseColumnType", () => {
  test("canonical names map to themselves", () => {
    for (const t of COLUMN_TYPES) expect(parseColumnType(t, "c")).toBe(t);
    expect([...COLUMN_TYPES].sort()).toEqual(["bigint", "blob", "bool", "double", "float", "int", "jsonb", "string", "timestamp", "uuid"]);
  });

  test("aliases, case-insensitive", () => {
    const cases: [string, ColumnType][] = [
      ["text", "string"], ["varchar", "string"], ["STRING", "string"], ["integer", "int"], ["INT", "int"],
      ["BigInt", "bigint"], ["number", "double"], ["boolean", "bool"], ["Bool", "bool"], ["timestamptz", "timestamp"],
      ["datetime", "timestamp"], ["json", "jsonb"], ["object", "jsonb"], ["bytea", "blob"], ["UUID", "uuid"],
    ];
    for (const [alias, t] of cases) expect(parseColumnType(alias, "c")).toBe(t);
  });

  test("unknown or non-string types -> 400 naming the column", () => {
    for (const t of ["", "str", "int4", "list", "date ", 5, null, undefined, {}, ["int"]]) {
      const e = apiError(() => parseColumnType(t, "mycol"));
      expect(e.status).toBe(400);
      expect(e.detail).toContain("mycol");
    }
  });

  test("names of Object.prototype members are not types", () => {
    const accepted: string[] = [];
    for (const t of ["constructor", "__proto__", "toString", "valueOf", "hasOwnProperty", "isPrototypeOf"]) {
      let r: unknown;
      try { r = parseColumnType(t, "c"); } catch (e) { expect(e).toBeInstanceOf(ApiError); continue; }
      accepted.push(`${t} -> ${typeof r}`);
    }
    expect(accepted).toEqual([]);
  });
});

describe("sqlType / ident", () => {
  test("storage classes", () => {
    const want: Record<ColumnType, string> = {
      string: "TEXT", int: "INTEGER", bigint: "INTEGER", float: "REAL", double: "REAL", bool: "INTEGER",
      timestamp: "TEXT", jsonb: "TEXT", blob: "BLOB", uuid: "TEXT",
    };
    for (const t of COLUMN_TYPES) expect(sqlType(t)).toBe(want[t]);
  });

  test("ident quotes and doubles embedded quotes", () => {
    expect(ident("a")).toBe(`"a"`);
    expect(ident(`a"b`)).toBe(`"a""b"`);
  });
});

describe("checkName", () => {
  test("valid names are returned unchanged", () => {
    for (const n of ["a", "_", "_x", "A1_b", "item_id", "x".repeat(63), "CamelCase"]) expect(checkName(n, "column")).toBe(n);
  });

  test("invalid names -> 400 saying what was named", () => {
    const bad: unknown[] = [
      "", "1a", "a b", " a", "a ", `a"b`, "a'b", "a;b", "a-b", "a.b", "a/b", "é", "x".repeat(64),
      "a\n", "\na", "a;DROP TABLE users", `x" ; DROP TABLE t; --`, "a--", "a\u0000b", 5, null, undefined, {}, ["a"],
    ];
    for (const n of bad) {
      const e = apiError(() => checkName(n, "collection"));
      expect(e.status).toBe(400);
      expect(e.detail).toContain("collection");
    }
  });
});

describe("toSql: good values", () => {
  test("null and undefined are NULL for every type", () => {
    for (const t of COLUMN_TYPES) {
      expect(toSql(t, null, "c")).toBeNull();
      expect(toSql(t, undefined, "c")).toBeNull();
    }
  });

  test("string", () => {
    for (const v of ["", "abc", "ünïcødé", "a'b\"c", "0"]) expect(toSql("string", v, "c")).toBe(v);
  });

  test("int and bigint", () => {
    for (const t of ["int", "bigint"] as const) {
      for (const v of [0, 1, -1, 2147483647, -2147483648, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]) expect(toSql(t, v, "c")).toBe(v);
      // digit strings carry integers that JSON numbers cannot hold exactly
      expect(toSql(t, "9223372036854775807", "c")).toBe(9223372036854775807n);
      expect(toSql(t, "-9223372036854775808", "c")).toBe(-9223372036854775808n);
      expect(toSql(t, "9007199254740993", "c")).toBe(9007199254740993n);
      expect(toSql(t, "42", "c")).toBe(42);
    }
  });

  test("float and double", () => {
    for (const t of ["float", "double"] as const) for (const v of [0, 1.5, -2.25, 3, 1e300, -1e-300]) expect(toSql(t, v, "c")).toBe(v);
  });

  test("bool", () => {
    expect(toSql("bool", true, "c")).toBe(1);
    expect(toSql("bool", false, "c")).toBe(0);
    expect(toSql("bool", "true", "c")).toBe(1);
    expect(toSql("bool", "false", "c")).toBe(0);
  });

  test("timestamp: ISO text and epoch numbers become ISO-8601 UTC", () => {
    expect(toSql("timestamp", "2024-01-02T03:04:05Z", "c")).toBe("2024-01-02T03:04:05.000Z");
    expect(toSql("timestamp", "2024-01-02T03:04:05.678+02:00", "c")).toBe("2024-01-02T01:04:05.678Z");
    expect(toSql("timestamp", "2024-01-02", "c")).toBe(new Date(Date.parse("2024-01-02")).toISOString());
    const secs = 1_700_000_000;
    expect(toSql("timestamp", secs, "c")).toBe(new Date(secs * 1000).toISOString());
    const ms = 1_700_000_000_123;
    expect(toSql("timestamp", ms, "c")).toBe(new Date(ms).toISOString());
    expect(toSql("timestamp", 0, "c")).toBe("1970-01-01T00:00:00.000Z");
  });

  test("jsonb stores JSON text of any JSON value", () => {
    for (const v of [{ a: 1, b: [true, null] }, [1, "x"], "text", 5, true, false, {}]) {
      const s = toSql("jsonb", v, "c");
      expect(typeof s).toBe("string");
      expect(JSON.parse(s as string)).toEqual(v);
    }
  });

  test("blob takes base64 and yields bytes", () => {
    const bytes = new Uint8Array([0, 1, 2, 250, 255]);
    const b64 = Buffer.from(bytes).toString("base64");
    const s = toSql("blob", b64, "c");
    expect(s).toBeInstanceOf(Uint8Array);
    expect([...(s as Uint8Array)]).toEqual([...bytes]);
    expect([...(toSql("blob", "", "c") as Uint8Array)]).toEqual([]);
    expect([...(toSql("blob", "AQID", "c") as Uint8Array)]).toEqual([1, 2, 3]);
  });

  test("uuid is validated and lower-cased", () => {
    expect(toSql("uuid", "550E8400-E29B-41D4-A716-446655440000", "c")).toBe("550e8400-e29b-41d4-a716-446655440000");
    const u = crypto.randomUUID();
    expect(toSql("uuid", u, "c")).toBe(u);
  });
});

describe("toSql: wrong values throw an ApiError naming the column (no silent coercion)", () => {
  test("string", () => {
    for (const v of [5, 0, true, false, {}, [], ["a"], { toString: () => "x" }]) expectRejected("string", v);
  });

  test("int / bigint", () => {
    for (const t of ["int", "bigint"] as const) {
      for (const v of [1.5, -0.1, NaN, Infinity, "1.5", "abc", "", " 1", "1e3", "0x10", true, false, {}, [], [1]]) expectRejected(t, v);
      // out of the 64-bit range as text
      expectRejected(t, "9223372036854775808");
      expectRejected(t, "-9223372036854775809");
      expectRejected(t, "99999999999999999999");
    }
  });

  test("int / bigint: numbers outside the 64-bit range are rejected like the same value as text", () => {
    for (const t of ["int", "bigint"] as const) {
      expectRejected(t, 1e20);
      expectRejected(t, -1e20);
      expectRejected(t, 2 ** 64);
    }
  });

  test("float / double", () => {
    for (const t of ["float", "double"] as const) for (const v of ["1.5", "", NaN, Infinity, -Infinity, true, {}, [1]]) expectRejected(t, v);
  });

  test("bool", () => {
    for (const v of [1, 0, "1", "0", "yes", "TRUE", "", {}, []]) expectRejected("bool", v);
  });

  test("timestamp", () => {
    for (const v of ["yesterday", "", "2024-13-45", "01/02/2024", "Jan 2 2024", "12:00", true, {}, [], NaN, Infinity]) expectRejected("timestamp", v);
  });

  test("timestamp: impossible calendar dates are rejected, not rolled over to another day", () => {
    for (const v of ["2024-02-30", "2023-02-29", "2024-04-31T00:00:00Z"]) expectRejected("timestamp", v);
  });

  test("blob", () => {
    for (const v of ["AQI", "!!!!", "AQID=", "a b=", 5, true, {}, [1, 2], new Uint8Array([1])]) expectRejected("blob", v);
  });

  test("uuid", () => {
    for (const v of ["", "not-a-uuid", "550e8400e29b41d4a716446655440000", "550e8400-e29b-41d4-a716-44665544000g", ` ${crypto.randomUUID()}`, 5, true, {}]) expectRejected("uuid", v);
  });

  test("the error is a 400 in the Data category whose detail shows the offending value", () => {
    const e = apiError(() => toSql("int", "abc", "age"));
    expect(e.status).toBe(400);
    expect(e.kind.category).toBe("Data");
    expect(e.detail).toContain("age");
    expect(e.detail).toContain("abc");
  });
});

describe("fromSql", () => {
  test("NULL is null for every type", () => {
    for (const t of COLUMN_TYPES) {
      expect(fromSql(t, null)).toBeNull();
      expect(fromSql(t, undefined)).toBeNull();
    }
  });

  test("bool", () => {
    expect(fromSql("bool", 1)).toBe(true);
    expect(fromSql("bool", 1n)).toBe(true);
    expect(fromSql("bool", 0)).toBe(false);
    expect(fromSql("bool", 0n)).toBe(false);
  });

  test("jsonb parses stored JSON text and leaves non-JSON text as is", () => {
    expect(fromSql("jsonb", '{"a":[1,{"b":null}]}')).toEqual({ a: [1, { b: null }] });
    expect(fromSql("jsonb", "5")).toBe(5);
    expect(fromSql("jsonb", '"s"')).toBe("s");
    expect(fromSql("jsonb", "not json")).toBe("not json");
  });

  test("blob becomes base64", () => {
    expect(fromSql("blob", new Uint8Array([1, 2, 3]))).toBe("AQID");
    expect(fromSql("blob", Buffer.from([255, 0]))).toBe(Buffer.from([255, 0]).toString("base64"));
    expect(fromSql("blob", new Uint8Array([1, 2, 3]).buffer)).toBe("AQID");
  });

  test("int / bigint: safe bigints become numbers, larger ones exact decimal text", () => {
    for (const t of ["int", "bigint"] as const) {
      expect(fromSql(t, 5)).toBe(5);
      expect(fromSql(t, 5n)).toBe(5);
      expect(fromSql(t, -(2n ** 53n) + 1n)).toBe(-(2 ** 53) + 1);
      expect(fromSql(t, 9223372036854775807n)).toBe("9223372036854775807");
      expect(fromSql(t, 2n ** 53n + 1n)).toBe("9007199254740993");
    }
  });

  test("string, float, double, timestamp, uuid pass through", () => {
    expect(fromSql("string", "x")).toBe("x");
    expect(fromSql("float", 1.25)).toBe(1.25);
    expect(fromSql("double", -3.5)).toBe(-3.5);
    expect(fromSql("timestamp", "2024-01-02T03:04:05.000Z")).toBe("2024-01-02T03:04:05.000Z");
    const u = crypto.randomUUID();
    expect(fromSql("uuid", u)).toBe(u);
  });

  test("toSql then fromSql round-trips wire values", () => {
    const cases: [ColumnType, unknown][] = [
      ["string", "héllo"], ["int", 42], ["int", -7], ["bigint", "9223372036854775807"], ["float", 2.5], ["double", -1e-9],
      ["bool", true], ["bool", false], ["timestamp", "2024-05-06T07:08:09.010Z"], ["jsonb", { x: [1, 2, { y: "z" }] }],
      ["blob", "AAEC/w=="], ["uuid", "123e4567-e89b-12d3-a456-426614174000"],
    ];
    for (const [t, v] of cases) expect({ t, v: fromSql(t, toSql(t, v, "c")) }).toEqual({ t, v });
  });
});

describe("toJsonValue", () => {
  test("null stays null", () => {
    for (const t of COLUMN_TYPES) expect(toJsonValue(t, null, "c")).toBeNull();
  });

  test("values keep their JSON form", () => {
    expect(toJsonValue("bool", true, "c")).toBe(true);
    expect(toJsonValue("bool", "false", "c")).toBe(false);
    expect(toJsonValue("string", "s", "c")).toBe("s");
    expect(toJsonValue("int", 12, "c")).toBe(12);
    expect(toJsonValue("int", "12", "c")).toBe(12);
    expect(toJsonValue("bigint", "9223372036854775807", "c")).toBe("9223372036854775807");
    expect(toJsonValue("float", 1.5, "c")).toBe(1.5);
    expect(toJsonValue("double", 2, "c")).toBe(2);
    expect(toJsonValue("timestamp", 1_700_000_000, "c")).toBe(new Date(1_700_000_000_000).toISOString());
    expect(toJsonValue("timestamp", "2024-01-02T03:04:05+01:00", "c")).toBe("2024-01-02T02:04:05.000Z");
    const doc = { a: [1, { b: "c" }] };
    expect(toJsonValue("jsonb", doc, "c")).toEqual(doc);
    expect(toJsonValue("blob", "AQID", "c")).toBe("AQID");
    expect(toJsonValue("uuid", "123E4567-E89B-12D3-A456-426614174000", "c")).toBe("123e4567-e89b-12d3-a456-426614174000");
  });

  test("the result is JSON-serialisable for every type", () => {
    const samples: Record<ColumnType, unknown> = {
      string: "a", int: "9223372036854775807", bigint: "-9223372036854775808", float: 1.5, double: 2.5, bool: "true",
      timestamp: 0, jsonb: { k: 1 }, blob: "AQID", uuid: crypto.randomUUID(),
    };
    for (const t of COLUMN_TYPES) {
      const v = toJsonValue(t, samples[t], "c");
      expect(() => JSON.stringify(v)).not.toThrow();
      expect(typeof v === "bigint" || v instanceof Uint8Array).toBe(false);
    }
  });

  test("wrong values are rejected with the column named", () => {
    const e = apiError(() => toJsonValue("bool", "nope", "flag"));
    expect(e.status).toBe(400);
    expect(e.detail).toContain("flag");
  });
});
