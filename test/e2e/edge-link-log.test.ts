// The link's log a platform keeps per edge, black-box, with a real edge process: `connected` (the
// holding node, the edge's build and OS, a full snapshot or the position it resumed from),
// `disconnected` with its cause (closed by the edge, ping timeout, replaced by a newer link) and
// how long the link lasted, `refused` (a wrong token); the newest 100 kept; the route's failure
// paths (bad limit, unknown edge or system, other callers), and the log going with its edge.
import t from "tap";
import WebSocket from "ws";
import { Client, type DevSystem, devWithSystem, isErr, must, newUser, type Outpost, request, startOutpost, uniq, waitFor } from "./harness.ts";

const started: Outpost[] = [];
t.teardown(async () => { for (const o of started) await o.stop().catch(() => {}); });

const platform = await startOutpost({ args: ["--log-level", "info"] });
started.push(platform);
const WS_URL = platform.url.replace("http:", "ws:") + "/api/v/4/sync";

async function edgeRecord(sys: DevSystem) {
  const edge = uniq("gw"), token = `${edge}-token`;
  await must(sys.dev.post(`/admin/edges/${sys.systemKey}/${edge}`, { token }), "edge");
  return { edge, token };
}
const linkOf = async (sys: DevSystem, edge: string, limit = 50) => must(sys.dev.get(`/admin/edges/${sys.systemKey}/${edge}/link?limit=${limit}`), "link log") as Promise<{ time: string; event: string; detail: any }[]>;
/** Waits until the newest event is `event` (and, when given, `also` holds of it); returns it. */
async function newest(sys: DevSystem, edge: string, event: string, also: (d: any) => boolean = () => true) {
  let last: any;
  await waitFor(async () => { last = (await linkOf(sys, edge, 1))[0]; return last?.event === event && also(last.detail); }, 15_000);
  return last;
}

/** A link played by a WebSocket: says hello, resolves with the first answer (welcome or error). */
async function rawHello(sys: DevSystem, e: { edge: string; token: string }, extra: Record<string, unknown> = {}) {
  const ws = new WebSocket(WS_URL);
  const closed = new Promise<number>((r) => ws.on("close", (code) => r(code)));
  const first = new Promise<any>((r) => ws.once("message", (d) => r(JSON.parse(String(d)))));
  await new Promise((r) => ws.once("open", r));
  ws.send(JSON.stringify({ t: "hello", systemKey: sys.systemKey, edge: e.edge, token: e.token, cursor: 0, ...extra }));
  return { ws, closed, answer: await first };
}

t.test("a real edge's link: connected with a snapshot, closed by the edge, resumed, refused, dropped silent, replaced", async (t) => {
  const sys = await devWithSystem(platform, "linklog");
  const e = await edgeRecord(sys);
  const edgeArgs = ["--mode", "edge", "--platform-url", platform.url, "--system-key", sys.systemKey, "--edge-name", e.edge, "--edge-token", e.token, "--sync-ping-ms", "500", "--log-level", "info"];
  t.same(await linkOf(sys, e.edge), [], "a new edge's log is empty");
  const first = await startOutpost({ args: edgeArgs, keepData: true });
  started.push(first);
  const c = await newest(sys, e.edge, "connected");
  t.ok(c, "connected");
  t.match(c.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/, "time in RFC 3339");
  t.equal(c.detail.snapshot, true, "a new edge gets a full snapshot");
  t.type(c.detail.node, "string", "the node holding the link");
  t.ok(c.detail.version && c.detail.os && c.detail.arch, `the edge's build and OS (${c.detail.version}, ${c.detail.os}, ${c.detail.arch})`);
  // the edge has its snapshot before it stops, so that it resumes from its position next time
  t.ok(await waitFor(async () => (await sys.dev.get(`/admin/edges/${sys.systemKey}/${e.edge}`)).body.isConnected === true, 15_000), "the record says connected");
  t.ok(await waitFor(async () => (await request(first.url, "GET", "/api/v/4/edge/status", { headers: { "ClearBlade-DevToken": e.token } })).body?.snapshot_done === true, 15_000), "the edge holds its snapshot");
  await first.stop();
  const d = await newest(sys, e.edge, "disconnected");
  t.match(d?.detail.cause, /^closed by the edge/, `the cause: ${d?.detail.cause}`);
  t.type(d?.detail.lasted_s, "number", "how long the link lasted");

  const again = await startOutpost({ args: edgeArgs, dataDir: first.dataDir });
  started.push(again);
  const r = await newest(sys, e.edge, "connected");
  t.equal(r.detail.resumed_from, 0, `connected again, resumed from its position (the log is empty): ${JSON.stringify(r.detail)}`);
  t.notOk(r.detail.snapshot, "no snapshot");
  await again.stop();
  await newest(sys, e.edge, "disconnected");

  const wrong = await rawHello(sys, { edge: e.edge, token: "not-the-token" });
  t.equal(wrong.answer.t, "error", "a wrong token is refused");
  const f = await newest(sys, e.edge, "refused");
  t.equal(f?.detail.reason, "wrong token", "refused: wrong token");

  // a link that says hello and then nothing is dropped after two ping periods
  const silent = await rawHello(sys, e, { pingMs: 300 });
  t.equal(silent.answer.t, "welcome", "welcomed");
  await silent.closed;
  const s = await newest(sys, e.edge, "disconnected");
  t.match(s?.detail.cause, /^ping timeout/, `the cause: ${s?.detail.cause}`);

  const older = await rawHello(sys, e, { version: "older" });
  const newer = await rawHello(sys, e, { version: "newer" });
  t.equal(await older.closed, 4002, "the older link is closed");
  const log = await linkOf(sys, e.edge, 3);
  t.same(log.map((x) => x.event), ["connected", "disconnected", "connected"], "newest first");
  t.equal(log[0]!.detail.version, "newer", "the newer link's");
  t.equal(log[1]!.detail.cause, "replaced by a newer link", "the older link was replaced");
  newer.ws.close(1000);
  await newest(sys, e.edge, "disconnected");
});

t.test("more than 100 events: the newest 100 are kept", async (t) => {
  const sys = await devWithSystem(platform, "linklog-trim");
  const e = await edgeRecord(sys);
  // 55 links: 110 events
  for (let i = 0; i < 55; i++) {
    const l = await rawHello(sys, e, { version: `v${i}` });
    if (l.answer.t !== "welcome") throw new Error(`link ${i}: ${JSON.stringify(l.answer)}`);
    l.ws.close(1000);
    await l.closed;
  }
  await newest(sys, e.edge, "disconnected");
  const log = await linkOf(sys, e.edge, 100);
  t.equal(log.length, 100, "100 answered");
  const versions = log.filter((x) => x.event === "connected").map((x) => x.detail.version);
  t.same(versions, Array.from({ length: 50 }, (_, i) => `v${54 - i}`), "the newest 50 links, newest first");
  t.equal(log[99]!.event, "connected", "the oldest kept is the connect of link 5");
  t.equal((await linkOf(sys, e.edge)).length, 50, "50 by default");
  t.equal((await linkOf(sys, e.edge, 1)).length, 1, "limit=1");
});

t.test("the route's failure paths, and the log going with its edge", async (t) => {
  const sys = await devWithSystem(platform, "linklog-fail");
  const e = await edgeRecord(sys);
  const base = `/admin/edges/${sys.systemKey}/${e.edge}/link`;
  for (const bad of ["0", "101", "x", "1.5", "-1", "1e9"]) isErr(t, await sys.dev.get(`${base}?limit=${bad}`), 400, `limit=${bad}`);
  t.equal((await sys.dev.get(`${base}?limit=100`)).status, 200, "limit=100");
  t.equal((await sys.dev.get(`/api/v/3/edges/${sys.systemKey}/${e.edge}/link`)).status, 200, "also under /api/v/3/edges");
  isErr(t, await sys.dev.get(`/admin/edges/${sys.systemKey}/no-such-edge/link`), 404, "an unknown edge");
  isErr(t, await sys.dev.get(`/admin/edges/nosuchsystem0000/${e.edge}/link`), 404, "an unknown system");
  // the same rights as reading the edge's sync status
  const status = `/admin/${sys.systemKey}/sync/edge/status/${e.edge}`;
  const other = await devWithSystem(platform, "linklog-other");
  const user = await newUser(sys);
  const anonymous = new Client(platform.url, {}), badToken = new Client(platform.url, { "ClearBlade-DevToken": "not-a-token" });
  for (const [who, c] of [["another system's developer", other.dev], ["a user of the system", user.client], ["no token", anonymous], ["a token that is none", badToken]] as const) {
    const a = await c.get(base), b = await c.get(status);
    t.ok(a.status >= 400 && a.status < 500, `${who}: refused (${a.status})`);
    isErr(t, a, b.status, `${who}: as the status route answers`);
  }

  const l = await rawHello(sys, e);
  l.ws.close(1000);
  await newest(sys, e.edge, "disconnected");
  await must(sys.dev.del(`/admin/edges/${sys.systemKey}/${e.edge}`), "delete the edge");
  isErr(t, await sys.dev.get(base), 404, "a deleted edge");
  await must(sys.dev.post(`/admin/edges/${sys.systemKey}/${e.edge}`, { token: e.token }), "the edge again");
  t.same(await linkOf(sys, e.edge), [], "made again, its log starts empty");
});
