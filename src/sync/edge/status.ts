// What this edge holds from its platform and what failed to apply (kept until it applies), for
// its hello, its local status endpoint and /metrics.
import type { AssetType } from "../../domain/changes.ts";
import type { TemplateEntry } from "../../domain/edges.ts";
import type { Db, Executor } from "../../store/db.ts";
import { syncedAssetsRepo, syncStateRepo } from "../../store/sync.ts";
import { DEFINITION_TYPES, isDefinitionType } from "../../core/syncKinds.ts";
import { entryFor } from "../assets.ts";
import type { AssetResult } from "./deps.ts";
import type { LinkFailures } from "./linkFailure.ts";

/** The link as the status endpoint shows it. */
export interface LinkView extends Pick<LinkFailures, "refusal" | "linkFailure"> { connected: boolean; lastConnectedAt: number; lastContactAt: number }

/** Assets whose last application failed, by type and name (kept until they apply). */
export async function failures(ex: Executor): Promise<Record<string, AssetResult & { error: string }>> {
  return JSON.parse((await syncStateRepo.get(ex, "failures")) ?? "{}");
}

export async function noteFailures(tx: Executor, results: AssetResult[]) {
  if (!results.length) return;
  const f = await failures(tx);
  let changed = false;
  for (const r of results) {
    const k = `${r.type}\u0000${r.name}`;
    if (r.error) { f[k] = { type: r.type, name: r.name, seq: r.seq, ...(r.version ? { version: r.version } : {}), error: r.error }; changed = true; }
    else if (f[k]) { delete f[k]; changed = true; }
  }
  if (changed) await syncStateRepo.set(tx, "failures", JSON.stringify(f));
}


/** Assets whose last application failed, by type (for /metrics). */
export async function failedAssets(db: Db): Promise<Record<string, number>> {
  const by: Record<string, number> = {};
  for (const f of Object.values(await failures(db))) by[f.type] = (by[f.type] ?? 0) + 1;
  return by;
}

/** The link and the assets as this edge sees them (its local status endpoint): what it holds
 *  from the platform, and what failed to apply with the error. */
export async function localStatus(db: Db, template: TemplateEntry[], link: LinkView, outbox: { size(): Promise<number>; dropped: number }) {
  const list = Object.values(await failures(db));
  const failed = new Map(list.map((f) => [`${f.type}\u0000${f.name}`, f]));
  const assets: { asset_type: string; asset_name: string; status: "synced" | "failed"; last_error: string; source: string; entry: string; mode: string }[] = [];
  // the template entry that brings each, where it comes from (the edge's own, its named template)
  // and its mode (which way a collection's rows flow, for the console)
  const from = (type: string, name: string) => {
    const e = isDefinitionType(type) || type === "row" ? entryFor(template, type as AssetType, name) : undefined;
    return { source: e?.source ?? "", entry: e ? `${e.def_module}/${e.def_name}` : "", mode: e?.mode ?? "" };
  };
  for (const type of DEFINITION_TYPES)
    for (const name of (await syncedAssetsRepo.ofType(db, type)).sort())
      if (!failed.has(`${type}\u0000${name}`)) assets.push({ asset_type: type, asset_name: name, status: "synced", last_error: "", ...from(type, name) });
  for (const f of list) assets.push({ asset_type: f.type, asset_name: f.name, status: "failed", last_error: f.error, ...from(f.type, f.name) });
  return {
    connected: link.connected, lastConnectedAt: link.lastConnectedAt, lastContactAt: link.lastContactAt,
    cursor: Number((await syncStateRepo.get(db, "cursor")) ?? "0"), snapshotDone: (await syncStateRepo.get(db, "snapshot")) === "done",
    outbox: await outbox.size(), outboxDropped: outbox.dropped, ...(link.refusal ? { refused: link.refusal } : {}), assets,
    linkFailure: link.linkFailure, template: (await syncStateRepo.get(db, "template_name")) ?? "",
  };
}
