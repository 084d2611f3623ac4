// File sync with both sides' bucket sets on S3, black-box: an s3rver for the platform and another
// for the edge (an edge with object storage beside it), both started here. The set's edge storage
// reaches the edge with its secret sealed by the edge's own key; what the edge writes to its outbox
// (kept in its S3) lands in the platform's S3 under inbox/<edge>/, across a link cut, resumed; a
// file the platform sends lands in the edge's S3 inbox. Failure paths: the platform's S3 down (the
// file waits, both sides say why, and lands once it is back), credentials the platform's S3 refuses,
// a file over --file-sync-max-bytes, the edge's S3 down when a file is written there.
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import S3rver from "s3rver";
import t from "tap";
import { Client, type DevSystem, devWithSystem, must, type Outpost, request, startOutpost, uniq, waitFor } from "./harness.ts";
import { type TcpProxy, tcpProxy } from "./tcp-proxy.ts";

const MB = 1024 * 1024;
const PLATFORM_MAX = 16 * MB;
const started: Outpost[] = [];
const closers: (() => Promise<unknown>)[] = [];
t.teardown(async () => {
  if (process.env.DEBUG_LOGS) for (const [i, o] of started.entries()) (await import("node:fs")).writeFileSync(`/tmp/edgefiles-log-${i}.txt`, o.logs());
  for (const o of started) await o.stop().catch(() => {});
  for (const c of closers) await c().catch(() => {});
});

/** An s3rver with one bucket, in a directory of its own; `restart` brings it back on its port. */
async function s3server(bucket: string) {
  const dir = mkdtempSync(join(tmpdir(), "outpost-e2e-s3sync-"));
  const make = (port: number) => new S3rver({ port, address: "127.0.0.1", silent: true, directory: dir, configureBuckets: [{ name: bucket, configs: [] }] });
  let server = make(0);
  const port = (await server.run()).port;
  const s = {
    endpoint: `http://127.0.0.1:${port}`, bucket, up: true,
    async stop() { if (s.up) { s.up = false; await server.close(); } },
    async restart() { server = make(port); await server.run(); s.up = true; },
    /** an object's bytes as the server keeps them in its directory (null: none) */
    async object(key: string): Promise<Uint8Array | null> {
      const parts = key.split("/");
      const at = join(dir, bucket, ...parts.slice(0, -1), `${parts.at(-1)}._S3rver_object`);
      return existsSync(at) ? new Uint8Array(readFileSync(at)) : null;
    },
  };
  closers.push(async () => { await s.stop(); rmSync(dir, { recursive: true, force: true }); });
  return s;
}

const platformS3 = await s3server("platform-files");
const edgeS3 = await s3server("edge-files");
/** (s3rver checks the access key id, not a V4 signature: refused credentials are an unknown key id) */
const s3config = (s: { endpoint: string; bucket: string }, prefix: string, keyId = "S3RVER") =>
  ({ endpoint: s.endpoint, bucket: s.bucket, access_key_id: keyId, secret_access_key: "s3-secret-4711", prefix });

const platform = await startOutpost({ logLevel: "info", args: ["--file-sync-max-bytes", String(PLATFORM_MAX)] });
started.push(platform);

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const b64 = (b: Uint8Array) => Buffer.from(b).toString("base64");

interface Setup { sys: DevSystem; set: string; badSet: string; prefix: string; edgePrefix: string; edge: string; node: Outpost; ed: Client; proxy: TcpProxy }

/** A system with a set on S3 on both sides (and one whose platform credentials are refused), an
 *  edge whose template brings both, behind a proxy, and the developer signed in on it. */
async function setup(name: string): Promise<Setup> {
  const sys = await devWithSystem(platform, name);
  const set = uniq("s3set"), badSet = uniq("badcreds"), prefix = uniq("p"), edgePrefix = uniq("e");
  await must(sys.dev.post(`/api/v/4/bucket_sets/${sys.systemKey}`, { name: set, platform_storage: "s3", platform_config: s3config(platformS3, prefix),
    edge_storage: "s3", edge_config: s3config(edgeS3, edgePrefix) }), "bucket set");
  await must(sys.dev.post(`/api/v/4/bucket_sets/${sys.systemKey}`, { name: badSet, platform_storage: "s3", platform_config: s3config(platformS3, prefix, "NOT-A-KEY"),
    edge_storage: "s3", edge_config: s3config(edgeS3, `${edgePrefix}-bad`) }), "bucket set with refused credentials");
  const edge = uniq("gw"), token = `${edge}-token`;
  await must(sys.dev.post(`/admin/edges/${sys.systemKey}/${edge}`, { token }), "edge");
  await must(sys.dev.put(`/admin/edges/template/${sys.systemKey}/${edge}`, { add: [
    { def_module: "bucketset", def_name: set, mode: "sync_to_edge" }, { def_module: "bucketset", def_name: badSet, mode: "sync_to_edge" },
  ] }), "template");
  const proxy = await tcpProxy(platform.httpPort);
  closers.push(() => proxy.close());
  const node = await startOutpost({ logLevel: "info", args: ["--mode", "edge", "--platform-url", proxy.url, "--system-key", sys.systemKey, "--edge-name", edge, "--edge-token", token,
    "--sync-ping-ms", "500", "--file-sync-inflight-bytes", String(MB)] });
  started.push(node);
  let ed: Client | null = null;
  const signedIn = await waitFor(async () => {
    const a = await request(node.url, "POST", "/admin/auth", { body: { email: sys.email, password: sys.password } });
    if (a.status === 200) ed = new Client(node.url, { "ClearBlade-DevToken": a.body.dev_token });
    return a.status === 200;
  }, 20_000);
  if (!signedIn) throw new Error("the developer cannot sign in on the edge");
  if (!(await waitFor(async () => (await ed!.get(`/api/v/4/bucket_sets/${sys.systemKey}/${badSet}`)).status === 200, 20_000))) throw new Error("the bucket sets did not reach the edge");
  return { sys, set, badSet, prefix, edgePrefix, edge, node, ed: ed!, proxy };
}

const statusOf = async (c: Client, url: string, set: string, name: string, field?: string): Promise<any> => {
  const r = await c.get(url);
  const list = (field ? r.body[field] : r.body) as any[];
  return list.find((a) => a.asset_type === "file" && a.asset_name === `${set}/${name}`) ?? null;
};
const platformFile = (s: Setup, name: string, set = s.set) => statusOf(s.sys.dev, `/admin/${s.sys.systemKey}/sync/edge/status/${s.edge}`, set, name);
const edgeFile = (s: Setup, name: string, set = s.set) => statusOf(s.ed, "/api/v/4/edge/status", set, name, "files");
const read = async (c: Client, sk: string, set: string, box: string, path: string) => {
  const r = await c.get(`/api/v/4/bucket_sets/${sk}/${set}/file/read?box=${box}&path=${encodeURIComponent(path)}`);
  return r.status === 200 ? Buffer.from(r.text, "base64") : null;
};
const writeOnEdge = (s: Setup, path: string, bytes: Uint8Array, set = s.set) =>
  s.ed.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/${set}/file/create`, { box: "outbox", path, contents: b64(bytes) });
const connected = async (s: Setup) => (await s.sys.dev.get(`/admin/edges/${s.sys.systemKey}/${s.edge}`)).body.isConnected === true;

const s = await setup("s3sync");

t.test("the set's edge storage reaches the edge with its secret sealed by the edge's own key", async (t) => {
  const got = await must(s.ed.get(`/api/v/4/bucket_sets/${s.sys.systemKey}/${s.set}`), "the set on the edge");
  t.equal(got.edge_storage, "s3");
  t.equal(got.edge_config.secret_access_key, "s3-secret-4711", "the edge opens the secret (it sealed it with its key)");
  t.same(got.platform_config, {}, "the platform's settings did not go to the edge");
  const onEdge = s.node.logs();
  t.notMatch(onEdge, /s3-secret-4711/, "the secret is never logged");
});

t.test("10 MB from the edge's outbox in its S3 reaches the platform's S3 under inbox/<edge>/, across a link cut, resumed, once", async (t) => {
  const bytes = randomBytes(10 * MB);
  s.proxy.latency(40);
  await must(writeOnEdge(s, "logs/big.bin", bytes), "write on the edge");
  t.equal(sha((await edgeS3.object(`${s.edgePrefix}/outbox/logs/big.bin`))!), sha(bytes), "the edge's outbox file is in the edge's S3");
  let before = 0;
  t.ok(await waitFor(async () => { before = (await platformFile(s, "logs/big.bin"))?.bytes_done ?? 0; return before >= 2 * MB; }, 30_000, 20), "the platform receives bytes");
  t.ok(before < 9 * MB, `cut in the middle (${before} bytes in)`);
  s.proxy.cut();
  t.ok(await waitFor(async () => !(await connected(s)), 10_000), "the link is down");
  s.proxy.resetCounts();
  s.proxy.latency(0);
  s.proxy.heal();
  t.ok(await waitFor(async () => (await platformFile(s, "logs/big.bin"))?.status === "synced", 60_000), "synced once the link is back");
  t.ok(s.proxy.bytesUp() < 10 * MB, `resumed: ${s.proxy.bytesUp()} bytes went up after the cut`);
  t.match(s.node.logs(), /file transfer resumed[^\n]*"offset":[1-9]/, "the edge resumed from an offset");
  const inS3 = await platformS3.object(`${s.prefix}/inbox/${s.edge}/logs/big.bin`);
  t.equal(inS3 && sha(inS3), sha(bytes), "byte-identical in the platform's S3");
  const viaApi = await read(s.sys.dev, s.sys.systemKey, s.set, "inbox", `${s.edge}/logs/big.bin`);
  t.equal(viaApi && sha(viaApi), sha(bytes), "and through the platform's API");
  t.equal(platform.logs().split("\n").filter((l) => l.includes("file received") && l.includes(`inbox/${s.edge}/logs/big.bin`)).length, 1, "stored once");
  t.ok(await waitFor(async () => (await edgeFile(s, "logs/big.bin"))?.status === "synced", 10_000), "the edge's status: synced");
});

t.test("the platform sends a file from its S3 to the edge's S3 inbox", async (t) => {
  const bytes = randomBytes(3 * MB + 7);
  await must(s.sys.dev.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/${s.set}/file/create`, { box: "sandbox", path: "cfg/model.bin", contents: b64(bytes) }), "write on the platform");
  const r = await must(s.sys.dev.post(`/api/v/4/bucket_sets/${s.sys.systemKey}/${s.set}/file/sync_to_edge`, { box: "sandbox", path: "cfg/model.bin", edge: s.edge }), "sync_to_edge");
  t.equal(r.path, "inbox/cfg/model.bin");
  t.ok(await waitFor(async () => (await edgeFile(s, "cfg/model.bin"))?.status === "synced", 30_000), "the edge's status: synced");
  const inS3 = await edgeS3.object(`${s.edgePrefix}/inbox/cfg/model.bin`);
  t.equal(inS3 && sha(inS3), sha(bytes), "byte-identical in the edge's S3");
  t.ok(await waitFor(async () => (await platformFile(s, "cfg/model.bin"))?.status === "synced", 10_000), "the platform's status: synced");
});

t.test("the platform's S3 down: the file waits whole, both sides say why, and it lands once S3 is back", async (t) => {
  const bytes = randomBytes(2 * MB);
  await platformS3.stop();
  try {
    await must(writeOnEdge(s, "while-down.bin", bytes), "write on the edge (its own S3 is up)");
    t.ok(await waitFor(async () => /storing the file in the platform's bucket set failed/.test((await platformFile(s, "while-down.bin"))?.last_error ?? ""), 30_000),
      "the platform's status says why it waits");
    const p = await platformFile(s, "while-down.bin");
    t.same([p.status, p.bytes_done, p.bytes_total], ["transferring", bytes.length, bytes.length], "every byte is there, waiting");
    t.ok(await waitFor(async () => /storing the file/.test((await edgeFile(s, "while-down.bin"))?.last_error ?? ""), 10_000), "the edge's status says so too");
    t.equal((await request(platform.url, "GET", "/health")).status, 200, "the platform is up");
  } finally {
    await platformS3.restart();
  }
  t.ok(await waitFor(async () => (await platformFile(s, "while-down.bin"))?.status === "synced", 60_000), "stored once S3 is back");
  const inS3 = await platformS3.object(`${s.prefix}/inbox/${s.edge}/while-down.bin`);
  t.equal(inS3 && sha(inS3), sha(bytes), "byte-identical");
  t.equal((await platformFile(s, "while-down.bin")).last_error, "", "no error left");
});

t.test("credentials the platform's S3 refuses: the transfer says so; the files behind it are not held up", async (t) => {
  await must(writeOnEdge(s, "refused.bin", randomBytes(1000), s.badSet), "write on the edge");
  t.ok(await waitFor(async () => /storing the file in the platform's bucket set failed/.test((await platformFile(s, "refused.bin", s.badSet))?.last_error ?? ""), 30_000),
    "the platform's status says the store failed");
  t.match((await platformFile(s, "refused.bin", s.badSet)).last_error, /InvalidAccessKeyId|Access Key Id/, "and why");
  t.equal(await platformS3.object(`${s.prefix}/inbox/${s.edge}/refused.bin`), null, "nothing stored");
});

t.test("a file over the platform's --file-sync-max-bytes from an S3 outbox fails with why", async (t) => {
  await must(writeOnEdge(s, "huge.bin", randomBytes(PLATFORM_MAX + 1)), "write on the edge");
  t.ok(await waitFor(async () => (await edgeFile(s, "huge.bin"))?.status === "failed", 60_000), "the edge's status: failed");
  t.match((await edgeFile(s, "huge.bin")).last_error, /--file-sync-max-bytes/, "with why");
  t.equal(await platformS3.object(`${s.prefix}/inbox/${s.edge}/huge.bin`), null, "nothing stored");
});

t.test("the edge's S3 down: a write there answers a clear error, and the edge keeps running", async (t) => {
  await edgeS3.stop();
  try {
    const r = await writeOnEdge(s, "nowhere.bin", randomBytes(100));
    t.not(r.status, 200, "refused");
    t.match(r.text, /object storage/, `with why (${r.text.slice(0, 200)})`);
    t.equal((await request(s.node.url, "GET", "/health")).status, 200, "the edge is up");
  } finally {
    await edgeS3.restart();
  }
  await must(writeOnEdge(s, "after.bin", Buffer.from("back")), "a write once it is back");
  t.ok(await waitFor(async () => (await read(s.sys.dev, s.sys.systemKey, s.set, "inbox", `${s.edge}/after.bin`))?.toString() === "back", 30_000), "reaches the platform");
});
