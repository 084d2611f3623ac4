// Recording changes of syncable assets, in the transaction of the change itself.
// On a platform a change goes into the change log (for the systems that have edges); on an edge,
// a row written to a collection that flows up, or a message on a relayed topic, goes into the
// outbox until the platform acknowledges it.
import { Hlc, parse } from "../core/hlc.ts";
import type { Db, Executor } from "../store/db.ts";
import { changesRepo, outboxRepo, syncedAssetsRepo, syncStateRepo } from "../store/sync.ts";
import { fail } from "../core/errors.ts";
import type { DefinitionType } from "../core/syncKinds.ts";

/** What a change log entry is about: a definition, or a row of a collection. */
export type AssetType = DefinitionType | "row";

/** A row write as it travels. `replaces`: the platform refused the writer's stamp (too far
 *  ahead) and stamped the write again; the writer's copy carrying that stamp takes the new one. */
export interface RowChange { collection_id: string; collection: string; item_id: string; op: "upsert" | "delete"; values: Record<string, unknown> | null; hlc: string; replaces?: string }

/** An asset as the change log names it (rows: by their collection), for waking only the edges it goes to. */
export const assetKey = (type: string, name: string) => `${type}\u0000${name}`;

/** How often the clock's state is saved besides the sync transactions that save it, and how far
 *  ahead of its latest stamp it is saved: a restart starts past every stamp issued before it,
 *  even with the machine's clock set back (stamps between two saves are covered by the margin). */
const CLOCK_SAVE_MS = 1_000;
const CLOCK_MARGIN_MS = 3_000;

export class ChangeRecorder {
  /** systems that have at least one edge (platform): only they keep a change log */
  private readonly systemsWithEdges = new Set<string>();
  /** edge: collections whose rows go up, and topics relayed to the platform (as the edge's
   *  template says: set by its sync link) */
  private upCollections = new Set<string>();
  private relayFilters: string[] = [];
  /** edge: bytes written to the outbox since the edge last measured it (a tally that tells when
   *  its bound may be passed; a rolled back write counts too, until the next measure) */
  private outboxAdded = 0;
  /** edge: the collections whose rows go up and the topics relayed up, from the template */
  useTemplate(upCollections: Set<string> | null, relayTopics: string[] | null) {
    if (upCollections) this.upCollections = upCollections;
    if (relayTopics) this.relayFilters = relayTopics;
  }
  get relayTopics(): readonly string[] { return this.relayFilters; }

  /** edge: the outbox bytes written since the last call */
  takeOutboxAdded(): number {
    const n = this.outboxAdded;
    this.outboxAdded = 0;
    return n;
  }

  private readonly listeners = new Set<(systemKey: string, assets: ReadonlySet<string>) => void>();
  /** per system, the assets changed since the last notification */
  private readonly pendingNotify = new Map<string, Set<string>>();
  readonly clock: Hlc;
  private saver: ReturnType<typeof setInterval> | null = null;
  private saved = "";

  constructor(readonly mode: "platform" | "edge", node: string, maxClockSkewMs = Infinity) {
    this.clock = new Hlc(node, Date.now, maxClockSkewMs);
  }

  /** Restores the clock from its saved state, then saves it every second: a restart never issues
   *  a stamp older than one issued or seen before. */
  async startClock(db: Db) {
    this.clock.restore(await syncStateRepo.get(db, "clock"));
    this.saved = this.clock.last(); // what is saved covers it already
    this.saver = setInterval(() => { void this.saveClock(db).catch(() => { /* next time */ }); }, CLOCK_SAVE_MS);
    this.saver.unref();
  }

  async stopClock(db: Db) {
    if (this.saver) clearInterval(this.saver);
    this.saver = null;
    await this.saveClock(db);
  }

  /** Saves the clock's state (also inside sync transactions, with the stamps they store). */
  async saveClock(ex: Executor) {
    const last = this.clock.last();
    if (last === this.saved) return;
    this.saved = last;
    await syncStateRepo.set(ex, "clock", ahead(last, CLOCK_MARGIN_MS));
  }

  setSystemsWithEdges(keys: string[]) { this.systemsWithEdges.clear(); for (const k of keys) this.systemsWithEdges.add(k); }
  addSystemWithEdges(key: string) { this.systemsWithEdges.add(key); }
  logs(systemKey: string) { return this.mode === "platform" && this.systemsWithEdges.has(systemKey); }

  /** Whether row writes of this collection are recorded (so callers skip reading them back otherwise). */
  wantsRows(systemKey: string, collection: string) {
    return this.mode === "platform" ? this.systemsWithEdges.has(systemKey) : this.upCollections.has(collection);
  }

  /** Called (after the transaction) when new changes of a system are in the log, with the assets
   *  they change (assetKey). */
  onCommitted(fn: (systemKey: string, assets: ReadonlySet<string>) => void) { this.listeners.add(fn); return () => this.listeners.delete(fn); }

  private notify(systemKey: string, type: string, name: string) {
    const pending = this.pendingNotify.get(systemKey);
    if (pending) { pending.add(assetKey(type, name)); return; }
    this.pendingNotify.set(systemKey, new Set([assetKey(type, name)]));
    // readers wait for the open transaction, so by the time they look the change is committed
    setImmediate(() => {
      const assets = this.pendingNotify.get(systemKey)!;
      this.pendingNotify.delete(systemKey);
      for (const l of this.listeners) l(systemKey, assets);
    });
  }

  /** A definition (service, library, trigger, timer, collection schema, role, user, device). */
  async record(tx: Executor, systemKey: string, type: AssetType, name: string, op: "upsert" | "delete", body: unknown, origin = "") {
    if (this.mode === "edge") return this.refuseIfPlatformOwned(tx, type, name);
    if (!this.logs(systemKey)) return;
    const { lastInsertRowid: seq } = await changesRepo.append(tx, { system_key: systemKey, asset_type: type, asset_name: name, item_id: null, op, hlc: this.clock.now(), origin, body: body === null ? null : JSON.stringify(body) });
    await changesRepo.noteLatest(tx, systemKey, type, name, seq);
    this.notify(systemKey, type, name);
  }

  /** Edge: a local write (the API, code) to a definition the platform sent is refused, in its
   *  transaction: the platform's next change of it, or a snapshot, would undo it without a word,
   *  and the sync status would still say `synced`. Users and devices stay writable (a user's own
   *  password, a device's state are the edge's day-to-day business); rows follow their
   *  collection's direction (docs/sync.md). Applying what the platform sends never comes here. */
  async refuseIfPlatformOwned(tx: Executor, type: AssetType, name: string) {
    if (this.mode !== "edge" || type === "row" || type === "user" || type === "device") return;
    if (await syncedAssetsRepo.has(tx, type, name))
      throw fail("PLATFORM_OWNED", `${type} '${name}' comes from the platform (this edge's template or a deployment): change it on the platform`);
  }

  /** Row writes of a collection. */
  async rows(tx: Executor, systemKey: string, changes: RowChange[], origin = "") {
    if (!changes.length) return;
    if (this.mode === "platform") {
      if (!this.logs(systemKey)) return;
      const latest = new Map<string, number>();
      const seqs = await changesRepo.appendMany(tx, changes.map((c) => ({ system_key: systemKey, asset_type: "row", asset_name: c.collection, item_id: c.item_id, op: c.op, hlc: c.hlc, origin, body: JSON.stringify(c) })));
      changes.forEach((c, i) => latest.set(c.collection, Math.max(latest.get(c.collection) ?? 0, seqs[i]!)));
      for (const [name, seq] of latest) { await changesRepo.noteLatest(tx, systemKey, "row", name, seq); this.notify(systemKey, "row", name); }
      return;
    }
    // edge: rows of collections that flow up wait in the outbox
    if (origin) return; // arrived from the platform: not sent back
    const up = changes.filter((c) => this.upCollections.has(c.collection));
    for (const c of up) { const body = JSON.stringify(c); this.outboxAdded += body.length; await outboxRepo.add(tx, "row", body); }
    if (up.length) this.notify(systemKey, "row", up[0]!.collection);
  }

  /** Edge: a message published locally on a relayed topic. */
  async relay(tx: Executor, systemKey: string, topic: string, payload: Uint8Array, qos: number) {
    const body = JSON.stringify({ topic, payload: Buffer.from(payload).toString("base64"), qos });
    this.outboxAdded += body.length;
    await outboxRepo.add(tx, "message", body);
    this.notify(systemKey, "topic", topic);
  }
}

/** A stamp moved `ms` later (the clock's saved state: past every stamp issued until the next save). */
function ahead(stamp: string, ms: number): string {
  const p = parse(stamp);
  return p ? `${(p.wall + ms).toString().padStart(15, "0")}-000000-${p.node}` : stamp;
}
