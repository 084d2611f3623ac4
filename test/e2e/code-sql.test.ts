// SQL from code on the system's own collections, black-box: ClearBlade.Database() and
// ClearBladeAsync.Database() without a name run one statement with the table named as the
// collection and $1, $2... parameters (one by one or in an array). Statements reach only the
// caller's collections, with the REST API's rights; writes are seen by REST fetches (cached
// results dropped), get item_ids, and reach an edge; errors reach the callback or promise.
import t from "tap";
import { J, ok, refused, run, settleAs, userWith } from "./code-run.ts";
import { collectionWith, devWithSystem, must, qs, request, startOutpost, uniq, waitFor, Client } from "./harness.ts";

const started: { stop(): Promise<unknown> }[] = [];
t.teardown(async () => { for (const o of started.reverse()) await o.stop().catch(() => {}); });
const o = await startOutpost({ args: ["--sync-ping-ms", "500"] });
started.push(o);
const s = await devWithSystem(o, "sql-a");
const s2 = await devWithSystem(o, "sql-b");

const assets = await collectionWith(s, [["type", "string"], ["n", "int"]], uniq("assets"));
const history = await collectionWith(s, [["asset", "string"]], uniq("_hist"));
const foreign = await collectionWith(s2, [["secret", "string"]], uniq("foreign"));
await must(s2.dev.post(`/api/v/1/data/${foreign.id}`, { secret: "other system" }), "a row of the other system");

const fetchAll = async (id: string, c = s.dev, sort: unknown[] = []) => (await must(c.get(`/api/v/1/data/${id}?query=${qs({ PAGESIZE: 0, SORT: sort })}`), "REST fetch")).DATA as Record<string, unknown>[];
const byN = [{ ASC: "n" }];

t.test("query and exec, classic and promise forms, parameters one by one and in an array", async (t) => {
  // a REST fetch first, so a cached result would show if a write did not drop it
  t.same(await fetchAll(assets.id, s.dev, byN), [], "empty to begin with");
  const out = ok(t, await run(s, `var db = ClearBlade.Database();
    db.exec("INSERT INTO ${assets.name} (type, n) VALUES ($1, $2), ($3, $4)", "pump", 1, "valve", 2, function (err, made) {
      if (err) return done(err, made);
      db.query("SELECT type, n FROM ${assets.name} WHERE n >= $1 ORDER BY n", [1], function (err, rows) {
        if (err) return done(err, rows);
        db.query("SELECT count(*) AS c FROM ${assets.name}", function (err, c) { resp.success({ made: made, rows: rows, c: c }); });
      });
    });`), "classic");
  t.equal(out.made, null, "exec answers nothing");
  t.same(out.rows, [{ type: "pump", n: 1 }, { type: "valve", n: 2 }], "rows are objects; params as an array");
  t.same(out.c, [{ c: 2 }]);
  const rows = await fetchAll(assets.id, s.dev, byN);
  t.same(rows.map((r) => r.type), ["pump", "valve"], "a REST fetch sees the rows written");
  t.ok(rows.every((r) => typeof r.item_id === "string" && /^[0-9a-f-]{36}$/.test(r.item_id as string)), "each got an item_id");

  const a = ok(t, await run(s, `var db = ClearBladeAsync.Database();
    settle(db.exec("INSERT INTO ${history.name} (asset) VALUES ($1), ($2)", "x", "y")
      .then(function (ins) { return db.query("SELECT item_id, asset FROM ${history.name} ORDER BY asset").then(function (rows) {
        return db.exec("DELETE FROM ${history.name} WHERE item_id IN ($1, $2)", rows[0].item_id, "nope").then(function (del) { return { ins: ins, rows: rows, del: del }; }); }); })
      .then(function (r) { return db.query("SELECT * FROM ${history.name}", []).then(function (left) { r.left = left; return r; }); }));`), "promise form");
  t.same(a.ins, { count: 2 }, "exec resolves {count}");
  t.equal(a.rows.length, 2);
  t.same(a.del, { count: 1 }, "DELETE ... IN ($1, $2)");
  t.same(a.left.map((r: any) => Object.keys(r).sort()), [["asset", "item_id"]], "SELECT * shows the collection's columns only");

  ok(t, await run(s, settleAs(`ClearBladeAsync.Database().exec("UPDATE ${assets.name} SET n = n + $1 WHERE type = $2", 10, "pump")`)), "update");
  t.same((await fetchAll(assets.id, s.dev, byN)).map((r) => [r.type, r.n]), [["valve", 2], ["pump", 11]], "a REST fetch sees the update at once");
});

t.test("only the caller's collections; statements outside the allow-list refused as errors", async (t) => {
  refused(t, await run(s, `ClearBlade.Database().query("SELECT * FROM ${foreign.name}", done);`), /not found|does not exist/i, 404, "another system's collection by name");
  for (const [sql, re] of [
    ["SELECT * FROM sqlite_master", /not found|does not exist/i],
    ["SELECT * FROM pg_catalog.pg_tables", /without a schema/],
    ["SELECT load_extension('x')", /function load_extension/],
    ["SELECT pg_read_file('/etc/passwd')", /function pg_read_file/],
    [`SELECT 1 FROM ${assets.name}; DROP TABLE ${assets.name}`, /one statement/],
    ["DROP TABLE users", /SQL not allowed/],
    [`SELECT _hlc FROM ${assets.name}`, /not a collection column/],
    [`SELECT count(*) FROM ${assets.name} a, ${assets.name} b`, /joins are not supported/],
    [`SELECT n FROM ${assets.name} WHERE n IN (SELECT n FROM ${assets.name})`, /reads no collection/],
    [`SELECT x FROM ${assets.name} UNION SELECT secret FROM ${foreign.name}`, /not found|does not exist/i],
  ] as [string, RegExp][]) refused(t, await run(s, settleAs(`ClearBladeAsync.Database().query(${J(sql)})`)), re, undefined, sql);
  const e = await run(s, `ClearBlade.Database().query("SELECT nosuch FROM ${assets.name}", done);`);
  refused(t, e, /SQL error/, 400, "a SQL error reaches the callback");
  t.notMatch(e.text, /c_[0-9a-f]{30}/, "no table name of the platform in the error");
  t.notMatch(e.text, /at .*\.ts:\d+/, "no stack");
  refused(t, await run(s, settleAs(`ClearBladeAsync.Database().query("SELECT * FROM ${assets.name} WHERE n = $2", 1)`)), /uses \$1 to \$2 and was given 1/, 400, "parameters counted");
  t.same((await fetchAll(foreign.id, s2.dev)).map((r) => r.secret), ["other system"], "the other system's rows are untouched");
});

t.test("rights as the REST API's: read for SELECT, create, update, delete for writes", async (t) => {
  const reader = await userWith(s, { collections: [{ itemInfo: { id: assets.id }, permissions: 1 }] });
  t.equal(ok(t, await run(s, `ClearBlade.Database().query("SELECT n FROM ${assets.name}", done);`, reader.client), "read").length, 2);
  refused(t, await run(s, `ClearBlade.Database().exec("INSERT INTO ${assets.name} (n) VALUES (5)", done);`, reader.client), /create/i, 401, "insert without create");
  refused(t, await run(s, `ClearBlade.Database().exec("UPDATE ${assets.name} SET n = 5", done);`, reader.client), /update/i, 401, "update without update");
  refused(t, await run(s, `ClearBlade.Database().exec("DELETE FROM ${assets.name}", done);`, reader.client), /delete/i, 401, "delete without delete");
  refused(t, await run(s, `ClearBlade.Database().query("SELECT * FROM ${history.name}", done);`, reader.client), /read/i, 401, "a collection not granted");
  refused(t, await run(s, `ClearBlade.Database().query("SELECT n FROM ${assets.name} UNION SELECT 1 FROM (SELECT * FROM ${history.name}) h", done);`, reader.client), /read/i, 401, "a subquery's collection needs read too");
  const writer = await userWith(s, { collections: [{ itemInfo: { id: history.id }, permissions: 2 }, { itemInfo: { id: assets.id }, permissions: 1 }] });
  ok(t, await run(s, `ClearBlade.Database().exec("INSERT INTO ${history.name} (item_id, asset) SELECT item_id, type FROM ${assets.name}", done);`, writer.client), "create on the target, read on the source");
  t.equal((await fetchAll(history.id)).length, 3, "the rows went in");
});

t.test("transaction: statements on the system's collections written together or not at all", async (t) => {
  const ledger = await collectionWith(s, [["who", "string"], ["amount", "int"]], uniq("ledger"));
  const audit = await collectionWith(s, [["who", "string"], ["action", "string"]], uniq("audit"));
  await must(s.dev.post(`/api/v/4/data/${s.systemKey}/${ledger.name}/uniqueindex?columnName=who`, undefined), "a unique index on who");
  // ClearBlade's documented example: db.transaction([db.statement(...), db.statement(...)])
  ok(t, await run(s, `var db = ClearBladeAsync.Database();
    settle(db.transaction([
      db.statement("INSERT INTO ${ledger.name} (who, amount) VALUES ($1, $2)", "ann", 10),
      db.statement("INSERT INTO ${audit.name} (who, action) VALUES ($1, $2)", "ann", "opened"),
      db.statement("UPDATE ${ledger.name} SET amount = amount + $1 WHERE who = $2", 5, "ann"),
    ]));`), "three statements on two collections");
  t.same((await fetchAll(ledger.id)).map((r) => [r.who, r.amount]), [["ann", 15]], "the ledger row, updated in the same transaction");
  t.same((await fetchAll(audit.id)).map((r) => r.action), ["opened"], "the audit row");

  // the second statement fails when it runs (a unique value taken): the first is not kept
  refused(t, await run(s, `ClearBlade.Database().transaction([
      ["INSERT INTO ${audit.name} (who, action) VALUES ($1, $2)", "bob", "tried"],
      ["INSERT INTO ${ledger.name} (who, amount) VALUES ($1, $2)", "ann", 1],
    ], done);`), /duplicate value for unique column 'who'/, 400, "a failing statement");
  t.same((await fetchAll(audit.id)).map((r) => r.action), ["opened"], "nothing of a failed transaction is kept");
  // a statement refused when checked: none runs
  refused(t, await run(s, settleAs(`ClearBladeAsync.Database().transaction([["INSERT INTO ${audit.name} (who, action) VALUES ('c', 'x')"], ["DROP TABLE ${audit.name}"]])`)), /SQL not allowed/, 400, "a statement outside the allow-list");
  t.same((await fetchAll(audit.id)).length, 1, "and the one before it did not run");
  // every statement's rights are asked before any runs
  const writer = await userWith(s, { collections: [{ itemInfo: { id: audit.id }, permissions: 2 }] });
  refused(t, await run(s, settleAs(`ClearBladeAsync.Database().transaction([["INSERT INTO ${audit.name} (who, action) VALUES ('d', 'x')"], ["DELETE FROM ${ledger.name}"]])`), writer.client), /delete/i, 401, "a statement the caller may not run");
  t.same((await fetchAll(audit.id)).length, 1, "nothing ran");
  for (const [code, re] of [
    [`ClearBladeAsync.Database().transaction([])`, /1 to 100 statements/],
    [`ClearBladeAsync.Database().transaction([[42]])`, /comes first/],
  ] as [string, RegExp][]) refused(t, await run(s, settleAs(code)), re, 400, code.slice(0, 60));
  refused(t, await run(s, settleAs(`ClearBladeAsync.Database().transaction([["SELECT * FROM ${foreign.name}"]])`)), /not found|does not exist/i, 404, "another system's collection");
});

t.test("a write fires the collection's item triggers", async (t) => {
  const watched = await collectionWith(s, [["v", "string"]], uniq("watched"));
  const seen = await collectionWith(s, [["what", "string"]], uniq("seen"));
  const hook = uniq("hook");
  await must(s.dev.post(`/admin/code/v/1/${s.systemKey}/${hook}`, { parameters: [], code: `function ${hook}(req, resp) {
    ClearBlade.Collection({ collectionName: ${J(seen.name)} }).create({ what: JSON.stringify(req.params.items.length) }, function (err) { if (err) resp.error(err); else resp.success("ok"); });
  }` }), "hook service");
  for (const ev of ["ItemCreated", "ItemUpdated", "ItemDeleted"])
    await must(s.dev.post(`/admin/triggers/handlers/${s.systemKey}/${uniq(ev)}`, { def_module: "Data", def_name: ev, key_value_pairs: { collectionName: watched.name }, service_name: hook }), `${ev} trigger`);
  ok(t, await run(s, `var db = ClearBladeAsync.Database();
    settle(db.exec("INSERT INTO ${watched.name} (v) VALUES ('a'), ('b')").then(function () { return db.exec("UPDATE ${watched.name} SET v = 'c'"); })
      .then(function () { return db.exec("DELETE FROM ${watched.name} WHERE v = 'c'"); }));`), "insert, update, delete");
  const counts = async () => (await fetchAll(seen.id)).map((r) => r.what).sort();
  t.ok(await waitFor(async () => J(await counts()) === J(["2", "2", "2"]), 15_000), `each write fired its trigger with its two items (${J(await counts())})`);
});

t.test("a write reaches an edge", async (t) => {
  const col = await collectionWith(s, [["label", "string"]], uniq("down"));
  const edge = uniq("gw"), token = `${edge}-token`;
  await must(s.dev.post(`/admin/edges/${s.systemKey}/${edge}`, { token }), "edge");
  await must(s.dev.put(`/admin/edges/template/${s.systemKey}/${edge}`, { add: [{ def_module: "collection", def_name: col.name, mode: "sync_to_edge" }] }), "template");
  const e = await startOutpost({ args: ["--mode", "edge", "--platform-url", o.url, "--system-key", s.systemKey, "--edge-name", edge, "--edge-token", token, "--sync-ping-ms", "500"] });
  started.push(e);
  let ed: Client | null = null;
  t.ok(await waitFor(async () => {
    const a = await request(e.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
    if (a.status === 200) ed = new Client(e.url, { "ClearBlade-DevToken": a.body.dev_token });
    return a.status === 200;
  }, 30_000), "the developer signs in on the edge");
  const labels = async () => {
    const r = await ed!.get(`/api/v/1/data/${col.id}?query=${qs({ PAGESIZE: 0 })}`);
    return r.status === 200 ? (r.body.DATA as { label: string }[]).map((x) => x.label).sort() : [];
  };
  ok(t, await run(s, settleAs(`ClearBladeAsync.Database().exec("INSERT INTO ${col.name} (label) VALUES ($1), ($2)", "a", "b")`)), "insert on the platform");
  t.ok(await waitFor(async () => J(await labels()) === J(["a", "b"]), 30_000), "the inserted rows reach the edge");
  ok(t, await run(s, settleAs(`ClearBladeAsync.Database().exec("UPDATE ${col.name} SET label = 'c' WHERE label = $1", "a")`)), "update");
  ok(t, await run(s, settleAs(`ClearBladeAsync.Database().exec("DELETE FROM ${col.name} WHERE label = $1", "b")`)), "delete");
  t.ok(await waitFor(async () => J(await labels()) === J(["c"]), 30_000), `the update and the delete reach the edge (${J(await labels())})`);
});
