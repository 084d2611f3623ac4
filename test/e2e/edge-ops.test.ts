// Remote operations, edge groups and the fleet report with a real platform and a real edge: an
// allowed command run (its output, exit code, time limit and output bound), a command the edge
// does not allow, the rights they take, the edge's settings without its secrets, a restart the
// edge comes back from; groups with nesting, recursive reads and refused cycles; the report and
// its bad periods; operations on an edge that is not connected.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { devWithSystem, isErr, newUser, type Outpost, startOutpost, uniq, waitFor } from "./harness.ts";

const platform = await startOutpost();
const s = await devWithSystem(platform, "ops");
const SK = s.systemKey;
const EDGE = uniq("gw");
const created = await s.dev.post(`/admin/edges/${SK}/${EDGE}`, { description: "ops edge" });
if (created.status !== 200) throw new Error(created.text);
const dir = mkdtempSync(join(tmpdir(), "outpost-edge-ops-"));
const commands = join(dir, "commands.txt");
writeFileSync(commands, "# what the platform may run here\necho hello from the edge\nsleep 5\nyes | head -c 200000\nexit 3\n");
const edge: Outpost = await startOutpost({ args: ["--mode", "edge", "--platform-url", platform.url, "--system-key", SK, "--edge-name", EDGE, "--edge-token", created.body.token, "--edge-commands-file", commands], logLevel: "info" });
t.teardown(async () => { await edge.stop(); await platform.stop(); });
const record = async () => (await s.dev.get(`/admin/edges/${SK}/${EDGE}`)).body;
if (!(await waitFor(async () => (await record()).isConnected === true, 45_000))) throw new Error(`the edge did not connect:\n${edge.logs().slice(-2000)}`);
const ops = `/api/v/1/edges/${SK}/${EDGE}`;

t.test("command-exec runs an allowed command and answers its output", async (t) => {
  const r = await s.dev.post(`${ops}/command-exec`, { command: "echo hello from the edge" });
  t.equal(r.status, 200, r.text);
  t.match(r.body, { command: "echo hello from the edge", output: "hello from the edge\n", exit_code: 0, timed_out: false, truncated: false });
  const failing = await s.dev.post(`${ops}/command-exec`, { command: "exit 3" });
  t.equal(failing.body.exit_code, 3, "a command's exit code");
});

t.test("command-exec: not allowed, time limit, output bound, bad bodies", async (t) => {
  const refused = await s.dev.post(`${ops}/command-exec`, { command: "cat /etc/passwd" });
  isErr(t, refused, 403, undefined, "a command the edge does not allow");
  t.match(refused.body.error?.detail, /not one of the commands this edge allows/);
  const t0 = Date.now();
  const slow = await s.dev.post(`${ops}/command-exec`, { command: "sleep 5", timeout: 1 });
  t.equal(slow.status, 200, slow.text);
  t.equal(slow.body.timed_out, true, "killed at its time limit");
  t.ok(Date.now() - t0 < 4_000, `answered after about 1 s (${Date.now() - t0} ms)`);
  const big = await s.dev.post(`${ops}/command-exec`, { command: "yes | head -c 200000" });
  t.equal(big.status, 200, big.text.slice(0, 200));
  t.equal(big.body.truncated, true, "output past 64 KiB is cut");
  t.ok(big.body.output.length < 70_000, `output bounded (${big.body.output.length} characters)`);
  for (const [what, body] of [["no command", {}], ["an empty command", { command: " " }], ["a timeout of 0", { command: "sleep 5", timeout: 0 }],
    ["a timeout past 300 s", { command: "sleep 5", timeout: 301 }], ["an unknown field", { command: "sleep 5", user: "root" }], ["not an object", [1]]] as const)
    isErr(t, await s.dev.post(`${ops}/command-exec`, body), 400, undefined, what);
});

t.test("remote operations take the developer or edgeremoteadmin", async (t) => {
  const u = await newUser(s);
  isErr(t, await u.client.post(`${ops}/command-exec`, { command: "echo hello from the edge" }), 401, undefined, "a user without edgeremoteadmin");
  const readOnly = await s.dev.post(`/admin/user/${SK}/roles`, { name: uniq("Viewer"), edgeremoteadmin: [{ itemInfo: { name: EDGE }, permissions: 1 }] });
  const admin = await s.dev.post(`/admin/user/${SK}/roles`, { name: uniq("Operator"), edgeremoteadmin: [{ itemInfo: { name: EDGE }, permissions: 5 }] });
  t.equal(admin.status, 200, admin.text);
  await s.dev.put(`/admin/user/${SK}`, { user: u.userId, changes: { roles: { add: [readOnly.body.role_id] } } });
  t.equal((await u.client.get(`${ops}/config`)).status, 200, "read grant: the settings");
  isErr(t, await u.client.post(`${ops}/command-exec`, { command: "echo hello from the edge" }), 401, undefined, "read grant: no commands");
  await s.dev.put(`/admin/user/${SK}`, { user: u.userId, changes: { roles: { add: [admin.body.role_id] } } });
  const r = await u.client.post(`${ops}/command-exec`, { command: "echo hello from the edge" });
  t.equal(r.status, 200, r.text);
  isErr(t, await s.dev.post(`/api/v/1/edges/${SK}/no-such-edge/command-exec`, { command: "echo hello from the edge" }), 404, undefined, "an unknown edge");
  const other = await devWithSystem(platform, "other");
  isErr(t, await other.dev.post(`${ops}/command-exec`, { command: "echo hello from the edge" }), 401, undefined, "another system's developer");
  const off = uniq("off");
  await s.dev.post(`/admin/edges/${SK}/${off}`, {});
  const t0 = Date.now();
  isErr(t, await s.dev.post(`/api/v/1/edges/${SK}/${off}/command-exec`, { command: "echo hello from the edge" }), 503, undefined, "an edge that is not connected");
  t.ok(Date.now() - t0 < 2_000, "at once");
});

t.test("config: the edge's settings without secrets", async (t) => {
  const r = await s.dev.get(`${ops}/config`);
  t.equal(r.status, 200, r.text);
  t.equal(r.body.edgeName, EDGE);
  t.equal(r.body.mode, "edge");
  t.notOk(JSON.stringify(r.body).includes(created.body.token), "the edge's token is not in it");
  t.notOk("edgeToken" in r.body, "no edgeToken");
});

t.test("edge groups: nesting, recursive reads, cycles refused", async (t) => {
  const base = `/admin/${SK}/edge_groups`;
  const [a, b, c] = [uniq("ga"), uniq("gb"), uniq("gc")];
  const ca = await s.dev.post(base, { name: a, description: "leaf", edges: [EDGE] });
  t.equal(ca.status, 200, ca.text);
  t.match(ca.body, { name: a, description: "leaf", edges: [EDGE], edge_groups: [] });
  t.equal((await s.dev.post(base, { name: b, edge_groups: [a] })).status, 200);
  t.equal((await s.dev.post(base, { name: c, edge_groups: [b] })).status, 200);
  const flat = await s.dev.get(`${base}/${c}`);
  t.same(flat.body.edges, [], "not recursive: its own edges");
  t.notOk("all_edges" in flat.body);
  const deep = await s.dev.get(`${base}/${c}?recursive=true`);
  t.same(deep.body.all_edges, [EDGE], "recursive: the edges its nested groups reach");
  const list = await s.dev.get(base);
  t.ok(Array.isArray(list.body) && [a, b, c].every((n) => list.body.some((g: any) => g.name === n)), "listed");
  const q = await s.dev.get(`${base}?query=${encodeURIComponent(JSON.stringify({ FILTERS: [[{ EQ: [{ name: a }] }]] }))}`);
  t.same(q.body.map((g: any) => g.name), [a], "a query filters");
  isErr(t, await s.dev.put(`${base}/${a}`, { edge_groups: [c] }), 400, undefined, "a cycle through two groups");
  isErr(t, await s.dev.put(`${base}/${a}`, { edge_groups: [a] }), 400, undefined, "a group in itself");
  isErr(t, await s.dev.post(base, { name: a }), 400, undefined, "a name taken");
  isErr(t, await s.dev.post(base, { name: uniq("g"), edges: ["no-such-edge"] }), 400, undefined, "an unknown edge");
  isErr(t, await s.dev.post(base, { name: uniq("g"), edge_groups: ["no-such-group"] }), 400, undefined, "an unknown group");
  isErr(t, await s.dev.post(base, { name: "-bad" }), 400, undefined, "a bad name");
  isErr(t, await s.dev.post(base, { name: uniq("g"), colour: "red" }), 400, undefined, "an unknown field");
  isErr(t, await s.dev.get(`${base}/no-such-group`), 404, undefined, "an unknown group");
  const u = await s.dev.put(`${base}/${a}`, { description: "changed" });
  t.match(u.body, { description: "changed", edges: [EDGE] }, "PUT keeps what it does not name");
  t.equal((await s.dev.del(`${base}/${b}`)).status, 200, "deleted");
  t.same((await s.dev.get(`${base}/${c}`)).body.edge_groups, [], "taken out of the groups nesting it");
  isErr(t, await (await newUser(s)).client.get(base), 401, undefined, "a user token");
});

t.test("the fleet report", async (t) => {
  const r = await s.dev.get("/admin/edge_report?report_days=3");
  t.equal(r.status, 200, r.text);
  t.equal(r.body.report_days, 3);
  const mine = r.body.systems?.[SK]?.edges?.[EDGE];
  t.match(mine, { connected: true, seen_in_period: true, failed_assets: 0 }, "the edge, connected");
  t.ok(typeof mine?.last_seen === "string" && mine.version, "last seen, its build");
  t.ok(r.body.totals.connected >= 1 && r.body.totals.edges >= 1);
  t.equal((await s.dev.get("/admin/edge_report")).body.report_days, 7, "7 days by default");
  for (const bad of ["0", "-1", "1.5", "abc", "366"]) isErr(t, await s.dev.get(`/admin/edge_report?report_days=${bad}`), 400, undefined, `report_days=${bad}`);
  isErr(t, await (await newUser(s)).client.get("/admin/edge_report?report_days=1"), 401, undefined, "a user token");
  const other = await devWithSystem(platform, "nothing");
  t.notOk(SK in (await other.dev.get("/admin/edge_report")).body.systems, "another developer does not see this system");
});

t.test("restart: a JSON string, and the edge comes back", async (t) => {
  const before = edge.logs().split("\n").filter((l) => l.includes("outpost started")).length;
  const r = await s.dev.post(`${ops}/restart`);
  t.equal(r.status, 200, r.text);
  t.equal(r.text, "\"restarting\"", "a JSON string");
  t.ok(await waitFor(() => edge.logs().split("\n").filter((l) => l.includes("outpost started")).length > before, 20_000), "the edge started again");
  t.ok(await waitFor(async () => (await s.dev.post(`${ops}/command-exec`, { command: "echo hello from the edge" })).status === 200, 20_000), "and takes commands again");
});
