// Diagnosis of an edge's link, black-box: an edge that cannot reach its platform logs each cause
// (a host name that does not resolve, a port nothing listens on, an address that does not answer,
// an HTTP server that is not the platform, a certificate it does not trust, the platform refusing
// its token) at once and then not more often than --sync-log-ms, and its status (the API and
// `outpost status` on the edge) says why; the platform logs the edges it refuses (once per period
// per edge) and keeps the last refusal and its time on the edge record, which its routes and
// `outpost status` show.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t, { type Test } from "tap";
import { devWithSystem, freePort, hasCommand, must, needs, ok200, type Outpost, request, runBin, startOutpost, testCertificates, uniq, waitFor } from "./harness.ts";

const dir = mkdtempSync(join(tmpdir(), "outpost-link-"));
const procs: Outpost[] = [];
const closers: (() => void)[] = [];
t.teardown(async () => {
  for (const p of procs.reverse()) await p.stop().catch(() => {});
  for (const c of closers) c();
  rmSync(dir, { recursive: true, force: true });
});

const platform = await startOutpost({ args: ["--log-level", "info"] });
procs.push(platform);
const s = await devWithSystem(platform, "links");
const SK = s.systemKey;

const edgeArgs = (name: string, token: string, platformUrl: string) => ["--mode", "edge", "--platform-url", platformUrl, "--system-key", SK, "--edge-name", name, "--edge-token", token];
async function startEdge(name: string, token: string, platformUrl: string, extra: string[] = []) {
  const e = await startOutpost({ args: [...edgeArgs(name, token, platformUrl), "--log-level", "info", ...extra] });
  procs.push(e);
  return e;
}
const localStatus = async (e: Outpost, token: string) => (await request(e.url, "GET", "/api/v/4/edge/status", { headers: { "ClearBlade-DevToken": token } })).body;
/** The log lines of a process with this message, parsed. */
const lines = (o: Outpost, msg: string) => o.logs().split("\n").filter((l) => l.includes(`"msg":"${msg}"`)).map((l) => JSON.parse(l));
/** Waits until the edge has tried and failed `n` times since it started (its status counts them). */
const tried = (e: Outpost, token: string, n: number, ms = 20_000) => waitFor(async () => ((await localStatus(e, token)).link_error?.attempts ?? 0) >= n, ms, 100);

/** An edge that cannot reach its platform: one log line naming the cause however many tries
 *  (the default period is a minute), the same cause in its status and in `outpost status`. */
async function unreachable(t: Test, platformUrl: string, cause: string, message: RegExp, tries = 4) {
  const name = uniq("gw"), token = `${name}-token`;
  const e = await startEdge(name, token, platformUrl);
  t.ok(await tried(e, token, tries), `the edge tried ${tries} times`);
  const st = await localStatus(e, token);
  t.match(st.link_error, { cause, message }, `its status: ${st.link_error?.cause}: ${st.link_error?.message}`);
  t.equal(st.connected, false);
  const logged = lines(e, "cannot reach the platform");
  t.equal(logged.length, 1, `one log line for ${st.link_error.attempts} tries`);
  t.match(logged[0], { level: "warn", cause, message, url: platformUrl, attempts: 1 }, "naming the cause");
  const cli = await runBin(["status", ...edgeArgs(name, token, platformUrl), "--http-port", String(e.httpPort)], { timeoutMs: 20_000 });
  t.equal(cli.code, 3, `outpost status on the edge: exit 3 (${cli.stderr})`);
  t.match(cli.stdout, new RegExp(`UNREACHABLE.*\\n  ${cause}: `), `and the cause:\n${cli.stdout}`);
  return e;
}

t.test("a host name that does not resolve", async (t) => {
  await unreachable(t, "http://no-such-host.invalid:9000", "dns", /the platform's host name in no-such-host\.invalid:9000 does not resolve/);
});

t.test("a port nothing listens on", async (t) => {
  const port = await freePort();
  await unreachable(t, `http://127.0.0.1:${port}`, "tcp", new RegExp(`connection refused by 127\\.0\\.0\\.1:${port}`));
});

t.test("an HTTP server that is not the platform", async (t) => {
  const srv = http.createServer((_req, res) => { res.statusCode = 404; res.end("not here"); });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
  closers.push(() => srv.close());
  const port = (srv.address() as net.AddressInfo).port;
  await unreachable(t, `http://127.0.0.1:${port}`, "http", /answered HTTP 404 instead of opening the sync channel/);
});

t.test("an address that never answers", async (t) => {
  // a listener that takes connections and says nothing: the upgrade is never answered
  const held: net.Socket[] = [];
  const srv = net.createServer((c) => { held.push(c); });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
  closers.push(() => { for (const c of held) c.destroy(); srv.close(); });
  const port = (srv.address() as net.AddressInfo).port;
  await unreachable(t, `http://127.0.0.1:${port}`, "timeout", /did not answer within 3 s/, 2);
});

t.test("a certificate the edge does not trust", await needs("openssl", hasCommand("openssl")), async (t) => {
  const certs = testCertificates(mkdtempSync(join(dir, "certs-")));
  const srv = https.createServer({ cert: readFileSync(certs.cert), key: readFileSync(certs.key) }, (_req, res) => res.end());
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
  closers.push(() => srv.close());
  const port = (srv.address() as net.AddressInfo).port;
  await unreachable(t, `https://127.0.0.1:${port}`, "tls", /TLS with 127\.0\.0\.1:\d+ failed: .*certificate/);
});

t.test("the same cause again is logged once per --sync-log-ms, with the tries in between", async (t) => {
  const name = uniq("gw"), token = `${name}-token`;
  const e = await startEdge(name, token, `http://127.0.0.1:${await freePort()}`, ["--sync-log-ms", "1500"]);
  t.ok(await waitFor(() => lines(e, "cannot reach the platform").length >= 3, 20_000), "three lines");
  const l = lines(e, "cannot reach the platform");
  for (let i = 1; i < l.length; i++) {
    t.ok(Date.parse(l[i].time) - Date.parse(l[i - 1].time) >= 1500, `line ${i + 1} came ${Date.parse(l[i].time) - Date.parse(l[i - 1].time)} ms after the one before`);
    t.ok(l[i].attemptsSinceLastLine >= 1 && l[i].attempts === l[i - 1].attempts + l[i].attemptsSinceLastLine, `and counts the tries since (${l[i].attemptsSinceLastLine})`);
  }
});

t.test("a wrong token: the edge and the platform say so, once per period; the record keeps it", async (t) => {
  const name = uniq("gw"), token = `${name}-token`;
  await must(s.dev.post(`/admin/edges/${SK}/${name}`, { token }), "edge record");
  const wrong = `${token}-not`;
  const e = await startEdge(name, wrong, platform.url);
  t.ok(await tried(e, wrong, 4), "the edge tried 4 times");
  const st = await localStatus(e, wrong);
  t.match(st.link_error, { cause: "refused", message: /the platform refused this edge's name or token/ }, "its status says the platform refused it");
  t.match(st.refused, /wrong token/, "and why");
  const edgeLines = lines(e, "the platform refused the edge");
  t.equal(edgeLines.length, 1, `the edge logged it once for ${st.link_error.attempts} refusals`);
  t.match(edgeLines[0], { level: "error", cause: "refused", message: /name or token/ });

  // the platform: one line, and the record's time moves on as refusals go on (written every few seconds)
  const record = async () => must(s.dev.get(`/admin/edges/${SK}/${name}`), "record");
  const first = await record();
  t.equal(first.last_refusal, "wrong token", "the record keeps why");
  t.type(first.last_refusal_at, "number", "and when");
  t.ok(await waitFor(async () => (await record()).last_refusal_at > first.last_refusal_at, 20_000, 250), "refused again later, the record says when");
  const refused = lines(platform, "edge refused").filter((l) => l.edge === `${SK}/${name}`);
  t.equal(refused.length, 1, "the platform logged it once");
  t.match(refused[0], { level: "warn", reason: "wrong token", from: "127.0.0.1" }, "with why and from where");
  const onApi = await must(s.dev.get(`/api/v/3/edges/${SK}/${name}`), "the other path");
  t.equal(onApi.last_refusal, "wrong token", "on both edge routes");

  // outpost status against the platform shows it: one edge, and the fleet
  const fleet = ["status", "--platform-url", platform.url, "--system-key", SK, "--dev-token", s.devToken];
  const one = await runBin([...fleet, "--edge", name], { timeoutMs: 20_000 });
  t.equal(one.code, 3, "exit 3: unreachable");
  t.match(one.stdout, /^last refused \d+s ago: wrong token$/m, one.stdout);
  const all = await runBin(fleet, { timeoutMs: 20_000 });
  t.match(all.stdout, new RegExp(`^EDGE\\s+LAST REFUSED\\s+WHY\\n(.*\\n)*${name}\\s+\\d+s ago\\s+wrong token$`, "m"), all.stdout);
  const json = JSON.parse((await runBin([...fleet, "--json"], { timeoutMs: 20_000 })).stdout);
  t.match(json.edges.find((x: any) => x.name === name), { connected: false, last_refusal: "wrong token" }, "--json too");

  // put right on the platform: the edge is welcomed and says so, its status clears
  ok200(t, await s.dev.put(`/admin/edges/${SK}/${name}`, { token: wrong }), "the record takes the edge's token");
  t.ok(await waitFor(async () => (await localStatus(e, wrong)).connected === true, 20_000), "connected");
  const after = await localStatus(e, wrong);
  t.equal(after.link_error, null, "no link error any more");
  t.equal(after.refused, "");
  const back = lines(e, "the platform is reachable again")[0];
  t.ok(back?.lastCause === "refused" && back.after >= 4, `the edge logs that the link is back, after its refused tries (${JSON.stringify(back)})`);
  t.equal((await record()).last_refusal, "wrong token", "the record keeps the last refusal with its time");
});

t.test("an edge the platform does not know: logged with its name", async (t) => {
  const name = uniq("ghost"), token = `${name}-token`;
  const e = await startEdge(name, token, platform.url);
  t.ok(await tried(e, token, 3), "tried 3 times");
  const l = lines(platform, "edge refused").filter((x) => x.edgeName === name);
  t.equal(l.length, 1, "one line");
  t.match(l[0], { reason: `no edge '${name}' in system ${SK}` });
});
