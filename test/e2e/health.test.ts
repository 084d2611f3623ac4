// /health tells the truth and /metrics has what operators graph. Each reason for a 503: the
// database cannot write (another process holds its write lock), the disk is nearly full
// (--min-free-mb above what is free), an edge's platform link down past --link-grace (and only a
// note with --link-loss-ok). /metrics: HTTP requests by route and status with latency, MQTT
// connections and messages in and out by QoS, the database's size, code runs by outcome with
// durations, an edge's link and outbox.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";
import mqtt from "mqtt";
import t from "tap";
import pg from "pg";
import { devWithSystem, freePort, pgDatabaseOf, request, startOutpost, TEST_DB, waitFor, metrics } from "./harness.ts";
import { pgUrlFor } from "../pgdb.ts";

const require = createRequire(import.meta.url);

t.test("a healthy node answers 200 ok", async (t) => {
  const o = await startOutpost();
  t.teardown(() => o.stop());
  const r = await request(o.url, "GET", "/health");
  t.equal(r.status, 200);
  t.match(r.body, { status: "ok", version: /^\d+\.\d+\.\d+/, commit: /\S/ }, "ok, with the build");
  t.notOk("reasons" in r.body, "no reasons");
});

t.test("the database cannot write: 503 naming it, and 200 again once it can", async (t) => {
  const o = await startOutpost();
  t.teardown(() => o.stop());
  // another process takes the database's write lock and keeps it (on PostgreSQL: a lock on the
  // table the probe writes)
  const other = TEST_DB === "postgres" ? await pgLocker(pgUrlFor(pgDatabaseOf(o.dataDir))) : libsqlLocker(join(o.dataDir, "outpost.db"));
  try {
    // the report is reused for a second: ask until the probe ran under the lock
    let r = await request(o.url, "GET", "/health");
    t.ok(await waitFor(async () => (r = await request(o.url, "GET", "/health")).status === 503, 15_000), "503 while the database cannot write");
    t.equal(r.body.status, "unhealthy");
    t.match(r.body.reasons.join("\n"), /database cannot write/);
  } finally {
    await other.release();
  }
  t.ok(await waitFor(async () => (await request(o.url, "GET", "/health")).status === 200, 15_000), "healthy again");
});

function libsqlLocker(path: string) {
  const Database = require("libsql");
  const other = new Database(path);
  other.exec("PRAGMA busy_timeout=5000");
  other.exec("BEGIN IMMEDIATE");
  return { release: async () => { other.exec("ROLLBACK"); other.close(); } };
}

async function pgLocker(url: string) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query("BEGIN");
  await c.query("LOCK TABLE settings IN ACCESS EXCLUSIVE MODE");
  return { release: async () => { await c.query("ROLLBACK"); await c.end(); } };
}

t.test("the disk is nearly full (below --min-free-mb): 503 naming it", async (t) => {
  // the disk of a database file (a PostgreSQL server's disk is its operator's to watch)
  const dir = mkdtempSync(join(tmpdir(), "outpost-e2e-"));
  const o = await startOutpost({ dataDir: dir, args: ["--db", `file:${join(dir, "outpost.db")}`, "--min-free-mb", String(1024 * 1024 * 1024)], waitForHealth: false });
  t.teardown(async () => { await o.stop(); rmSync(dir, { recursive: true, force: true }); });
  let r = await request(o.url, "GET", "/health").catch(() => null);
  t.ok(await waitFor(async () => (r = await request(o.url, "GET", "/health")).status === 503, 15_000), "503 from the start");
  t.match(r!.body.reasons.join("\n"), /disk .* MB free \(less than --min-free-mb/);
});

t.test("an edge whose platform link is down past --link-grace is unhealthy; with --link-loss-ok it says so and stays healthy", async (t) => {
  const nowhere = `http://127.0.0.1:${await freePort()}`;
  const edge = (extra: string[]) => startOutpost({ args: ["--mode", "edge", "--platform-url", nowhere, "--system-key", "0".repeat(30), "--edge-name", "gw", "--edge-token", "edge-token-123", "--link-grace", "1", ...extra] });
  const e1 = await edge([]);
  t.teardown(() => e1.stop());
  let r = await request(e1.url, "GET", "/health");
  t.ok(await waitFor(async () => (r = await request(e1.url, "GET", "/health")).status === 503, 10_000), "503 once the grace has passed");
  t.match(r.body.reasons.join("\n"), /platform link has been down for \d+ s \(grace 1 s\)/);
  const e2 = await edge(["--link-loss-ok"]);
  t.teardown(() => e2.stop());
  let n = await request(e2.url, "GET", "/health");
  t.ok(await waitFor(async () => (n = await request(e2.url, "GET", "/health")).body?.notes !== undefined, 10_000), "a note once the grace has passed");
  t.equal(n.status, 200, "still healthy");
  t.match(n.body.notes.join("\n"), /platform link has been down/);
  const m = await metrics(e2);
  t.match(m.text, /^outpost_sync_link_up 0$/m, "the link is down on /metrics");
  t.match(m.text, /^outpost_sync_outbox_items 0$/m, "the outbox size");
});

t.test("/metrics: HTTP requests by route and status with latency, MQTT connections, the database's size", async (t) => {
  const o = await startOutpost();
  t.teardown(() => o.stop());
  const s = await devWithSystem(o, "metrics");
  await s.app.post("/api/v/1/user/auth", { email: "nobody@example.com", password: "wrong" });
  await request(o.url, "GET", `/api/v/1/data/${"a".repeat(30)}`, { headers: { "ClearBlade-DevToken": s.devToken } });
  await request(o.url, "GET", "/no/such/route/at/all");
  const svc = "metered";
  await s.dev.post(`/admin/code/v/1/${s.systemKey}/${svc}`, { code: `function ${svc}(req, resp) { resp.success("ok"); }` });
  await s.dev.post(`/api/v/1/code/${s.systemKey}/${svc}`, {});
  const m = (await metrics(o)).text;
  t.match(m, /^outpost_code_runs_total\{outcome="success"\} 1$/m, "code runs by outcome");
  t.match(m, /^outpost_code_run_seconds_count 1$/m, "code run durations");
  t.match(m, /^outpost_http_requests_total\{route="\/admin\/systemmanagement",status="200"\} 1$/m, "a route with its status");
  t.match(m, /^outpost_http_requests_total\{route="\/api\/v\/1\/user\/auth",status="401"\} 1$/m, "a refused sign-in");
  t.match(m, /^outpost_http_requests_total\{route="\/api\/v\/1\/data\/:key",status="\d{3}"\} 1$/m, "ids in the path do not make routes: the route's pattern");
  t.match(m, /^outpost_http_requests_total\{route="unmatched",status="404"\} 1$/m, "a path no route answers");
  t.match(m, /^outpost_http_request_seconds_bucket\{route="\/admin\/systemmanagement",le="\+Inf"\} 1$/m, "latency by route");
  t.match(m, /^outpost_mqtt_connections 0$/m, "MQTT connections");
  t.match(m, /^outpost_db_bytes [1-9]\d*$/m, "the database's size");
  t.match(m, /^outpost_audit_rows_waiting \d+$/m, "audit rows waiting to be written");
  t.match(m, /^outpost_audit_rows_dropped_total 0$/m, "audit rows dropped (none: the trail is written)");
  t.match(m, /^outpost_process_resident_bytes [1-9]\d*$/m, "resident memory");
});

t.test("/metrics: MQTT messages in and out by QoS", async (t) => {
  const o = await startOutpost();
  t.teardown(() => o.stop());
  const s = await devWithSystem(o, "mqtt-metrics");
  const connect = (clientId: string) => mqtt.connectAsync(`mqtt://127.0.0.1:${o.mqttPort}`,
    { username: s.devToken, password: s.systemKey, clientId, protocolVersion: 4, reconnectPeriod: 0 });
  const sub = await connect("metrics-sub");
  const pub = await connect("metrics-pub");
  t.teardown(() => { sub.end(true); pub.end(true); });
  // one subscription at QoS 1: a QoS 2 message goes out at 1
  await sub.subscribeAsync("m/#", { qos: 1 });
  let got = 0;
  sub.on("message", () => got++);
  await pub.publishAsync("m/a", "x", { qos: 0 });
  await pub.publishAsync("m/a", "x", { qos: 0 });
  await pub.publishAsync("m/b", "x", { qos: 1 });
  await pub.publishAsync("m/c", "x", { qos: 2 });
  await pub.publishAsync("elsewhere", "x", { qos: 0 }); // received, sent to nobody
  // a REST publish is sent to the subscriber but was never received over MQTT
  const rest = await request(o.url, "POST", `/api/v/1/message/${s.systemKey}/publish`,
    { headers: { "ClearBlade-DevToken": s.devToken }, body: { topic: "m/rest", body: "x", qos: 0 } });
  t.equal(rest.status, 200, "REST publish");
  t.ok(await waitFor(() => got === 5, 10_000), "the subscriber got five messages");
  let m = "";
  t.ok(await waitFor(async () => /^outpost_mqtt_messages_out_total\{qos="0"\} 3$/m.test(m = (await metrics(o)).text), 10_000), "sent at QoS 0");
  t.match(m, /^# TYPE outpost_mqtt_messages_in_total counter$/m, "a counter");
  t.match(m, /^outpost_mqtt_messages_in_total\{qos="0"\} 3$/m, "received at QoS 0");
  t.match(m, /^outpost_mqtt_messages_in_total\{qos="1"\} 1$/m, "received at QoS 1");
  t.match(m, /^outpost_mqtt_messages_in_total\{qos="2"\} 1$/m, "received at QoS 2");
  t.match(m, /^outpost_mqtt_messages_out_total\{qos="1"\} 2$/m, "sent at QoS 1 (one downgraded from 2)");
  t.match(m, /^outpost_mqtt_messages_out_total\{qos="2"\} 0$/m, "none sent at QoS 2");
  t.match(m, /^outpost_mqtt_connections 2$/m, "two connections");
});
