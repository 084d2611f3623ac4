// An edge whose record is deleted and made again on the platform while it is connected starts
// over as the new record (a full snapshot of its new template); reads on the edge meanwhile
// answer what they find, never a 5xx.
import t from "tap";
import { Client, collectionWith, devWithSystem, must, request, startOutpost, uniq, waitFor } from "./harness.ts";

const platform = await startOutpost();
t.teardown(() => platform.stop());

t.test("reads on an edge that starts over as its record made again never answer 5xx", async (t) => {
  const sys = await devWithSystem(platform, "reincarnation");
  const SK = sys.systemKey;
  const col = await collectionWith(sys, [["label", "string"], ["n", "int"]]);
  for (let i = 0; i < 2000; i += 500) await must(sys.dev.post(`/api/v/1/data/${col.id}`, Array.from({ length: 500 }, (_, k) => ({ label: `r${i + k}`, n: i + k }))), "rows");
  const other = await collectionWith(sys, [["label", "string"]]);
  await must(sys.dev.post(`/api/v/1/data/${other.id}`, [{ label: "o" }]), "row");
  const svc = uniq("svc");
  await must(sys.dev.post(`/admin/code/v/1/${SK}/${svc}`, { code: `function ${svc}(req, resp) { resp.success("v1"); }` }), "service");
  const gone = uniq("gone");
  await must(sys.dev.post(`/admin/code/v/1/${SK}/${gone}`, { code: `function ${gone}(req, resp) { resp.success("gone"); }` }), "service");
  const name = uniq("gw");
  const e = await must(sys.dev.post(`/admin/edges/${SK}/${name}`, {}), "edge");
  const template = [{ def_module: "collection", def_name: col.name, mode: "sync_to_edge", rows: true }, { def_module: "collection", def_name: other.name, mode: "sync_to_edge", rows: true }, { def_module: "service", def_name: svc }, { def_module: "service", def_name: gone }];
  await must(sys.dev.put(`/admin/edges/template/${SK}/${name}`, { add: template }), "template");
  const edge = await startOutpost({ args: ["--mode", "edge", "--platform-url", platform.url, "--system-key", SK, "--edge-name", name, "--edge-token", e.token, "--log-level", "debug"] });
  t.teardown(() => edge.stop());
  t.ok(await waitFor(async () => (await sys.dev.get(`/admin/edges/${SK}/${name}`)).body?.isConnected === true, 30_000), "the edge is connected");
  const signIn = await request(edge.url, "POST", "/admin/auth", { body: { email: sys.email, password: sys.password } });
  t.equal(signIn.status, 200, signIn.text);
  const ed = new Client(edge.url, { "ClearBlade-DevToken": signIn.body.dev_token });
  t.ok(await waitFor(async () => (await ed.get(`/api/v/1/data/${col.id}?query=${encodeURIComponent(JSON.stringify({ PAGESIZE: 1 }))}`)).body?.TOTAL === 2000, 30_000), "the edge has the rows");

  const bad: string[] = [];
  let reads = 0, stop = false;
  const reader = async (path: string, method = "GET") => {
    while (!stop) {
      const r = method === "GET" ? await ed.get(path) : await ed.post(path, {});
      reads++;
      if (r.status >= 500) bad.push(`${method} ${path}: ${r.status} ${r.text.slice(0, 300)}`);
    }
  };
  const readers = [
    reader(`/api/v/1/data/${col.id}?query=${encodeURIComponent(JSON.stringify({ PAGESIZE: 100 }))}`),
    reader(`/api/v/1/data/${other.id}`),
    reader(`/api/v/1/collection/${SK}/${col.name}`),
    reader(`/api/v/1/data/${col.id}/count`),
    reader(`/api/v/1/code/${SK}/${svc}`, "POST"),
    reader(`/api/v/1/code/${SK}/${gone}`, "POST"),
    reader(`/admin/allcollections?appid=${SK}`),
    reader(`/api/v/4/edge/status`),
  ];
  const mark = edge.logs().length;
  await must(sys.dev.del(`/admin/edges/${SK}/${name}`), "delete the edge");
  await must(sys.dev.put("/admin/collectionmanagement", { id: col.id, deleteColumn: "n" }), "drop a column");
  await must(sys.dev.put("/admin/collectionmanagement", { id: col.id, addColumn: { name: "m", type: "int" } }), "add one");
  await must(sys.dev.post(`/admin/edges/${SK}/${name}`, { token: e.token }), "made again");
  await must(sys.dev.put(`/admin/edges/template/${SK}/${name}`, { add: [template[0], template[2]] }), "its template");
  t.ok(await waitFor(() => edge.logs().slice(mark).includes("starting over"), 30_000), "the edge starts over");
  t.ok(await waitFor(async () => (await ed.get(`/api/v/1/data/${other.id}`)).status === 404, 30_000), "the collection the new template lacks leaves");
  t.ok(await waitFor(async () => (await ed.post(`/api/v/1/code/${SK}/${gone}`, {})).status === 404, 30_000), "and the service");
  t.ok(await waitFor(async () => (await ed.get(`/api/v/1/data/${col.id}?query=${encodeURIComponent(JSON.stringify({ PAGESIZE: 1 }))}`)).body?.DATA?.[0]?.m !== undefined, 30_000), "the kept collection has its new schema");
  stop = true;
  await Promise.all(readers);
  t.ok(reads > 50, `${reads} reads`);
  t.same(bad.slice(0, 20), [], "no 5xx");
});
