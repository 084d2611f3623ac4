// CouchDB over plain HTTP: the operation is `[method, uri, data?]`, the uri relative to the
// connection's database, sent with the connection's credentials (HTTP Basic).
import { fail } from "../core/errors.ts";
import { type Connector, type Credentials, type DataResult, databaseError } from "./connector.ts";

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

export function couchConnector(c: Credentials): Connector {
  return {
    async perform(op, timeoutMs): Promise<DataResult> {
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
    },
    close: async () => {},
  };
}
