// Roles and permissions from code: ClearBlade.Roles() and ClearBlade.Permissions() (callbacks),
// ClearBladeAsync.Roles(), ClearBladeAsync.Role(id) and ClearBladeAsync.Permissions (levels).
// Through the roles domain with the rights its REST routes need (the roles permission), the
// users domain to give users roles (manage users) and the devices domain for devices (developer).
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  // a role id (or name) argument, and a callback that maps the answer
  function mapped(cb, f) { return function (err, data) { if (typeof cb === "function") cb(err, err ? data : f(data)); }; }
  function withPageSize(q, size) { var p = plainQuery(q); if (p.PAGESIZE === undefined) { p.PAGESIZE = size; p.PAGENUM = 1; } return p; }

  ClearBlade.Roles = function () {
    return {
      create: function (meta, cb) { return classic("roles.create", { info: meta }, mapped(cb, function (r) { return { role_id: r.role_id, name: meta.name, description: meta.description || "" }; })); },
      update: function (roleID, changes, cb) { return classic("roles.update", { role: roleID, changes: changes }, cb); },
      delete: function (roleID, cb) { return classic("roles.delete", { role: roleID }, cb); },
      // ClearBlade pages a role query by 100 unless it says otherwise
      get: function (query, cb) { if (typeof query === "function") { cb = query; query = null; } return classic("roles.read", { query: withPageSize(query, 100) }, cb); },
      getById: function (roleID, cb) { return classic("roles.one", { role: roleID, by: "role_id" }, cb); },
      getByName: function (name, cb) { return classic("roles.read", { query: { FILTERS: [[{ EQ: [{ name: name }] }]] } }, cb); },
      addRoleToUser: function (userID, role, cb) { return classic("roles.grant", { to: userID, role: role, kind: "user" }, cb); },
      removeRoleFromUser: function (userID, role, cb) { return classic("roles.strip", { from: userID, role: role, kind: "user" }, cb); },
      getRolesForUser: function (userID, cb) { return classic("roles.of", { of: userID, kind: "user" }, cb); },
      addRoleToDevice: function (name, role, cb) { return classic("roles.grant", { to: name, role: role, kind: "device" }, cb); },
      removeRoleFromDevice: function (name, role, cb) { return classic("roles.strip", { from: name, role: role, kind: "device" }, cb); },
      getRolesForDevice: function (name, cb) { return classic("roles.of", { of: name, kind: "device" }, cb); },
      duplicateRole: function (info, oldRoleID, cb) { return classic("roles.duplicate", { role: oldRoleID, info: info }, cb); },
    };
  };

  ClearBlade.Permissions = function () {
    return {
      addPermissionToRole: function (roleID, info, cb) { return classic("permissions.add", { role: roleID, info: info }, cb); },
      getPermissionsForRole: function (roleID, cb) { return classic("permissions.ofRole", { role: roleID }, cb); },
      getPermissionsForResource: function (type, name, cb) { return classic("permissions.ofResource", { type: type, name: name }, cb); },
      increasePermissionsForRole: function (roleID, permID, level, cb) { return classic("permissions.change", { role: roleID, permID: permID, level: level, how: "increase" }, cb); },
      decreasePermissionsForRole: function (roleID, permID, level, cb) { return classic("permissions.change", { role: roleID, permID: permID, level: level, how: "decrease" }, cb); },
      removePermissionsForRole: function (roleID, cb) { return classic("permissions.clearRole", { role: roleID }, cb); },
      removePermissionsForResource: function (type, name, cb) { return classic("permissions.clearResource", { type: type, name: name }, cb); },
    };
  };

  ClearBladeAsync.Roles = function () {
    return {
      create: function (info) { return call("roles.create", { info: info }).then(function (r) { return r.role_id; }); },
      read: function (q) { return call("roles.read", { query: plainQuery(q) }); },
      update: function (q, changes) { return call("roles.updateByQuery", { query: plainQuery(q), changes: changes }).then(function () {}); },
      delete: function (q) { return call("roles.deleteByQuery", { query: plainQuery(q) }).then(function () {}); },
      grantedTo: function (id) { return call("roles.grantedTo", { of: id }); },
    };
  };
  ClearBladeAsync.Role = function (roleID) {
    function perms(how) { return function (p) { return call("role.permissions", { role: roleID, perms: p, how: how }).then(function () {}); }; }
    return {
      duplicate: function (info) { return call("roles.duplicate", { role: roleID, info: info }); },
      permissions: function () { return call("role.list", { role: roleID }); },
      setPermissions: perms("set"),
      increasePermissions: perms("increase"),
      decreasePermissions: perms("decrease"),
      removeAllPermissions: function () { return call("permissions.clearRole", { role: roleID }).then(function () {}); },
      applyTo: function (id) { return call("roles.grant", { to: id, role: roleID }).then(function () {}); },
      stripFrom: function (id) { return call("roles.strip", { from: id, role: roleID }).then(function () {}); },
      users: function () { return call("role.members", { role: roleID, kind: "user" }); },
      devices: function () { return call("role.members", { role: roleID, kind: "device" }); },
    };
  };
  ClearBladeAsync.Permissions = { READ: 1, CREATE: 2, UPDATE: 4, DELETE: 8 };
`;

export const roles: PreludeArea = { js: js, lazy: ["ClearBlade.Permissions", "ClearBlade.Roles", "ClearBladeAsync.Permissions", "ClearBladeAsync.Role", "ClearBladeAsync.Roles"] };
