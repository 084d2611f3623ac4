// MongoDB (the `mongodb` driver): the connection string from the credentials, and the operation
// as existing clients write it, `db.<collection>.<method>(<args>)[.sort(...).limit(n)...]`,
// parsed as data (relaxed JSON, with ObjectId/ISODate/NumberLong helpers), never evaluated.
import type { MongoClient } from "mongodb";
import { ApiError, fail } from "../core/errors.ts";
import { type Connector, type Credentials, type DataResult, databaseError } from "./connector.ts";
import { documentFilter } from "./tables.ts";

const METHODS = ["find", "findOne", "insertOne", "insertMany", "insert", "updateOne", "updateMany", "update", "deleteOne", "deleteMany", "countDocuments", "estimatedDocumentCount", "aggregate", "distinct"] as const;
type Method = (typeof METHODS)[number];
const CURSOR_METHODS = ["sort", "limit", "skip", "collation", "project", "projection"] as const;

export interface MongoOperation { collection: string; method: Method; args: unknown[]; cursor: { method: string; arg: unknown }[] }

export function mongoUri(c: Credentials): string {
  const auth = c.user ? `${encodeURIComponent(c.user)}:${encodeURIComponent(c.password)}@` : "";
  const srv = c.connection_type === "srv";
  const host = srv ? c.address : `${c.address}:${c.port}`;
  const q = new URLSearchParams();
  if (c.user) { q.set("authSource", c.authSource ?? "admin"); q.set("authMechanism", c.authMechanism ?? "SCRAM-SHA-1"); }
  q.set("tls", String(c.tls ?? true));
  if (c.replicaSet) q.set("replicaSet", c.replicaSet);
  return `${srv ? "mongodb+srv" : "mongodb"}://${auth}${host}/${encodeURIComponent(c.dbname)}?${q.toString()}`;
}

/** Shell helpers become Extended JSON before parsing, so the values keep their BSON types. */
function toExtendedJson(args: string): string {
  return args
    .replace(/\bObjectId\(\s*(["'])([0-9a-fA-F]{24})\1\s*\)/g, '{"$oid":"$2"}')
    .replace(/\b(?:ISODate|new\s+Date)\(\s*(["'])([^"']+)\1\s*\)/g, '{"$date":"$2"}')
    .replace(/\bNumberLong\(\s*(["']?)(-?\d+)\1\s*\)/g, '{"$numberLong":"$2"}')
    .replace(/\bNumberInt\(\s*(["']?)(-?\d+)\1\s*\)/g, "$2")
    .replace(/\bNumberDecimal\(\s*(["'])([^"']+)\1\s*\)/g, '{"$numberDecimal":"$2"}');
}

/** The argument list inside `( ... )` starting at `open`; returns the text and the index after `)`. */
function balanced(s: string, open: number): { inner: string; end: number } {
  let depth = 0;
  for (let i = open; i < s.length; i++) {
    const ch = s[i]!;
    if (ch === '"' || ch === "'") {
      i++;
      while (i < s.length && s[i] !== ch) { if (s[i] === "\\") i++; i++; }
      continue;
    }
    if (ch === "(" || ch === "{" || ch === "[") depth++;
    else if (ch === ")" || ch === "}" || ch === "]") { depth--; if (depth === 0) return { inner: s.slice(open + 1, i), end: i + 1 }; }
  }
  throw fail("INVALID_ARGUMENT", "the MongoDB operation has unbalanced brackets");
}

function parseArgs(inner: string): unknown[] {
  if (!inner.trim()) return [];
  // bson loads with the first operation, as the driver's own (its CommonJS build): loading it
  // sets aside a 17 MB buffer, and most nodes never talk to MongoDB
  const { EJSON } = require("bson") as typeof import("bson");
  const JSON5 = require("json5") as typeof import("json5");
  try {
    return (EJSON.deserialize(JSON5.parse(`[${toExtendedJson(inner)}]`) as never, { relaxed: true }) as unknown as unknown[]);
  } catch (e) {
    throw fail("INVALID_ARGUMENT", `the MongoDB operation's arguments are not valid: ${(e as Error).message}`);
  }
}

/** Parses `db.<collection>.<method>(<args>)` and its cursor chain. */
export function parseMongoOperation(text: unknown): MongoOperation {
  if (typeof text !== "string") throw fail("INVALID_ARGUMENT", "operation[0] must be a MongoDB operation like db.things.find({})");
  const s = text.trim().replace(/;$/, "");
  const head = /^db\.(?:getCollection\(\s*(["'])([^"']+)\1\s*\)|([A-Za-z_][\w-]*))\.([A-Za-z]+)\(/.exec(s);
  if (!head) throw fail("INVALID_ARGUMENT", "a MongoDB operation starts db.<collection>.<method>( ... )");
  const collection = head[2] ?? head[3]!;
  const method = head[4]! as Method;
  if (!(METHODS as readonly string[]).includes(method)) throw fail("INVALID_ARGUMENT", `MongoDB method '${method}' is not supported (${METHODS.join(", ")})`);
  let { inner, end } = balanced(s, head[0].length - 1);
  const args = parseArgs(inner);
  const cursor: MongoOperation["cursor"] = [];
  while (end < s.length) {
    const m = /^\s*\.([A-Za-z]+)\(/.exec(s.slice(end));
    if (!m) throw fail("INVALID_ARGUMENT", `unexpected text after the MongoDB call: '${s.slice(end, end + 30)}'`);
    if (!(CURSOR_METHODS as readonly string[]).includes(m[1]!)) throw fail("INVALID_ARGUMENT", `cursor method '${m[1]}' is not supported (${CURSOR_METHODS.join(", ")})`);
    ({ inner, end } = balanced(s, end + m[0].length - 1));
    cursor.push({ method: m[1]!, arg: parseArgs(inner)[0] });
  }
  if (cursor.length && method !== "find" && method !== "aggregate") throw fail("INVALID_ARGUMENT", `cursor methods follow find or aggregate, not ${method}`);
  return { collection, method, args, cursor };
}

const obj = (v: unknown, what: string) => {
  if (v === undefined) return {};
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw fail("INVALID_ARGUMENT", `${what} must be an object`);
  return v as Record<string, unknown>;
};

export function mongoConnector(c: Credentials): Connector {
  // the driver loads with the first connection, from a part of the binary of its own (it is a
  // large part of the code, which a start would otherwise read and hold in memory)
  const client = import("mongodb").then(({ MongoClient }) =>
    new MongoClient(mongoUri(c), { serverSelectionTimeoutMS: 5_000, connectTimeoutMS: 5_000, maxPoolSize: 5 }));
  client.catch(() => {}); // (a client that cannot be made: the first operation reports it)
  let connecting: Promise<MongoClient> | null = null;
  const ready = () => (connecting ??= client.then((m) => m.connect()).catch((e) => { connecting = null; throw databaseError(e, "could not connect"); }));
  const collection = async (name: string) => (await ready()).db(c.dbname).collection(name);
  return {
    async perform(op, timeoutMs): Promise<DataResult> {
      const o = parseMongoOperation(op[0]);
      const db = (await ready()).db(c.dbname);
      const coll = db.collection(o.collection);
      const [a, b, x] = o.args;
      const opts = { maxTimeMS: timeoutMs };
      try {
        switch (o.method) {
          case "find": {
            let cur = coll.find(obj(a, "the filter"), { ...obj(b, "the options"), ...opts });
            for (const k of o.cursor) {
              if (k.method === "sort") cur = cur.sort(obj(k.arg, "sort") as never);
              else if (k.method === "limit") cur = cur.limit(Number(k.arg));
              else if (k.method === "skip") cur = cur.skip(Number(k.arg));
              else if (k.method === "collation") cur = cur.collation(obj(k.arg, "collation") as never);
              else cur = cur.project(obj(k.arg, "projection"));
            }
            const rows = await cur.toArray();
            return { Data: rows, Total: rows.length };
          }
          case "findOne": { const r = await coll.findOne(obj(a, "the filter"), opts); return { Data: r ? [r] : [], Total: r ? 1 : 0 }; }
          case "aggregate": {
            if (!Array.isArray(a)) throw fail("INVALID_ARGUMENT", "aggregate takes a pipeline (a list of stages)");
            const rows = await coll.aggregate(a as never[], opts).toArray();
            return { Data: rows, Total: rows.length };
          }
          case "insertOne": { const r = await coll.insertOne(obj(a, "the document")); return { Data: [{ insertedId: r.insertedId }], Total: 1 }; }
          case "insert":
          case "insertMany": {
            const docs = Array.isArray(a) ? a : [obj(a, "the document")];
            const r = await coll.insertMany(docs as never[]);
            return { Data: Object.values(r.insertedIds).map((id) => ({ insertedId: id })), Total: r.insertedCount };
          }
          case "updateOne": { const r = await coll.updateOne(obj(a, "the filter"), obj(b, "the update") as never, obj(x, "the options")); return { Data: [], Total: r.modifiedCount }; }
          case "update":
          case "updateMany": { const r = await coll.updateMany(obj(a, "the filter"), obj(b, "the update") as never, obj(x, "the options")); return { Data: [], Total: r.modifiedCount }; }
          case "deleteOne": { const r = await coll.deleteOne(obj(a, "the filter")); return { Data: [], Total: r.deletedCount }; }
          case "deleteMany": { const r = await coll.deleteMany(obj(a, "the filter")); return { Data: [], Total: r.deletedCount }; }
          case "countDocuments": { const n = await coll.countDocuments(obj(a, "the filter"), opts); return { Data: [{ count: n }], Total: n }; }
          case "estimatedDocumentCount": { const n = await coll.estimatedDocumentCount(opts); return { Data: [{ count: n }], Total: n }; }
          case "distinct": {
            if (typeof a !== "string") throw fail("INVALID_ARGUMENT", "distinct takes a field name");
            const rows = await coll.distinct(a, obj(b, "the filter"), opts);
            return { Data: rows, Total: rows.length };
          }
        }
      } catch (e) {
        if ((e as { code?: number }).code === 50) throw fail("EXTERNAL_DB", `the operation did not finish within ${timeoutMs / 1000} s and was cancelled`);
        if (e instanceof ApiError) throw e;
        throw databaseError(e);
      }
    },
    table: {
      fetch: (t, q, ms) => guard(ms, async () => {
        let cur = (await collection(t)).find(documentFilter(q), { maxTimeMS: ms, ...(q.select ? { projection: Object.fromEntries(q.select.map((f) => [f, 1])) } : {}) });
        if (q.sort.length) cur = cur.sort(Object.fromEntries(q.sort.map((x) => [x.field, x.desc ? -1 : 1])) as never);
        if (q.pageSize) cur = cur.skip((q.pageNum - 1) * q.pageSize).limit(q.pageSize);
        return cur.toArray();
      }),
      count: (t, q, ms) => guard(ms, async () => (await collection(t)).countDocuments(documentFilter(q), { maxTimeMS: ms })),
      insert: (t, items, ms) => guard(ms, async () => (await (await collection(t)).insertMany(items as never[])).insertedCount),
      update: (t, q, set, ms) => guard(ms, async () => (await (await collection(t)).updateMany(documentFilter(q), { $set: set } as never, { maxTimeMS: ms } as never)).modifiedCount),
      delete: (t, q, ms) => guard(ms, async () => (await (await collection(t)).deleteMany(documentFilter(q), { maxTimeMS: ms } as never)).deletedCount),
    },
    close: () => client.then((m) => m.close(), () => {}),
  };
}

/** Driver errors as clear 400s (a timeout named as one). */
async function guard<T>(ms: number, fn: () => Promise<T>): Promise<T> {
  try { return await fn(); } catch (e) {
    if (e instanceof ApiError) throw e;
    if ((e as { code?: number }).code === 50) throw fail("EXTERNAL_DB", `the operation did not finish within ${ms / 1000} s and was cancelled`);
    throw databaseError(e);
  }
}
