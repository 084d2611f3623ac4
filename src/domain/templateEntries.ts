// Template entries: what an edge gets of its system's assets, and how (deploy, sync_to_edge,
// sync_to_platform, sync). An edge's entries come from its own template (src/domain/edges.ts) and
// from the deployments naming it (src/domain/deployments.ts); one engine brings their union down.
import { type DefinitionType, TEMPLATE_MODULES } from "../core/syncKinds.ts";
import type { Executor } from "../store/db.ts";
import { deploymentsRepo } from "../store/deployments.ts";

/** What a template entry can name: a kind of definition, or MQTT topics to relay. */
export const SYNC_MODULES = TEMPLATE_MODULES;
export type SyncModule = (typeof SYNC_MODULES)[number];
export const SYNC_MODES = ["deploy", "sync_to_edge", "sync_to_platform", "sync"] as const;
export type SyncMode = (typeof SYNC_MODES)[number];

export interface TemplateEntry {
  def_module: SyncModule; def_name: string; mode: SyncMode; rows?: boolean;
  /** where the entry comes from: "edge" (the edge's own entries), "template:<name>" (its named
   *  template) or "deployment:<name>", comma-separated when several bring it; set by templateOf,
   *  not taken from clients */
  source?: string;
}

/** A deployment's asset entry (ClearBlade's shape). */
export interface DeploymentAsset { asset_class: string; asset_id: string; sync_to_edge: boolean; sync_to_platform: boolean }

/** ClearBlade's asset class strings for the kinds of definitions Outpost syncs (a collection's
 *  class is its own name). Both spellings of adapters; `rolesperms` is what ClearBlade's CLI writes. */
export const ASSET_CLASSES: Readonly<Record<string, DefinitionType>> = {
  services: "service", libraries: "library", triggers: "trigger", timers: "timer", roles: "role", rolesperms: "role",
  users: "user", devices: "device", adaptors: "adapter", adapters: "adapter", portals: "portal", plugins: "plugin",
  servicecaches: "servicecache", webhooks: "webhook", bucketsets: "bucketset", usersecrets: "usersecret",
};
/** The mode a pair of flags stands for (neither: copied at the edge's start only). */
export function modeOf(toEdge: boolean, toPlatform: boolean): SyncMode {
  return toEdge && toPlatform ? "sync" : toEdge ? "sync_to_edge" : toPlatform ? "sync_to_platform" : "deploy";
}
const down = (m: SyncMode) => m === "sync" || m === "sync_to_edge";
const up = (m: SyncMode) => m === "sync" || m === "sync_to_platform";

/** A deployment's asset as a template entry (a class that is not a kind's is a collection's name). */
export function entryOf(a: DeploymentAsset, deployment: string): TemplateEntry {
  const kind = ASSET_CLASSES[a.asset_class];
  const mode = modeOf(a.sync_to_edge, a.sync_to_platform), source = `deployment:${deployment}`;
  // a collection comes with its rows (ClearBlade deploys a collection's items with it)
  return kind ? { def_module: kind, def_name: a.asset_id || "*", mode, source } : { def_module: "collection", def_name: a.asset_class, mode, rows: true, source };
}

/** The entry of `t` that brings an asset of `module` called `name`: its own, else the module's `*`
 *  (topics: their filter only). */
export function matching(t: TemplateEntry[], module: string, name: string): TemplateEntry | undefined {
  let star: TemplateEntry | undefined;
  for (const e of t) {
    if (e.def_module !== module) continue;
    if (e.def_name === name) return e;
    if (e.def_name === "*" && module !== "topic") star = e;
  }
  return star;
}

const keyOf = (e: TemplateEntry) => `${e.def_module}\u0000${e.def_name}`;

/** `e` with what `x` adds: goes down or comes up when either does, rows when either takes them,
 *  both sources. */
function merged(e: TemplateEntry, x: TemplateEntry): TemplateEntry {
  const mode = modeOf(down(e.mode) || down(x.mode), up(e.mode) || up(x.mode));
  const rows = e.def_module === "collection" ? { rows: e.rows !== false || x.rows !== false } : {};
  const sources = [...new Set([...(e.source ?? "").split(","), ...(x.source ?? "").split(",")].filter(Boolean))];
  return { def_module: e.def_module, def_name: e.def_name, mode, ...rows, ...(sources.length ? { source: sources.join(",") } : {}) };
}

/** Entries by their key, for lookups of an asset's own entry and its kind's `*`. */
function indexed(t: TemplateEntry[]) {
  const m = new Map<string, TemplateEntry>();
  for (const e of t) m.set(keyOf(e), e);
  // the entry bringing an asset: its own, else its kind's * (topics: their filter only)
  return (e: TemplateEntry) => m.get(keyOf(e)) ?? (e.def_module === "topic" ? undefined : m.get(`${e.def_module}\u0000*`));
}

/** The union of two entry sets: each asset goes down, or comes up, when either set says so. An
 *  entry of one set takes in what the other set's entry for the same asset (or its kind's `*`)
 *  adds; within one set entries keep their meaning (an edge's own entry overrides its named
 *  template's). An entry the other set does not touch is kept as it is. */
export function unite(a: TemplateEntry[], b: TemplateEntry[]): TemplateEntry[] {
  if (!b.length) return a;
  if (!a.length) return b;
  const out = new Map<string, TemplateEntry>();
  for (const [mine, other] of [[a, indexed(b)], [b, indexed(a)]] as const) {
    for (const e of mine) {
      const k = keyOf(e);
      if (out.has(k)) continue;
      const x = other(e);
      out.set(k, x ? merged(e, x) : e);
    }
  }
  return [...out.values()];
}

/** The entries every deployment naming the edge brings, united (one deployment's entries unite
 *  too: a class's "" entry and one of its assets' add up). */
export async function deploymentEntries(ex: Executor, systemKey: string, edge: string): Promise<TemplateEntry[]> {
  return deployedTo(await deploymentsRepo.all(ex, systemKey), edge);
}

/** What deployments (as stored: assets and edges as JSON text) bring to the edge, in one pass
 *  (the same as uniting each entry with the others). */
export function deployedTo(rows: { name: string; assets: string; edges: string }[], edge: string): TemplateEntry[] {
  const byKey = new Map<string, TemplateEntry>();
  for (const r of rows) {
    if (!(JSON.parse(r.edges) as string[]).includes(edge)) continue;
    for (const a of JSON.parse(r.assets) as DeploymentAsset[]) {
      const e = entryOf(a, r.name), k = keyOf(e), cur = byKey.get(k);
      byKey.set(k, cur ? merged(cur, e) : e);
    }
  }
  // an asset's own entry takes in its class's "" entry
  return [...byKey.values()].map((e) => {
    const star = e.def_name === "*" ? undefined : byKey.get(`${e.def_module}\u0000*`);
    return star ? merged(e, star) : e;
  });
}
