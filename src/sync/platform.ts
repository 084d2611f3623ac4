// The platform's side of edge sync: authenticates edges on the sync channel, sends each a
// snapshot of its template when its cursor is new or too old and then the change log filtered by
// its template, applies rows and messages coming up, and keeps per-asset status.
import type { Principal } from "../auth/principal.ts";
import type { EventBus } from "../core/events.ts";
import type { Logger } from "../core/log.ts";
import { newUuid, nowIso, nowSeconds } from "../core/ids.ts";
import { parse as parseHlc } from "../core/hlc.ts";
import { describeIssues } from "../core/validate.ts";
import type { Collections } from "../domain/collections.ts";
import type { Edges, TemplateEntry } from "../domain/edges.ts";
import type { Broker } from "../domain/messages.ts";
import type { Db } from "../store/db.ts";
import { collectionsRepo } from "../store/collections.ts";
import { developerProfile, developersRepo } from "../store/developers.ts";
import { type EdgeRow, edgesRepo } from "../store/edges.ts";
import { type ChangeRow, assetNames, changesRepo, lowestCursors, statusRepo } from "../store/sync.ts";
import { systemsRepo } from "../store/systems.ts";
import type { ControlAdapter, ControlCommand, ControlFile, ControlResult } from "./adapters.ts";
import { applyRows, entryFor, goesDown, relayed, relayFilters, snapshot, upCollections, type WireChange } from "./assets.ts";
import type { ChangeRecorder, RowChange } from "./changes.ts";
import { BATCH_BYTES, BATCH_CHANGES, EdgeMessage, type PlatformMessage } from "./protocol.ts";

export interface Socket { send(text: string): void; close(code?: number, reason?: string): void }

export interface HubDeps {
  db: Db; log: Logger; events: EventBus; changes: ChangeRecorder; edges: Edges; collections: Collections;
  broker: () => Broker | null;
}

/** Status of one asset on one edge. */
export interface AssetStatus { asset_type: string; asset_name: string; status: "pending" | "synced" | "failed"; desired_version: number; applied_version: number; last_error: string; attempts: number; updated_at: string }

const COMPACT_MS = 60_000;
/** The kinds of definitions an edge receives (rows are not definitions; topics are relays). */
const SYNCED_KINDS = ["service", "library", "trigger", "timer", "collection", "role", "user", "device", "adapter"] as const;
/** How much longer than a control command's own limit the platform waits for the edge's answer. */
const CONTROL_MARGIN_MS = 5_000;
/** Change log entries kept per system beyond what every edge acknowledged (an edge further
 *  behind than this gets a fresh snapshot). */
const LOG_KEEP = 200_000;

class EdgeSession {
  edge!: EdgeRow;
  template: TemplateEntry[] = [];
  /** the edge's acknowledged position in the change log */
  cursor = 0;
  /** how far batches have been sent */
  sent = 0;
  inflight = false;
  /** a snapshot being sent (pages come from the generator) */
  snap: { gen: AsyncGenerator<WireChange[]>; seq: number; keep: Map<string, Set<string>>; purge: boolean } | null = null;
  closed = false;
  pumping = false;
  /** adapter control commands waiting for the edge's answer */
  readonly controls = new Map<string, (r: ControlResult) => void>();

  constructor(readonly hub: SyncHub, readonly ws: Socket) {}

  get key() { return `${this.edge.system_key}/${this.edge.name}`; }
  send(m: PlatformMessage) { if (!this.closed) this.ws.send(JSON.stringify(m)); }

  /** Sends the next batch if none is in flight. */
  async pump() {
    if (this.inflight || this.closed || this.pumping) return;
    this.pumping = true;
    try {
      const h = this.hub;
      if (this.snap) {
        const next = await this.snap.gen.next();
        if (!next.done) {
          for (const c of next.value) {
            const t = c.type === "row" ? "row" : c.type;
            if (!this.snap.keep.has(t)) this.snap.keep.set(t, new Set());
            this.snap.keep.get(t)!.add(c.type === "row" ? String(c.item) : c.name);
          }
          this.inflight = true;
          this.send({ t: "batch", changes: next.value, upTo: this.snap.seq, snapshot: true });
          return;
        }
        const keep: Record<string, string[]> = {};
        if (this.snap.purge) for (const [t, names] of this.snap.keep) if (t !== "row") keep[t] = [...names];
        // every kind is listed: the edge drops what it got from the platform and was not sent now
        // (a kind no longer in the template included); what was made on the edge stays
        if (this.snap.purge) for (const k of SYNCED_KINDS) keep[k] ??= [];
        this.inflight = true;
        this.send({ t: "snapshot_end", seq: this.snap.seq, keep: this.snap.purge ? keep : {} });
        this.sent = Math.max(this.sent, this.snap.seq);
        this.snap = null;
        return;
      }
      // the log after what was sent, filtered by the template; the edge's own rows are not echoed
      const rows = await changesRepo.after(h.d.db, this.edge.system_key, this.sent, BATCH_CHANGES);
      if (!rows.length) return;
      const out: WireChange[] = [];
      let bytes = 0, upTo = this.sent;
      for (const r of rows) {
        upTo = r.seq;
        if (r.origin === this.edge.name || !goesDown(this.template, r.asset_type as WireChange["type"], r.asset_name, true)) continue;
        out.push(toWire(r));
        bytes += (r.body?.length ?? 0) + 100;
        if (bytes > BATCH_BYTES) break;
      }
      this.sent = upTo;
      this.inflight = true;
      this.send({ t: "batch", changes: out, upTo, snapshot: false });
    } catch (err) {
      h_log(this.hub).error("sync send failed", { edge: this.key, err });
      this.ws.close(1011, "sync error");
    } finally {
      this.pumping = false;
    }
  }

  /** Starts sending the current state of the template's assets, as of change `seq`. With `purge`
   *  the edge then removes what it holds of the template's kinds that was not sent. */
  startSnapshot(seq: number, purge: boolean, template = this.template, live = false) {
    const h = this.hub;
    this.snap = { gen: snapshot(h.d.db, this.edge.system_key, template, seq, h.d.changes.clock.now(), live), seq, keep: new Map(), purge };
  }
}

const h_log = (h: SyncHub) => h.d.log;

function toWire(r: ChangeRow): WireChange {
  return { seq: r.seq, type: r.asset_type as WireChange["type"], name: r.asset_name, item: r.item_id, op: r.op, hlc: r.hlc, body: r.body === null ? null : JSON.parse(r.body) };
}

export class SyncHub {
  private readonly sessions = new Map<string, EdgeSession>();
  private readonly bySocket = new WeakMap<Socket, EdgeSession>();
  private compactor: ReturnType<typeof setInterval> | null = null;
  private offCommitted: (() => void) | null = null;

  constructor(readonly d: HubDeps) {}

  async start() {
    await edgesRepo.markAllDisconnected(this.d.db);
    const keys = (await systemsRepo.all(this.d.db)).map((s) => s.system_key);
    const withEdges: string[] = [];
    for (const k of keys) if ((await edgesRepo.all(this.d.db, k)).length) withEdges.push(k);
    this.d.changes.setSystemsWithEdges(withEdges);
    this.offCommitted = this.d.changes.onCommitted((sk) => { for (const s of this.sessions.values()) if (s.edge.system_key === sk) void s.pump(); });
    this.d.edges.onChange = (sk, edge, what) => {
      if (what !== "deleted") this.d.changes.addSystemWithEdges(sk);
      const s = this.sessions.get(`${sk}/${edge}`);
      if (!s) return;
      if (what === "deleted") { s.ws.close(4001, "edge deleted"); return; }
      if (what === "template") void this.retemplate(s);
    };
    this.d.edges.lagOf = (sk, edge) => this.lag(sk, edge);
    this.compactor = setInterval(() => this.compact().catch((err) => this.d.log.warn("change log compaction failed", { err })), COMPACT_MS);
    this.compactor.unref();
  }

  stop() {
    if (this.compactor) clearInterval(this.compactor);
    this.offCommitted?.();
    for (const s of this.sessions.values()) { s.closed = true; s.ws.close(1001, "platform stopping"); }
    this.sessions.clear();
  }

  // ---- the channel ----------------------------------------------------------------------------

  open(ws: Socket) { this.bySocket.set(ws, new EdgeSession(this, ws)); }

  async message(ws: Socket, raw: unknown) {
    const s = this.bySocket.get(ws);
    if (!s) return;
    let json: unknown = raw;
    if (typeof raw === "string") { try { json = JSON.parse(raw); } catch { return this.reject(s, "not JSON"); } }
    else if (raw instanceof Uint8Array || raw instanceof ArrayBuffer) { try { json = JSON.parse(Buffer.from(raw as Uint8Array).toString("utf8")); } catch { return this.reject(s, "not JSON"); } }
    const parsed = EdgeMessage.safeParse(json);
    if (!parsed.success) return this.reject(s, describeIssues(parsed.error, "message"));
    const m = parsed.data;
    try {
      if (m.t === "hello") return await this.hello(s, m);
      if (!s.edge) return this.reject(s, "say hello first");
      if (m.t === "ack") return await this.ack(s, m);
      if (m.t === "up") return await this.up(s, m);
      if (m.t === "ping") { s.send({ t: "pong" }); await edgesRepo.update(this.d.db, s.edge.system_key, s.edge.name, { last_talked: nowSeconds() }); }
      if (m.t === "control_result") { const done = s.controls.get(m.id); s.controls.delete(m.id); done?.({ err: m.err, command: m.command, output: m.output }); }
    } catch (err) {
      this.d.log.error("sync message failed", { edge: s.edge ? s.key : "?", err });
      ws.close(1011, "sync error");
    }
  }

  private reject(s: EdgeSession, message: string) {
    s.send({ t: "error", message });
    s.ws.close(4000, message.slice(0, 100));
  }

  async close(ws: Socket) {
    const s = this.bySocket.get(ws);
    if (!s || !s.edge) return;
    s.closed = true;
    for (const [id, done] of s.controls) { s.controls.delete(id); done({ err: true, command: "", output: `edge '${s.edge.name}' disconnected before it answered` }); }
    if (this.sessions.get(s.key) !== s) return;
    this.sessions.delete(s.key);
    await edgesRepo.update(this.d.db, s.edge.system_key, s.edge.name, { is_connected: 0, last_talked: nowSeconds() });
    this.d.events.emit("StartConnectDisconnect::EdgeDisconnectedOnPlatform", s.edge.system_key, { edgeName: s.edge.name });
    this.d.log.info("edge disconnected", { edge: s.key });
  }

  private async hello(s: EdgeSession, m: Extract<EdgeMessage, { t: "hello" }>) {
    const edge = await this.d.edges.authenticate(m.systemKey, m.edge, m.token);
    if (!edge) return this.reject(s, "unknown edge or wrong token");
    const system = await systemsRepo.byKey(this.d.db, m.systemKey);
    const owner = system && (await developersRepo.byId(this.d.db, system.owner_id));
    if (!system || !owner) return this.reject(s, "unknown system");
    s.edge = edge;
    s.template = await this.d.edges.templateOf(this.d.db, edge.system_key, edge);
    const old = this.sessions.get(s.key);
    if (old && old !== s) { old.closed = true; old.ws.close(4002, "replaced by a new connection"); }
    this.sessions.set(s.key, s);
    this.d.changes.addSystemWithEdges(edge.system_key);
    const now = nowSeconds();
    await edgesRepo.update(this.d.db, edge.system_key, edge.name, {
      is_connected: 1, first_talked: edge.first_talked ?? now, last_talked: now, last_seen_version: m.version, last_seen_os: m.os, last_seen_architecture: m.arch,
    });
    const minSeq = await changesRepo.minSeq(this.d.db, edge.system_key);
    const maxSeq = await changesRepo.maxSeq(this.d.db, edge.system_key);
    // a new edge, or one whose position the log no longer holds, starts from a snapshot
    const needsSnapshot = (m.cursor === 0 && !m.synced) || m.cursor > maxSeq || (minSeq > 0 && m.cursor < minSeq - 1);
    s.cursor = m.cursor;
    s.sent = needsSnapshot ? maxSeq : m.cursor;
    // the edge's own word on how far it got (its last acknowledgement may not have arrived) and
    // on what failed (the same), before anything else is sent
    await this.d.db.tx(async (tx) => {
      if (!needsSnapshot) await edgesRepo.update(tx, edge.system_key, edge.name, { cursor: m.cursor });
      const at = nowIso();
      const failedNow = new Map((await statusRepo.failedFor(tx, edge.system_key, edge.name)).map((r) => [`${r.asset_type}\u0000${r.asset_name}`, r.desired_version]));
      for (const f of m.failures) {
        const type = f.type === "row" ? "collection_rows" : f.type;
        if (failedNow.get(`${type}\u0000${f.name}`) !== f.seq) await statusRepo.failed(tx, edge.system_key, edge.name, type, f.name, f.seq, (f.error ?? "").slice(0, 2000), at);
      }
    });
    // the owner's profile only: no password hash, no admin right (see Developers.authenticate)
    s.send({ t: "welcome", system: system as unknown as Record<string, unknown>, owner: developerProfile(owner), template: s.template, snapshot: needsSnapshot, seq: maxSeq });
    if (needsSnapshot) s.startSnapshot(maxSeq, true);
    else {
      // deploy-mode assets are copied at every start of the edge
      const deploy = s.template.filter((e) => e.mode === "deploy");
      if (deploy.length) s.startSnapshot(m.cursor, false, deploy, false);
    }
    this.d.events.emit("StartConnectDisconnect::EdgeConnectedOnPlatform", edge.system_key, { edgeName: edge.name });
    this.d.log.info("edge connected", { edge: s.key, cursor: m.cursor, snapshot: needsSnapshot });
    await s.pump();
  }

  private async ack(s: EdgeSession, m: Extract<EdgeMessage, { t: "ack" }>) {
    const at = nowIso();
    const sk = s.edge.system_key, edge = s.edge.name;
    await this.d.db.tx(async (tx) => {
      for (const r of m.results) {
        const type = r.type === "row" ? "collection_rows" : r.type;
        if (r.error) await statusRepo.failed(tx, sk, edge, type, r.name, r.seq, r.error.slice(0, 2000), at);
        else await statusRepo.applied(tx, sk, edge, type, r.name, r.seq, at);
      }
      if (m.upTo > s.cursor) {
        s.cursor = m.upTo;
        await edgesRepo.update(tx, sk, edge, { cursor: m.upTo, last_talked: nowSeconds() });
      }
    });
    s.inflight = false;
    await s.pump();
  }

  /** Rows and messages an edge sends up: applied (last writer wins) and passed on to other edges. */
  private async up(s: EdgeSession, m: Extract<EdgeMessage, { t: "up" }>) {
    const sk = s.edge.system_key;
    const rowsByCollection = new Map<string, RowChange[]>();
    const messages: { topic: string; payload: string; qos: number }[] = [];
    const relays = relayFilters(s.template);
    for (const it of m.items) {
      // an edge sends only what its template sends up; anything else is dropped (and acknowledged,
      // so a confused edge does not send it forever)
      let body: Record<string, unknown>;
      try { body = JSON.parse(it.body); } catch { continue; }
      if (!body || typeof body !== "object") continue;
      if (it.kind === "row") {
        if (!isRowChange(body)) continue;
        const list = rowsByCollection.get(body.collection_id) ?? [];
        list.push(body);
        rowsByCollection.set(body.collection_id, list);
      } else if (typeof body.topic === "string" && typeof body.payload === "string" && relayed(relays, body.topic)) {
        messages.push(body as { topic: string; payload: string; qos: number });
      }
    }
    const touched: string[] = [];
    await this.d.db.tx(async (tx) => {
      for (const [id, changes] of rowsByCollection) {
        const c = await collectionsRepo.byId(tx, id);
        // only collections this edge may write to the platform
        if (!c || c.system_key !== sk || !upCollections(s.template, [c.name]).length) continue;
        for (const ch of changes) this.d.changes.clock.observe(ch.hlc);
        const applied = await applyRows(tx, id, await collectionsRepo.columns(tx, id), changes);
        await this.d.changes.rows(tx, sk, applied.map((a) => ({ ...a, collection: c.name })), s.edge.name);
        touched.push(id);
      }
    });
    for (const id of touched) this.d.collections.forgetId(id);
    const broker = this.d.broker();
    for (const msg of messages) {
      const topic = msg.topic.endsWith("/_platform") ? msg.topic.slice(0, -"/_platform".length) : msg.topic;
      const origin: Principal = { kind: "edge", systemKey: sk, id: s.edge.name, name: s.edge.name, tokenHash: "" };
      await broker?.publish(sk, topic, Buffer.from(msg.payload, "base64"), msg.qos === 1 || msg.qos === 2 ? msg.qos : 0, false, origin).catch((err) => this.d.log.warn("relayed message not published", { err }));
    }
    s.send({ t: "up_ack", upTo: m.items.length ? Math.max(...m.items.map((i) => i.id)) : 0 });
  }

  private async retemplate(s: EdgeSession) {
    s.edge = (await edgesRepo.get(this.d.db, s.edge.system_key, s.edge.name)) ?? s.edge;
    s.template = await this.d.edges.templateOf(this.d.db, s.edge.system_key, s.edge);
    s.send({ t: "template", template: s.template });
    // new entries need their assets, removed ones their removal: a fresh snapshot does both
    const seq = await changesRepo.maxSeq(this.d.db, s.edge.system_key);
    s.startSnapshot(seq, true);
    s.sent = Math.max(s.sent, seq);
    await s.pump();
  }

  // ---- adapter control ------------------------------------------------------------------------

  /** Sends a control command to a connected edge and waits for its answer, never longer than the
   *  command's own limit plus a margin; an edge that is not connected answers at once. */
  control(sk: string, edge: string, req: { adapter: ControlAdapter; command: ControlCommand; files?: ControlFile[]; timeoutMs: number }): Promise<ControlResult> {
    const s = this.sessions.get(`${sk}/${edge}`);
    if (!s || s.closed) return Promise.resolve({ err: true, command: req.command, output: `edge '${edge}' is not connected` });
    const id = newUuid();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        s.controls.delete(id);
        resolve({ err: true, command: req.command, output: `edge '${edge}' did not answer within ${Math.round((req.timeoutMs + CONTROL_MARGIN_MS) / 1000)} s` });
      }, req.timeoutMs + CONTROL_MARGIN_MS);
      s.controls.set(id, (r) => { clearTimeout(timer); resolve({ ...r, command: r.command || req.command }); });
      const { name, deploy_command, start_command, stop_command, status_command, undeploy_command, logs_command, run_stop_on_deploy, run_start_on_deploy, run_deploy_on_deploy } = req.adapter;
      s.send({ t: "control", id, command: req.command, timeoutMs: req.timeoutMs, ...(req.files ? { files: req.files } : {}),
        adapter: { name, deploy_command, start_command, stop_command, status_command, undeploy_command, logs_command, run_stop_on_deploy, run_start_on_deploy, run_deploy_on_deploy } });
    });
  }

  // ---- status ---------------------------------------------------------------------------------

  isConnected(sk: string, edge: string) { return this.sessions.has(`${sk}/${edge}`); }

  async lag(sk: string, edge: string): Promise<number | null> {
    const e = await edgesRepo.get(this.d.db, sk, edge);
    if (!e) return null;
    return changesRepo.countAfter(this.d.db, sk, e.cursor);
  }

  /** Every asset of an edge's template with its sync state. */
  async status(sk: string, edgeName: string): Promise<AssetStatus[]> {
    const edge = await this.d.edges.find(this.d.db, sk, edgeName);
    const template = await this.d.edges.templateOf(this.d.db, sk, edge);
    const latest = new Map<string, number>();
    for (const r of await changesRepo.latestPerAsset(this.d.db, sk, edgeName)) latest.set(`${r.asset_type === "row" ? "collection_rows" : r.asset_type}\u0000${r.asset_name}`, r.seq);
    const recorded = new Map((await statusRepo.forEdge(this.d.db, sk, edgeName)).map((r) => [`${r.asset_type}\u0000${r.asset_name}`, r]));
    const out: AssetStatus[] = [];
    const seen = new Set<string>();
    const add = (type: string, name: string) => {
      const k = `${type}\u0000${name}`;
      if (seen.has(k)) return;
      seen.add(k);
      let r = recorded.get(k);
      let desired = Math.max(latest.get(k) ?? 0, r?.desired_version ?? 0);
      // rows that never come down (they only flow up), or of which nothing came down yet (an empty
      // collection), owe the edge nothing beyond the collection itself: they follow its state
      if (type === "collection_rows" && (!goesDown(template, "row", name, false) || (!r && desired === 0))) {
        const schema = recorded.get(`collection\u0000${name}`);
        r = schema && { ...schema, status: schema.status === "failed" ? "pending" : schema.status, last_error: "", attempts: 0 };
        desired = r?.desired_version ?? 0;
      }
      // everything up to the edge's cursor was applied in the batches it took (or reported failed)
      const applied = Math.max(r?.applied_version ?? 0, r?.status !== "failed" && desired > 0 && desired <= edge.cursor ? desired : 0);
      const status: AssetStatus["status"] = r?.status === "failed" ? "failed" : (r || applied > 0) && applied >= desired ? "synced" : "pending";
      out.push({ asset_type: type, asset_name: name, status, desired_version: desired, applied_version: applied, last_error: r?.last_error ?? "", attempts: r?.attempts ?? 0, updated_at: r?.updated_at ?? "" });
    };
    for (const a of await this.templateAssets(sk, template)) add(a.type, a.name);
    // assets no longer present but still recorded (deleted on the platform) keep showing their state
    for (const r of recorded.values()) if (!seen.has(`${r.asset_type}\u0000${r.asset_name}`)) add(r.asset_type, r.asset_name);
    return out.sort((a, b) => a.asset_type.localeCompare(b.asset_type) || a.asset_name.localeCompare(b.asset_name));
  }

  /** The assets a template covers, by type and name (rows: a collection's rows as one asset). */
  private async templateAssets(sk: string, template: TemplateEntry[]) {
    const out: { type: string; name: string }[] = [];
    for (const n of await assetNames(this.d.db, sk)) {
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
  async retry(sk: string, edgeName: string, only?: { type: string; name: string }[]) {
    const s = this.sessions.get(`${sk}/${edgeName}`);
    const failed = only ?? (await statusRepo.failedFor(this.d.db, sk, edgeName)).map((r) => ({ type: r.asset_type, name: r.asset_name }));
    if (!s) return { edge: edgeName, connected: false, queued: failed.length };
    const template: TemplateEntry[] = [];
    for (const f of failed) {
      const module = (f.type === "collection_rows" ? "collection" : f.type) as TemplateEntry["def_module"];
      const base = entryFor(s.template, f.type === "collection_rows" ? "row" : (f.type as WireChange["type"]), f.name);
      if (base) template.push({ ...base, def_module: module, def_name: f.name });
    }
    if (!template.length) return { edge: edgeName, connected: true, queued: 0 };
    if (!s.snap) s.startSnapshot(s.cursor, false, template, false);
    await s.pump();
    return { edge: edgeName, connected: true, queued: template.length };
  }

  /** Drops log entries every recently seen edge of a system has acknowledged; keeps the log bounded. */
  async compact() {
    for (const s of await lowestCursors(this.d.db, nowSeconds() - 7 * 86_400)) {
      const max = await changesRepo.maxSeq(this.d.db, s.system_key);
      const upTo = Math.max(s.low ?? 0, max - LOG_KEEP);
      if (upTo > 0) await changesRepo.compact(this.d.db, s.system_key, upTo);
    }
  }
}

/** The shape of a row change an edge sends up (anything else is dropped). */
function isRowChange(b: Record<string, unknown>): b is Record<string, unknown> & RowChange {
  return typeof b.collection_id === "string" && typeof b.item_id === "string" && (b.op === "upsert" || b.op === "delete") &&
    typeof b.hlc === "string" && parseHlc(b.hlc) !== null && (b.values === null || b.values === undefined || (typeof b.values === "object" && !Array.isArray(b.values)));
}
