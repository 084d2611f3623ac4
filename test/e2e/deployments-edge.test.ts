// Deployments with a real edge (a platform and an edge, two processes of the binary): a
// deployment created, changed (assets and edges added and removed) and deleted while the edge is
// online and while it is offline converges, with honest per-edge, per-asset status; the edge gets
// the union of its template and its deployments; an asset two deployments cover stays while one
// still does; another system's deployment naming the edge gives it nothing.
import t from "tap";
import { Client, type DevSystem, type Outpost, collectionWith, devWithSystem, must, ok200, qs, request, startOutpost, uniq, waitFor } from "./harness.ts";

let o: Outpost;
let s: DevSystem;
let other: DevSystem;
t.before(async () => {
  o = await startOutpost();
  s = await devWithSystem(o, "deployedge");
  other = await devWithSystem(o, "deployother");
});
t.teardown(() => o?.stop());

const SLOW = 20_000;
const svc = (sys: DevSystem, name: string) => `/admin/code/v/1/${sys.systemKey}/${name}`;
const dep = (name?: string) => `/admin/${s.systemKey}/deployments${name === undefined ? "" : `/${name}`}`;
const depStatus = (name: string) => `/admin/${s.systemKey}/sync/deployment/status/${name}`;
const cache = (name: string) => `/admin/v/4/service_caches/${s.systemKey}/${name}`;
const hook = (name: string) => `/admin/v/4/webhook/${s.systemKey}/${name}`;

async function edgeDev(e: Outpost): Promise<Client> {
  let c: Client | null = null;
  const ok = await waitFor(async () => {
    const a = await request(e.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
    if (a.status === 200) c = new Client(e.url, { "ClearBlade-DevToken": a.body.dev_token });
    return a.status === 200;
  }, SLOW);
  if (!ok) throw new Error("the developer cannot sign in on the edge");
  return c!;
}

/** The deployment's status of one edge, once `pred` holds for it (or the last one read). */
async function statusWhen(name: string, edge: string, pred: (e: any) => boolean) {
  let last: any = null;
  await waitFor(async () => {
    const st = await must(s.dev.get(depStatus(name)), "deployment status");
    last = st.edges.find((x: any) => x.edge_name === edge);
    return !!last && pred(last);
  }, SLOW, 100);
  return last;
}

t.test("deployments online and offline, with a template, two deployments and honest status", async (t) => {
  const code = (n: string, v = 1) => ({ code: `function ${n}(req, resp) { resp.success(${v}); }` });
  for (const n of ["base", "calc", "sum"]) await must(s.dev.post(svc(s, n), code(n)), `service ${n}`);
  await must(other.dev.post(svc(other, "theirs"), code("theirs")), "the other system's service");
  const readings = await collectionWith(s, [["v", "int"]], "readings");
  await must(s.dev.post(cache("c1"), { ttl: 60, description: "cache one" }), "service cache c1");
  await must(s.dev.post(hook("inbound"), { service_name: "calc" }), "webhook inbound");

  const edge = uniq("gw"), token = `${edge}-token`;
  await must(s.dev.post(`/admin/edges/${s.systemKey}/${edge}`, { token }), "edge record");
  // the edge's own template: the service base
  await must(s.dev.put(`/admin/edges/template/${s.systemKey}/${edge}`, { add: [{ def_module: "service", def_name: "base", mode: "sync_to_edge" }] }), "template");
  // another system's deployment naming an edge of the same name
  await must(other.dev.post(`/admin/${other.systemKey}/deployments`, { name: "theirs", assets: [{ asset_class: "services", asset_id: "", sync_to_edge: true }], edges: [edge] }), "other system's deployment");

  const edgeArgs = ["--mode", "edge", "--platform-url", o.url, "--system-key", s.systemKey, "--edge-name", edge, "--edge-token", token, "--sync-ping-ms", "500"];
  let e = await startOutpost({ args: edgeArgs, keepData: true });
  const dataDir = e.dataDir;
  t.teardown(async () => { await e.stop(); });
  let ed = await edgeDev(e);
  const has = async (path: string) => (await ed.get(path)).status === 200;
  const gone = async (path: string) => (await ed.get(path)).status === 404;
  t.ok(await waitFor(() => has(svc(s, "base")), SLOW), "the template's service is on the edge");

  // ---- online: create -------------------------------------------------------------------------
  const d1 = uniq("d1"), d2 = uniq("d2"), d3 = uniq("d3");
  const made = Date.now();
  ok200(t, await s.dev.post(dep(), {
    name: d1, description: "line",
    assets: [{ asset_class: "services", asset_id: "calc", sync_to_edge: true }, { asset_class: "readings", asset_id: "", sync: true }, { asset_class: "servicecaches", asset_id: "c1", sync_to_edge: true }],
    edges: [edge],
  }), "create d1 while the edge is online");
  t.ok(await waitFor(() => has(svc(s, "calc")), SLOW), "d1's service reaches the edge at once");
  t.comment(`deployment created -> its service on the online edge: ${Date.now() - made} ms`);
  const onEdge = await ed.get(depStatus(d1));
  t.equal(onEdge.status, 400, "an edge keeps no deployment status (the platform does)");
  t.ok(await waitFor(() => has(cache("c1")), SLOW), "and its service cache definition");
  t.ok(await waitFor(async () => (await ed.get(`/api/v/1/data/${readings.id}`)).status === 200, SLOW), "and its collection");
  t.ok(await has(svc(s, "base")), "the template's service stays: the edge has the union");
  t.ok(await gone(svc(s, "theirs")), "nothing of the other system's deployment (after d1's assets arrived)");
  t.ok(await gone(svc(s, "sum")), "nor a service no source names");
  // rows: down (sync_to_edge) and up (sync_to_platform)
  ok200(t, await s.dev.post(`/api/v/1/data/${readings.id}`, [{ v: 1 }]), "a row on the platform");
  const rowsOn = async (c: Client) => ((await c.get(`/api/v/1/data/${readings.id}?query=${qs({ PAGESIZE: 0, PAGENUM: 0 })}`)).body?.DATA ?? []).map((r: any) => r.v).sort();
  t.ok(await waitFor(async () => (await rowsOn(ed)).includes(1), SLOW), "comes down to the edge");
  ok200(t, await ed.post(`/api/v/1/data/${readings.id}`, [{ v: 2 }]), "a row written on the edge");
  t.ok(await waitFor(async () => (await rowsOn(s.dev)).includes(2), SLOW), "goes up to the platform");
  const st1 = await statusWhen(d1, edge, (x) => x.status === "synced" && x.assets.length >= 4);
  t.equal(st1?.exists, true, "status: the edge exists");
  t.equal(st1?.connected, true, "and is connected");
  const calcSt = st1?.assets.find((a: any) => a.asset_type === "service" && a.asset_name === "calc");
  t.match(calcSt, { asset_class: "services", asset_id: "calc", status: "synced", sources: [`deployment:${d1}`] }, "calc: synced, brought by d1");
  t.ok(st1?.assets.some((a: any) => a.asset_type === "collection_rows" && a.asset_class === "readings"), "the collection's rows are listed under its class");
  t.notOk(st1?.assets.some((a: any) => a.asset_name === "base"), "the template's asset is not this deployment's");

  // ---- online: a second deployment, then changes ----------------------------------------------
  ok200(t, await s.dev.post(dep(), { name: d2, assets: [{ asset_class: "services", asset_id: "calc", sync_to_edge: true }, { asset_class: "services", asset_id: "sum", sync_to_edge: true }], edges: [edge] }), "d2: calc and sum");
  t.ok(await waitFor(() => has(svc(s, "sum")), SLOW), "d2's sum arrives");
  const both = await statusWhen(d2, edge, (x) => x.assets.some((a: any) => a.asset_name === "calc" && a.sources.length === 2));
  t.same(both?.assets.find((a: any) => a.asset_name === "calc")?.sources.sort(), [`deployment:${d1}`, `deployment:${d2}`].sort(), "calc comes from both");
  const changed = await s.dev.put(dep(d1), { assets: { remove: [{ asset_class: "services", asset_id: "calc" }], add: [{ asset_class: "webhooks", asset_id: "inbound", sync_to_edge: true }] } });
  ok200(t, changed, "d1 drops calc and adds the webhook");
  t.ok(await waitFor(() => has(hook("inbound")), SLOW), "the webhook arrives");
  t.ok(await has(svc(s, "calc")), "calc stays: d2 still covers it (checked after the same change's webhook arrived)");
  ok200(t, await s.dev.put(svc(s, "calc"), code("calc", 5)), "calc changes on the platform");
  t.ok(await waitFor(async () => ((await ed.get(svc(s, "calc"))).body?.code ?? "").includes("success(5)"), SLOW), "and the change reaches the edge through d2");
  ok200(t, await s.dev.put(dep(d2), { edges: { remove: [edge] } }), "d2 no longer names the edge");
  t.ok(await waitFor(() => gone(svc(s, "sum")), SLOW), "sum leaves the edge");
  t.ok(await waitFor(() => gone(svc(s, "calc")), SLOW), "calc too: nothing covers it any more");
  t.ok(await has(svc(s, "base")), "the template's service stays");
  t.ok(await has(hook("inbound")), "d1's webhook stays");
  const st2 = await must(s.dev.get(depStatus(d2)), "d2 status");
  t.same(st2.edges, [], "d2 names no edge: its status lists none");

  // ---- offline --------------------------------------------------------------------------------
  await e.stop();
  ok200(t, await s.dev.put(dep(d2), { edges: { add: [edge] } }), "d2 names the edge again while it is off");
  ok200(t, await s.dev.del(dep(d1)), "d1 deleted while it is off");
  ok200(t, await s.dev.post(dep(), { name: d3, assets: [{ asset_class: "servicecaches", asset_id: "", sync_to_edge: true }], edges: [edge] }), "d3: every service cache");
  await must(s.dev.post(cache("c2"), { ttl: 120 }), "a second cache");
  const off = await statusWhen(d3, edge, (x) => x.connected === false);
  t.equal(off?.status, "pending", "status while off: pending");
  const offOf = (id: string) => off?.assets.find((a: any) => a.asset_id === id)?.status;
  t.equal(offOf("c2"), "pending", "the new cache is pending on the offline edge");
  t.equal(offOf("c1"), "synced", "c1, which the edge holds unchanged (d1 brought it), is synced");
  e = await startOutpost({ args: edgeArgs, dataDir, keepData: true });
  ed = await edgeDev(e);
  t.ok(await waitFor(() => has(svc(s, "sum")), SLOW), "back online: d2's sum returns");
  t.ok(await waitFor(() => has(cache("c2")), SLOW), "d3's new cache arrives");
  t.ok(await waitFor(() => gone(hook("inbound")), SLOW), "the deleted d1's webhook is gone");
  t.ok(await waitFor(async () => (await ed.get(`/api/v/1/data/${readings.id}`)).status !== 200, SLOW), "and its collection");
  t.ok(await has(cache("c1")), "c1 stays: d3 covers every cache");
  t.ok(await has(svc(s, "calc")), "calc is back through d2");
  t.ok(await has(svc(s, "base")), "the template's service stays");
  const on = await statusWhen(d3, edge, (x) => x.connected === true && x.status === "synced");
  t.equal(on?.status, "synced", "d3 synced once the edge is back");
  t.same(on?.assets.map((a: any) => a.asset_id).sort(), ["c1", "c2"], "with each cache");

  // ---- online: delete -------------------------------------------------------------------------
  ok200(t, await s.dev.del(dep(d2)), "d2 deleted online");
  t.ok(await waitFor(() => gone(svc(s, "sum")), SLOW), "its services leave");
  t.ok(await waitFor(() => gone(svc(s, "calc")), SLOW), "both");
  t.ok(await has(svc(s, "base")), "the template's stays");
  t.ok(await has(cache("c2")), "d3's stays");
  t.ok(await waitFor(async () => {
    const st = await must(s.dev.get(`/admin/${s.systemKey}/sync/edge/status/${edge}`), "edge status");
    return st.every((a: any) => a.status === "synced") && !st.some((a: any) => a.asset_name === "sum" && a.source);
  }, SLOW), "the edge's own status: all synced, sum brought by nothing");
});
