// What edge sync moves: reading the current state of a template's assets (snapshots) and
// applying a change, on an edge (everything down) or on a platform (rows coming up).
// Definitions are the platform's: a change replaces the edge's copy. Rows are last writer wins on
// their hybrid-logical-clock stamp; a delete leaves a tombstone so an older write cannot undo it.
import { topicMatches } from "../auth/permissions.ts";
import { type ColumnType, toSql } from "../core/columns.ts";
import { collectionsRepo, type ColumnDef, type IndexRow } from "../store/collections.ts";
import type { Executor, SqlValue } from "../store/db.ts";
import { devicesRepo, type DeviceRow } from "../store/devices.ts";
import { rolesRepo, type RoleRow } from "../store/roles.ts";
import { librariesRepo, servicesRepo, type LibraryRow, type ServiceRow } from "../store/services.ts";
import { tombstonesRepo } from "../store/sync.ts";
import { timersRepo, triggersRepo, type TimerRow, type TriggerRow } from "../store/triggers.ts";
import { usersRepo, type UserRow } from "../store/users.ts";
import { adapterFilesRepo, adaptersRepo, blobsRepo } from "../store/adapters.ts";
import { adapterBody, type AdapterBody, decodeBase64 } from "../domain/adapters.ts";
import type { TemplateEntry } from "../domain/edges.ts";
import { userForEdge } from "../domain/users.ts";
import type { AssetType, RowChange } from "./changes.ts";

/** A change as it travels: from the log, or made up from current state for a snapshot. */
export interface WireChange { seq: number; type: AssetType; name: string; item?: string | null; op: "upsert" | "delete"; hlc: string; body: any }

export interface CollectionBody { collection_id: string; name: string; connection: string | null; columns: ColumnDef[]; indexes: IndexRow[] }

/** The template entries that bring an asset down to the edge (and how), or none. */
export function entryFor(template: TemplateEntry[], type: AssetType, name: string): TemplateEntry | undefined {
  const module = type === "row" ? "collection" : type;
  let star: TemplateEntry | undefined;
  for (const e of template) {
    if (e.def_module !== module) continue;
    if (e.def_name === name) return e;
    if (e.def_name === "*") star = e;
  }
  return star;
}

/** Whether a change goes down to an edge with this template (live; deploy-mode assets only at start). */
export function goesDown(template: TemplateEntry[], type: AssetType, name: string, live: boolean): boolean {
  const e = entryFor(template, type, name);
  if (!e) return false;
  if (type === "row") return e.rows !== false && (e.mode === "sync_to_edge" || e.mode === "sync" || (!live && e.mode === "deploy"));
  // a collection's schema is the platform's whichever way its rows flow (the edge writes rows to it)
  if (e.mode === "sync_to_platform") return type === "collection";
  return e.mode !== "deploy" || !live;
}

/** Collections whose rows an edge sends up. */
export function upCollections(template: TemplateEntry[], names: string[]): string[] {
  return names.filter((n) => { const e = entryFor(template, "row", n); return !!e && e.rows !== false && (e.mode === "sync_to_platform" || e.mode === "sync"); });
}

/** Topic filters whose messages an edge relays to the platform. */
export function relayFilters(template: TemplateEntry[]): string[] {
  return template.filter((e) => e.def_module === "topic" && (e.mode === "sync_to_platform" || e.mode === "sync")).map((e) => e.def_name);
}

/** Whether a message on `topic` goes up from an edge: a relayed topic, or one ending in /_platform. */
export const relayed = (filters: string[], topic: string) => topic.endsWith("/_platform") || filters.some((f) => topicMatches(f, topic));

// ---- snapshots (platform) ---------------------------------------------------------------------

const ROW_PAGE = 2_000;

/** Current state of every asset of the template, as changes, in dependency order; rows come in
 *  pages through `onRows` so a big collection never sits in memory whole. */
export async function* snapshot(ex: Executor, systemKey: string, template: TemplateEntry[], seq: number, hlc: string, live: boolean): AsyncGenerator<WireChange[]> {
  const mk = (type: AssetType, name: string, body: unknown): WireChange => ({ seq, type, name, op: "upsert", hlc, body });
  const pick = <T>(type: AssetType, rows: T[], name: (r: T) => string) => rows.filter((r) => goesDown(template, type, name(r), live));
  const roles = pick("role", await rolesRepo.all(ex, systemKey), (r) => r.name);
  if (roles.length) yield roles.map((r) => mk("role", r.name, r));
  const libs = pick("library", await librariesRepo.list(ex, systemKey), (r) => r.name);
  if (libs.length) yield libs.map((r) => mk("library", r.name, r));
  const svcs = pick("service", await servicesRepo.list(ex, systemKey), (r) => r.name);
  if (svcs.length) yield svcs.map((r) => mk("service", r.name, r));
  const cols = await collectionsRepo.list(ex, systemKey);
  for (const c of cols) {
    const schemaIn = goesDown(template, "collection", c.name, live);
    const rowsIn = goesDown(template, "row", c.name, live) || upCollections(template, [c.name]).length > 0;
    if (!schemaIn && !rowsIn) continue;
    const columns = await collectionsRepo.columns(ex, c.collection_id);
    yield [mk("collection", c.name, { collection_id: c.collection_id, name: c.name, connection: c.connection, columns, indexes: await collectionsRepo.indexes(ex, c.collection_id) } satisfies CollectionBody)];
    if (!goesDown(template, "row", c.name, live) || c.connection !== null) continue;
    const names = ["item_id", ...columns.map((x) => x.name)];
    let after = 0;
    for (;;) {
      const page = await collectionsRepo.rowsPage(ex, c.collection_id, names, after, ROW_PAGE);
      if (!page.length) break;
      after = page[page.length - 1]!._rowid as number;
      yield page.map((r) => {
        const { _rowid, _hlc, ...values } = r;
        return { seq, type: "row", name: c.name, item: values.item_id as string, op: "upsert", hlc: (_hlc as string) ?? hlc,
          body: { collection_id: c.collection_id, collection: c.name, item_id: values.item_id as string, op: "upsert", values: wireValues(columns, values), hlc: (_hlc as string) ?? hlc } satisfies RowChange };
      });
    }
    // deletes too: an edge that holds rows from an earlier, interrupted snapshot (or a cursor the
    // log no longer covers) must lose the rows deleted since, and keep them from coming back
    let afterId = "";
    for (;;) {
      const tombs = await tombstonesRepo.page(ex, c.collection_id, afterId, ROW_PAGE);
      if (!tombs.length) break;
      afterId = tombs[tombs.length - 1]!.item_id;
      yield tombs.map((x) => ({ seq, type: "row" as const, name: c.name, item: x.item_id, op: "delete" as const, hlc: x.hlc,
        body: { collection_id: c.collection_id, collection: c.name, item_id: x.item_id, op: "delete", values: null, hlc: x.hlc } satisfies RowChange }));
    }
  }
  const trig = pick("trigger", await triggersRepo.list(ex, systemKey), (r) => r.name);
  if (trig.length) yield trig.map((r) => mk("trigger", r.name, r));
  const timers = pick("timer", await timersRepo.list(ex, systemKey), (r) => r.name);
  if (timers.length) yield timers.map((r) => mk("timer", r.name, r));
  const users = pick("user", await usersRepo.all(ex, systemKey), (r) => r.email);
  for (let i = 0; i < users.length; i += 500) {
    const page: WireChange[] = [];
    for (const u of users.slice(i, i + 500)) page.push(mk("user", u.email, { user: userForEdge(u), roles: await rolesRepo.rolesOf(ex, systemKey, "user", u.user_id) }));
    yield page;
  }
  const adapters = pick("adapter", await adaptersRepo.list(ex, systemKey), (r) => r.name);
  for (const a of adapters) yield [mk("adapter", a.name, await adapterBody(ex, a))];
  const devices = pick("device", await devicesRepo.all(ex, systemKey), (r) => r.name);
  for (let i = 0; i < devices.length; i += 500) {
    const page: WireChange[] = [];
    for (const d of devices.slice(i, i + 500)) page.push(mk("device", d.name, { device: d, roles: await rolesRepo.rolesOf(ex, systemKey, "device", d.name) }));
    yield page;
  }
}

/** Row values as JSON can carry them (blobs as base64, big integers as text). */
function wireValues(columns: ColumnDef[], values: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { item_id: values.item_id };
  for (const c of columns) {
    const v = values[c.name];
    out[c.name] = v instanceof Uint8Array ? Buffer.from(v).toString("base64") : typeof v === "bigint" ? v.toString() : c.type === "bool" ? (v === null || v === undefined ? null : v === 1) : c.type === "jsonb" && typeof v === "string" ? safeJson(v) : v;
  }
  return out;
}
const safeJson = (v: string) => { try { return JSON.parse(v); } catch { return v; } };

// ---- applying ---------------------------------------------------------------------------------

/** Applies one definition change (not rows). */
export async function applyDefinition(ex: Executor, sk: string, ch: WireChange): Promise<void> {
  const b = ch.body;
  const del = ch.op === "delete";
  switch (ch.type) {
    case "service":
      if (del) await servicesRepo.delete(ex, sk, ch.name); else await servicesRepo.put(ex, { ...(b as ServiceRow), system_key: sk });
      return;
    case "library":
      if (del) await librariesRepo.delete(ex, sk, ch.name); else await librariesRepo.put(ex, { ...(b as LibraryRow), system_key: sk });
      return;
    case "trigger":
      if (del) await triggersRepo.delete(ex, sk, ch.name); else {
        const t = b as TriggerRow; // a platform from before run identities sends neither field
        await triggersRepo.upsert(ex, { ...t, user_id: t.user_id ?? "", user_type: t.user_type ?? 1, system_key: sk });
      }
      return;
    case "timer":
      if (del) await timersRepo.delete(ex, sk, ch.name);
      else {
        // the edge runs the timer itself: keep its own progress when the definition did not change
        const cur = await timersRepo.get(ex, sk, ch.name);
        const t = { ...(b as TimerRow), system_key: sk };
        const same = cur && cur.frequency === t.frequency && cur.repeats === t.repeats && cur.start_time === t.start_time;
        await timersRepo.upsert(ex, same ? { ...t, runs: cur.runs, next_run: cur.next_run } : t);
      }
      return;
    case "role":
      if (del) await rolesRepo.delete(ex, sk, (b as { role_id: string }).role_id);
      else await rolesRepo.put(ex, { ...(b as RoleRow), system_key: sk });
      return;
    case "user": {
      if (del) { await rolesRepo.removeSubject(ex, sk, "user", (b as { user_id: string }).user_id); await usersRepo.delete(ex, sk, (b as { user_id: string }).user_id); return; }
      const { user, roles } = b as { user: UserRow; roles: string[] };
      await usersRepo.put(ex, { ...user, system_key: sk });
      await rolesRepo.setMembers(ex, sk, "user", user.user_id, roles);
      return;
    }
    case "device": {
      if (del) { await rolesRepo.removeSubject(ex, sk, "device", ch.name); await devicesRepo.delete(ex, sk, ch.name); return; }
      const { device, roles } = b as { device: DeviceRow; roles: string[] };
      await devicesRepo.put(ex, { ...device, system_key: sk });
      await rolesRepo.setMembers(ex, sk, "device", device.name, roles);
      return;
    }
    case "collection": await applyCollection(ex, sk, ch); return;
    case "adapter": {
      if (del) { await adaptersRepo.delete(ex, sk, ch.name); await blobsRepo.collect(ex); return; }
      const { adapter, files } = b as AdapterBody;
      await adaptersRepo.put(ex, { ...adapter, system_key: sk });
      for (const f of files) {
        const content = decodeBase64(f.content);
        if (!content) throw new Error(`adapter file '${f.name}' is not valid base64`);
        await blobsRepo.put(ex, f.hash, content);
      }
      // an edge keeps the current version of each file
      await adapterFilesRepo.replaceAll(ex, sk, adapter.name, files.map(({ content: _c, ...f }) => ({ ...f, system_key: sk })));
      await blobsRepo.collect(ex);
      return;
    }
    default: throw new Error(`cannot apply assets of type '${ch.type}'`);
  }
}

/** Makes the local collection match: created with the same id, columns added, dropped and
 *  indexes kept in step; renamed when its name changed. */
async function applyCollection(ex: Executor, sk: string, ch: WireChange) {
  const b = ch.body as CollectionBody & { collection_id: string };
  const cur = await collectionsRepo.byId(ex, b.collection_id);
  if (ch.op === "delete") {
    if (cur) await collectionsRepo.drop(ex, cur.collection_id, cur.connection === null);
    await tombstonesRepo.forget(ex, b.collection_id);
    return;
  }
  if (!cur) {
    const byName = await collectionsRepo.byName(ex, sk, b.name);
    if (byName) throw new Error(`a local collection named '${b.name}' exists with another id`);
    await collectionsRepo.create(ex, { collection_id: b.collection_id, system_key: sk, name: b.name, connection: b.connection, created_at: new Date().toISOString() }, b.columns);
  } else {
    if (cur.name !== b.name) await collectionsRepo.rename(ex, cur.collection_id, b.name);
    if (b.connection !== null) { await collectionsRepo.setConnection(ex, cur.collection_id, b.connection); return; }
    const have = await collectionsRepo.columns(ex, cur.collection_id);
    for (const c of have) if (!b.columns.some((x) => x.name === c.name)) await collectionsRepo.dropColumn(ex, cur.collection_id, c.name);
    for (const c of b.columns) {
      const h = have.find((x) => x.name === c.name);
      if (!h) await collectionsRepo.addColumn(ex, cur.collection_id, c);
      else if (h.type !== c.type) { await collectionsRepo.dropColumn(ex, cur.collection_id, c.name); await collectionsRepo.addColumn(ex, cur.collection_id, c); }
    }
  }
  if (b.connection !== null) return;
  const idx = await collectionsRepo.indexes(ex, b.collection_id);
  for (const i of idx) if (!b.indexes.some((x) => x.column_name === i.column_name && x.is_unique === i.is_unique)) await collectionsRepo.dropIndex(ex, b.collection_id, i.column_name, i.is_unique === 1);
  for (const i of b.indexes) if (!idx.some((x) => x.column_name === i.column_name && x.is_unique === i.is_unique)) await collectionsRepo.createIndex(ex, b.collection_id, i.column_name, i.is_unique === 1);
}

/** Applies row changes of one collection, last writer wins. Returns those that took effect. */
export async function applyRows(ex: Executor, collectionId: string, columns: ColumnDef[], changes: RowChange[]): Promise<RowChange[]> {
  const tombs = await tombstonesRepo.forItems(ex, collectionId, changes.map((c) => c.item_id));
  const names = ["item_id", ...columns.map((c) => c.name)];
  const types = new Map<string, ColumnType>(columns.map((c) => [c.name, c.type]));
  const ups: SqlValue[][] = [], stamps: string[] = [];
  const applied: RowChange[] = [];
  // the last change of an item in the batch is the one that counts
  const last = new Map<string, RowChange>();
  for (const c of changes) { const prev = last.get(c.item_id); if (!prev || c.hlc >= prev.hlc) last.set(c.item_id, c); }
  for (const c of last.values()) {
    const tomb = tombs.get(c.item_id);
    if (tomb !== undefined && tomb >= c.hlc) continue; // deleted later than this write
    if (c.op === "delete") {
      await collectionsRepo.deleteOlder(ex, collectionId, c.item_id, c.hlc);
      await tombstonesRepo.put(ex, collectionId, c.item_id, c.hlc);
      applied.push(c);
      continue;
    }
    const v = c.values ?? {};
    ups.push(names.map((n) => (n === "item_id" ? c.item_id : toSql(types.get(n)!, v[n] ?? null, n))));
    stamps.push(c.hlc);
    applied.push(c);
  }
  if (ups.length) await collectionsRepo.applyRows(ex, collectionId, names, ups, stamps);
  return applied;
}
