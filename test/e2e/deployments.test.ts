// Deployments, black-box, on a platform: /admin/{systemKey}/deployments and
// /api/v/3/{systemKey}/deployments (list with a query, create, read, the add/remove change form,
// delete), the deployment status and the per-asset view; bad bodies, unknown classes and assets,
// other systems' names, and users with and without the role permission `deployments`.
import t from "tap";
import { type DevSystem, type Outpost, devWithSystem, isErr, must, newUser, ok200, qs, startOutpost, uniq } from "./harness.ts";

// error codes of src/core/errors.ts
const E = { BAD_JSON: 106, INVALID_ARGUMENT: 111, PERMISSION_DENIED: 200, NOT_AUTHORIZED_FOR_SYSTEM: 201, AUTH_REQUIRED: 202, ALREADY_EXISTS: 207, NOT_FOUND: 208 } as const;

let o: Outpost;
let s: DevSystem;
let other: DevSystem;

t.before(async () => {
  o = await startOutpost();
  s = await devWithSystem(o, "deployments");
  other = await devWithSystem(o, "other");
  await must(s.dev.post(`/admin/code/v/1/${s.systemKey}/calc`, { code: "function calc(req, resp) { resp.success(1); }" }), "service calc");
  await must(s.dev.post(`/admin/code/v/1/${s.systemKey}/sum`, { code: "function sum(req, resp) { resp.success(2); }" }), "service sum");
  await must(s.dev.post("/admin/collectionmanagement", { name: "readings", appID: s.systemKey }), "collection readings");
  await must(other.dev.post(`/admin/code/v/1/${other.systemKey}/theirs`, { code: "function theirs(req, resp) { resp.success(3); }" }), "the other system's service");
});
t.teardown(() => o?.stop());

const admin = (sys: DevSystem, name?: string) => `/admin/${sys.systemKey}/deployments${name === undefined ? "" : `/${encodeURIComponent(name)}`}`;
const api = (sys: DevSystem, name?: string) => `/api/v/3/${sys.systemKey}/deployments${name === undefined ? "" : `/${encodeURIComponent(name)}`}`;

t.test("create, read, list, change and delete on the developer paths", async (t) => {
  const name = uniq("dep");
  const made = await s.dev.post(admin(s), {
    name, description: "line 1",
    assets: [{ asset_class: "services", asset_id: "calc", sync_to_edge: true, sync_to_platform: false }, { asset_class: "readings", asset_id: "", sync: true }],
    edges: ["gw1", "gw2", "gw1"],
  });
  ok200(t, made, "create");
  t.same(made.body.assets, [
    { asset_class: "services", asset_id: "calc", sync_to_edge: true, sync_to_platform: false, sync: false },
    { asset_class: "readings", asset_id: "", sync_to_edge: true, sync_to_platform: true, sync: true },
  ], "create answers the assets (sync: true is both flags, and reads back as both)");
  t.same(made.body.edges, ["gw1", "gw2"], "edges that do not exist yet are taken, once each");
  const got = await must(s.dev.get(admin(s, name)), "get");
  t.equal(got.name, name);
  t.equal(got.description, "line 1");
  t.same(got.assets, made.body.assets, "the read has the same assets");
  const list = await must(s.dev.get(admin(s)), "list");
  t.ok(Array.isArray(list), "the list is an array");
  t.same(list.find((d: any) => d.name === name), { name, description: "line 1" }, "of {name, description}");

  const changed = await s.dev.put(admin(s, name), {
    description: "line 2",
    assets: { add: [{ asset_class: "services", asset_id: "sum", sync_to_edge: true, sync_to_platform: false }], remove: [{ asset_class: "services", asset_id: "calc" }] },
    edges: { add: ["gw3"], remove: ["gw1"] },
  });
  ok200(t, changed, "change");
  t.equal(changed.body.description, "line 2", "the change answers the whole deployment");
  t.same(changed.body.assets.map((a: any) => `${a.asset_class}/${a.asset_id}`).sort(), ["readings/", "services/sum"], "calc removed, sum added");
  t.same(changed.body.edges.sort(), ["gw2", "gw3"], "gw1 removed, gw3 added");
  // the OpenAPI file's spellings of the edge change keys
  const swagger = await must(s.dev.put(admin(s, name), { edges: { adds: ["gw4"], removes: ["gw2"] } }), "adds/removes");
  t.same(swagger.edges.sort(), ["gw3", "gw4"], "adds and removes are taken too");
  ok200(t, await s.dev.del(admin(s, name)), "delete");
  isErr(t, await s.dev.get(admin(s, name)), 404, E.NOT_FOUND, "gone");
  isErr(t, await s.dev.del(admin(s, name)), 404, E.NOT_FOUND, "deleting it again");
  isErr(t, await s.dev.put(admin(s, name), { description: "x" }), 404, E.NOT_FOUND, "changing a deployment that does not exist");
});

t.test("the user paths, the query, and the name in the path", async (t) => {
  const a = uniq("a-dep"), b = uniq("b-dep");
  ok200(t, await s.dev.post(api(s), { name: a, description: "first", assets: [], edges: [] }), "create on /api/v/3");
  ok200(t, await s.dev.post(api(s, b), { description: "second" }), "create with the name in the path (OpenAPI CreateDeployment2)");
  isErr(t, await s.dev.post(api(s, uniq("c")), { name: "different" }), 400, E.INVALID_ARGUMENT, "a body name that is not the path's");
  const desc = await must(s.dev.get(`${api(s)}?query=${qs({ SORT: [{ DESC: "name" }], FILTERS: [[{ EQ: [{ description: "second" }] }]] })}`), "list with a query");
  t.same(desc.map((d: any) => d.name), [b], "FILTERS select");
  const sorted = await must(s.dev.get(`${api(s)}?query=${qs({ SORT: [{ DESC: "name" }] })}`), "sorted");
  t.ok(sorted.findIndex((d: any) => d.name === b) < sorted.findIndex((d: any) => d.name === a), "SORT DESC by name");
  isErr(t, await s.dev.get(`${api(s)}?query=${qs({ FILTERS: [[{ EQ: [{ nosuch: 1 }] }]] })}`), 400, undefined, "a query naming an unknown field");
  const got = await must(s.dev.get(api(s, b)), "read on /api/v/3");
  t.same([got.assets, got.edges], [[], []], "no assets, no edges: empty arrays");
  // SELECTCOLUMNS names the deployment's columns: the list keeps those; anything else is refused
  const names = await must(s.dev.get(`${api(s)}?query=${qs({ SELECTCOLUMNS: ["name"], FILTERS: [[{ EQ: [{ name: b }] }]] })}`), "SELECTCOLUMNS name");
  t.same(names, [{ name: b }], "only the selected column");
  isErr(t, await s.dev.get(`${admin(s)}?query=${qs({ SELECTCOLUMNS: ["* FROM users --"] })}`), 400, undefined, "SELECTCOLUMNS with SQL in it");
  isErr(t, await s.dev.get(`${api(s)}?query=${qs({ SELECTCOLUMNS: ["assets"] })}`), 400, undefined, "SELECTCOLUMNS naming a field that is not a column");
});

t.test("bad bodies and names are refused, naming what is wrong", async (t) => {
  const name = uniq("bad");
  const cases: [unknown, string, RegExp][] = [
    [{ description: "no name" }, "no name", /name/],
    [{ name: "a/b" }, "a name with /", /'\/'/],
    [{ name, assets: {} }, "assets not an array", /assets must be an array/],
    [{ name, assets: [{ asset_id: "calc" }] }, "an asset without a class", /asset_class/],
    [{ name, assets: [{ asset_class: "services", asset_id: 7 }] }, "asset_id not a string", /asset_id/],
    [{ name, assets: [{ asset_class: "services", sync_to_edge: "yes" }] }, "a flag that is not a boolean", /sync_to_edge must be a boolean/],
    [{ name, assets: [{ asset_class: "services", color: "red" }] }, "an unknown field of an asset", /color/],
    [{ name, assets: [{ asset_class: "nosuch" }] }, "an unknown class (not a collection either)", /unknown asset class 'nosuch'/],
    [{ name, assets: [{ asset_class: "edges" }] }, "a class this server cannot deploy", /edges.*cannot be deployed/],
    [{ name, assets: [{ asset_class: "services", asset_id: "nosuch" }] }, "a service the system does not have", /no service 'nosuch'/],
    [{ name, assets: [{ asset_class: "services", asset_id: "theirs" }] }, "another system's service", /no service 'theirs'/],
    [{ name, assets: [{ asset_class: "readings", asset_id: "item-1" }] }, "item-level collection sync", /item-level/],
    [{ name, edges: "gw1" }, "edges not an array", /edges must be an array/],
    [{ name, edges: ["bad name!"] }, "an edge name that is not one", /not an edge name/],
    [{ name, extra: 1 }, "an unknown field", /extra/],
  ];
  for (const [body, what, re] of cases) {
    const r = await s.dev.post(admin(s), body);
    isErr(t, r, 400, E.INVALID_ARGUMENT, what);
    t.match(r.body?.error?.detail ?? r.text, re, `${what}: says why`);
  }
  const raw = await s.dev.req("POST", admin(s), "{not json", { "Content-Type": "application/json" });
  t.equal(raw.status, 400, "malformed JSON -> 400");
  isErr(t, await s.dev.get(admin(s, name)), 404, E.NOT_FOUND, "nothing was made by the refused bodies");

  ok200(t, await s.dev.post(admin(s), { name, assets: [{ asset_class: "services", asset_id: "calc", sync_to_edge: true }] }), "a good one");
  isErr(t, await s.dev.post(admin(s), { name }), 400, E.ALREADY_EXISTS, "the same name again");
  const changes: [unknown, string, RegExp][] = [
    [{ assets: [] }, "assets as a list, not the change form", /assets/],
    [{ assets: { add: [{ asset_class: "services", asset_id: "nosuch" }] } }, "adding an asset the system does not have", /no service 'nosuch'/],
    [{ assets: { remove: [{ asset_class: "services", asset_id: "sum" }] } }, "removing an asset it does not hold", /has no asset services 'sum'/],
    [{ edges: { remove: ["gw9"] } }, "removing an edge it does not name", /does not name edge 'gw9'/],
    [{ edges: { add: [1] } }, "an edge that is not a name", /not an edge name/],
    [{ name: "renamed" }, "a rename", /cannot be renamed/],
    [{ assets: { put: [] } }, "an unknown key of the change form", /put/],
  ];
  for (const [body, what, re] of changes) {
    const r = await s.dev.put(admin(s, name), body);
    isErr(t, r, 400, E.INVALID_ARGUMENT, what);
    t.match(r.body?.error?.detail ?? r.text, re, `${what}: says why`);
  }
  const still = await must(s.dev.get(admin(s, name)), "after the refused changes");
  t.same(still.assets, [{ asset_class: "services", asset_id: "calc", sync_to_edge: true, sync_to_platform: false, sync: false }], "a refused change changed nothing");
});

t.test("other systems: their deployments are not reachable, names do not cross", async (t) => {
  const name = uniq("mine");
  ok200(t, await s.dev.post(admin(s), { name }), "a deployment in s");
  isErr(t, await other.dev.get(admin(s, name)), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "another system's developer cannot read it");
  isErr(t, await other.dev.get(admin(s)), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "nor list them");
  isErr(t, await other.dev.put(admin(s, name), { description: "x" }), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "nor change it");
  isErr(t, await other.dev.del(admin(s, name)), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "nor delete it");
  isErr(t, await other.dev.get(admin(other, name)), 404, E.NOT_FOUND, "the name is not in the other system");
  ok200(t, await other.dev.post(admin(other), { name }), "the other system may use the same name");
  isErr(t, await s.dev.get(`/admin/${s.systemKey}/sync/deployment/status/${name}x`), 404, E.NOT_FOUND, "status of a deployment that does not exist");
  isErr(t, await other.dev.get(`/admin/${s.systemKey}/sync/deployment/status/${name}`), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "nor its status");
  isErr(t, await s.dev.get("/admin/nosuchsystem/deployments"), 404, undefined, "a system that does not exist");
});

t.test("users: nothing without the role permission deployments; what it grants with it", async (t) => {
  const name = uniq("users");
  ok200(t, await s.dev.post(admin(s), { name, description: "d" }), "a deployment");
  const u = await newUser(s);
  isErr(t, await u.client.get(api(s)), 401, E.PERMISSION_DENIED, "a user without the permission cannot list");
  isErr(t, await u.client.get(api(s, name)), 401, E.PERMISSION_DENIED, "nor read one");
  isErr(t, await u.client.post(api(s), { name: uniq("u") }), 401, E.PERMISSION_DENIED, "nor create");
  isErr(t, await u.client.del(api(s, name)), 401, E.PERMISSION_DENIED, "nor delete");
  isErr(t, await u.client.get(`/admin/${s.systemKey}/sync/deployment/status/${name}`), 401, E.PERMISSION_DENIED, "nor read its status");
  isErr(t, await u.client.get(`/admin/${s.systemKey}/deploy_assets`), 401, E.PERMISSION_DENIED, "nor the per-asset view");
  const role = uniq("Deployer");
  ok200(t, await s.dev.post(`/admin/user/${s.systemKey}/roles`, { name: role, deployments: { permissions: 1 | 4 } }), "a role with read and update on deployments");
  ok200(t, await s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { roles: { add: [role] } } }), "the user in the role");
  ok200(t, await u.client.get(api(s)), "now the user lists");
  ok200(t, await u.client.get(api(s, name)), "reads");
  const changed = await u.client.put(api(s, name), { description: "by the user" });
  ok200(t, changed, "and updates");
  t.equal(changed.body.description, "by the user");
  isErr(t, await u.client.post(api(s), { name: uniq("u") }), 401, E.PERMISSION_DENIED, "but does not create (no create level)");
  isErr(t, await u.client.del(api(s, name)), 401, E.PERMISSION_DENIED, "nor delete (no delete level)");
  isErr(t, await u.client.get(`/api/v/3/${other.systemKey}/deployments`), 401, undefined, "nor reach another system's");
  const anon = await s.app.get(api(s));
  t.equal(anon.status, 401, "no token -> 401");
});

t.test("the per-asset view and the status of a deployment whose edges do not exist", async (t) => {
  const d1 = uniq("v1"), d2 = uniq("v2");
  ok200(t, await s.dev.post(admin(s), { name: d1, assets: [{ asset_class: "services", asset_id: "", sync_to_edge: true }], edges: ["e1"] }), "every service, to e1");
  ok200(t, await s.dev.post(admin(s), { name: d2, assets: [{ asset_class: "services", asset_id: "calc", sync_to_edge: true }], edges: ["e2"] }), "calc, to e2");
  const calc = await must(s.dev.get(`/admin/${s.systemKey}/deploy_assets/services/calc`), "calc's view");
  t.same(calc.deployments.filter((n: string) => n === d1 || n === d2).sort(), [d1, d2].sort(), "calc is in both (one by its class)");
  t.ok(calc.edges.includes("e1") && calc.edges.includes("e2"), "and goes to both edges");
  const sum = await must(s.dev.get(`/admin/${s.systemKey}/deploy_assets/services/sum`), "sum's view");
  t.ok(sum.deployments.includes(d1) && !sum.deployments.includes(d2), "sum only by the class entry");
  const cls = await must(s.dev.get(`/admin/${s.systemKey}/deploy_assets/services`), "the class's view");
  t.equal(cls.asset_class, "services");
  t.ok(cls.assets.some((a: any) => a.asset_id === "" && a.deployments.includes(d1)), "lists the class entry");
  const all = await must(s.dev.get(`/admin/${s.systemKey}/deploy_assets`), "every entry");
  t.ok(Array.isArray(all) && all.some((a: any) => a.asset_id === "calc"), "an array of entries");
  isErr(t, await s.dev.get(`/admin/${s.systemKey}/deploy_assets?query=${qs({ FILTERS: [] })}`), 400, E.INVALID_ARGUMENT, "a query is refused, not ignored");
  const none = await must(s.dev.get(`/admin/${s.systemKey}/deploy_assets/timers/tick`), "an asset no deployment holds");
  t.same([none.deployments, none.edges], [[], []], "held by none");
  const st = await must(s.dev.get(`/admin/${s.systemKey}/sync/deployment/status/${d1}`), "status");
  t.equal(st.name, d1);
  t.same(st.edges, [{ edge_name: "e1", exists: false, connected: false, status: "no_such_edge", assets: [] }], "an edge that does not exist says so");
});

t.test("ClearBlade.Deployment() and ClearBladeAsync.Deployment() in a service, with the caller's rights", async (t) => {
  const name = uniq("cd");
  const classic = `function viaClassic(req, resp) {
    var d = ClearBlade.Deployment(), out = {};
    d.create("${name}", "from code", { assets: [{ asset_class: "services", asset_id: "calc", sync_to_edge: true, sync_to_platform: false }], edges: ["gwX"] }, function (err, made) {
      if (err) { resp.error(made); return; }
      out.made = made;
      d.update("${name}", { edges: { add: ["gwY"] } }, function (err, up) {
        if (err) { resp.error(up); return; }
        out.updated = up;
        d.readAll(function (err, all) {
          out.all = all;
          d.read("${name}", function (err, one) {
            out.one = one;
            d.delete("${name}", function (err) {
              out.deleteErr = err;
              d.read("${name}", function (err, gone) { out.goneErr = err; resp.success(out); });
            });
          });
        });
      });
    });
  }`;
  ok200(t, await s.dev.post(`/admin/code/v/1/${s.systemKey}/viaClassic`, { code: classic }), "a service using ClearBlade.Deployment()");
  const run = await must(s.dev.post(`/api/v/1/code/${s.systemKey}/viaClassic`, {}), "run it as the developer");
  t.equal(run.success, true, "the run succeeds");
  const out = run.results;
  t.same(out.made.edges, ["gwX"], "create answers the deployment");
  t.same(out.made.assets, [{ asset_class: "services", asset_id: "calc", sync_to_edge: true, sync_to_platform: false, sync: false }], "with its assets");
  t.same(out.updated.edges, ["gwX", "gwY"], "update answers the whole deployment");
  t.ok(out.all.some((d: any) => d.name === name && Array.isArray(d.assets)), "readAll answers whole deployments");
  t.equal(out.one.description, "from code", "read");
  t.equal(out.deleteErr, false, "delete");
  t.equal(out.goneErr, true, "reading it after the delete fails");
  isErr(t, await s.dev.get(admin(s, name)), 404, E.NOT_FOUND, "and REST agrees it is gone");

  const asyncCode = `function viaAsync(req, resp) {
    var d = ClearBladeAsync.Deployment();
    d.create("${name}a", "async", { assets: [], edges: [] })
      .then(function () { return d.update("${name}a", { assets: { add: [{ asset_class: "nosuch" }] } }); })
      .then(function () { resp.success("no error"); }, function (e) { resp.success("refused: " + (e.message || e)); });
  }`;
  ok200(t, await s.dev.post(`/admin/code/v/1/${s.systemKey}/viaAsync`, { code: asyncCode }), "a service using ClearBladeAsync.Deployment()");
  const a = await must(s.dev.post(`/api/v/1/code/${s.systemKey}/viaAsync`, {}), "run it");
  t.match(a.results, /refused: .*unknown asset class 'nosuch'/, "a bad change is refused with the domain's reason");
  ok200(t, await s.dev.get(admin(s, `${name}a`)), "the create before it happened");

  // a user allowed to run the service, without the deployments permission
  const u = await newUser(s);
  const role = uniq("Runner");
  ok200(t, await s.dev.post(`/admin/user/${s.systemKey}/roles`, { name: role, services: [{ itemInfo: { name: "viaAsync" }, permissions: 1 }] }), "a role running the service");
  ok200(t, await s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { roles: { add: [role] } } }), "the user in it");
  const asUser = await u.client.post(`/api/v/1/code/${s.systemKey}/viaAsync`, {});
  t.match(String(asUser.body?.results ?? asUser.text), /refused: .*not allowed to create deployments/, "the user's run cannot create a deployment");
});
