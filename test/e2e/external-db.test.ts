// External databases over HTTP against the binary, with real
// PostgreSQL and MariaDB (scripts/test-databases.sh): management, who may read credentials,
// data operations, credential changes closing the pool, sealed storage, and failure paths.
import t from "tap";
import { Client, type DevSystem, canConnect, devWithSystem, isEnvelope, needs, newUser, request, startOutpost, storedData, uniq } from "./harness.ts";

const PG = new URL(process.env.OUTPOST_TEST_PG ?? "postgres://outpost:outpost-test-pw@127.0.0.1:5432/outpost_test");
const MY = new URL(process.env.OUTPOST_TEST_MYSQL ?? "mysql://outpost:outpost-test-pw@127.0.0.1:3306/outpost_test");
const creds = (u: URL) => ({ user: decodeURIComponent(u.username), password: decodeURIComponent(u.password), address: u.hostname, port: u.port, dbname: u.pathname.slice(1) });

const servers = await needs(`PostgreSQL (${PG.host}) and MariaDB (${MY.host})`, Promise.all([canConnect(Number(PG.port), PG.hostname), canConnect(Number(MY.port), MY.hostname)]).then((x) => x.every(Boolean)));
const o = await startOutpost({ keepData: true });
t.teardown(() => o.stop());
const s = await devWithSystem(o, "extdb");
const s2 = await devWithSystem(o, "extdb-other");
const base = (sys: DevSystem = s) => `/api/v/4/external-db/${sys.systemKey}`;

async function userWith(perms: Record<string, unknown>) {
  const u = await newUser(s);
  const role = await s.dev.post(`/admin/user/${s.systemKey}/roles`, { name: uniq("R"), ...perms });
  if (role.status !== 200) throw new Error(role.text);
  await s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { roles: { add: [role.body.role_id] } } });
  const a = await s.app.post("/api/v/1/user/auth", { email: u.email, password: u.password });
  return new Client(o.url, { "ClearBlade-UserToken": a.body.user_token });
}
const grant = (name: string, level: number) => ({ externaldatabases: [{ itemInfo: { name }, permissions: level }] });

const PGDB = uniq("pg"), MYDB = uniq("my");
const table = uniq("readings");

t.test("create and list: developers only; the list has names and types, never credentials", servers, async (t) => {
  const a = await s.dev.post(base(), { name: PGDB, db_type: "postgres", credentials: creds(PG) });
  t.equal(a.status, 200, a.text);
  t.same(a.body, { success: true });
  const b = await s.dev.post(base(), { name: MYDB, dbtype: "MySQL", credentials: creds(MY) });
  t.equal(b.status, 200, "the dbtype spelling, any case");
  const l = await s.dev.get(base());
  t.equal(l.status, 200);
  const mine = l.body.filter((x: any) => [PGDB, MYDB].includes(x.name)).sort((x: any, y: any) => x.name.localeCompare(y.name));
  t.same(mine.map((x: any) => x.dbtype).sort(), ["mysql", "postgres"]);
  t.notOk(JSON.stringify(l.body).includes(PG.password), "no password in the list");
  t.notOk(l.body.some((x: any) => "credentials" in x), "no credentials in the list");
  const u = await userWith(grant(PGDB, 15));
  t.equal((await u.get(base())).status, 401, "a user cannot list");
  t.equal((await u.post(base(), { name: uniq("x"), db_type: "postgres", credentials: creds(PG) })).status, 401, "a user cannot create");
  t.equal((await s2.dev.get(base())).status, 401, "another developer's system");
});

t.test("create: invalid values are refused with the field named", servers, async (t) => {
  const bad: [string, Record<string, unknown>, RegExp][] = [
    ["unknown db_type", { name: uniq("x"), db_type: "oracle", credentials: creds(PG) }, /db_type/],
    ["no db_type", { name: uniq("x"), credentials: creds(PG) }, /db_type/],
    ["bad port", { name: uniq("x"), db_type: "postgres", credentials: { ...creds(PG), port: "99999" } }, /port/],
    ["no address", { name: uniq("x"), db_type: "postgres", credentials: { ...creds(PG), address: "" } }, /address/],
    ["bad connection_type", { name: uniq("x"), db_type: "mongodb", credentials: { ...creds(PG), connection_type: "x" } }, /connection_type/],
    ["bad authMechanism", { name: uniq("x"), db_type: "mongodb", credentials: { ...creds(PG), authMechanism: "x" } }, /authMechanism/],
    ["bad encryption", { name: uniq("x"), db_type: "mssql", credentials: { ...creds(PG), encryption: "x" } }, /encryption/],
    ["tls not boolean", { name: uniq("x"), db_type: "postgres", credentials: { ...creds(PG), tls: 3 } }, /tls/],
    ["no name", { db_type: "postgres", credentials: creds(PG) }, /name/],
    ["already exists", { name: PGDB, db_type: "postgres", credentials: creds(PG) }, /exists/],
  ];
  for (const [what, body, re] of bad) {
    const r = await s.dev.post(base(), body);
    t.equal(r.status, 400, `${what}: ${r.text}`);
    t.ok(isEnvelope(r.body, 400));
    t.match(r.body.error.detail, re, `${what}: names the field`);
  }
  const mongo = await s.dev.post(base(), { name: uniq("mongo"), db_type: "mongodb", credentials: { ...creds(PG), port: undefined } });
  t.equal(mongo.status, 200, "a mongodb connection with the defaults");
});

t.test("read: credentials with the password masked, only for callers allowed to update", servers, async (t) => {
  const g = await s.dev.get(`${base()}/${PGDB}`);
  t.equal(g.status, 200, g.text);
  t.match(g.body, { name: PGDB, dbtype: "postgres", system_key: s.systemKey, credentials: { user: PG.username, address: PG.hostname, port: PG.port, dbname: "outpost_test", password: "********", tls: false } });
  t.type(g.body.id, "string");
  const updater = await userWith(grant(PGDB, 4));
  t.equal((await updater.get(`${base()}/${PGDB}`)).body.credentials.password, "********", "a user who may update reads it too");
  const reader = await userWith(grant(PGDB, 1));
  const r = await reader.get(`${base()}/${PGDB}`);
  t.equal(r.status, 401, "a user who may only use it cannot read the credentials");
  t.ok(isEnvelope(r.body, 401));
  t.equal((await s.dev.get(`${base()}/nope`)).status, 404);
});

t.test("data operations: SQL with positional arguments on postgres and MariaDB, {Data, Total}", servers, async (t) => {
  const user = await userWith({ ...grant(PGDB, 1), externaldatabases: [{ itemInfo: { name: PGDB }, permissions: 1 }, { itemInfo: { name: MYDB }, permissions: 1 }] });
  for (const db of [PGDB, MYDB]) {
    const run = (...operation: unknown[]) => user.post(`${base()}/${db}/data`, { operation });
    t.equal((await run(`CREATE TABLE ${table}_${db.slice(0, 2)} (id INT PRIMARY KEY, sensor VARCHAR(40), value INT)`)).status, 200, `${db}: create table`);
    const ins = await run(`INSERT INTO ${table}_${db.slice(0, 2)} (id, sensor, value) VALUES ($1, $2, $3), ($4, $5, $6)`, 1, "t1", 21, 2, "t2", 19);
    t.same(ins.body, { Data: [], Total: 2 }, `${db}: two rows inserted`);
    const sel = await run(`SELECT sensor, value FROM ${table}_${db.slice(0, 2)} WHERE value > $1 ORDER BY id`, 20);
    t.equal(sel.status, 200);
    t.same(sel.body, { Data: [{ sensor: "t1", value: 21 }], Total: 1 }, `${db}: rows come back as objects`);
    const bad = await run("SELEC oops");
    t.equal(bad.status, 400, `${db}: bad SQL is a 400`);
    t.ok(isEnvelope(bad.body, 400));
    t.match(bad.body.error.detail, /database error/);
    const slow = await user.post(`${base()}/${db}/data`, { operation: [db === PGDB ? "SELECT pg_sleep(5)" : "SELECT SLEEP(5)"], timeout: 1 });
    t.equal(slow.status, 400, `${db}: a slow statement past its timeout`);
    t.match(slow.body.error.detail, /did not finish within 1 s/);
  }
  const none = await userWith({});
  t.equal((await none.post(`${base()}/${PGDB}/data`, { operation: ["SELECT 1"] })).status, 401, "a user without permission");
  for (const [what, body] of [["no operation", {}], ["operation not a list", { operation: "SELECT 1" }], ["empty list", { operation: [] }], ["missing argument", { operation: ["SELECT $1::int"] }]] as const) {
    const r = await s.dev.post(`${base()}/${PGDB}/data`, body);
    t.equal(r.status, 400, `${what}: ${r.text}`);
    t.ok(isEnvelope(r.body, 400));
  }
  t.equal((await s.dev.post(`${base()}/nope/data`, { operation: ["SELECT 1"] })).status, 404);
});

t.test("a credential change closes the pool: a wrong password fails at once, the right one works again", servers, async (t) => {
  const ok = await s.dev.post(`${base()}/${PGDB}/data`, { operation: ["SELECT 1 AS one"] });
  t.same(ok.body, { Data: [{ one: 1 }], Total: 1 });
  const u = await s.dev.put(`${base()}/${PGDB}`, { credentials: { password: "wrong-password" } });
  t.equal(u.status, 200, u.text);
  t.equal(u.body.password, "********", "the answer masks the password");
  t.equal(u.body.user, PG.username, "fields not sent are kept");
  const wrong = await s.dev.post(`${base()}/${PGDB}/data`, { operation: ["SELECT 1"] });
  t.equal(wrong.status, 400, "a wrong password is a clear 400");
  t.match(wrong.body.error.detail, /could not connect|password authentication/);
  t.equal((await s.dev.put(`${base()}/${PGDB}`, { password: PG.password })).status, 200, "bare credentials (as some clients send them)");
  t.same((await s.dev.post(`${base()}/${PGDB}/data`, { operation: ["SELECT 1 AS one"] })).body, { Data: [{ one: 1 }], Total: 1 }, "works again");
  const keep = await s.dev.put(`${base()}/${PGDB}`, { credentials: { password: "********", port: PG.port } });
  t.equal(keep.status, 200, "sending the masked password back keeps the stored one");
  t.equal((await s.dev.post(`${base()}/${PGDB}/data`, { operation: ["SELECT 1"] })).status, 200);
  for (const [what, body] of [["bad port", { credentials: { port: "x" } }], ["db_type change", { db_type: "mysql" }], ["rename", { name: "other" }]] as const) {
    const r = await s.dev.put(`${base()}/${PGDB}`, body);
    t.equal(r.status, 400, `${what}: ${r.text}`);
  }
});

t.test("every kind's driver loads when first used (each is a part of the binary of its own)", async (t) => {
  const ops: Record<string, unknown[]> = { postgres: ["SELECT 1"], mysql: ["SELECT 1"], mssql: ["SELECT 1"], mongodb: ["db.things.find({})"] };
  for (const [db_type, operation] of Object.entries(ops)) {
    const name = uniq(db_type);
    t.equal((await s.dev.post(base(), { name, db_type, credentials: { ...creds(PG), address: "127.0.0.1", port: "1" } })).status, 200, `${db_type} connection`);
    const r = await s.dev.post(`${base()}/${name}/data`, { operation });
    t.equal(r.status, 400, `${db_type}: ${r.text}`);
    t.match(r.body?.error?.detail, /could not connect/, `${db_type}: the driver ran and found nothing listening`);
  }
  t.equal((await request(o.url, "GET", "/health")).status, 200, "the server is fine");
});

t.test("an unreachable server is a clear error", servers, async (t) => {
  const name = uniq("gone");
  t.equal((await s.dev.post(base(), { name, db_type: "postgres", credentials: { ...creds(PG), port: "1" } })).status, 200);
  const t0 = Date.now();
  const r = await s.dev.post(`${base()}/${name}/data`, { operation: ["SELECT 1"] });
  t.equal(r.status, 400, r.text);
  t.ok(isEnvelope(r.body, 400));
  t.match(r.body.error.detail, /could not connect/);
  t.ok(Date.now() - t0 < 8000, "without hanging");
  t.equal((await request(o.url, "GET", "/health")).status, 200, "the server is fine");
});

t.test("credentials are sealed at rest", servers, async (t) => {
  const files = storedData(o);
  t.ok(files.length > 0, "the database files");
  for (const f of files) t.notOk(f.bytes.includes(Buffer.from(PG.password)), `${f.name} does not hold the password in the clear`);
});

t.test("delete", servers, async (t) => {
  const u = await userWith(grant(MYDB, 8));
  const d = await u.del(`${base()}/${MYDB}`);
  t.equal(d.status, 200, "a user with delete permission");
  t.same(d.body, { success: true });
  t.equal((await s.dev.get(`${base()}/${MYDB}`)).status, 404);
  t.equal((await s.dev.del(`${base()}/${MYDB}`)).status, 404);
  const reader = await userWith(grant(PGDB, 1));
  t.equal((await reader.del(`${base()}/${PGDB}`)).status, 401, "not with read permission only");
});

t.test("a collection that is a database connection: items through the same connectors", servers, async (t) => {
  for (const [type, url] of [["postgres", PG], ["mysql", MY]] as const) {
    const tbl = uniq("items").toLowerCase();
    const db = uniq("raw");
    t.equal((await s.dev.post(base(), { name: db, db_type: type, credentials: creds(url) })).status, 200);
    const made = await s.dev.post(`${base()}/${db}/data`, { operation: [`CREATE TABLE ${tbl} (item_id VARCHAR(40), sensor VARCHAR(40), value INT)`] });
    t.equal(made.status, 200, made.text);
    const c = await s.dev.post("/admin/collectionmanagement", { name: uniq("conn"), appID: s.systemKey, dbtype: type, ...creds(url), tablename: tbl });
    t.equal(c.status, 200, `${type}: connect collection: ${c.text}`);
    const id = c.body.collectionID;
    const items = `/api/v/1/data/${id}`;
    const ins = await s.dev.post(items, [{ item_id: "a", sensor: "t1", value: 5 }, { item_id: "b", sensor: "t2", value: 15 }, { item_id: "c", sensor: "t3", value: 25 }]);
    t.equal(ins.status, 200, ins.text);
    t.same(ins.body, [{ item_id: "a" }, { item_id: "b" }, { item_id: "c" }]);
    const q = encodeURIComponent(JSON.stringify({ FILTERS: [[{ GT: { value: 10 } }]], SORT: [{ DESC: "value" }], PAGESIZE: 1, PAGENUM: 1 }));
    const page = await s.dev.get(`${items}?query=${q}`);
    t.equal(page.status, 200, page.text);
    t.same(page.body.DATA.map((r: any) => r.sensor), ["t3"], `${type}: filter, sort and page`);
    t.equal(page.body.TOTAL, 2);
    t.type(page.body.NEXTPAGEURL, "string");
    const cnt = await s.dev.get(`/api/v/1/data/${id}/count?query=${encodeURIComponent(JSON.stringify([[{ LTE: { value: 15 } }]]))}`);
    t.same(cnt.body, { count: 2 });
    const up = await s.dev.put(items, { query: [[{ EQ: { sensor: "t1" } }]], $set: { value: 6 } });
    t.same(up.body, { count: 1 }, `${type}: update`);
    const del = await s.dev.del(`${items}?query=${encodeURIComponent(JSON.stringify([[{ EQ: { item_id: "b" } }]]))}`);
    t.same(del.body, { count: 1 }, `${type}: delete`);
    const raw = await s.dev.post(`${base()}/${db}/data`, { operation: [`SELECT item_id, value FROM ${tbl} ORDER BY item_id`] });
    t.same(raw.body.Data, [{ item_id: "a", value: 6 }, { item_id: "c", value: 25 }], `${type}: the table itself changed`);
    const badCol = await s.dev.get(`${items}?query=${encodeURIComponent(JSON.stringify([[{ EQ: { "x; drop": 1 } }]]))}`);
    t.equal(badCol.status, 400, "column names are checked, never pasted");
    // the connection can change: a wrong password fails, and the right one works again
    t.equal((await s.dev.put("/admin/collectionmanagement", { id, connectionStringMap: { password: "nope" } })).status, 200);
    t.equal((await s.dev.get(items)).status, 400, `${type}: the changed connection is used at once`);
    t.equal((await s.dev.put("/admin/collectionmanagement", { id, connectionStringMap: { password: url.password } })).status, 200);
    t.equal((await s.dev.get(items)).status, 200);
    const listed = (await s.dev.get(`/admin/allcollections?appid=${s.systemKey}`)).body.find((x: any) => x.collectionID === id);
    t.match(listed, { dbtype: type, tablename: tbl, isConnect: true });
    t.notOk(JSON.stringify(listed).includes(url.password) || "sealed" in listed, "no password, sealed or not, in the listing");
  }
  const bad = await s.dev.post("/admin/collectionmanagement", { name: uniq("conn"), appID: s.systemKey, dbtype: "oracle", ...creds(PG), tablename: "t" });
  t.equal(bad.status, 400, "an unknown dbtype");
  const noTable = await s.dev.post("/admin/collectionmanagement", { name: uniq("conn"), appID: s.systemKey, dbtype: "postgres", ...creds(PG) });
  t.equal(noTable.status, 400, "tablename is required");
});

t.test("connection collections' credentials are sealed at rest too", servers, async (t) => {
  for (const f of storedData(o)) t.notOk(f.bytes.includes(Buffer.from(MY.password)), `${f.name} does not hold a password in the clear`);
});
