// docs/api.md's auth column, checked against the binary for every route of a system (the path
// names the system): a route documented `developer` refuses a user of that system who holds the
// Administrator role (401/403, before anything else: not a 400 for the body, nor a 404); a route
// documented `token` or `developer` refuses a call without a token (401); and a `token` route
// lets that Administrator user past authorization (its GETs answer no 401/403). The names in the
// paths are of real resources, made first, so a route reaches its handler. An operator who reads
// "developer" there relies on users being kept out.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import t from "tap";
import { devWithSystem, must, newUser, request, startOutpost, uniq } from "../harness.ts";

const o = await startOutpost();
t.teardown(() => o.stop());
const s = await devWithSystem(o, "docs-auth");
const sk = s.systemKey;

// one name for a resource of every kind the paths name
const name = uniq("res");
const collectionId = (await must(s.dev.post("/admin/collectionmanagement", { name, appID: sk }), "collection")).collectionID as string;
await must(s.dev.post(`/admin/devices/${sk}/${name}`, { type: "t", state: "s", enabled: true, allow_key_auth: true, active_key: "device-key-1" }), "device");
await must(s.dev.post(`/admin/code/v/1/${sk}/${name}`, { code: `function ${name}(req, resp) { resp.success("ok"); }`, parameters: [] }), "service");
await must(s.dev.post(`/codeadmin/v/2/library/${sk}/${name}`, { code: "var x = 1;", description: "d" }), "library");
await must(s.dev.post(`/admin/triggers/handlers/${sk}/${name}`, { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: name }, service_name: name }), "trigger");
await must(s.dev.post(`/admin/triggers/timers/${sk}/${name}`, { frequency: 3600, repeats: -1, start_time: "now", service_name: name }), "timer");

const admin = await newUser(s);
await must(s.dev.put(`/admin/user/${sk}`, { user: admin.userId, changes: { roles: { add: ["Administrator"] } } }), "Administrator role");
const adminToken = (await must(s.app.post("/api/v/1/user/auth", { email: admin.email, password: admin.password }), "sign-in")).user_token as string;

interface Row { method: string; path: string; auth: string }
const rows: Row[] = readFileSync(resolve(process.cwd(), "docs/api.md"), "utf8").split("\n")
  .map((l) => /^\| (GET|POST|PUT|PATCH|DELETE) \| `([^`]+)` \| ([a-z]+) \|/.exec(l))
  .filter((m): m is RegExpExecArray => m !== null)
  .map((m) => ({ method: m[1]!, path: m[2]!, auth: m[3]! }))
  .filter((r) => /:systemKey\b|:key\b/.test(r.path));
const fill = (p: string) => p.replace(/:systemKey\b|:key\b/g, sk).replace(/:collectionID\b/g, collectionId).replace(/:version\b/g, "1").replace(/:[A-Za-z]+/g, name).replace(/\*/g, "x");
const call = (r: Row, headers: Record<string, string>) => request(o.url, r.method, fill(r.path), { headers, body: r.method === "GET" ? undefined : {} });

t.test("the table names routes of a system under each auth checked here", async (t) => {
  t.ok(rows.filter((r) => r.auth === "developer").length > 50, "developer routes");
  t.ok(rows.filter((r) => r.auth === "token").length > 50, "token routes");
});

t.test("a route documented `developer` refuses the system's Administrator user", async (t) => {
  for (const r of rows.filter((r) => r.auth === "developer")) {
    const x = await call(r, { "ClearBlade-UserToken": adminToken });
    t.ok(x.status === 401 || x.status === 403, `${r.method} ${r.path}: ${x.status} ${x.status < 300 ? x.text.slice(0, 80) : ""}`);
  }
});

t.test("a route documented `token` or `developer` refuses a call without a token", async (t) => {
  for (const r of rows.filter((r) => r.auth === "token" || r.auth === "developer")) {
    const x = await call(r, {});
    t.equal(x.status, 401, `${r.method} ${r.path}`);
  }
});

t.test("a GET documented `token` lets the system's Administrator user past authorization", async (t) => {
  for (const r of rows.filter((r) => r.auth === "token" && r.method === "GET")) {
    const x = await call(r, { "ClearBlade-UserToken": adminToken });
    t.ok(x.status !== 401 && x.status !== 403, `${r.method} ${r.path}: ${x.status}`);
  }
});
