// What edge sync moves: reading the current state of a template's assets (snapshots) and
// applying a change, on an edge (everything down) or on a platform (rows coming up).
// Definitions are the platform's: a change replaces the edge's copy. Rows are last writer wins on
// their hybrid-logical-clock stamp; a delete leaves a tombstone so an older write cannot undo it.
import { later } from "../core/hlc.ts";
import { type ColumnType, toSql } from "../core/columns.ts";
import { collectionsRepo, type ColumnDef } from "../store/collections.ts";
import type { Executor, SqlValue } from "../store/db.ts";
import { assetNames, changesRepo, tombstonesRepo } from "../store/sync.ts";
import type { TemplateEntry } from "../domain/edges.ts";
import type { AssetType, RowChange } from "../domain/changes.ts";
import { isDefinitionType } from "../core/syncKinds.ts";
import { type CollectionBody, KINDS, SNAPSHOT_ORDER } from "./kinds/index.ts";
import type { SecretBox } from "../auth/secrets.ts";
import { BATCH_BYTES, BATCH_CHANGES, type WireChange } from "./protocol.ts";



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

/** Topic filters whose messages an edge relays to the platform (besides the relay suffixes, see relay.ts). */
export function relayFilters(template: TemplateEntry[]): string[] {
  return template.filter((e) => e.def_module === "topic" && (e.mode === "sync_to_platform" || e.mode === "sync")).map((e) => e.def_name);
}

// ---- snapshots (platform) ---------------------------------------------------------------------

/** Rows read from a collection at a time while a snapshot page fills. */
const ROW_CHUNK = 250;

/** Which assets a snapshot carries: those of the template (deploy-mode ones too unless `live`),
 *  optionally only some of them (a template change: the assets it added). */
export interface SnapshotScope { template: TemplateEntry[]; live: boolean; only?: (type: AssetType, name: string) => boolean }

/** Changes collected into a page of at most BATCH_CHANGES changes and about BATCH_BYTES bytes
 *  (a change bigger than that goes alone). */
class Page {
  items: WireChange[] = [];
  private bytes = 0;
  /** Adds a change; true when the page is full. */
  add(c: WireChange, bytes: number): boolean {
    this.items.push(c);
    this.bytes += bytes + 100;
    return this.items.length >= BATCH_CHANGES || this.bytes >= BATCH_BYTES;
  }
  take(): WireChange[] { const out = this.items; this.items = []; this.bytes = 0; return out; }
}

/** About how many bytes a value takes as JSON (without building the JSON). */
export function jsonSize(v: unknown): number {
  if (v === null || v === undefined) return 4;
  if (typeof v === "string") return v.length + 2;
  if (typeof v === "number" || typeof v === "bigint") return 16;
  if (typeof v === "boolean") return 5;
  if (Array.isArray(v)) { let n = 2; for (const x of v) n += jsonSize(x) + 1; return n; }
  if (typeof v === "object") { let n = 2; for (const [k, x] of Object.entries(v as Record<string, unknown>)) n += k.length + 4 + jsonSize(x); return n; }
  return 8;
}

/** Current state of the scope's assets, as changes, in dependency order, in pages of bounded
 *  size, so a big collection (or big rows) never sits in memory or in one frame whole. */
/** `box`: opens the values of kinds that keep them sealed (user secrets), as they go out. */
export async function* snapshot(ex: Executor, systemKey: string, scope: SnapshotScope, seq: number, hlc: string, box?: SecretBox): AsyncGenerator<WireChange[]> {
  const { template, live, only } = scope;
  const wanted = (type: AssetType, name: string) => goesDown(template, type, name, live) && (!only || only(type, name));
  const page = new Page();
  // each asset as it is now: at its current version
  const versions = new Map((await changesRepo.latest(ex, systemKey)).map((v) => [`${v.asset_type}\u0000${v.asset_name}`, v.version]));
  const mk = (type: AssetType, name: string, body: unknown): WireChange => ({ seq, type, name, op: "upsert", hlc, body, version: versions.get(`${type}\u0000${name}`) ?? 0 });
  const add = (c: WireChange) => page.add(c, jsonSize(c.body));
  for (const type of SNAPSHOT_ORDER) {
    if (type === "collection") { yield* collections(); continue; }
    const kind = KINDS[type];
    for (const r of await kind.list(ex, systemKey)) {
      const name = kind.nameOf(r);
      if (!wanted(type, name)) continue;
      const body = await kind.body(ex, systemKey, r);
      if (add(mk(type, name, kind.wire && box ? kind.wire.out(body, box) : body))) yield page.take();
    }
  }
  if (page.items.length) yield page.take();

  /** Collections: the schema of each one the scope takes, then its rows and deletes if they come too. */
  async function* collections(): AsyncGenerator<WireChange[]> {
    for (const c of await collectionsRepo.list(ex, systemKey)) {
      const rowsIn = wanted("row", c.name) && c.connection === null;
      // a collection whose rows come needs its schema first (rows that go up need it too: a
      // collection's schema goes down whichever way its rows flow)
      const schemaIn = wanted("collection", c.name) || rowsIn;
      if (!schemaIn) continue;
      const schema = await KINDS.collection.body(ex, systemKey, c) as CollectionBody;
      const columns = schema.columns;
      if (add(mk("collection", c.name, schema))) yield page.take();
      if (!rowsIn) continue;
      const names = ["item_id", ...columns.map((x) => x.name)];
      let after = 0;
      for (;;) {
        const rows = await collectionsRepo.rowsPage(ex, c.collection_id, names, after, ROW_CHUNK);
        if (!rows.length) break;
        after = rows[rows.length - 1]!._rowid as number;
        for (const r of rows) {
          const { _rowid, _hlc, ...stored } = r;
          const values = wireValues(columns, stored);
          const stamp = (_hlc as string | null) ?? hlc;
          const body: RowChange = { collection_id: c.collection_id, collection: c.name, item_id: values.item_id as string, op: "upsert", values, hlc: stamp };
          if (page.add({ seq, type: "row", name: c.name, item: body.item_id, op: "upsert", hlc: stamp, body, version: versions.get(`row\u0000${c.name}`) ?? 0 }, jsonSize(values))) yield page.take();
        }
      }
      // deletes too: an edge that holds rows from an earlier, interrupted snapshot (or a cursor the
      // log no longer covers) must lose the rows deleted since, and keep them from coming back
      let afterId = "";
      for (;;) {
        const tombs = await tombstonesRepo.page(ex, c.collection_id, afterId, ROW_CHUNK);
        if (!tombs.length) break;
        afterId = tombs[tombs.length - 1]!.item_id;
        for (const x of tombs) {
          const body: RowChange = { collection_id: c.collection_id, collection: c.name, item_id: x.item_id, op: "delete", values: null, hlc: x.hlc };
          if (page.add({ seq, type: "row", name: c.name, item: x.item_id, op: "delete", hlc: x.hlc, body, version: versions.get(`row\u0000${c.name}`) ?? 0 }, 0)) yield page.take();
        }
      }
    }
  }
}

/** The names of the assets a template covers, by kind (what an edge keeps after a snapshot). */
export async function covered(ex: Executor, systemKey: string, template: TemplateEntry[]): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const n of await assetNames(ex, systemKey)) {
    const type = n.t as AssetType;
    if (goesDown(template, type, n.name, false) || (type === "collection" && goesDown(template, "row", n.name, false))) (out[type] ??= []).push(n.name);
  }
  return out;
}

/** Row values as JSON can carry them (blobs as base64, big integers as text). */
export function wireValues(columns: ColumnDef[], values: Record<string, unknown>): Record<string, unknown> {
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
  if (!isDefinitionType(ch.type)) throw new Error(`cannot apply assets of type '${ch.type}'`);
  const kind = KINDS[ch.type];
  if (ch.op === "delete") await kind.remove(ex, sk, ch.name, ch.body);
  else await kind.apply(ex, sk, ch.name, ch.body);
}

/** What applying row changes did: the changes that took effect, and those that lost to what the
 *  node already held (a later write or delete of the same row). */
export interface RowsApplied { applied: RowChange[]; lost: RowChange[] }

/** Applies row changes of one collection, last writer wins: a change takes effect when its stamp
 *  is later than the row's stored stamp and than its tombstone (a delete leaves one, so an older
 *  write arriving late cannot bring the row back). Stamps order the same on every node (the node
 *  id breaks ties), so every node picks the same winner whatever order changes arrive in.
 *  `ties`: a change carrying the stamp the node already holds replaces it too (the platform's
 *  copy of a write is authoritative: a column it dropped and added since is empty there).
 *  A change that `replaces` the stored stamp (the platform stamped the write again) takes its place. */
export async function applyRows(ex: Executor, collectionId: string, columns: ColumnDef[], changes: RowChange[], opts: { ties?: boolean } = {}): Promise<RowsApplied> {
  // each item's changes in the batch's order: a write the platform stamped again must take its
  // new stamp before a later write of the item is judged (judged against the writer's own stamp,
  // ahead of the platform's clock, that later write would lose on the writer's node alone)
  const byItem = new Map<string, RowChange[]>();
  for (const c of changes) { const l = byItem.get(c.item_id); if (l) l.push(c); else byItem.set(c.item_id, [c]); }
  const ids = [...byItem.keys()];
  const tombs = await tombstonesRepo.forItems(ex, collectionId, ids);
  const stored = await collectionsRepo.stamps(ex, collectionId, ids);
  const names = ["item_id", ...columns.map((c) => c.name)];
  const types = new Map<string, ColumnType>(columns.map((c) => [c.name, c.type]));
  const ups: SqlValue[][] = [], stamps: string[] = [];
  const out: RowsApplied = { applied: [], lost: [] };
  for (const [item, list] of byItem) {
    const row = stored.get(item), tomb = tombs.get(item);
    // the item's latest known event: its row's write, or its delete
    let held = later(row, tomb) ? row ?? "" : tomb ?? "";
    // the change that takes effect (the latest that wins), and the latest one, lost if none wins
    let winner: RowChange | undefined, newest = list[0]!;
    for (const c of list) {
      if (c.hlc >= newest.hlc) newest = c;
      const wins = c.hlc > held || (opts.ties === true && c.hlc === held && held !== "") || (c.replaces !== undefined && c.replaces === held);
      if (!wins) continue;
      if (c.op === "delete" && c.replaces !== undefined) await tombstonesRepo.restamp(ex, collectionId, item, c.replaces, c.hlc);
      winner = c;
      held = c.hlc;
    }
    if (!winner) { out.lost.push(newest); continue; }
    const c = winner;
    if (c.op === "delete") {
      if (row !== undefined) await collectionsRepo.deleteRow(ex, collectionId, c.item_id);
      await tombstonesRepo.put(ex, collectionId, c.item_id, c.hlc);
      out.applied.push(c);
      continue;
    }
    const v = c.values ?? {};
    ups.push(names.map((n) => (n === "item_id" ? c.item_id : toSql(types.get(n)!, v[n] ?? null, n))));
    stamps.push(c.hlc);
    out.applied.push(c);
  }
  if (ups.length) await collectionsRepo.applyRows(ex, collectionId, names, ups, stamps);
  return out;
}
