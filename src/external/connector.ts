// External databases: the
// credential rules with their defaults, and the one interface every database implements.
import { fail } from "../core/errors.ts";
import type { Query } from "../core/query.ts";
import { knownFields, objectBody } from "../core/validate.ts";

export const DB_TYPES = ["mongodb", "postgres", "mysql", "mssql", "couchdb"] as const;
export type DbType = (typeof DB_TYPES)[number];
export const MONGO_AUTH_MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-1", "MONGODB-CR", "PLAIN", "GSSAPI", "MONGODB-X509"] as const;
const DEFAULT_PORTS: Record<DbType, string> = { mongodb: "27017", mysql: "3306", postgres: "5432", mssql: "1433", couchdb: "5984" };

export interface Credentials {
  user: string; password: string; address: string; port: string; dbname: string;
  // mongodb
  connection_type?: "srv" | "standard"; authMechanism?: string; authSource?: string; replicaSet?: string;
  // mongodb, postgres
  tls?: boolean;
  // mssql
  encryption?: "disable" | "true" | "";
}

/** The result of a data operation, as clients read it. */
export interface DataResult { Data: unknown[]; Total: number }

/** A collection's items on a table (SQL), a collection (MongoDB) or a database (CouchDB): the
 *  collection query and item writes of the data API, for collections that are database connections. */
export interface TableOps {
  fetch(table: string, q: Query, timeoutMs: number): Promise<unknown[]>;
  count(table: string, q: Query, timeoutMs: number): Promise<number>;
  insert(table: string, items: Record<string, unknown>[], timeoutMs: number): Promise<number>;
  update(table: string, q: Query, set: Record<string, unknown>, timeoutMs: number): Promise<number>;
  delete(table: string, q: Query, timeoutMs: number): Promise<number>;
}

/** One database connection (pooled inside). Errors thrown are ApiErrors with a clear message. */
export interface Connector {
  /** `operation` as the wire carries it: SQL and positional arguments; a MongoDB expression; a CouchDB call. */
  perform(operation: unknown[], timeoutMs: number): Promise<DataResult>;
  /** SQL databases: the statements (each an operation array) in one transaction, all or none;
   *  `timeoutMs` bounds each statement. */
  transaction?(statements: unknown[][], timeoutMs: number): Promise<void>;
  table: TableOps;
  close(): Promise<void>;
}

export function dbTypeOf(v: unknown): DbType {
  if (typeof v !== "string" || !v) throw fail("INVALID_ARGUMENT", `db_type is required: one of ${DB_TYPES.join(", ")}`);
  const t = DB_TYPES.find((x) => x === v.toLowerCase());
  if (!t) throw fail("INVALID_ARGUMENT", `db_type '${v}' is not one of ${DB_TYPES.join(", ")}`);
  return t;
}

const HOST_RE = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$|^\[?[0-9A-Fa-f:.]+\]?$/;
const CREDENTIAL_FIELDS = ["user", "password", "address", "port", "dbname", "connection_type", "tls", "authMechanism", "authSource", "replicaSet", "encryption"] as const;
const CREDENTIAL_FIELD_SET = new Set<string>(CREDENTIAL_FIELDS);
const APPLIES: Record<string, DbType[]> = {
  connection_type: ["mongodb"], authMechanism: ["mongodb"], authSource: ["mongodb"], replicaSet: ["mongodb"], tls: ["mongodb", "postgres"], encryption: ["mssql"],
};

/** Validated credentials with their defaults; over `base` (an update changes only what it sends). */
export function parseCredentials(type: DbType, raw: unknown, base?: Credentials): Credentials {
  const b = objectBody(raw, "credentials");
  knownFields(b, CREDENTIAL_FIELD_SET, "credentials");
  const str = (k: string, dflt: string | undefined): string | undefined => {
    const v = b[k];
    if (v === undefined || v === null) return dflt;
    if (typeof v === "number" && k === "port") return String(v);
    if (typeof v !== "string") throw fail("INVALID_ARGUMENT", `credentials.${k} must be a string`);
    return v;
  };
  const applies = (k: string) => !APPLIES[k] || APPLIES[k]!.includes(type);
  for (const k of Object.keys(APPLIES)) {
    const v = b[k];
    if (!applies(k) && v !== undefined && v !== null && v !== "" && v !== false) throw fail("INVALID_ARGUMENT", `credentials.${k} applies to ${APPLIES[k]!.join(" and ")} only`);
  }
  const address = str("address", base?.address);
  if (!address) throw fail("INVALID_ARGUMENT", "credentials.address is required");
  if (!HOST_RE.test(address)) throw fail("INVALID_ARGUMENT", `credentials.address '${address}' is not an IP address or host name`);
  const port = str("port", base?.port) || DEFAULT_PORTS[type];
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) throw fail("INVALID_ARGUMENT", `credentials.port '${port}' must be a port number`);
  const dbname = str("dbname", base?.dbname);
  if (!dbname) throw fail("INVALID_ARGUMENT", "credentials.dbname is required");
  const c: Credentials = { user: str("user", base?.user) ?? "", password: str("password", base?.password) ?? "", address, port, dbname };
  if (type === "mongodb" || type === "postgres") {
    const tls = b.tls === undefined || b.tls === null ? base?.tls ?? type === "mongodb" : b.tls === "true" ? true : b.tls === "false" ? false : b.tls;
    if (typeof tls !== "boolean") throw fail("INVALID_ARGUMENT", "credentials.tls must be true or false");
    c.tls = tls;
  }
  if (type === "mongodb") {
    const ct = str("connection_type", base?.connection_type) || "standard";
    if (ct !== "srv" && ct !== "standard") throw fail("INVALID_ARGUMENT", `credentials.connection_type '${ct}' must be srv or standard`);
    c.connection_type = ct;
    const mech = str("authMechanism", base?.authMechanism) || "SCRAM-SHA-1";
    if (!(MONGO_AUTH_MECHANISMS as readonly string[]).includes(mech)) throw fail("INVALID_ARGUMENT", `credentials.authMechanism '${mech}' must be one of ${MONGO_AUTH_MECHANISMS.join(", ")}`);
    c.authMechanism = mech;
    c.authSource = str("authSource", base?.authSource) || "admin";
    c.replicaSet = str("replicaSet", base?.replicaSet) ?? "";
  }
  if (type === "mssql") {
    const enc = str("encryption", base?.encryption) ?? "";
    if (enc !== "" && enc !== "disable" && enc !== "true") throw fail("INVALID_ARGUMENT", `credentials.encryption '${enc}' must be disable or true`);
    c.encryption = enc as Credentials["encryption"];
  }
  return c;
}

/** Credentials as a read shows them: the password masked. */
export const maskCredentials = (c: Credentials): Credentials => ({ ...c, password: c.password ? "********" : "" });

const OPERATION_FIELDS = new Set(["operation", "operations", "timeout"]);

/** The operation array: a statement (or expression) and its arguments. */
export function operationOf(body: unknown): unknown[] {
  const b = knownFields(objectBody(body), OPERATION_FIELDS);
  const op = b.operation ?? b.operations;
  if (!Array.isArray(op) || op.length === 0) throw fail("INVALID_ARGUMENT", "operation must be a list: the statement (or expression) first, then its arguments");
  return op;
}

export type SqlDialect = "postgres" | "mysql" | "mssql";

/** `$1`, `$2`… placeholders (outside quotes and comments) in the dialect's own form, with the
 *  arguments in the order the statement uses them. */
export function positional(dialect: SqlDialect, sql: string, args: unknown[]): { sql: string; args: unknown[] } {
  const used = new Set<number>();
  const out: string[] = [];
  const ordered: unknown[] = [];
  let i = 0;
  while (i < sql.length) {
    const ch = sql[i]!;
    if (ch === "'" || ch === '"' || ch === "`") {
      const end = skipQuoted(sql, i, ch);
      out.push(sql.slice(i, end));
      i = end;
    } else if (ch === "-" && sql[i + 1] === "-") {
      const end = sql.indexOf("\n", i);
      out.push(sql.slice(i, end < 0 ? sql.length : end));
      i = end < 0 ? sql.length : end;
    } else if (ch === "/" && sql[i + 1] === "*") {
      const end = sql.indexOf("*/", i + 2);
      out.push(sql.slice(i, end < 0 ? sql.length : end + 2));
      i = end < 0 ? sql.length : end + 2;
    } else if (ch === "$" && /\d/.test(sql[i + 1] ?? "")) {
      let j = i + 1;
      while (/\d/.test(sql[j] ?? "")) j++;
      const n = Number(sql.slice(i + 1, j));
      if (n < 1 || n > args.length) throw fail("INVALID_ARGUMENT", `$${n} has no argument (${args.length} given)`);
      used.add(n);
      if (dialect === "postgres") out.push(`$${n}`);
      else if (dialect === "mssql") out.push(`@p${n}`);
      else { out.push("?"); ordered.push(args[n - 1]); }
      i = j;
    } else { out.push(ch); i++; }
  }
  if (used.size !== args.length) throw fail("INVALID_ARGUMENT", `${args.length} argument(s) given, but the statement uses ${used.size} placeholder(s)`);
  return { sql: out.join(""), args: dialect === "mysql" ? ordered : args };
}

function skipQuoted(s: string, start: number, q: string): number {
  let i = start + 1;
  while (i < s.length) {
    if (s[i] === "\\" && q !== '"') { i += 2; continue; }
    if (s[i] === q) { if (s[i + 1] === q) { i += 2; continue; } return i + 1; }
    i++;
  }
  return s.length;
}

/** A statement and its arguments from the operation array, checked. */
export function sqlOperation(op: unknown[]): { sql: string; args: unknown[] } {
  const [sql, ...args] = op;
  if (typeof sql !== "string" || !sql.trim()) throw fail("INVALID_ARGUMENT", "operation[0] must be the SQL statement");
  for (const [i, a] of args.entries()) if (a !== null && typeof a === "object" && !(a instanceof Date)) {
    if (!Array.isArray(a) && Object.getPrototypeOf(a) !== Object.prototype) throw fail("INVALID_ARGUMENT", `operation[${i + 1}] is not a plain value`);
  }
  return { sql, args };
}

/** Database errors: the driver's message, as a 400 (never a crash or a stack). */
export function databaseError(e: unknown, what = "database error"): Error {
  const m = e instanceof Error ? e.message : String(e);
  return fail("EXTERNAL_DB", `${what}: ${m.replace(/\s+/g, " ").slice(0, 1000)}`);
}
