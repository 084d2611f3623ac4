// The administrative parts of the service library, black-box: triggers and timers
// (ClearBlade.Trigger/Timer, ClearBladeAsync.Triggers/Timers), roles and permissions
// (ClearBlade.Roles/Permissions, ClearBladeAsync.Roles/Role), users and sessions (loginUser and
// the other classic sign-in calls, ClearBladeAsync.Users/Auth) and collection administration
// (newCollection, columns, indexes, bulkCreate, deleteCollection). Each from inside a service,
// checked through REST, with the failure paths: missing rights, wrong types, another system's
// names, huge arguments.
import t from "tap";
import { J, createRole, ok, refused, run as runIn, userWith as userIn } from "./code-run.ts";
import { Client, type DevSystem, devWithSystem, must, newUser, qs, startOutpost, uniq } from "./harness.ts";

const o = await startOutpost();
t.teardown(() => o.stop());
const s = await devWithSystem(o, "cadmin-a");
const s2 = await devWithSystem(o, "cadmin-b");
const SK = s.systemKey;

// ---- helpers ----------------------------------------------------------------------------------

const run = (code: string, as: Client = s.dev, params: Record<string, unknown> = {}, sys: DevSystem = s) => runIn(sys, code, as, params);
const userWith = (perms: Record<string, unknown>, sys: DevSystem = s) => userIn(sys, perms);
async function noopService(sys: DevSystem = s) {
  const name = uniq("target");
  await must(sys.dev.post(`/admin/code/v/1/${sys.systemKey}/${name}`, { code: `function ${name}(req, resp) { resp.success("ran"); }`, parameters: [] }), "create service");
  return name;
}
const rolesOfUser = async (sys: DevSystem, userId: string): Promise<string[]> =>
  (await must(sys.dev.get(`/admin/user/${sys.systemKey}/roles?user=${userId}`), "roles of user")).map((r: any) => r.role_id).sort();

// ---- triggers and timers ----------------------------------------------------------------------

t.test("Trigger: Create, Fetch, Update and Delete (classic), as the REST routes see them", async (t) => {
  const svc = await noopService(), svc2 = await noopService();
  const name = uniq("trg");
  const made = ok(t, await run(`ClearBlade.Trigger.Create(${J(name)}, { system_key: req.systemKey, name: ${J(name)}, def_module: "Messaging", def_name: "Publish",
    key_value_pairs: [{ topic: "a/b" }], service_name: ${J(svc)} }, function (err, tr) {
      if (err) return done(err, tr);
      resp.success({ name: tr.name, systemKey: tr.systemKey, hasUpdate: typeof tr.Update, def_name: tr.def_name, kvp: tr.key_value_pairs });
    });`), "Create");
  t.same(made, { name, systemKey: SK, hasUpdate: "function", def_name: "Publish", kvp: { topic: "a/b" } }, "the instance carries the definition and its methods");
  const rest = await must(s.dev.get(`/admin/triggers/handlers/${SK}/${name}`), "REST read");
  t.match(rest, { name, def_module: "Messaging", def_name: "Publish", key_value_pairs: { topic: "a/b" }, service_name: svc });

  const upd = ok(t, await run(`ClearBlade.Trigger.Fetch(${J(name)}, function (err, tr) {
      if (err) return done(err, tr);
      tr.Update({ service_name: ${J(svc2)}, key_value_pairs: { topic: "c/d" } }, function (err, d) { if (err) return done(err, d); resp.success({ after: tr.service_name, d: d.service_name }); });
    });`), "Fetch + Update");
  t.same(upd, { after: svc2, d: svc2 }, "Update answers the trigger and refreshes the instance");
  t.match(await must(s.dev.get(`/admin/triggers/handlers/${SK}/${name}`), "REST read"), { service_name: svc2, key_value_pairs: { topic: "c/d" } });

  ok(t, await run(`ClearBlade.Trigger.Fetch(${J(name)}, function (err, tr) { if (err) return done(err, tr); tr.Delete(done); });`), "Fetch + Delete");
  t.equal((await s.dev.get(`/admin/triggers/handlers/${SK}/${name}`)).status, 404, "gone");
  refused(t, await run(`ClearBlade.Trigger.Fetch(${J(name)}, done);`), /does not exist|not found/i, 404, "Fetch of a deleted trigger");
});

t.test("Timer: Create (ClearBlade's start_time forms), Fetch, Update answers the instance, Delete", async (t) => {
  const svc = await noopService();
  const name = uniq("tmr");
  const made = ok(t, await run(`ClearBlade.Timer.Create(${J(name)}, { description: "d", start_time: "2031-02-05 17:28:58", repeats: 3, frequency: 3600, service_name: ${J(svc)} },
    function (err, tm) { if (err) return done(err, tm); resp.success({ name: tm.name, start: tm.start_time, repeats: tm.repeats, Delete: typeof tm.Delete }); });`), "Create");
  t.same(made, { name, start: "2031-02-05T17:28:58Z", repeats: 3, Delete: "function" }, "a space-separated UTC time is taken as RFC 3339");
  const upd = ok(t, await run(`ClearBlade.Timer.Fetch(${J(name)}, function (err, tm) {
      if (err) return done(err, tm);
      tm.Update({ frequency: 600 }, function (err, same) { if (err) return done(err, same); resp.success({ frequency: same.frequency, isInstance: typeof same.Update === "function" }); });
    });`), "Fetch + Update");
  t.same(upd, { frequency: 600, isInstance: true });
  t.match(await must(s.dev.get(`/admin/triggers/timers/${SK}/${name}`), "REST read"), { frequency: 600, description: "d", repeats: 3 });
  ok(t, await run(`ClearBlade.Timer.Fetch(${J(name)}, function (err, tm) { if (err) return done(err, tm); tm.Delete(done); });`), "Delete");
  t.equal((await s.dev.get(`/admin/triggers/timers/${SK}/${name}`)).status, 404, "gone");
});

t.test("ClearBladeAsync.Triggers and Timers: create, read, update and delete by query", async (t) => {
  const svc = await noopService(), svc2 = await noopService();
  const tag = uniq("q");
  const names = [`${tag}a`, `${tag}b`, `${tag}c`];
  const out = ok(t, await run(`var T = ClearBladeAsync.Triggers();
    settle(T.create({ name: ${J(names[0])}, def_module: "Data", def_name: "ItemCreated", key_value_pairs: {}, service_name: ${J(svc)} })
      .then(function () { return T.create({ name: ${J(names[1])}, def_module: "Device", def_name: "DeviceCreated", service_name: ${J(svc)} }); })
      .then(function () { return T.create({ name: ${J(names[2])}, def_module: "Data", def_name: "ItemDeleted", service_name: ${J(svc)} }); })
      .then(function () { return T.read(ClearBladeAsync.Query().equalTo("def_module", "Data").ascending("name")); })
      .then(function (data) {
        return T.update(ClearBladeAsync.Query().equalTo("def_name", "ItemDeleted"), { service_name: ${J(svc2)} }).then(function (upd) {
          return T.delete(ClearBladeAsync.Query().equalTo("def_module", "Device")).then(function (del) {
            return { read: data.map(function (x) { return x.name; }).filter(function (n) { return n.indexOf(${J(tag)}) === 0; }), updated: upd.map(function (x) { return [x.name, x.service_name]; }), del: del === undefined ? "(undefined)" : del };
          });
        });
      }));`), "async triggers");
  t.same(out, { read: [names[0], names[2]], updated: [[names[2], svc2]], del: "(undefined)" }, "read filters and sorts, update answers the updated, delete resolves empty");
  const rest = (await must(s.dev.get(`/admin/triggers/handlers/${SK}`), "list")).filter((x: any) => x.name.startsWith(tag)).map((x: any) => x.name).sort();
  t.same(rest, [names[0], names[2]], "the Device trigger was deleted");

  const tm = ok(t, await run(`var T = ClearBladeAsync.Timers();
    settle(T.create({ name: ${J(`${tag}t1`)}, start_time: "now", repeats: -1, frequency: 30, service_name: ${J(svc)}, user_id: "", user_type: 1 })
      .then(function () { return T.create({ name: ${J(`${tag}t2`)}, frequency: 7200, service_name: ${J(svc)} }); })
      .then(function () { return T.read(ClearBladeAsync.Query().greaterThan("frequency", 60)); })
      .then(function (big) { return T.update(ClearBladeAsync.Query().equalTo("name", ${J(`${tag}t1`)}), { frequency: 45 }).then(function (u) {
        return { big: big.map(function (x) { return x.name; }).filter(function (n) { return n.indexOf(${J(tag)}) === 0; }), upd: u[0].frequency, type: u[0].user_type };
      }); }));`), "async timers");
  t.same(tm, { big: [`${tag}t2`], upd: 45, type: 1 });
  ok(t, await run(`settle(ClearBladeAsync.Timers().delete(ClearBladeAsync.Query().equalTo("service_name", ${J(svc)})));`), "delete timers by query");
  t.same((await must(s.dev.get(`/admin/triggers/timers/${SK}`), "list")).filter((x: any) => x.name.startsWith(tag)), [], "both timers gone");
});

t.test("triggers and timers: rights as the REST routes, and the user a timer runs as", async (t) => {
  const svc = await noopService();
  const nobody = await userWith({});
  refused(t, await run(`ClearBladeAsync.Triggers().read().then(done.bind(null, false), function (e) { done(true, e.error); });`, nobody.client), /triggers/, 401, "read without the triggers permission");
  refused(t, await run(`ClearBlade.Timer.Create("x${uniq()}", { frequency: 60, service_name: ${J(svc)} }, done);`, nobody.client), /timers/, 401, "create a timer without the permission");
  const maker = await userWith({ triggers: 15, timers: 15 });
  const name = uniq("utm");
  const made = ok(t, await run(`ClearBlade.Timer.Create(${J(name)}, { frequency: 60, start_time: "2031-01-01T00:00:00Z", service_name: ${J(svc)} }, done);`, maker.client), "a user with the permission");
  t.match(made, { user_id: maker.userId, user_type: 2 }, "a user's timer runs as that user");
  refused(t, await run(`ClearBladeAsync.Timers().create({ name: "${uniq("x")}", frequency: 60, service_name: ${J(svc)}, user_id: "someone-else", user_type: 2 }).then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`, maker.client),
    /only a developer/, 403, "a user cannot make a timer run as another user");
  // triggers of another system are not reachable by name
  const other = await noopService(s2);
  const theirs = uniq("theirs");
  await must(s2.dev.post(`/admin/triggers/handlers/${s2.systemKey}/${theirs}`, { def_module: "Device", def_name: "DeviceCreated", service_name: other }), "s2 trigger");
  refused(t, await run(`ClearBlade.Trigger.Fetch(${J(theirs)}, done);`), /not found|does not exist/i, 404, "another system's trigger, even for the developer of both");
  refused(t, await run(`ClearBlade.Trigger.Create("${uniq("x")}", { system_key: ${J(s2.systemKey)}, def_module: "Device", def_name: "DeviceCreated", service_name: ${J(svc)} }, done);`),
    /its own system/, 400, "options.system_key of another system");
});

t.test("triggers and timers: wrong types and huge arguments are refused, nothing is made", async (t) => {
  const svc = await noopService();
  const cases: [string, RegExp][] = [
    [`ClearBlade.Trigger.Create(42, { def_module: "Device", def_name: "DeviceCreated", service_name: ${J(svc)} }, done);`, /name is required/],
    [`ClearBlade.Trigger.Create("${"x".repeat(129)}", { def_module: "Device", def_name: "DeviceCreated", service_name: ${J(svc)} }, done);`, /at most 128/],
    [`ClearBlade.Trigger.Create("${uniq("x")}", "Device", done);`, /must be a JSON object/],
    [`ClearBlade.Trigger.Create("${uniq("x")}", { def_module: "Nope", def_name: "X", service_name: ${J(svc)} }, done);`, /unknown trigger definition/],
    [`ClearBlade.Trigger.Create("${uniq("x")}", { def_module: "Device", def_name: "DeviceCreated", service_name: "no-such-service" }, done);`, /does not exist/],
    [`ClearBlade.Trigger.Create("${uniq("x")}", { name: "other", def_module: "Device", def_name: "DeviceCreated", service_name: ${J(svc)} }, done);`, /cannot be renamed/],
    [`ClearBlade.Timer.Create("${uniq("x")}", { frequency: "often", service_name: ${J(svc)} }, done);`, /frequency/],
    [`ClearBlade.Timer.Create("${uniq("x")}", { frequency: 60, start_time: "tomorrow", service_name: ${J(svc)} }, done);`, /start_time/],
    [`ClearBladeAsync.Triggers().read(ClearBladeAsync.Query().matches("name", "(a+)+$")).then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`, /RE is not supported/],
    [`ClearBladeAsync.Timers().read({ FILTERS: [[{ EQ: [{ password: 1 }] }]] }).then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`, /unknown field 'password'/],
  ];
  for (const [code, re] of cases) refused(t, await run(code), re, 400, code.slice(0, 90));
  const handlers = await must(s.dev.get(`/admin/triggers/handlers/${SK}`), "list");
  t.notOk(handlers.some((h: any) => h.name === "other" || h.name.length > 128), "nothing was made");
});

// ---- roles and permissions --------------------------------------------------------------------

t.test("Roles (classic): create, get, update, duplicate, users and devices, delete", async (t) => {
  const rname = uniq("role");
  const u = await newUser(s);
  const dev = uniq("dev");
  await must(s.dev.post(`/admin/devices/${SK}/${dev}`, { type: "t", state: "s", active_key: "k-123456" }), "device");
  const out = ok(t, await run(`var R = ClearBlade.Roles();
    R.create({ name: ${J(rname)}, description: "first" }, function (err, made) {
      if (err) return done(err, made);
      R.update(made.role_id, { description: "second" }, function (err) {
        if (err) return done(err);
        R.getById(made.role_id, function (err, byId) {
          if (err) return done(err, byId);
          R.getByName(${J(rname)}, function (err, byName) {
            if (err) return done(err, byName);
            R.addRoleToUser(${J(u.userId)}, ${J(rname)}, function (err) {
              if (err) return done(true, "addRoleToUser");
              R.getRolesForUser(${J(u.userId)}, function (err, forUser) {
                if (err) return done(err, forUser);
                R.addRoleToDevice(${J(dev)}, made.role_id, function (err, d) {
                  if (err) return done(err, d);
                  R.getRolesForDevice(${J(dev)}, function (err, forDevice) {
                    if (err) return done(err, forDevice);
                    resp.success({ made: made, byId: [byId.role_id, byId.description], byName: byName.map(function (r) { return r.name; }),
                      forUser: forUser.filter(function (r) { return r.role_id === made.role_id; }).length, forDevice: forDevice.some(function (r) { return r.role_id === made.role_id; }) });
                  });
                });
              });
            });
          });
        });
      });
    });`), "roles round trip");
  t.match(out, { made: { name: rname, description: "first" }, byName: [rname], forUser: 1, forDevice: true });
  t.equal(out.byId[1], "second", "update changed the description");
  const roleId = out.made.role_id;
  t.ok((await rolesOfUser(s, u.userId)).includes(roleId), "REST: the user holds the role");

  ok(t, await run(`var R = ClearBlade.Roles();
    R.removeRoleFromUser(${J(u.userId)}, ${J(roleId)}, function (err, d) { if (err) return done(err, d);
      R.removeRoleFromDevice(${J(dev)}, ${J(rname)}, done); });`), "remove from user and device");
  t.notOk((await rolesOfUser(s, u.userId)).includes(roleId), "REST: the role was taken away");
  const devRoles = await must(s.dev.get(`/admin/devices/roles/${SK}/${dev}`), "device roles");
  t.notOk(devRoles.roles.some((r: any) => r.role_id === roleId), "REST: and from the device");

  const dup = ok(t, await run(`var R = ClearBlade.Roles();
    ClearBlade.Permissions().addPermissionToRole(${J(roleId)}, { requestType: 3, resourceType: "service", resourceName: "svcA" }, function (err) {
      if (err) return done(true, "add");
      R.duplicateRole({ name: ${J(`${rname}-copy`)} }, ${J(roleId)}, function (err, id) {
        if (err) return done(err, id);
        ClearBlade.Permissions().getPermissionsForRole(id, function (err, perms) { resp.success({ id: id, perms: perms }); });
      });
    });`), "duplicateRole");
  t.type(dup.id, "string");
  t.not(dup.id, roleId);
  t.same(dup.perms, [{ permID: "service:svcA", roleID: dup.id, resourceType: "service", resourceName: "svcA", requestType: 3 }], "the copy has the permissions");
  ok(t, await run(`ClearBlade.Roles().delete(${J(dup.id)}, done);`), "delete");
  t.same(await must(s.dev.get(`/admin/user/${SK}/roles?query=${qs({ FILTERS: [[{ EQ: [{ role_id: dup.id }] }]] })}`), "list"), [], "REST: deleted");
  refused(t, await run(`ClearBlade.Roles().delete("Administrator", done);`), /cannot be deleted/, 400, "a built-in role");
});

t.test("Permissions (classic): add, list, by resource, increase, decrease, remove", async (t) => {
  const roleId = await createRole(s, { name: uniq("P") });
  const out = ok(t, await run(`var M = ClearBlade.Permissions(), role = ${J(roleId)};
    M.addPermissionToRole(role, { requestType: 1, resourceType: "collection", resourceName: "things" }, function (err, permID) {
      if (err) return done(err, permID);
      M.addPermissionToRole(role, { requestType: 15, resourceType: "users" }, function (err) {
        M.increasePermissionsForRole(role, permID, 4, function (err) {
          M.decreasePermissionsForRole(role, "users", 8, function (err) {
            M.getPermissionsForRole(role, function (err, perms) {
              M.getPermissionsForResource("collection", "things", function (err, byRes) {
                resp.success({ permID: permID, perms: perms, byRes: byRes });
              });
            });
          });
        });
      });
    });`), "permissions");
  t.equal(out.permID, "collection:things");
  t.same(out.perms.map((p: any) => [p.resourceType, p.resourceName, p.requestType]).sort(), [["collection", "things", 5], ["users", "", 7]], "increase ORs, decrease clears bits");
  t.same(out.byRes.map((p: any) => [p.roleID, p.requestType]), [[roleId, 5]], "by resource: the roles holding it");
  const rest = await must(s.dev.get(`/admin/user/${SK}/roles?query=${qs({ FILTERS: [[{ EQ: [{ role_id: roleId }] }]] })}`), "REST");
  t.match(rest[0].Permissions, { Collections: [{ Name: "things", Level: 5 }], UsersList: { Level: 7 } }, "REST sees the levels");
  ok(t, await run(`ClearBlade.Permissions().removePermissionsForResource("collection", "things", function (err, d) { if (err) return done(err, d); ClearBlade.Permissions().removePermissionsForRole(${J(roleId)}, done); });`), "remove");
  const after = await must(s.dev.get(`/admin/user/${SK}/roles?query=${qs({ FILTERS: [[{ EQ: [{ role_id: roleId }] }]] })}`), "REST");
  t.same(after[0].Permissions.Collections, [], "no collection grant");
  t.equal(after[0].Permissions.UsersList.Level, 0, "no users grant");
  for (const [code, re] of [
    [`ClearBlade.Permissions().addPermissionToRole(${J(roleId)}, { requestType: 16, resourceType: "users" }, done);`, /0 to 15/],
    [`ClearBlade.Permissions().addPermissionToRole(${J(roleId)}, { requestType: 1, resourceType: "spaceships" }, done);`, /unknown resource type/],
    [`ClearBlade.Permissions().addPermissionToRole(${J(roleId)}, { requestType: 1, resourceType: "service" }, done);`, /needs the service's name/],
    [`ClearBlade.Permissions().increasePermissionsForRole(${J(roleId)}, 7, 1, done);`, /permission id/],
  ] as [string, RegExp][]) refused(t, await run(code), re, 400, code.slice(0, 80));
});

t.test("ClearBladeAsync.Roles and Role(id): create, permissions, applyTo, grantedTo, members, strip, update and delete by query", async (t) => {
  const u = await newUser(s);
  const dev = uniq("adev");
  await must(s.dev.post(`/admin/devices/${SK}/${dev}`, { type: "t", state: "s", active_key: "k-123456" }), "device");
  const rname = uniq("arole");
  const out = ok(t, await run(`var Rs = ClearBladeAsync.Roles(), P = ClearBladeAsync.Permissions, id;
    settle(Rs.create({ name: ${J(rname)}, description: "x" }).then(function (rid) {
      id = rid; var R = ClearBladeAsync.Role(rid);
      return R.setPermissions([{ type: "topic", name: "a/#", level: P.READ | P.CREATE }, { type: "devices", level: P.READ }])
        .then(function () { return R.increasePermissions({ type: "devices", level: P.UPDATE }); })
        .then(function () { return R.decreasePermissions({ type: "topic", name: "a/#", level: P.CREATE }); })
        .then(function () { return R.applyTo(${J(u.userId)}); })
        .then(function () { return R.applyTo(${J(dev)}); })
        .then(function () { return Promise.all([R.permissions(), Rs.grantedTo(${J(u.userId)}), Rs.grantedTo(${J(dev)}), R.users(), R.devices()]); })
        .then(function (a) { return R.stripFrom(${J(dev)}).then(function () { return R.devices(); }).then(function (after) { a.push(after); return a; }); });
    }).then(function (a) {
      return Rs.read(ClearBladeAsync.Query().equalTo("name", ${J(rname)})).then(function (rows) {
        return { id: id, typeofId: typeof id, perms: a[0], userRoles: a[1].indexOf(id) >= 0, devRoles: a[2].indexOf(id) >= 0, users: a[3], devices: a[4], devicesAfter: a[5], read: rows.map(function (r) { return [r.role_id, r.name]; }) };
      });
    }));`), "async roles");
  t.equal(out.typeofId, "string", "create resolves the role id");
  t.same(out.perms.sort((a: any, b: any) => a.type.localeCompare(b.type)), [{ type: "devices", level: 5 }, { type: "topic", name: "a/#", level: 1 }], "set, increase, decrease");
  t.ok(out.userRoles && out.devRoles, "grantedTo a user and a device");
  t.same(out.users, [u.userId]);
  t.same(out.devices, [dev]);
  t.same(out.devicesAfter, [], "stripFrom took it from the device");
  t.same(out.read, [[out.id, rname]]);
  ok(t, await run(`var Rs = ClearBladeAsync.Roles();
    settle(Rs.update(ClearBladeAsync.Query().equalTo("name", ${J(rname)}), { description: "changed" }).then(function () {
      return Rs.read(ClearBladeAsync.Query().equalTo("name", ${J(rname)}));
    }).then(function (r) { if (r[0].description !== "changed") throw new Error("not updated"); return Rs.delete(ClearBladeAsync.Query().equalTo("name", ${J(rname)})); }));`), "update and delete by query");
  t.notOk((await rolesOfUser(s, u.userId)).includes(out.id), "the deleted role is gone from its user");
});

t.test("the setup pattern of ClearBlade's component services: read roles with or, grant each services and a dashboard", async (t) => {
  const editor = uniq("Editor");
  await createRole(s, { name: editor });
  const out = ok(t, await run(`var P = ClearBladeAsync.Permissions;
    function grant(id) { return ClearBladeAsync.Role(id).setPermissions([{ type: "service", name: "svcOne", level: P.READ }, { type: "dashboard", name: "board", level: P.READ }]); }
    ClearBladeAsync.Roles().read(ClearBladeAsync.Query().equalTo("name", "Administrator").or(ClearBladeAsync.Query().equalTo("name", ${J(editor)})))
      .then(function (roles) { return Promise.all(roles.map(function (r) { return grant(r.role_id); })).then(function () { return roles.map(function (r) { return r.name; }).sort(); }); })
      .then(function (names) { resp.success(names); })
      .catch(function (e) { resp.error("failed: " + JSON.stringify(e.error || e.message)); });`), "setup");
  t.same(out, ["Administrator", editor].sort(), "both roles read with one or-query");
  const rest = await must(s.dev.get(`/admin/user/${SK}/roles?query=${qs({ FILTERS: [[{ EQ: [{ name: editor }] }]] })}`), "REST");
  t.match(rest[0].Permissions, { CodeServices: [{ Name: "svcOne", Level: 1 }], Portals: [{ Name: "board", Level: 1 }] }, "REST sees the service and the dashboard (portal) grants");
});

t.test("roles: rights as the REST routes (roles, manage users, devices only by a developer)", async (t) => {
  const nobody = await userWith({});
  refused(t, await run(`ClearBladeAsync.Roles().create({ name: "${uniq("x")}" }).then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`, nobody.client), /roles/, 401, "create without the roles permission");
  refused(t, await run(`ClearBlade.Roles().get(null, done);`, nobody.client), /roles/, 401, "read without it");
  // a user may not make itself Administrator without Manage Users
  const roler = await userWith({ roles: 15 });
  refused(t, await run(`ClearBlade.Roles().addRoleToUser(req.userid, "Administrator", done);`, roler.client), /manage users/, 401, "grant Administrator to oneself");
  t.notOk((await rolesOfUser(s, roler.userId)).includes("Administrator"), "not granted");
  refused(t, await run(`ClearBladeAsync.Role("Administrator").applyTo(req.userid).then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`, roler.client), /manage users/, 401, "the async form too");
  const dev = uniq("rdev");
  await must(s.dev.post(`/admin/devices/${SK}/${dev}`, { type: "t", state: "s", active_key: "k-123456" }), "device");
  const manager = await userWith({ roles: 15, manageusers: 15 });
  refused(t, await run(`ClearBlade.Roles().addRoleToDevice(${J(dev)}, "Administrator", done);`, manager.client), /developer/i, 401, "a device's roles: developers only");
  const target = await newUser(s);
  ok(t, await run(`ClearBlade.Roles().addRoleToUser(${J(target.userId)}, ${J(roler.roleId)}, done);`, manager.client), "with Manage Users");
  t.ok((await rolesOfUser(s, target.userId)).includes(roler.roleId), "granted");
  // another system's roles and users are not reachable
  const theirRole = await createRole(s2, { name: uniq("theirs") });
  refused(t, await run(`ClearBlade.Roles().getById(${J(theirRole)}, done);`), /does not exist/, 404, "another system's role id");
  refused(t, await run(`ClearBladeAsync.Role(${J(theirRole)}).permissions().then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`), /not found|does not exist/i, 404, "its permissions");
  const theirUser = await newUser(s2);
  refused(t, await run(`ClearBlade.Roles().addRoleToUser(${J(theirUser.userId)}, "Authenticated", done);`), /not found|does not exist/i, 404, "another system's user");
  for (const [code, re] of [
    [`ClearBlade.Roles().create({ description: "no name" }, done);`, /name/],
    [`ClearBlade.Roles().getById(42, done);`, /role id or name/],
    [`ClearBlade.Roles().update(${J(roler.roleId)}, "x", done);`, /must be a JSON object/],
    [`ClearBladeAsync.Role(${J(roler.roleId)}).setPermissions(new Array(1001).fill({ type: "users", level: 1 })).then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`, /at most 1000/],
    [`ClearBladeAsync.Role(${J(roler.roleId)}).setPermissions({ type: "users", level: "all" }).then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`, /0 to 15/],
  ] as [string, RegExp][]) refused(t, await run(code), re, 400, code.slice(0, 80));
});

// ---- users and sessions -----------------------------------------------------------------------

t.test("loginUser: a session of that user, whose rights the run then has; logoutUser ends it", async (t) => {
  const u = await newUser(s);
  const out = ok(t, await run(`ClearBlade.loginUser(${J(u.email)}, ${J(u.password)}, function (err, who) {
      if (err) return done(err, who);
      ClearBlade.User().getUser(function (err, me) {
        if (err) return done(err, me);
        ClearBlade.isCurrentUserAuthenticated(function (err, yes) {
          ClearBlade.logoutUser(function (err, bye) {
            ClearBlade.User().getUser(function (err2, after) {
              resp.success({ who: who, me: me.email, yes: yes, bye: bye, afterErr: err2 });
            });
          });
        });
      });
    });`), "login");
  t.equal(out.who.email, u.email);
  t.type(out.who.authToken, "string");
  t.equal(out.me, u.email, "later calls act as the signed-in user");
  t.equal(out.yes, true, "isCurrentUserAuthenticated");
  t.equal(out.bye, "User Logged out");
  t.equal(out.afterErr, true, "after logout the run is the developer again (no user record)");
  const r = await new Client(o.url, { "ClearBlade-UserToken": out.who.authToken }).get("/api/v/1/user/info");
  t.ok(r.status === 400 && r.body.error, `the session's token was revoked (${r.status})`);

  // a session from code is that user's: no more rights than it has
  const col = await must(s.dev.post("/admin/collectionmanagement", { name: uniq("secret"), appID: SK }), "collection");
  refused(t, await run(`ClearBlade.loginUser(${J(u.email)}, ${J(u.password)}, function (err) {
      ClearBlade.Collection({ collectionID: ${J(col.collectionID)} }).fetch(done);
    });`), /permission|not allowed|denied/i, undefined, "the developer's service, signed in as the user, reads only what the user may");
});

t.test("ClearBlade.init signs in as ClearBlade's docs show it (email and password, registerUser, useUser); a failure opens no session", async (t) => {
  const u = await newUser(s);
  const init = (opts: string) => `ClearBlade.init({ systemKey: req.systemKey, systemSecret: req.systemSecret, ${opts} });`;
  const signed = ok(t, await run(init(`email: ${J(u.email)}, password: ${J(u.password)}, callback: function (err, body) {
      if (err) return done(err, body);
      ClearBlade.User().getUser(function (err, me) { resp.success({ body: body, me: me && me.email }); });
    }`)), "init with email and password");
  t.equal(signed.body.email, u.email, "the callback gets the user");
  t.type(signed.body.authToken, "string", "and its token");
  t.equal(signed.me, u.email, "later calls act as that user");

  // the rights are the user's: the developer's service reads only what the user may
  const col = await must(s.dev.post("/admin/collectionmanagement", { name: uniq("initsecret"), appID: SK }), "collection");
  refused(t, await run(init(`email: ${J(u.email)}, password: ${J(u.password)}, callback: function (err, body) {
      if (err) return done(err, body);
      ClearBlade.Collection({ collectionID: ${J(col.collectionID)} }).fetch(done);
    }`)), /permission|not allowed|denied/i, undefined, "a collection the user may not read");

  const wrong = await newUser(s);
  refused(t, await run(init(`email: ${J(wrong.email)}, password: "wrong", callback: done`)), /invalid email or password/, 401, "a wrong password reaches the callback");
  const thrown = ok(t, await run(`try { ${init(`email: ${J(wrong.email)}, password: "wrong"`)} resp.success("no error"); }
    catch (e) { ClearBlade.User().getUser(function (err, me) { resp.success({ message: e.message, stillCaller: err === true }); }); }`), "without a callback");
  t.match(thrown, { message: /invalid email or password/, stillCaller: true }, "a failed sign-in without a callback throws, and the run stays the caller's");

  const email = `${uniq("initreg")}@example.com`;
  const reg = ok(t, await run(init(`registerUser: true, email: ${J(email)}, password: "pw-123456", callback: function (err, body) {
      if (err) return done(err, body);
      ClearBlade.User().getUser(function (err, me) { resp.success({ body: body, me: me && me.email }); });
    }`)), "init with registerUser");
  t.match(reg, { body: { email, authToken: /./ }, me: email }, "registered, and signed in as the new user");
  const a = await s.app.post("/api/v/1/user/auth", { email, password: "pw-123456" });
  t.equal(a.status, 200, "the registered user signs in over REST");

  const other = await newUser(s);
  const token = (await s.app.post("/api/v/1/user/auth", { email: other.email, password: other.password })).body.user_token;
  const used = ok(t, await run(`${init(`useUser: { email: ${J(other.email)}, authToken: ${J(token)} }`)}
    ClearBlade.User().getUser(function (err, me) { if (err) return done(err, me); resp.success(me.email); });`), "init with useUser");
  t.equal(used, other.email, "later calls act as the token's holder");
  const badToken = ok(t, await run(`try { ${init(`useUser: { email: "x@y.z", authToken: "not-a-token" }`)} resp.success("no error"); } catch (e) { resp.success(e.message); }`), "useUser with a bad token");
  t.not(badToken, "no error", `a token that is no session is refused (${badToken})`);

  refused(t, await run(`ClearBlade.init({ systemKey: ${J(s2.systemKey)}, systemSecret: "x", email: ${J(u.email)}, password: ${J(u.password)}, callback: done });`), /its own system only/, undefined, "another system's key");
  const plainInit = ok(t, await run(`ClearBlade.init({ request: req, callback: function (err, body) {
      ClearBlade.User().getUser(function (e2) { resp.success({ err: err, body: body, noUser: e2 === true }); }); } });`), "init({request: req})");
  t.same(plainInit, { err: false, body: {}, noUser: true }, "plain init keeps the caller (the developer)");
});

t.test("sign-ins: wrong passwords, the lockout, registerUser, loginAnon, setUser, reauthUser", async (t) => {
  const u = await newUser(s);
  refused(t, await run(`ClearBlade.loginUser(${J(u.email)}, "wrong", done);`), /invalid email or password/, 401, "a wrong password");
  refused(t, await run(`ClearBlade.loginUser(${J(u.email)}, "wrong", done);`), /invalid/, 401, "again");
  refused(t, await run(`ClearBlade.loginUser(${J(u.email)}, "wrong", done);`), /invalid/, 401, "a third time");
  refused(t, await run(`ClearBlade.loginUser(${J(u.email)}, ${J(u.password)}, done);`), /too many failed sign-ins/, 429, "then even the right password waits");
  const u2 = await newUser(s);
  ok(t, await run(`ClearBlade.loginUser(${J(u2.email)}, ${J(u2.password)}, done);`), "another account is not locked");
  for (const [code, re] of [
    [`ClearBlade.loginUser(42, "x", done);`, /email must be a non-empty string/],
    [`ClearBlade.loginUser("a@b.c", "${"x".repeat(1025)}", done);`, /at most 1024/],
  ] as [string, RegExp][]) refused(t, await run(code), re, 400, code.slice(0, 60));

  const email = `${uniq("reg")}@example.com`;
  const reg = ok(t, await run(`ClearBlade.registerUser(${J(email)}, "pw-123456", function (err, r) {
      if (err) return done(err, r);
      ClearBlade.User().getUser(function (err, me) { resp.success({ r: r, me: me && me.email }); });
    });`), "registerUser");
  t.match(reg, { r: { email, user_id: /^[0-9a-f]+$/ }, me: email }, "registered and signed in as the new user");
  const plain = await userWith({});
  await must(s.dev.put("/admin/systemmanagement", { id: SK, registration: false }), "close registration");
  refused(t, await run(`ClearBlade.registerUser("${uniq("x")}@example.com", "pw-123456", done);`, plain.client), /registration is closed/, 401, "a user's service when registration is closed");
  ok(t, await run(`ClearBlade.registerUser("${uniq("x")}@example.com", "pw-123456", done);`), "a developer's service still may (as REST)");
  await must(s.dev.put("/admin/systemmanagement", { id: SK, registration: true }), "open registration");

  const anon = ok(t, await run(`ClearBlade.loginAnon(function (err, a) { if (err) return done(err, a); ClearBlade.User().getUser(function (e2, me) { resp.success({ a: a, meErr: e2 }); }); });`), "loginAnon");
  t.equal(anon.a.email, null);
  t.type(anon.a.authToken, "string");
  t.equal(anon.meErr, true, "an anonymous session has no user record");

  const set = ok(t, await run(`ClearBlade.setUser(${J(u2.email)}, ${J(u2.token)}, function (err) { ClearBlade.User().getUser(done); });`), "setUser");
  t.equal(set.email, u2.email, "setUser acts as the token's holder");
  const theirs = await newUser(s2);
  refused(t, await run(`ClearBlade.setUser(${J(theirs.email)}, ${J(theirs.token)}, done);`), /token does not belong|not authorized|another system/i, undefined, "a token of another system");
  refused(t, await run(`ClearBlade.setUser("x", "not-a-token", done);`), /not valid/, 400, "a made-up token");

  const fresh = await must(s.app.post("/api/v/1/user/auth", { email: u2.email, password: u2.password }), "auth");
  const re = ok(t, await run(`ClearBlade.reauthUser(${J(fresh.user_token)}, ${J(fresh.refresh_token)}, done);`), "reauthUser");
  t.type(re.authToken, "string");
  t.not(re.authToken, fresh.user_token, "a new token");
  refused(t, await run(`ClearBlade.reauthUser(${J(fresh.user_token)}, ${J(fresh.refresh_token)}, done);`), /invalid refresh token/, 401, "a refresh token is used once");
});

t.test("deleteUser(s), ClearBladeAsync.Users: create, update, delete by query; rights as REST", async (t) => {
  const a = await newUser(s), b = await newUser(s);
  ok(t, await run(`ClearBlade.deleteUser(${J(a.email)}, done);`), "deleteUser by email");
  ok(t, await run(`ClearBlade.deleteUsers([${J(b.userId)}], done);`), "deleteUsers by id");
  const left = await must(s.dev.get(`/admin/user/${SK}?query=${qs({ FILTERS: [[{ EQ: [{ email: a.email }] }], [{ EQ: [{ email: b.email }] }]] })}`), "list");
  t.same(left, [], "both gone");
  refused(t, await run(`ClearBlade.deleteUsers([], done);`), /1 to 1000/, 400, "an empty list");
  const c = await newUser(s);
  const nobody = await userWith({});
  refused(t, await run(`ClearBlade.deleteUser(${J(c.email)}, done);`, nobody.client), /users/, 401, "without delete on the users list");
  const theirs = await newUser(s2);
  refused(t, await run(`ClearBlade.deleteUser(${J(theirs.email)}, done);`), /not found|does not exist/i, 404, "another system's user");

  const email = `${uniq("au")}@example.com`;
  const id = ok(t, await run(`var U = ClearBladeAsync.Users();
    settle(U.create({ email: ${J(email)}, password: "pw-123456" }).then(function (id) {
      return U.update(ClearBladeAsync.Query().equalTo("user_id", id), { email: ${J(email.replace("@", "+x@"))} }).then(function () { return id; });
    }));`), "create and update");
  t.type(id, "string");
  const read = ok(t, await run(`settle(ClearBladeAsync.Users().read(ClearBladeAsync.Query().equalTo("user_id", ${J(id)})));`), "read by query");
  t.ok(Array.isArray(read), "read answers the users themselves (an array), as ClearBlade's types say");
  t.equal(read[0]?.user_id, id);
  const found = await must(s.dev.get(`/admin/user/${SK}?query=${qs({ FILTERS: [[{ EQ: [{ user_id: id }] }]] })}`), "read");
  t.equal(found[0]?.email, email.replace("@", "+x@"), "updated");
  ok(t, await run(`settle(ClearBladeAsync.Users().delete(ClearBladeAsync.Query().equalTo("user_id", ${J(id)})));`), "delete by query");
  t.same(await must(s.dev.get(`/admin/user/${SK}?query=${qs({ FILTERS: [[{ EQ: [{ user_id: id }] }]] })}`), "read"), [], "deleted");
  refused(t, await run(`ClearBladeAsync.Users().create({ email: "${uniq("x")}@example.com", password: "p" }).then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`, nobody.client), /users/, 401, "create without the permission");
  const creator = await userWith({ users: 15 });
  refused(t, await run(`ClearBladeAsync.Users().create({ email: "${uniq("x")}@example.com", password: "p", roles: ["Administrator"] }).then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`, creator.client),
    /roles cannot be set/, 400, "a user cannot create an Administrator");
});

t.test("ClearBladeAsync.Auth: sessions for users, devices and anonymous; impersonation for developers only", async (t) => {
  const u = await newUser(s);
  const dev = uniq("audev");
  await must(s.dev.post(`/admin/devices/${SK}/${dev}`, { type: "t", state: "s", active_key: "key-123456", allow_key_auth: true, enabled: true }), "device");
  const out = ok(t, await run(`var A = ClearBladeAsync.Auth();
    settle(Promise.all([A.authUser(${J(u.email)}, ${J(u.password)}), A.authAnon(), A.authDevice(${J(dev)}, "key-123456"), A.impersonateUser(${J(u.userId)})]).then(function (a) {
      // (the refresh after the reads: a read racing a revocation may cache the old token briefly)
      return Promise.all([A.userIDFromToken(a[0].auth_token), A.userIDFromToken(a[2].auth_token)]).then(function (w) {
        return A.reauth(a[0].refresh_token, a[0].auth_token).then(function (fresh) { w.push(fresh); return { a: a, whose: w }; });
      });
    }));`), "auth");
  for (const x of out.a) t.match(x, { auth_token: String, refresh_token: String, expiry: Number }, "{auth_token, refresh_token, expiry}");
  t.equal((await new Client(o.url, { "ClearBlade-UserToken": out.a[0].auth_token }).get("/api/v/1/user/info")).status, 400, "the refreshed token is gone");
  t.equal((await new Client(o.url, { "ClearBlade-UserToken": out.whose[2].auth_token }).get("/api/v/1/user/info")).body.email, u.email, "its successor works over REST");
  t.equal((await new Client(o.url, { "ClearBlade-UserToken": out.a[3].auth_token }).get("/api/v/1/user/info")).body.email, u.email, "and the impersonated one");
  t.same(out.whose.slice(0, 2), [u.userId, `${SK} :: ${dev}`], "userIDFromToken: a user id, a device key");
  t.match(out.whose[2], { auth_token: String }, "reauth with the access token");
  const plain = await userWith({});
  refused(t, await run(`ClearBladeAsync.Auth().impersonateUser(${J(u.userId)}).then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`, plain.client), /developer/i, 401, "a user cannot impersonate");
  const theirs = await newUser(s2);
  refused(t, await run(`ClearBladeAsync.Auth().userIDFromToken(${J(theirs.token)}).then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`), /of this system/, 400, "another system's token");
  refused(t, await run(`ClearBladeAsync.Auth().reauth("r").then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`), /access token/, 400, "reauth without the access token");
  refused(t, await run(`ClearBladeAsync.Auth().authDevice(${J(dev)}, "wrong").then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`), /invalid device name or active key/, 401, "a wrong device key");
  refused(t, await run(`ClearBladeAsync.Auth().authUser(${J(theirs.email)}, ${J(theirs.password)}).then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`), /invalid email or password/, 401, "another system's user cannot sign in here");
  // a run opens a bounded number of sessions
  refused(t, await run(`var A = ClearBladeAsync.Auth(), n = 0;
    function next() { return A.authAnon().then(function () { n++; return next(); }); }
    next().then(function () { done(false, n); }, function (e) { done(true, { detail: e.error.detail + " after " + n }); });`), /at most 100 sessions after 100/, undefined, "101 sessions in one run");
});

// ---- collection administration ----------------------------------------------------------------

t.test("collections: newCollection, addColumn, indexes, bulkCreate, dropColumn, getAllCollections, deleteCollection", async (t) => {
  const name = uniq("adm");
  const out = ok(t, await run(`ClearBlade.newCollection(${J(name)}, function (err, made) {
      if (err) return done(err, made);
      var c = ClearBlade.Collection({ collectionID: made.collectionID });
      c.addColumn({ name: "sku", type: "string" }, function (err, d) {
        if (err) return done(err, d);
        c.addColumn({ name: "qty", type: "int" }, function (err) {
          c.createUniqueIndex("sku", function (err, d) {
            if (err) return done(err, d);
            c.createIndex("qty", function (err, d) {
              if (err) return done(err, d);
              var A = ClearBladeAsync.Collection({ collectionID: made.collectionID });
              A.bulkCreate(["sku", "qty"], [["a", 1], ["b", 2], ["c", 3]]).then(function (r) {
                return A.fetch(ClearBladeAsync.Query().ascending("sku")).then(function (rows) {
                  ClearBlade.getAllCollections(function (err, all) {
                    c.dropColumn("qty", function (err, d) {
                      if (err) return done(err, d);
                      c.columns(function (err, cols) {
                        resp.success({ id: made.collectionID, bulk: r === undefined, rows: rows.DATA.map(function (x) { return [x.sku, x.qty]; }),
                          listed: all.some(function (x) { return x.collectionID === made.collectionID && x.name === ${J(name)}; }), cols: cols.map(function (x) { return x.ColumnName; }) });
                      });
                    });
                  });
                });
              }, function (e) { done(true, e.error); });
            });
          });
        });
      });
    });`), "administration");
  t.same(out.rows, [["a", 1], ["b", 2], ["c", 3]], "bulkCreate inserted the rows");
  t.ok(out.bulk, "bulkCreate resolves empty");
  t.ok(out.listed, "getAllCollections lists it");
  t.same(out.cols, ["item_id", "sku"], "qty dropped");
  const idx = await must(s.dev.get(`/api/v/4/data/${out.id}/listindexes`), "indexes");
  t.same(idx.Data.map((i: any) => [i.name, i.type]), [["sku", "Unique Index"]], "the unique index stays (qty's went with it)");
  refused(t, await run(`ClearBladeAsync.Collection({ collectionID: ${J(out.id)} }).bulkCreate(["sku"], [["a"]]).then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`), /duplicate value for unique column 'sku'/, 400, "the unique index holds");

  const asyncMade = ok(t, await run(`settle(ClearBladeAsync.newCollection(${J(`${name}2`)}).then(function (c) {
      return ClearBladeAsync.Collection(c.id).addColumn({ name: "v", type: "float" }).then(function () { return ClearBladeAsync.Collection(c.id).columns(); }).then(function (cols) { return { c: c, cols: cols.length }; });
    }));`), "async newCollection");
  t.match(asyncMade, { c: { name: `${name}2`, id: /^[0-9a-f]{30}$/ }, cols: 2 });
  ok(t, await run(`ClearBlade.Collection({ collectionName: ${J(name)} }).deleteCollection(done);`), "deleteCollection");
  ok(t, await run(`settle(ClearBladeAsync.Collection(${J(asyncMade.c.id)}).deleteCollection());`), "async deleteCollection");
  const all = await must(s.dev.get(`/api/v/3/allcollections/${SK}`), "list");
  t.notOk(all.some((c: any) => c.name === name || c.name === `${name}2`), "both gone");
});

t.test("collections: schema rights, another system's collections, wrong types, huge arguments", async (t) => {
  const mineName = uniq("mine");
  const mine = await must(s.dev.post("/admin/collectionmanagement", { name: mineName, appID: SK }), "collection");
  const reader = await userWith({ allcollections: 1 });
  refused(t, await run(`ClearBlade.newCollection("${uniq("x")}", done);`, reader.client), /collections/, 401, "create without the permission");
  refused(t, await run(`ClearBlade.Collection({ collectionID: ${J(mine.collectionID)} }).addColumn({ name: "x", type: "string" }, done);`, reader.client), /collections/, 401, "add a column");
  refused(t, await run(`ClearBlade.Collection({ collectionID: ${J(mine.collectionID)} }).deleteCollection(done);`, reader.client), /collections/, 401, "delete");
  refused(t, await run(`ClearBlade.Collection({ collectionID: ${J(mine.collectionID)} }).createIndex("item_id", done);`, reader.client), /collections/, 401, "an index");
  const admin = await userWith({ allcollections: 15 });
  ok(t, await run(`ClearBlade.Collection({ collectionID: ${J(mine.collectionID)} }).addColumn({ name: "n", type: "int" }, done);`, admin.client), "a user with the permission");

  // another developer's system, and another system of the same developer (whose rights reach it)
  const theirs = await must(s2.dev.post("/admin/collectionmanagement", { name: uniq("theirs"), appID: s2.systemKey }), "s2 collection");
  const sibling = await must(s.dev.post("/admin/systemmanagement", { name: "cadmin-sibling" }), "second system");
  const near = await must(s.dev.post("/admin/collectionmanagement", { name: uniq("near"), appID: sibling.appID }), "sibling collection");
  for (const [code, what] of [
    [`ClearBlade.Collection({ collectionID: %ID% }).deleteCollection(done);`, "delete"],
    [`ClearBlade.Collection({ collectionID: %ID% }).addColumn({ name: "x", type: "string" }, done);`, "add a column"],
    [`ClearBlade.Collection(%ID%).fetch(done);`, "fetch"],
    [`ClearBladeAsync.Collection(%ID%).bulkCreate(["x"], [[1]]).then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`, "bulkCreate"],
  ] as [string, string][]) {
    refused(t, await run(code.replace("%ID%", J(theirs.collectionID))), /another developer/, 401, `another developer's collection by id: ${what}`);
    refused(t, await run(code.replace("%ID%", J(near.collectionID))), /not found|does not exist/i, 404, `the same developer's other system, by id: ${what}`);
  }
  t.equal((await s2.dev.get(`/api/v/1/data/${theirs.collectionID}`)).status, 200, "theirs is still there");
  t.equal((await s.dev.get(`/api/v/1/data/${near.collectionID}`)).status, 200, "the sibling's too");

  const c = `ClearBladeAsync.Collection({ collectionID: ${J(mine.collectionID)} })`;
  const p = (expr: string) => `${expr}.then(function (d) { done(false, d); }, function (e) { done(true, e.error); });`;
  for (const [code, re] of [
    [p(`${c}.addColumn({ name: "bad", type: "spaceship" })`), /type/],
    [p(`${c}.addColumn("n")`), /must be a JSON object/],
    [p(`${c}.dropColumn("nope")`), /not found|does not exist/i],
    [p(`${c}.dropColumn(42)`), /column name is required/],
    [p(`${c}.createIndex("nope")`), /unknown column/],
    [p(`${c}.bulkCreate("n", [[1]])`), /columns must be a list/],
    [p(`${c}.bulkCreate(["n"], [[1, 2]])`), /row 0 must be a list of 1 values/],
    [p(`${c}.bulkCreate(new Array(1001).fill("n"), [])`), /1 to 1000 column names/],
    [p(`ClearBladeAsync.newCollection("bad name!")`), /name/],
    [p(`ClearBladeAsync.newCollection(${J(mineName)})`), /already exists/],
  ] as [string, RegExp][]) {
    const r = await run(code);
    t.equal(r.body?.success, false, `${code.slice(0, 90)}: refused`);
    t.match(String(r.body?.results?.failed?.detail), re, `${code.slice(0, 90)}: says ${re}`);
  }
});
