// The query object ClearBlade clients send: FILTERS / SORT / PAGESIZE / PAGENUM /
// SELECTCOLUMNS, parsed once and compiled to parameterised SQL against a known set of columns.
// Collections, users, devices, edges, roles and topics all go through here.
import { ApiError, ErrorKinds } from "./errors.ts";
import { type ColumnType, ident, toSql } from "./columns.ts";
import { type Dialect, sqlite } from "./dialect.ts";

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
  /** where the page starts: after this row (PAGEAFTER, from a NEXTPAGEURL) instead of at an offset */
  after?: Continuation;
}

/** A position in a sorted result: the sort values and the rowid of a row (the page ends with it). */
export interface Continuation { values: unknown[]; rowid: number }

export const DEFAULT_PAGE_SIZE = 100;
/** Largest page a request can ask for; only an explicit PAGESIZE 0 returns everything. */
export const MAX_PAGE_SIZE = 10_000;

const badQuery = (detail: string) => new ApiError("BAD_QUERY", detail);

/** Accepts a JSON string, a full query object, a bare FILTERS array, or nothing. `continuation`:
 *  the caller pages with PAGEAFTER (collections); elsewhere it is an unknown key. */
export function parseQuery(input: unknown, opts: { defaultPageSize?: number; continuation?: boolean } = {}): Query {
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
    if (!["FILTERS", "SORT", "PAGESIZE", "PAGENUM", "SELECTCOLUMNS", "GROUPBY", "PRIMARYKEY"].includes(k) && !(k === "PAGEAFTER" && opts.continuation))
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
  const after = o.PAGEAFTER == null ? undefined : parseContinuation(o.PAGEAFTER, sort.length);
  if (after && pageSize === 0) throw badQuery("PAGEAFTER continues a paged query: PAGESIZE must not be 0");
  return { filters, sort, pageSize, pageNum: pageSize === 0 ? 0 : pageNum, select, ...(after ? { after } : {}) };
}

/** PAGEAFTER: [sort value..., rowid], as a NEXTPAGEURL carries it. */
function parseContinuation(v: unknown, sortKeys: number): Continuation {
  const scalar = (x: unknown) => x === null || typeof x === "string" || typeof x === "boolean" || (typeof x === "number" && Number.isFinite(x));
  if (!Array.isArray(v) || v.length !== sortKeys + 1 || !Number.isSafeInteger(v[sortKeys]) || !v.slice(0, sortKeys).every(scalar))
    throw badQuery("PAGEAFTER is the position a NEXTPAGEURL gives (a value per SORT key, then a row number): send it back unchanged");
  return { values: v.slice(0, sortKeys), rowid: v[sortKeys] as number };
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
function resolve(columns: ColumnMap, field: string, d: Dialect): ColumnRef {
  const direct = Object.hasOwn(columns, field) ? columns[field] : undefined;
  if (direct) return direct;
  const arrow = field.indexOf("->>");
  if (arrow > 0) {
    const base = Object.hasOwn(columns, field.slice(0, arrow)) ? columns[field.slice(0, arrow)] : undefined;
    const key = field.slice(arrow + 3);
    if (base && base.type === "jsonb" && /^[A-Za-z0-9_]+$/.test(key))
      return { sql: d.jsonKey(base.sql, key), type: "jsonb", jsonKey: true };
  }
  throw new ApiError({ ...ErrorKinds.BAD_QUERY }, `unknown column '${field}'`);
}

/** The WHERE of a query without FILTERS: every row. */
export const EVERY_ROW_SQL = "1 = 1";

/** FILTERS as a WHERE clause of the engine `d` speaks (SQLite when not given). */
export function compileWhere(filters: Condition[][], columns: ColumnMap, d: Dialect = sqlite): CompiledWhere {
  if (filters.length === 0) return { sql: EVERY_ROW_SQL, args: [] };
  const args: unknown[] = [];
  const groups = filters.map((group) => group.map((c) => {
    const col = resolve(columns, c.field, d);
    if (c.op === "RE") {
      if (typeof c.value !== "string") throw badQuery(`RE on '${c.field}' needs a string pattern`);
      args.push(d.regexPattern(regexForEngine(c.value, c.field)));
      return d.regexp(`CAST(${col.sql} AS TEXT)`, "?");
    }
    if (c.value === null) {
      if (c.op === "EQ") return `${col.sql} IS NULL`;
      if (c.op === "NEQ") return `${col.sql} IS NOT NULL`;
      throw badQuery(`${c.op} on '${c.field}' cannot compare with null`);
    }
    const v = col.jsonKey ? d.jsonScalar(jsonScalar(c.value, c.field)) : filterValue(col.type, c.value, c.field);
    args.push(v);
    const expr = `${col.sql} ${OPERATORS[c.op]} ${col.jsonKey ? d.jsonParam : "?"}`;
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

/** A value compared with a key of a JSON document (the dialect binds it). */
function jsonScalar(v: unknown, field: string): string | number | boolean {
  if (typeof v === "boolean" || typeof v === "string" || typeof v === "number") return v;
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

/** SORT as an ORDER BY (NULLs first ascending, last descending, on both engines). */
export function compileOrder(sort: Query["sort"], columns: ColumnMap, fallback?: string, d: Dialect = sqlite): string {
  const parts = sort.map((s) => d.order(resolve(columns, s.field, d).sql, s.desc));
  if (fallback) parts.push(fallback);
  return parts.length ? ` ORDER BY ${parts.join(", ")}` : "";
}

/** The SQL expressions of the sort keys (to select them next to a page's rows). */
export const sortExpressions = (sort: Query["sort"], columns: ColumnMap, d: Dialect = sqlite): string[] => sort.map((s) => resolve(columns, s.field, d).sql);

export function compileLimit(q: Query): string {
  if (q.pageSize === 0) return "";
  return ` LIMIT ${q.pageSize} OFFSET ${(q.pageNum - 1) * q.pageSize}`;
}

/**
 * The rows after a continuation, in the order of `sort` then `rowid` ascending (compileOrder with
 * the fallback "rowid"), as conditions to AND with the query's WHERE: a page deep in a sorted
 * result then reads from its position in the index instead of counting its way there (OFFSET).
 * The first sort key bounds the condition so the planner can take an index range: NULLs sort
 * first ascending and last descending, and since a range holds values or NULLs but not both, the
 * rows may come in two parts, read in the order returned.
 */
export function continueAfter(sort: Query["sort"], columns: ColumnMap, after: Continuation, rowid = "rowid", d: Dialect = sqlite): CompiledWhere[] {
  const keys = sort.map((s, i) => ({ sql: resolve(columns, s.field, d).sql, desc: s.desc, v: bindable(after.values[i]) }));
  /** strictly after the position on keys i.. (key by key, exact with NULLs) */
  const rest = (i: number, args: unknown[]): string => {
    if (i === keys.length) { args.push(after.rowid); return `${rowid} > ?`; }
    const { sql, desc, v } = keys[i]!;
    let later: string, equal: string;
    if (v === null) { later = desc ? "1 = 0" : `${sql} IS NOT NULL`; equal = `${sql} IS NULL`; }
    else { args.push(v, v); later = desc ? `(${sql} < ? OR ${sql} IS NULL)` : `${sql} > ?`; equal = `${sql} = ?`; }
    return `(${later} OR (${equal} AND ${rest(i + 1, args)}))`;
  };
  if (!keys.length) return [{ sql: `${rowid} > ?`, args: [after.rowid] }];
  const { sql, desc, v } = keys[0]!;
  const args: unknown[] = [];
  if (v === null) {
    const nulls = { sql: `${sql} IS NULL AND ${rest(1, args)}`, args };
    return desc ? [nulls] : [nulls, { sql: `${sql} IS NOT NULL`, args: [] }];
  }
  const tail = rest(1, args);
  const values = { sql: `${sql} ${desc ? "<=" : ">="} ? AND (${sql} ${desc ? "<" : ">"} ? OR (${sql} = ? AND ${tail}))`, args: [v, v, v, ...args] };
  return desc ? [values, { sql: `${sql} IS NULL`, args: [] }] : [values];
}

const bindable = (v: unknown) => (typeof v === "boolean" ? (v ? 1 : 0) : v === undefined ? null : v);

/** Checks SELECTCOLUMNS against the known columns; returns the names to keep (null = all). */
export function selectedColumns(q: Query, columns: ColumnMap): string[] | null {
  if (!q.select) return null;
  for (const c of q.select) resolve(columns, c, sqlite);
  return q.select;
}

/** A column map for plain table columns. */
export function plainColumns(defs: Record<string, ColumnType>, prefix = ""): ColumnMap {
  const m: ColumnMap = {};
  for (const [name, type] of Object.entries(defs)) m[name] = { sql: prefix + ident(name), type };
  return m;
}

/** Re-serialises a query with another page number, for NEXTPAGEURL/PREVPAGEURL, and where that
 *  page starts when known (PAGEAFTER). */
export function serializeQuery(q: Query, pageNum: number, after: Continuation | null = null): string {
  const out: Record<string, unknown> = {
    FILTERS: q.filters.map((g) => g.map((c) => ({ [c.op]: [{ [c.field]: c.value }] }))),
    PAGESIZE: q.pageSize,
    PAGENUM: pageNum,
  };
  if (q.sort.length) out.SORT = q.sort.map((s) => ({ [s.desc ? "DESC" : "ASC"]: s.field }));
  if (q.select) out.SELECTCOLUMNS = q.select;
  if (after) out.PAGEAFTER = [...after.values, after.rowid];
  return JSON.stringify(out);
}

/** One text per parsed query: equal queries, however they were spelled, give equal texts (what
 *  compiled queries are cached by). */
export const canonicalQuery = (q: Query): string => {
  let text = canonicalTexts.get(q);
  if (text === undefined) canonicalTexts.set(q, (text = serializeQuery(q, q.pageNum, q.after ?? null)));
  return text;
};
/** A parsed query is not changed once made: its text is built once (a polled query reuses its
 *  parse, see the data routes). */
const canonicalTexts = new WeakMap<Query, string>();

/** What a fetch of a collection found: one page of rows, the rows the query matches in all, and
 *  whether a next page follows, starting after a row (`after`) or, when null, by its number. */
export interface FetchResult {
  rows: Record<string, unknown>[];
  total: number;
  more: boolean;
  after: Continuation | null;
}

/** ClearBlade's answer to a fetch: the page, and links to the pages around it. */
export interface FetchPage {
  DATA: Record<string, unknown>[];
  TOTAL: number;
  CURRENTPAGE: number;
  NEXTPAGEURL: string | null;
  PREVPAGEURL: string | null;
}

/** The answer to the fetch `q` asked at the path `base`, whose links repeat the query with the
 *  next and previous page numbers. */
export function fetchPage(base: string, q: Query, r: FetchResult): FetchPage {
  return {
    DATA: r.rows,
    TOTAL: r.total,
    CURRENTPAGE: q.pageNum,
    NEXTPAGEURL: q.pageSize && r.more ? pageUrl(base, q, q.pageNum + 1, r.after) : null,
    PREVPAGEURL: q.pageSize && q.pageNum > 1 ? pageUrl(base, q, q.pageNum - 1) : null,
  };
}

const pageUrl = (base: string, q: Query, page: number, after: Continuation | null = null) =>
  `${base}?query=${encodeURIComponent(serializeQuery(q, page, after))}`;

/** The rows of a short list held in memory (a system's triggers or timers) that a query selects:
 *  FILTERS, SORT and the page, over the fields named in `fields`. RE is refused here: a caller's
 *  pattern run by the JavaScript engine could take unbounded time. */
export function selectRows<T extends Record<string, unknown>>(rows: readonly T[], q: Query, fields: ReadonlySet<string>): T[] {
  const known = (f: string) => { if (!fields.has(f)) throw badQuery(`unknown field '${f}' (one of ${[...fields].join(", ")})`); return f; };
  for (const g of q.filters) for (const c of g) {
    known(c.field);
    if (c.op === "RE") throw badQuery(`RE is not supported on this list (filter '${c.field}' with EQ, NEQ, GT, GTE, LT or LTE)`);
    if (c.value !== null && !["string", "number", "boolean"].includes(typeof c.value)) throw badQuery(`'${c.field}' compares with a string, number, boolean or null`);
    if (c.value === null && c.op !== "EQ" && c.op !== "NEQ") throw badQuery(`${c.op} on '${c.field}' cannot compare with null`);
  }
  for (const s of q.sort) known(s.field);
  const holds = (r: T, c: Condition): boolean => {
    const v = r[c.field] ?? null;
    if (c.value === null || v === null) return c.op === "EQ" ? v === c.value : c.op === "NEQ" ? v !== c.value : false;
    const d = compareValues(v, c.value);
    switch (c.op) {
      case "EQ": return d === 0;
      case "NEQ": return d !== 0;
      case "GT": return d > 0;
      case "GTE": return d >= 0;
      case "LT": return d < 0;
      default: return d <= 0;
    }
  };
  let out = q.filters.length ? rows.filter((r) => q.filters.some((g) => g.every((c) => holds(r, c)))) : [...rows];
  if (q.sort.length) out.sort((a, b) => {
    for (const s of q.sort) {
      const x = a[s.field] ?? null, y = b[s.field] ?? null;
      // NULLs first ascending, last descending (as compileOrder)
      const d = x === null || y === null ? (x === y ? 0 : x === null ? -1 : 1) : compareValues(x, y);
      if (d !== 0) return s.desc ? -d : d;
    }
    return 0;
  });
  if (q.pageSize > 0) out = out.slice((q.pageNum - 1) * q.pageSize, q.pageNum * q.pageSize);
  return out;
}

/** Orders two scalars: numbers (and numeric text against a number) by value, the rest as text. */
function compareValues(a: unknown, b: unknown): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b);
  if ((typeof a === "number" || typeof b === "number") && Number.isFinite(Number(a)) && Number.isFinite(Number(b))) return Number(a) - Number(b);
  const x = String(a), y = String(b);
  return x < y ? -1 : x > y ? 1 : 0;
}
