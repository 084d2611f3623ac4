// Rights on service caches remembered by the code workers across runs (src/code/cacheMirror.ts):
// a run whose user has the same roles as an earlier run's reads from its worker's copy without
// asking the main thread first, black-box: every change that may change those rights (the role's
// permissions, the user's roles, the cache deleted or made again) holds for the very next run on
// every worker, and another user's roles are never taken for these.
import t from "tap";
import { Client, type DevSystem, devWithSystem, must, newUser, startOutpost, uniq } from "./harness.ts";

// (several workers: each one remembers for itself)
const o = await startOutpost({ args: ["--code-workers", "3", "--code-max-share", "1"] });
t.teardown(() => Promise.race([o.stop(), new Promise<void>((r) => setTimeout(r, 5000)).then(() => o.kill())]));
const s: DevSystem = await devWithSystem(o, "caches-rights");

const cachePath = (name: string) => `/admin/v/4/service_caches/${s.systemKey}/${encodeURIComponent(name)}`;
async function service(name: string, code: string) {
  await must(s.dev.post(`/admin/code/v/1/${s.systemKey}/${name}`, { code, parameters: [], systemID: s.systemKey }), `create service ${name}`);
  return name;
}
const exec = (c: Client, name: string, params: unknown = {}) => c.post(`/api/v/1/code/${s.systemKey}/${name}`, params);

/** Services on cache `c`: a reader (its first cache call is a get, so only remembered rights let
 *  its worker answer it) and a writer. */
async function readerOn(c: string) {
  const name = uniq("reader");
  await service(name, `function ${name}(req, resp) {
    ClearBlade.Cache("${c}").get("k", function (err, d) { if (err) resp.error("refused: " + JSON.stringify(d)); resp.success(d === undefined ? "missing" : d); });
  }`);
  return name;
}
async function writerOn(c: string) {
  const name = uniq("writer");
  await service(name, `function ${name}(req, resp) {
    ClearBlade.Cache("${c}").set("k", req.params.v, function (err, d) { if (err) resp.error("refused: " + JSON.stringify(d)); resp.success("set"); });
  }`);
  return name;
}

/** A user holding a new role that may run `services` and holds `levels` on cache `c`. */
async function userWithRole(services: string[], c: string, levels: number) {
  const u = await newUser(s);
  const role = await must(s.dev.post(`/admin/user/${s.systemKey}/roles`, {
    name: uniq("R"), services: services.map((name) => ({ itemInfo: { name }, permissions: 1 })), servicecaches: [{ itemInfo: { name: c }, permissions: levels }],
  }), "create role");
  await must(s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { roles: { add: [role.role_id] } } }), "user roles");
  const a = await must(s.app.post("/api/v/1/user/auth", { email: u.email, password: u.password }), "user auth");
  return { u, roleId: role.role_id as string, client: new Client(o.url, { "ClearBlade-UserToken": a.user_token }) };
}

/** Runs `name` as `c` enough times at once that every worker runs it (and remembers); the answers. */
async function everywhere(c: Client, name: string): Promise<{ success: boolean; results: unknown }[]> {
  const all = await Promise.all(Array.from({ length: 12 }, () => exec(c, name)));
  return all.map((r) => ({ success: r.body?.success === true, results: r.body?.results }));
}
const setRole = (roleId: string, c: string, levels: number) =>
  must(s.dev.put(`/admin/user/${s.systemKey}/roles`, { id: roleId, changes: { servicecaches: [{ itemInfo: { name: c }, permissions: levels }] } }), "change role");

t.test("a role's permissions changed: the next run on every worker holds the new ones", async (t) => {
  const c = uniq("rights");
  await must(s.dev.post(cachePath(c), { ttl: 600 }), "create cache");
  const reader = await readerOn(c), writer = await writerOn(c);
  const { client, roleId } = await userWithRole([reader, writer], c, 1 | 2 | 4);
  t.same((await exec(client, writer, { v: "one" })).body.results, "set", "the user writes");
  const read = await everywhere(client, reader);
  t.ok(read.every((r) => r.success && r.results === "one"), `every run reads the value (${JSON.stringify(read.slice(0, 3))})`);
  // read taken away
  await setRole(roleId, c, 2 | 4);
  const refused = await everywhere(client, reader);
  t.ok(refused.every((r) => !r.success && /not allowed to read cache/.test(String(r.results))), `every run after the change is refused (${JSON.stringify(refused.filter((r) => r.success || !/not allowed to read/.test(String(r.results))))})`);
  t.same((await exec(client, writer, { v: "two" })).body.results, "set", "it may still write");
  // and given back: the value written meanwhile
  await setRole(roleId, c, 1);
  const again = await everywhere(client, reader);
  t.ok(again.every((r) => r.success && r.results === "two"), `every run reads again, the newest value (${JSON.stringify(again.slice(0, 3))})`);
  const writeRefused = (await exec(client, writer, { v: "three" })).body;
  t.match(String(writeRefused.results), /not allowed to (write|create|update)/, "read only: the write is refused");
});

t.test("a user's roles changed: the next run holds the roles the user has now", async (t) => {
  const c = uniq("rights");
  await must(s.dev.post(cachePath(c), { ttl: 600 }), "create cache");
  const reader = await readerOn(c), writer = await writerOn(c);
  const a = await userWithRole([reader, writer], c, 1 | 2 | 4);
  await exec(a.client, writer, { v: "kept" });
  t.ok((await everywhere(a.client, reader)).every((r) => r.success && r.results === "kept"), "every run reads with the role");
  // a second role lets the user run the reader, not read the cache; the first is taken away
  const runOnly = await must(s.dev.post(`/admin/user/${s.systemKey}/roles`, { name: uniq("R"), services: [{ itemInfo: { name: reader }, permissions: 1 }] }), "create role");
  await must(s.dev.put(`/admin/user/${s.systemKey}`, { user: a.u.userId, changes: { roles: { add: [runOnly.role_id], delete: [a.roleId] } } }), "user roles");
  const after = await everywhere(a.client, reader);
  t.ok(after.every((r) => !r.success && /not allowed to read cache/.test(String(r.results))), `every run is refused (${JSON.stringify(after.filter((r) => r.success || !/not allowed to read/.test(String(r.results))))})`);
});

t.test("another user's roles are theirs: a user without rights is refused where one with them reads", async (t) => {
  const c = uniq("rights");
  await must(s.dev.post(cachePath(c), { ttl: 600 }), "create cache");
  const reader = await readerOn(c), writer = await writerOn(c);
  const allowed = await userWithRole([reader, writer], c, 1 | 2 | 4);
  const denied = await userWithRole([reader], c, 0);
  await exec(allowed.client, writer, { v: "secret" });
  // runs of both at once, on the same workers
  const [yes, no] = await Promise.all([everywhere(allowed.client, reader), everywhere(denied.client, reader)]);
  t.ok(yes.every((r) => r.success && r.results === "secret"), `the user with read reads (${JSON.stringify(yes.filter((r) => r.results !== "secret"))})`);
  t.ok(no.every((r) => !r.success && /not allowed to read cache/.test(String(r.results))), `the user without is refused on every run (${JSON.stringify(no.filter((r) => r.success || !/not allowed to read/.test(String(r.results))))})`);
});

t.test("the cache deleted, then made again under its name: the next runs see it gone, then empty", async (t) => {
  const c = uniq("rights");
  await must(s.dev.post(cachePath(c), { ttl: 600 }), "create cache");
  const reader = await readerOn(c), writer = await writerOn(c);
  const { client } = await userWithRole([reader, writer], c, 1 | 2 | 4);
  await exec(client, writer, { v: "old" });
  t.ok((await everywhere(client, reader)).every((r) => r.success && r.results === "old"), "every run reads the value");
  await must(s.dev.del(cachePath(c)), "delete cache");
  const gone = await everywhere(client, reader);
  t.ok(gone.every((r) => !r.success && /not found|does not exist/i.test(String(r.results))), `every run: no such cache (${JSON.stringify(gone.filter((r) => r.success || !/not found|does not exist/i.test(String(r.results))))})`);
  await must(s.dev.post(cachePath(c), { ttl: 600 }), "create cache again");
  const empty = await everywhere(client, reader);
  t.ok(empty.every((r) => r.success && r.results === "missing"), `every run: the new cache is empty (${JSON.stringify(empty.filter((r) => r.results !== "missing"))})`);
});

t.test("a value set in one run is read by the runs right after, on every worker", async (t) => {
  const c = uniq("rights");
  await must(s.dev.post(cachePath(c), { ttl: 600 }), "create cache");
  const reader = await readerOn(c), writer = await writerOn(c);
  const { client } = await userWithRole([reader, writer], c, 1 | 2 | 4);
  for (let i = 0; i < 5; i++) {
    t.equal((await exec(client, writer, { v: i })).body.results, "set", `set ${i}`);
    const all = await everywhere(client, reader);
    t.ok(all.every((r) => r.success && r.results === i), `round ${i}: every run reads ${i} (${JSON.stringify(all.map((r) => r.results))})`);
  }
});
