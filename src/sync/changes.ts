// Recording changes of syncable assets, in the transaction of the change itself.
// On a platform a change goes into the change log (for the systems that have edges); on an edge,
// a row written to a collection that flows up, or a message on a relayed topic, goes into the
// outbox until the platform acknowledges it.
import { Hlc } from "../core/hlc.ts";
import type { Executor } from "../store/db.ts";
import { changesRepo, outboxRepo } from "../store/sync.ts";

export type AssetType = "service" | "library" | "trigger" | "timer" | "collection" | "row" | "role" | "user" | "device" | "adapter";

export interface RowChange { collection_id: string; collection: string; item_id: string; op: "upsert" | "delete"; values: Record<string, unknown> | null; hlc: string }

export class ChangeRecorder {
  /** systems that have at least one edge (platform): only they keep a change log */
  private readonly systemsWithEdges = new Set<string>();
  /** edge: collections whose rows go up, and topics relayed to the platform */
  upCollections = new Set<string>();
  relayTopics: string[] = [];
  private readonly listeners = new Set<(systemKey: string) => void>();
  private pendingNotify = new Set<string>();
  readonly clock: Hlc;

  constructor(readonly mode: "platform" | "edge", node: string) {
    this.clock = new Hlc(node);
  }

  setSystemsWithEdges(keys: string[]) { this.systemsWithEdges.clear(); for (const k of keys) this.systemsWithEdges.add(k); }
  addSystemWithEdges(key: string) { this.systemsWithEdges.add(key); }
  logs(systemKey: string) { return this.mode === "platform" && this.systemsWithEdges.has(systemKey); }

  /** Whether row writes of this collection are recorded (so callers skip reading them back otherwise). */
  wantsRows(systemKey: string, collection: string) {
    return this.mode === "platform" ? this.systemsWithEdges.has(systemKey) : this.upCollections.has(collection);
  }

  /** Called (after the transaction) when new changes of a system are in the log. */
  onCommitted(fn: (systemKey: string) => void) { this.listeners.add(fn); return () => this.listeners.delete(fn); }

  private notify(systemKey: string) {
    if (this.pendingNotify.has(systemKey)) return;
    this.pendingNotify.add(systemKey);
    // readers wait for the open transaction, so by the time they look the change is committed
    setImmediate(() => { this.pendingNotify.delete(systemKey); for (const l of this.listeners) l(systemKey); });
  }

  /** A definition (service, library, trigger, timer, collection schema, role, user, device). */
  async record(tx: Executor, systemKey: string, type: AssetType, name: string, op: "upsert" | "delete", body: unknown, origin = "") {
    if (!this.logs(systemKey)) return;
    await changesRepo.append(tx, { system_key: systemKey, asset_type: type, asset_name: name, item_id: null, op, version: 0, hlc: this.clock.now(), origin, body: body === null ? null : JSON.stringify(body) });
    this.notify(systemKey);
  }

  /** Row writes of a collection. */
  async rows(tx: Executor, systemKey: string, changes: RowChange[], origin = "") {
    if (!changes.length) return;
    if (this.mode === "platform") {
      if (!this.logs(systemKey)) return;
      for (const c of changes)
        await changesRepo.append(tx, { system_key: systemKey, asset_type: "row", asset_name: c.collection, item_id: c.item_id, op: c.op, version: 0, hlc: c.hlc, origin, body: JSON.stringify(c) });
      this.notify(systemKey);
      return;
    }
    // edge: rows of collections that flow up wait in the outbox
    if (origin) return; // arrived from the platform: not sent back
    const up = changes.filter((c) => this.upCollections.has(c.collection));
    for (const c of up) await outboxRepo.add(tx, "row", JSON.stringify(c));
    if (up.length) this.notify(systemKey);
  }

  /** Edge: a message published locally on a relayed topic. */
  async relay(tx: Executor, systemKey: string, topic: string, payload: Uint8Array, qos: number) {
    await outboxRepo.add(tx, "message", JSON.stringify({ topic, payload: Buffer.from(payload).toString("base64"), qos }));
    this.notify(systemKey);
  }
}
