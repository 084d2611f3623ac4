// File sync on a clustered platform, black-box: two platform nodes on one database and a private
// redis-server, a bucket set on S3 (an s3rver started here), an edge linked to node B. A file sent
// to the edge through node A (which does not hold its link) reaches it: A keeps the version in the
// set's S3 and B, told through the cluster, sends it. A file the edge writes to its outbox arrives
// through node B and node A's API reads it. A set on local directories cannot send through a node
// that does not hold the link: its transfer fails, saying why.
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import S3rver from "s3rver";
import t from "tap";
import { Client, devWithSystem, must, type Outpost, request, startOutpost, startTwoNodes, uniq, waitFor } from "./harness.ts";

const MB = 1024 * 1024;
const closers: (() => Promise<unknown> | void)[] = [];
const dirs: string[] = [];
t.teardown(async () => {
  for (const c of closers.reverse()) await c();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const newDir = () => { const d = mkdtempSync(join(tmpdir(), "outpost-filesync-cluster-")); dirs.push(d); return d; };
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const b64 = (b: Uint8Array) => Buffer.from(b).toString("base64");

async function main() {
  const s3dir = newDir();
  const s3 = new S3rver({ port: 0, address: "127.0.0.1", silent: true, directory: s3dir, configureBuckets: [{ name: "cluster-files", configs: [] }] });
  const s3endpoint = `http://127.0.0.1:${(await s3.run()).port}`;
  closers.push(() => s3.close());
  const { nodes: [A, B], redisUp, db } = await startTwoNodes("filesync-cluster", closers, ["--log-level", "info"]);
  if (!redisUp) throw new Error("redis-server did not start");
  t.comment(`shared database: ${db.startsWith("file:") ? "libSQL file" : "PostgreSQL"}`);

  const s = await devWithSystem({ url: A.url }, "filesync-cluster");
  const SK = s.systemKey;
  const onB = new Client(B.url, s.dev.headers);
  const set = uniq("s3set"), localSet = uniq("localset"), prefix = uniq("p");
  await must(s.dev.post(`/api/v/4/bucket_sets/${SK}`, { name: set, platform_storage: "s3", edge_storage: "local",
    platform_config: { endpoint: s3endpoint, bucket: "cluster-files", access_key_id: "S3RVER", secret_access_key: "S3RVER", prefix } }), "bucket set on S3");
  await must(s.dev.post(`/api/v/4/bucket_sets/${SK}`, { name: localSet, platform_storage: "local", edge_storage: "local" }), "bucket set on local directories");
  const EDGE = uniq("gw");
  const created = await must(s.dev.post(`/admin/edges/${SK}/${EDGE}`, {}), "edge");
  await must(s.dev.put(`/admin/edges/template/${SK}/${EDGE}`, { add: [
    { def_module: "bucketset", def_name: set, mode: "sync_to_edge" }, { def_module: "bucketset", def_name: localSet, mode: "sync_to_edge" },
  ] }), "template");
  const edge: Outpost = await startOutpost({ logLevel: "info", args: ["--mode", "edge", "--platform-url", B.url, "--system-key", SK, "--edge-name", EDGE, "--edge-token", created.token] });
  closers.push(() => edge.stop().then(() => {}));
  if (!(await waitFor(async () => (await s.dev.get(`/admin/edges/${SK}/${EDGE}`)).body.isConnected === true, 45_000))) throw new Error(`the edge did not connect:\n${edge.logs().slice(-2000)}`);
  let ed = new Client(edge.url, {});
  let last = "";
  const ready = await waitFor(async () => {
    const a = await request(edge.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
    if (a.status !== 200) { last = `sign-in: ${a.status} ${a.text.slice(0, 200)}`; return false; }
    ed = new Client(edge.url, { "ClearBlade-DevToken": a.body.dev_token });
    const r = await ed.get(`/api/v/4/bucket_sets/${SK}/${localSet}`);
    last = `the set: ${r.status} ${r.text.slice(0, 200)}`;
    return r.status === 200;
  }, 45_000);
  if (!ready) throw new Error(`the bucket sets did not reach the edge (${last})`);

  const fileStatus = async (via: Client, name: string, of = set) =>
    ((await via.get(`/admin/${SK}/sync/edge/status/${EDGE}`)).body as any[]).find((a) => a.asset_type === "file" && a.asset_name === `${of}/${name}`) ?? null;
  const read = async (c: Client, of: string, box: string, path: string) => {
    const r = await c.get(`/api/v/4/bucket_sets/${SK}/${of}/file/read?box=${box}&path=${encodeURIComponent(path)}`);
    return r.status === 200 ? Buffer.from(r.text, "base64") : null;
  };
  /** the kept versions of transfers in the set's S3 (beside its boxes) */
  const keptInS3 = () => { const d = join(s3dir, "cluster-files", prefix, ".outpost-filesync"); return existsSync(d) ? readdirSync(d) : []; };

  t.test("the edge is linked to node B", async (t) => {
    t.match(B.logs(), new RegExp(`edge connected[^\\n]*${EDGE}|${EDGE}[^\\n]*connected`), "node B holds its link");
    t.notMatch(A.logs(), new RegExp(`edge connected[^\\n]*${EDGE}`), "node A does not");
  });

  t.test("a file sent through node A reaches the edge linked to node B (kept in the set's S3 meanwhile)", async (t) => {
    const bytes = randomBytes(3 * MB + 11);
    await must(s.dev.post(`/api/v/4/bucket_sets/${SK}/${set}/file/create`, { box: "sandbox", path: "cfg/model.bin", contents: b64(bytes) }), "write through node A");
    const r = await must(s.dev.post(`/api/v/4/bucket_sets/${SK}/${set}/file/sync_to_edge`, { box: "sandbox", path: "cfg/model.bin", edge: EDGE }), "sync_to_edge through node A");
    t.equal(r.path, "inbox/cfg/model.bin");
    t.ok(await waitFor(async () => (await read(ed, set, "inbox", "cfg/model.bin")) !== null, 30_000), "the file is in the edge's inbox");
    t.equal(sha((await read(ed, set, "inbox", "cfg/model.bin"))!), sha(bytes), "byte-identical");
    t.ok(await waitFor(async () => (await fileStatus(s.dev, "cfg/model.bin"))?.status === "synced", 10_000), "synced, as node A's status says");
    // node B logs the delivery after it has recorded the status (and dropped the S3 copy)
    t.ok(await waitFor(() => /file delivered[^\n]*sandbox\/cfg\/model\.bin/.test(B.logs()), 1e4), "node B sent it");
    t.equal((await fileStatus(onB, "cfg/model.bin"))?.status, "synced", "and node B's");
    t.ok(await waitFor(async () => keptInS3().length === 0, 10_000), "the version kept in S3 went once delivered");
  });

  t.test("a file the edge writes to its outbox arrives through node B, and node A's API reads it", async (t) => {
    const bytes = randomBytes(2 * MB + 5);
    await must(ed.post(`/api/v/4/bucket_sets/${SK}/${set}/file/create`, { box: "outbox", path: "logs/day.bin", contents: b64(bytes) }), "write on the edge");
    t.ok(await waitFor(async () => (await fileStatus(s.dev, "logs/day.bin"))?.status === "synced", 30_000), "synced");
    // (the receiver records the status before it logs the file: the line may come a moment later)
    t.ok(await waitFor(() => /file received[^\n]*logs\/day\.bin/.test(B.logs()), 1e4), "node B received it");
    const viaA = await read(s.dev, set, "inbox", `${EDGE}/logs/day.bin`);
    t.equal(viaA && sha(viaA), sha(bytes), "node A's API reads it, byte-identical");
  });

  t.test("a set on local directories: a file sent through the node not holding the link fails, saying why", async (t) => {
    await must(s.dev.post(`/api/v/4/bucket_sets/${SK}/${localSet}/file/create`, { box: "sandbox", path: "x.txt", contents: b64(Buffer.from("on node a's disk")) }), "write through node A");
    await must(s.dev.post(`/api/v/4/bucket_sets/${SK}/${localSet}/file/sync_to_edge`, { box: "sandbox", path: "x.txt", edge: EDGE }), "sync_to_edge through node A");
    t.ok(await waitFor(async () => (await fileStatus(s.dev, "x.txt", localSet))?.status === "failed", 20_000), "failed");
    t.match((await fileStatus(s.dev, "x.txt", localSet)).last_error, /kept on the platform node that took the request.*S3/, "with why");
    // the next file goes: a failed one holds nothing up
    await must(s.dev.post(`/api/v/4/bucket_sets/${SK}/${set}/file/create`, { box: "sandbox", path: "after.txt", contents: b64(Buffer.from("after")) }), "write");
    await must(s.dev.post(`/api/v/4/bucket_sets/${SK}/${set}/file/sync_to_edge`, { box: "sandbox", path: "after.txt", edge: EDGE }), "sync_to_edge");
    t.ok(await waitFor(async () => (await read(ed, set, "inbox", "after.txt"))?.toString() === "after", 20_000), "the next file arrives");
  });
}

await main();
