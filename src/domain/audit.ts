// The audit trail (ClearBlade's /admin/audit): who created, changed or deleted which asset, with
// what, and how long the answer took; password resets; MQTT connects and disconnects.
//
// Off the request's critical path: record() only appends to a buffer, written in batches (one
// transaction each) every FLUSH_MS or once BATCH rows wait; a write never waits for its row.
// (Batches written often stay small and their rows short-lived: cheaper to collect.)
// stop() writes what waits, so a clean shutdown loses nothing (a crash loses at most the last
// FLUSH_MS). Bounded: rows older than --audit-retention-days and the oldest past --audit-max-rows
// are dropped every TRIM_MS; should the database refuse rows, at most MAX_WAITING wait in memory.
import type { Principal } from "../auth/principal.ts";
import type { DomainEvent, EventType } from "../core/events.ts";
import { fail } from "../core/errors.ts";
import { type Condition, parseQuery } from "../core/query.ts";
import { type AuditRow, type AuditValues, auditRepo } from "../store/audit.ts";
import { collectionsRepo } from "../store/collections.ts";
import type { DomainDeps } from "./deps.ts";
import type { Systems } from "./systems.ts";

export const FLUSH_MS = 250;
export const BATCH = 1_000;
export const MAX_WAITING = 100_000;
const TRIM_MS = 10 * 60_000;

/** ClearBlade's action types (a query may spell them in any case). */
export const ACTION_TYPES = ["Create", "Update", "Delete", "Create Columns", "Delete Columns", "Developer Password Reset",
  "User Password Reset", "MQTT Connect", "MQTT Disconnect"] as const;
export type ActionType = (typeof ACTION_TYPES)[number];
export type UserType = "UNKNOWN" | "DEV" | "USER" | "DEVICE";

/** One audited action, as the part that saw it tells it. */
export interface AuditEntry {
  /** "" when not known yet: then `collectionId` names the collection whose system it is */
  systemKey: string;
  collectionId?: string;
  assetClass: string;
  action: ActionType;
  email: string;
  userType: UserType;
  assetId: string;
  /** what was sent (secrets already out), as JSON text */
  changes: string;
  /** milliseconds from the request to its answer */
  responseMs: number;
  /** when (ms since the epoch) */
  at: number;
}

export const userTypeOf = (p: Principal | null): UserType =>
  p?.kind === "developer" ? "DEV" : p?.kind === "user" || p?.kind === "anonymous" ? "USER" : p?.kind === "device" ? "DEVICE" : "UNKNOWN";
export const emailOf = (p: Principal | null): string =>
  !p ? "" : p.kind === "device" || p.kind === "edge" ? p.name : p.email;

const MQTT_EVENTS: EventType[] = ["Messaging::MQTTUserConnected", "Messaging::MQTTUserDisconnected", "Messaging::MQTTDeviceConnected", "Messaging::MQTTDeviceDisconnected"];

export interface AuditOptions { enabled: boolean; retentionDays: number; maxRows: number }

export class AuditTrail {
  private waiting: AuditEntry[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private timer: ReturnType<typeof setInterval> | null = null;
  private trimTimer: ReturnType<typeof setInterval> | null = null;
  /** entries dropped because the database refused them for too long */
  dropped = 0;
  /** collections' systems, by id, as learnt (a deleted collection's is learnt before it goes) */
  private readonly systemOf = new Map<string, string>();

  constructor(private readonly d: DomainDeps, private readonly systems: Systems, private readonly opts: AuditOptions) {
    if (opts.enabled) d.events.on((e) => this.mqtt(e), MQTT_EVENTS);
    d.signals.on("system.removed", ({ systemKey }) => { void this.forgetSystem(systemKey); });
  }

  /** A deleted system's trail goes with the rest of its data: it names the system's assets. */
  private async forgetSystem(systemKey: string) {
    this.waiting = this.waiting.filter((e) => e.systemKey !== systemKey && !(e.systemKey === "" && e.collectionId !== undefined && this.systemOf.get(e.collectionId) === systemKey));
    await this.flushing;
    try { await auditRepo.removeSystem(this.d.db, systemKey); }
    catch (err) { this.d.log.warn("could not remove a deleted system's audit rows", { systemKey, err }); }
  }

  get enabled() { return this.opts.enabled; }
  get waitingRows() { return this.waiting.length; }

  /** Appends an entry; written with the next batch. */
  record(e: AuditEntry) {
    if (!this.opts.enabled) return;
    if (this.waiting.length >= MAX_WAITING) { this.waiting.shift(); this.dropped++; }
    this.waiting.push(e);
    if (this.waiting.length === BATCH) void this.flush();
  }

  async start() {
    if (!this.opts.enabled) return;
    await this.trim();
    this.timer = setInterval(() => void this.flush(), FLUSH_MS);
    this.timer.unref?.();
    this.trimTimer = setInterval(() => void this.trim(), TRIM_MS);
    this.trimTimer.unref?.();
  }

  /** Writes what waits (a clean shutdown loses nothing). */
  async stop() {
    if (this.timer) clearInterval(this.timer);
    if (this.trimTimer) clearInterval(this.trimTimer);
    this.timer = this.trimTimer = null;
    await this.flush();
    if (this.waiting.length) this.d.log.warn("audit rows not written at stop", { rows: this.waiting.length });
  }

  /** Writes the waiting entries in one transaction; one flush at a time. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.writeWaiting());
    return this.flushing;
  }

  private async writeWaiting() {
    if (!this.waiting.length) return;
    const batch = this.waiting;
    this.waiting = [];
    try {
      const rows = await this.rowsOf(batch);
      await this.d.db.tx((tx) => auditRepo.insertMany(tx, rows));
    } catch (err) {
      // kept for the next flush (in order, before newer ones), within the bound
      this.waiting = batch.concat(this.waiting);
      const over = this.waiting.length - MAX_WAITING;
      if (over > 0) { this.waiting.splice(0, over); this.dropped += over; }
      this.d.log.warn("audit rows not written yet; kept for the next try", { rows: this.waiting.length, err });
    }
  }

  /** Looks up a collection's system now, for an entry that will name it by id once it is gone. */
  learnCollection(id: string | null) {
    if (!this.opts.enabled || !id || this.systemOf.has(id)) return;
    collectionsRepo.byId(this.d.db, id).then((c) => { if (c) this.remember(id, c.system_key); }, () => {});
  }

  private remember(id: string, systemKey: string) {
    if (this.systemOf.size >= 10_000) this.systemOf.clear();
    this.systemOf.set(id, systemKey);
  }

  private async rowsOf(batch: AuditEntry[]): Promise<AuditValues[]> {
    // the systems of collections named by id only (a data route called with a developer's token)
    const systemOf = this.systemOf;
    for (const e of batch) {
      if (e.systemKey || !e.collectionId || systemOf.has(e.collectionId)) continue;
      const c = await collectionsRepo.byId(this.d.db, e.collectionId);
      if (c) this.remember(e.collectionId, c.system_key);
    }
    // (entries of the same millisecond, a dozen under a load, share their time's text)
    let at = NaN, time = "";
    return batch.map((e): AuditValues => {
      if (e.at !== at) time = new Date((at = e.at)).toISOString();
      return [e.systemKey || (e.collectionId ? systemOf.get(e.collectionId) ?? "" : ""), time, Math.round(e.responseMs), e.assetClass, e.action, e.email, e.assetId, e.changes, e.userType];
    });
  }

  private async trim() {
    const before = new Date(Date.now() - this.opts.retentionDays * 86_400_000).toISOString();
    try { await auditRepo.trim(this.d.db, before, this.opts.maxRows); } catch (err) { this.d.log.warn("audit trim failed", { err }); }
  }

  private mqtt(e: DomainEvent) {
    const p = e.payload as { email?: string; deviceName?: string; clientId: string };
    const device = e.type === "Messaging::MQTTDeviceConnected" || e.type === "Messaging::MQTTDeviceDisconnected";
    const connect = e.type === "Messaging::MQTTUserConnected" || e.type === "Messaging::MQTTDeviceConnected";
    this.record({
      systemKey: e.systemKey, assetClass: "messaging", action: connect ? "MQTT Connect" : "MQTT Disconnect",
      email: (device ? p.deviceName : p.email) ?? "", userType: device ? "DEVICE" : "USER", assetId: p.clientId,
      changes: JSON.stringify({ client_id: p.clientId }), responseMs: 0, at: e.at,
    });
  }

  /** `systemKey` null: every system's trail (platform admins only). The waiting rows are written
   *  first, so a caller reads its own changes. */
  async list(p: Principal, systemKey: string | null, query: string | null) {
    const scope = await this.scope(p, systemKey);
    const q = parseQuery(query);
    await this.flush();
    const rows = await auditRepo.list(this.d.db, scope, { ...q, filters: canonicalActions(q.filters) });
    return rows.map(toWire);
  }

  async count(p: Principal, systemKey: string | null, query: string | null) {
    const scope = await this.scope(p, systemKey);
    const q = parseQuery(query);
    await this.flush();
    return { count: await auditRepo.count(this.d.db, scope, canonicalActions(q.filters)) };
  }

  private async scope(p: Principal, systemKey: string | null): Promise<string | null> {
    if (systemKey === null) {
      if (p.kind !== "developer") throw fail("DEVELOPER_ONLY", "the audit trail needs a developer token");
      if (!p.admin) throw fail("ADMIN_ONLY", "the audit trail of every system is a platform admin's: name your system (/admin/audit/{systemKey})");
      return null;
    }
    return (await this.systems.accessAsDeveloper(p, systemKey)).system_key;
  }
}

/** Action types in filters as stored ("create" finds "Create"). */
function canonicalActions(filters: Condition[][]): Condition[][] {
  return filters.map((g) => g.map((c) => {
    if (c.field !== "action_type" || typeof c.value !== "string" || c.op === "RE") return c;
    const v = (c.value as string).toLowerCase();
    const known = ACTION_TYPES.find((a) => a.toLowerCase() === v);
    return known ? { ...c, value: known } : c;
  }));
}

const toWire = (r: AuditRow) => ({
  id: Number(r.id), system_key: r.system_key, time: r.time, response_time: Number(r.response_time), asset_class: r.asset_class,
  action_type: r.action_type, email: r.email, asset_id: r.asset_id, changes: r.changes, user_type: r.user_type,
});
