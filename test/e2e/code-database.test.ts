// External databases from code, black-box, against real PostgreSQL and MariaDB
// (scripts/test-databases.sh): ClearBlade.Database({externalDBName}) query, exec, transaction with
// statement, performOperation(Async), and ClearBladeAsync.Database; arguments go apart from the
// statement; a transaction is all or none; Database() without a name reaches the system's own
// collections only (code-sql.test.ts); rights, another system's connections, wrong types, huge arguments.
import t from "tap";
import { J, ok, refused, run, settleAs, userWith } from "./code-run.ts";
import { canConnect, devWithSystem, must, needs, startOutpost, uniq } from "./harness.ts";

const PG = new URL(process.env.OUTPOST_TEST_PG ?? "postgres://outpost:outpost-test-pw@127.0.0.1:5432/outpost_test");
const MY = new URL(process.env.OUTPOST_TEST_MYSQL ?? "mysql://outpost:outpost-test-pw@127.0.0.1:3306/outpost_test");
const creds = (u: URL) => ({ user: decodeURIComponent(u.username), password: decodeURIComponent(u.password), address: u.hostname, port: u.port, dbname: u.pathname.slice(1) });

const servers = await needs(`PostgreSQL (${PG.host}) and MariaDB (${MY.host})`, Promise.all([canConnect(Number(PG.port), PG.hostname), canConnect(Number(MY.port), MY.hostname)]).then((x) => x.every(Boolean)));
const o = await startOutpost();
t.teardown(() => o.stop());
const s = await devWithSystem(o, "cdb-a");
const s2 = await devWithSystem(o, "cdb-b");

const PGDB = uniq("pg"), MYDB = uniq("my");
/** A table of its own per database, dropped at the end. */
const table = (db: string) => `${uniq("codedb")}_${db.slice(0, 2)}`.toLowerCase();
const tables: [string, string][] = [];
t.teardown(async () => {
  for (const [db, tbl] of tables) await s.dev.post(`/api/v/4/external-db/${s.systemKey}/${db}/data`, { operation: [`DROP TABLE IF EXISTS ${tbl}`] }).catch(() => {});
});

t.before(async () => {
  if (servers.skip) return;
  await must(s.dev.post(`/api/v/4/external-db/${s.systemKey}`, { name: PGDB, db_type: "postgres", credentials: creds(PG) }), "postgres connection");
  await must(s.dev.post(`/api/v/4/external-db/${s.systemKey}`, { name: MYDB, db_type: "mysql", credentials: creds(MY) }), "mysql connection");
});

t.test("classic Database: exec, query with arguments, performOperation(Async), on PostgreSQL and MariaDB", servers, async (t) => {
  for (const db of [PGDB, MYDB]) {
    const tbl = table(db);
    tables.push([db, tbl]);
    const out = ok(t, await run(s, `var db = ClearBlade.Database({ externalDBName: ${J(db)} });
      db.exec("CREATE TABLE ${tbl} (id INT PRIMARY KEY, name VARCHAR(80), v INT)", function (err, made) {
        if (err) return done(err, made);
        db.exec("INSERT INTO ${tbl} (id, name, v) VALUES ($1, $2, $3), ($4, $5, $6)", [1, "Bob", 10, 2, "x'); DROP TABLE ${tbl}; --", 20], function (err, ins) {
          if (err) return done(err, ins);
          db.query("SELECT id, name FROM ${tbl} WHERE v >= $1 ORDER BY id", 10, function (err, rows) {
            if (err) return done(err, rows);
            db.performOperation(function (err, p) {
              if (err) return done(err, p);
              db.performOperationAsync(function (err, a) { resp.success({ made: made, ins: ins, rows: rows, p: p, a: a }); }, "UPDATE ${tbl} SET v = v + 1");
            }, "SELECT name FROM ${tbl} WHERE name = $1", "Bob");
          });
        });
      });`), `${db}: classic calls`);
    t.equal(out.made, null, `${db}: exec answers nothing (as ClearBlade's)`);
    t.equal(out.ins, null);
    t.same(out.rows, [{ id: 1, name: "Bob" }, { id: 2, name: `x'); DROP TABLE ${tbl}; --` }], `${db}: rows; an argument is a value, never SQL`);
    t.same(out.p, [{ name: "Bob" }], `${db}: performOperation with an argument`);
    t.equal(out.a, "Success", `${db}: performOperationAsync answers "Success"`);
    const v = ok(t, await run(s, `ClearBlade.Database({ externalDBName: ${J(db)} }).query("SELECT v FROM ${tbl} ORDER BY id", done);`), "the update ran");
    t.same(v, [{ v: 11 }, { v: 21 }], `${db}: performOperationAsync's statement ran`);
  }
});

t.test("ClearBladeAsync.Database: variadic arguments, exec's count, transactions all or none", servers, async (t) => {
  for (const db of [PGDB, MYDB]) {
    const tbl = table(db);
    tables.push([db, tbl]);
    const out = ok(t, await run(s, `var db = ClearBladeAsync.Database({ externalDBName: ${J(db)} });
      settle(db.exec("CREATE TABLE ${tbl} (id INT PRIMARY KEY, v INT)")
        .then(function () { return db.exec("INSERT INTO ${tbl} (id, v) VALUES ($1, $2), ($3, $4)", 1, 5, 2, 6); })
        .then(function (ins) {
          return db.transaction([db.statement("UPDATE ${tbl} SET v = $1 WHERE id = $2", 50, 1), db.statement("INSERT INTO ${tbl} (id, v) VALUES ($1, $2)", 3, 7)])
            .then(function (tx) {
              // the second statement collides on the key: the first must not stay
              return db.transaction([db.statement("UPDATE ${tbl} SET v = 999 WHERE id = 2"), db.statement("INSERT INTO ${tbl} (id, v) VALUES ($1, $2)", 1, 0)])
                .then(function () { return "committed?"; }, function (e) { return e.error.detail; })
                .then(function (failed) { return db.query("SELECT id, v FROM ${tbl} ORDER BY id").then(function (rows) { return { ins: ins, tx: tx === undefined ? "(undefined)" : tx, failed: failed, rows: rows }; }); });
            });
        }));`), `${db}: async calls`);
    t.same(out.ins, { count: 2 }, `${db}: exec resolves {count}`);
    t.equal(out.tx, "(undefined)", `${db}: a transaction resolves empty`);
    t.match(out.failed, /the transaction was rolled back/, `${db}: a failing statement fails the transaction`);
    t.same(out.rows, [{ id: 1, v: 50 }, { id: 2, v: 6 }, { id: 3, v: 7 }], `${db}: the first committed whole, the second not at all`);
  }
  // the classic transaction, with ClearBlade's statement helper
  const tbl = tables[tables.length - 2]![1];
  const c = ok(t, await run(s, `var db = ClearBlade.Database({ externalDBName: ${J(PGDB)} });
    db.transaction([db.statement("UPDATE ${tbl} SET v = v + $1", 1)], function (err, d) {
      if (err) return done(err, d);
      db.query("SELECT sum(v)::int AS total FROM ${tbl}", function (err, rows) { resp.success({ d: d, rows: rows }); });
    });`), "classic transaction");
  t.same(c, { d: null, rows: [{ total: 66 }] });
});

t.test("Database() without externalDBName: the system's collections, never the platform's own tables", async (t) => {
  refused(t, await run(s, `ClearBlade.Database().query("SELECT * FROM users", done);`), /collection .users. does not exist/, 404, "classic");
  refused(t, await run(s, settleAs(`ClearBladeAsync.Database().exec("DELETE FROM systems")`)), /collection .systems. does not exist/, 404, "async");
  refused(t, await run(s, settleAs(`ClearBladeAsync.Database().performOperation("SELECT 1")`)), /needs Database\(\{externalDBName/, 400, "performOperation");
  refused(t, await run(s, settleAs(`ClearBladeAsync.Database({}).transaction([["DELETE FROM systems"]])`)), /collection .systems. does not exist/, 404, "a transaction with an empty options object: the system's collections too");
  refused(t, await run(s, `ClearBlade.Database({ externalDBName: 42 }).query("SELECT 1", done);`), /name of an external database/, 400, "a name that is not a string");
});

t.test("rights as the data route; another system's connections; unknown names", servers, async (t) => {
  const none = await userWith(s, {});
  refused(t, await run(s, `ClearBlade.Database({ externalDBName: ${J(PGDB)} }).query("SELECT 1 AS one", done);`, none.client), /use external database/, 401, "a user without the permission");
  const reader = await userWith(s, { externaldatabases: [{ itemInfo: { name: PGDB }, permissions: 1 }] });
  t.same(ok(t, await run(s, `ClearBlade.Database({ externalDBName: ${J(PGDB)} }).query("SELECT 1 AS one", done);`, reader.client), "with it"), [{ one: 1 }]);
  refused(t, await run(s, settleAs(`ClearBladeAsync.Database({ externalDBName: ${J(MYDB)} }).query("SELECT 1")`), reader.client), /use external database/, 401, "only the connection granted");
  const all = await userWith(s, { allexternaldatabases: 1 });
  ok(t, await run(s, settleAs(`ClearBladeAsync.Database({ externalDBName: ${J(MYDB)} }).query("SELECT 1 AS one")`), all.client), "all external databases");
  refused(t, await run(s2, `ClearBlade.Database({ externalDBName: ${J(PGDB)} }).query("SELECT 1", done);`), /does not exist|not found/i, 404, "another system's connection name");
  refused(t, await run(s, `ClearBlade.Database({ externalDBName: "nope" }).query("SELECT 1", done);`), /does not exist|not found/i, 404, "an unknown name");
});

t.test("wrong types and huge arguments are refused before the database", servers, async (t) => {
  const db = `ClearBladeAsync.Database({ externalDBName: ${J(PGDB)} })`;
  for (const [code, re] of [
    [settleAs(`${db}.query(42)`), /SQL statement \(a string\)/],
    [settleAs(`${db}.query()`), /the statement is required/],
    [settleAs(`${db}.query("SELECT $1::int")`), /\$1 has no argument/],
    [settleAs(`${db}.query("SELECT 1", 1)`), /1 argument\(s\) given, but the statement uses 0/],
    [settleAs(`${db}.query.apply(null, ["SELECT 1"].concat(new Array(1001).fill(1)))`), /at most 1000 arguments/],
    [settleAs(`${db}.query("SELECT '" + "x".repeat(1000001) + "'")`), /at most 1000000 characters/],
    [settleAs(`${db}.transaction("BEGIN")`), /a list of 1 to 1000 statements/],
    [settleAs(`${db}.transaction([])`), /a list of 1 to 1000 statements/],
    [settleAs(`${db}.transaction(new Array(1001).fill(["SELECT 1"]))`), /a list of 1 to 1000 statements/],
    [settleAs(`${db}.transaction([42])`), /statement 0/],
    [settleAs(`${db}.query("SELEC oops")`), /database error/],
  ] as [string, RegExp][]) refused(t, await run(s, code), re, 400, code.slice(0, 100));
  // a transaction needs a SQL database
  const mongo = uniq("mongo");
  await must(s.dev.post(`/api/v/4/external-db/${s.systemKey}`, { name: mongo, db_type: "mongodb", credentials: { ...creds(PG), port: "1" } }), "mongodb connection");
  refused(t, await run(s, settleAs(`ClearBladeAsync.Database({ externalDBName: ${J(mongo)} }).transaction([["db.x.find({})"]])`)), /transactions need a SQL database/, 400, "a transaction on MongoDB");
});
