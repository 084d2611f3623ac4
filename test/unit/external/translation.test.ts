// What can be checked without the server: credential rules and defaults for all five types,
// placeholders per dialect, MongoDB operations and connection strings, SQL Server settings,
// CouchDB requests (against a local HTTP listener that records them), and sealed credentials.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SecretBox } from "../../../src/auth/secrets.ts";
import { ApiError } from "../../../src/core/errors.ts";
import { dbTypeOf, maskCredentials, parseCredentials, positional } from "../../../src/external/connector.ts";
import { couchConnector, couchRequest, mangoQuery } from "../../../src/external/couchdb.ts";
import { deleteSql, documentFilter, insertSql, selectSql, updateSql } from "../../../src/external/tables.ts";
import { parseQuery } from "../../../src/core/query.ts";
import { mongoUri, parseMongoOperation } from "../../../src/external/mongodb.ts";
import { mssqlConfig } from "../../../src/external/sql.ts";

const base = { user: "u", password: "p", address: "10.0.0.5", dbname: "plant" };
const refused = (f: () => unknown, re: RegExp) => { try { f(); } catch (e) { expect(e).toBeInstanceOf(ApiError); expect((e as ApiError).detail).toMatch(re); return; } throw new Error("not refused"); };

describe("credentials", () => {
  test("default ports per type", () => {
    expect(parseCredentials("mongodb", base).port).toBe("27017");
    expect(parseCredentials("mysql", base).port).toBe("3306");
    expect(parseCredentials("postgres", base).port).toBe("5432");
    expect(parseCredentials("mssql", base).port).toBe("1433");
    expect(parseCredentials("postgres", { ...base, port: 6543 }).port).toBe("6543");
  });
  test("mongodb defaults: standard, tls on, SCRAM-SHA-1, authSource admin, no replica set", () => {
    expect(parseCredentials("mongodb", base)).toMatchObject({ connection_type: "standard", tls: true, authMechanism: "SCRAM-SHA-1", authSource: "admin", replicaSet: "" });
  });
  test("postgres tls defaults to off; mssql encryption disable or true", () => {
    expect(parseCredentials("postgres", base).tls).toBe(false);
    expect(parseCredentials("postgres", { ...base, tls: "true" }).tls).toBe(true);
    expect(parseCredentials("mssql", { ...base, encryption: "true" }).encryption).toBe("true");
  });
  test("invalid values are refused, naming the field", () => {
    refused(() => parseCredentials("mongodb", { ...base, connection_type: "cluster" }), /connection_type/);
    refused(() => parseCredentials("mongodb", { ...base, authMechanism: "MD5" }), /authMechanism/);
    refused(() => parseCredentials("mssql", { ...base, encryption: "yes" }), /encryption/);
    refused(() => parseCredentials("postgres", { ...base, port: "70000" }), /port/);
    refused(() => parseCredentials("postgres", { ...base, port: "12a" }), /port/);
    refused(() => parseCredentials("postgres", { ...base, address: "bad host/x" }), /address/);
    refused(() => parseCredentials("postgres", { ...base, address: undefined }), /address/);
    refused(() => parseCredentials("postgres", { ...base, dbname: "" }), /dbname/);
    refused(() => parseCredentials("postgres", { ...base, tls: "maybe" }), /tls/);
    refused(() => parseCredentials("mysql", { ...base, tls: true }), /tls applies to mongodb and postgres only/);
    refused(() => parseCredentials("postgres", { ...base, authSource: "x" }), /authSource/);
    refused(() => parseCredentials("postgres", { ...base, colour: "red" }), /colour/);
    refused(() => parseCredentials("postgres", { ...base, user: 5 }), /user/);
  });
  test("db_type: the five types, any case; others refused", () => {
    expect(dbTypeOf("MongoDB")).toBe("mongodb");
    refused(() => dbTypeOf("oracle"), /oracle/);
    refused(() => dbTypeOf(undefined), /db_type/);
  });
  test("an update keeps what it does not send; masking", () => {
    const c = parseCredentials("postgres", { address: "db2" }, parseCredentials("postgres", base));
    expect(c).toMatchObject({ user: "u", password: "p", address: "db2", dbname: "plant" });
    expect(maskCredentials(c).password).toBe("********");
  });
});

describe("placeholders", () => {
  test("postgres keeps $n; mysql uses ? in order of use; mssql @pN", () => {
    const sql = "SELECT * FROM t WHERE a = $2 AND b = $1 AND c = '$1' AND d = $2 -- $1\n";
    expect(positional("postgres", sql, [1, 2])).toEqual({ sql, args: [1, 2] });
    expect(positional("mysql", sql, [1, 2])).toEqual({ sql: "SELECT * FROM t WHERE a = ? AND b = ? AND c = '$1' AND d = ? -- $1\n", args: [2, 1, 2] });
    expect(positional("mssql", sql, [1, 2]).sql).toBe("SELECT * FROM t WHERE a = @p2 AND b = @p1 AND c = '$1' AND d = @p2 -- $1\n");
  });
});

describe("MongoDB", () => {
  test("operations parse as data, with shell helpers and cursor methods", () => {
    const o = parseMongoOperation(`db.sensors.find({ plant: 'north', _id: ObjectId("64b7f0c2a1b2c3d4e5f60718"), at: { $gte: ISODate("2026-01-01T00:00:00Z") } }).sort({ at: -1 }).limit(5).skip(10)`);
    expect(o.collection).toBe("sensors");
    expect(o.method).toBe("find");
    const filter = o.args[0] as any;
    expect(filter.plant).toBe("north");
    // the ObjectId of the driver's bson (its CommonJS build, which the parser loads too)
    expect(filter._id).toBeInstanceOf((require("bson") as typeof import("bson")).ObjectId);
    expect(filter.at.$gte).toBeInstanceOf(Date);
    expect(o.cursor).toEqual([{ method: "sort", arg: { at: -1 } }, { method: "limit", arg: 5 }, { method: "skip", arg: 10 }]);
    expect(parseMongoOperation(`db.getCollection("odd-name").countDocuments({})`)).toMatchObject({ collection: "odd-name", method: "countDocuments" });
    expect(parseMongoOperation(`db.x.insertMany([{a: 1}, {a: "(2)"}]);`).args[0]).toEqual([{ a: 1 }, { a: "(2)" }]);
    expect(parseMongoOperation(`db.x.aggregate([{ $match: { a: 1 } }, { $group: { _id: "$a", n: { $sum: 1 } } }])`).args[0]).toHaveLength(2);
  });
  test("anything else is refused: code, unknown methods, broken text", () => {
    refused(() => parseMongoOperation("db.x.drop()"), /not supported/);
    refused(() => parseMongoOperation("process.exit(1)"), /db\.<collection>/);
    refused(() => parseMongoOperation("db.x.find({a: function () { return 1 }})"), /not valid/);
    refused(() => parseMongoOperation("db.x.find({a: 1}"), /unbalanced/);
    refused(() => parseMongoOperation("db.x.find({}).forEach(print)"), /not supported/);
    refused(() => parseMongoOperation("db.x.insertOne({}).limit(1)"), /cursor methods follow find/);
    refused(() => parseMongoOperation(7), /MongoDB operation/);
  });
  test("connection strings: standard and srv, credentials escaped, options from the credentials", () => {
    const c = parseCredentials("mongodb", { user: "a@b", password: "p:w/d", address: "mongo.local", dbname: "plant", replicaSet: "rs0", authMechanism: "SCRAM-SHA-256" });
    expect(mongoUri(c)).toBe("mongodb://a%40b:p%3Aw%2Fd@mongo.local:27017/plant?authSource=admin&authMechanism=SCRAM-SHA-256&tls=true&replicaSet=rs0");
    const srv = parseCredentials("mongodb", { ...base, address: "cluster0.example.net", connection_type: "srv", tls: false });
    expect(mongoUri(srv)).toBe("mongodb+srv://u:p@cluster0.example.net/plant?authSource=admin&authMechanism=SCRAM-SHA-1&tls=false");
  });
});

describe("SQL Server", () => {
  test("settings from the credentials", () => {
    const cfg = mssqlConfig(parseCredentials("mssql", { ...base, encryption: "true" }));
    expect(cfg).toMatchObject({ server: "10.0.0.5", port: 1433, user: "u", password: "p", database: "plant", options: { encrypt: true, trustServerCertificate: false } });
    expect(mssqlConfig(parseCredentials("mssql", { ...base, encryption: "disable" })).options).toMatchObject({ encrypt: false });
  });
});

describe("CouchDB", () => {
  test("an operation becomes an HTTP request on the connection's database", () => {
    const c = parseCredentials("couchdb", { ...base, address: "couch.local" });
    expect(couchRequest(c, ["post", "_find", { selector: { a: 1 } }])).toEqual({
      method: "POST", url: "http://couch.local:5984/plant/_find",
      headers: { accept: "application/json", authorization: `Basic ${Buffer.from("u:p").toString("base64")}`, "content-type": "application/json" },
      body: JSON.stringify({ selector: { a: 1 } }),
    });
    expect(couchRequest(c, ["GET", "/doc1"]).url).toBe("http://couch.local:5984/plant/doc1");
    refused(() => couchRequest(c, ["PATCH", "x"]), /HTTP method/);
    refused(() => couchRequest(c, ["GET", "../_users"]), /leave/);
    refused(() => couchRequest(c, ["GET", "a/../../x"]), /leave/);
  });
  test("answers map to {Data, Total}; errors are clear", async () => {
    const seen: { method: string; url: string; auth: string | null }[] = [];
    const server = Bun.serve({ port: 0, fetch: async (req) => {
      seen.push({ method: req.method, url: new URL(req.url).pathname, auth: req.headers.get("authorization") });
      if (req.url.endsWith("/_all_docs")) return Response.json({ total_rows: 7, rows: [{ id: "a" }, { id: "b" }] });
      if (req.url.endsWith("/_find")) return Response.json({ docs: [{ _id: "x" }] });
      return Response.json({ error: "not_found" }, { status: 404 });
    } });
    try {
      const c = couchConnector(parseCredentials("couchdb", { ...base, address: "127.0.0.1", port: String(server.port) }));
      expect(await c.perform(["GET", "_all_docs"], 2_000)).toEqual({ Data: [{ id: "a" }, { id: "b" }], Total: 7 });
      expect(await c.perform(["POST", "_find", { selector: {} }], 2_000)).toEqual({ Data: [{ _id: "x" }], Total: 1 });
      let err: unknown;
      try { await c.perform(["GET", "missing"], 2_000); } catch (e) { err = e; }
      expect((err as ApiError).status).toBe(400);
      expect((err as ApiError).detail).toMatch(/404/);
      expect(seen[0]).toEqual({ method: "GET", url: "/plant/_all_docs", auth: `Basic ${Buffer.from("u:p").toString("base64")}` });
    } finally { server.stop(true); }
  });
});

describe("sealed credentials", () => {
  test("round trip; tampering and another key are refused; the key file is private", () => {
    const dir = mkdtempSync(join(tmpdir(), "outpost-key-"));
    const box = SecretBox.load(dir);
    const sealed = box.seal(JSON.stringify({ password: "hunter2" }));
    expect(sealed).not.toContain("hunter2");
    expect(JSON.parse(box.open(sealed)).password).toBe("hunter2");
    expect(SecretBox.load(dir).open(sealed)).toContain("hunter2"); // the same key file next time
    expect(statSync(join(dir, "secret.key")).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dir, "secret.key"), "utf8").trim().length).toBeGreaterThan(40);
    const flipped = sealed.slice(0, -4) + (sealed.endsWith("AAAA") ? "BBBB" : "AAAA");
    expect(() => box.open(flipped)).toThrow();
    expect(() => SecretBox.load(dir, "another key entirely").open(sealed)).toThrow();
  });
});

describe("collections that are database connections", () => {
  const q = parseQuery({ FILTERS: [[{ GT: { value: 10 } }, { EQ: { site: "north" } }], [{ NEQ: { flag: null } }]], SORT: [{ DESC: "value" }], PAGESIZE: 5, PAGENUM: 3, SELECTCOLUMNS: ["site", "value"] });
  test("SQL per dialect: quoted names, $n arguments, paging", () => {
    expect(selectSql("postgres", "public.readings", q)).toEqual({
      sql: `SELECT "site", "value" FROM "public"."readings" WHERE ("value" > $1 AND "site" = $2) OR ("flag" IS NOT NULL) ORDER BY "value" DESC LIMIT 5 OFFSET 10`, args: [10, "north"] });
    expect(selectSql("mysql", "readings", q).sql).toBe("SELECT `site`, `value` FROM `readings` WHERE (`value` > $1 AND `site` = $2) OR (`flag` IS NOT NULL) ORDER BY `value` DESC LIMIT 5 OFFSET 10");
    expect(selectSql("mssql", "readings", parseQuery({ PAGESIZE: 5, PAGENUM: 2 })).sql).toBe("SELECT * FROM [readings] ORDER BY (SELECT NULL) OFFSET 5 ROWS FETCH NEXT 5 ROWS ONLY");
    expect(updateSql("postgres", "t", parseQuery([[{ EQ: { id: 1 } }]]), { a: 2, b: { x: 1 } })).toEqual({ sql: `UPDATE "t" SET "a" = $1, "b" = $2 WHERE ("id" = $3)`, args: [2, '{"x":1}', 1] });
    expect(insertSql("mysql", "t", { a: 1, b: "x" })).toEqual({ sql: "INSERT INTO `t` (`a`, `b`) VALUES ($1, $2)", args: [1, "x"] });
    expect(deleteSql("mssql", "t", parseQuery([]))).toEqual({ sql: "DELETE FROM [t]", args: [] });
    refused(() => selectSql("postgres", "t", parseQuery([[{ EQ: { "a; drop": 1 } }]])), /plain/);
    refused(() => selectSql("mssql", "t", parseQuery([[{ RE: { a: "x" } }]])), /regular expressions/);
    refused(() => selectSql("postgres", "a.b.c", parseQuery([])), /tablename/);
  });
  test("MongoDB filters and CouchDB Mango queries use the same operators", () => {
    expect(documentFilter(q)).toEqual({ $or: [{ $and: [{ value: { $gt: 10 } }, { site: { $eq: "north" } }] }, { $and: [{ flag: { $ne: null } }] }] });
    expect(documentFilter(parseQuery([]))).toEqual({});
    expect(mangoQuery(parseQuery({ FILTERS: [[{ RE: { site: "^n" } }]], SORT: [{ ASC: "at" }], PAGESIZE: 10, PAGENUM: 2 }))).toEqual({
      selector: { $and: [{ site: { $regex: "^n" } }] }, sort: [{ at: "asc" }], limit: 10, skip: 10 });
  });
  test("CouchDB items: _find, _bulk_docs for inserts, updates (merged, with _rev) and deletes", async () => {
    const seen: { path: string; body: any }[] = [];
    const docs = [{ _id: "a", _rev: "1-x", site: "north", value: 1 }, { _id: "b", _rev: "1-y", site: "north", value: 2 }];
    const server = Bun.serve({ port: 0, fetch: async (req) => {
      const body: any = await req.json().catch(() => null);
      seen.push({ path: new URL(req.url).pathname, body });
      if (req.url.endsWith("/_find")) return Response.json({ docs: body.fields ? docs.map((d) => Object.fromEntries(body.fields.map((f: string) => [f, (d as any)[f]]))) : docs });
      return Response.json(body.docs.map((d: any) => ({ ok: true, id: d._id ?? "new", rev: "2-z" })));
    } });
    try {
      const c = couchConnector(parseCredentials("couchdb", { ...base, address: "127.0.0.1", port: String(server.port) }));
      const sel = parseQuery([[{ EQ: { site: "north" } }]]);
      expect(await c.table.fetch("", sel, 2_000)).toEqual(docs);
      expect(seen.at(-1)).toEqual({ path: "/plant/_find", body: { selector: { $and: [{ site: { $eq: "north" } }] }, limit: 100, skip: 0 } });
      expect(await c.table.count("", sel, 2_000)).toBe(2);
      expect(await c.table.insert("", [{ site: "south" }], 2_000)).toBe(1);
      expect(seen.at(-1)).toEqual({ path: "/plant/_bulk_docs", body: { docs: [{ site: "south" }] } });
      expect(await c.table.update("", sel, { value: 9 }, 2_000)).toBe(2);
      expect(seen.at(-1)!.body.docs).toEqual(docs.map((d) => ({ ...d, value: 9 })));
      expect(await c.table.delete("", sel, 2_000)).toBe(2);
      expect(seen.at(-1)!.body.docs).toEqual([{ _id: "a", _rev: "1-x", _deleted: true }, { _id: "b", _rev: "1-y", _deleted: true }]);
    } finally { server.stop(true); }
  });
});
