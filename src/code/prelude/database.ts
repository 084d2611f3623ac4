// External databases from code: ClearBlade.Database({externalDBName}) (query, exec, transaction,
// statement, performOperation, performOperationAsync) and ClearBladeAsync.Database. Statements
// and their arguments go to the database apart ($1, $2... placeholders), never spliced together,
// through the external-databases domain with the rights of its data route. Database() without a
// name runs query and exec on the system's own collections (code/library/database.ts).
import type { PreludeArea } from "./area.ts";

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

export const database: PreludeArea = { js: js, lazy: ["ClearBlade.Database", "ClearBladeAsync.Database"] };
