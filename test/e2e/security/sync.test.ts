// The sync channel as a hostile edge would use it: a real platform, and a raw WebSocket client
// that speaks the protocol with a valid edge token. The welcome carries no password hash and no
// token; an edge's upward rows are written only to its own system's collections that its template
// sends up, and its upward messages only on topics its template relays.
import t from "tap";
import WebSocket from "ws";
import { collectionWith, type DevSystem, devWithSystem, type HttpResponse, newUser, startOutpost, uniq, waitFor } from "../harness.ts";

const o = await startOutpost();
t.teardown(() => o.stop());
const A: DevSystem = await devWithSystem(o, "sync-a");
const B: DevSystem = await devWithSystem(o, "sync-b");
function must(r: HttpResponse, what: string): HttpResponse {
  if (r.status !== 200) throw new Error(`${what}: ${r.status} ${r.text}`);
  return r;
}

const up = await collectionWith(A, [["v", "string"]], uniq("up"));
const down = await collectionWith(A, [["v", "string"]], uniq("down"));
const outside = await collectionWith(A, [["v", "string"]], uniq("outside"));
const foreign = await collectionWith(B, [["v", "string"]], uniq("foreign"));
// a user with a service account: its token must not travel to the edge either
const u = await newUser(A);
const sa = must(await A.dev.put(`/admin/user/${A.systemKey}`, { user: u.email, changes: { cb_service_account: true } }), "service account");
const serviceToken = sa.body.cb_token as string;
const EDGE = uniq("gw"), TOKEN = "edge-secret-token-1";
must(await A.dev.post(`/admin/edges/${A.systemKey}/${EDGE}`, { token: TOKEN }), "edge");
must(await A.dev.put(`/admin/edges/template/${A.systemKey}/${EDGE}`, {
  add: [
    { def_module: "collection", def_name: up.name, mode: "sync_to_platform" },
    { def_module: "collection", def_name: down.name, mode: "sync_to_edge" },
    { def_module: "topic", def_name: "up/#", mode: "sync_to_platform" },
    { def_module: "user", def_name: "*", mode: "sync_to_edge" },
  ],
}), "template");

/** A sync session: every message the platform sent, and a way to wait for one. */
async function session() {
  const ws = new WebSocket(`ws://127.0.0.1:${o.httpPort}/api/v/4/sync`);
  const got: any[] = [];
  const raw: string[] = [];
  ws.on("message", (d) => { raw.push(d.toString()); got.push(JSON.parse(d.toString())); });
  await new Promise((res, rej) => { ws.once("open", res); ws.once("error", rej); });
  const send = (m: unknown) => ws.send(JSON.stringify(m));
  const next = async (type: string, after = 0) => {
    await waitFor(() => got.slice(after).some((m) => m.t === type), 10_000, 20);
    return got.slice(after).find((m) => m.t === type);
  };
  // acknowledge every batch, as an edge does, so the platform keeps going
  ws.on("message", (d) => {
    const m = JSON.parse(d.toString());
    if (m.t === "batch") send({ t: "ack", upTo: m.upTo, snapshot: m.snapshot, results: [] });
  });
  send({ t: "hello", systemKey: A.systemKey, edge: EDGE, token: TOKEN, cursor: 0, version: "test", os: "linux", arch: "x64", failures: [], synced: false });
  return { ws, got, raw, send, next, close: () => ws.close() };
}

const rows = async (sys: DevSystem, id: string) => ((await sys.dev.get(`/api/v/1/data/${id}`)).body.DATA ?? []) as { v: string }[];
const hlc = () => `${Date.now().toString().padStart(15, "0")}-000000-edge:${EDGE}`;
const row = (c: { id: string; name: string }, v: string) => ({ collection_id: c.id, collection: c.name, item_id: crypto.randomUUID(), op: "upsert", values: { v }, hlc: hlc() });

t.test("the welcome and the snapshot carry no password hash of the developer and no token", async (t) => {
  const s = await session();
  const welcome = await s.next("welcome");
  t.ok(welcome, "welcomed");
  t.equal(welcome.owner.id, A.devId, "the owner's id");
  t.notOk("password_hash" in welcome.owner, "no password hash of the developer");
  t.notOk(welcome.owner.admin, "no admin right");
  await waitFor(() => s.got.some((m) => m.t === "snapshot_end"), 10_000);
  const all = s.raw.join("\n");
  t.notOk(all.includes(A.devToken), "no developer token");
  t.notOk(all.includes(serviceToken), "no service account token");
  t.notOk(all.includes("__service_token"), "no sealed service account token");
  t.notOk(all.includes(TOKEN), "not even its own token");
  t.ok(s.raw.some((r) => r.includes(u.email)), "(the template's users do arrive)");
  s.close();
});

t.test("upward rows: only the edge's own system's collections its template sends up", async (t) => {
  const s = await session();
  await s.next("welcome");
  const items = [
    row(foreign, "into another system"),
    row(outside, "outside the template"),
    row(down, "into a sync_to_edge collection"),
    { ...row(up, "bad stamp"), hlc: "9999999999999999999" },
    row(up, "allowed"),
  ].map((r, i) => ({ id: i + 1, kind: "row", body: JSON.stringify(r) }));
  const at = s.got.length;
  s.send({ t: "up", items: [...items, { id: 6, kind: "row", body: "{not json" }] });
  const ack = await s.next("up_ack", at);
  t.equal(ack?.upTo, 6, "acknowledged (dropped items too, so a confused edge does not resend them)");
  t.same((await rows(A, up.id)).map((r) => r.v), ["allowed"], "the collection it sends up gets its row");
  t.same(await rows(B, foreign.id), [], "nothing in the other system's collection");
  t.same(await rows(A, outside.id), [], "nothing in a collection outside its template");
  t.same(await rows(A, down.id), [], "nothing in a sync_to_edge collection");
  s.close();
});

t.test("upward messages: only on topics its template relays", async (t) => {
  const s = await session();
  await s.next("welcome");
  const history = async (topic: string) => (await A.dev.get(`/api/v/1/message/${A.systemKey}?topic=${encodeURIComponent(topic)}&count=10`)).body as unknown[];
  const msg = (topic: string) => JSON.stringify({ topic, payload: Buffer.from("hi").toString("base64"), qos: 0 });
  const at = s.got.length;
  s.send({ t: "up", items: [{ id: 1, kind: "message", body: msg("admin/commands") }, { id: 2, kind: "message", body: msg("up/ok") }] });
  await s.next("up_ack", at);
  t.ok(await waitFor(async () => (await history("up/ok")).length === 1, 5_000), "a relayed topic is published");
  t.same(await history("admin/commands"), [], "a topic the template does not relay is not");
  s.close();
});
