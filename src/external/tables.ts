// A collection that is a database connection (a "connect"
// collection): the collection query (FILTERS / SORT / PAGE / SELECTCOLUMNS) and item writes as
// SQL on the connection's table, with `$n` arguments (each connector puts them in its dialect).
import { fail } from "../core/errors.ts";
import type { Query } from "../core/query.ts";
import type { DataResult, SqlDialect, TableOps } from "./connector.ts";

const IDENT_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function ident(d: SqlDialect, name: string): string {
  if (!IDENT_RE.test(name)) throw fail("BAD_QUERY", `'${name}' is not a plain column or table name`);
  return d === "mysql" ? `\`${name}\`` : d === "mssql" ? `[${name}]` : `"${name}"`;
}

/** A table name, optionally schema-qualified (`schema.table`). */
export function tableIdent(d: SqlDialect, name: string): string {
  const parts = name.split(".");
  if (parts.length > 2) throw fail("INVALID_ARGUMENT", `tablename '${name}' must be table or schema.table`);
  return parts.map((p) => ident(d, p)).join(".");
}

const OPS: Record<string, string> = { EQ: "=", NEQ: "<>", GT: ">", GTE: ">=", LT: "<", LTE: "<=" };

class Args {
  readonly list: unknown[] = [];
  add(v: unknown) { this.list.push(v); return `$${this.list.length}`; }
}

function where(d: SqlDialect, q: Query, a: Args): string {
  if (!q.filters.length) return "";
  const groups = q.filters.map((g) => g.map((c) => {
    const col = ident(d, c.field);
    if (c.value === null) {
      if (c.op === "EQ") return `${col} IS NULL`;
      if (c.op === "NEQ") return `${col} IS NOT NULL`;
      throw fail("BAD_QUERY", `${c.op} cannot compare with null`);
    }
    if (c.op === "RE") {
      if (d === "mssql") throw fail("BAD_QUERY", "SQL Server has no regular expressions: use EQ, NEQ, GT, GTE, LT, LTE");
      return `${col} ${d === "postgres" ? "~" : "REGEXP"} ${a.add(c.value)}`;
    }
    return `${col} ${OPS[c.op]} ${a.add(typeof c.value === "object" ? JSON.stringify(c.value) : c.value)}`;
  }).join(" AND "));
  return ` WHERE ${groups.map((g) => `(${g})`).join(" OR ")}`;
}

export function selectSql(d: SqlDialect, table: string, q: Query): { sql: string; args: unknown[] } {
  const a = new Args();
  const cols = q.select ? q.select.map((c) => ident(d, c)).join(", ") : "*";
  let sql = `SELECT ${cols} FROM ${tableIdent(d, table)}${where(d, q, a)}`;
  const order = q.sort.map((s) => `${ident(d, s.field)} ${s.desc ? "DESC" : "ASC"}`).join(", ");
  if (q.pageSize > 0) {
    const offset = (q.pageNum - 1) * q.pageSize;
    sql += d === "mssql"
      ? ` ORDER BY ${order || "(SELECT NULL)"} OFFSET ${offset} ROWS FETCH NEXT ${q.pageSize} ROWS ONLY`
      : `${order ? ` ORDER BY ${order}` : ""} LIMIT ${q.pageSize} OFFSET ${offset}`;
  } else if (order) sql += ` ORDER BY ${order}`;
  return { sql, args: a.list };
}

export function countSql(d: SqlDialect, table: string, q: Query): { sql: string; args: unknown[] } {
  const a = new Args();
  return { sql: `SELECT COUNT(*) AS n FROM ${tableIdent(d, table)}${where(d, q, a)}`, args: a.list };
}

export function insertSql(d: SqlDialect, table: string, row: Record<string, unknown>): { sql: string; args: unknown[] } {
  const cols = Object.keys(row);
  if (!cols.length) throw fail("INVALID_ARGUMENT", "an item needs at least one column value");
  const a = new Args();
  const values = cols.map((c) => a.add(jsonable(row[c])));
  return { sql: `INSERT INTO ${tableIdent(d, table)} (${cols.map((c) => ident(d, c)).join(", ")}) VALUES (${values.join(", ")})`, args: a.list };
}

export function updateSql(d: SqlDialect, table: string, q: Query, set: Record<string, unknown>): { sql: string; args: unknown[] } {
  const cols = Object.keys(set);
  if (!cols.length) throw fail("INVALID_ARGUMENT", "$set needs at least one column");
  const a = new Args();
  const assigns = cols.map((c) => `${ident(d, c)} = ${a.add(jsonable(set[c]))}`).join(", ");
  return { sql: `UPDATE ${tableIdent(d, table)} SET ${assigns}${where(d, q, a)}`, args: a.list };
}

export function deleteSql(d: SqlDialect, table: string, q: Query): { sql: string; args: unknown[] } {
  const a = new Args();
  return { sql: `DELETE FROM ${tableIdent(d, table)}${where(d, q, a)}`, args: a.list };
}

const jsonable = (v: unknown) => (v !== null && typeof v === "object" ? JSON.stringify(v) : v);

/** Table operations for a SQL connector, through its own `perform`. */
export function sqlTable(d: SqlDialect, perform: (op: unknown[], timeoutMs: number) => Promise<DataResult>): TableOps {
  const run = (q: { sql: string; args: unknown[] }, ms: number) => perform([q.sql, ...q.args], ms);
  return {
    fetch: async (t, q, ms) => (await run(selectSql(d, t, q), ms)).Data,
    count: async (t, q, ms) => Number(((await run(countSql(d, t, q), ms)).Data[0] as { n?: unknown } | undefined)?.n ?? 0),
    insert: async (t, items, ms) => { let n = 0; for (const it of items) n += (await run(insertSql(d, t, it), ms)).Total; return n; },
    update: async (t, q, set, ms) => (await run(updateSql(d, t, q, set), ms)).Total,
    delete: async (t, q, ms) => (await run(deleteSql(d, t, q), ms)).Total,
  };
}

/** The collection query as a MongoDB filter / CouchDB Mango selector (the same operators). */
export function documentFilter(q: Query): Record<string, unknown> {
  const op: Record<string, string> = { EQ: "$eq", NEQ: "$ne", GT: "$gt", GTE: "$gte", LT: "$lt", LTE: "$lte", RE: "$regex" };
  const groups = q.filters.map((g) => ({ $and: g.map((c) => {
    if (!/^[A-Za-z_][A-Za-z0-9_.]*$/.test(c.field)) throw fail("BAD_QUERY", `'${c.field}' is not a plain field name`);
    return { [c.field]: { [op[c.op]!]: c.value } };
  }) }));
  return groups.length === 0 ? {} : groups.length === 1 ? groups[0]! : { $or: groups };
}
