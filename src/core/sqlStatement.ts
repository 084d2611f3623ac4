// Raw SQL from code (ClearBlade.Database() without a name) on a system's own collections. The
// statement is parsed (node-sql-parser, PostgreSQL dialect) and its tree allow-listed: one SELECT,
// INSERT, UPDATE or DELETE; tables only by name, each a collection of the caller's system or a
// CTE's own name; functions from a short list both engines have; any node kind not known here
// refuses the statement. SQL is then written again from the tree, never from the caller's text:
// every table as its physical one (aliased to the name the caller wrote, so qualified columns and
// the engine's messages keep the caller's names), every identifier quoted, $n as ?n.
// A statement's cost stays linear in the rows of the collections it reads: SQL runs on the node's
// shared engine (on libSQL, in the main thread), where a join or a correlated subquery could hold
// every tenant for as long as a quadratic plan takes. So a SELECT reads at most one FROM item, and
// a subquery inside an expression reads no table (a list of values or $n instead).
import type { Parser } from "node-sql-parser/build/postgresql";
import { LruMap } from "./cache.ts";
import { ApiError, ErrorKinds } from "./errors.ts";

export type StatementKind = "select" | "insert" | "update" | "delete";

/** A statement checked and ready to be written for a system's tables. */
export interface CheckedStatement {
  kind: StatementKind;
  /** the collection an INSERT, UPDATE or DELETE writes (null for a SELECT) */
  target: string | null;
  /** the collections it reads (a write's target only when it also reads it in a subquery) */
  reads: Set<string>;
  /** the highest $n it uses */
  params: number;
  /** the SQL for the engines, given each collection's physical table (already quoted) and, for
   *  an INSERT without item_id, the item ids of its rows (newId: one more) */
  write(table: (name: string) => string, newId: () => string): string;
  /** an INSERT's columns, to be checked against the target's */
  columns: string[];
}

/** Plain scalar and aggregate functions both engines have alike. */
const FUNCTIONS = new Set(["lower", "upper", "length", "abs", "coalesce", "nullif", "round", "trim", "ltrim", "rtrim", "replace", "substr"]);
const AGGREGATES = new Set(["COUNT", "SUM", "AVG", "MIN", "MAX"]);
const BINARY = new Set(["=", "<>", "!=", "<", "<=", ">", ">=", "AND", "OR", "+", "-", "*", "/", "%", "||", "LIKE", "NOT LIKE", "IN", "NOT IN", "IS", "IS NOT", "BETWEEN", "NOT BETWEEN"]);
const UNARY = new Set(["NOT", "-", "+"]);
/** Casts both engines read alike (INT as INTEGER). */
const CASTS = new Map([["TEXT", "TEXT"], ["INTEGER", "INTEGER"], ["INT", "INTEGER"], ["BIGINT", "BIGINT"], ["REAL", "REAL"]]);
/** Columns of the engines and of edge sync no statement may name (reading or writing them). */
const HIDDEN_COLUMNS = new Set(["_hlc", "rowid", "_rowid_", "oid", "ctid", "xmin", "xmax", "cmin", "cmax", "tableoid"]);
const STATEMENT_MAX_CHARS = 100_000, DEPTH_MAX = 64;

/** The keys each expression kind may carry (see only()). */
const EXPRESSION_KEYS: Record<string, string[]> = {
  number: ["type", "value"], single_quote_string: ["type", "value"], bool: ["type", "value"], null: ["type", "value"],
  var: ["type", "name", "members", "quoted", "prefix"], column_ref: ["type", "table", "column"], star: ["type", "value"],
  expr_list: ["type", "value", "parentheses"], binary_expr: ["type", "operator", "left", "right", "parentheses"],
  unary_expr: ["type", "operator", "expr", "parentheses"], case: ["type", "expr", "args", "parentheses"],
  cast: ["type", "keyword", "expr", "symbol", "target", "parentheses"], aggr_func: ["type", "name", "args"],
  function: ["type", "name", "args"],
};

const refused = (detail: string) => new ApiError({ ...ErrorKinds.BAD_QUERY }, `SQL not allowed: ${detail}`);
const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

type Node = Record<string, any>;

/** Only these keys may carry a value in a node of kind `what` (a key the parser adds for a
 *  construct not written here refuses the statement rather than being dropped). */
function only(n: Node, keys: string[], what: string) {
  for (const [k, v] of Object.entries(n)) {
    if (v === null || v === undefined || keys.includes(k)) continue;
    if (Array.isArray(v) && v.length === 0) continue;
    if (typeof v === "object" && !Array.isArray(v) && Object.values(v).every((x) => x === null || x === undefined || (Array.isArray(x) && x.length === 0))) continue;
    throw refused(`${what} with ${k} is not supported`);
  }
}

class Writer {
  readonly reads = new Set<string>();
  target: string | null = null;
  params = 0;
  private depth = 0;
  /** subqueries inside expressions being written (they may read no table: see the head) */
  private inExpression = 0;
  /** table name → physical table; set when written */
  table: (name: string) => string = () => { throw new Error("no tables yet"); };

  constructor(private readonly checkOnly: boolean, private readonly newId: () => string = () => "00000000-0000-0000-0000-000000000000") {}

  private deeper<T>(f: () => T): T {
    if (++this.depth > DEPTH_MAX) throw refused("nested too deep");
    try { return f(); } finally { this.depth--; }
  }

  ident(v: unknown, what: string): string {
    const name = typeof v === "string" ? v : v && typeof v === "object" && ((v as Node).type === "default" || (v as Node).type === "double_quote_string") ? (v as Node).value : undefined;
    if (typeof name !== "string" || name === "" || name.length > 128) throw refused(`a ${what} name is expected`);
    return name;
  }

  column(name: string): string {
    if (HIDDEN_COLUMNS.has(name.toLowerCase())) throw refused(`column '${name}' is not a collection column`);
    return quote(name);
  }

  /** A table reference: a CTE in scope stays its name, anything else must be a collection. */
  tableRef(t: Node, ctes: Set<string>, read: boolean): string {
    if (t.db || t.schema) throw refused("tables are named without a schema: a collection of this system");
    if (t.expr) {
      only(t, ["expr", "as"], "a subquery in FROM");
      if (!t.expr.ast || !t.as) throw refused("a subquery in FROM needs an alias");
      return `(${this.select(t.expr.ast, ctes)}) AS ${quote(this.ident(t.as, "alias"))}`;
    }
    const name = this.ident(t.table, "table");
    if (ctes.has(name)) return t.as ? `${quote(name)} AS ${quote(this.ident(t.as, "alias"))}` : quote(name);
    if (read) this.reads.add(name);
    const alias = t.as ? this.ident(t.as, "alias") : name;
    return `${this.checkOnly ? quote(name) : this.table(name)} AS ${quote(alias)}`;
  }

  from(list: Node[], ctes: Set<string>): string {
    if (this.inExpression > 0) throw refused("a subquery inside an expression reads no collection: give the values as a list or as parameters");
    if (list.length !== 1 || list[0]!.join) throw refused("a SELECT reads one collection: joins are not supported (run one statement per collection)");
    only(list[0]!, ["db", "table", "as", "expr"], "a FROM item");
    return this.tableRef(list[0]!, ctes, true);
  }

  /** The CTEs of a WITH, each in scope for the ones after it and the statement (none recursive). */
  with(list: Node[] | null | undefined, outer: Set<string>): { sql: string; ctes: Set<string> } {
    if (!list || !list.length) return { sql: "", ctes: outer };
    const ctes = new Set(outer);
    const parts: string[] = [];
    for (const c of list) {
      only(c, ["name", "stmt", "columns"], "a CTE");
      if (c.recursive) throw refused("recursive CTEs are not supported");
      const name = this.ident(c.name, "CTE");
      const stmt = c.stmt?.ast ?? c.stmt;
      if (!stmt || stmt.type !== "select") throw refused("a CTE must be a SELECT");
      const cols = Array.isArray(c.columns) && c.columns.length ? ` (${c.columns.map((x: unknown) => this.column(this.ident(x, "column"))).join(", ")})` : "";
      // its own name is not in scope in its body: there it names a collection (PostgreSQL's reading)
      parts.push(`${quote(name)}${cols} AS (${this.select(stmt, ctes)})`);
      ctes.add(name);
    }
    return { sql: `WITH ${parts.join(", ")} `, ctes };
  }

  select(s: Node, outer: Set<string>): string {
    return this.deeper(() => {
      if (s.type !== "select") throw refused(`${String(s.type)} is not a SELECT`);
      only(s, ["type", "with", "distinct", "columns", "from", "where", "groupby", "having", "orderby", "limit", "_next", "set_op", "into", "options"], "a SELECT");
      if (s.options && s.options.length) throw refused("SELECT options are not supported");
      if (s.into && s.into.position) throw refused("SELECT INTO is not supported");
      const { sql: withSql, ctes } = this.with(s.with, outer);
      let out = `${withSql}SELECT `;
      if (s.distinct?.type) { if (s.distinct.type !== "DISTINCT") throw refused(`${s.distinct.type} is not supported`); out += "DISTINCT "; }
      if (!Array.isArray(s.columns) || !s.columns.length) throw refused("a SELECT needs columns");
      out += s.columns.map((c: Node) => {
        only(c, ["type", "expr", "as"], "a result column");
        return this.expr(c.expr, ctes) + (c.as ? ` AS ${quote(this.ident(c.as, "alias"))}` : "");
      }).join(", ");
      if (s.from && s.from.length) out += ` FROM ${this.from(s.from, ctes)}`;
      if (s.where) out += ` WHERE ${this.expr(s.where, ctes)}`;
      const group = s.groupby?.columns ?? (Array.isArray(s.groupby) ? s.groupby : null);
      if (s.groupby && !Array.isArray(s.groupby)) only(s.groupby, ["columns"], "GROUP BY");
      if (group && group.length) out += ` GROUP BY ${group.map((g: Node) => this.expr(g, ctes)).join(", ")}`;
      if (s.having) out += ` HAVING ${this.expr(s.having, ctes)}`;
      if (s.orderby && s.orderby.length) out += ` ORDER BY ${s.orderby.map((o: Node) => {
        only(o, ["expr", "type"], "ORDER BY");
        if (o.type && o.type !== "ASC" && o.type !== "DESC") throw refused(`ORDER BY ${o.type} is not supported`);
        return `${this.expr(o.expr, ctes)}${o.type === "DESC" ? " DESC" : ""}`;
      }).join(", ")}`;
      out += this.limit(s.limit, ctes);
      if (s._next) {
        const op = String(s.set_op ?? "").toUpperCase();
        if (!["UNION", "UNION ALL", "INTERSECT", "EXCEPT"].includes(op)) throw refused(`${op || "a set operation"} is not supported`);
        out += ` ${op} ${this.select(s._next, outer)}`;
      }
      return out;
    });
  }

  /** A SELECT inside an expression (scalar, IN, EXISTS). */
  private subquery(s: Node, ctes: Set<string>): string {
    this.inExpression++;
    try { return this.select(s, ctes); } finally { this.inExpression--; }
  }

  limit(l: Node | null | undefined, ctes: Set<string>): string {
    if (!l || !Array.isArray(l.value) || !l.value.length) return "";
    only(l, ["seperator", "value"], "LIMIT");
    const [a, b] = l.value.map((v: Node) => this.expr(v, ctes));
    if (l.seperator === "offset") return ` LIMIT ${a} OFFSET ${b}`;
    if (l.value.length !== 1) throw refused("LIMIT a, b is not supported: use LIMIT n OFFSET m");
    return ` LIMIT ${a}`;
  }

  expr(e: Node, ctes: Set<string>): string {
    return this.deeper(() => this.exprIn(e, ctes));
  }

  private exprIn(e: Node, ctes: Set<string>): string {
    if (!e || typeof e !== "object") throw refused("an expression is expected");
    if (e.ast) { only(e, ["ast", "tableList", "columnList", "parentheses"], "a subquery"); return `(${this.subquery(e.ast, ctes)})`; }
    only(e, EXPRESSION_KEYS[e.type] ?? [], String(e.type ?? "an expression"));
    switch (e.type) {
      case "number": {
        const v = String(e.value);
        if (!/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(v)) throw refused(`number ${v}`);
        return v;
      }
      case "single_quote_string": {
        const v = String(e.value);
        // the parser keeps a doubled quote as written; a lone one would end the literal
        if (!/^(?:[^']|'')*$/.test(v)) throw refused("a string literal");
        return `'${v}'`;
      }
      case "bool": return e.value ? "TRUE" : "FALSE";
      case "null": return "NULL";
      case "var": {
        if (e.prefix !== "$" || typeof e.name !== "number" || !Number.isInteger(e.name) || e.name < 1 || (e.members && e.members.length)) throw refused("parameters are $1, $2, ...");
        this.params = Math.max(this.params, e.name);
        return `?${e.name}`;
      }
      case "column_ref": {
        if (e.schema || e.db) throw refused("columns are named as column or table.column");
        const table = e.table ? `${quote(this.ident(e.table, "table"))}.` : "";
        if (e.column === "*") return `${table}*`;
        return table + this.column(this.ident(e.column?.expr ?? e.column, "column"));
      }
      case "star": return "*";
      case "expr_list": {
        const list = e.value as Node[];
        // IN (SELECT ...): the subquery's own parentheses, not a list holding one scalar subquery
        if (list.length === 1 && list[0]!.ast) return this.expr(list[0]!, ctes);
        return `(${list.map((v) => this.expr(v, ctes)).join(", ")})`;
      }
      case "binary_expr": {
        const op = String(e.operator).toUpperCase();
        if (!BINARY.has(op)) throw refused(`operator ${e.operator}`);
        if (op === "BETWEEN" || op === "NOT BETWEEN") {
          const r = e.right?.value;
          if (!Array.isArray(r) || r.length !== 2) throw refused("BETWEEN needs two bounds");
          return `(${this.expr(e.left, ctes)} ${op} ${this.expr(r[0], ctes)} AND ${this.expr(r[1], ctes)})`;
        }
        if ((op === "IN" || op === "NOT IN") && e.right?.type !== "expr_list") throw refused("IN needs a list or a subquery");
        return `(${this.expr(e.left, ctes)} ${op} ${this.expr(e.right, ctes)})`;
      }
      case "unary_expr": {
        const op = String(e.operator).toUpperCase();
        if (!UNARY.has(op)) throw refused(`operator ${e.operator}`);
        return `(${op}${op === "NOT" ? " " : ""}${this.expr(e.expr, ctes)})`;
      }
      case "case": {
        let out = "CASE";
        if (e.expr) out += ` ${this.expr(e.expr, ctes)}`;
        for (const a of e.args as Node[]) {
          if (a.type === "when") out += ` WHEN ${this.expr(a.cond, ctes)} THEN ${this.expr(a.result, ctes)}`;
          else if (a.type === "else") out += ` ELSE ${this.expr(a.result, ctes)}`;
          else throw refused("CASE");
        }
        return `${out} END`;
      }
      case "cast": {
        const t = e.target;
        const to = Array.isArray(t) && t.length === 1 && !t[0].length && !(t[0].suffix && t[0].suffix.length) ? CASTS.get(String(t[0].dataType).toUpperCase()) : undefined;
        if (!to) throw refused(`casts are to ${[...CASTS.keys()].join(", ")}`);
        return `CAST(${this.expr(e.expr, ctes)} AS ${to})`;
      }
      case "aggr_func": {
        const name = String(e.name).toUpperCase();
        if (!AGGREGATES.has(name)) throw refused(`function ${e.name}`);
        if (e.over || e.filter) throw refused("window functions and FILTER are not supported");
        const args = e.args ?? {};
        only(args, ["expr", "distinct"], "an aggregate's arguments");
        if (args.distinct && args.distinct !== "DISTINCT") throw refused(String(args.distinct));
        const arg = args.expr?.type === "star" ? (name === "COUNT" ? "*" : null) : this.expr(args.expr, ctes);
        if (arg === null) throw refused(`${name}(*)`);
        return `${name}(${args.distinct ? "DISTINCT " : ""}${arg})`;
      }
      case "function": {
        const parts = e.name?.name;
        only(e.name ?? {}, ["name"], "a function's name");
        if (!Array.isArray(parts) || parts.length !== 1 || parts[0].type !== "default") throw refused("functions are named without a schema");
        const name = String(parts[0].value).toLowerCase();
        if (e.over) throw refused("window functions are not supported");
        const list = e.args?.value ?? [];
        if (name === "exists") {
          if (list.length !== 1 || !list[0].ast) throw refused("EXISTS needs a subquery");
          return `EXISTS (${this.subquery(list[0].ast, ctes)})`;
        }
        if (!FUNCTIONS.has(name)) throw refused(`function ${parts[0].value} (allowed: ${[...FUNCTIONS, ...AGGREGATES].join(", ").toLowerCase()})`);
        return `${name}(${(list as Node[]).map((a) => this.expr(a, ctes)).join(", ")})`;
      }
      default: throw refused(`${String(e.type ?? "this expression")} is not supported`);
    }
  }

  insert(s: Node): string {
    only(s, ["type", "table", "columns", "values", "prefix", "partition"], "an INSERT");
    if (!Array.isArray(s.table) || s.table.length !== 1) throw refused("INSERT writes one collection");
    const t = s.table[0];
    only(t, ["db", "table"], "an INSERT's table");
    if (t.db) throw refused("tables are named without a schema: a collection of this system");
    this.target = this.ident(t.table, "table");
    if (!Array.isArray(s.columns) || !s.columns.length) throw refused("INSERT needs its column list");
    const cols: string[] = s.columns.map((c: unknown) => this.ident(c, "column"));
    // a row without item_id gets one, as an insert through the REST API does
    const addId = !cols.includes("item_id");
    let body: string;
    const v = s.values;
    if (v?.type === "values") {
      body = `VALUES ${(v.values as Node[]).map((row) => {
        if (row.type !== "expr_list" || row.value.length !== cols.length) throw refused("each VALUES row has one value per column");
        const values = (row.value as Node[]).map((v) => this.expr(v, new Set()));
        if (addId) values.push(`'${this.newId()}'`);
        return `(${values.join(", ")})`;
      }).join(", ")}`;
    } else if (v?.type === "select") {
      if (addId) throw refused("INSERT ... SELECT must give item_id (VALUES rows get one when they have none)");
      body = this.select(v, new Set());
    } else throw refused("INSERT takes VALUES or a SELECT");
    if (addId) cols.push("item_id");
    return `INSERT INTO ${this.checkOnly ? quote(this.target) : this.table(this.target)} (${cols.map((c: string) => this.column(c)).join(", ")}) ${body}`;
  }

  update(s: Node): string {
    only(s, ["type", "table", "set", "where", "with"], "an UPDATE");
    if (s.with && s.with.length) throw refused("WITH in an UPDATE is not supported");
    if (!Array.isArray(s.table) || s.table.length !== 1) throw refused("UPDATE writes one collection");
    this.target = this.ident(s.table[0].table, "table");
    only(s.table[0], ["db", "table", "as"], "an UPDATE's table");
    const ref = this.tableRef(s.table[0], new Set(), false);
    const set = (s.set as Node[]).map((a) => {
      if (a.table) throw refused("SET names columns without a table");
      const col = this.ident(a.column?.expr ?? a.column, "column");
      if (col === "item_id") throw refused("item_id cannot be changed");
      return `${this.column(col)} = ${this.expr(a.value, new Set())}`;
    });
    if (!set.length) throw refused("UPDATE needs SET");
    return `UPDATE ${ref} SET ${set.join(", ")}${s.where ? ` WHERE ${this.expr(s.where, new Set())}` : ""}`;
  }

  delete(s: Node): string {
    only(s, ["type", "table", "from", "where", "with"], "a DELETE");
    if (s.with && s.with.length) throw refused("WITH in a DELETE is not supported");
    if (!Array.isArray(s.from) || s.from.length !== 1 || s.from[0].join) throw refused("DELETE removes from one collection");
    only(s.from[0], ["db", "table", "as"], "a DELETE's table");
    this.target = this.ident(s.from[0].table, "table");
    const ref = this.tableRef(s.from[0], new Set(), false);
    return `DELETE FROM ${ref}${s.where ? ` WHERE ${this.expr(s.where, new Set())}` : ""}`;
  }

  statement(s: Node): string {
    switch (s.type) {
      case "select": return this.select(s, new Set());
      case "insert": return this.insert(s);
      case "update": return this.update(s);
      case "delete": return this.delete(s);
      default: throw refused(`${String(s.type).toUpperCase()} statements (one SELECT, INSERT, UPDATE or DELETE)`);
    }
  }
}

let parser: Parser | undefined;
/** Statements checked, by their text: a parse is most of a millisecond, and code runs the same
 *  statements again and again (a statement's check does not depend on the system). */
const checked = new LruMap<string, CheckedStatement>(500);

/** Loads the parser (about 400 KB of code: loaded with the first statement, not at start). */
export async function loadSqlParser(): Promise<void> {
  parser ??= new (await import("node-sql-parser/build/postgresql")).Parser();
}

/** Parses and checks one statement (see the head of this file); loadSqlParser() first. */
export function checkStatement(sql: unknown): CheckedStatement {
  if (!parser) throw new Error("loadSqlParser() first");
  if (typeof sql !== "string" || !sql.trim()) throw new ApiError("INVALID_ARGUMENT", "the SQL statement (a string) is required");
  if (sql.length > STATEMENT_MAX_CHARS) throw new ApiError("INVALID_ARGUMENT", `a statement has at most ${STATEMENT_MAX_CHARS} characters`);
  const hit = checked.get(sql);
  if (hit) return hit;
  let ast: Node | Node[];
  try { ast = parser.astify(sql, { database: "postgresql" }) as Node | Node[]; }
  catch { throw refused("the statement could not be parsed (PostgreSQL syntax: one SELECT, INSERT, UPDATE or DELETE, parameters $1, $2, ...)"); }
  if (Array.isArray(ast)) { if (ast.length !== 1) throw refused("one statement at a time"); ast = ast[0]!; }
  const root = ast as Node;
  // a first pass checks everything and gathers the names; the caller resolves them, then writes
  const check = new Writer(true);
  check.statement(root);
  const kind = root.type as StatementKind;
  const columns = kind === "insert" ? (root.columns as unknown[]).map((c) => check.ident(c, "column")) : [];
  const out: CheckedStatement = {
    kind, target: check.target, reads: check.reads, params: check.params, columns,
    write(table, newId) {
      const w = new Writer(false, newId);
      w.table = table;
      return w.statement(root);
    },
  };
  // short statements only: a long one is most likely made for one use (values spliced in)
  if (sql.length <= 2000) checked.set(sql, out);
  return out;
}
