// The ClearBlade-Edge relay and remote operations on a cluster, black-box: two platform nodes on
// one database and a private redis-server, an edge linked to node A, every request sent to node B,
// which asks A over the nodes' bus. A collection query and a service run on the edge, bodies of a
// few MB both ways and their 8 MiB bound, remote operations (command-exec, config), and the failure
// paths: an unknown edge (404), an edge that is not connected (503 at once), and node A killed
// while it holds the edge's link (a clear error soon, not a wait for the request's time limit).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { Client, devWithSystem, hasCommand, isErr, must, needs, type Outpost, request, startOutpost, startTwoNodes, uniq, waitFor } from "./harness.ts";

const closers: (() => Promise<void> | void)[] = [];
const dirs: string[] = [];
t.teardown(async () => {
  for (const c of closers.reverse()) await c();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const newDir = () => { const d = mkdtempSync(join(tmpdir(), "outpost-proxy-cluster-")); dirs.push(d); return d; };

async function main() {
  const { nodes: [A, B], redisUp, db } = await startTwoNodes("proxy-cluster", closers, ["--edge-request-timeout", "30", "--log-level", "info"]);
  if (!redisUp) throw new Error("redis-server did not start");
  t.comment(`shared database: ${db.startsWith("file:") ? "libSQL file" : "PostgreSQL"}`);

  const s = await devWithSystem({ url: A.url }, "proxy-cluster");
  const SK = s.systemKey;
  const EDGE = uniq("gw");
  const onB = new Client(B.url, s.dev.headers);
  const col = await must(s.dev.post("/admin/collectionmanagement", { name: "readings", appID: SK }), "collection");
  const COL = col.collectionID as string;
  await must(s.dev.put("/admin/collectionmanagement", { id: COL, addColumn: { name: "v", type: "string" } }), "column");
  // answers the size of what it got and, when asked, a string of `answer` characters
  await must(s.dev.post(`/admin/code/v/1/${SK}/where`, { code: "function where(req, resp) { resp.success({ edge: ClearBlade.edgeId(), size: String(req.params.blob || '').length, big: 'a'.repeat(req.params.answer || 0) }); }", parameters: [] }), "service");
  const created = await must(s.dev.post(`/admin/edges/${SK}/${EDGE}`, { description: "edge on node a" }), "edge");
  await must(s.dev.put(`/admin/edges/template/${SK}/${EDGE}`, { add: [
    { def_module: "collection", def_name: "readings", mode: "sync_to_edge" }, { def_module: "service", def_name: "*", mode: "sync_to_edge" },
  ] }), "template");
  const commands = join(newDir(), "commands.txt");
  writeFileSync(commands, "echo hello from the edge\n");
  const edge: Outpost = await startOutpost({ args: ["--mode", "edge", "--platform-url", A.url, "--system-key", SK, "--edge-name", EDGE, "--edge-token", created.token,
    "--edge-commands-file", commands] });
  closers.push(() => edge.stop().then(() => {}));
  const record = async (via = onB) => (await via.get(`/admin/edges/${SK}/${EDGE}`)).body;
  if (!(await waitFor(async () => (await record()).isConnected === true, 45_000))) throw new Error(`the edge did not connect:\n${edge.logs().slice(-2000)}`);

  /** The developer through node B to the edge (linked to node A). */
  const viaB = (name = EDGE) => onB.with({ "ClearBlade-SystemKey": SK, "ClearBlade-Edge": name });
  if (!(await waitFor(async () => (await viaB().post(`/api/v/1/code/${SK}/where`, {})).status === 200, 30_000))) throw new Error(`the service did not reach the edge:\n${edge.logs().slice(-2000)}`);
  const devOnEdge = new Client(edge.url, { "ClearBlade-DevToken": (await request(edge.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } })).body.dev_token });

  t.test("the edge is linked to node A, the requests go to node B", async (t) => {
    t.equal((await record()).isConnected, true, "node B sees the edge connected");
    t.match(A.logs(), new RegExp(`edge connected[^\\n]*${EDGE}|${EDGE}[^\\n]*connected`), "node A holds its link");
  });

  t.test("a collection query and a write answered by the edge through node B", async (t) => {
    const mark = uniq("edge-only");
    await must(devOnEdge.post(`/api/v/1/data/${COL}`, { v: mark }), "row on the edge");
    const relayed = await viaB().get(`/api/v/1/data/${COL}`);
    t.equal(relayed.status, 200, relayed.text);
    t.ok(relayed.body.DATA?.some((r: any) => r.v === mark), "the relayed query sees the edge's own row");
    t.match(String(relayed.headers["content-type"]), /application\/json/, "the edge's content type");
    t.notOk((await onB.get(`/api/v/1/data/${COL}`)).body.DATA.some((r: any) => r.v === mark), "node B's own answer does not");
    const written = uniq("via-b");
    t.equal((await viaB().post(`/api/v/1/data/${COL}`, { v: written })).status, 200, "a write relayed");
    t.ok((await devOnEdge.get(`/api/v/1/data/${COL}`)).body.DATA.some((r: any) => r.v === written), "it is on the edge");
  });

  t.test("a service run on the edge through node B, with bodies of a few MB both ways", async (t) => {
    let t0 = Date.now();
    const r = await viaB().post(`/api/v/1/code/${SK}/where`, {});
    t.comment(`a service run through node B: ${Date.now() - t0} ms`);
    t.equal(r.status, 200, r.text);
    t.match(r.body.results, { edge: EDGE, size: 0 }, "run by the edge");
    const blob = "x".repeat(5 * 1024 * 1024);
    t0 = Date.now();
    const big = await viaB().post(`/api/v/1/code/${SK}/where`, { blob });
    t.comment(`5 MiB request body through node B: ${Date.now() - t0} ms`);
    t.equal(big.status, 200, big.text.slice(0, 300));
    t.equal(big.body.results?.size, blob.length, "a 5 MiB request body arrives whole");
    const answer = 6 * 1024 * 1024;
    t0 = Date.now();
    const bigAnswer = await viaB().post(`/api/v/1/code/${SK}/where`, { answer });
    t.comment(`6 MiB answer through node B: ${Date.now() - t0} ms`);
    t.equal(bigAnswer.status, 200, bigAnswer.text.slice(0, 300));
    t.equal(bigAnswer.body.results?.big?.length, answer, "a 6 MiB answer comes back whole");
    // three at once (each crosses the bus whole, every node reads every bus message)
    t0 = Date.now();
    const many = await Promise.all([1, 2, 3].map(() => viaB().post(`/api/v/1/code/${SK}/where`, { blob: "y".repeat(3 * 1024 * 1024), answer: 3 * 1024 * 1024 })));
    t.same(many.map((m) => [m.status, m.body.results?.size, m.body.results?.big?.length]), [1, 2, 3].map(() => [200, 3 * 1024 * 1024, 3 * 1024 * 1024]), "three relays of 3 MiB each way at once");
    t.comment(`three relays of 3 MiB each way at once: ${Date.now() - t0} ms`);
  });

  t.test("bodies just under 8 MiB, either way, cross the bus whole", async (t) => {
    const near = 8 * 1024 * 1024 - 64 * 1024;
    const up = await viaB().post(`/api/v/1/code/${SK}/where`, { blob: "u".repeat(near) });
    t.equal(up.status, 200, up.text.slice(0, 300));
    t.equal(up.body.results?.size, near, "a request body of 8 MiB less 64 KiB");
    const down = await viaB().post(`/api/v/1/code/${SK}/where`, { answer: near });
    t.equal(down.status, 200, down.text.slice(0, 300));
    t.equal(down.body.results?.big?.length, near, "an answer of 8 MiB less 64 KiB");
    // three at once: about 33 MB of bus messages, which every node's Redis subscriber reads
    const t0 = Date.now();
    const three = await Promise.all([1, 2, 3].map(() => viaB().post(`/api/v/1/code/${SK}/where`, { answer: near })));
    t.same(three.map((r) => [r.status, r.body.results?.big?.length]), [1, 2, 3].map(() => [200, near]), "three such answers at once");
    t.comment(`three answers of 8 MiB less 64 KiB at once through node B: ${Date.now() - t0} ms`);
  });

  t.test("bodies past 8 MiB, either way", async (t) => {
    isErr(t, await viaB().post(`/api/v/1/code/${SK}/where`, "y".repeat(9 * 1024 * 1024)), 413, undefined, "a request body past 8 MiB");
    const streamed = await request(B.url, "POST", `/api/v/1/code/${SK}/where`, { headers: { "ClearBlade-DevToken": s.devToken, "ClearBlade-SystemKey": SK, "ClearBlade-Edge": EDGE }, body: "z".repeat(9 * 1024 * 1024), chunked: true });
    t.equal(streamed.status, 413, "a chunked request body past 8 MiB");
    const tooBig = await viaB().post(`/api/v/1/code/${SK}/where`, { answer: 9 * 1024 * 1024 });
    isErr(t, tooBig, 413, undefined, "an answer past 8 MiB");
    t.match(tooBig.body.error?.detail, /answer is larger than/, "says so");
    // on the node holding the link the head went out before the bound was passed: the caller's
    // answer fails rather than end as if whole
    const direct = await fetch(`${A.url}/api/v/1/code/${SK}/where`, { method: "POST", headers: { "ClearBlade-DevToken": s.devToken, "ClearBlade-SystemKey": SK, "ClearBlade-Edge": EDGE, "content-type": "application/json" },
      body: JSON.stringify({ answer: 9 * 1024 * 1024 }), signal: AbortSignal.timeout(20_000) })
      .then(async (r) => `${r.status} ${(await r.text()).length}`).catch((err: Error) => `failed: ${err.message}`);
    t.match(direct, /^(failed|413)/, `through node A, not a cut answer as if whole (${direct.slice(0, 80)})`);
    const after = await viaB().post(`/api/v/1/code/${SK}/where`, {});
    t.equal(after.status, 200, `the relay works after (${after.text.slice(0, 200)})`);
  });

  t.test("remote operations through node B", async (t) => {
    const ops = `/api/v/1/edges/${SK}/${EDGE}`;
    const r = await onB.post(`${ops}/command-exec`, { command: "echo hello from the edge" });
    t.equal(r.status, 200, r.text);
    t.match(r.body, { output: "hello from the edge\n", exit_code: 0 }, "an allowed command runs on the edge");
    const refused = await onB.post(`${ops}/command-exec`, { command: "cat /etc/passwd" });
    isErr(t, refused, 403, undefined, "a command the edge does not allow");
    const config = await onB.get(`${ops}/config`);
    t.equal(config.status, 200, config.text);
    t.match(config.body, { edgeName: EDGE, mode: "edge" }, "the edge's settings");
    t.notOk(JSON.stringify(config.body).includes(created.token), "without its token");
  });

  t.test("unknown and offline edges through node B: 404 and 503, at once", async (t) => {
    isErr(t, await viaB("no-such-edge").get(`/api/v/1/data/${COL}`), 404, undefined, "an unknown edge");
    isErr(t, await onB.post(`/api/v/1/edges/${SK}/no-such-edge/command-exec`, { command: "echo hello from the edge" }), 404, undefined, "command-exec on an unknown edge");
    const off = uniq("off");
    await must(s.dev.post(`/admin/edges/${SK}/${off}`, {}), "offline edge");
    let t0 = Date.now();
    isErr(t, await viaB(off).get(`/api/v/1/data/${COL}`), 503, undefined, "an edge that is not connected");
    t.ok(Date.now() - t0 < 2_000, `relay answered at once (${Date.now() - t0} ms)`);
    t0 = Date.now();
    isErr(t, await onB.post(`/api/v/1/edges/${SK}/${off}/command-exec`, { command: "echo hello from the edge" }), 503, undefined, "command-exec on it");
    t.ok(Date.now() - t0 < 2_000, `operation answered at once (${Date.now() - t0} ms)`);
  });

  t.test("no node lost its Redis link with the large bodies", async (t) => {
    for (const n of [A, B]) t.notMatch(n.logs(), /Redis link lost/, `${n.name} kept its link`);
  });

  t.test("node A killed while it holds the link: a clear error soon, not a hang", async (t) => {
    await A.kill();
    // node B has not yet seen A die: its record still names A as the edge's node
    const t0 = Date.now();
    const r = await viaB().get(`/api/v/1/data/${COL}`);
    const took = Date.now() - t0;
    t.ok(r.status === 503 || r.status === 504, `an error (${r.status}: ${r.text.slice(0, 200)})`);
    t.ok(took < 15_000, `within the time a node takes to be known dead, not the request's 30 s limit (${took} ms)`);
    const o0 = Date.now();
    const op = await onB.post(`/api/v/1/edges/${SK}/${EDGE}/command-exec`, { command: "echo hello from the edge" });
    t.equal(op.status, 503, `a remote operation too (${op.text.slice(0, 200)})`);
    t.ok(Date.now() - o0 < 15_000, `soon (${Date.now() - o0} ms)`);
    // once B knows A is gone the edge is offline, answered at once
    t.ok(await waitFor(async () => (await record()).isConnected === false, 30_000), "node B frees the edge of the dead node");
    const a0 = Date.now();
    isErr(t, await viaB().get(`/api/v/1/data/${COL}`), 503, undefined, "then 503");
    t.ok(Date.now() - a0 < 2_000, `at once (${Date.now() - a0} ms)`);
  });
}

if (!hasCommand("redis-server") && !process.env.OUTPOST_REQUIRE_SERVICES) {
  t.test("ClearBlade-Edge relay on a cluster", await needs("redis-server", false), async () => {});
} else {
  await main();
}
