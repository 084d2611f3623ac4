// CouchDB over plain HTTP: the operation is `[method, uri, data?]`, the uri relative to the
// connection's database, sent with the connection's credentials (HTTP Basic).
import { fail } from "../core/errors.ts";
import type { Query } from "../core/query.ts";
import { type Connector, type Credentials, type DataResult, databaseError } from "./connector.ts";
import { documentFilter } from "./tables.ts";

const METHODS = ["GET", "POST", "PUT", "DELETE", "HEAD", "COPY"] as const;

export interface CouchRequest { method: string; url: string; headers: Record<string, string>; body?: string }

/** The HTTP request an operation becomes. */
export function couchRequest(c: Credentials, op: unknown[]): CouchRequest {
  const [m, uri, data] = op;
  if (typeof m !== "string" || !(METHODS as readonly string[]).includes(m.toUpperCase())) throw fail("INVALID_ARGUMENT", `operation[0] must be the HTTP method (${METHODS.join(", ")})`);
  if (uri !== undefined && typeof uri !== "string") throw fail("INVALID_ARGUMENT", "operation[1] must be the uri, relative to the database");
  const rel = (uri ?? "").replace(/^\/+/, "");
  if (rel.split(/[/?#]/)[0] === ".." || /(^|\/)\.\.(\/|$)/.test(rel.split("?")[0]!)) throw fail("INVALID_ARGUMENT", "the uri may not leave the connection's database");
  const scheme = c.port === "6984" ? "https" : "http";
  const headers: Record<string, string> = { accept: "application/json" };
  if (c.user) headers.authorization = `Basic ${Buffer.from(`${c.user}:${c.password}`).toString("base64")}`;
  let body: string | undefined;
  if (data !== undefined && data !== null) { body = typeof data === "string" ? data : JSON.stringify(data); headers["content-type"] = "application/json"; }
  return { method: m.toUpperCase(), url: `${scheme}://${c.address}:${c.port}/${encodeURIComponent(c.dbname)}${rel ? `/${rel}` : ""}`, headers, ...(body !== undefined ? { body } : {}) };
}

/** CouchDB answers: `rows` (views, _all_docs), `docs` (_find), or one document. */
function resultOf(json: unknown): DataResult {
  if (json && typeof json === "object" && !Array.isArray(json)) {
    const o = json as Record<string, unknown>;
    if (Array.isArray(o.rows)) return { Data: o.rows, Total: typeof o.total_rows === "number" ? o.total_rows : o.rows.length };
    if (Array.isArray(o.docs)) return { Data: o.docs, Total: o.docs.length };
    return { Data: [o], Total: 1 };
  }
  return Array.isArray(json) ? { Data: json, Total: json.length } : { Data: [json], Total: 1 };
}

/** The Mango query (`_find`) for a collection query. */
export function mangoQuery(q: Query, fields?: string[]): Record<string, unknown> {
  return {
    selector: documentFilter(q),
    ...(q.sort.length ? { sort: q.sort.map((x) => ({ [x.field]: x.desc ? "desc" : "asc" })) } : {}),
    ...(q.pageSize ? { limit: q.pageSize, skip: (q.pageNum - 1) * q.pageSize } : { limit: 1_000_000 }),
    ...(fields ?? q.select ? { fields: fields ?? q.select } : {}),
  };
}

export function couchConnector(c: Credentials): Connector {
  const call = (method: string, uri: string, data: unknown, ms: number) => perform([method, uri, data], ms);
  const all = (q: Query): Query => ({ ...q, pageSize: 0, pageNum: 1, sort: [] });
  const docs = async (q: Query, ms: number, fields?: string[]) => (await call("POST", "_find", mangoQuery(q, fields), ms)).Data as Record<string, unknown>[];
  // CouchDB has one database per connection: the collection's "table" names nothing more
  const perform = async (op: unknown[], timeoutMs: number): Promise<DataResult> => {
    const r = couchRequest(c, op);
    let res: Response;
    try { res = await fetch(r.url, { method: r.method, headers: r.headers, body: r.body, signal: AbortSignal.timeout(timeoutMs) }); }
    catch (e) {
      if ((e as Error).name === "TimeoutError") throw fail("EXTERNAL_DB", `CouchDB did not answer within ${timeoutMs / 1000} s`);
      throw databaseError(e, "could not connect");
    }
    const text = await res.text();
    let json: unknown = text;
    try { json = text ? JSON.parse(text) : {}; } catch { /* not JSON */ }
    if (!res.ok) throw databaseError(new Error(`${res.status} ${typeof json === "object" ? JSON.stringify(json) : text}`), "CouchDB refused the request");
    return resultOf(json);
  };
  return {
    perform,
    table: {
      fetch: (_t, q, ms) => docs(q, ms),
      count: async (_t, q, ms) => (await docs(all(q), ms, ["_id"])).length,
      insert: async (_t, items, ms) => (await call("POST", "_bulk_docs", { docs: items }, ms)).Data.filter((r) => !(r as { error?: unknown }).error).length,
      update: async (_t, q, set, ms) => {
        const found = await docs(all(q), ms);
        if (!found.length) return 0;
        return (await call("POST", "_bulk_docs", { docs: found.map((d) => ({ ...d, ...set, _id: d._id, _rev: d._rev })) }, ms)).Data.filter((r) => !(r as { error?: unknown }).error).length;
      },
      delete: async (_t, q, ms) => {
        const found = await docs(all(q), ms, ["_id", "_rev"]);
        if (!found.length) return 0;
        return (await call("POST", "_bulk_docs", { docs: found.map((d) => ({ _id: d._id, _rev: d._rev, _deleted: true })) }, ms)).Data.filter((r) => !(r as { error?: unknown }).error).length;
      },
    },
    close: async () => {},
  };
}
