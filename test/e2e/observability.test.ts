// What an operator reads, black-box: /metrics labels routes by pattern (1,000 distinct edge
// lookups add no series) and carries no system key or edge name unless asked
// (--metrics-system-labels, then for that many at most); /metrics on the API port only to the
// bearer of --metrics-token, and without one only on --metrics-port (127.0.0.1); the series an
// operator graphs (build info, database latency, connected edges, failed assets, per system). The
// access log: a line per request with its route pattern, the error id of a 5xx the client got;
// refused and throttled sign-ins, MQTT connects, refusals and disconnects, and developers' changes.
// And every metric the shipped dashboard and alert rules use has series on a live platform or edge.
import { readFileSync } from "node:fs";
import { networkInterfaces } from "node:os";
import { join } from "node:path";
import mqtt from "mqtt";
import t from "tap";
import { type DevSystem, devWithSystem, freePort, METRICS_TOKEN, metrics, must, newUser, type Outpost, request, startOutpost, uniq, waitFor } from "./harness.ts";

const started: Outpost[] = [];
t.teardown(async () => { for (const o of started) await o.stop().catch(() => {}); });
const start = async (opts: Parameters<typeof startOutpost>[0] = {}) => { const o = await startOutpost(opts); started.push(o); return o; };

/** The series of a /metrics text (its lines that are not comments). */
const seriesOf = (text: string) => text.split("\n").filter((l) => l && !l.startsWith("#")).map((l) => l.slice(0, l.lastIndexOf(" ")));
/** The JSON log lines of a process with this message. */
const logLines = (o: Outpost, msg: string) => o.logs().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l)).filter((l) => l.msg === msg);

/** A webhook anyone may call whose service throws: each call answers 500 (SERVICE_FAILED) with
 *  the envelope. Returns its path. */
async function failingWebhook(s: DevSystem): Promise<string> {
  const svc = uniq("thrower"), hook = uniq("hook");
  await must(s.dev.post(`/admin/code/v/1/${s.systemKey}/${svc}`, { code: `function ${svc}(req, resp) { throw new Error("it broke"); }` }), "service");
  await must(s.dev.put(`/admin/user/${s.systemKey}/roles`, { id: "Anonymous", changes: { services: [{ itemInfo: { name: svc }, permissions: 1 }] } }), "role");
  await must(s.dev.post(`/admin/v/4/webhook/${s.systemKey}/${hook}`, { service_name: svc, auth_method: "no_auth" }), "webhook");
  const path = `/api/v/4/webhook/execute/${s.systemKey}/${hook}`;
  // the role's change reaches the permission cache within its lifetime
  if (!(await waitFor(async () => (await request(s.app.base, "POST", path, { body: {} })).status === 500, 10_000))) throw new Error("the webhook does not fail");
  return path;
}

const platform = await start({ logLevel: "info" });

t.test("1,000 distinct edge lookups add no series, and no edge name reaches /metrics", async (t) => {
  const s = await devWithSystem(platform, "lookups");
  const lookup = (name: string) => s.dev.get(`/admin/edges/${s.systemKey}/${name}`);
  t.equal((await lookup("first-one")).status, 404, "an edge that does not exist");
  await metrics(platform); // (the first reading makes /metrics' own series)
  const before = seriesOf((await metrics(platform)).text);
  const names = Array.from({ length: 1000 }, (_, i) => `gw-${i}-${uniq()}`);
  for (let i = 0; i < names.length; i += 50) {
    const statuses = await Promise.all(names.slice(i, i + 50).map(async (n) => (await lookup(n)).status));
    if (statuses.some((x) => x !== 404)) t.fail(`lookups answered ${statuses.join(",")}`);
  }
  const text = (await metrics(platform)).text;
  const after = seriesOf(text);
  t.same(after.filter((x) => !before.includes(x)), [], `no series added (${before.length} series before, ${after.length} after)`);
  t.match(text, new RegExp(`^outpost_http_requests_total\\{route="/admin/edges/:systemKey/:name",status="404"\\} 1001$`, "m"), "all counted under the route's pattern");
  t.notOk(names.some((n) => text.includes(n)) || text.includes("first-one"), "no edge name in the text");
  t.notOk(text.includes(s.systemKey), "no system key in the text");
});

t.test("/metrics on the API port: 401 without the token or with another, the text with it; 404 when no token is set", async (t) => {
  const none = await request(platform.url, "GET", "/metrics");
  t.equal(none.status, 401, "no Authorization");
  t.equal(none.body.error.code, 202);
  t.equal((await request(platform.url, "GET", "/metrics", { headers: { authorization: "Bearer not-the-metrics-token" } })).status, 401, "another token");
  t.equal((await request(platform.url, "GET", "/metrics", { headers: { authorization: `Basic ${METRICS_TOKEN}` } })).status, 401, "not a bearer");
  const s = await devWithSystem(platform, "metrics-token");
  t.equal((await s.dev.get("/metrics")).status, 401, "a developer token is not the metrics token");
  const ok = await metrics(platform);
  t.equal(ok.status, 200);
  t.match(ok.headers["content-type"], /^text\/plain; version=0\.0\.4/);
  const open = await start({ metricsToken: null });
  const r = await request(open.url, "GET", "/metrics");
  t.equal(r.status, 404, "no token set: the API port has no /metrics");
  t.equal(r.body.error.code, 103);
});

t.test("--metrics-port: /metrics without a token on 127.0.0.1 only; nothing else there", async (t) => {
  const port = await freePort();
  const o = await start({ metricsToken: null, args: ["--metrics-port", String(port)] });
  const local = `http://127.0.0.1:${port}`;
  const r = await request(local, "GET", "/metrics");
  t.equal(r.status, 200);
  t.match(r.text, /^outpost_build_info\{version="[^"]+",commit="[^"]+",mode="platform"\} 1$/m, "build info");
  t.equal((await request(local, "GET", "/health")).status, 404, "only /metrics");
  t.equal((await request(local, "POST", "/metrics")).status, 404, "only GET");
  t.equal((await request(o.url, "GET", "/metrics")).status, 404, "and not on the API port");
  const outside = Object.values(networkInterfaces()).flat().find((i) => i && i.family === "IPv4" && !i.internal)?.address;
  if (outside) {
    const err = await request(`http://${outside}:${port}`, "GET", "/metrics").then(() => null, (e: NodeJS.ErrnoException) => e.code);
    t.equal(err, "ECONNREFUSED", `not on ${outside}`);
  }
  // a port taken: exit 2 naming the flag
  const taken = await startOutpost({ metricsToken: null, args: ["--metrics-port", String(port)], waitForHealth: false });
  const code = await new Promise<number | null>((res) => taken.proc.on("exit", res));
  t.equal(code, 2);
  t.match(taken.logs(), /--metrics-port \d+ is in use/);
  await taken.stop();
});

t.test("the series an operator graphs: build info, database latency, edges, failed assets; no system labels unless asked", async (t) => {
  const text = (await metrics(platform)).text;
  t.match(text, /^outpost_build_info\{version="[^"]+",commit="[^"]+",mode="platform"\} 1$/m);
  t.match(text, /^outpost_db_query_seconds_count [1-9]\d*$/m, "statements timed");
  t.match(text, /^outpost_db_query_seconds_bucket\{le="0.001"\} \d+$/m);
  t.match(text, /^outpost_sync_edges_connected 0$/m);
  t.match(text, /^# TYPE outpost_sync_failed_assets gauge$/m);
  t.notMatch(text, /system_key=/, "no system key label");
  t.notMatch(text, /^outpost_system_/m, "no per-system families");
});

t.test("--metrics-system-labels: the busiest systems get series, the rest count as other", async (t) => {
  const o = await start({ args: ["--metrics-system-labels", "1"] });
  const [busy, quiet] = [await devWithSystem(o, "busy"), await devWithSystem(o, "quiet")];
  const u = await newUser(busy);
  for (let i = 0; i < 5; i++) await must(u.client.get("/api/v/1/user/info"), "a user's request");
  const q = await newUser(quiet);
  await must(q.client.get("/api/v/1/user/info"), "a user's request");
  await metrics(o); // places go to the busiest seen until now
  for (let i = 0; i < 3; i++) await must(u.client.get("/api/v/1/user/info"), "a user's request");
  await must(q.client.get("/api/v/1/user/info"), "a user's request");
  t.equal((await u.client.get(`/api/v/1/data/${"f".repeat(24)}`)).status >= 400, true, "an error");
  await failingWebhook(busy); // one 500 (the calls before the role's change reached the cache: 403)
  const text = (await metrics(o)).text;
  t.match(text, new RegExp(`^outpost_system_http_requests_total\\{system_key="${busy.systemKey}"\\} (\\d+)$`, "m"), "the busy system has its series");
  t.match(text, new RegExp(`^outpost_system_http_errors_total\\{system_key="${busy.systemKey}"\\} 1$`, "m"), "its 5xx");
  t.match(text, new RegExp(`^outpost_service_runs_total\\{system_key="(${busy.systemKey}|other)",service="[^"]+",outcome="failed"\\} 1$`, "m"), "runs per service");
  t.match(text, /^outpost_system_http_requests_total\{system_key="other"\} \d+$/m, "the rest are other");
  t.notOk(text.includes(quiet.systemKey), "the quiet system has none");
  t.match(text, /^# TYPE outpost_system_mqtt_connections gauge$/m, "MQTT connections per system too");
});

t.test("the access log: one line per request with the route pattern; a 5xx's line carries the id the client got", async (t) => {
  const s = await devWithSystem(platform, "access");
  const name = uniq("nowhere");
  await s.dev.get(`/admin/edges/${s.systemKey}/${name}`);
  const path = await failingWebhook(s);
  const r = await request(platform.url, "POST", path, { body: {} });
  t.equal(r.status, 500);
  const id = r.body.error.id as string;
  let line: any;
  t.ok(await waitFor(() => !!(line = logLines(platform, "request").find((l) => l.errorId === id)), 10_000), "the 5xx's line names its error id");
  t.match(line, { level: "warn", method: "POST", route: "/api/v/4/webhook/execute/:systemKey/:name", status: 500, principal: "none", systemKey: s.systemKey, ip: "127.0.0.1" });
  t.type(line.ms, "number");
  const lookup = logLines(platform, "request").find((l) => l.route === "/admin/edges/:systemKey/:name" && l.systemKey === s.systemKey);
  t.match(lookup, { level: "info", method: "GET", status: 404, principal: "developer" }, "a request's line");
  t.notOk(platform.logs().includes(name), "no name from the path");
  t.notOk(platform.logs().includes(s.devToken), "no token");
});

t.test("refused and throttled sign-ins are logged with the login they named, never the password", async (t) => {
  const o = await start({ logLevel: "info", defaultThrottlers: true });
  const s = await devWithSystem(o, "sign-ins");
  const u = await newUser(s);
  t.equal((await request(o.url, "POST", "/admin/auth", { body: { email: s.email, password: "wrong-password-1" } })).status, 401);
  const statuses = [];
  for (let i = 0; i < 4; i++) statuses.push((await s.app.post("/api/v/1/user/auth", { email: u.email, password: "wrong-password-2" })).status);
  t.same(statuses, [401, 401, 401, 429], "the 4th user sign-in is throttled");
  t.equal((await request(o.url, "POST", `/api/v/2/devices/${s.systemKey}/auth`, { body: { deviceName: "no-such-device", activeKey: "wrong-key-3" } })).status, 401);
  // (a refusal's line is written once its body is read: after the answer)
  t.ok(await waitFor(() => logLines(o, "sign-in throttled").length > 0 && logLines(o, "sign-in refused").some((l) => l.kind === "device"), 10_000), "the throttled sign-in and the last refusal");
  const refused = logLines(o, "sign-in refused");
  t.match(refused.find((l) => l.kind === "developer"), { level: "warn", login: s.email, ip: "127.0.0.1" }, "the developer's");
  t.equal(refused.filter((l) => l.kind === "user" && l.login === u.email && l.systemKey === s.systemKey).length, 3, "the user's three");
  t.match(refused.find((l) => l.kind === "device"), { login: "no-such-device", systemKey: s.systemKey }, "the device's");
  t.match(logLines(o, "sign-in throttled")[0], { level: "warn", kind: "user", login: u.email, systemKey: s.systemKey, reason: /throttled/ });
  t.notMatch(o.logs(), /wrong-password|wrong-key/, "no password or key");
});

t.test("MQTT connects, refusals and disconnects are logged with client id, principal and system", async (t) => {
  const s = await devWithSystem(platform, "mqtt-log");
  const u = await newUser(s);
  const clientId = uniq("client");
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${platform.mqttPort}`, { username: u.token, password: s.systemKey, clientId, protocolVersion: 4, reconnectPeriod: 0 });
  let on: any;
  t.ok(await waitFor(() => !!(on = logLines(platform, "mqtt connected").find((l) => l.clientId === clientId)), 10_000), "connected");
  t.match(on, { level: "info", principal: "user", who: u.email, systemKey: s.systemKey, ip: "127.0.0.1" });
  await c.endAsync();
  let off: any;
  t.ok(await waitFor(() => !!(off = logLines(platform, "mqtt disconnected").find((l) => l.clientId === clientId)), 10_000), "disconnected");
  t.match(off, { principal: "user", systemKey: s.systemKey, reason: "DISCONNECT" });
  const bad = uniq("bad");
  await mqtt.connectAsync(`mqtt://127.0.0.1:${platform.mqttPort}`, { username: "not-a-token", password: s.systemKey, clientId: bad, protocolVersion: 4, reconnectPeriod: 0 }).then((x) => x.end(true), () => {});
  let refused: any;
  t.ok(await waitFor(() => !!(refused = logLines(platform, "mqtt connect refused").find((l) => l.clientId === bad)), 10_000), "refused");
  t.match(refused, { level: "warn", systemKey: s.systemKey, principal: "unknown", reason: "invalid token" });
  t.notOk(platform.logs().includes(u.token), "no token");
});

t.test("changes by developers are logged: who, what, where", async (t) => {
  const s = await devWithSystem(platform, "changes");
  const device = uniq("pump");
  await must(s.dev.post(`/admin/devices/${s.systemKey}/${device}`, { type: "pump", state: "", active_key: "pump-key-123" }), "device");
  await must(s.dev.del(`/admin/devices/${s.systemKey}/${device}`), "device deleted");
  let lines: any[] = [];
  t.ok(await waitFor(() => (lines = logLines(platform, "admin change").filter((l) => l.params?.name === device)).length === 2, 10_000), "two changes");
  t.match(lines[0], { level: "info", developer: s.email, action: "create", route: "/admin/devices/:systemKey/:name", systemKey: s.systemKey });
  t.match(lines[1], { action: "delete", method: "DELETE" });
  t.ok(logLines(platform, "admin change").some((l) => l.route === "/admin/systemmanagement" && l.action === "create" && l.developer === s.email), "the system's creation");
  t.notOk(platform.logs().includes("pump-key-123"), "no key");
});

/** The metric names the shipped dashboard's and alert rules' queries use (a histogram's series as
 *  their family: outpost_x_bucket is outpost_x). */
function deployedMetricNames(): string[] {
  const text = readFileSync(join(process.cwd(), "deploy/grafana/outpost.json"), "utf8") + readFileSync(join(process.cwd(), "deploy/prometheus/alerts.yml"), "utf8");
  return [...new Set(text.match(/\boutpost_[a-z0-9_]+/g) ?? [])];
}

t.test("deploy/: every metric the dashboard and the alert rules use has series on a live platform's or edge's /metrics", async (t) => {
  const p = await start({ defaultThrottlers: true, args: ["--metrics-system-labels", "3", "--code-workers", "2"] });
  const s = await devWithSystem(p, "deploy");
  // services: one that answers, one that throws, one stuck in C past its timeout (its worker is replaced)
  const fine = uniq("fine"), thrower = uniq("thrower"), stuck = uniq("stuck");
  await must(s.dev.post(`/admin/code/v/1/${s.systemKey}/${fine}`, { code: `function ${fine}(req, resp) { resp.success("ok") }` }), "service");
  await must(s.dev.post(`/admin/code/v/1/${s.systemKey}/${thrower}`, { code: `function ${thrower}(req, resp) { throw new Error("no") }` }), "service");
  await must(s.dev.post(`/admin/code/v/1/${s.systemKey}/${stuck}`, { code: `function ${stuck}(req, resp) { var h = "a".repeat(3e5), n = "a".repeat(1.5e5) + "b"; resp.success(h.indexOf(n)) }`, execution_timeout: 1 }), "service");
  const run = (name: string) => s.dev.post(`/api/v/1/code/${s.systemKey}/${name}`, {});
  t.equal((await run(fine)).status, 200);
  t.equal((await run(thrower)).body?.success, false, "a failed run");
  t.equal((await run(stuck)).status, 504, "a stuck run");
  // MQTT: a client (the developer) that receives its own publish
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${p.mqttPort}`, { username: s.devToken, password: s.systemKey, clientId: uniq("c"), protocolVersion: 4, reconnectPeriod: 0 });
  await c.subscribeAsync("deploy/t");
  const got = new Promise((res) => c.once("message", res));
  await c.publishAsync("deploy/t", "x");
  await got;
  // throttling: the 4th wrong sign-in of a user
  const u = await newUser(s);
  for (let i = 0; i < 4; i++) await s.app.post("/api/v/1/user/auth", { email: u.email, password: "wrong" });
  // an edge, connected, holding a collection of its own that the platform's of the same name clashes with (failed)
  const edgeName = uniq("gw"), token = `${edgeName}-token`;
  await must(s.dev.post(`/admin/edges/${s.systemKey}/${edgeName}`, { token }), "edge");
  const edge = await start({ args: ["--mode", "edge", "--platform-url", p.url, "--system-key", s.systemKey, "--edge-name", edgeName, "--edge-token", token, "--sync-ping-ms", "500"] });
  const connected = async () => (await s.dev.get(`/admin/edges/${s.systemKey}/${edgeName}`)).body.isConnected === true;
  t.ok(await waitFor(connected, 20_000), "the edge is connected");
  let edgeToken = "";
  t.ok(await waitFor(async () => {
    const a = await request(edge.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
    edgeToken = a.body?.dev_token ?? "";
    return a.status === 200;
  }, 20_000), "a developer signs in on the edge");
  await must(request(edge.url, "POST", "/admin/collectionmanagement", { headers: { "ClearBlade-DevToken": edgeToken }, body: { name: "clash", appID: s.systemKey } }), "the edge's own collection");
  await must(s.dev.post("/admin/collectionmanagement", { name: "clash", appID: s.systemKey }), "the platform's");
  await must(s.dev.put(`/admin/edges/template/${s.systemKey}/${edgeName}`, { add: [{ def_module: "collection", def_name: "clash", mode: "sync" }] }), "template");
  const failedLine = /^outpost_sync_failed_assets\{asset_type="collection"\} 1$/m;
  t.ok(await waitFor(async () => failedLine.test((await metrics(p)).text) && failedLine.test((await metrics(edge)).text), 20_000), "the failed collection counts on both sides");

  const [platformText, edgeText] = [(await metrics(p)).text, (await metrics(edge)).text];
  c.end(true);
  const families = new Set([...seriesOf(platformText), ...seriesOf(edgeText)].map((x) => x.replace(/\{.*$/, "")));
  const names = deployedMetricNames();
  t.ok(names.length > 25, `the dashboard and alerts use ${names.length} metrics`);
  t.same(names.filter((n) => !families.has(n)), [], "each has series");
  t.notOk(families.has("outpost_no_such_metric"), "(a name without series is not found)");
});
