// An edge's API on what its platform owns there, black-box (a platform and an edge process): a
// local write to a definition the platform sent (a service, a library, a collection's schema, a
// trigger, a timer, a role, a webhook, an adapter) is refused with the PLATFORM_OWNED envelope and changes
// nothing; the platform's own changes still apply; assets made on the edge, and rows (two-way
// and down-only collections), stay the edge's to write; the edge's status says each asset's mode.
import t from "tap";
import { Client, collectionWith, devWithSystem, isErr, must, ok200, request, startOutpost, uniq, waitFor } from "./harness.ts";

const PLATFORM_OWNED = 1405;

const platform = await startOutpost({});
t.teardown(() => platform.stop());
const s = await devWithSystem(platform, "edge-owned");
const SK = s.systemKey;

// what the platform owns on the edge
const down = await collectionWith(s, [["v", "string"]], uniq("down"));
const both = await collectionWith(s, [["v", "string"]], uniq("both"));
const svc = uniq("psvc"), lib = uniq("plib"), trigger = uniq("ptrg"), timer = uniq("ptmr"), role = uniq("prole"), hook = uniq("phook"), adapter = uniq("padp");
const code = (n: string, out: string) => `function ${n}(req, resp) { resp.success("${out}"); }`;
await must(s.dev.post(`/admin/code/v/1/${SK}/${svc}`, { code: code(svc, "platform"), parameters: [], run_on_edge: true }), "service");
await must(s.dev.post(`/codeadmin/v/2/library/${SK}/${lib}`, { code: "var x = 1;", description: "" }), "library");
await must(s.dev.post(`/admin/triggers/handlers/${SK}/${trigger}`, { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: both.name }, service_name: svc }), "trigger");
await must(s.dev.post(`/admin/triggers/timers/${SK}/${timer}`, { frequency: 3600, repeats: -1, start_time: new Date(Date.now() + 3_600_000).toISOString(), service_name: svc }), "timer");
const roleId = (await must(s.dev.post(`/admin/user/${SK}/roles`, { name: role }), "role")).role_id as string;
await must(s.dev.post(`/admin/v/4/webhook/${SK}/${hook}`, { service_name: svc }), "webhook");
await must(s.dev.post(`/api/v/4/${SK}/adapters`, { name: adapter, description: "bridge", start_command: "./start.sh", run_start_on_deploy: false }), "adapter");
const gw = await must(s.dev.post(`/admin/edges/${SK}/gw1`, {}), "edge gw1");
await must(s.dev.put(`/admin/edges/template/${SK}/gw1`, { add: [
  { def_module: "collection", def_name: down.name, mode: "sync_to_edge" }, { def_module: "collection", def_name: both.name, mode: "sync" },
  ...[["service", svc], ["library", lib], ["trigger", trigger], ["timer", timer], ["role", role], ["webhook", hook], ["adapter", adapter]].map(([m, n]) => ({ def_module: m, def_name: n, mode: "sync_to_edge" })),
] }), "template");

const edge = await startOutpost({ args: ["--mode", "edge", "--platform-url", platform.url, "--system-key", SK, "--edge-name", "gw1", "--edge-token", gw.token] });
t.teardown(() => edge.stop());
const signIn = () => request(edge.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
if (!(await waitFor(async () => (await signIn()).status === 200, 20_000))) throw new Error(`the developer cannot sign in on the edge:\n${edge.logs()}`);
const ed = new Client(edge.url, { "ClearBlade-DevToken": (await signIn()).body.dev_token });
const status = async () => (await ed.get("/api/v/4/edge/status")).body;
if (!(await waitFor(async () => (await status()).synced >= 9, 20_000))) throw new Error(`the edge did not get the platform's assets: ${JSON.stringify(await status())}`);

t.test("the status says each asset's mode (which way a collection's rows flow)", async (t) => {
  const assets = (await status()).assets as { asset_type: string; asset_name: string; mode: string }[];
  const modeOf = (type: string, name: string) => assets.find((a) => a.asset_type === type && a.asset_name === name)?.mode;
  t.equal(modeOf("collection", down.name), "sync_to_edge");
  t.equal(modeOf("collection", both.name), "sync");
  t.equal(modeOf("service", svc), "sync_to_edge");
});

t.test("local writes to what the platform sent are refused, and change nothing", async (t) => {
  const refused = async (r: Promise<Parameters<typeof isErr>[1]>, what: string) => {
    const a = await r;
    isErr(t, a, 403, PLATFORM_OWNED, what);
    t.match(a.body?.error?.detail, /comes from the platform.*change it on the platform/, `${what}: says why`);
  };
  await refused(ed.put(`/admin/code/v/1/${SK}/${svc}`, { code: code(svc, "edge") }), "update the service");
  await refused(ed.del(`/admin/code/v/1/${SK}/${svc}`), "delete the service");
  await refused(ed.put(`/codeadmin/v/2/library/${SK}/${lib}`, { code: "var x = 2;" }), "update the library");
  await refused(ed.del(`/codeadmin/v/2/library/${SK}/${lib}`), "delete the library");
  await refused(ed.put("/admin/collectionmanagement", { id: down.id, addColumn: { name: "w", type: "string" } }), "add a column to the collection");
  await refused(ed.put("/admin/collectionmanagement", { id: both.id, renameCollection: uniq("renamed") }), "rename the collection");
  await refused(ed.del(`/admin/collectionmanagement?id=${down.id}`), "delete the collection");
  await refused(ed.put(`/admin/triggers/handlers/${SK}/${trigger}`, { def_module: "Data", def_name: "ItemDeleted", key_value_pairs: { collectionName: both.name }, service_name: svc }), "update the trigger");
  await refused(ed.del(`/admin/triggers/timers/${SK}/${timer}`), "delete the timer");
  await refused(ed.put(`/admin/user/${SK}/roles`, { id: roleId, changes: { description: "edge" } }), "update the role");
  await refused(ed.del(`/admin/v/4/webhook/${SK}/${hook}`), "delete the webhook");
  await refused(ed.put(`/api/v/4/${SK}/adapters/${adapter}`, { description: "edge" }), "update the adapter");
  // nothing changed
  t.match((await ed.get(`/admin/code/v/1/${SK}/${svc}`)).body.code, /"platform"/, "the service's code is the platform's");
  t.same((await ed.get(`/api/v/1/data/${down.id}/columns`)).body.map((c: { ColumnName: string }) => c.ColumnName).sort(), ["item_id", "v"], "the columns are the platform's");
  t.ok((await ed.get(`/admin/allcollections?appid=${SK}`)).body.some((c: { name: string }) => c.name === both.name), "the collection keeps its name");
  ok200(t, await ed.get(`/admin/triggers/timers/${SK}/${timer}`), "the timer is there");
  ok200(t, await ed.get(`/admin/v/4/webhook/${SK}/${hook}`), "the webhook is there");
  t.equal((await status()).failed, 0, "and nothing is reported failed");
});

t.test("the platform's changes still apply on the edge; runs are the edge's", async (t) => {
  ok200(t, await s.dev.put(`/admin/code/v/1/${SK}/${svc}`, { code: code(svc, "platform v2") }), "the platform changes the service");
  t.ok(await waitFor(async () => /platform v2/.test((await ed.get(`/admin/code/v/1/${SK}/${svc}`)).body.code ?? "")), "the edge has the new code");
  const run = await ed.post(`/api/v/1/code/${SK}/${svc}`, {});
  ok200(t, run, "the platform's service runs on the edge");
  t.equal(run.body.results, "platform v2");
});

t.test("rows stay the edge's to write, whichever way they flow", async (t) => {
  ok200(t, await ed.post(`/api/v/1/data/${both.id}`, { v: "from the edge" }), "a row of the two-way collection");
  t.ok(await waitFor(async () => (await s.dev.get(`/api/v/1/data/${both.id}`)).body.DATA?.some((r: { v: string }) => r.v === "from the edge")), "it reaches the platform");
  ok200(t, await ed.post(`/api/v/1/data/${down.id}`, { v: "local" }), "a row of the down-only collection (the edge's own until a full snapshot)");
});

t.test("what is made on the edge is the edge's: created, changed, deleted", async (t) => {
  const name = uniq("local");
  const made = await ed.post("/admin/collectionmanagement", { name, appID: SK });
  ok200(t, made, "a local collection");
  ok200(t, await ed.put("/admin/collectionmanagement", { id: made.body.collectionID, addColumn: { name: "w", type: "string" } }), "a column added");
  ok200(t, await ed.del(`/admin/collectionmanagement?id=${made.body.collectionID}`), "deleted");
  const local = uniq("lsvc");
  ok200(t, await ed.post(`/admin/code/v/1/${SK}/${local}`, { code: code(local, "a"), parameters: [] }), "a local service");
  ok200(t, await ed.put(`/admin/code/v/1/${SK}/${local}`, { code: code(local, "b") }), "changed");
  ok200(t, await ed.del(`/admin/code/v/1/${SK}/${local}`), "deleted");
  // the guard is the edge's alone: the platform's developer changes its own assets
  ok200(t, await s.dev.put("/admin/collectionmanagement", { id: down.id, addColumn: { name: "w", type: "string" } }), "the platform adds a column");
  t.ok(await waitFor(async () => (await ed.get(`/api/v/1/data/${down.id}/columns`)).body.some?.((c: { ColumnName: string }) => c.ColumnName === "w")), "the edge has it");
});
