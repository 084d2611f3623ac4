// src/core/errors.ts: the coded error envelope.
import { describe, expect, test } from "bun:test";
import { ApiError, envelope, ErrorKinds, fail, notFound } from "../../../src/core/errors.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The shape Go's CreateResponseFromMap and Python need. */
function expectShape(env: unknown) {
  const e = env as Record<string, unknown>;
  expect(Object.keys(e).sort()).toEqual(["error", "statusCode"]);
  expect(typeof e.statusCode).toBe("number");
  expect(Number.isInteger(e.statusCode)).toBe(true);
  const err = e.error as Record<string, unknown>;
  expect(Object.keys(err).sort()).toEqual(["category", "code", "detail", "id", "level", "line", "lowLevelError", "message"]);
  expect(err.id).toMatch(UUID);
  expect(typeof err.code).toBe("number");
  expect(Number.isInteger(err.code)).toBe(true);
  expect(typeof err.level).toBe("number");
  expect(typeof err.category).toBe("string");
  expect(typeof err.message).toBe("string");
  expect(typeof err.detail).toBe("string");
  expect(typeof err.line).toBe("string");
  expect(err.lowLevelError).not.toBeNull();
  expect(typeof err.lowLevelError).toBe("object");
  expect(Array.isArray(err.lowLevelError)).toBe(false);
  // survives the wire unchanged
  expect(JSON.parse(JSON.stringify(env))).toEqual(env);
}

describe("ApiError", () => {
  test("takes its code, status and message from the catalogue", () => {
    const e = new ApiError("NOT_FOUND", "collection 'x' does not exist");
    expect(e).toBeInstanceOf(Error);
    expect(e.code).toBe(ErrorKinds.NOT_FOUND.code);
    expect(e.status).toBe(ErrorKinds.NOT_FOUND.status);
    expect(e.detail).toBe("collection 'x' does not exist");
    expect(e.message).toBe("collection 'x' does not exist");
  });

  test("without detail the detail is the kind's message", () => {
    const e = new ApiError("BAD_QUERY");
    expect(e.detail).toBe(ErrorKinds.BAD_QUERY.message);
  });

  test("accepts a kind object (custom category)", () => {
    const e = new ApiError({ ...ErrorKinds.NOT_FOUND, category: "Devices" }, "d");
    expect(e.code).toBe(208);
    expect(e.kind.category).toBe("Devices");
  });

  test("fail() and notFound() build ApiErrors", () => {
    const f = fail("BAD_QUERY", "x", { a: 1 });
    expect(f).toBeInstanceOf(ApiError);
    expect(f.code).toBe(305);
    expect(f.lowLevel).toEqual({ a: 1 });
    const n = notFound("device", "pump-1", "Devices");
    expect(n.status).toBe(404);
    expect(n.kind.category).toBe("Devices");
    expect(n.detail).toContain("pump-1");
    expect(notFound("system", "k").kind.category).toBe("Admin");
  });

  test("the catalogue uses ClearBlade's codes and HTTP error statuses", () => {
    expect(ErrorKinds.INVALID_METHOD.code).toBe(101);
    expect(ErrorKinds.INTERNAL.code).toBe(102);
    expect(ErrorKinds.ROUTE_NOT_FOUND.code).toBe(103);
    expect(ErrorKinds.BAD_JSON.code).toBe(106);
    expect(ErrorKinds.BODY_REQUIRED.code).toBe(110);
    expect(ErrorKinds.PERMISSION_DENIED.code).toBe(200);
    expect(ErrorKinds.NOT_AUTHORIZED_FOR_SYSTEM.code).toBe(201);
    expect(ErrorKinds.INVALID_TOKEN.code).toBe(204);
    expect(ErrorKinds.BAD_QUERY).toMatchObject({ code: 305, status: 400, category: "Data" });
    for (const k of Object.values(ErrorKinds)) {
      expect(Number.isInteger(k.code)).toBe(true);
      expect(k.status).toBeGreaterThanOrEqual(400);
      expect(k.status).toBeLessThan(600);
    }
  });
});

describe("envelope", () => {
  test("ApiError -> full envelope with its code, status, detail", () => {
    const env = envelope(new ApiError("BAD_QUERY", "unknown column 'x'"));
    expectShape(env);
    expect(env.statusCode).toBe(400);
    expect(env.error.code).toBe(305);
    expect(env.error.category).toBe("Data");
    expect(env.error.message).toBe(ErrorKinds.BAD_QUERY.message);
    expect(env.error.detail).toBe("unknown column 'x'");
    expect(env.error.lowLevelError).toEqual({});
    expect(env.error.level).toBeLessThan(envelope(new Error("x")).error.level);
  });

  test("every kind of the catalogue gives a well-formed envelope", () => {
    for (const name of Object.keys(ErrorKinds) as (keyof typeof ErrorKinds)[]) {
      const env = envelope(new ApiError(name));
      expectShape(env);
      expect(env.statusCode).toBe(ErrorKinds[name].status);
      expect(env.error.code).toBe(ErrorKinds[name].code);
    }
  });

  test("each envelope has its own uuid", () => {
    const ids = new Set(Array.from({ length: 50 }, () => envelope(new ApiError("INTERNAL")).error.id));
    expect(ids.size).toBe(50);
  });

  test("lowLevelError carries a plain object and never an Error or a non-object", () => {
    expect(envelope(new ApiError("BAD_QUERY", "d", { column: "x", pos: 3 })).error.lowLevelError).toEqual({ column: "x", pos: 3 });
    for (const low of [new Error("db exploded at /srv/secret.db"), "text", 5, null, undefined]) {
      const env = envelope(new ApiError("BAD_QUERY", "d", low));
      expectShape(env);
      expect(env.error.lowLevelError).toEqual({});
      expect(JSON.stringify(env)).not.toContain("secret.db");
    }
  });

  test("unknown errors become a 500 without leaking message or stack", () => {
    const secret = "SQLITE_ERROR near password_hash=abc123 in /home/app/src/store/users.ts";
    const errs: unknown[] = [new Error(secret), new TypeError(secret), Object.assign(new Error(secret), { status: 400, code: 305 })];
    for (const e of errs) {
      const env = envelope(e);
      expectShape(env);
      expect(env.statusCode).toBe(500);
      expect(env.error.code).toBe(ErrorKinds.INTERNAL.code);
      const text = JSON.stringify(env);
      expect(text).not.toContain("password_hash");
      expect(text).not.toContain("users.ts");
      expect(text).not.toContain("SQLITE");
      expect(text).not.toContain(" at "); // stack frames
      expect(env.error.lowLevelError).toEqual({});
    }
  });

  test("thrown non-errors become a 500 too", () => {
    for (const e of ["boom", 42, null, undefined, { message: "secret-thing", statusCode: 404 }]) {
      const env = envelope(e);
      expectShape(env);
      expect(env.statusCode).toBe(500);
      expect(env.error.code).toBe(102);
      expect(JSON.stringify(env)).not.toContain("secret-thing");
      expect(JSON.stringify(env)).not.toContain("boom");
    }
  });
});
