// The query object (wire reference §3.3, spec §4.12): FILTERS / SORT / PAGESIZE / PAGENUM /
// SELECTCOLUMNS, parsed once and compiled to parameterised SQL against a known set of columns.
// Collections, users, devices, edges, roles and topics all go through here.
import { ApiError, ErrorKinds } from "./errors.ts";
import { type ColumnType, ident, toSql } from "./columns.ts";

export const OPERATORS = { EQ: "=", NEQ: "!=", GT: ">", GTE: ">=", LT: "<", LTE: "<=", RE: "REGEXP" } as const;
export type Operator = keyof typeof OPERATORS;

export interface Condition { op: Operator; field: string; value: unknown }
export interface Query {
  /** OR of AND-groups */
  filters: Condition[][];
  sort: { field: string; desc: boolean }[];
  /** 0 = no paging (everything) */
  pageSize: number;
  pageNum: number;
  select: string[] | null;
}

export const DEFAULT_PAGE_SIZE = 100;
/** Largest page a request can ask for; only an explicit PAGESIZE 0 returns everything. */
export const MAX_PAGE_SIZE = 10_000;

const badQuery = (detail: string) => new ApiError("BAD_QUERY", detail);

/** Accepts a JSON string, a full query object, a bare FILTERS array, or nothing. */
export function parseQuery(input: unknown, opts: { defaultPageSize?: number } = {}): Query {
  let q: unknown = input;
  if (typeof q === "string") {
    if (q.trim() === "") q = undefined;
    else {
      try { q = JSON.parse(q); } catch { throw badQuery("query is not valid JSON"); }
    }
  }
  const def: Query = { filters: [], sort: [], pageSize: opts.defaultPageSize ?? DEFAULT_PAGE_SIZE, pageNum: 1, select: null };
  if (q === undefined || q === null) return def;
  if (Array.isArray(q)) return { ...def, filters: parseFilters(q) };
  if (typeof q !== "object") throw badQuery("query must be an object or a FILTERS array");
  const o = q as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!["FILTERS", "SORT", "PAGESIZE", "PAGENUM", "SELECTCOLUMNS", "GROUPBY", "PRIMARYKEY"].includes(k))
      throw badQuery(`unknown query key '${k}'`);
  }
  const filters = o.FILTERS == null ? [] : parseFilters(o.FILTERS);
  const sort = o.SORT == null ? [] : parseSort(o.SORT);
  const hasSize = o.PAGESIZE !== undefined && o.PAGESIZE !== null;
  const hasNum = o.PAGENUM !== undefined && o.PAGENUM !== null;
  const pageSize = hasSize ? int(o.PAGESIZE, "PAGESIZE") : def.pageSize;
  let pageNum = hasNum ? int(o.PAGENUM, "PAGENUM") : 1;
  if (pageSize < 0 || pageNum < 0) throw badQuery("PAGESIZE and PAGENUM must not be negative");
  if (pageSize > MAX_PAGE_SIZE) throw badQuery(`PAGESIZE is at most ${MAX_PAGE_SIZE} (use PAGESIZE 0 and PAGENUM 0 for everything)`);
  if (pageSize > 0 && pageNum === 0) pageNum = 1;
  // the offset must stay an exact integer for SQL (1e20 pages of 100 would be written 1e+22)
  if (pageSize > 0 && (pageNum - 1) * pageSize > Number.MAX_SAFE_INTEGER) throw badQuery("PAGENUM is too large for this PAGESIZE");
  let select: string[] | null = null;
  if (o.SELECTCOLUMNS != null) {
    if (!Array.isArray(o.SELECTCOLUMNS) || !o.SELECTCOLUMNS.every((c) => typeof c === "string"))
      throw badQuery("SELECTCOLUMNS must be an array of column names");
    select = o.SELECTCOLUMNS.length ? (o.SELECTCOLUMNS as string[]) : null;
  }
  return { filters, sort, pageSize, pageNum: pageSize === 0 ? 0 : pageNum, select };
}

function int(v: unknown, name: string): number {
  const n = typeof v === "string" && /^-?\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== "number" || !Number.isSafeInteger(n)) throw badQuery(`${name} must be an integer (at most ${Number.MAX_SAFE_INTEGER})`);
  return n;
}

function parseFilters(f: unknown): Condition[][] {
  if (!Array.isArray(f)) throw badQuery("FILTERS must be an array of arrays");
  return f.map((group) => {
    // Some clients send a single group without the outer array: [{EQ:[...]}]
    const items = Array.isArray(group) ? group : [group];
    const conds: Condition[] = [];
    for (const item of items) {
      if (!item || typeof item !== "object" || Array.isArray(item)) throw badQuery("each filter must be an object like {\"EQ\":[{\"col\":value}]}");
      for (const [op, list] of Object.entries(item as Record<string, unknown>)) {
        if (!Object.hasOwn(OPERATORS, op)) throw badQuery(`unknown operator '${op}' (one of ${Object.keys(OPERATORS).join(", ")})`);
        const pairs = Array.isArray(list) ? list : [list];
        for (const pair of pairs) {
          if (!pair || typeof pair !== "object" || Array.isArray(pair)) throw badQuery(`operator ${op} takes objects like {"col":value}`);
          for (const [field, value] of Object.entries(pair as Record<string, unknown>)) {
            conds.push({ op: op as Operator, field, value });
          }
        }
      }
    }
    return conds;
  }).filter((g) => g.length > 0);
}

function parseSort(s: unknown): Query["sort"] {
  if (!Array.isArray(s)) throw badQuery("SORT must be an array like [{\"ASC\":\"col\"}]");
  const out: Query["sort"] = [];
  for (const item of s) {
    if (!item || typeof item !== "object") throw badQuery("SORT entries must be objects like {\"DESC\":\"col\"}");
    for (const [dir, field] of Object.entries(item as Record<string, unknown>)) {
      if (dir !== "ASC" && dir !== "DESC") throw badQuery(`SORT direction must be ASC or DESC, got '${dir}'`);
      if (typeof field !== "string") throw badQuery("SORT field must be a column name");
      out.push({ field, desc: dir === "DESC" });
    }
  }
  return out;
}

/** What the compiler knows about a queryable column: the SQL expression that reads it and its type. */
export interface ColumnRef { sql: string; type: ColumnType; /** a key inside a jsonb column: compared as JSON scalars */ jsonKey?: boolean }
export type ColumnMap = Record<string, ColumnRef>;

export interface CompiledWhere { sql: string; args: unknown[] }

/** Looks up a column; `col->>key` reads a key of a jsonb column. */
function resolve(columns: ColumnMap, field: string): ColumnRef {
  const direct = Object.hasOwn(columns, field) ? columns[field] : undefined;
  if (direct) return direct;
  const arrow = field.indexOf("->>");
  if (arrow > 0) {
    const base = Object.hasOwn(columns, field.slice(0, arrow)) ? columns[field.slice(0, arrow)] : undefined;
    const key = field.slice(arrow + 3);
    if (base && base.type === "jsonb" && /^[A-Za-z0-9_]+$/.test(key))
      return { sql: `json_extract(${base.sql}, '$.${key}')`, type: "jsonb", jsonKey: true };
  }
  throw new ApiError({ ...ErrorKinds.BAD_QUERY }, `unknown column '${field}'`);
}

export function compileWhere(filters: Condition[][], columns: ColumnMap): CompiledWhere {
  if (filters.length === 0) return { sql: "1", args: [] };
  const args: unknown[] = [];
  const groups = filters.map((group) => group.map((c) => {
    const col = resolve(columns, c.field);
    if (c.op === "RE") {
      if (typeof c.value !== "string") throw badQuery(`RE on '${c.field}' needs a string pattern`);
      args.push(regexForEngine(c.value, c.field));
      return `CAST(${col.sql} AS TEXT) REGEXP ?`;
    }
    if (c.value === null) {
      if (c.op === "EQ") return `${col.sql} IS NULL`;
      if (c.op === "NEQ") return `${col.sql} IS NOT NULL`;
      throw badQuery(`${c.op} on '${c.field}' cannot compare with null`);
    }
    const v = col.jsonKey ? jsonScalar(c.value, c.field) : filterValue(col.type, c.value, c.field);
    args.push(v);
    const expr = `${col.sql} ${OPERATORS[c.op]} ?`;
    // NEQ also matches rows where the column is empty, as users expect from "not equal".
    return c.op === "NEQ" ? `(${expr} OR ${col.sql} IS NULL)` : expr;
  }).join(" AND "));
  return { sql: groups.length === 1 ? groups[0]! : groups.map((g) => `(${g})`).join(" OR "), args };
}

/**
 * Checks an RE pattern against what libSQL's REGEXP engine (SQLite's regexp extension) does
 * the same way as the usual regex syntax: . [] [^] * + ? {m,n} () | ^ $ and the escapes
 * \d \w \s \b (and their capitals). Constructs that engine lacks or reads differently
 * (groups starting "(?", lazy quantifiers, back-references) are a 400 rather than a silent
 * mismatch. Top-level alternatives are parenthesised, because the engine would otherwise bind
 * ^ and $ to the whole alternation ("^a|b$").
 */
export function regexForEngine(pattern: string, field: string): string {
  const bad = (why: string) => badQuery(`RE on '${field}': ${why}`);
  try { new RegExp(pattern); } catch { throw bad("invalid regular expression"); }
  const branches: string[] = [];
  let depth = 0, inClass = false, start = 0;
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === "\\") {
      const next = pattern[i + 1] ?? "";
      if (/[1-9kpPAzZG]/.test(next)) throw bad(`the escape \\${next} is not supported`);
      i++;
      continue;
    }
    if (inClass) { if (ch === "]") inClass = false; continue; }
    if (ch === "[") { inClass = true; if (pattern[i + 1] === "]") i++; continue; }
    if (ch === "(") {
      if (pattern[i + 1] === "?") throw bad("groups starting with (? (non-capturing, look-around, flags) are not supported");
      depth++;
    } else if (ch === ")") depth--;
    else if ((ch === "*" || ch === "+" || ch === "?" || ch === "}") && pattern[i + 1] === "?" && !(ch === "?" && pattern[i - 1] === "(")) {
      throw bad("lazy quantifiers (*? +? ?? {m,n}?) are not supported");
    } else if (ch === "|" && depth === 0) { branches.push(pattern.slice(start, i)); start = i + 1; }
  }
  if (!branches.length) return pattern;
  branches.push(pattern.slice(start));
  return branches.map((b) => `(${b})`).join("|");
}

/** A value compared with json_extract(): JSON scalars as SQLite returns them (true/false as 1/0). */
function jsonScalar(v: unknown, field: string): unknown {
  if (typeof v === "boolean") return v ? 1 : 0;
  if (typeof v === "string" || typeof v === "number") return v;
  throw badQuery(`'${field}' compares with a string, number or boolean`);
}

function filterValue(type: ColumnType, v: unknown, field: string): unknown {
  // jsonb columns compare on their JSON text
  if (type === "jsonb") return typeof v === "string" ? v : JSON.stringify(v);
  try { return toSql(type, v, field); } catch (e) {
    if (e instanceof ApiError) throw new ApiError("BAD_QUERY", e.detail);
    throw e;
  }
}

export function compileOrder(sort: Query["sort"], columns: ColumnMap, fallback?: string): string {
  const parts = sort.map((s) => `${resolve(columns, s.field).sql} ${s.desc ? "DESC" : "ASC"}`);
  if (fallback) parts.push(fallback);
  return parts.length ? ` ORDER BY ${parts.join(", ")}` : "";
}

export function compileLimit(q: Query): string {
  if (q.pageSize === 0) return "";
  return ` LIMIT ${q.pageSize} OFFSET ${(q.pageNum - 1) * q.pageSize}`;
}

/** Checks SELECTCOLUMNS against the known columns; returns the names to keep (null = all). */
export function selectedColumns(q: Query, columns: ColumnMap): string[] | null {
  if (!q.select) return null;
  for (const c of q.select) resolve(columns, c);
  return q.select;
}

/** A column map for plain table columns. */
export function plainColumns(defs: Record<string, ColumnType>, prefix = ""): ColumnMap {
  const m: ColumnMap = {};
  for (const [name, type] of Object.entries(defs)) m[name] = { sql: prefix + ident(name), type };
  return m;
}

/** Re-serialises a query with another page number, for NEXTPAGEURL/PREVPAGEURL. */
export function serializeQuery(q: Query, pageNum: number): string {
  const out: Record<string, unknown> = {
    FILTERS: q.filters.map((g) => g.map((c) => ({ [c.op]: [{ [c.field]: c.value }] }))),
    PAGESIZE: q.pageSize,
    PAGENUM: pageNum,
  };
  if (q.sort.length) out.SORT = q.sort.map((s) => ({ [s.desc ? "DESC" : "ASC"]: s.field }));
  if (q.select) out.SELECTCOLUMNS = q.select;
  return JSON.stringify(out);
}
