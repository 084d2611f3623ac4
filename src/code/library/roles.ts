// Roles and permissions from code: ClearBlade.Roles() and ClearBlade.Permissions() (callbacks),
// ClearBladeAsync.Roles(), ClearBladeAsync.Role(id) and ClearBladeAsync.Permissions (levels).
// Through the roles domain with the rights its REST routes need (the roles permission), the
// users domain to give users roles (manage users) and the devices domain for devices (developer).
import type { ItemKind, RolePermissions, ScalarKind } from "../../auth/permissions.ts";
import { fail } from "../../core/errors.ts";
import { objectBody } from "../../core/validate.ts";
import type { HostContext, LibraryArea } from "./types.ts";
import { queryText } from "./types.ts";

// ---- ClearBlade's resource types ---------------------------------------------------------------

/** ClearBlade's resource types of permissions granted per item, and the Outpost kind. */
const ITEM_TYPES: Record<string, ItemKind> = {
  service: "services", collection: "collections", topic: "topics", portal: "portals", dashboard: "portals",
  servicecache: "servicecaches", externaldatabase: "externaldatabases", edge: "edges", adaptor: "adapters", adapter: "adapters", webhook: "webhooks",
  bucketset: "files", filestorefile: "filestorefiles",
};
/** ClearBlade's resource types of permissions on a whole kind. */
const SCALAR_TYPES: Record<string, ScalarKind> = {
  allservices: "allservices", allcollections: "allcollections", allexternaldatabases: "allexternaldatabases", users: "users",
  devices: "devices", edges: "edges", deployments: "deployments", timers: "timers", triggers: "triggers", roles: "roles",
  manageusers: "manageusers", messagehistory: "msgHistory", msghistory: "msgHistory", push: "push", usersecrets: "usersecrets",
  adaptors: "adapters", adapters: "adapters", filestores: "filestores", edgeremoteadmin: "edgeremoteadmin", webhooks: "webhooks",
  allservicecaches: "allservicecaches", filestorefiles: "filestorefiles",
};
/** How a listing names each kind (the first ClearBlade name of it); edgeremoteadmin is both, per
 *  edge with an edge's name and the whole kind without. */
const ITEM_NAME = { ...Object.fromEntries(Object.entries(ITEM_TYPES).reverse().map(([t, k]) => [k, t])), edgeremoteadmin: "edgeremoteadmin" } as Record<ItemKind, string>;
const SCALAR_NAME = Object.fromEntries(Object.entries(SCALAR_TYPES).reverse().map(([t, k]) => [k, t])) as Record<ScalarKind, string>;

/** A permission as ClearBladeAsync writes it: a resource type, an item name for item types, a level. */
interface Permission { type: string; name?: string; level: number }
/** A permission's resource as the domain keys it. */
type Target = { item: ItemKind; name: string } | { scalar: ScalarKind };

const PERMS_MAX = 1000;

function targetOf(type: unknown, name: unknown): Target {
  if (typeof type !== "string") throw fail("INVALID_ARGUMENT", "a permission's type (resource type) must be a string");
  const t = type.toLowerCase();
  const item = ITEM_TYPES[t] ?? (t === "edgeremoteadmin" && name !== undefined ? "edgeremoteadmin" : undefined);
  if (item) {
    if (typeof name !== "string" || !name || name.length > 1024) throw fail("INVALID_ARGUMENT", `a '${type}' permission needs the ${type}'s name`);
    return { item, name };
  }
  const scalar = SCALAR_TYPES[t];
  if (scalar) return { scalar };
  throw fail("INVALID_ARGUMENT", `unknown resource type '${type.slice(0, 64)}' (one of ${[...Object.keys(ITEM_TYPES), ...Object.keys(SCALAR_TYPES)].join(", ")})`);
}

const levelOf = (v: unknown): number => {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 15) throw fail("INVALID_ARGUMENT", "a permission level is a whole number from 0 to 15 (read 1, create 2, update 4, delete 8)");
  return v;
};

/** The level a role holds on a target. */
function current(perms: RolePermissions, t: Target): number {
  if ("scalar" in t) return perms.scalars[t.scalar] ?? 0;
  return (perms.items[t.item] ?? []).find((g) => g.name === t.name || g.id === t.name)?.level ?? 0;
}

/** A role update's `changes` that sets each target to its level (0 removes an item grant). */
function changesFor(levels: [Target, number][]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [t, level] of levels) {
    if ("scalar" in t) out[t.scalar] = { permissions: level };
    else {
      const list = (out[t.item] ??= []) as unknown[];
      // a collection grant is kept by id: an id names it so, a name by name
      const info = t.item === "collections" && /^[0-9a-f]{30}$/.test(t.name) ? { id: t.name } : { name: t.name };
      list.push({ itemInfo: info, permissions: level });
    }
  }
  return out;
}

/** Every grant of a role as [target, level], listed with ClearBlade's type names. */
function grants(perms: RolePermissions): { t: Target; type: string; name?: string; level: number }[] {
  const out: { t: Target; type: string; name?: string; level: number }[] = [];
  for (const [kind, list] of Object.entries(perms.items) as [ItemKind, { id?: string; name: string; level: number }[]][])
    for (const g of list ?? []) if (g.level) out.push({ t: { item: kind, name: g.id ?? g.name }, type: ITEM_NAME[kind], name: g.name, level: g.level });
  for (const [kind, level] of Object.entries(perms.scalars) as [ScalarKind, number][])
    if (level) out.push({ t: { scalar: kind }, type: SCALAR_NAME[kind], level });
  return out;
}

/** A classic permission id: the resource type, and for item types ":" and the item's name. */
const permId = (type: string, name?: string) => (name === undefined ? type : `${type}:${name}`);
function targetOfPermId(id: unknown): Target {
  if (typeof id !== "string" || !id) throw fail("INVALID_ARGUMENT", "a permission id (as getPermissionsForRole gives it) is required");
  const at = id.indexOf(":");
  return at < 0 ? targetOf(id, undefined) : targetOf(id.slice(0, at), id.slice(at + 1));
}

const roleRef = (v: unknown): string => {
  if (typeof v !== "string" || !v || v.length > 256) throw fail("INVALID_ARGUMENT", "a role id or name is required");
  return v;
};

async function oneRole(x: HostContext, ref: unknown) {
  return (await x.e.roles.permissionSets(x.p, x.systemKey, roleRef(ref)))[0]!;
}

async function setLevels(x: HostContext, roleId: string, levels: [Target, number][]) {
  if (!levels.length) return {};
  return x.e.roles.update(x.p, x.systemKey, { id: roleId, changes: changesFor(levels) });
}

function permissionList(v: unknown): Permission[] {
  const list = Array.isArray(v) ? v : [v];
  if (list.length > PERMS_MAX) throw fail("INVALID_ARGUMENT", `at most ${PERMS_MAX} permissions at once`);
  return list.map((p, i) => {
    const o = objectBody(p, `permissions[${i}]`);
    return { type: o.type as string, name: o.name as string | undefined, level: levelOf(o.level) };
  });
}

/** Whether an id names a user of the system (else it is taken as a device name). */
async function subjectKind(x: HostContext, id: unknown, kind?: unknown): Promise<"user" | "device"> {
  if (typeof id !== "string" || !id || id.length > 256) throw fail("INVALID_ARGUMENT", "a user id or device name is required");
  if (kind === "user" || kind === "device") return kind;
  return (await x.e.users.has(x.systemKey, id)) ? "user" : "device";
}

async function changeMembership(x: HostContext, id: string, kind: "user" | "device", change: { add?: string[]; delete?: string[] }) {
  if (kind === "user") return x.e.users.manage(x.p, { user: id, changes: { roles: change } }, x.systemKey);
  return x.e.devices.changeRoles(x.p, x.systemKey, id, change);
}

export const roles: LibraryArea = {
  ops: {
    "roles.create": (x, a) => {
      const info = objectBody(a.info, "role");
      return x.e.roles.create(x.p, x.systemKey, { name: info.name, description: info.description ?? "" });
    },
    "roles.read": (x, a) => x.e.roles.list(x.p, x.systemKey, { query: queryText(a.query) ?? null }),
    "roles.one": async (x, a) => {
      const ref = roleRef(a.role);
      const found = await x.e.roles.list(x.p, x.systemKey, { query: JSON.stringify({ FILTERS: [[{ EQ: [{ role_id: ref }] }]] }) });
      if (!found.length) throw fail("NOT_FOUND", `role '${ref}' does not exist`);
      return found[0];
    },
    "roles.update": (x, a) => x.e.roles.update(x.p, x.systemKey, { id: roleRef(a.role), changes: objectBody(a.changes, "changes") }),
    "roles.delete": (x, a) => x.e.roles.remove(x.p, x.systemKey, roleRef(a.role)),
    "roles.updateByQuery": async (x, a) => {
      const changes = objectBody(a.changes, "changes");
      const matching = await x.e.roles.list(x.p, x.systemKey, { query: queryText(a.query) ?? null });
      for (const r of matching) await x.e.roles.update(x.p, x.systemKey, { id: r.role_id, changes });
      return { count: matching.length };
    },
    "roles.deleteByQuery": async (x, a) => {
      const matching = await x.e.roles.list(x.p, x.systemKey, { query: queryText(a.query) ?? null });
      for (const r of matching) await x.e.roles.remove(x.p, x.systemKey, r.role_id);
      return { count: matching.length };
    },
    "roles.duplicate": async (x, a) => {
      const from = await oneRole(x, a.role);
      const info = objectBody(a.info, "the new role");
      const { role_id } = await x.e.roles.create(x.p, x.systemKey, { name: info.name, description: info.description ?? "" });
      await setLevels(x, role_id, grants(from.permissions).map((g) => [g.t, g.level]));
      return role_id;
    },
    "roles.grantedTo": async (x, a) => {
      const kind = await subjectKind(x, a.of);
      return (await x.e.roles.list(x.p, x.systemKey, { [kind]: a.of })).map((r) => r.role_id);
    },
    "roles.of": async (x, a) => {
      const kind = await subjectKind(x, a.of, a.kind);
      const list = await x.e.roles.list(x.p, x.systemKey, { [kind]: a.of });
      return list.map((r) => (kind === "user" ? { role_id: r.role_id, user_id: a.of, name: r.name } : { role_id: r.role_id, device_name: a.of, name: r.name }));
    },
    "roles.grant": async (x, a) => changeMembership(x, a.to, await subjectKind(x, a.to, a.kind), { add: [roleRef(a.role)] }),
    "roles.strip": async (x, a) => changeMembership(x, a.from, await subjectKind(x, a.from, a.kind), { delete: [roleRef(a.role)] }),
    "role.members": (x, a) => x.e.roles.members(x.p, x.systemKey, roleRef(a.role), a.kind === "device" ? "device" : "user"),
    "role.list": async (x, a) => grants((await oneRole(x, a.role)).permissions).map(({ type, name, level }) => (name === undefined ? { type, level } : { type, name, level })),
    "role.permissions": async (x, a) => {
      const role = await oneRole(x, a.role);
      const how = a.how;
      const levels = permissionList(a.perms).map((p): [Target, number] => {
        const t = targetOf(p.type, p.name);
        const now = current(role.permissions, t);
        return [t, how === "increase" ? now | p.level : how === "decrease" ? now & ~p.level : p.level];
      });
      return setLevels(x, role.role_id, levels);
    },

    // the classic Permissions(): a permission is named by "type" or "type:item name"
    "permissions.add": async (x, a) => {
      const role = await oneRole(x, a.role);
      const info = objectBody(a.info, "info");
      const t = targetOf(info.resourceType, info.resourceName);
      await setLevels(x, role.role_id, [[t, levelOf(info.requestType)]]);
      return permId(String(info.resourceType).toLowerCase(), "item" in t ? t.name : undefined);
    },
    "permissions.ofRole": async (x, a) => {
      const role = await oneRole(x, a.role);
      return grants(role.permissions).map((g) => ({ permID: permId(g.type, g.name), roleID: role.role_id, resourceType: g.type, resourceName: g.name ?? "", requestType: g.level }));
    },
    "permissions.ofResource": async (x, a) => {
      const t = targetOf(a.type, a.name);
      const out = [];
      for (const role of await x.e.roles.permissionSets(x.p, x.systemKey)) {
        const level = current(role.permissions, t);
        if (level) out.push({ permID: permId(String(a.type).toLowerCase(), "item" in t ? t.name : undefined), roleID: role.role_id, roleName: role.name, resourceType: String(a.type).toLowerCase(), resourceName: "item" in t ? t.name : "", requestType: level });
      }
      return out;
    },
    "permissions.change": async (x, a) => {
      const role = await oneRole(x, a.role);
      const t = targetOfPermId(a.permID);
      const level = levelOf(a.level), now = current(role.permissions, t);
      return setLevels(x, role.role_id, [[t, a.how === "decrease" ? now & ~level : now | level]]);
    },
    "permissions.clearRole": async (x, a) => {
      const role = await oneRole(x, a.role);
      return setLevels(x, role.role_id, grants(role.permissions).map((g) => [g.t, 0]));
    },
    "permissions.clearResource": async (x, a) => {
      const t = targetOf(a.type, a.name);
      for (const role of await x.e.roles.permissionSets(x.p, x.systemKey))
        if (current(role.permissions, t)) await setLevels(x, role.role_id, [[t, 0]]);
      return {};
    },
  },
};
