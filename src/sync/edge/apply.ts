// Applying what the platform sends: each batch together with the cursor in one transaction, each
// asset in its own savepoint (one that fails is reported and the rest still apply); a snapshot's
// end drops what the template's kinds hold that it did not bring.
import { problemText } from "../../domain/services.ts";
import type { Executor } from "../../store/db.ts";
import { collectionsRepo } from "../../store/collections.ts";
import { snapshotSeenRepo, syncedAssetsRepo, syncStateRepo } from "../../store/sync.ts";
import { adaptersRepo } from "../../store/adapters.ts";
import { adapterBody, controlFiles } from "../../domain/adapters.ts";
import type { AdapterRunner } from "../../adapters/runner.ts";
import type { RowChange } from "../../domain/changes.ts";
import { isDefinitionType } from "../../core/syncKinds.ts";
import { applyDefinition, applyRows } from "../assets.ts";
import { KINDS } from "../kinds/index.ts";
import type { PlatformMessage, WireChange } from "../protocol.ts";
import type { AssetResult, EdgeSyncDeps } from "./deps.ts";
import { noteFailures } from "./status.ts";

/** The acknowledgement of a batch or a snapshot's end, with what failed. */
export interface EdgeAck { t: "ack"; upTo: number; snapshot: boolean; results: AssetResult[] }

export class EdgeApply {
  /** a full snapshot is coming or under way: the platform's clock at its welcome (rows stamped
   *  before it that the snapshot does not bring go at its end) */
  private since: string | null = null;
  /** batches applied since the process started */
  appliedBatches = 0;

  get fullSince() { return this.since; }
  /** A welcome said whether a full snapshot comes (the platform's clock then) or not (null). */
  fullSnapshotFrom(hlc: string | null) { this.since = hlc; }

  constructor(private readonly d: EdgeSyncDeps, private readonly systemKey: string, private readonly adapters: AdapterRunner,
    /** the collections whose rows go up, read again after collections changed */
    private readonly refreshUpCollections: () => Promise<void>) {}

  /** One batch: every change in its own savepoint, the cursor with them, one transaction. */
  async batch(m: Extract<PlatformMessage, { t: "batch" }>): Promise<EdgeAck> {
    const results: AssetResult[] = [];
    const types = new Set<string>(), collections = new Set<string>(), adapters = new Set<string>();
    // compiled before the transaction, which holds the edge's database writer while it lasts
    const notCompiling = await this.notCompiling(m.changes);
    await this.d.db.tx(async (tx) => {
      // rows of one collection in a batch are applied together (last writer wins)
      const rowGroups = new Map<string, RowChange[]>();
      const rowSeq = new Map<string, number>(), rowVersion = new Map<string, number>();
      for (const ch of m.changes) {
        this.d.changes.clock.observe(ch.hlc);
        if (ch.type === "row") {
          const body = ch.body as RowChange;
          (rowGroups.get(body.collection_id) ?? rowGroups.set(body.collection_id, []).get(body.collection_id)!).push(body);
          rowSeq.set(body.collection_id, Math.max(rowSeq.get(body.collection_id) ?? 0, ch.seq));
          if (ch.version) rowVersion.set(body.collection_id, Math.max(rowVersion.get(body.collection_id) ?? 0, ch.version));
          continue;
        }
        const error = await this.savepoint(tx, async () => {
          const problem = notCompiling.get(ch);
          if (problem) throw new Error(problem);
          const wire = ch.op === "upsert" && isDefinitionType(ch.type) ? KINDS[ch.type].wire : undefined;
          await applyDefinition(tx, this.systemKey, wire ? { ...ch, body: wire.in(ch.body, this.d.secrets) } : ch);
          if (ch.op === "delete") await syncedAssetsRepo.remove(tx, ch.type, ch.name);
          else await syncedAssetsRepo.add(tx, ch.type, ch.name);
        });
        types.add(ch.type);
        if (ch.type === "collection") collections.add((ch.body as { collection_id: string }).collection_id);
        if (ch.type === "adapter" && !error) adapters.add(ch.name);
        results.push({ type: ch.type, name: ch.name, seq: ch.seq, ...(ch.version ? { version: ch.version } : {}), ...(error ? { error } : {}) });
      }
      for (const [id, rows] of rowGroups) {
        const name = rows[0]!.collection;
        const error = await this.savepoint(tx, async () => {
          const cols = await collectionsRepo.columns(tx, id);
          if (!(await collectionsRepo.byId(tx, id))) throw new Error(`collection '${name}' is not on this edge`);
          // the platform's copy of a write is the reference (equal stamps: its values)
          await applyRows(tx, id, cols, rows, { ties: true });
          if (m.snapshot && this.since) await snapshotSeenRepo.add(tx, id, rows.map((r) => r.item_id));
        });
        collections.add(id);
        results.push({ type: "row", name, seq: rowSeq.get(id)!, ...(rowVersion.has(id) ? { version: rowVersion.get(id)! } : {}), ...(error ? { error } : {}) });
      }
      await noteFailures(tx, results);
      if (!m.snapshot) await syncStateRepo.set(tx, "cursor", String(m.upTo));
      await this.d.changes.saveClock(tx);
    });
    this.d.log.debug("batch applied", { upTo: m.upTo, snapshot: m.snapshot, changes: m.changes.length, seqs: m.changes.length <= 20 ? m.changes.map((c) => c.seq) : undefined });
    if (types.has("collection")) await this.refreshUpCollections();
    this.d.invalidate(this.systemKey, types, collections);
    if (adapters.size) await this.redeploy(adapters);
    this.appliedBatches++;
    for (const r of results) if (r.error) this.d.log.warn("asset failed to apply", { ...r });
    return { t: "ack", upTo: m.upTo, snapshot: m.snapshot, results };
  }


  /** The services and libraries of a batch that do not compile, with why. */
  private async notCompiling(changes: WireChange[]): Promise<Map<WireChange, string>> {
    const out = new Map<WireChange, string>();
    if (!this.d.compileCheck) return out;
    for (const ch of changes) {
      if (ch.op !== "upsert" || (ch.type !== "service" && ch.type !== "library")) continue;
      const code = (ch.body as { code?: unknown } | null)?.code;
      const p = typeof code === "string" ? await this.d.compileCheck(code, `${ch.type} ${ch.name}.js`) : null;
      if (p) out.set(ch, `${ch.type} '${ch.name}' does not compile: ${problemText(p)}`);
    }
    return out;
  }

  private async savepoint(tx: Executor, fn: () => Promise<void>): Promise<string | undefined> {
    await tx.run("SAVEPOINT asset");
    try {
      await fn();
      await tx.run("RELEASE asset");
      return undefined;
    } catch (err) {
      await tx.run("ROLLBACK TO asset");
      await tx.run("RELEASE asset");
      return err instanceof Error ? err.message : String(err);
    }
  }

  /** The snapshot is complete: drop what the template's kinds hold that it did not include, and
   *  take the snapshot's position in the log. */
  async snapshotEnd(m: Extract<PlatformMessage, { t: "snapshot_end" }>): Promise<EdgeAck> {
    const sk = this.systemKey;
    const types = new Set<string>(Object.keys(m.keep));
    const collections = new Set<string>();
    let dropped = 0;
    await this.d.db.tx(async (tx) => {
      for (const [type, names] of Object.entries(m.keep)) {
        const keep = new Set(names);
        // only what came from the platform goes: assets made on the edge itself stay
        const local = new Set(await localNames(tx, sk, type));
        for (const name of await syncedAssetsRepo.ofType(tx, type)) {
          if (keep.has(name)) continue;
          if (local.has(name)) await this.savepoint(tx, () => removeLocal(tx, sk, type, name));
          await syncedAssetsRepo.remove(tx, type, name);
        }
      }
      if (m.rows && this.since) {
        for (const id of m.rows) {
          if (!(await collectionsRepo.byId(tx, id))) continue;
          const gone = await snapshotSeenRepo.unseen(tx, id, this.since);
          for (const item of gone) await collectionsRepo.deleteRow(tx, id, item);
          if (gone.length) { dropped += gone.length; collections.add(id); }
        }
        await snapshotSeenRepo.clear(tx);
      }
      await syncStateRepo.set(tx, "cursor", String(m.seq));
      await syncStateRepo.set(tx, "snapshot", "done");
      await this.d.changes.saveClock(tx);
    });
    if (m.rows) this.since = null;
    if (dropped) this.d.log.info("rows the full snapshot did not bring were removed", { rows: dropped });
    await this.refreshUpCollections();
    this.d.invalidate(sk, types, collections);
    return { t: "ack", upTo: m.seq, snapshot: true, results: [] };
  }

  /** A deployed adapter whose files changed through sync gets the new versions on disk. */
  private async redeploy(names: Set<string>) {
    for (const name of names) {
      try {
        const a = this.adapters.deployed(name) ? await adaptersRepo.get(this.d.db, this.systemKey, name) : null;
        if (a) this.adapters.writeFiles(name, controlFiles(await adapterBody(this.d.db, a)));
      } catch (err) {
        this.d.log.warn("adapter files not rewritten", { adapter: name, err });
      }
    }
  }

}

/** The names of a kind an edge holds (to purge what a snapshot no longer includes). */
async function localNames(ex: Executor, sk: string, type: string): Promise<string[]> {
  if (!isDefinitionType(type)) return [];
  const kind = KINDS[type];
  return (await kind.list(ex, sk)).map((r) => kind.nameOf(r));
}

/** Removes a local asset by name (a snapshot no longer includes it). */
async function removeLocal(ex: Executor, sk: string, type: string, name: string): Promise<void> {
  if (!isDefinitionType(type)) return;
  const body = await KINDS[type].deleteBody(ex, sk, name);
  if (body !== undefined) await KINDS[type].remove(ex, sk, name, body);
}
