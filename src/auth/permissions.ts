// Role permissions and the one check every route, the broker and the code engine use.
//
// A role grants a level bitmask (read 1, create 2, update 4, delete 8) on named items
// (collections by id, services, topics, ...) and on whole resource kinds (users list, devices
// list, all collections, ...). A caller's rights are the union of its roles; the built-in
// Administrator role and a system's developers may do everything in the system.
import { ApiError } from "../core/errors.ts";
import { Signals } from "../core/signals.ts";
import { rolesRepo } from "../store/roles.ts";
import type { Db } from "../store/db.ts";
import type { DeveloperPrincipal, Principal } from "./principal.ts";
import { TtlCache } from "../core/cache.ts";

export const LEVEL = { READ: 1, CREATE: 2, UPDATE: 4, DELETE: 8, ALL: 15 } as const;

/** Developers hold everything in their systems; a read-only developer key only reading. */
const developerLevel = (p: DeveloperPrincipal): number => (p.key?.readOnly ? LEVEL.READ : LEVEL.ALL);

/** Kinds granted per item (edgeremoteadmin: per edge, by the edge's name; files: per bucket set;
 *  filestorefiles: per file store, or one file of it, as "<store>/<path>"). */
export const ITEM_KINDS = ["collections", "services", "topics", "portals", "servicecaches", "externaldatabases", "edges", "adapters", "webhooks", "edgeremoteadmin", "files", "filestorefiles"] as const;
export type ItemKind = (typeof ITEM_KINDS)[number];

/** Kinds granted as a whole. */
export const SCALAR_KINDS = [
  "allcollections", "allservices", "users", "devices", "edges", "msgHistory", "push", "roles", "timers",
  "triggers", "deployments", "manageusers", "allexternaldatabases", "usersecrets", "adapters", "filestores",
  "edgeremoteadmin", "webhooks", "allservicecaches", "filestorefiles",
] as const;
export type ScalarKind = (typeof SCALAR_KINDS)[number];

export interface ItemGrant { id?: string; name: string; level: number }
export interface RolePermissions {
  items: Partial<Record<ItemKind, ItemGrant[]>>;
  scalars: Partial<Record<ScalarKind, number>>;
}

export const emptyPermissions = (): RolePermissions => ({ items: {}, scalars: {} });

export const BUILTIN_ROLES = ["Administrator", "Authenticated", "Anonymous"] as const;
export const isBuiltinRole = (id: string) => (BUILTIN_ROLES as readonly string[]).includes(id);

export type Resource =
  | { kind: "collection"; id: string; name?: string }
  | { kind: "service"; name: string }
  | { kind: "topic"; name: string }
  | { kind: "item"; itemKind: ItemKind; name: string }
  | { kind: ScalarKind };

/** MQTT topic filter match (+ one level, # the rest). */
export function topicMatches(filter: string, topic: string): boolean {
  if (filter === topic || filter === "#") return true;
  const f = filter.split("/");
  const t = topic.split("/");
  for (let i = 0; i < f.length; i++) {
    const seg = f[i]!;
    if (seg === "#") return true;
    if (i >= t.length) return false;
    if (seg !== "+" && seg !== t[i]) return false;
  }
  return f.length === t.length;
}

/** Union of levels granted by a set of role permissions on a resource. */
export function grantedLevel(perms: RolePermissions[], res: Resource): number {
  let level = 0;
  for (const p of perms) {
    switch (res.kind) {
      case "collection":
        level |= p.scalars.allcollections ?? 0;
        for (const g of p.items.collections ?? []) if (g.id === res.id || (!g.id && g.name === res.name)) level |= g.level;
        break;
      case "service":
        level |= p.scalars.allservices ?? 0;
        for (const g of p.items.services ?? []) if (g.name === res.name) level |= g.level;
        break;
      case "topic":
        for (const g of p.items.topics ?? []) if (topicMatches(g.name, res.name)) level |= g.level;
        break;
      case "item":
        if (res.itemKind === "externaldatabases") level |= p.scalars.allexternaldatabases ?? 0;
        else if (res.itemKind === "servicecaches") level |= p.scalars.allservicecaches ?? 0;
        else if (res.itemKind === "edgeremoteadmin") level |= p.scalars.edgeremoteadmin ?? 0;
        else if (res.itemKind === "filestorefiles") level |= p.scalars.filestorefiles ?? 0;
        for (const g of p.items[res.itemKind] ?? []) if (g.name === res.name) level |= g.level;
        break;
      default:
        level |= p.scalars[res.kind] ?? 0;
    }
  }
  return level;
}

/** How long a node may use a system's role permissions from memory. Role changes on this node
 *  take effect at once; other nodes of a multi-node platform see them within this time. */
export const ROLE_CACHE_MS = 5_000;

/** Levels a principal was found to hold on collections and services, from one map of its
 *  system's role permissions: a client polling one collection or service is not matched against
 *  its roles' grants again (matching was a tenth of a cached point read's CPU). Kept with the map
 *  and the roles they were decided from, and used only while both are the ones in effect: the map
 *  is replaced whenever a role changes or its time in the cache ends. */
interface Decided {
  all: Map<string, RolePermissions>;
  roles: readonly string[];
  /** by collection id with the name it had (a role may grant a collection by name alone), and by
   *  service name */
  collections: Map<string, { name: string | undefined; level: number }>;
  services: Map<string, { name: string | undefined; level: number }>;
}
/** Resources remembered per principal (past this, its memory starts over). */
const DECIDED_MAX = 256;

/** Role permissions per system, cached. */
export class Permissions {
  private readonly cache = new TtlCache<string, Map<string, RolePermissions>>(ROLE_CACHE_MS, 2_000);
  private readonly decided = new WeakMap<Principal, Decided>();
  /** `signals`: where a system's roles are said changed (on a cluster, on every node) */
  constructor(private readonly db: Db, private readonly signals = new Signals()) {
    signals.on("permissions.changed", ({ systemKey }) => { this.cache.delete(systemKey); });
  }

  invalidate(systemKey: string) { this.signals.emit("permissions.changed", { systemKey }); }

  private async roles(systemKey: string): Promise<Map<string, RolePermissions>> {
    let m = this.cache.get(systemKey);
    if (!m) {
      m = new Map();
      for (const r of await rolesRepo.all(this.db, systemKey)) m.set(r.role_id, parsePermissions(r.permissions));
      this.cache.set(systemKey, m);
    }
    return m;
  }

  /** The level, when it can be known without waiting (the system's roles are cached). */
  levelNow(p: Principal, res: Resource): number | undefined {
    if (p.kind === "developer") return developerLevel(p);
    if (p.kind === "edge") return LEVEL.ALL;
    if (p.roles.includes("Administrator")) return LEVEL.ALL;
    const all = this.cache.get(p.systemKey);
    if (!all) return undefined;
    if (res.kind !== "collection" && res.kind !== "service") return grantedLevel(this.permsOf(p.roles, all), res);
    let d = this.decided.get(p);
    if (!d || d.all !== all || d.roles !== p.roles) this.decided.set(p, (d = { all, roles: p.roles, collections: new Map(), services: new Map() }));
    const collection = res.kind === "collection";
    const memo = collection ? d.collections : d.services, key = collection ? res.id : res.name, name = collection ? res.name : undefined;
    const known = memo.get(key);
    if (known !== undefined && known.name === name) return known.level;
    const level = grantedLevel(this.permsOf(p.roles, all), res);
    if (memo.size >= DECIDED_MAX) memo.clear();
    memo.set(key, { name, level });
    return level;
  }

  private permsOf(roles: readonly string[], all: Map<string, RolePermissions>): RolePermissions[] {
    const perms: RolePermissions[] = [];
    for (const id of roles) { const r = all.get(id); if (r) perms.push(r); }
    return perms;
  }

  /** Throws like require() when the answer is known now; false when it needs the database. */
  checkedNow(p: Principal, res: Resource, level: number, what?: string): boolean {
    const l = this.levelNow(p, res);
    if (l === undefined) return false;
    if ((l & level) !== level) throw new ApiError("PERMISSION_DENIED", `not allowed to ${verb(level)} ${what ?? describe(res)}`);
    return true;
  }

  /** The level a principal holds on a resource in its own system. Developers hold everything. */
  async level(p: Principal, res: Resource): Promise<number> {
    if (p.kind === "developer") return developerLevel(p);
    if (p.kind === "edge") return LEVEL.ALL; // an edge acts for its system's platform
    if (p.roles.includes("Administrator")) return LEVEL.ALL;
    return grantedLevel(this.permsOf(p.roles, await this.roles(p.systemKey)), res);
  }

  /** Like require(), but the level must be granted by a role of the system's own making: the
   *  built-in Administrator role's "everything" does not reach what hands out the system's secrets
   *  (an edge record's token receives the system secret and its users). Developers hold it. */
  async requireGranted(p: Principal, res: Resource, level: number, what?: string): Promise<void> {
    let granted = 0;
    if (p.kind === "developer") granted = developerLevel(p);
    else if (p.kind !== "edge") {
      const all = await this.roles(p.systemKey);
      const perms: RolePermissions[] = [];
      for (const id of p.roles) { const r = id === "Administrator" ? undefined : all.get(id); if (r) perms.push(r); }
      granted = grantedLevel(perms, res);
    }
    if ((granted & level) !== level) throw new ApiError("PERMISSION_DENIED", `not allowed to ${verb(level)} ${what ?? describe(res)} (a developer, or a role that grants it by name)`);
  }

  async can(p: Principal, res: Resource, level: number): Promise<boolean> {
    return ((await this.level(p, res)) & level) === level;
  }

  /** Throws PERMISSION_DENIED (401) unless the principal holds `level` on the resource. */
  async require(p: Principal, res: Resource, level: number, what?: string): Promise<void> {
    if (!(await this.can(p, res, level))) throw new ApiError("PERMISSION_DENIED", `not allowed to ${verb(level)} ${what ?? describe(res)}`);
  }
}

const verb = (level: number) =>
  level & LEVEL.DELETE ? "delete" : level & LEVEL.UPDATE ? "update" : level & LEVEL.CREATE ? "create" : "read";
const describe = (r: Resource) =>
  r.kind === "collection" ? `collection '${r.name ?? r.id}'` : r.kind === "service" ? `service '${r.name}'`
    : r.kind === "topic" ? `topic '${r.name}'` : r.kind === "item" ? `${r.itemKind} '${r.name}'` : r.kind;

export function parsePermissions(json: string): RolePermissions {
  try {
    const p = JSON.parse(json) as Partial<RolePermissions>;
    return { items: p.items ?? {}, scalars: p.scalars ?? {} };
  } catch {
    return emptyPermissions();
  }
}
