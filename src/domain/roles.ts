// Roles: named permission sets inside a system, assigned to users and devices.
import {
  BUILTIN_ROLES, ITEM_KINDS, type ItemGrant, type ItemKind, LEVEL, type RolePermissions, SCALAR_KINDS,
  type ScalarKind, emptyPermissions, isBuiltinRole, parsePermissions,
} from "../auth/permissions.ts";
import type { Principal } from "../auth/principal.ts";
import { ApiError, fail, notFound } from "../core/errors.ts";
import { newKey } from "../core/ids.ts";
import { parseQuery } from "../core/query.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import type { Executor } from "../store/db.ts";
import { collectionsRepo } from "../store/collections.ts";
import { type MemberKind, type RoleRow, rolesRepo } from "../store/roles.ts";
import type { DomainDeps } from "./deps.ts";

const UPDATE_FIELDS = new Set(["id", "role_id", "name", "description", "changes"]);
/** A member's role changes: `{add, delete}` (`remove` also spelled). */
const MEMBER_ROLE_FIELDS = new Set(["add", "delete", "remove"]);

/** What roles need of the systems module (which seeds the built-in roles, so roles does not import it). */
export interface SystemAccess { access(p: Principal, key: unknown): Promise<unknown> }

export async function seedBuiltinRoles(ex: Executor, systemKey: string) {
  for (const name of BUILTIN_ROLES) {
    const perms = emptyPermissions();
    // Administrator may do everything (the check special-cases it); show that in its listing too.
    if (name === "Administrator") for (const k of SCALAR_KINDS) perms.scalars[k] = LEVEL.ALL;
    // except changing edges, which takes a role that grants it (see Permissions.requireGranted)
    if (name === "Administrator") perms.scalars.edges = LEVEL.READ;
    await rolesRepo.insert(ex, { role_id: name, system_key: systemKey, name, description: `built-in ${name} role`, permissions: JSON.stringify(perms) });
  }
}

/** Wire names of the item kinds in a role's GET form. */
const ITEM_WIRE: Record<ItemKind, string> = {
  collections: "Collections", services: "CodeServices", topics: "Topics", portals: "Portals",
  servicecaches: "ServiceCaches", externaldatabases: "ExternalDatabases", edges: "Edges", adapters: "Adapters", webhooks: "Webhooks",
  edgeremoteadmin: "EdgeRemoteAdmin", files: "Files", filestorefiles: "FileStoreFiles",
};
/** ClearBlade's own spellings where it has the kind (cb-cli reads `adapters` and `usersecrets` in
 *  lower case, and EdgeRemoteAdmin as the per-edge list above); the rest are Outpost's. */
const SCALAR_WIRE: Record<ScalarKind, string> = {
  allcollections: "AllCollections", allservices: "AllServices", users: "UsersList", devices: "DevicesList",
  edges: "EdgesList", msgHistory: "MsgHistory", push: "Push", roles: "Roles", timers: "Timers", triggers: "Triggers",
  deployments: "Deployments", manageusers: "ManageUsers", allexternaldatabases: "AllExternalDatabases",
  usersecrets: "usersecrets", adapters: "adapters", filestores: "Filestores", edgeremoteadmin: "AllEdgeRemoteAdmin",
  webhooks: "AllWebhooks", allservicecaches: "AllServiceCaches", filestorefiles: "AllFileStoreFiles",
};

/** A role in its GET form. A collection grant is listed under the collection's current name
 *  (`collectionNames`: id -> name), whether it was made by id or by name: clients that copy a
 *  role elsewhere find the collection again by that name. */
export function roleToWire(r: RoleRow, collectionNames: ReadonlyMap<string, string> = new Map()) {
  const p = parsePermissions(r.permissions);
  const Permissions: Record<string, unknown> = {};
  for (const k of ITEM_KINDS) {
    const grants = p.items[k] ?? [];
    Permissions[ITEM_WIRE[k]] = grants.map((g) =>
      k === "collections" ? { ID: g.id ?? "", Name: (g.id && collectionNames.get(g.id)) || g.name, Level: g.level, Columns: [], Items: [] }
        : k === "services" || k === "portals" ? { Name: g.name, SystemKey: r.system_key, Level: g.level }
          : { Name: g.name, Level: g.level });
  }
  for (const k of SCALAR_KINDS) Permissions[SCALAR_WIRE[k]] = { Level: p.scalars[k] ?? 0 };
  return { ID: r.role_id, Name: r.name, Description: r.description, Permissions, role_id: r.role_id, name: r.name, description: r.description };
}

/** Roles in their GET form, with the system's collection names at hand. */
export async function rolesToWire(ex: Executor, systemKey: string, rows: RoleRow[]) {
  const names = rows.some((r) => r.permissions.includes('"collections"'))
    ? new Map((await collectionsRepo.list(ex, systemKey)).map((c) => [c.collection_id, c.name]))
    : undefined;
  return rows.map((r) => roleToWire(r, names));
}

/** Permission kinds ClearBlade's clients send that name resources Outpost does not have yet
 *  (system services): checked for shape, then left out. */
const NO_RESOURCE_KINDS = new Set(["system_services"]);

const level = (v: unknown, where: string): number => {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > LEVEL.ALL)
    throw new ApiError("INVALID_ARGUMENT", `${where}: permissions must be an integer level between 0 and 15 (read 1, create 2, update 4, delete 8)`);
  return v;
};

/** An item grant of a change list: its id or name, and its level. */
function itemChange(entry: unknown, where: string) {
  const e = objectBody(entry, where);
  const info = objectBody(e.itemInfo, `${where}.itemInfo`);
  const id = typeof info.id === "string" && info.id ? info.id : undefined;
  const name = typeof info.name === "string" && info.name ? info.name : undefined;
  if (!id && !name) throw new ApiError("INVALID_ARGUMENT", `${where}.itemInfo needs an id or a name`);
  return { id, name, lvl: level(e.permissions ?? e.level, where) };
}

/** The level of a whole-kind change: `{permissions}` (or a bare number). */
function scalarChange(v: unknown, where: string): number {
  if (typeof v === "number") return level(v, where);
  const e = objectBody(v, where);
  return level(e.permissions ?? e.level, where);
}

/** Applies a `changes` object (the body of a role update) to a permission set. List kinds take
 *  `[{itemInfo:{id|name}, permissions}]` (level 0 removes the grant); whole kinds take `{permissions}`. */
export function applyPermissionChanges(base: RolePermissions, changes: Record<string, unknown>): RolePermissions {
  const out: RolePermissions = { items: structuredClone(base.items), scalars: { ...base.scalars } };
  for (const [kind, v] of Object.entries(changes)) {
    if (NO_RESOURCE_KINDS.has(kind)) {
      if (Array.isArray(v)) v.forEach((entry, i) => itemChange(entry, `changes.${kind}[${i}]`));
      else if (v !== null) scalarChange(v, `changes.${kind}`);
      continue;
    }
    if (Array.isArray(v)) {
      if (!(ITEM_KINDS as readonly string[]).includes(kind)) throw new ApiError("INVALID_ARGUMENT", `changes.${kind}: unknown permission list (one of ${ITEM_KINDS.join(", ")})`);
      const list: ItemGrant[] = out.items[kind as ItemKind] ?? [];
      for (const [i, entry] of v.entries()) {
        const { id, name, lvl } = itemChange(entry, `changes.${kind}[${i}]`);
        const at = list.findIndex((g) => (id && g.id === id) || (!id && g.name === name) || (id && !g.id && g.name === name));
        if (lvl === 0) { if (at >= 0) list.splice(at, 1); }
        else if (at >= 0) list[at] = { ...list[at]!, level: lvl, ...(name ? { name } : {}), ...(id ? { id } : {}) };
        else list.push({ ...(id ? { id } : {}), name: name ?? id!, level: lvl });
      }
      out.items[kind as ItemKind] = list;
    } else {
      if (!(SCALAR_KINDS as readonly string[]).includes(kind)) throw new ApiError("INVALID_ARGUMENT", `changes.${kind}: unknown permission kind`);
      out.scalars[kind as ScalarKind] = scalarChange(v, `changes.${kind}`);
    }
  }
  return out;
}

export class Roles {
  constructor(private readonly d: DomainDeps, private readonly systems: SystemAccess) {}

  /** Role id for a reference that may be an id or a name (clients send either). */
  async resolve(ex: Executor, systemKey: string, ref: unknown): Promise<string> {
    if (typeof ref !== "string" || !ref) throw fail("INVALID_ARGUMENT", "role must be a role id or name");
    const r = (await rolesRepo.byId(ex, systemKey, ref)) ?? (await rolesRepo.byName(ex, systemKey, ref));
    if (!r) throw notFound("role", ref, "User");
    return r.role_id;
  }

  private async guard(p: Principal, systemKey: string, lvl: number) {
    await this.systems.access(p, systemKey);
    await this.d.perms.require(p, { kind: "roles" }, lvl, "roles");
  }

  async list(p: Principal, systemKey: string, params: { query?: string | null; user?: string | null; device?: string | null }) {
    await this.guard(p, systemKey, LEVEL.READ);
    if (params.user || params.device) {
      const kind: MemberKind = params.user ? "user" : "device";
      const ids = await rolesRepo.rolesOf(this.d.db, systemKey, kind, (params.user ?? params.device)!);
      const rows = await Promise.all(ids.map((id) => rolesRepo.byId(this.d.db, systemKey, id)));
      return rolesToWire(this.d.db, systemKey, rows.filter((r): r is RoleRow => !!r));
    }
    const q = parseQuery(params.query ?? undefined, { defaultPageSize: 0 });
    const rows = await rolesRepo.list(this.d.db, systemKey, q);
    return rolesToWire(this.d.db, systemKey, rows);
  }

  async count(p: Principal, systemKey: string, query?: string | null) {
    await this.guard(p, systemKey, LEVEL.READ);
    const q = parseQuery(query ?? undefined);
    return { count: await rolesRepo.count(this.d.db, systemKey, q.filters) };
  }

  async create(p: Principal, systemKey: string, body: unknown) {
    await this.guard(p, systemKey, LEVEL.CREATE);
    const b = objectBody(body);
    const name = b.name;
    if (typeof name !== "string" || !name.trim() || name.length > 200) throw fail("INVALID_ARGUMENT", "name: a role name is required");
    const description = b.description === undefined ? "" : b.description;
    if (typeof description !== "string") throw fail("INVALID_ARGUMENT", "description must be a string");
    const { name: _n, description: _d, permissions: nested, ...rest } = b;
    const changes = nested && typeof nested === "object" && !Array.isArray(nested) ? { ...(nested as object), ...rest } : rest;
    const perms = applyPermissionChanges(emptyPermissions(), changes as Record<string, unknown>);
    const role_id = newKey();
    await this.d.db.tx(async (tx) => {
      if (await rolesRepo.byName(tx, systemKey, name)) throw fail("ALREADY_EXISTS", `role '${name}' already exists`);
      const row = { role_id, system_key: systemKey, name, description, permissions: JSON.stringify(perms) };
      await rolesRepo.insert(tx, row);
      await this.d.changes.record(tx, systemKey, "role", name, "upsert", row);
    });
    this.d.perms.invalidate(systemKey);
    return { role_id };
  }

  async update(p: Principal, systemKey: string, body: unknown) {
    await this.guard(p, systemKey, LEVEL.UPDATE);
    const b = objectBody(body);
    knownFields(b, UPDATE_FIELDS);
    const ref = b.id ?? b.role_id ?? b.name;
    await this.d.db.tx(async (tx) => {
      const id = await this.resolve(tx, systemKey, ref);
      const row = (await rolesRepo.byId(tx, systemKey, id))!;
      const changes = b.changes === undefined ? {} : objectBody(b.changes, "changes");
      let name = row.name;
      const newName = (changes as Record<string, unknown>).name ?? (b.id !== undefined && typeof b.name === "string" && b.name !== row.name ? b.name : undefined);
      if (newName !== undefined) {
        if (typeof newName !== "string" || !newName.trim()) throw fail("INVALID_ARGUMENT", "name must be a non-empty string");
        if (isBuiltinRole(row.role_id) && newName !== row.name) throw fail("INVALID_ARGUMENT", `built-in role '${row.name}' cannot be renamed`);
        if (newName !== row.name && (await rolesRepo.byName(tx, systemKey, newName))) throw fail("ALREADY_EXISTS", `role '${newName}' already exists`);
        name = newName;
      }
      const { name: _n, description: cd, ...permChanges } = changes as Record<string, unknown>;
      const description = cd ?? b.description ?? row.description;
      if (typeof description !== "string") throw fail("INVALID_ARGUMENT", "description must be a string");
      const perms = applyPermissionChanges(parsePermissions(row.permissions), permChanges);
      await rolesRepo.update(tx, systemKey, id, name, description, JSON.stringify(perms));
      await this.d.changes.record(tx, systemKey, "role", name, "upsert", { role_id: id, system_key: systemKey, name, description, permissions: JSON.stringify(perms) });
    });
    this.d.perms.invalidate(systemKey);
    return {};
  }

  async remove(p: Principal, systemKey: string, ref: unknown) {
    await this.guard(p, systemKey, LEVEL.DELETE);
    let members: { subject_kind: MemberKind; subject_id: string }[] = [];
    await this.d.db.tx(async (tx) => {
      const id = await this.resolve(tx, systemKey, ref);
      if (isBuiltinRole(id)) throw fail("INVALID_ARGUMENT", `built-in role '${id}' cannot be deleted`);
      members = await rolesRepo.members(tx, systemKey, id);
      const row = (await rolesRepo.byId(tx, systemKey, id))!;
      await rolesRepo.delete(tx, systemKey, id);
      await this.d.changes.record(tx, systemKey, "role", row.name, "delete", { role_id: id });
    });
    this.d.perms.invalidate(systemKey);
    for (const m of members) this.d.tokens.forgetSubject(m.subject_kind, m.subject_id, systemKey);
    return {};
  }

  /** Roles with their permission sets, or the one role `ref` names (an id or a name): what a
   *  change computed from the current levels starts from (code's Permissions and Role APIs). */
  async permissionSets(p: Principal, systemKey: string, ref?: unknown): Promise<{ role_id: string; name: string; permissions: RolePermissions }[]> {
    await this.guard(p, systemKey, LEVEL.READ);
    const rows = ref === undefined ? await rolesRepo.all(this.d.db, systemKey) : [(await rolesRepo.byId(this.d.db, systemKey, await this.resolve(this.d.db, systemKey, ref)))!];
    return rows.map((r) => ({ role_id: r.role_id, name: r.name, permissions: parsePermissions(r.permissions) }));
  }

  /** The users (ids) or devices (names) holding a role. */
  async members(p: Principal, systemKey: string, ref: unknown, kind: MemberKind): Promise<string[]> {
    await this.guard(p, systemKey, LEVEL.READ);
    const id = await this.resolve(this.d.db, systemKey, ref);
    return (await rolesRepo.members(this.d.db, systemKey, id)).filter((m) => m.subject_kind === kind).map((m) => m.subject_id).sort();
  }

  removeSubject(ex: Executor, systemKey: string, kind: MemberKind, id: string) {
    return rolesRepo.removeSubject(ex, systemKey, kind, id);
  }

  rolesOf(ex: Executor, systemKey: string, kind: MemberKind, id: string) {
    return rolesRepo.rolesOf(ex, systemKey, kind, id);
  }

  /** Adds and removes role memberships (`{add:[...], delete:[...]}`, ids or names). Returns what changed. */
  async changeMembership(tx: Executor, systemKey: string, kind: MemberKind, subjectId: string, change: unknown) {
    const c = objectBody(change, "roles");
    const added: string[] = [], removed: string[] = [];
    const list = (v: unknown, what: string): unknown[] => {
      if (v === undefined || v === null) return [];
      if (!Array.isArray(v)) throw fail("INVALID_ARGUMENT", `roles.${what} must be an array of role ids or names`);
      return v;
    };
    knownFields(c, MEMBER_ROLE_FIELDS, "roles");
    for (const ref of list(c.add, "add")) {
      const id = await this.resolve(tx, systemKey, ref);
      if ((await rolesRepo.addMember(tx, systemKey, kind, subjectId, id)).changes) added.push(id);
    }
    for (const ref of [...list(c.delete, "delete"), ...list(c.remove, "remove")]) {
      const id = await this.resolve(tx, systemKey, ref);
      if ((await rolesRepo.removeMember(tx, systemKey, kind, subjectId, id)).changes) removed.push(id);
    }
    return { added, removed };
  }
}
