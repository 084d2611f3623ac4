// Per-asset sync status of an edge (what the status endpoints and the console show), its lag,
// the links' figures for /metrics, and retrying what failed.
import type { AssetType } from "../../domain/changes.ts";
import type { TemplateEntry } from "../../domain/edges.ts";
import type { EdgeRow } from "../../store/edges.ts";
import { edgesRepo } from "../../store/edges.ts";
import { nowIso } from "../../core/ids.ts";
import { assetNames, changesRepo, statusRepo } from "../../store/sync.ts";
import { entryFor, goesDown, upCollections } from "../assets.ts";
import { PROTOCOL_VERSION, type WireChange } from "../protocol.ts";
import { templateKey } from "./templateKey.ts";
import type { HubState } from "./state.ts";
import type { LogBounds } from "./known.ts";
import type { AssetStatus } from "./types.ts";

/** The log's head for a system, and whether an edge's cursor is a position the log still
 *  serves: one this platform handed out (not past the head), of the edge record's incarnation,
 *  not older than what compaction dropped. */
export async function position(h: HubState, sk: string, cursor: number, synced: boolean, edgeIncarnation: string, incarnation: string) {
  let bounds = await h.reads.logBounds(sk);
  // a cursor past the bounds kept: the log moved since they were read (its signal not here yet)
  if (cursor > Math.max(bounds.maxSeq, bounds.horizon)) { h.reads.logMoved(sk); bounds = await h.reads.logBounds(sk); }
  return resumable(bounds, cursor, synced, edgeIncarnation, incarnation);
}

function resumable({ maxSeq, horizon }: LogBounds, cursor: number, synced: boolean, edgeIncarnation: string, incarnation: string) {
  const head = Math.max(maxSeq, horizon);
  const valid = (edgeIncarnation === "" || edgeIncarnation === incarnation) && (cursor > 0 || synced) && cursor >= horizon && cursor <= head;
  return { head, horizon, valid };
}

/** Each edge connected to this node: changes it has not acknowledged and its outbox size (as
 *  its last ping said), for /metrics. */
export async function linkMetrics(h: HubState): Promise<{ systemKey: string; edge: string; lag: number; outbox: number }[]> {
  const out = [];
  // one count per system and position (a fleet's edges are at a few)
  const after = new Map<string, number>();
  for (const s of h.sessions.values()) {
    if (s.closed || !s.edge) continue;
    const k = `${s.edge.system_key}/${s.cursor}`;
    let n = after.get(k);
    if (n === undefined) after.set(k, n = await changesRepo.countAfter(h.d.db, s.edge.system_key, s.cursor));
    const lag = n + (s.running?.job.kind === "full" ? 1 : 0);
    out.push({ systemKey: s.edge.system_key, edge: s.edge.name, lag, outbox: s.outbox });
  }
  return out;
}

/** The edges connected to this node, with the outbox size each last reported (no database
 *  work: read on every scrape of /metrics). */
export function connectedEdges(h: HubState): { systemKey: string; edge: string; outbox: number }[] {
  const out = [];
  for (const s of h.sessions.values()) if (!s.closed && s.edge) out.push({ systemKey: s.edge.system_key, edge: s.edge.name, outbox: s.outbox });
  return out;
}

/** Assets that failed to apply, on every edge, by type (for /metrics). */
export async function failedAssets(h: HubState): Promise<Record<string, number>> {
  const by: Record<string, number> = {};
  for (const r of await statusRepo.failedByType(h.d.db)) by[r.asset_type] = Number(r.n);
  return by;
}

/** What an edge is owed, from its record and each asset's latest change (never the log
 *  itself): whether it needs a full snapshot, the template it holds, the assets changed since. */
async function owed(h: HubState, sk: string, edge: EdgeRow) {
  const template = await h.d.edges.templateOf(h.d.db, sk, edge);
  const held = edge.applied_template === null ? null : edge.applied_template === "*" ? template : JSON.parse(edge.applied_template) as TemplateEntry[];
  const { valid } = await position(h, sk, edge.cursor, held !== null, "", "");
  const changed = new Map<string, number>(), versions = new Map<string, number>();
  for (const r of await changesRepo.latest(h.d.db, sk)) {
    const k = `${r.asset_type === "row" ? "collection_rows" : r.asset_type}\u0000${r.asset_name}`;
    versions.set(k, r.version);
    if (r.seq > edge.cursor && goesDown(template, r.asset_type as AssetType, r.asset_name, false)) changed.set(k, r.seq);
  }
  return { template, held: held ?? [], full: !valid || held === null, changed, versions };
}

/** Edges whose lag is worked out between two turns of the event loop. */
const LAG_SLICE = 1_000;

/** How many changes the edge has not acknowledged (more while it needs a snapshot). */
export async function lag(h: HubState, sk: string, edgeName: string): Promise<number | null> {
  const e = await edgesRepo.get(h.d.db, sk, edgeName);
  return e ? (await lags(h, sk, [e])).get(e.name)! : null;
}

/** The lag of each of a system's edges (records read already: a list of the fleet), from reads
 *  they share: the log's bounds once, the count after each position once (a fleet's edges are at
 *  a few), the templates kept for hellos. A fleet of 10,000 took several reads per edge. */
export async function lags(h: HubState, sk: string, rows: EdgeRow[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  if (!rows.length) return out;
  const bounds = await h.reads.freshBounds(sk);
  const after = new Map<number, number>(), stamps = new Map<string, string>(), heldKeys = new Map<string, string>();
  for (let i = 0; i < rows.length; i++) {
    // the event loop given back now and then (a fleet of 10,000)
    if (i && i % LAG_SLICE === 0) await new Promise((r) => setImmediate(r));
    const e = rows[i]!;
    let n = after.get(e.cursor);
    if (n === undefined) after.set(e.cursor, n = await changesRepo.countAfter(h.d.db, sk, e.cursor));
    const template = await h.reads.template(e, stamps);
    const applied = e.applied_template;
    let held = applied === null ? null : applied === "*" ? templateKey(template) : heldKeys.get(applied);
    if (held === undefined) heldKeys.set(applied!, held = templateKey(JSON.parse(applied!) as TemplateEntry[]));
    const full = held === null || !resumable(bounds, e.cursor, true, "", "").valid;
    out.set(e.name, n + (full || held !== templateKey(template) ? 1 : 0));
  }
  return out;
}

/** Every asset of an edge's template with its sync state: pending while the edge has not applied
 *  its latest change (or a snapshot that brings it is not complete), failed while the edge
 *  reports it failed, synced otherwise. */
export async function status(h: HubState, sk: string, edgeName: string): Promise<AssetStatus[]> {
  const edge = await h.d.edges.find(h.d.db, sk, edgeName);
  const o = await owed(h, sk, edge);
  const recorded = new Map((await statusRepo.forEdge(h.d.db, sk, edgeName)).map((r) => [`${r.asset_type}\u0000${r.asset_name}`, r]));
  // the edge's outbox as it last said (hello, up batches, pings): writes still to come up
  const waitingUp = (h.sessions.get(`${sk}/${edgeName}`)?.outbox ?? 0) > 0;
  const out: AssetStatus[] = [];
  const seen = new Set<string>();
  const add = (type: string, name: string) => {
    const k = `${type}\u0000${name}`;
    if (seen.has(k)) return;
    seen.add(k);
    const wire = (type === "collection_rows" ? "row" : type) as AssetType;
    // rows that never come down (they only flow up) owe the edge nothing beyond the collection
    const followsSchema = type === "collection_rows" && !goesDown(o.template, "row", name, false);
    const own = followsSchema ? `collection\u0000${name}` : k;
    const r = recorded.get(own);
    const tail = o.changed.get(own);
    const inTemplate = followsSchema ? goesDown(o.template, "collection", name, false) : goesDown(o.template, wire, name, false);
    const held = followsSchema ? goesDown(o.held, "collection", name, false) : goesDown(o.held, wire, name, false);
    // versions count the asset's changes (see changesRepo.noteLatest)
    const desired = Math.max(o.versions.get(own) ?? 0, r?.desired_version ?? 0, r?.applied_version ?? 0);
    const behind = inTemplate && (o.full || !held || tail !== undefined);
    // the rows of a collection that failed to apply cannot be on the edge either
    const schema = type === "collection_rows" ? recorded.get(`collection\u0000${name}`) : undefined;
    const ownFailed = !followsSchema && r?.status === "failed", schemaFailed = schema?.status === "failed";
    const failed = ownFailed || schemaFailed;
    // rows written on the edge that have not come up yet: the platform is the one behind
    const upWaiting = type === "collection_rows" && waitingUp && upCollections(o.template, [name]).length > 0;
    const status: AssetStatus["status"] = failed ? "failed" : behind || upWaiting || (!inTemplate && r?.status === "pending") ? "pending" : "synced";
    const entry = entryFor(o.template, wire, name);
    out.push({ asset_type: type, asset_name: name, status, desired_version: desired, applied_version: status === "synced" ? desired : r?.applied_version ?? 0,
      // the collection's failure is the cause (rows' own failure then says only it is missing)
      last_error: schemaFailed ? `its collection failed to apply: ${schema!.last_error}` : ownFailed ? r!.last_error : "",
      attempts: (schemaFailed ? schema : r)?.attempts ?? 0, updated_at: (schemaFailed ? schema : r)?.updated_at ?? "",
      source: entry?.source ?? "", entry: entry ? `${entry.def_module}/${entry.def_name}` : "" });
  };
  for (const a of await templateAssets(h, sk, o.template)) add(a.type, a.name);
  // assets no longer present but still recorded (deleted on the platform) keep showing their state
  for (const r of recorded.values()) if (!seen.has(`${r.asset_type}\u0000${r.asset_name}`)) add(r.asset_type, r.asset_name);
  // an edge whose clock runs further ahead than the platform accepts has its row stamps replaced
  const refused = h.refused.get(`${sk}/${edgeName}`);
  if (refused) out.push({ asset_type: "protocol", asset_name: "version", status: "failed", desired_version: PROTOCOL_VERSION, applied_version: 0, attempts: 0, updated_at: refused.at, last_error: refused.reason, source: "", entry: "" });
  const skew = h.skews.get(`${sk}/${edgeName}`);
  if (skew !== undefined && skew > h.d.maxClockSkewMs)
    out.push({ asset_type: "clock", asset_name: "skew", status: "failed", desired_version: 0, applied_version: 0, attempts: 0, updated_at: nowIso(), source: "", entry: "",
      last_error: `the edge's clock is ${Math.round(skew / 1000)} s ahead of the platform's, more than --max-clock-skew (${Math.round(h.d.maxClockSkewMs / 1000)} s): the platform stamps the edge's row writes itself` });
  return out.sort((a, b) => a.asset_type.localeCompare(b.asset_type) || a.asset_name.localeCompare(b.asset_name));
}

/** The assets a template covers, by type and name (rows: a collection's rows as one asset). */
async function templateAssets(h: HubState, sk: string, template: TemplateEntry[]) {
  const out: { type: string; name: string }[] = [];
  for (const n of await assetNames(h.d.db, sk)) {
    const type = n.t as WireChange["type"];
    const e = entryFor(template, type, n.name);
    if (!e) continue;
    if (type === "collection") {
      if (goesDown(template, "collection", n.name, false)) out.push({ type, name: n.name });
      if (e.rows !== false) out.push({ type: "collection_rows", name: n.name });
    } else if (e.mode !== "sync_to_platform") out.push({ type, name: n.name });
  }
  return out;
}

/** Sends the failed assets of an edge again (current state), or all of them with none named. */
export async function retry(h: HubState, sk: string, edgeName: string, only?: { type: string; name: string }[]) {
  const s = h.sessions.get(`${sk}/${edgeName}`);
  if (!s && h.elsewhere) { const r = await h.elsewhere.retry(sk, edgeName, only); if (r) return r; }
  const failed = only ?? (await statusRepo.failedFor(h.d.db, sk, edgeName)).map((r) => ({ type: r.asset_type, name: r.asset_name }));
  if (!s) return { edge: edgeName, connected: false, queued: failed.length };
  const template: TemplateEntry[] = [];
  for (const f of failed) {
    const module = (f.type === "collection_rows" ? "collection" : f.type) as TemplateEntry["def_module"];
    const base = entryFor(s.template, f.type === "collection_rows" ? "row" : (f.type as WireChange["type"]), f.name);
    if (base) template.push({ ...base, def_module: module, def_name: f.name });
  }
  if (!template.length) return { edge: edgeName, connected: true, queued: 0 };
  s.jobs.push({ kind: "retry", scope: { template, live: false } });
  await s.pump();
  return { edge: edgeName, connected: true, queued: template.length };
}
