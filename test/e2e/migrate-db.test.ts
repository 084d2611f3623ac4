// outpost migrate-db, black-box: a platform writes on its libSQL file, stops, its data is moved
// into PostgreSQL, and the platform started on PostgreSQL reads everything back: developers (they
// sign in), the system, collections with their rows, columns and unique index, users, devices,
// the sync change log (and new changes continue after it), MQTT retained messages. Failure paths:
// a running platform, a destination already holding a platform, bad arguments. And a platform
// whose PostgreSQL is out of reach at start (retried, logged) or refuses its password (exit 2).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mqtt from "mqtt";
import pg from "pg";
import t from "tap";
import { createPgDatabase, dropPgDatabase, PG_TEST_URL, pgReachable } from "../pgdb.ts";
import { Client, collectionWith, devWithSystem, freePort, needs, newUser, ok200, request, runBin, startOutpost, uniq, waitFor } from "./harness.ts";

const reachable = await pgReachable();
const skip = await needs("PostgreSQL (migrate-db)", reachable);

t.test("a platform moved from libSQL to PostgreSQL keeps its data", skip, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "outpost-migrate-"));
  const file = `file:${join(dir, "outpost.db")}`;
  const to = await createPgDatabase();
  t.teardown(async () => { rmSync(dir, { recursive: true, force: true }); await dropPgDatabase(to); });

  // ---- a platform on libSQL writes ----------------------------------------------------------
  const a = await startOutpost({ dataDir: dir, args: ["--db", file] });
  const s = await devWithSystem(a, "moving");
  // an edge: from now on the system's changes go to its change log
  ok200(t, await s.dev.post(`/admin/edges/${s.systemKey}/north`, { system_key: s.systemKey, system_secret: s.systemSecret, token: "edge-token-north-1" }), "edge");
  const col = await collectionWith(s, [["sensor", "string"], ["value", "float"], ["ok", "bool"], ["meta", "jsonb"]]);
  ok200(t, await s.dev.post(`/api/v/4/data/${col.id}/uniqueindex?columnName=sensor`), "unique index");
  const rows = Array.from({ length: 120 }, (_, i) => ({ sensor: `s${i}`, value: i / 2, ok: i % 2 === 0, meta: { i } }));
  ok200(t, await s.dev.post(`/api/v/1/data/${col.id}`, rows), "rows inserted");
  const user = await newUser(s);
  const device = uniq("dev");
  ok200(t, await s.dev.post(`/admin/devices/${s.systemKey}/${device}`, { name: device, type: "meter", state: "on", active_key: "device-key-1", enabled: true, allow_key_auth: true }), "device");
  const pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${a.mqttPort}`, { username: s.devToken, password: s.systemKey, clientId: uniq("pub"), reconnectPeriod: 0 });
  await pub.publishAsync("moving/retained", "kept", { qos: 1, retain: true });
  await pub.endAsync();

  // ---- refused while it runs; moved once it is stopped ---------------------------------------
  const busy = await runBin(["migrate-db", "--from", file, "--to", to], { timeoutMs: 60_000 });
  t.equal(busy.code, 2, "refused while the platform runs");
  t.match(busy.stderr, /stop the platform first/);
  t.equal(await a.stop(), 0, "libSQL platform stopped");
  const moved = await runBin(["migrate-db", "--from", file, "--to", to], { timeoutMs: 120_000 });
  t.equal(moved.code, 0, `migrate-db succeeds: ${moved.stderr}`);
  t.match(moved.stdout, new RegExp(`c_${col.id}: 120 rows`), "the collection's rows were copied");
  t.match(moved.stdout, /copied \d+ rows of \d+ tables/);
  t.notMatch(moved.stdout + moved.stderr, /outpost-test-pw/, "the password is not printed");
  const again = await runBin(["migrate-db", "--from", file, "--to", to], { timeoutMs: 60_000 });
  t.equal(again.code, 2, "a destination holding a platform is refused");
  t.match(again.stderr, /already holds a platform/);

  // ---- the platform on PostgreSQL reads it back --------------------------------------------
  const b = await startOutpost({ dataDir: dir, args: ["--db", to] });
  t.teardown(() => b.stop());
  const login = await request(b.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
  ok200(t, login, "the developer signs in");
  const dev = new Client(b.url, { "ClearBlade-DevToken": login.body.dev_token });
  const back = await dev.get(`/api/v/1/data/${col.id}?query=${encodeURIComponent(JSON.stringify({ PAGESIZE: 0, SORT: [{ ASC: "value" }] }))}`);
  ok200(t, back, "rows read");
  t.equal(back.body.DATA.length, 120, "every row");
  t.same(back.body.DATA.slice(0, 2).map((r: any) => ({ sensor: r.sensor, value: r.value, ok: r.ok, meta: r.meta })),
    [{ sensor: "s0", value: 0, ok: true, meta: { i: 0 } }, { sensor: "s1", value: 0.5, ok: false, meta: { i: 1 } }], "values keep their types");
  const dup = await dev.post(`/api/v/1/data/${col.id}`, [{ sensor: "s5" }]);
  t.equal(dup.status, 400, "the unique index came along");
  ok200(t, await dev.post(`/api/v/1/data/${col.id}`, [{ sensor: "new" }]), "new rows go in");
  const u = await request(b.url, "POST", "/api/v/1/user/auth", { headers: { "ClearBlade-SystemKey": s.systemKey, "ClearBlade-SystemSecret": s.systemSecret }, body: { email: user.email, password: user.password } });
  ok200(t, u, "the user signs in");
  const devices = await dev.get(`/admin/devices/${s.systemKey}`);
  ok200(t, devices);
  t.ok(JSON.stringify(devices.body).includes(device), "the device is there");
  ok200(t, await dev.get(`/admin/edges/${s.systemKey}/north`), "the edge is there");

  // the change log came along, and new changes follow it
  const c = new pg.Client({ connectionString: to });
  await c.connect();
  t.teardown(() => c.end());
  const before = Number((await c.query("SELECT max(seq) AS m FROM changes")).rows[0].m);
  t.ok(before > 0, `the change log was copied (up to seq ${before})`);
  ok200(t, await dev.post("/admin/collectionmanagement", { name: uniq("after"), appID: s.systemKey }), "a new collection on PostgreSQL");
  const after = Number((await c.query("SELECT max(seq) AS m FROM changes")).rows[0].m);
  t.ok(after > before, `new changes continue the log (${after} > ${before})`);

  // the retained message survived
  const sub = await mqtt.connectAsync(`mqtt://127.0.0.1:${b.mqttPort}`, { username: login.body.dev_token, password: s.systemKey, clientId: uniq("sub"), reconnectPeriod: 0 });
  const got: string[] = [];
  sub.on("message", (topic, payload) => got.push(`${topic}=${payload}`));
  await sub.subscribeAsync("moving/retained", { qos: 1 });
  t.ok(await waitFor(() => got.length > 0, 5_000), "a retained message arrives");
  t.same(got, ["moving/retained=kept"]);
  await sub.endAsync();
});

t.test("migrate-db refuses a bad command line with exit 2", async (t) => {
  for (const [args, why] of [
    [[], /give both --from/],
    [["--from", "file:/nonexistent/x.db"], /give both/],
    [["--from", "postgres://a@b/c", "--to", "postgres://a@b/d"], /a libSQL file/],
    [["--from", "file:/tmp/x.db", "--to", "file:/tmp/y.db"], /a PostgreSQL URL/],
    [["--from", "file:/tmp/x.db", "--to", "mysql://u:secret@h/d"], /a PostgreSQL URL/],
    [["--bogus"], /unexpected argument/],
  ] as [string[], RegExp][]) {
    const r = await runBin(["migrate-db", ...args]);
    t.equal(r.code, 2, `exit 2: ${args.join(" ")}`);
    t.match(r.stderr, why);
  }
  const missing = await runBin(["migrate-db", "--from", `file:${join(tmpdir(), uniq("none"), "x.db")}`, "--to", "postgres://u:p@127.0.0.1:1/x"]);
  t.equal(missing.code, 2, "no database at the source");
  t.match(missing.stderr, /there is no database/);
  const help = await runBin(["migrate-db", "--help"]);
  t.equal(help.code, 0);
  t.match(help.stdout, /Usage: outpost migrate-db --from file:PATH --to postgres:/);
});

t.test("an edge refuses a PostgreSQL --db (exit 2)", async (t) => {
  const r = await runBin(["--mode", "edge", "--platform-url", "http://127.0.0.1:1", "--system-key", "k", "--edge-name", "e", "--edge-token", "t", "--db", "postgres://u:p@127.0.0.1/x"]);
  t.equal(r.code, 2);
  t.match(r.stderr, /--db: an edge keeps its data in libSQL/);
});

t.test("a platform on PostgreSQL: a server out of reach at start is retried and logged; a wrong password exits 2", skip, async (t) => {
  const port = await freePort(); // nothing listens there
  const o = await startOutpost({ args: ["--db", `postgres://outpost:pw@127.0.0.1:${port}/outpost`, "--log-level", "warn"], waitForHealth: false });
  t.teardown(() => o.kill());
  t.ok(await waitFor(() => /the database cannot be reached yet; trying again/.test(o.logs()), 10_000), "it says it is retrying");
  t.notMatch(o.logs(), /:pw@/, "without the password");
  t.equal(o.proc.exitCode, null, "and keeps trying");
  const url = new URL(PG_TEST_URL);
  url.password = "not-the-password";
  const dir = mkdtempSync(join(tmpdir(), "outpost-pgpw-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const r = await runBin(["--http-port", String(await freePort()), "--mqtt-port", String(await freePort()), "--mqtt-ws-port", String(await freePort()),
    "--mqtt-tls-port", String(await freePort()), "--mqtt-wss-port", String(await freePort()), "--data-dir", dir, "--db", url.toString()], { timeoutMs: 20_000 });
  t.equal(r.code, 2, "a refused password is exit 2");
  t.match(r.stderr, /refused the connection/);
  t.notMatch(r.stderr, /not-the-password/, "the password is not printed");
});
