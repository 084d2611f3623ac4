// A shared cache's values over REST (/admin/v/4/service_caches/:systemKey/:name/values, Outpost's
// own route the console uses): set, read all and one, delete; what a service then sees; keys any
// text (a "/" included); refusals: no token, another developer, a user without the grant (and
// with it), an unknown cache, a missing key, a bad body, a value too big; the write in the audit
// trail.
import t from "tap";
import { Client, devWithSystem, isErr, must, newUser, ok200, startOutpost, uniq } from "./harness.ts";

const o = await startOutpost();
t.teardown(() => o.stop());
const s = await devWithSystem(o, "cache-values");
const other = await devWithSystem(o, "cache-values-other");
const SK = s.systemKey;
const values = (name: string, key?: string) => `/admin/v/4/service_caches/${SK}/${encodeURIComponent(name)}/values${key === undefined ? "" : `?key=${encodeURIComponent(key)}`}`;
await must(s.dev.post(`/admin/v/4/service_caches/${SK}/shared`, { ttl: 300 }), "cache");

t.test("set, read, delete, and a service sees the same values", async (t) => {
  ok200(t, await s.dev.put(values("shared"), { key: "lamp/1", value: { on: true, level: 3 } }), "set an object under a key with a slash");
  ok200(t, await s.dev.put(values("shared"), { key: "count", value: 7 }), "set a number");
  t.same((await s.dev.get(values("shared"))).body, { "lamp/1": { on: true, level: 3 }, count: 7 }, "every pair");
  t.same((await s.dev.get(values("shared", "lamp/1"))).body, { key: "lamp/1", value: { on: true, level: 3 } }, "one key");
  await must(s.dev.post(`/admin/code/v/1/${SK}/readCount`, { code: "function readCount(req, resp) { ClearBladeAsync.Cache('shared').get('count').then(function (v) { resp.success(v); }, resp.error); }", parameters: [] }), "service");
  t.equal((await s.dev.post(`/api/v/1/code/${SK}/readCount`, {})).body.results, 7, "a service reads what REST set");
  ok200(t, await s.dev.del(values("shared", "count")), "delete a key");
  isErr(t, await s.dev.get(values("shared", "count")), 404, "a deleted key");
  t.same((await s.dev.get(values("shared"))).body, { "lamp/1": { on: true, level: 3 } }, "the other pair stays");
  const audit = await s.dev.get(`/admin/audit/${SK}?query=${encodeURIComponent(JSON.stringify({ FILTERS: [[{ EQ: [{ asset_class: "servicecaches" }] }, { EQ: [{ action_type: "Update" }] }]] }))}`);
  t.ok((audit.body as any[]).some((r) => r.asset_id === "shared"), "a write is in the audit trail under servicecaches");
});

t.test("refusals", async (t) => {
  isErr(t, await new Client(o.url).get(values("shared")), 401, "no token");
  isErr(t, await other.dev.get(values("shared")), 401, "another system's developer");
  isErr(t, await s.dev.get(values("nosuch")), 404, "an unknown cache");
  isErr(t, await s.dev.put(values("nosuch"), { key: "a", value: 1 }), 404, "a write to an unknown cache");
  isErr(t, await s.dev.del(values("shared")), 400, "a delete without ?key=");
  isErr(t, await s.dev.put(values("shared"), { value: 1 }), 400, "a write without a key");
  isErr(t, await s.dev.put(values("shared"), { key: "a" }), 400, "a write without a value");
  isErr(t, await s.dev.put(values("shared"), { key: "a", value: 1, extra: true }), 400, "an unknown field");
  isErr(t, await s.dev.put(values("shared"), [1, 2]), 400, "a body that is not an object");
  isErr(t, await s.dev.put(values("shared"), { key: "big", value: "x".repeat(1024 * 1024 + 10) }), 400, "a value over the cache's bytes");
  isErr(t, await s.dev.put(values("shared"), { key: "k".repeat(2000), value: 1 }), 400, "a key too long");
});

t.test("users: by the role grant servicecaches", async (t) => {
  const u = await newUser(s);
  isErr(t, await u.client.get(values("shared")), 401, 200, "a user without the grant cannot read (permission denied)");
  const role = await must(s.dev.post(`/admin/user/${SK}/roles`, { name: uniq("R"), servicecaches: [{ itemInfo: { name: "shared" }, permissions: 1 }] }), "role");
  await must(s.dev.put(`/admin/user/${SK}`, { user: u.userId, changes: { roles: { add: [role.role_id] } } }), "user's role");
  const a = await must(s.app.post("/api/v/1/user/auth", { email: u.email, password: u.password }), "user auth");
  const reader = new Client(o.url, { "ClearBlade-UserToken": a.user_token });
  ok200(t, await reader.get(values("shared")), "read with the read grant");
  isErr(t, await reader.put(values("shared"), { key: "x", value: 1 }), 401, 200, "but not write");
});
