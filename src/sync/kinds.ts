// Every kind of definition edge sync moves, in one table: what a snapshot reads of a system's
// assets of the kind, how a change is applied and removed, which of them an edge holds, and which
// caches a change of the kind makes stale. A new kind is an entry here (test/unit/sync/kinds.test.ts
// round-trips every entry); collection rows travel as their own type, "row" (sync/assets.ts).
import { collectionsRepo, type ColumnDef, type IndexRow } from "../store/collections.ts";
import type { Executor } from "../store/db.ts";
import { adapterFilesRepo, adaptersRepo, blobsRepo } from "../store/adapters.ts";
import { devicesRepo, type DeviceRow } from "../store/devices.ts";
import { rolesRepo, type RoleRow } from "../store/roles.ts";
import { librariesRepo, servicesRepo, type LibraryRow, type ServiceRow } from "../store/services.ts";
import { tombstonesRepo } from "../store/sync.ts";
import { timersRepo, triggersRepo, type TimerRow, type TriggerRow } from "../store/triggers.ts";
import { usersRepo, type UserRow } from "../store/users.ts";
import { type PortalKind, type PortalRow, portalsRepo } from "../store/portals.ts";
import { adapterBody, type AdapterBody, decodeBase64, fileContentProblem } from "../domain/adapters.ts";
import { userForEdge } from "../domain/users.ts";
import { DEFINITION_TYPES, type DefinitionType } from "../domain/changes.ts";

/** What a change of a kind makes stale on the node that applies it. */
export type StaleCache = "code" | "triggers" | "tokens";

export interface CollectionBody { collection_id: string; name: string; connection: string | null; columns: ColumnDef[]; indexes: IndexRow[] }

export interface DefinitionKind<R = any> {
  /** the system's assets of the kind, as stored */
  list(ex: Executor, sk: string): Promise<R[]>;
  /** an asset's name in templates, the change log and sync status */
  nameOf(r: R): string;
  /** the body a change carries (read only for the assets a snapshot takes) */
  body(ex: Executor, sk: string, r: R): Promise<unknown> | unknown;
  /** makes the local asset what the body says */
  apply(ex: Executor, sk: string, name: string, body: any): Promise<unknown>;
  /** removes the local asset a delete names (its body carries what identifies it) */
  remove(ex: Executor, sk: string, name: string, body: any): Promise<unknown>;
  /** the body of a delete of the local asset called `name`; undefined when there is nothing to
   *  delete (a kind keyed by an id whose asset is gone, a built-in role). Deleting an asset that is
   *  not there does nothing. */
  deleteBody(ex: Executor, sk: string, name: string): Promise<unknown>;
  stale: readonly StaleCache[];
}

const byName = async (name: string) => ({ name });
const BUILT_IN_ROLES = ["Administrator", "Authenticated", "Anonymous"];

/** Code kept as one row per name, its body the row (services, libraries). */
function codeRows<R extends { name: string; system_key: string }>(repo: {
  list(ex: Executor, sk: string): Promise<R[]>; put(ex: Executor, r: R): Promise<unknown>; delete(ex: Executor, sk: string, name: string): Promise<unknown>;
}): DefinitionKind<R> {
  return {
    list: (ex, sk) => repo.list(ex, sk), nameOf: (r) => r.name, body: (_ex, _sk, r) => r,
    apply: (ex, sk, _n, b: R) => repo.put(ex, { ...b, system_key: sk }),
    remove: (ex, sk, name) => repo.delete(ex, sk, name),
    deleteBody: (_ex, _sk, name) => byName(name), stale: ["code"],
  };
}
const service = codeRows<ServiceRow>(servicesRepo);
const library = codeRows<LibraryRow>(librariesRepo);

const trigger: DefinitionKind<TriggerRow> = {
  list: (ex, sk) => triggersRepo.list(ex, sk), nameOf: (r) => r.name, body: (_ex, _sk, r) => r,
  // a platform from before run identities sends neither field
  apply: (ex, sk, _n, t: TriggerRow) => triggersRepo.upsert(ex, { ...t, user_id: t.user_id ?? "", user_type: t.user_type ?? 1, system_key: sk }),
  remove: async (ex, sk, name) => { await triggersRepo.delete(ex, sk, name); },
  deleteBody: (_ex, _sk, name) => byName(name), stale: ["triggers"],
};

const timer: DefinitionKind<TimerRow> = {
  list: (ex, sk) => timersRepo.list(ex, sk), nameOf: (r) => r.name, body: (_ex, _sk, r) => r,
  apply: async (ex, sk, name, b: TimerRow) => {
    // the edge runs the timer itself: keep its own progress when the definition did not change
    const cur = await timersRepo.get(ex, sk, name);
    const t = { ...b, system_key: sk };
    const same = cur && cur.frequency === t.frequency && cur.repeats === t.repeats && cur.start_time === t.start_time;
    await timersRepo.upsert(ex, same ? { ...t, runs: cur.runs, next_run: cur.next_run } : t);
  },
  remove: async (ex, sk, name) => { await timersRepo.delete(ex, sk, name); },
  // the scheduler reads due timers from the database
  deleteBody: (_ex, _sk, name) => byName(name), stale: [],
};

const role: DefinitionKind<RoleRow> = {
  list: (ex, sk) => rolesRepo.all(ex, sk), nameOf: (r) => r.name, body: (_ex, _sk, r) => r,
  apply: (ex, sk, _n, b: RoleRow) => rolesRepo.put(ex, { ...b, system_key: sk }),
  remove: async (ex, sk, _n, b: { role_id: string }) => { await rolesRepo.delete(ex, sk, b.role_id); },
  deleteBody: async (ex, sk, name) => {
    // the built-in roles are every node's own
    if (BUILT_IN_ROLES.includes(name)) return undefined;
    const r = await rolesRepo.byName(ex, sk, name);
    return r ? { role_id: r.role_id } : undefined;
  },
  stale: ["tokens"],
};

const user: DefinitionKind<UserRow> = {
  list: (ex, sk) => usersRepo.all(ex, sk), nameOf: (u) => u.email,
  body: async (ex, sk, u) => ({ user: userForEdge(u), roles: await rolesRepo.rolesOf(ex, sk, "user", u.user_id) }),
  apply: async (ex, sk, _n, b: { user: UserRow; roles: string[] }) => {
    await usersRepo.put(ex, { ...b.user, system_key: sk });
    await rolesRepo.setMembers(ex, sk, "user", b.user.user_id, b.roles);
  },
  remove: async (ex, sk, _n, b: { user_id: string }) => {
    await rolesRepo.removeSubject(ex, sk, "user", b.user_id);
    await usersRepo.delete(ex, sk, b.user_id);
  },
  deleteBody: async (ex, sk, name) => { const u = await usersRepo.byEmail(ex, sk, name); return u ? { user_id: u.user_id } : undefined; },
  stale: ["tokens"],
};

const device: DefinitionKind<DeviceRow> = {
  list: (ex, sk) => devicesRepo.all(ex, sk), nameOf: (d) => d.name,
  body: async (ex, sk, d) => ({ device: d, roles: await rolesRepo.rolesOf(ex, sk, "device", d.name) }),
  apply: async (ex, sk, _n, b: { device: DeviceRow; roles: string[] }) => {
    await devicesRepo.put(ex, { ...b.device, system_key: sk });
    await rolesRepo.setMembers(ex, sk, "device", b.device.name, b.roles);
  },
  remove: async (ex, sk, name) => {
    await rolesRepo.removeSubject(ex, sk, "device", name);
    await devicesRepo.delete(ex, sk, name);
  },
  deleteBody: (_ex, _sk, name) => byName(name), stale: ["tokens"],
};

const adapter: DefinitionKind<Awaited<ReturnType<typeof adaptersRepo.list>>[number]> = {
  list: (ex, sk) => adaptersRepo.list(ex, sk), nameOf: (a) => a.name, body: (ex, _sk, a) => adapterBody(ex, a),
  apply: async (ex, sk, _n, { adapter: a, files }: AdapterBody) => {
    await adaptersRepo.put(ex, { ...a, system_key: sk });
    for (const f of files) {
      // a content that is not what its hash says would stay under that hash for every file that has it
      const problem = fileContentProblem(a.name, f);
      if (problem) throw new Error(problem);
      await blobsRepo.put(ex, f.hash, decodeBase64(f.content)!);
    }
    // an edge keeps the current version of each file
    await adapterFilesRepo.replaceAll(ex, sk, a.name, files.map(({ content: _c, ...f }) => ({ ...f, system_key: sk })));
    await blobsRepo.collect(ex);
  },
  remove: async (ex, sk, name) => { await adaptersRepo.delete(ex, sk, name); await blobsRepo.collect(ex); },
  deleteBody: (_ex, _sk, name) => byName(name), stale: [],
};

const collection: DefinitionKind<Awaited<ReturnType<typeof collectionsRepo.list>>[number]> = {
  list: (ex, sk) => collectionsRepo.list(ex, sk), nameOf: (c) => c.name,
  body: async (ex, _sk, c): Promise<CollectionBody> => ({
    collection_id: c.collection_id, name: c.name, connection: c.connection,
    columns: await collectionsRepo.columns(ex, c.collection_id), indexes: await collectionsRepo.indexes(ex, c.collection_id),
  }),
  apply: (ex, sk, _n, b) => applyCollection(ex, sk, b),
  remove: async (ex, _sk, _n, b: { collection_id: string }) => {
    const cur = await collectionsRepo.byId(ex, b.collection_id);
    if (cur) await collectionsRepo.drop(ex, cur.collection_id, cur.connection === null);
    await tombstonesRepo.forget(ex, b.collection_id);
  },
  deleteBody: async (ex, sk, name) => { const c = await collectionsRepo.byName(ex, sk, name); return c ? { collection_id: c.collection_id } : undefined; },
  // a collection's schema and query results are dropped by its id (the edge names the ids it changed)
  stale: [],
};

/** Portal and plugin records: the row is the body. */
function portalRecords(kind: PortalKind): DefinitionKind<PortalRow> {
  const repo = portalsRepo(kind);
  return {
    list: (ex, sk) => repo.list(ex, sk), nameOf: (r) => r.name, body: (_ex, _sk, r) => r,
    apply: (ex, sk, _n, b: PortalRow) => repo.put(ex, { ...b, system_key: sk }),
    remove: (ex, sk, name) => repo.delete(ex, sk, name),
    deleteBody: (_ex, _sk, name) => byName(name), stale: [],
  };
}

export const KINDS: Record<DefinitionType, DefinitionKind> = { service, library, trigger, timer, collection, role, user, device, adapter, portal: portalRecords("portal"), plugin: portalRecords("plugin") };

/** The order a snapshot brings the kinds in: what others need first (roles before the users and
 *  devices that hold them, libraries before services, collections before their triggers). */
export const SNAPSHOT_ORDER: readonly DefinitionType[] = ["role", "library", "service", "collection", "trigger", "timer", "user", "adapter", "device", "plugin", "portal"];

/** The caches changes of these kinds make stale. */
export function staleCaches(types: Iterable<string>): Set<StaleCache> {
  const out = new Set<StaleCache>();
  for (const t of types) for (const c of KINDS[t as DefinitionType]?.stale ?? []) out.add(c);
  return out;
}

export const isDefinitionType = (t: string): t is DefinitionType => (DEFINITION_TYPES as readonly string[]).includes(t);

/** Makes the local collection match: created with the same id, columns added, dropped, renamed
 *  (the platform says which) and retyped in place (values kept: SQLite stores what a row holds
 *  whatever the declared type, and reads convert by the column's type), indexes kept in step;
 *  renamed when its name changed. */
async function applyCollection(ex: Executor, sk: string, b: CollectionBody & { renamed?: { from: string; to: string } }) {
  const cur = await collectionsRepo.byId(ex, b.collection_id);
  if (!cur) {
    const byName = await collectionsRepo.byName(ex, sk, b.name);
    if (byName) throw new Error(`a local collection named '${b.name}' exists with another id`);
    await collectionsRepo.create(ex, { collection_id: b.collection_id, system_key: sk, name: b.name, connection: b.connection, created_at: new Date().toISOString() }, b.columns);
  } else {
    if (cur.name !== b.name) await collectionsRepo.rename(ex, cur.collection_id, b.name);
    if (b.connection !== null) { await collectionsRepo.setConnection(ex, cur.collection_id, b.connection); return; }
    let have = await collectionsRepo.columns(ex, cur.collection_id);
    const r = b.renamed;
    if (r && have.some((x) => x.name === r.from) && !have.some((x) => x.name === r.to) && b.columns.some((x) => x.name === r.to)) {
      await collectionsRepo.renameColumn(ex, cur.collection_id, r.from, r.to);
      have = await collectionsRepo.columns(ex, cur.collection_id);
    }
    for (const c of have) if (!b.columns.some((x) => x.name === c.name)) await collectionsRepo.dropColumn(ex, cur.collection_id, c.name);
    for (const c of b.columns) {
      const h = have.find((x) => x.name === c.name);
      if (!h) await collectionsRepo.addColumn(ex, cur.collection_id, c);
      else if (h.type !== c.type) await collectionsRepo.setColumnType(ex, cur.collection_id, c.name, c.type);
    }
  }
  if (b.connection !== null) return;
  const idx = await collectionsRepo.indexes(ex, b.collection_id);
  for (const i of idx) if (!b.indexes.some((x) => x.column_name === i.column_name && x.is_unique === i.is_unique)) await collectionsRepo.dropIndex(ex, b.collection_id, i.column_name, i.is_unique === 1);
  for (const i of b.indexes) if (!idx.some((x) => x.column_name === i.column_name && x.is_unique === i.is_unique)) await collectionsRepo.createIndex(ex, b.collection_id, i.column_name, i.is_unique === 1);
}
