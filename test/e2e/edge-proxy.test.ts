// The ClearBlade-Edge relay with a real platform and a real edge: a collection query and write, and
// a service run, answered by the edge through the platform; bodies in chunks both ways and their
// bound; the caller checked on the platform and again on the edge; and the failure paths (no such
// edge, an edge of another system, an offline edge answered at once, a silent edge timed out).
import t from "tap";
import { Client, devWithSystem, isEnvelope, isErr, newUser, type Outpost, request, startOutpost, uniq, waitFor } from "./harness.ts";

const platform = await startOutpost({ args: ["--edge-request-timeout", "4"] });
const s = await devWithSystem(platform, "relay");
const SK = s.systemKey;
const EDGE = uniq("gw");

const col = await s.dev.post("/admin/collectionmanagement", { name: "readings", appID: SK });
if (col.status !== 200) throw new Error(col.text);
const COL = col.body.collectionID as string;
await s.dev.put("/admin/collectionmanagement", { id: COL, addColumn: { name: "v", type: "string" } });
const svc = await s.dev.post(`/admin/code/v/1/${SK}/where`, { code: "function where(req, resp) { resp.success({ edge: ClearBlade.edgeId(), isEdge: ClearBlade.isEdge(), size: String(req.params.blob || '').length }); }", parameters: [] });
if (svc.status !== 200) throw new Error(svc.text);
// roles: one may reach edges, one may also read the collection
const reach = await s.dev.post(`/admin/user/${SK}/roles`, { name: uniq("Reach"), edges: { permissions: 1 } });
const reader = await s.dev.post(`/admin/user/${SK}/roles`, { name: uniq("Reader"), edges: { permissions: 1 }, collections: [{ itemInfo: { id: COL }, permissions: 1 }] });
if (reach.status !== 200 || reader.status !== 200) throw new Error(reach.text + reader.text);
const plain = await newUser(s), reacher = await newUser(s), readerUser = await newUser(s);
for (const [u, role] of [[reacher, reach.body.role_id], [readerUser, reader.body.role_id]] as const) {
  const r = await s.dev.put(`/admin/user/${SK}`, { user: u.userId, changes: { roles: { add: [role] } } });
  if (r.status !== 200) throw new Error(r.text);
}

const created = await s.dev.post(`/admin/edges/${SK}/${EDGE}`, { description: "relay edge" });
if (created.status !== 200) throw new Error(created.text);
await s.dev.put(`/admin/edges/template/${SK}/${EDGE}`, { add: [
  { def_module: "collection", def_name: "readings", mode: "sync_to_edge" }, { def_module: "service", def_name: "*", mode: "sync_to_edge" },
  { def_module: "user", def_name: "*", mode: "sync_to_edge" }, { def_module: "role", def_name: "*", mode: "sync_to_edge" },
] });
const edge: Outpost = await startOutpost({ args: ["--mode", "edge", "--platform-url", platform.url, "--system-key", SK, "--edge-name", EDGE, "--edge-token", created.body.token] });
t.teardown(async () => { await edge.stop(); await platform.stop(); });
if (!(await waitFor(async () => (await s.dev.get(`/admin/edges/${SK}/${EDGE}`)).body.isConnected === true, 45_000))) throw new Error(`the edge did not connect:\n${edge.logs().slice(-2000)}`);

/** The developer through the platform to the edge. */
const viaEdge = (name = EDGE, key = SK) => s.dev.with({ "ClearBlade-SystemKey": key, "ClearBlade-Edge": name });
// the edge has what its template brings (the relay itself shows it)
if (!(await waitFor(async () => (await viaEdge().post(`/api/v/1/code/${SK}/where`, {})).status === 200, 30_000))) throw new Error(`the service did not reach the edge:\n${edge.logs().slice(-2000)}`);
const devOnEdge = new Client(edge.url, { "ClearBlade-DevToken": (await request(edge.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } })).body.dev_token });

t.test("a collection query and a write answered by the edge through the platform", async (t) => {
  // a row of the edge's own: rows of readings only come down, so the platform never has it
  const mark = uniq("edge-only");
  t.equal((await devOnEdge.post(`/api/v/1/data/${COL}`, { v: mark })).status, 200, "a row written on the edge");
  const relayed = await viaEdge().get(`/api/v/1/data/${COL}`);
  t.equal(relayed.status, 200, relayed.text);
  t.ok(relayed.body.DATA.some((r: any) => r.v === mark), "the relayed query sees the edge's row");
  t.match(String(relayed.headers["content-type"]), /application\/json/, "the edge's content type");
  t.notOk((await s.dev.get(`/api/v/1/data/${COL}`)).body.DATA.some((r: any) => r.v === mark), "the platform's own answer does not");
  // header names in any case
  const lower = await s.dev.get(`/api/v/1/data/${COL}`, { "clearblade-systemkey": SK, "clearblade-edge": EDGE });
  t.ok(lower.body.DATA?.some((r: any) => r.v === mark), "lower-case headers relay too");
  const written = uniq("via-relay");
  t.equal((await viaEdge().post(`/api/v/1/data/${COL}`, { v: written })).status, 200, "a write relayed");
  t.ok((await devOnEdge.get(`/api/v/1/data/${COL}`)).body.DATA.some((r: any) => r.v === written), "it is on the edge");
});

t.test("a service run on the edge through the platform, with a large body in chunks", async (t) => {
  const r = await viaEdge().post(`/api/v/1/code/${SK}/where`, {});
  t.equal(r.status, 200, r.text);
  t.same(r.body.results, { edge: EDGE, isEdge: true, size: 0 }, "run by the edge");
  const blob = "x".repeat(700_000);
  const big = await viaEdge().post(`/api/v/1/code/${SK}/where`, { blob });
  t.equal(big.status, 200, big.text.slice(0, 300));
  t.equal(big.body.results?.size, blob.length, "a body of several chunks arrives whole");
  const tooBig = await viaEdge().post(`/api/v/1/code/${SK}/where`, "y".repeat(9 * 1024 * 1024));
  isErr(t, tooBig, 413, undefined, "a body past 8 MB");
  // without content-length the bound holds as the body streams
  const streamed = await request(platform.url, "POST", `/api/v/1/code/${SK}/where`, { headers: { "ClearBlade-DevToken": s.devToken, "ClearBlade-SystemKey": SK, "ClearBlade-Edge": EDGE }, body: "z".repeat(9 * 1024 * 1024), chunked: true });
  t.equal(streamed.status, 413, "a chunked body past 8 MB");
  t.ok(isEnvelope(streamed.body, 413), "in the envelope");
});

t.test("the caller is checked on the platform and again on the edge", async (t) => {
  isErr(t, await request(platform.url, "GET", `/api/v/1/data/${COL}`, { headers: { "ClearBlade-SystemKey": SK, "ClearBlade-Edge": EDGE } }), 401, undefined, "no token");
  const asPlain = plain.client.with({ "ClearBlade-SystemKey": SK, "ClearBlade-Edge": EDGE });
  const refused = await asPlain.get(`/api/v/1/data/${COL}`);
  isErr(t, refused, 401, undefined, "a user whose roles do not reach the edge");
  t.match(refused.body.error?.detail, /reach edge/, "refused by the platform");
  // the users and roles reach the edge with the template
  const asReacher = reacher.client.with({ "ClearBlade-SystemKey": SK, "ClearBlade-Edge": EDGE });
  const asReader = readerUser.client.with({ "ClearBlade-SystemKey": SK, "ClearBlade-Edge": EDGE });
  t.ok(await waitFor(async () => (await asReader.get(`/api/v/1/data/${COL}`)).status === 200, 20_000), "a user who may reach the edge and read the collection");
  const edgeSays = await asReacher.get(`/api/v/1/data/${COL}`);
  isErr(t, edgeSays, 401, undefined, "a user who may reach the edge but not read the collection");
  t.notMatch(edgeSays.body.error?.detail, /reach edge/, "refused by the edge's own check");
  // a user the edge does not hold (made after the edge's users were read: only the platform knows it until sync)
  const other = await devWithSystem(platform, "other");
  const foreign = (await newUser(other)).client.with({ "ClearBlade-SystemKey": SK, "ClearBlade-Edge": EDGE });
  isErr(t, await foreign.get(`/api/v/1/data/${COL}`), 401, undefined, "a token of another system");
});

t.test("unknown, foreign and offline edges are clear errors, at once", async (t) => {
  const unknown = await viaEdge("no-such-edge").get(`/api/v/1/data/${COL}`);
  isErr(t, unknown, 404, undefined, "an unknown edge");
  const other = await devWithSystem(platform, "theirs");
  const theirs = uniq("their-gw");
  await other.dev.post(`/admin/edges/${other.systemKey}/${theirs}`, {});
  isErr(t, await viaEdge(theirs).get(`/api/v/1/data/${COL}`), 404, undefined, "another system's edge under this system's key");
  isErr(t, await viaEdge(theirs, other.systemKey).get(`/api/v/1/data/${COL}`), 401, undefined, "another system's key with this developer's token");
  const offline = uniq("off");
  await s.dev.post(`/admin/edges/${SK}/${offline}`, {});
  const t0 = Date.now();
  const r = await viaEdge(offline).get(`/api/v/1/data/${COL}`);
  isErr(t, r, 503, undefined, "an edge that is not connected");
  t.ok(Date.now() - t0 < 2_000, `answered at once (${Date.now() - t0} ms)`);
});

t.test("an edge that does not answer in time: 504, and it works again after", async (t) => {
  edge.proc.kill("SIGSTOP");
  let r;
  const t0 = Date.now();
  try { r = await viaEdge().get(`/api/v/1/data/${COL}`); } finally { edge.proc.kill("SIGCONT"); }
  const took = Date.now() - t0;
  isErr(t, r, 504, undefined, "a frozen edge");
  t.ok(took >= 3_500 && took < 9_000, `after --edge-request-timeout (4 s): ${took} ms`);
  t.ok(await waitFor(async () => (await viaEdge().get(`/api/v/1/data/${COL}`)).status === 200, 20_000), "answered again once the edge runs");
});
