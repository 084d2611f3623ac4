// External databases from code: ClearBlade.Database({externalDBName}) (query, exec, transaction,
// statement, performOperation, performOperationAsync) and ClearBladeAsync.Database. Statements
// and their arguments go to the database apart ($1, $2... placeholders), never spliced together,
// through the external-databases domain with the rights of its data route. ClearBlade's
// Database() without a name is raw SQL on the platform's own database: Outpost gives code no such
// thing (a statement there could read or change any system's rows), and answers that a name is needed.
import { fail } from "../../core/errors.ts";
import type { HostContext, LibraryArea } from "./types.ts";

const js = String.raw`
  // a classic call's arguments after the statement: its parameters, then the callback; a single
  // array stands for the parameter list
  function paramsAndCallback(args, from) {
    var rest = Array.prototype.slice.call(args, from), cb = null;
    if (rest.length && typeof rest[rest.length - 1] === "function") cb = rest.pop();
    if (rest.length === 1 && Array.isArray(rest[0])) rest = rest[0];
    return { params: rest, cb: cb };
  }
  function statement(sql) { return { statement: sql, args: Array.prototype.slice.call(arguments, 1) }; }
  function statements(list) {
    if (!Array.isArray(list)) return list;
    return list.map(function (s) { return s && typeof s === "object" && !Array.isArray(s) ? [s.statement].concat(s.args || []) : s; });
  }
  function dbName(options) { return options && typeof options === "object" ? options.externalDBName : undefined; }

  ClearBlade.Database = function (options) {
    var db = dbName(options);
    return {
      query: function (sql) { var a = paramsAndCallback(arguments, 1); return classic("database.run", { db: db, kind: "query", operation: [sql].concat(a.params) }, a.cb); },
      exec: function (sql) {
        var a = paramsAndCallback(arguments, 1);
        return classic("database.run", { db: db, kind: "exec", operation: [sql].concat(a.params) }, function (err, data) { if (typeof a.cb === "function") a.cb(err, err ? data : null); });
      },
      statement: statement,
      transaction: function (list, cb) { return classic("database.transaction", { db: db, statements: statements(list) }, cb); },
      performOperation: function (cb) { return classic("database.run", { db: db, kind: "perform", operation: Array.prototype.slice.call(arguments, 1) }, cb); },
      performOperationAsync: function (cb) {
        return classic("database.run", { db: db, kind: "perform", operation: Array.prototype.slice.call(arguments, 1) }, function (err, data) { if (typeof cb === "function") cb(err, err ? data : "Success"); });
      },
    };
  };
  ClearBladeAsync.Database = function (options) {
    var db = dbName(options);
    return {
      query: function (sql) { return call("database.run", { db: db, kind: "query", operation: Array.prototype.slice.call(arguments) }); },
      exec: function (sql) { return call("database.run", { db: db, kind: "exec", operation: Array.prototype.slice.call(arguments) }); },
      performOperation: function () { return call("database.run", { db: db, kind: "perform", operation: Array.prototype.slice.call(arguments) }); },
      statement: statement,
      transaction: function (list) { return call("database.transaction", { db: db, statements: statements(list) }).then(function () {}); },
    };
  };
`;

/** The longest statement text, and the most arguments of one statement. */
const STATEMENT_MAX_CHARS = 1_000_000, ARGS_MAX = 1000;

/** The external database named in Database({externalDBName}). */
function databaseName(v: unknown): string {
  if (v === undefined || v === null || v === "")
    throw fail("INVALID_ARGUMENT", "Database() needs {externalDBName: <name>}: Outpost runs SQL from code on external databases only, not on the platform's own database (use Collection and Query for collections)");
  if (typeof v !== "string" || v.length > 128) throw fail("INVALID_ARGUMENT", "externalDBName must be the name of an external database connection");
  return v;
}

function operation(v: unknown, what: string): unknown[] {
  if (!Array.isArray(v) || v.length === 0) throw fail("INVALID_ARGUMENT", `${what}: the statement is required`);
  if (v.length - 1 > ARGS_MAX) throw fail("INVALID_ARGUMENT", `${what}: at most ${ARGS_MAX} arguments`);
  for (const a of v) if (typeof a === "string" && a.length > STATEMENT_MAX_CHARS) throw fail("INVALID_ARGUMENT", `${what}: a statement or argument has at most ${STATEMENT_MAX_CHARS} characters`);
  return v;
}

async function run(x: HostContext, a: Record<string, any>) {
  const name = databaseName(a.db);
  const kind = a.kind === "exec" ? "exec" : a.kind === "perform" ? "performOperation" : "query";
  const op = operation(a.operation, kind);
  if (kind !== "performOperation" && typeof op[0] !== "string") throw fail("INVALID_ARGUMENT", `${kind}: the first argument is the SQL statement (a string)`);
  const r = await x.e.externalDbs.data(x.p, x.systemKey, name, { operation: op });
  return kind === "exec" ? { count: r.Total } : r.Data;
}

export const database: LibraryArea = {
  js,
  ops: {
    "database.run": run,
    "database.transaction": async (x, a) => {
      const name = databaseName(a.db);
      const list = Array.isArray(a.statements) ? a.statements.map((s: unknown, i: number) => operation(s, `statement ${i}`)) : a.statements;
      await x.e.externalDbs.transaction(x.p, x.systemKey, name, list);
      return null;
    },
  },
};
