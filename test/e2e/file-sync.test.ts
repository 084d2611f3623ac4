// Files between an edge and its platform, black-box with real processes: a bucket set reaches an
// edge through its template; what the edge writes to the set's outbox lands on the platform under
// inbox/<edge>/ (20 MB across a link cut, resumed from where the platform was, once and
// byte-identical); a file the platform sends lands in the edge's inbox; a file over
// --file-sync-max-bytes fails with its status on both sides; a file written again while it moves
// is sent as its last version only, and one deleted before it arrived never arrives; services use
// the same paths (ClearBladeAsync.FS on the edge's outbox, syncFileToEdge on the platform).
import { createHash, randomBytes } from "node:crypto";
import t from "tap";
import { Client, type DevSystem, devWithSystem, isErr, must, newUser, type Outpost, request, startOutpost, uniq, waitFor } from "./harness.ts";
import { type TcpProxy, tcpProxy } from "./tcp-proxy.ts";

const PING_MS = 500;
const MB = 1024 * 1024;
/** the platform takes files up to this (and sends no larger) */
const PLATFORM_MAX = 21 * MB;
const started: Outpost[] = [];
const closers: (() => Promise<void>)[] = [];
t.teardown(async () => {
  for (const o of started) await o.stop().catch(() => {});
  for (const c of closers) await c().catch(() => {});
});

const platform = await startOutpost({ logLevel: "info", args: ["--file-sync-max-bytes", String(PLATFORM_MAX)] });
started.push(platform);

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const b64 = (b: Uint8Array) => Buffer.from(b).toString("base64");

interface Setup { sys: DevSystem; set: string; edge: string; node: Outpost; ed: Client; proxy: TcpProxy }

/** A system with a bucket set, an edge whose template brings it, the edge running behind a proxy
 *  (with a small window of bytes in flight, so a transfer takes long enough to cut), and the
 *  developer signed in on it. */
async function setup(name: string): Promise<Setup> {
  const sys = await devWithSystem(platform, name);
  const set = uniq("set");
  await must(sys.dev.post(`/api/v/4/bucket_sets/${sys.systemKey}`, { name: set, platform_storage: "local", edge_storage: "local" }), "bucket set");
  const edge = uniq("gw"), token = `${edge}-token`;
  await must(sys.dev.post(`/admin/edges/${sys.systemKey}/${edge}`, { token }), "edge");
  await must(sys.dev.put(`/admin/edges/template/${sys.systemKey}/${edge}`, { add: [{ def_module: "bucketset", def_name: set, mode: "sync_to_edge" }] }), "template");
  const proxy = await tcpProxy(platform.httpPort);
  closers.push(() => proxy.close());
  const node = await startOutpost({ logLevel: "info", args: ["--mode", "edge", "--platform-url", proxy.url, "--system-key", sys.systemKey, "--edge-name", edge, "--edge-token", token,
    "--sync-ping-ms", String(PING_MS), "--file-sync-inflight-bytes", String(MB)] });
  started.push(node);
  let ed: Client | null = null;
  const signedIn = await waitFor(async () => {
    const a = await request(node.url, "POST", "/admin/auth", { body: { email: sys.email, password: sys.password } });
    if (a.status === 200) ed = new Client(node.url, { "ClearBlade-DevToken": a.body.dev_token });
    return a.status === 200;
  }, 20_000);
  if (!signedIn) throw new Error("the developer cannot sign in on the edge");
  // the set's definition came down with the template
  if (!(await waitFor(async () => (await ed!.get(`/api/v/4/bucket_sets/${sys.systemKey}/${set}`)).status === 200, 20_000))) throw new Error("the bucket set did not reach the edge");
  return { sys, set, edge, node, ed: ed!, proxy };
}

/** The platform's sync status entry of one file of an edge. */
async function platformFile(s: Setup, name: string): Promise<any> {
  const r = await s.sys.dev.get(`/admin/${s.sys.systemKey}/sync/edge/status/${s.edge}`);
  return (r.body as any[]).find((a) => a.asset_type === "file" && a.asset_name === `${s.set}/${name}`) ?? null;
}
async function edgeFile(s: Setup, name: string): Promise<any> {
  const r = await s.ed.get("/api/v/4/edge/status");
  return (r.body.files as any[]).find((a) => a.asset_name === `${s.set}/${name}`) ?? null;
}
const read = async (c: Client, sk: string, set: string, box: string, path: string) => {
  const r = await c.get(`/api/v/4/bucket_sets/${sk}/${set}/file/read?box=${box}&path=${encodeURIComponent(path)}`);
  return r.status === 200 ? Buffer.from(r.text, "base64") : null;
};
const connected = async (s: Setup) => (await s.sys.dev.get(`/admin/edges/${s.sys.systemKey}/${s.edge}`)).body.isConnected === true;

t.test("20 MB written to an edge's outbox reaches the platform's inbox/<edge>/ across a link cut, resumed, once", async (t) => {
  const s = await setup("filesync-cut");
  const bytes = randomBytes(20 * MB);
  // every chunk held back: the transfer takes seconds, and the link can be cut in its middle
  s.proxy.latency(40);
  await must(s.ed.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/${s.set}/file/create`, { box: "outbox", path: "logs/big.bin", contents: b64(bytes) }), "write on the edge");
  let before = 0;
  t.ok(await waitFor(async () => { before = (await platformFile(s, "logs/big.bin"))?.bytes_done ?? 0; return before >= 3 * MB; }, 30_000, 20), "the platform receives the file's bytes");
  t.ok(before < 18 * MB, `cut in the middle (${before} bytes in)`);
  s.proxy.cut();
  t.ok(await waitFor(async () => !(await connected(s)), 10_000), "the link is down");
  const held = (await platformFile(s, "logs/big.bin"))!;
  t.equal(held.status, "transferring", "the platform's status: transferring");
  t.ok(held.bytes_done > 0 && held.bytes_done < 20 * MB, `the platform keeps the part it has (${held.bytes_done} bytes)`);
  t.equal((await edgeFile(s, "logs/big.bin"))?.status, "transferring", "the edge's own status: transferring");
  t.equal(await read(s.sys.dev, s.sys.systemKey, s.set, "inbox", `${s.edge}/logs/big.bin`), null, "nothing in the inbox before the file is whole");
  s.proxy.resetCounts();
  s.proxy.latency(0);
  s.proxy.heal();
  t.ok(await waitFor(async () => (await platformFile(s, "logs/big.bin"))?.status === "synced", 60_000), "synced once the link is back");
  const sentAfter = s.proxy.bytesUp();
  t.ok(sentAfter < 20 * MB - held.bytes_done / 2, `resumed: ${sentAfter} bytes went up after the cut, not the whole ${20 * MB}`);
  t.match(s.node.logs(), /file transfer resumed[^\n]*"offset":[1-9]/, "the edge says it resumed from an offset");
  const got = await read(s.sys.dev, s.sys.systemKey, s.set, "inbox", `${s.edge}/logs/big.bin`);
  t.equal(got && sha(got), sha(bytes), "byte-identical on the platform under inbox/<edge>/");
  t.equal(platform.logs().split("\n").filter((l) => l.includes("file received") && l.includes(`inbox/${s.edge}/logs/big.bin`)).length, 1, "stored once");
  t.ok(await waitFor(async () => (await edgeFile(s, "logs/big.bin"))?.status === "synced", 10_000), "the edge's status: synced");
  const done = (await platformFile(s, "logs/big.bin"))!;
  t.same([done.direction, done.bytes_done, done.bytes_total], ["to_platform", 20 * MB, 20 * MB], "status: direction and bytes");
});

t.test("a file over --file-sync-max-bytes fails with its status, either way", async (t) => {
  const s = await setup("filesync-big");
  const big = randomBytes(PLATFORM_MAX + 1);
  // the edge sends it (its own limit is larger): the platform refuses it
  await must(s.ed.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/${s.set}/file/create`, { box: "outbox", path: "big.bin", contents: b64(big) }), "write on the edge");
  t.ok(await waitFor(async () => (await edgeFile(s, "big.bin"))?.status === "failed", 30_000), "the edge's status: failed");
  t.match((await edgeFile(s, "big.bin")).last_error, /over the receiver's --file-sync-max-bytes/, "with why");
  t.match((await platformFile(s, "big.bin"))?.last_error, /--file-sync-max-bytes/, "the platform's status says so too");
  t.equal(await read(s.sys.dev, s.sys.systemKey, s.set, "inbox", `${s.edge}/big.bin`), null, "nothing stored");
  // the platform does not send it: failed at once
  await must(s.sys.dev.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/${s.set}/file/create`, { box: "sandbox", path: "big.bin", contents: b64(big) }), "write on the platform");
  const r = await must(s.sys.dev.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/${s.set}/file/sync_to_edge`, { box: "sandbox", path: "big.bin", edge: s.edge }), "sync_to_edge");
  t.equal(r.status, "failed", "refused at once");
  t.match(r.error, /over --file-sync-max-bytes/, "with why");
  // the next file goes: the failed ones hold nothing up
  await must(s.sys.dev.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/${s.set}/file/create`, { box: "sandbox", path: "small.txt", contents: b64(Buffer.from("hello edge")) }), "small file");
  await must(s.sys.dev.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/${s.set}/file/sync_to_edge`, { box: "sandbox", path: "small.txt", edge: s.edge }), "sync_to_edge");
  t.ok(await waitFor(async () => (await read(s.ed, s.sys.systemKey, s.set, "inbox", "small.txt")) !== null, 20_000), "a small file after it arrives");
  t.equal((await edgeFile(s, "big.bin"))?.status, "failed", "still failed (never queued again)");

  // a set made on the edge itself is not one the platform gave it: its outbox is refused
  const own = uniq("own");
  await must(s.ed.post(`/api/v/4/bucket_sets/${s.sys.systemKey}`, { name: own, platform_storage: "local", edge_storage: "local" }), "a set made on the edge");
  await must(s.ed.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/${own}/file/create`, { box: "outbox", path: "x.txt", contents: b64(Buffer.from("x")) }), "write on the edge");
  const ownStatus = async () => ((await s.ed.get("/api/v/4/edge/status")).body.files as any[]).find((f) => f.asset_name === `${own}/x.txt`);
  t.ok(await waitFor(async () => (await ownStatus())?.status === "failed", 20_000), "a set not in the edge's template: failed");
  t.match((await ownStatus()).last_error, /not in this edge's template/, "with why");
});

t.test("the platform sends a file to an edge's inbox; refusals", async (t) => {
  const s = await setup("filesync-down");
  const bytes = randomBytes(3 * MB + 17);
  await must(s.sys.dev.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/${s.set}/file/create`, { box: "sandbox", path: "cfg/model.bin", contents: b64(bytes) }), "write on the platform");
  const path = `/api/v/4/bucket_sets/${s.sys.systemKey}/${s.set}/file/sync_to_edge`;
  const r = await must(s.sys.dev.post(path, { box: "sandbox", path: "cfg/model.bin", edge: s.edge }), "sync_to_edge");
  t.same([r.edge, r.path, r.size], [s.edge, "inbox/cfg/model.bin", bytes.length], "the answer says where it goes");
  t.ok(await waitFor(async () => (await platformFile(s, "cfg/model.bin"))?.status === "synced", 30_000), "the platform's status: synced");
  const got = await read(s.ed, s.sys.systemKey, s.set, "inbox", "cfg/model.bin");
  t.equal(got && sha(got), sha(bytes), "byte-identical in the edge's inbox");
  const st = await edgeFile(s, "cfg/model.bin");
  t.same([st?.status, st?.direction, st?.bytes_done], ["synced", "to_edge", bytes.length], "the edge's status");

  isErr(t, await s.sys.dev.post(path, { box: "sandbox", path: "cfg/model.bin", edge: "nosuchedge" }), 404, "an unknown edge");
  isErr(t, await s.sys.dev.post(path, { box: "sandbox", path: "nothing.bin", edge: s.edge }), 404, "a missing file");
  isErr(t, await s.sys.dev.post(path, { box: "attic", path: "cfg/model.bin", edge: s.edge }), 400, "not a box");
  isErr(t, await s.sys.dev.post(path, { box: "sandbox", path: "../x", edge: s.edge }), 400, "a path that climbs");
  isErr(t, await s.sys.dev.post(path, { box: "sandbox", path: "cfg/model.bin" }), 400, "no edge");
  isErr(t, await s.sys.dev.post(path, "not an object"), 400, "not an object");
  isErr(t, await s.sys.dev.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/nosuchset/file/sync_to_edge`, { box: "sandbox", path: "a", edge: s.edge }), 404, "an unknown set");
  const user = await newUser(s.sys);
  isErr(t, await user.client.post(path, { box: "sandbox", path: "cfg/model.bin", edge: s.edge }), 401, "a user without the set's files permission");
  const other = await devWithSystem(platform, "filesync-other");
  const r2 = await other.dev.post(path, { box: "sandbox", path: "cfg/model.bin", edge: s.edge });
  t.ok(r2.status === 401 || r2.status === 403 || r2.status === 404, `another system's developer is refused (${r2.status})`);
  isErr(t, await s.ed.post(path, { box: "sandbox", path: "cfg/model.bin", edge: s.edge }), 400, "an edge sends no files by request");
});

t.test("written again while it moves: the last version arrives whole; deleted before it arrived: never arrives", async (t) => {
  const s = await setup("filesync-overwrite");
  const v1 = randomBytes(8 * MB), v2 = randomBytes(6 * MB), gone = randomBytes(4 * MB);
  s.proxy.latency(100);
  const create = (path: string, b: Uint8Array) => must(s.ed.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/${s.set}/file/create`, { box: "outbox", path, contents: b64(b) }), "write on the edge");
  await create("data.bin", v1);
  t.ok(await waitFor(async () => ((await platformFile(s, "data.bin"))?.bytes_done ?? 0) >= MB, 30_000, 20), "the first version is moving");
  await create("data.bin", v2);
  await create("gone.bin", gone);
  await must(s.ed.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/${s.set}/file/delete`, { box: "outbox", path: "gone.bin" }), "delete on the edge");
  // sent after the others: once it is there, the others were done
  await create("marker.txt", Buffer.from("last"));
  s.proxy.latency(0);
  t.ok(await waitFor(async () => (await read(s.sys.dev, s.sys.systemKey, s.set, "inbox", `${s.edge}/marker.txt`)) !== null, 60_000), "the file written after them arrived");
  const got = await read(s.sys.dev, s.sys.systemKey, s.set, "inbox", `${s.edge}/data.bin`);
  t.equal(got && sha(got), sha(v2), "the platform holds the last version, whole");
  t.equal(await read(s.sys.dev, s.sys.systemKey, s.set, "inbox", `${s.edge}/gone.bin`), null, "the deleted file never arrived");
  const entries = ((await s.sys.dev.get(`/admin/${s.sys.systemKey}/sync/edge/status/${s.edge}`)).body as any[]).filter((a) => a.asset_name === `${s.set}/data.bin`);
  t.same(entries.map((e) => e.status), ["synced"], `one transfer of the path, synced (the replaced one was dropped) ${JSON.stringify(entries.map((e) => e.last_error))}`);
});

t.test("from code: a service on the edge writes to the outbox, one on the platform sends a file with syncFileToEdge", async (t) => {
  const s = await setup("filesync-code");
  const svc = uniq("files");
  const code = `function ${svc}(req, resp) {
    var fs = ClearBladeAsync.FS(${JSON.stringify(s.set)});
    var p = req.params.send ? fs.syncFileToEdge(req.params.path, req.params.send) : fs.writeFile(req.params.path, req.params.text);
    p.then(function (r) { resp.success(r === undefined ? "ok" : r); }, function (e) { resp.error(e.error || e.message); });
  }`;
  await must(s.sys.dev.post(`/admin/code/v/1/${s.sys.systemKey}/${svc}`, { code, parameters: [] }), "service");
  await must(s.sys.dev.put(`/admin/edges/template/${s.sys.systemKey}/${s.edge}`, { add: [{ def_module: "service", def_name: svc, mode: "sync_to_edge" }] }), "template");
  let r: any;
  t.ok(await waitFor(async () => { r = await s.ed.post(`/api/v/1/code/${s.sys.systemKey}/${svc}`, { path: "outbox/from-code.txt", text: "written by a service on the edge" }); return r.body?.success === true; }, 20_000),
    `the service runs on the edge (${r?.text?.slice(0, 200)})`);
  t.ok(await waitFor(async () => (await read(s.sys.dev, s.sys.systemKey, s.set, "inbox", `${s.edge}/from-code.txt`)) !== null, 20_000), "its file reached the platform");
  t.equal((await read(s.sys.dev, s.sys.systemKey, s.set, "inbox", `${s.edge}/from-code.txt`))?.toString(), "written by a service on the edge", "as written");

  await must(s.sys.dev.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/${s.set}/file/create`, { box: "sandbox", path: "to-edge.txt", contents: b64(Buffer.from("sent by code")) }), "platform file");
  const sent = await s.sys.dev.post(`/api/v/1/code/${s.sys.systemKey}/${svc}`, { path: "sandbox/to-edge.txt", send: s.edge });
  t.equal(sent.body?.success, true, `syncFileToEdge from a platform service (${sent.text.slice(0, 200)})`);
  t.ok(await waitFor(async () => (await read(s.ed, s.sys.systemKey, s.set, "inbox", "to-edge.txt"))?.toString() === "sent by code", 20_000), "the file is in the edge's inbox");
  const unknown = await s.sys.dev.post(`/api/v/1/code/${s.sys.systemKey}/${svc}`, { path: "sandbox/to-edge.txt", send: "nosuchedge" });
  t.equal(unknown.body?.success, false, "syncFileToEdge to an unknown edge fails");
});
