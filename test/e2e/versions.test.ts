// Builds that can be told apart, black-box: the version and commit the binary is stamped with,
// on --version, /api/about, /health and the edge record the platform keeps; a database a newer
// version migrated refused (exit 2, one line saying why and what to do) on the run's engine; and
// an edge and a platform that speak no common sync protocol refusing each other, with the reason
// logged on both sides and shown in the edge's status, the platform's sync status and
// `outpost status`. The "other release" is this binary claiming another protocol through the
// test-only OUTPOST_TEST_SYNC_PROTOCOL.
import { join } from "node:path";
import pg from "pg";
import t from "tap";
import { type DevSystem, devWithSystem, must, type Outpost, pgDatabaseOf, request, runBin, startOutpost, TEST_DB, testDbArgs, uniq, waitFor } from "./harness.ts";
import { pgUrlFor } from "../pgdb.ts";

const started: Outpost[] = [];
t.teardown(async () => { for (const o of started) await o.stop().catch(() => {}); });
const start = async (...a: Parameters<typeof startOutpost>) => { const o = await startOutpost(...a); started.push(o); return o; };

const [, VERSION = "", COMMIT = ""] = /^outpost (\S+) \(commit (\S+)\)\n$/.exec((await runBin(["--version"])).stdout) ?? [];
const BUILD = `${VERSION} (commit ${COMMIT})`;

t.test("--version, /api/about and /health tell the build", async (t) => {
  t.match(VERSION, /^\d+\.\d+\.\d+/, `--version: outpost <version> (commit <commit>): ${BUILD}`);
  t.match(COMMIT, /^([0-9a-f]{7,}(-dirty)?|unknown)$/, "a commit");
  const o = await start();
  const about = await request(o.url, "GET", "/api/about");
  t.match(about.body, { about: "Outpost", version: VERSION, commit: COMMIT }, "/api/about");
  const health = await request(o.url, "GET", "/health");
  t.same(health.body, { status: "ok", version: VERSION, commit: COMMIT }, "/health");
});

t.test("a database a newer version migrated is refused: exit 2, saying why and what to do", async (t) => {
  const o = await start({ keepData: true, logLevel: "info" });
  await o.stop();
  const db = await testDbArgs(o.dataDir, []);
  // what a newer binary leaves: a migration this one does not know
  const future = "INSERT INTO schema_migrations(version, name, applied_at) VALUES (100000, 'from the future', '')";
  if (TEST_DB === "postgres") {
    const c = new pg.Client({ connectionString: pgUrlFor(pgDatabaseOf(o.dataDir)) });
    await c.connect();
    try { await c.query(future); } finally { await c.end(); }
  } else {
    const { default: Database } = await import("libsql");
    const file = new Database(join(o.dataDir, "outpost.db"));
    file.prepare(future).run();
    file.close();
  }
  const r = await runBin(["--data-dir", o.dataDir, ...db, "--http-port", "0", "--mqtt-port", "0", "--mqtt-ws-port", "0", "--mqtt-tls-port", "0", "--mqtt-wss-port", "0"], { timeoutMs: 15_000 });
  t.equal(r.code, 2, `exit 2 (${TEST_DB})`);
  t.match(r.stderr, new RegExp(`^outpost: the database \\S+ was written by a newer version of Outpost \\(schema version 100000; this one, ${VERSION.replace(/[.+]/g, "\\$&")}, knows up to \\d+\\): run that version or a newer one, or restore a backup made by this one`), `the message: ${r.stderr}`);
  t.equal(r.stderr.trim().split("\n").length, 1, "one line, no stack trace");
});

// ---- sync protocol ----------------------------------------------------------------------------

const platform = await start({ logLevel: "info" });

async function edgeOf(sys: DevSystem) {
  const edge = uniq("gw"), token = `${edge}-token`;
  await must(sys.dev.post(`/admin/edges/${sys.systemKey}/${edge}`, { token }), "edge");
  return { edge, token };
}
const startEdge = (sys: DevSystem, e: { edge: string; token: string }, platformUrl: string, env: Record<string, string> = {}) =>
  start({ env, logLevel: "info", args: ["--mode", "edge", "--platform-url", platformUrl, "--system-key", sys.systemKey, "--edge-name", e.edge, "--edge-token", e.token, "--sync-ping-ms", "500"] });
const edgeStatus = async (o: Outpost, token: string) => must(request(o.url, "GET", "/api/v/4/edge/status", { headers: { "ClearBlade-DevToken": token } }), "edge status");
const protocolEntry = async (sys: DevSystem, edge: string) =>
  ((await must(sys.dev.get(`/admin/${sys.systemKey}/sync/edge/status/${edge}`), "sync status")) as any[]).find((a) => a.asset_type === "protocol");
const logLine = (o: Outpost, msg: string) => o.logs().split("\n").filter((l) => l.includes(`"msg":"${msg}"`)).map((l) => JSON.parse(l))[0];

t.test("a compatible pair: the platform's record of the edge names its build; the edge logs the platform's", async (t) => {
  const sys = await devWithSystem(platform, "compatible");
  const e = await edgeOf(sys);
  const edge = await startEdge(sys, e, platform.url);
  t.ok(await waitFor(async () => (await sys.dev.get(`/admin/edges/${sys.systemKey}/${e.edge}`)).body.isConnected === true, 20_000), "connected");
  t.equal((await sys.dev.get(`/admin/edges/${sys.systemKey}/${e.edge}`)).body.last_seen_version, BUILD, "last_seen_version: the edge's version and commit");
  t.ok(await waitFor(() => !!logLine(edge, "connected to the platform")), "the edge logs its connection");
  t.equal(logLine(edge, "connected to the platform").platform, BUILD, "with the platform's build");
  await edge.stop();
});

t.test("an edge of a release speaking another protocol: refused, the reason in both logs, the platform's status and the edge's", async (t) => {
  const sys = await devWithSystem(platform, "edge-newer");
  const e = await edgeOf(sys);
  const edge = await startEdge(sys, e, platform.url, { OUTPOST_TEST_SYNC_PROTOCOL: "99" });
  t.ok(await waitFor(() => !!logLine(platform, "edge refused: its sync protocol is not one this platform speaks"), 20_000), "the platform logs the refusal");
  const p = logLine(platform, "edge refused: its sync protocol is not one this platform speaks");
  t.equal(p.edge, `${sys.systemKey}/${e.edge}`, "naming the edge");
  t.match(p.reason, /^the edge speaks sync protocol 99; this platform speaks \d+ to \d+$/, "why");
  t.equal(p.version, BUILD, "and the edge's build");
  t.ok(await waitFor(() => !!logLine(edge, "the platform refused the edge"), 10_000), "the edge logs it");
  t.match(logLine(edge, "the platform refused the edge").message, /the edge speaks sync protocol 99; this platform speaks/, "with the platform's reason");
  t.match(await protocolEntry(sys, e.edge), { status: "failed", last_error: /the edge speaks sync protocol 99/ }, "the platform's sync status says so");
  const st = await edgeStatus(edge, e.token);
  t.equal(st.connected, false, "not connected");
  t.match(st.refused, /the edge speaks sync protocol 99/, "the edge's status says why");
  t.equal((await sys.dev.get(`/admin/edges/${sys.systemKey}/${e.edge}`)).body.isConnected, false, "the platform's record: not connected");
});

t.test("a platform of a release speaking another protocol: the edge refuses it, the reason in both logs and both statuses", async (t) => {
  const other = await start({ logLevel: "info", env: { OUTPOST_TEST_SYNC_PROTOCOL: "99" } });
  const sys = await devWithSystem(other, "platform-newer");
  const e = await edgeOf(sys);
  const edge = await startEdge(sys, e, other.url);
  t.ok(await waitFor(() => !!logLine(edge, "the platform's sync protocol is not one this edge speaks"), 20_000), "the edge logs the refusal");
  const l = logLine(edge, "the platform's sync protocol is not one this edge speaks");
  t.match(l.message, /^the platform speaks sync protocol 99; this edge speaks \d+ to \d+$/, "why");
  t.equal(l.platform, BUILD, "and the platform's build");
  t.ok(await waitFor(() => !!logLine(other, "edge refused this platform: its sync protocol is not one the edge speaks"), 10_000), "the platform logs it");
  const p = logLine(other, "edge refused this platform: its sync protocol is not one the edge speaks");
  t.equal(p.edge, `${sys.systemKey}/${e.edge}`, "naming the edge");
  t.match(p.reason, /^the platform speaks sync protocol 99; this edge speaks/, "with the edge's reason");
  t.match(await protocolEntry(sys, e.edge), { status: "failed", last_error: /^the edge refused this platform: the platform speaks sync protocol 99/ }, "the platform's sync status says so");
  t.match((await edgeStatus(edge, e.token)).refused, /the platform speaks sync protocol 99/, "the edge's status too");
  const cli = await runBin(["status", "--mode", "edge", "--platform-url", other.url, "--system-key", sys.systemKey, "--edge-name", e.edge, "--edge-token", e.token, "--http-port", String(edge.httpPort)], { timeoutMs: 30_000 });
  t.equal(cli.code, 3, "outpost status: exit 3");
  t.match(cli.stdout, /REFUSED \(the platform speaks sync protocol 99/, `and the refusal: ${cli.stdout}`);
});
