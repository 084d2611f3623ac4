// Roles, black-box: the developer routes /admin/user/{systemKey}/roles and the user-token routes
// /api/v/3/user/roles/{systemKey}; built-in roles; the role object's wire shape; permission
// changes and levels; the query structure (FILTERS, SORT, PAGING); counting; deletion; and that role
// permissions actually govern what users may do.
import t, { type Test } from "tap";
import { type DevSystem, devWithSystem, isEnvelope, newUser, request, startOutpost, uniq, isErr, ok200, qs } from "./harness.ts";

const o = await startOutpost();
t.teardown(() => o.stop());
const s = await devWithSystem(o, "roles-a");
const s2 = await devWithSystem(o, "roles-b");

// ---- helpers ----------------------------------------------------------------------------------

const BUILTIN = ["Administrator", "Authenticated", "Anonymous"];
const HEX_ID = /^[0-9a-f]{28,30}$/;

const rolesPath = (sys: DevSystem) => `/admin/user/${sys.systemKey}/roles`;
const userRolesPath = (sys: DevSystem) => `/api/v/3/user/roles/${sys.systemKey}`;

async function listRoles(sys: DevSystem, query?: unknown): Promise<any[]> {
  const r = await sys.dev.get(query === undefined ? rolesPath(sys) : `${rolesPath(sys)}?query=${qs(query)}`);
  if (r.status !== 200) throw new Error(`list roles: ${r.status} ${r.text}`);
  return r.body;
}
const roleByName = async (sys: DevSystem, name: string) => (await listRoles(sys)).find((r) => r.Name === name);

async function createRole(sys: DevSystem, body: Record<string, unknown>): Promise<string> {
  const r = await sys.dev.post(rolesPath(sys), body);
  if (r.status !== 200) throw new Error(`create role: ${r.status} ${r.text}`);
  return r.body.role_id;
}

const auth = async (sys: DevSystem, email: string, password: string) => {
  const r = await sys.app.post("/api/v/1/user/auth", { email, password });
  if (r.status !== 200) throw new Error(`auth: ${r.status} ${r.text}`);
  return sys.app.with({ "ClearBlade-UserToken": r.body.user_token as string });
};

async function setUserRoles(sys: DevSystem, userId: string, roles: { add?: string[]; delete?: string[] }) {
  const r = await sys.dev.put(`/admin/user/${sys.systemKey}`, { user: userId, changes: { roles } });
  if (r.status !== 200) throw new Error(`user roles: ${r.status} ${r.text}`);
}

/** The role object as clients read it. */
function checkRoleShape(t: Test, r: any, what: string) {
  t.type(r.ID, "string", `${what}: ID`);
  t.type(r.Name, "string", `${what}: Name`);
  t.type(r.Description, "string", `${what}: Description`);
  t.type(r.Permissions, "object", `${what}: Permissions`);
  const P = r.Permissions ?? {};
  for (const k of ["Collections", "CodeServices", "Topics", "Portals"]) t.ok(Array.isArray(P[k]), `${what}: Permissions.${k} is an array`);
  for (const k of ["UsersList", "DevicesList", "AllCollections", "AllServices", "MsgHistory", "Push", "Roles", "Timers", "Triggers", "Deployments", "EdgesList"]) {
    t.type(P[k]?.Level, "number", `${what}: Permissions.${k}.Level is a number`);
  }
}

// ---- built-in roles ---------------------------------------------------------------------------

t.test("a new system has the built-in roles, with ID == name", async (t) => {
  const r = await s.dev.get(rolesPath(s));
  ok200(t, r);
  t.ok(Array.isArray(r.body), "an array of role objects");
  for (const name of BUILTIN) {
    const role = (r.body as any[]).find((x) => x.Name === name);
    t.ok(role, `${name} exists`);
    if (!role) continue;
    t.equal(role.ID, name, `${name}: ID equals the name`);
    checkRoleShape(t, role, name);
  }
  const auth0 = (r.body as any[]).find((x) => x.Name === "Authenticated");
  t.equal(auth0?.Permissions.UsersList.Level, 0, "Authenticated cannot list users by default");
  const viaUser = await s.dev.get(userRolesPath(s));
  ok200(t, viaUser, "the /api/v/3 path with a developer token");
  t.same((viaUser.body as any[]).map((x) => x.ID).sort(), (r.body as any[]).map((x) => x.ID).sort(), "same roles on both paths");
});

t.test("built-in roles cannot be deleted", async (t) => {
  for (const name of BUILTIN) {
    isErr(t, await s.dev.del(`${rolesPath(s)}?role=${name}`), 400, undefined, `DELETE ${name}`);
  }
  const after = await listRoles(s);
  for (const name of BUILTIN) t.ok(after.some((x) => x.ID === name), `${name} still exists`);
  const u = await newUser(s);
  const r = await s.dev.get(`${rolesPath(s)}?user=${u.userId}`);
  t.ok((r.body as any[]).some((x) => x.Name === "Authenticated"), "new users still get Authenticated");
});

// ---- create ---------------------------------------------------------------------------------------

t.test("POST creates a role and returns its id", async (t) => {
  const name = uniq("Operators");
  const r = await s.dev.post(rolesPath(s), {
    name, description: "runs things", collections: [],
    topics: [{ itemInfo: { name: "a/#" }, permissions: 1 }],
    services: [{ itemInfo: { name: "svcOne" }, permissions: 1 }],
  });
  ok200(t, r, "create");
  t.type(r.body.role_id, "string");
  t.match(r.body.role_id, HEX_ID, "role_id is a hex id");
  const role = await roleByName(s, name);
  t.ok(role, "listed");
  checkRoleShape(t, role, name);
  t.equal(role.ID, r.body.role_id, "ID is the returned role_id");
  t.equal(role.Description, "runs things");
  t.same(role.Permissions.Topics, [{ Name: "a/#", Level: 1 }], "topic grant");
  t.equal(role.Permissions.CodeServices.length, 1);
  t.equal(role.Permissions.CodeServices[0].Name, "svcOne");
  t.equal(role.Permissions.CodeServices[0].Level, 1);
  t.equal(role.Permissions.CodeServices[0].SystemKey, s.systemKey);
  t.same(role.Permissions.Collections, []);
  t.equal(role.Permissions.UsersList.Level, 0, "nothing else granted");

  const minimal = await s.dev.post(rolesPath(s), { name: uniq("Minimal") });
  ok200(t, minimal, "name only");
  t.type(minimal.body.role_id, "string");
  t.not(minimal.body.role_id, r.body.role_id, "ids are unique");
});

t.test("POST failures", async (t) => {
  const name = uniq("Dup");
  await createRole(s, { name });
  const before = (await listRoles(s)).length;
  isErr(t, await s.dev.post(rolesPath(s), { name }), 400, undefined, "duplicate name");
  isErr(t, await s.dev.post(rolesPath(s), { name: "Administrator" }), 400, undefined, "built-in name");
  isErr(t, await s.dev.post(rolesPath(s), { description: "no name" }), 400, undefined, "missing name");
  isErr(t, await s.dev.post(rolesPath(s), { name: "" }), 400, undefined, "empty name");
  isErr(t, await s.dev.post(rolesPath(s), { name: 7 }), 400, undefined, "numeric name");
  isErr(t, await s.dev.post(rolesPath(s), { name: uniq("BadLvl"), topics: [{ itemInfo: { name: "x" }, permissions: 99 }] }), 400, undefined, "invalid level");
  isErr(t, await s.dev.post(rolesPath(s), { name: uniq("BadKind"), nonsense: { permissions: 1 } }), 400, undefined, "unknown permission kind");
  isErr(t, await s.dev.post(rolesPath(s), { name: uniq("NoItem"), topics: [{ permissions: 1 }] }), 400, undefined, "grant without itemInfo");
  t.equal((await listRoles(s)).length, before, "nothing was created by the failures");
  isErr(t, await s2.dev.post(rolesPath(s), { name: uniq("Foreign") }), 401, 201, "another developer");
  isErr(t, await request(o.url, "POST", rolesPath(s), { body: { name: uniq("NoTok") } }), 401, undefined, "no token");
  const u = await newUser(s);
  isErr(t, await u.client.post(rolesPath(s), { name: uniq("ByUser") }), 401, undefined, "a user without the roles permission");
});

// ---- update -----------------------------------------------------------------------------------

t.test("PUT changes permission levels", async (t) => {
  const name = uniq("Editors");
  const id = await createRole(s, { name, topics: [{ itemInfo: { name: "a/#" }, permissions: 1 }] });
  const r = await s.dev.put(rolesPath(s), {
    id,
    changes: {
      users: { permissions: 1 }, devices: { permissions: 15 },
      topics: [{ itemInfo: { name: "a/#" }, permissions: 3 }, { itemInfo: { name: "b/+" }, permissions: 2 }],
      description: "edited",
    },
  });
  ok200(t, r, "update");
  const role = await roleByName(s, name);
  t.equal(role.Permissions.UsersList.Level, 1, "UsersList level");
  t.equal(role.Permissions.DevicesList.Level, 15, "DevicesList level");
  const topics = [...role.Permissions.Topics].sort((a: any, b: any) => (a.Name < b.Name ? -1 : 1));
  t.same(topics, [{ Name: "a/#", Level: 3 }, { Name: "b/+", Level: 2 }], "existing grant updated, new one added");
  t.equal(role.Description, "edited");
  t.equal(role.ID, id, "id unchanged");

  ok200(t, await s.dev.put(rolesPath(s), { id, changes: { users: { permissions: 5 } } }), "second update");
  const role2 = await roleByName(s, name);
  t.equal(role2.Permissions.UsersList.Level, 5, "level replaced");
  t.equal(role2.Permissions.DevicesList.Level, 15, "other levels kept");
  t.equal(role2.Permissions.Topics.length, 2, "grants kept");

  ok200(t, await s.dev.put(rolesPath(s), { id: name, changes: { msgHistory: { permissions: 1 } } }), "role referenced by name");
  t.equal((await roleByName(s, name)).Permissions.MsgHistory.Level, 1);

  ok200(t, await s.dev.put(rolesPath(s), { id: "Authenticated", changes: { push: { permissions: 2 } } }), "built-in role permissions can change");
  t.equal((await roleByName(s, "Authenticated")).Permissions.Push.Level, 2);
  ok200(t, await s.dev.put(rolesPath(s), { id: "Authenticated", changes: { push: { permissions: 0 } } }));
});

t.test("PUT failures leave the role unchanged", async (t) => {
  const name = uniq("Stable");
  const id = await createRole(s, { name });
  ok200(t, await s.dev.put(rolesPath(s), { id, changes: { users: { permissions: 1 } } }));
  for (const [changes, what] of [
    [{ users: { permissions: 99 } }, "level 99"],
    [{ users: { permissions: -1 } }, "negative level"],
    [{ users: { permissions: 1.5 } }, "fractional level"],
    [{ users: { permissions: "1" } }, "string level"],
    [{ topics: [{ itemInfo: { name: "t" }, permissions: 16 }] }, "topic level 16"],
    [{ bogus: { permissions: 1 } }, "unknown kind"],
    [{ users: { permissions: 4 }, topics: [{ itemInfo: { name: "t" }, permissions: 99 }] }, "valid and invalid together"],
  ] as const) {
    isErr(t, await s.dev.put(rolesPath(s), { id, changes }), 400, undefined, what);
  }
  const role = await roleByName(s, name);
  t.equal(role.Permissions.UsersList.Level, 1, "level unchanged after failures");
  t.same(role.Permissions.Topics, [], "no topic grant added");
  const missing = await s.dev.put(rolesPath(s), { id: "0".repeat(30), changes: { users: { permissions: 1 } } });
  t.ok(missing.status === 404 || missing.status === 400, `unknown role -> 400/404 (${missing.status})`);
  t.ok(isEnvelope(missing.body, missing.status));
  isErr(t, await s.dev.put(rolesPath(s), { changes: { users: { permissions: 1 } } }), 400, undefined, "no id");
  isErr(t, await s2.dev.put(rolesPath(s), { id, changes: { users: { permissions: 15 } } }), 401, 201, "another developer");
  t.equal((await roleByName(s, name)).Permissions.UsersList.Level, 1);
});

// ---- listing with the query structure ---------------------------------------------------------

t.test("GET with ?query=: FILTERS, paging, SORT", async (t) => {
  const sq = await devWithSystem(o, "roles-query");
  const names = ["Delta", "alpha", "Charlie", "Bravo", "Echo"].map((n) => `${n}${uniq("")}`);
  for (const n of names) await createRole(sq, { name: n });
  const all = await listRoles(sq);
  const allNames = all.map((r) => r.Name);
  t.equal(all.length, names.length + BUILTIN.length, "built-ins + created");

  const eq = await listRoles(sq, { PAGESIZE: 0, PAGENUM: 0, FILTERS: [[{ EQ: [{ name: names[2] }] }]] });
  t.same(eq.map((r) => r.Name), [names[2]], "EQ on name");
  checkRoleShape(t, eq[0], "filtered role");
  const neq = await listRoles(sq, { FILTERS: [[{ NEQ: [{ name: "Administrator" }] }]] });
  t.same(neq.map((r) => r.Name).sort(), allNames.filter((n) => n !== "Administrator").sort(), "NEQ on name");
  const or = await listRoles(sq, { FILTERS: [[{ EQ: [{ name: names[0] }] }], [{ EQ: [{ name: names[1] }] }]] });
  t.same(or.map((r) => r.Name).sort(), [names[0], names[1]].sort(), "OR of two EQ groups");
  const none = await listRoles(sq, { FILTERS: [[{ EQ: [{ name: "no such role" }] }]] });
  t.same(none, [], "no match -> empty array");
  const bare = await listRoles(sq, [[{ EQ: [{ name: names[3] }] }]]);
  t.same(bare.map((r) => r.Name), [names[3]], "a bare FILTERS array");

  const desc = await listRoles(sq, { SORT: [{ DESC: "name" }] });
  const sortedDesc = [...allNames].sort().reverse();
  t.same(desc.map((r) => r.Name), sortedDesc, "SORT DESC name");
  const asc = await listRoles(sq, { SORT: [{ ASC: "name" }] });
  t.same(asc.map((r) => r.Name), [...allNames].sort(), "SORT ASC name");

  const pages: string[] = [];
  for (let p = 1; p <= 4; p++) {
    const pg = await listRoles(sq, { PAGESIZE: 3, PAGENUM: p, SORT: [{ DESC: "name" }] });
    t.ok(pg.length <= 3, `page ${p} has at most PAGESIZE roles`);
    t.same(pg.map((r) => r.Name), sortedDesc.slice((p - 1) * 3, p * 3), `page ${p} contents`);
    pages.push(...pg.map((r) => r.Name));
  }
  t.same(pages, sortedDesc, "pages cover every role once");
  const everything = await listRoles(sq, { PAGESIZE: 0, PAGENUM: 0 });
  t.equal(everything.length, all.length, "PAGESIZE 0 + PAGENUM 0 returns all");
  const filteredPage = await listRoles(sq, { PAGESIZE: 1, PAGENUM: 1, FILTERS: [[{ NEQ: [{ name: "Administrator" }] }]], SORT: [{ DESC: "name" }] });
  t.same(filteredPage.map((r) => r.Name), [sortedDesc.filter((n) => n !== "Administrator")[0]], "filter + sort + page together");

  isErr(t, await sq.dev.get(`${rolesPath(sq)}?query=${qs({ FILTERS: [[{ EQ: [{ nosuch: "x" }] }]] })}`), 400, 305, "unknown field");
  isErr(t, await sq.dev.get(`${rolesPath(sq)}?query=${encodeURIComponent("{bad json")}`), 400, undefined, "malformed query");
  isErr(t, await sq.dev.get(`${rolesPath(sq)}?query=${qs({ SORT: [{ DOWN: "name" }] })}`), 400, 305, "bad SORT direction");
  const inj = await listRoles(sq, { FILTERS: [[{ EQ: [{ name: "x' OR '1'='1" }] }]] });
  t.same(inj, [], "SQL text in a value matches nothing");
  t.equal((await listRoles(sq)).length, all.length, "roles intact");

  const viaUserPath = await sq.dev.get(`${userRolesPath(sq)}?query=${qs({ FILTERS: [[{ EQ: [{ name: names[4] }] }]] })}`);
  ok200(t, viaUserPath);
  t.same((viaUserPath.body as any[]).map((r) => r.Name), [names[4]], "the /api/v/3 path takes the same query");
});

t.test("GET ?user=<user_id> lists that user's roles", async (t) => {
  const u = await newUser(s);
  const r0 = await s.dev.get(`${rolesPath(s)}?user=${u.userId}`);
  ok200(t, r0);
  t.same((r0.body as any[]).map((x) => x.Name), ["Authenticated"], "a new user has Authenticated");
  checkRoleShape(t, r0.body[0], "user's role");
  const name = uniq("Extra");
  await createRole(s, { name });
  await setUserRoles(s, u.userId, { add: [name] });
  const r1 = await s.dev.get(`${rolesPath(s)}?user=${u.userId}`);
  t.same((r1.body as any[]).map((x) => x.Name).sort(), ["Authenticated", name].sort(), "both roles");
  const other = await newUser(s);
  const r2 = await s.dev.get(`${rolesPath(s)}?user=${other.userId}`);
  t.same((r2.body as any[]).map((x) => x.Name), ["Authenticated"], "another user's roles are separate");
  const r3 = await s.dev.get(`${rolesPath(s)}?user=${"0".repeat(30)}`);
  t.ok(r3.status === 200 ? Array.isArray(r3.body) && r3.body.length === 0 : r3.status === 404, `unknown user -> [] or 404 (${r3.status})`);
});

t.test("GET /roles/count", async (t) => {
  const sc = await devWithSystem(o, "roles-count");
  const c0 = await sc.dev.get(`${rolesPath(sc)}/count`);
  ok200(t, c0);
  t.type(c0.body.count, "number");
  t.equal(c0.body.count, (await listRoles(sc)).length, "equals the listing length");
  const name = uniq("Counted");
  await createRole(sc, { name });
  t.equal((await sc.dev.get(`${rolesPath(sc)}/count`)).body.count, c0.body.count + 1, "grows with a new role");
  const f = await sc.dev.get(`${rolesPath(sc)}/count?query=${qs({ FILTERS: [[{ EQ: [{ name }] }]] })}`);
  ok200(t, f);
  t.same(f.body, { count: 1 }, "with a filter");
  const n = await sc.dev.get(`${rolesPath(sc)}/count?query=${qs({ FILTERS: [[{ NEQ: [{ name }] }]] })}`);
  t.equal(n.body.count, c0.body.count, "NEQ filter");
  const viaUser = await sc.dev.get(`${userRolesPath(sc)}/count`);
  ok200(t, viaUser);
  t.equal(viaUser.body.count, c0.body.count + 1, "the /api/v/3 path");
  isErr(t, await s.dev.get(`${rolesPath(sc)}/count`), 401, 201, "another developer");
});

// ---- delete -----------------------------------------------------------------------------------

t.test("DELETE ?role=<id> and by name", async (t) => {
  const u = await newUser(s);
  const n1 = uniq("Gone1"), n2 = uniq("Gone2");
  const id1 = await createRole(s, { name: n1 });
  await createRole(s, { name: n2 });
  await setUserRoles(s, u.userId, { add: [n1, n2] });
  const before = (await s.dev.get(`${rolesPath(s)}/count`)).body.count as number;

  ok200(t, await s.dev.del(`${rolesPath(s)}?role=${id1}`), "by id");
  t.notOk(await roleByName(s, n1), "gone");
  ok200(t, await s.dev.del(`${rolesPath(s)}?role=${encodeURIComponent(n2)}`), "by name");
  t.notOk(await roleByName(s, n2), "gone");
  t.equal((await s.dev.get(`${rolesPath(s)}/count`)).body.count, before - 2, "count dropped by two");
  const ur = await s.dev.get(`${rolesPath(s)}?user=${u.userId}`);
  t.same((ur.body as any[]).map((x) => x.Name), ["Authenticated"], "memberships of deleted roles are gone");

  const again = await s.dev.del(`${rolesPath(s)}?role=${id1}`);
  t.ok(again.status === 404 || again.status === 400, `deleting again -> 400/404 (${again.status})`);
  t.ok(isEnvelope(again.body, again.status));
  isErr(t, await s.dev.del(rolesPath(s)), 400, undefined, "no role parameter");
  const keep = uniq("Keep");
  await createRole(s, { name: keep });
  isErr(t, await s2.dev.del(`${rolesPath(s)}?role=${keep}`), 401, 201, "another developer");
  t.ok(await roleByName(s, keep), "still there");
  await setUserRoles(s, u.userId, { add: [keep] });
  ok200(t, await s.dev.del(`${rolesPath(s)}?query=${encodeURIComponent(keep)}`), "?query=<role>");
  t.notOk(await roleByName(s, keep), "gone");
  const ur2 = await s.dev.get(`${rolesPath(s)}?user=${u.userId}`);
  t.same((ur2.body as any[]).map((x) => x.Name), ["Authenticated"], "membership removed with the role");
});

// ---- the user-token route and permissions taking effect ---------------------------------------

t.test("/api/v/3/user/roles/{sk} with user tokens follows the roles permission", async (t) => {
  const u = await newUser(s);
  isErr(t, await u.client.get(userRolesPath(s)), 401, undefined, "no roles permission: GET");
  isErr(t, await u.client.post(userRolesPath(s), { name: uniq("ByUser") }), 401, undefined, "no roles permission: POST");

  const readRole = uniq("RoleReaders");
  await createRole(s, { name: readRole, roles: { permissions: 1 } });
  await setUserRoles(s, u.userId, { add: [readRole] });
  const reader = await auth(s, u.email, u.password);
  const g = await reader.get(userRolesPath(s));
  ok200(t, g, "read with roles:1");
  t.ok((g.body as any[]).some((x) => x.Name === "Administrator"), "sees the roles");
  const c = await reader.get(`${userRolesPath(s)}/count`);
  ok200(t, c, "count with roles:1");
  t.type(c.body.count, "number");
  isErr(t, await reader.post(userRolesPath(s), { name: uniq("Nope") }), 401, undefined, "create needs roles:2");
  isErr(t, await reader.put(userRolesPath(s), { id: readRole, changes: { roles: { permissions: 15 } } }), 401, undefined, "update needs roles:4 (no self-escalation)");
  t.equal((await roleByName(s, readRole)).Permissions.Roles.Level, 1, "not escalated");

  const admin = uniq("RoleAdmins");
  await createRole(s, { name: admin, roles: { permissions: 15 } });
  await setUserRoles(s, u.userId, { add: [admin] });
  const full = await auth(s, u.email, u.password);
  const name = uniq("UserMade");
  const p = await full.post(userRolesPath(s), { name, description: "by a user" });
  ok200(t, p, "create with roles:15");
  t.type(p.body.role_id, "string");
  ok200(t, await full.put(userRolesPath(s), { id: p.body.role_id, changes: { users: { permissions: 1 } } }), "update");
  t.equal((await roleByName(s, name)).Permissions.UsersList.Level, 1);
  ok200(t, await full.del(`${userRolesPath(s)}?role=${p.body.role_id}`), "delete");
  t.notOk(await roleByName(s, name), "gone");
  isErr(t, await full.get(userRolesPath(s2)), 401, 201, "a token of system A on system B");
});

t.test("role permissions take effect for the users in them", async (t) => {
  const u = await newUser(s);
  const c = u.client;
  isErr(t, await c.get("/api/v/1/user"), 403, undefined, "no users-list read");

  const name = uniq("UserListers");
  const id = await createRole(s, { name });
  ok200(t, await s.dev.put(rolesPath(s), { id, changes: { users: { permissions: 1 } } }));
  const listOnce = async () => (await c.get("/api/v/1/user")).status;

  await setUserRoles(s, u.userId, { add: [name] });
  // adding the role through the admin route applies at once on a single node (same token)
  let st = await listOnce();
  t.equal(st, 200, "the same token may list users right after the role is added");
  if (st !== 200) {
    for (let i = 0; i < 30 && st !== 200; i++) { await new Promise((r) => setTimeout(r, 200)); st = await listOnce(); }
    t.equal(st, 200, "... and at least within ~6 s");
  }
  ok200(t, await (await auth(s, u.email, u.password)).get("/api/v/1/user"), "a fresh token too");

  ok200(t, await s.dev.put(rolesPath(s), { id, changes: { users: { permissions: 0 } } }), "revoke the level on the role");
  t.equal(await listOnce(), 403, "a role's permission change applies at once");
  ok200(t, await s.dev.put(rolesPath(s), { id, changes: { users: { permissions: 1 } } }));
  t.equal(await listOnce(), 200, "and back");

  await setUserRoles(s, u.userId, { delete: [name] });
  t.equal(await listOnce(), 403, "removing the user from the role applies at once");
  await setUserRoles(s, u.userId, { add: [id] });
  t.equal(await listOnce(), 200, "role added by id");
  ok200(t, await s.dev.del(`${rolesPath(s)}?role=${id}`));
  t.equal(await listOnce(), 403, "deleting the role takes the permission away");

  // the built-in Administrator role grants everything
  await setUserRoles(s, u.userId, { add: ["Administrator"] });
  t.equal(await listOnce(), 200, "Administrator may list users");
  ok200(t, await c.get(userRolesPath(s)), "Administrator may read roles");
  await setUserRoles(s, u.userId, { delete: ["Administrator"] });
  t.equal(await listOnce(), 403);

  // permissions of one system's role do not leak into another system
  const other = await newUser(s2);
  const n2 = uniq("Listers");
  await createRole(s, { name: n2, users: { permissions: 1 } });
  isErr(t, await other.client.get("/api/v/1/user"), 403, undefined, "a user of system B is unaffected by A's roles");
});

t.test("a user in several roles holds the union of their levels", async (t) => {
  const u = await newUser(s);
  const r1 = uniq("ReadUsers"), r2 = uniq("DeleteUsers");
  await createRole(s, { name: r1, users: { permissions: 1 } });
  await createRole(s, { name: r2, users: { permissions: 8 } });
  const victim = await newUser(s);
  await setUserRoles(s, u.userId, { add: [r2] });
  const c = await auth(s, u.email, u.password);
  isErr(t, await c.get("/api/v/1/user"), 403, undefined, "delete level alone does not allow reading");
  await setUserRoles(s, u.userId, { add: [r1] });
  const c2 = await auth(s, u.email, u.password);
  ok200(t, await c2.get("/api/v/1/user"), "read from one role");
  ok200(t, await c2.del("/api/v/1/user/info", { user_id: victim.userId }), "delete from the other");
});
