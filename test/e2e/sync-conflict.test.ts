// Conflicts of an edge offline, black-box, asserting the winner on every node (not only that the
// nodes agree): a platform and an edge (processes of the binary) write the same rows of a `sync`
// collection while the link between them is cut, in a known order; once it heals, the later write
// of each row must be what both nodes hold (last writer wins; a delete is a write too).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { Client, collectionWith, devWithSystem, type Outpost, qs, request, sleep, startOutpost, uniq, waitFor } from "./harness.ts";
import { tcpProxy } from "./tcp-proxy.ts";

const dirs: string[] = [];
const running: Outpost[] = [];
const closers: (() => Promise<void>)[] = [];
t.teardown(async () => {
  for (const o of running) await o.kill();
  for (const c of closers) await c();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

type Row = { item_id: string; label: string; n: number };
async function rowsOf(c: Client, id: string): Promise<Map<string, Row>> {
  const r = await c.get(`/api/v/1/data/${id}?query=${qs({ PAGESIZE: 0, PAGENUM: 0 })}`);
  if (r.status !== 200) throw new Error(`${r.status} ${r.text.slice(0, 200)}`);
  return new Map((r.body.DATA as Row[]).map((x) => [x.item_id, x]));
}
const byLabel = (c: Client, id: string, item: string) => rowsOf(c, id).then((m) => m.get(item)?.label ?? "(deleted)");

t.test("offline conflicts: the later write of each row wins on both nodes", async (t) => {
  const P = await startOutpost({ args: ["--log-level", "warn"] });
  running.push(P);
  const s = await devWithSystem(P, "conflicts");
  const col = await collectionWith(s, [["label", "string"], ["n", "int"]]);
  const edgeName = uniq("offline"), token = `${edgeName}-token`;
  await s.dev.post(`/admin/edges/${s.systemKey}/${edgeName}`, { token });
  await s.dev.put(`/admin/edges/template/${s.systemKey}/${edgeName}`, { add: [{ def_module: "collection", def_name: col.name, mode: "sync" }] });
  const names = ["x", "y", "z", "w", "v", "u", "q"];
  const ins = await s.dev.post(`/api/v/1/data/${col.id}`, names.map((k, i) => ({ label: `${k} original`, n: i })));
  t.equal(ins.status, 200, "rows on the platform");
  const id = Object.fromEntries(names.map((k, i) => [k, ins.body[i].item_id as string])) as Record<string, string>;

  const proxy = await tcpProxy(P.httpPort);
  closers.push(() => proxy.close());
  const dir = mkdtempSync(join(tmpdir(), "outpost-conflict-"));
  dirs.push(dir);
  const E = await startOutpost({ dataDir: dir, args: ["--mode", "edge", "--platform-url", proxy.url, "--system-key", s.systemKey, "--edge-name", edgeName, "--edge-token", token, "--sync-ping-ms", "2000", "--log-level", "warn"] });
  running.push(E);
  let ed: Client | null = null;
  t.ok(await waitFor(async () => {
    const a = await request(E.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
    if (a.status === 200) ed = new Client(E.url, { "ClearBlade-DevToken": a.body.dev_token });
    return !!ed && (await rowsOf(ed, col.id)).size === names.length;
  }, 20_000), "the edge holds the rows");
  const edge = ed!;

  proxy.cut();
  t.ok(await waitFor(async () => (await s.dev.get(`/admin/edges/${s.systemKey}/${edgeName}`)).body.isConnected === false, 10_000), "the edge is offline");
  // one write after another, each a few ms after the last, so their order is the clocks' order
  const q = (k: string) => ({ query: [[{ EQ: [{ item_id: id[k] }] }]] });
  const set = async (c: Client, k: string, label: string) => { const r = await c.put(`/api/v/1/data/${col.id}`, { ...q(k), $set: { label } }); if (r.status !== 200 || r.body.count !== 1) throw new Error(`update ${k}: ${r.text}`); await sleep(15); };
  const del = async (c: Client, k: string) => { const r = await c.del(`/api/v/1/data/${col.id}?query=${qs(q(k).query)}`); if (r.status !== 200 || r.body.count !== 1) throw new Error(`delete ${k}: ${r.text}`); await sleep(15); };
  await set(edge, "x", "x by the edge"); await set(s.dev, "x", "x by the platform");   // the platform's is later
  await set(s.dev, "y", "y by the platform"); await set(edge, "y", "y by the edge");   // the edge's is later
  await del(edge, "z"); await set(s.dev, "z", "z by the platform");                     // an update after a delete
  await del(s.dev, "w"); await set(edge, "w", "w by the edge");                         // the same, the other way round
  await set(edge, "v", "v by the edge"); await del(s.dev, "v");                         // a delete after an update
  await set(s.dev, "u", "u by the platform"); await del(edge, "u");                     // the same, the other way round
  await set(edge, "q", "q by the edge, first"); await set(s.dev, "q", "q by the platform"); await set(edge, "q", "q by the edge, last");
  const want: Record<string, string> = {
    x: "x by the platform", y: "y by the edge", z: "z by the platform", w: "w by the edge", v: "(deleted)", u: "(deleted)", q: "q by the edge, last",
  };
  proxy.heal();

  let last = "";
  const agreed = await waitFor(async () => {
    const [p, e] = await Promise.all([rowsOf(s.dev, col.id), rowsOf(edge, col.id)]);
    last = names.map((k) => `${k}: platform ${p.get(id[k]!)?.label ?? "(deleted)"}, edge ${e.get(id[k]!)?.label ?? "(deleted)"}`).join("; ");
    return names.every((k) => (p.get(id[k]!)?.label ?? "(deleted)") === want[k] && (e.get(id[k]!)?.label ?? "(deleted)") === want[k]);
  }, 30_000, 200);
  t.ok(agreed, `both nodes hold the later write of each row${agreed ? "" : ` (${last})`}`);
  for (const k of names) {
    t.equal(await byLabel(s.dev, col.id, id[k]!), want[k], `${k} on the platform: ${want[k]}`);
    t.equal(await byLabel(edge, col.id, id[k]!), want[k], `${k} on the edge: ${want[k]}`);
  }
  // and it stays so: nothing sent later undoes it. Each side sends in order (the edge its outbox,
  // the platform its log), so a witness row written on the edge and seen on the platform comes
  // after whatever the edge still had to send; one written on the platform after that and seen
  // on the edge comes after whatever the platform sent, its answers to the edge's writes included
  const witness = async (from: Client, to: Client, label: string) => {
    const r = await from.post(`/api/v/1/data/${col.id}`, { label, n: -1 });
    if (r.status !== 200) throw new Error(`witness ${label}: ${r.text}`);
    const item = r.body[0].item_id as string;
    return waitFor(async () => (await rowsOf(to, col.id)).has(item), 20_000, 100);
  };
  t.ok(await witness(edge, s.dev, "edge witness"), "a row written on the edge afterwards reaches the platform");
  t.ok(await witness(s.dev, edge, "platform witness"), "then a row written on the platform reaches the edge");
  const [p, e] = await Promise.all([rowsOf(s.dev, col.id), rowsOf(edge, col.id)]);
  t.same([...e.entries()].sort(), [...p.entries()].sort(), "row for row the same on both nodes");
  t.same(names.map((k) => p.get(id[k]!)?.label ?? "(deleted)"), names.map((k) => want[k]), "still the later write of each row");
});
