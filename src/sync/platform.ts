// The platform's side of edge sync: authenticates edges on the sync channel, brings each to its
// template (a full snapshot when it is new, re-created or further behind than the log reaches; the
// assets a template change added and the removal of those it dropped otherwise), then streams the
// change log filtered by its template; applies rows and messages coming up; keeps per-asset status.
//
// A snapshot is one unit: the edge's cursor moves past it, and what it carries shows synced, only
// once the edge acknowledged its end. An interrupted one starts over at the next hello.
import type { Signals } from "../core/signals.ts";
import type { Port } from "../core/port.ts";
import type { Principal } from "../auth/principal.ts";
import { LruMap } from "../core/cache.ts";
import type { EventBus } from "../core/events.ts";
import type { Logger } from "../core/log.ts";
import { newUuid, nowIso, nowSeconds } from "../core/ids.ts";
import { parse as parseHlc } from "../core/hlc.ts";
import { describeIssues } from "../core/validate.ts";
import type { Collections } from "../domain/collections.ts";
import type { EdgeLinks, Edges, TemplateEntry } from "../domain/edges.ts";
import type { Broker } from "../domain/messages.ts";
import type { Db, Executor } from "../store/db.ts";
import { type ColumnDef, collectionsRepo } from "../store/collections.ts";
import { developerProfile, developersRepo } from "../store/developers.ts";
import { type EdgeRow, edgesRepo } from "../store/edges.ts";
import { clusterRepo } from "../store/cluster.ts";
import { type ChangeRow, assetNames, changesRepo, lowestCursors, statusRepo, tombstonesRepo } from "../store/sync.ts";
import { systemsRepo } from "../store/systems.ts";
import type { ControlAdapter, ControlCommand, ControlFile, ControlResult } from "../adapters/runner.ts";
import { applyRows, covered, entryFor, goesDown, relayFilters, snapshot, type SnapshotScope, upCollections, wireValues } from "./assets.ts";
import { type AssetType, type ChangeRecorder, DEFINITION_TYPES, type RowChange } from "../domain/changes.ts";
import { BATCH_BYTES, BATCH_CHANGES, CLAIMED_PROTOCOL, EdgeMessage, type PlatformMessage, PROTOCOL_REFUSED_CLOSE, PROTOCOL_VERSION, protocolRefusal, type RefusalReason, type WireChange } from "./protocol.ts";
import { BUILD } from "../version.ts";
import { ApiError, fail } from "../core/errors.ts";
import { AnswerSink, BODY_MAX_BYTES, chunked, type EdgeOp, FLEET_FEATURE, type RelayedAnswer, type VouchedCaller } from "./fleet.ts";
import { topicMatches } from "../auth/permissions.ts";
import { publishable, relayTarget } from "./relay.ts";

export interface Socket { send(text: string): void; close(code?: number, reason?: string): void; terminate?(): void;
  /** the peer's address, for the log */
  remote?: string;
  /** bytes sent but not yet written to the network (a link falling behind) */
  buffered?(): number }

export interface HubDeps {
  db: Db; log: Logger; events: EventBus; signals: Signals; changes: ChangeRecorder; edges: Edges; collections: Collections;
  /** where this hub tells Edges of the links it holds (attached at start) */
  edgeLinks: Port<EdgeLinks>;
  /** set in a cluster: reaches the edges other nodes hold (attached by the cluster) */
  elsewhere: Port<ElsewhereHub>;
  broker: () => Broker | null;
  /** row stamps further ahead of this clock are refused (ms) */
  maxClockSkewMs: number;
  /** a refused edge is logged once per this period (ms; --sync-log-ms) */
  logMs: number;
  /** how often the change log is compacted (ms) */
  compactMs: number;
  /** this platform node: the edges whose connections it holds carry it */
  nodeId: string;
}

/** Another node of a cluster, for an edge whose connection this node does not hold: the answer
 *  of the node that holds it, or null when none does. */
export interface ElsewhereHub {
  control(sk: string, edge: string, req: Parameters<SyncHub["control"]>[2]): Promise<ControlResult | null>;
  retry(sk: string, edge: string, only?: { type: string; name: string }[]): Promise<{ edge: string; connected: boolean; queued: number } | null>;
  /** a relayed request (its body whole, within BODY_MAX_BYTES) through the node holding the edge */
  relay(sk: string, edge: string, req: RelayRequest & { body: Uint8Array | null }): Promise<RelayedAnswer | null>;
  op(sk: string, edge: string, op: EdgeOp, timeoutMs: number): Promise<{ result: unknown } | null>;
  /** A relayed message (its wire text) for the edge `edge` wherever it is connected (false: on no
   *  node), or with `edge` "" for every edge of the system but `except` on the other nodes. */
  relayMessage(sk: string, edge: string, except: string, text: string): Promise<boolean>;
}

/** An API request to relay to an edge: the caller the platform vouches for, and how long the
 *  edge may stay silent (before its answer begins, and between its chunks). */
export interface RelayRequest {
  method: string; path: string; headers: [string, string][]; caller: VouchedCaller;
  body: ReadableStream<Uint8Array> | Uint8Array | null; timeoutMs: number;
}

/** How applying an asset's change went, as an edge reports it. */
type AssetResult = { type: string; name: string; seq: number; version?: number; error?: string };

/** Status of one asset on one edge. */
export interface AssetStatus {
  asset_type: string; asset_name: string; status: "pending" | "synced" | "failed";
  /** the asset's version (its changes counted) and the one the edge holds */
  desired_version: number; applied_version: number; last_error: string; attempts: number; updated_at: string;
  /** the template entry that brings it ("service/*") and where that comes from ("edge", or
   *  "template:<name>" for the edge's named template); "" for an asset no entry brings any more */
  source: string; entry: string;
}

/** How often at most a refused edge's record is written again for the same reason (its time). */
const REFUSAL_RECORD_MS = 5_000;
/** How often sessions are checked for a silent link. */
const SWEEP_MS = 250;
/** The kinds of definitions an edge receives (rows are not definitions; topics are relays). */
/** How much longer than a control command's own limit the platform waits for the edge's answer. */
const CONTROL_MARGIN_MS = 5_000;
/** Change log entries kept per system beyond what every edge acknowledged (an edge further
 *  behind than this gets a fresh snapshot). */
const LOG_KEEP = 200_000;
/** Log entries a compaction step spans at most (seqs: entries of other systems count). */
const COMPACT_STEP = 5_000;
/** Log entries read at a time while a batch fills, and most read for one batch (entries that do
 *  not go to the edge are passed over, and acknowledged, in an empty batch). */
const LOG_READ = 250;
const LOG_SCAN = 20 * BATCH_CHANGES;
/** How soon an edge's position passes log entries that do not go to it. */
const CATCH_UP_MS = 1_000;
/** Log entries kept as wire text, shared by the sessions of a system's edges. */
const WIRE_CACHE = 20_000;
/** A relayed message is not sent down a link with more than this waiting to be written (an edge
 *  that cannot keep up loses relayed messages, not the platform its memory). */
const RELAY_BUFFER_MAX = 8_000_000;

/** A snapshot to send: everything of the template (`full`: a new, re-created or stale edge), what
 *  a template change added (`diff`), deploy-mode assets at the edge's start (`deploy`), or
 *  assets asked for again (`retry`). */
interface SnapshotJob { kind: "full" | "diff" | "deploy" | "retry"; scope?: SnapshotScope; seq?: number }

interface RunningSnapshot {
  job: SnapshotJob;
  gen: AsyncGenerator<WireChange[]>;
  /** the position the edge takes at the end */
  seq: number;
  /** the template the edge holds once done (full, diff) */
  template: TemplateEntry[] | null;
  /** outcomes per asset, recorded when the edge acknowledges the end */
  results: Map<string, AssetResult>;
}

/** The errors an edge's answer to a remote operation may name (any other is a bad argument). */
const ERROR_KINDS_OF_OPS = { EDGE_OFFLINE: 1, EDGE_TIMEOUT: 1, COMMAND_NOT_ALLOWED: 1, INVALID_ARGUMENT: 1, NOT_FOUND: 1 } as const;

/** A stream read whole (bounded: a relay through another node carries the body in one message). */
async function wholeBody(body: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  if (!(await chunked(body, BODY_MAX_BYTES, (c) => parts.push(c)))) throw fail("PAYLOAD_TOO_LARGE", `a request relayed to an edge carries at most ${BODY_MAX_BYTES} bytes`);
  return Buffer.concat(parts);
}

/** A template's entries in one canonical text (to see whether an edge holds its template). */
function templateKey(t: TemplateEntry[]): string {
  return t.map((e) => `${e.def_module}\u0000${e.def_name}\u0000${e.mode}\u0000${e.def_module === "collection" ? e.rows !== false : ""}`).sort().join("\u0001");
}

class EdgeSession {
  edge!: EdgeRow;
  template: TemplateEntry[] = [];
  /** the template the edge holds (its last completed snapshot's); null: none */
  applied: TemplateEntry[] | null = null;
  /** the edge's acknowledged position in the change log */
  cursor = 0;
  /** how far batches have been sent */
  sent = 0;
  /** what the message in flight was (one at a time; the edge acknowledges each) */
  awaiting: "page" | "end" | "log" | null = null;
  jobs: SnapshotJob[] = [];
  running: RunningSnapshot | null = null;
  /** log entries up to `upTo` of assets a template change added: a snapshot already brought them */
  skips: { upTo: number; covers: (type: AssetType, name: string) => boolean }[] = [];
  closed = false;
  pumping = false;
  private again = false;
  lastHeard = Date.now();
  pingMs = 15_000;
  /** the edge's build, as its hello said */
  version = "";
  /** rows and messages waiting in the edge's outbox, as its last ping said */
  outbox = 0;
  /** adapter control commands waiting for the edge's answer */
  readonly controls = new Map<string, (r: ControlResult) => void>();
  /** what the edge handles beyond sync, as its hello said */
  features: string[] = [];
  /** relayed requests and remote operations waiting for the edge's answer */
  readonly relays = new Map<string, AnswerSink>();
  readonly ops = new Map<string, (r: { result?: unknown; error?: { kind: string; message: string } }) => void>();

  constructor(readonly hub: SyncHub, readonly ws: Socket) {}

  get key() { return `${this.edge.system_key}/${this.edge.name}`; }
  send(m: PlatformMessage) { if (!this.closed) this.ws.send(JSON.stringify(m)); }
  holdsTemplate() { return this.applied !== null && templateKey(this.applied) === templateKey(this.template); }

  private laterTimer: ReturnType<typeof setTimeout> | null = null;
  /** Changes that do not go to this edge: its position passes them a little later (an empty
   *  batch), so its cursor keeps up without every commit waking every edge. */
  later() {
    if (this.laterTimer || this.closed) return;
    this.laterTimer = setTimeout(() => { this.laterTimer = null; void this.pump(); }, CATCH_UP_MS);
    this.laterTimer.unref?.();
  }

  /** Whether a change of these assets goes to this edge (to wake only the edges it concerns). */
  wants(assets: ReadonlySet<string>) {
    for (const a of assets) {
      const [type, name] = a.split("\u0000") as [AssetType, string];
      if (goesDown(this.template, type, name, true)) return true;
    }
    return false;
  }

  /** Whether a log entry goes to this edge now. */
  private wantsEntry(r: ChangeRow): boolean {
    if (r.origin === this.edge.name) return false; // its own writes are not echoed
    const type = r.asset_type as AssetType;
    if (!goesDown(this.template, type, r.asset_name, true)) return false;
    // assets a pending template change adds come with its snapshot
    if (!this.holdsTemplate() && !goesDown(this.applied ?? [], type, r.asset_name, true)) return false;
    for (const k of this.skips) if (r.seq <= k.upTo && k.covers(type, r.asset_name)) return false;
    return true;
  }

  /** Sends the next message if none is in flight: a snapshot page or end, else log changes. */
  async pump(): Promise<void> {
    if (this.awaiting || this.closed) return;
    // a wake-up while a pump reads the log: it may have read before the new changes, so look again
    if (this.pumping) { this.again = true; return; }
    this.pumping = true;
    this.again = false;
    try {
      while (!this.running && this.jobs.length) await this.begin(this.jobs.shift()!);
      if (this.running) await this.sendSnapshot(this.running);
      else await this.sendLog();
    } catch (err) {
      this.hub.d.log.error("sync send failed", { edge: this.key, err });
      this.ws.close(1011, "sync error");
    } finally {
      this.pumping = false;
    }
    if (this.again) return this.pump();
  }

  private async begin(job: SnapshotJob) {
    const d = this.hub.d;
    const sk = this.edge.system_key;
    let scope: SnapshotScope, seq = this.cursor, template: TemplateEntry[] | null = null;
    if (job.kind === "full") {
      scope = { template: this.template, live: false };
      seq = job.seq!;
      template = this.template;
      this.sent = Math.max(this.sent, seq);
    } else if (job.kind === "diff") {
      if (this.holdsTemplate()) return;
      // what the template covers that the edge's does not; the log's entries of those assets up
      // to now are older than what the snapshot sends
      const held = this.applied ?? [];
      const added = (type: AssetType, name: string) => !goesDown(held, type, name, false);
      scope = { template: this.template, live: false, only: added };
      template = this.template;
      const upTo = await changesRepo.maxSeq(d.db, sk);
      const now = this.template;
      this.skips = this.skips.filter((k) => k.upTo > this.sent);
      this.skips.push({ upTo, covers: (type, name) => goesDown(now, type, name, false) && added(type, name) });
    } else scope = job.scope!;
    this.running = { job, gen: snapshot(d.db, sk, scope, seq, d.changes.clock.now()), seq, template, results: new Map() };
  }

  private async sendSnapshot(r: RunningSnapshot) {
    const next = await r.gen.next();
    if (!next.done) {
      this.awaiting = "page";
      this.send({ t: "batch", changes: next.value, upTo: r.seq, snapshot: true });
      return;
    }
    // the edge drops what it got from the platform of every kind that the template no longer
    // covers (a kind no longer in it included); what was made on the edge itself stays
    const keep: Record<string, string[]> = {};
    if (r.template) {
      Object.assign(keep, await covered(this.hub.d.db, this.edge.system_key, r.template));
      for (const k of DEFINITION_TYPES) keep[k] ??= [];
    }
    // a full snapshot brought every row of its collections: the edge drops the others it holds
    // (deleted here while it was away or before it was made again: their tombstones may be gone)
    const rows = r.job.kind === "full" && r.template
      ? (await collectionsRepo.list(this.hub.d.db, this.edge.system_key)).filter((c) => c.connection === null && goesDown(r.template!, "row", c.name, false)).map((c) => c.collection_id)
      : undefined;
    this.awaiting = "end";
    this.send({ t: "snapshot_end", seq: r.seq, keep, ...(rows ? { rows } : {}) });
  }

  /** The log after what was sent, filtered for this edge, in a batch of bounded size. */
  private async sendLog() {
    const h = this.hub;
    const sk = this.edge.system_key;
    const parts: string[] = [];
    let upTo = this.sent, bytes = 0, scanned = 0;
    read: for (;;) {
      const rows = await changesRepo.after(h.d.db, sk, upTo, LOG_READ);
      for (const r of rows) {
        upTo = r.seq;
        scanned++;
        if (!this.wantsEntry(r)) { if (scanned >= LOG_SCAN) break read; continue; }
        parts.push(h.wireText(r));
        bytes += (r.body?.length ?? 0) + 100;
        if (parts.length >= BATCH_CHANGES || bytes >= BATCH_BYTES || scanned >= LOG_SCAN) break read;
      }
      if (rows.length < LOG_READ) break;
    }
    if (upTo === this.sent) return;
    this.sent = upTo;
    this.awaiting = "log";
    if (!this.closed) this.ws.send(`{"t":"batch","changes":[${parts.join(",")}],"upTo":${upTo},"snapshot":false}`);
  }

  /** Queues bringing the edge to its template, unless that is under way. */
  wantTemplate() {
    if (this.holdsTemplate()) return;
    const busy = this.jobs.some((j) => j.kind === "diff" || j.kind === "full") || (this.running && this.running.template !== null);
    if (!busy) this.jobs.push({ kind: "diff" });
  }
}

export class SyncHub {
  private readonly sessions = new Map<string, EdgeSession>();
  private readonly bySystem = new Map<string, Set<EdgeSession>>();
  private readonly bySocket = new WeakMap<Socket, EdgeSession>();
  private compactor: ReturnType<typeof setInterval> | null = null;
  private sweeper: ReturnType<typeof setInterval> | null = null;
  private offCommitted: (() => void) | null = null;
  /** log entries as wire text, by sequence number (an LruMap: dropping a plain Map's first key
   *  was the platform's largest cost of sending the log) */
  private readonly wire = new LruMap<number, string>(WIRE_CACHE);
  /** how far ahead of the platform's clock an edge's clock was (ms), at its last hello */
  private readonly skews = new Map<string, number>();
  /** edges refused at their last hello for the protocol they speak: why, and when */
  private readonly refused = new Map<string, { reason: string; at: string }>();
  /** per refused edge (by system key and name as its hello gave them): when it was last logged
   *  and its record last updated, and how many refusals followed unlogged */
  private readonly refusals = new LruMap<string, { why: string; loggedAt: number; more: number; recordedAt: number; recordedWhy: string }>(10_000);

  /** relayed messages for one edge that was connected to no node, or whose link was too far
   *  behind (/metrics) */
  relayDropped = 0;

  constructor(readonly d: HubDeps) {
    d.signals.on("edge.changed", ({ systemKey: sk, edge, what }) => {
      if (what !== "deleted") this.d.changes.addSystemWithEdges(sk);
      const s = this.sessions.get(`${sk}/${edge}`);
      if (!s) return;
      if (what === "deleted") { s.ws.close(4001, "edge deleted"); return; }
      if (what === "template") void this.retemplate(s);
    });
  }

  /** set in a cluster: reaches the edges other nodes hold */
  private get elsewhere(): ElsewhereHub | null { return this.d.elsewhere.get(); }

  async start() {
    // the edges this node held before it restarted (other nodes' edges stay theirs)
    await clusterRepo.releaseEdgesOf(this.d.db, this.d.nodeId);
    const keys = (await systemsRepo.all(this.d.db)).map((s) => s.system_key);
    const withEdges: string[] = [];
    for (const k of keys) if ((await edgesRepo.all(this.d.db, k)).length) withEdges.push(k);
    this.d.changes.setSystemsWithEdges(withEdges);
    this.offCommitted = this.d.changes.onCommitted((sk, assets) => this.wake(sk, assets));
    this.d.edgeLinks.attach({
      lagOf: (sk, edge) => this.lag(sk, edge),
      // in a cluster, an edge this node does not hold: its record says (the node holding it keeps it)
      liveOf: (sk, edge) => (this.isConnected(sk, edge) ? true : this.elsewhere ? null : false),
      skewOf: (sk, edge) => this.skews.get(`${sk}/${edge}`) ?? null,
    });
    // a named template that cannot be used gives its edges nothing: said at start, not only when assigned
    for (const problem of this.d.edges.namedTemplateProblems()) this.d.log.warn("a named edge template cannot be used", { problem });
    this.compactor = setInterval(() => this.compact().catch((err) => this.d.log.warn("change log compaction failed", { err })), this.d.compactMs);
    this.compactor.unref();
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
    this.sweeper.unref();
  }

  stop() {
    if (this.compactor) clearInterval(this.compactor);
    if (this.sweeper) clearInterval(this.sweeper);
    this.offCommitted?.();
    for (const s of this.sessions.values()) { s.closed = true; s.ws.close(1001, "platform stopping"); }
    this.sessions.clear();
    this.bySystem.clear();
  }

  /** New changes of these assets are in a system's log (committed here or on another node):
   *  the sessions of edges they go to send them. */
  wake(sk: string, assets: ReadonlySet<string>) {
    for (const s of this.bySystem.get(sk) ?? []) if (s.wants(assets)) void s.pump(); else s.later();
  }

  /** A log entry as the text a batch carries (its body is stored as JSON already). */
  wireText(r: ChangeRow): string {
    let t = this.wire.get(r.seq);
    if (t === undefined) {
      t = `{"seq":${r.seq},"type":${JSON.stringify(r.asset_type)},"name":${JSON.stringify(r.asset_name)},"item":${JSON.stringify(r.item_id)},"op":${JSON.stringify(r.op)},"hlc":${JSON.stringify(r.hlc)},${r.version ? `"version":${r.version},` : ""}"body":${r.body ?? "null"}}`;
      this.wire.set(r.seq, t);
    }
    return t;
  }

  // ---- the channel ----------------------------------------------------------------------------

  open(ws: Socket) { this.bySocket.set(ws, new EdgeSession(this, ws)); }

  async message(ws: Socket, raw: unknown) {
    const s = this.bySocket.get(ws);
    if (!s || s.closed) return;
    s.lastHeard = Date.now();
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
      if (m.t === "ping") {
        s.send({ t: "pong" });
        if (m.outbox !== undefined) s.outbox = m.outbox;
        await edgesRepo.update(this.d.db, s.edge.system_key, s.edge.name, { last_talked: nowSeconds() });
        // entries that go to no edge of this one's template were not woken for: pass over them now
        await s.pump();
      }
      if (m.t === "control_result") { const done = s.controls.get(m.id); s.controls.delete(m.id); done?.({ err: m.err, command: m.command, output: m.output }); }
      if (m.t === "response") s.relays.get(m.id)?.head(m.status, m.headers);
      if (m.t === "response_body") {
        const sink = s.relays.get(m.id);
        if (sink && (!sink.chunk(m.chunk) || m.end)) {
          if (m.cut) sink.cut(); else sink.end();
          s.relays.delete(m.id);
          if (!m.end) s.send({ t: "request_cancel", id: m.id });
        }
      }
      if (m.t === "op_result") { const done = s.ops.get(m.id); s.ops.delete(m.id); done?.(m); }
    } catch (err) {
      this.d.log.error("sync message failed", { edge: s.edge ? s.key : "?", err });
      ws.close(1011, "sync error");
    }
  }

  private reject(s: EdgeSession, message: string) {
    s.send({ t: "error", message, reason: "message" });
    s.ws.close(4000, message.slice(0, 100));
  }

  /** Refuses an edge's hello: tells the edge `message` and what kind of refusal it is, logs `why`
   *  (said precisely here: the edge is told no more than it needs) as `reason`, at once and then
   *  once per --sync-log-ms per edge with the count in between, and keeps `why` and when on the
   *  edge's record when it has one (written when it changes, else at most every REFUSAL_RECORD_MS).
   *  Every refusal of a hello goes through here (a version refusal too). */
  private async refuse(s: EdgeSession, who: string, edge: EdgeRow | undefined, reason: RefusalReason, message: string, why: string, fields: Record<string, unknown> = {}, logMsg = "edge refused") {
    const now = Date.now();
    let r = this.refusals.get(who);
    if (!r || r.why !== why || now - r.loggedAt >= this.d.logMs) {
      this.d.log.warn(logMsg, { edge: who, reason: why, ...(s.ws.remote ? { from: s.ws.remote } : {}), ...(r?.more ? { refusedSinceLastLine: r.more } : {}), ...fields });
      r = { why, loggedAt: now, more: 0, recordedAt: r?.recordedAt ?? 0, recordedWhy: r?.recordedWhy ?? "" };
      this.refusals.set(who, r);
    } else r.more++;
    if (edge && (r.recordedWhy !== why || now - r.recordedAt >= REFUSAL_RECORD_MS)) {
      r.recordedAt = now;
      r.recordedWhy = why;
      await edgesRepo.update(this.d.db, edge.system_key, edge.name, { last_refusal: why, last_refusal_at: nowSeconds() });
    }
    s.send({ t: "error", message, reason });
    s.ws.close(4000, message.slice(0, 100));
  }

  async close(ws: Socket, code?: number, reason?: string) {
    const s = this.bySocket.get(ws);
    if (!s || !s.edge) return;
    s.closed = true;
    if (code === PROTOCOL_REFUSED_CLOSE) {
      // the edge refused this platform's protocol: its reason is shown here as at the edge
      const why = `the edge refused this platform: ${reason || "sync protocol version"}`;
      this.refused.set(s.key, { reason: why, at: nowIso() });
      this.d.log.warn("edge refused this platform: its sync protocol is not one the edge speaks", { edge: s.key, reason: reason ?? "", version: s.version });
      // and on the edge's record, as a refusal by the platform is
      await edgesRepo.update(this.d.db, s.edge.system_key, s.edge.name, { last_refusal: why, last_refusal_at: nowSeconds() });
    }
    for (const [id, done] of s.controls) { s.controls.delete(id); done({ err: true, command: "", output: `edge '${s.edge.name}' disconnected before it answered` }); }
    for (const [id, sink] of s.relays) { s.relays.delete(id); sink.fail(fail("EDGE_OFFLINE", `edge '${s.edge.name}' disconnected before it answered`)); }
    for (const [id, done] of s.ops) { s.ops.delete(id); done({ error: { kind: "EDGE_OFFLINE", message: `edge '${s.edge.name}' disconnected before it answered` } }); }
    if (this.sessions.get(s.key) !== s) return;
    this.sessions.delete(s.key);
    this.bySystem.get(s.edge.system_key)?.delete(s);
    // only while this node holds it: the edge may have moved to another node meanwhile
    await clusterRepo.releaseEdge(this.d.db, s.edge.system_key, s.edge.name, this.d.nodeId, nowSeconds());
    this.d.events.emit("StartConnectDisconnect::EdgeDisconnectedOnPlatform", s.edge.system_key, { edgeName: s.edge.name });
    this.d.log.info("edge disconnected", { edge: s.key });
  }

  /** Ends sessions whose edge has been silent for two ping periods (a link that dropped without
   *  closing: a TCP connection through a dead route never says so). */
  private sweep() {
    const now = Date.now();
    for (const s of this.sessions.values()) {
      if (now - s.lastHeard <= 2 * s.pingMs + SWEEP_MS) continue;
      this.d.log.warn("edge silent, link dropped", { edge: s.key, silentMs: now - s.lastHeard });
      if (s.ws.terminate) s.ws.terminate(); else s.ws.close(4003, "silent");
      void this.close(s.ws).catch((err) => this.d.log.warn("closing a silent session failed", { err }));
    }
  }

  private async hello(s: EdgeSession, m: Extract<EdgeMessage, { t: "hello" }>) {
    if (s.edge) return this.reject(s, "hello twice");
    const { edge, tokenOk } = await this.d.edges.authenticate(m.systemKey, m.edge, m.token);
    const who = `${m.systemKey}/${m.edge}`;
    // the edge is not told which of the two it got wrong; the platform's log and record say
    if (!edge) return this.refuse(s, `${m.systemKey}/?`, undefined, "credentials", "unknown edge or wrong token", `no edge '${m.edge}' in system ${m.systemKey}`, { edgeName: m.edge, version: m.version });
    if (!tokenOk) return this.refuse(s, who, edge, "credentials", "unknown edge or wrong token", "wrong token", { version: m.version });
    // an edge speaking a protocol this platform does not: refused, and its status says why
    const refusal = protocolRefusal(m.protocol, "edge");
    if (refusal) {
      this.refused.set(who, { reason: refusal, at: nowIso() });
      await edgesRepo.update(this.d.db, edge.system_key, edge.name, { last_talked: nowSeconds(), last_seen_version: m.version });
      return this.refuse(s, who, edge, "protocol", refusal, refusal, { protocol: m.protocol, version: m.version }, "edge refused: its sync protocol is not one this platform speaks");
    }
    this.refused.delete(who);
    const system = await systemsRepo.byKey(this.d.db, m.systemKey);
    const owner = system && (await developersRepo.byId(this.d.db, system.owner_id));
    if (!system || !owner) return this.refuse(s, who, edge, "system", "unknown system", "the edge's system has no owner");
    const sk = edge.system_key;
    s.edge = edge;
    s.pingMs = m.pingMs;
    s.version = m.version;
    s.outbox = m.outbox;
    s.features = m.features;
    s.template = await this.d.edges.templateOf(this.d.db, sk, edge);
    s.applied = edge.applied_template === null ? null : edge.applied_template === "*" ? s.template : JSON.parse(edge.applied_template) as TemplateEntry[];
    const old = this.sessions.get(s.key);
    if (old && old !== s) { old.closed = true; old.ws.close(4002, "replaced by a new connection"); this.bySystem.get(sk)?.delete(old); }
    this.sessions.set(s.key, s);
    if (!this.bySystem.has(sk)) this.bySystem.set(sk, new Set());
    this.bySystem.get(sk)!.add(s);
    this.d.changes.addSystemWithEdges(sk);
    const now = nowSeconds();
    await edgesRepo.update(this.d.db, sk, edge.name, {
      is_connected: 1, first_talked: edge.first_talked ?? now, last_talked: now, last_seen_version: m.version, last_seen_os: m.os, last_seen_architecture: m.arch,
    });
    await clusterRepo.holdEdge(this.d.db, sk, edge.name, this.d.nodeId);
    // the clocks: the edge's stamp counts (within the accepted skew), and how far off it is shows
    if (m.hlc) this.d.changes.clock.observe(m.hlc);
    if (m.time !== undefined) this.skews.set(s.key, Math.round(m.time - Date.now()));
    const { head, valid } = await this.position(sk, m.cursor, m.synced, m.incarnation, edge.incarnation);
    // a new edge, one that held another incarnation of its record, or one whose position the log
    // no longer holds, starts from a full snapshot
    const full = !valid;
    s.cursor = full ? 0 : m.cursor;
    s.sent = full ? head : m.cursor;
    // the edge's own word on how far it got (its last acknowledgement may not have arrived) and
    // on what failed (the same), before anything else is sent
    await this.d.db.tx(async (tx) => {
      if (!full) await edgesRepo.update(tx, sk, edge.name, { cursor: m.cursor });
      const at = nowIso();
      const failedNow = new Map((await statusRepo.failedFor(tx, sk, edge.name)).map((r) => [`${r.asset_type}\u0000${r.asset_name}`, r.desired_version]));
      for (const f of m.failures) {
        const type = f.type === "row" ? "collection_rows" : f.type;
        // a failure already recorded (its acknowledgement arrived) counts once
        const version = await this.versionOf(tx, sk, f);
        if (failedNow.get(`${type}\u0000${f.name}`) !== version) await statusRepo.failed(tx, sk, edge.name, type, f.name, version, (f.error ?? "").slice(0, 2000), at);
      }
    });
    // the owner's profile only: no password hash, no admin right (see Developers.authenticate)
    s.send({ t: "welcome", system: system as unknown as Record<string, unknown>, owner: developerProfile(owner), template: s.template, snapshot: full, seq: head,
      incarnation: edge.incarnation, hlc: this.d.changes.clock.now(), protocol: CLAIMED_PROTOCOL, version: BUILD, templateName: edge.template });
    if (full) s.jobs.push({ kind: "full", seq: head });
    else {
      // a template changed while the edge was away: what it added comes, what it dropped goes
      s.wantTemplate();
      // deploy-mode assets are copied at every start of the edge
      const deploy = s.template.filter((e) => e.mode === "deploy");
      if (m.fresh && deploy.length) s.jobs.push({ kind: "deploy", scope: { template: deploy, live: false } });
    }
    this.d.events.emit("StartConnectDisconnect::EdgeConnectedOnPlatform", sk, { edgeName: edge.name });
    this.d.log.info("edge connected", { edge: s.key, cursor: m.cursor, snapshot: full, template: !s.holdsTemplate() });
    await s.pump();
  }

  /** The log's head for a system, and whether an edge's cursor is a position the log still
   *  serves: one this platform handed out (not past the head), of the edge record's incarnation,
   *  not older than what compaction dropped. */
  private async position(sk: string, cursor: number, synced: boolean, edgeIncarnation: string, incarnation: string) {
    const maxSeq = await changesRepo.maxSeq(this.d.db, sk);
    // compacted by a version that did not record its horizon: the log's first entry says
    const horizon = (await changesRepo.horizon(this.d.db, sk)) ?? Math.max(0, (await changesRepo.minSeq(this.d.db, sk)) - 1);
    const head = Math.max(maxSeq, horizon);
    const valid = (edgeIncarnation === "" || edgeIncarnation === incarnation) && (cursor > 0 || synced) && cursor >= horizon && cursor <= head;
    return { head, horizon, valid };
  }

  private async ack(s: EdgeSession, m: Extract<EdgeMessage, { t: "ack" }>) {
    const at = nowIso();
    const sk = s.edge.system_key, edge = s.edge.name;
    const was = s.awaiting;
    s.awaiting = null;
    const r = s.running;
    if (was === "page" && r) {
      // a snapshot's outcomes count once it is whole
      for (const x of m.results) r.results.set(`${x.type}\u0000${x.name}`, x);
    } else if (was === "end" && r) {
      await this.d.db.tx(async (tx) => {
        await this.record(tx, s, [...r.results.values()], at);
        if (r.template) await edgesRepo.snapshotDone(tx, sk, edge, s.edge.incarnation, JSON.stringify(r.template), r.job.kind === "full" ? r.seq : null);
        if (r.job.kind === "full") await edgesRepo.update(tx, sk, edge, { last_talked: nowSeconds() });
      });
      if (r.template) s.applied = r.template;
      if (r.job.kind === "full") s.cursor = r.seq;
      s.running = null;
      // the template changed again meanwhile
      s.wantTemplate();
    } else if (was === "log") {
      await this.d.db.tx(async (tx) => {
        await this.record(tx, s, m.results, at);
        // never past what was sent (an acknowledgement of something else is not a position)
        if (m.upTo > s.cursor && m.upTo <= s.sent) {
          s.cursor = m.upTo;
          await edgesRepo.update(tx, sk, edge, { cursor: m.upTo, last_talked: nowSeconds() });
        }
      });
    }
    await s.pump();
  }

  private async record(tx: Executor, s: EdgeSession, results: AssetResult[], at: string) {
    const sk = s.edge.system_key, edge = s.edge.name;
    for (const r of results) {
      const type = r.type === "row" ? "collection_rows" : r.type;
      const version = await this.versionOf(tx, sk, r);
      if (r.error) await statusRepo.failed(tx, sk, edge, type, r.name, version, r.error.slice(0, 2000), at);
      else await statusRepo.applied(tx, sk, edge, type, r.name, version, at);
    }
  }

  /** The asset version an edge's result is about: as the change carried it and the edge echoes
   *  it, else the version of the log entry at its position, else (a snapshot's position, or an
   *  entry compacted away) the asset's current version. */
  private async versionOf(ex: Executor, sk: string, r: AssetResult): Promise<number> {
    if (r.version) return r.version;
    return (await changesRepo.versionAt(ex, sk, r.seq, r.type, r.name)) || changesRepo.versionOf(ex, sk, r.type, r.name);
  }

  /** Rows and messages an edge sends up: applied (last writer wins) and passed on to other edges.
   *  A write that lost sends the winner back to its writer (through the log, to every edge). A
   *  stamp too far ahead of the platform's clock is refused: the write is stamped again by the
   *  platform, and its writer takes the new stamp. */
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
        const { replaces: _none, ...change } = body; // only the platform stamps a write again
        const list = rowsByCollection.get(change.collection_id) ?? [];
        list.push(change);
        rowsByCollection.set(change.collection_id, list);
      } else if (typeof body.topic === "string" && typeof body.payload === "string" && publishable(body.topic)
        && (relayTarget(body.topic) !== null || relays.some((f) => topicMatches(f, body.topic as string)))) {
        messages.push(body as { topic: string; payload: string; qos: number });
      }
    }
    const touched: string[] = [];
    let refused = 0, ahead = 0;
    await this.d.db.tx(async (tx) => {
      const clock = this.d.changes.clock;
      for (const [id, changes] of rowsByCollection) {
        const c = await collectionsRepo.byId(tx, id);
        // only collections this edge may write to the platform
        if (!c || c.system_key !== sk || !upCollections(s.template, [c.name]).length) continue;
        const restamped: RowChange[] = [];
        const stamped = changes.map((ch) => {
          ch.collection = c.name;
          if (clock.observe(ch.hlc)) return ch;
          refused++;
          ahead = Math.max(ahead, clock.aheadBy(ch.hlc));
          const again = { ...ch, hlc: clock.now(), replaces: ch.hlc };
          restamped.push(again);
          return again;
        });
        const columns = await collectionsRepo.columns(tx, id);
        const { applied, lost } = await applyRows(tx, id, columns, stamped);
        const again = new Set(restamped);
        // other edges get what took effect; a write stamped again goes to its writer too
        await this.d.changes.rows(tx, sk, applied.filter((a) => !again.has(a)), s.edge.name);
        await this.d.changes.rows(tx, sk, applied.filter((a) => again.has(a)), "");
        if (lost.length) await this.d.changes.rows(tx, sk, await this.winners(tx, c.name, id, columns, lost), "");
        touched.push(id);
      }
      await this.d.changes.saveClock(tx);
    });
    if (refused) {
      this.skews.set(s.key, Math.max(this.skews.get(s.key) ?? 0, ahead));
      this.d.log.warn("row stamps refused: the edge's clock is ahead of the platform's by more than --max-clock-skew", { edge: s.key, rows: refused, aheadMs: ahead });
    }
    for (const id of touched) this.d.collections.forgetId(id);
    const broker = this.d.broker();
    const origin: Principal = { kind: "edge", systemKey: sk, id: s.edge.name, name: s.edge.name, tokenHash: "" };
    for (const msg of messages) {
      // the topic as the edge published it: the platform's subscribers of the suffixed topic get
      // it (ClearBlade's relay), those of the bare topic do not
      const target = relayTarget(msg.topic);
      const qos = msg.qos === 1 || msg.qos === 2 ? msg.qos : 0;
      const payload = Buffer.from(msg.payload, "base64");
      // published with the edge as its origin, which the platform's own relay to edges passes
      // over: what goes on to other edges is sent from here, never back to this one
      if (!target || target.to === "platform" || target.to === "broadcast" || target.platform)
        await broker?.publish(sk, msg.topic, payload, qos, false, origin).catch((err) => this.d.log.warn("relayed message not published", { err }));
      if (target && target.to !== "platform") await this.relayDown(sk, msg.topic, payload, qos, s.edge.name);
    }
    if (m.left !== undefined) s.outbox = m.left;
    s.send({ t: "up_ack", upTo: m.items.length ? Math.max(...m.items.map((i) => i.id)) : 0 });
  }

  /** What the platform holds of rows whose incoming write lost: the row, or its delete. A lost
   *  write that was stamped again keeps naming the stamp its writer holds. */
  private async winners(tx: Executor, collection: string, id: string, columns: ColumnDef[], lost: RowChange[]): Promise<RowChange[]> {
    const byItem = new Map(lost.map((l) => [l.item_id, l]));
    const ids = [...byItem.keys()];
    const out: RowChange[] = [];
    const names = ["item_id", ...columns.map((x) => x.name)];
    for (let i = 0; i < ids.length; i += 500) {
      for (const r of await collectionsRepo.byIds(tx, id, names, ids.slice(i, i + 500))) {
        const { _hlc, ...stored } = r;
        const l = byItem.get(r.item_id as string)!;
        byItem.delete(l.item_id);
        out.push({ collection_id: id, collection, item_id: l.item_id, op: "upsert", values: wireValues(columns, stored), hlc: (_hlc as string | null) ?? "", ...(l.replaces ? { replaces: l.replaces } : {}) });
      }
    }
    const tombs = await tombstonesRepo.forItems(tx, id, [...byItem.keys()]);
    for (const [item, l] of byItem) {
      const hlc = tombs.get(item);
      if (hlc) out.push({ collection_id: id, collection, item_id: item, op: "delete", values: null, hlc, ...(l.replaces ? { replaces: l.replaces } : {}) });
    }
    return out;
  }

  private async retemplate(s: EdgeSession) {
    s.edge = (await edgesRepo.get(this.d.db, s.edge.system_key, s.edge.name)) ?? s.edge;
    s.template = await this.d.edges.templateOf(this.d.db, s.edge.system_key, s.edge);
    s.send({ t: "template", template: s.template, templateName: s.edge.template });
    // what the change added comes as a snapshot, what it dropped goes at its end
    s.wantTemplate();
    await s.pump();
  }

  // ---- relay to edges ---------------------------------------------------------------------------

  /** A message published on this node whose suffix names edges (_edge/<name>, _broadcast,
   *  _edgeAndPlatform/<name>; see relay.ts) goes to them, topic unchanged: to those connected
   *  here, and through the cluster to those connected to other nodes; never to the edge it came
   *  from (`from`). Live only, as ClearBlade's relay: an edge connected to no node does not get it. */
  relayDown(sk: string, topic: string, payload: Buffer, qos: number, from = ""): Promise<void> | undefined {
    // every publish on the platform comes here: most leave at once, without a promise
    const target = relayTarget(topic);
    if (!target || target.to === "platform" || !this.d.changes.logs(sk)) return;
    const text = JSON.stringify({ t: "relay", topic, payload: payload.toString("base64"), qos } satisfies PlatformMessage);
    if (target.to === "broadcast") {
      this.deliverHere(sk, "", from, text);
      return this.elsewhere?.relayMessage(sk, "", from, text).then(() => {});
    }
    if (target.edge === from || this.deliverHere(sk, target.edge, "", text)) return;
    if (!this.elsewhere) { this.relayDropped++; return; }
    return this.elsewhere.relayMessage(sk, target.edge, "", text).catch(() => false).then((sent) => { if (!sent) this.relayDropped++; });
  }

  /** Sends a relayed message to the edge `edge` of a system if connected here (with `edge` "":
   *  to each edge of the system connected here but `except`); whether one was. */
  deliverHere(sk: string, edge: string, except: string, text: string): boolean {
    let sent = false;
    for (const s of edge ? [this.sessions.get(`${sk}/${edge}`)] : this.bySystem.get(sk) ?? []) {
      if (!s || s.closed || !s.edge || s.edge.name === except) continue;
      sent = true;
      if ((s.ws.buffered?.() ?? 0) > RELAY_BUFFER_MAX) { this.relayDropped++; continue; }
      s.ws.send(text);
    }
    return sent;
  }

  // ---- adapter control ------------------------------------------------------------------------

  /** Sends a control command to a connected edge and waits for its answer, never longer than the
   *  command's own limit plus a margin; an edge that is not connected answers at once. */
  async control(sk: string, edge: string, req: { adapter: ControlAdapter; command: ControlCommand; files?: ControlFile[]; timeoutMs: number }): Promise<ControlResult> {
    const s = this.sessions.get(`${sk}/${edge}`);
    if ((!s || s.closed) && this.elsewhere) { const r = await this.elsewhere.control(sk, edge, req); if (r) return r; }
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

  // ---- fleet control: relayed requests, remote operations ------------------------------------

  /** The live session of an edge that handles fleet control, here; null when another node (or
   *  none) holds its link. An edge too old for it is refused at once. */
  private fleetSession(sk: string, edge: string): EdgeSession | null {
    const s = this.sessions.get(`${sk}/${edge}`);
    if (!s || s.closed) return null;
    if (!s.features.includes(FLEET_FEATURE)) throw fail("EDGE_UNSUPPORTED", `edge '${edge}' runs ${s.version || "a version"} that does not take relayed requests or remote operations`);
    return s;
  }

  /** Relays an API request to an edge, wherever its link is held, and gives the edge's answer as it
   *  comes: its head once the edge sends it, then its body in a stream. The request body goes in
   *  chunks as it is read. An edge that is not connected, stays silent longer than the request's
   *  limit, or drops its link is an error, never a wait. */
  async relay(sk: string, edge: string, req: RelayRequest): Promise<RelayedAnswer> {
    const s = this.fleetSession(sk, edge);
    if (!s) {
      if (this.elsewhere) {
        const body = req.body instanceof Uint8Array || req.body === null ? req.body : await wholeBody(req.body);
        const r = await this.elsewhere.relay(sk, edge, { ...req, body });
        if (r) return r;
      }
      throw fail("EDGE_OFFLINE", `edge '${edge}' is not connected`);
    }
    const id = newUuid();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const done = () => { clearTimeout(timer); s.relays.delete(id); };
    const sink: AnswerSink = new AnswerSink(() => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        if (!s.relays.has(id)) return;
        done();
        s.send({ t: "request_cancel", id });
        sink.fail(fail("EDGE_TIMEOUT", `edge '${edge}' did not answer within ${Math.round(req.timeoutMs / 1000)} s`));
      }, req.timeoutMs);
    });
    s.relays.set(id, sink);
    sink.onActivity();
    // a failure while the body still goes up is read below
    sink.answer.catch(() => {});
    s.send({ t: "request", id, method: req.method, path: req.path, headers: req.headers, caller: req.caller });
    const send = (chunk: Uint8Array, end: boolean) => s.send({ t: "request_body", id, chunk: Buffer.from(chunk).toString("base64"), end });
    if (req.body instanceof Uint8Array) {
      if (req.body.byteLength > BODY_MAX_BYTES) { done(); s.send({ t: "request_cancel", id }); throw fail("PAYLOAD_TOO_LARGE", `a request relayed to an edge carries at most ${BODY_MAX_BYTES} bytes`); }
      await chunked(new Blob([req.body]).stream(), BODY_MAX_BYTES, (c) => send(c, false));
    } else if (!(await chunked(req.body, BODY_MAX_BYTES, (c) => send(c, false)))) {
      done();
      s.send({ t: "request_cancel", id });
      throw fail("PAYLOAD_TOO_LARGE", `a request relayed to an edge carries at most ${BODY_MAX_BYTES} bytes`);
    }
    send(new Uint8Array(0), true);
    try {
      const answer = await sink.answer;
      // the limit also holds between chunks; the wait ends with the body
      const reader = answer.body.getReader();
      const body = new ReadableStream<Uint8Array>({
        pull: async (c) => {
          try {
            const { done: end, value } = await reader.read();
            if (end) { done(); c.close(); } else c.enqueue(value);
          } catch (err) { done(); c.error(err); }
        },
        cancel: () => { if (s.relays.has(id)) { done(); s.send({ t: "request_cancel", id }); } },
      });
      return { ...answer, body };
    } catch (err) {
      done();
      throw err;
    }
  }

  /** Runs a remote operation on an edge, wherever its link is held, waiting at most `timeoutMs`. */
  async op(sk: string, edge: string, op: EdgeOp, timeoutMs: number): Promise<unknown> {
    const s = this.fleetSession(sk, edge);
    if (!s) {
      const r = this.elsewhere ? await this.elsewhere.op(sk, edge, op, timeoutMs) : null;
      if (r) return r.result;
      throw fail("EDGE_OFFLINE", `edge '${edge}' is not connected`);
    }
    const id = newUuid();
    const r = await new Promise<{ result?: unknown; error?: { kind: string; message: string } }>((resolve) => {
      const timer = setTimeout(() => { s.ops.delete(id); resolve({ error: { kind: "EDGE_TIMEOUT", message: `edge '${edge}' did not answer within ${Math.round(timeoutMs / 1000)} s` } }); }, timeoutMs);
      s.ops.set(id, (m) => { clearTimeout(timer); resolve(m); });
      s.send({ t: "op", id, ...op });
    });
    if (r.error) throw new ApiError(r.error.kind in ERROR_KINDS_OF_OPS ? r.error.kind as keyof typeof ERROR_KINDS_OF_OPS : "INVALID_ARGUMENT", r.error.message);
    return r.result;
  }

  // ---- status ---------------------------------------------------------------------------------

  /** Each edge connected to this node: changes it has not acknowledged and its outbox size (as
   *  its last ping said), for /metrics. */
  async linkMetrics(): Promise<{ systemKey: string; edge: string; lag: number; outbox: number }[]> {
    const out = [];
    for (const s of this.sessions.values()) {
      if (s.closed || !s.edge) continue;
      const lag = (await changesRepo.countAfter(this.d.db, s.edge.system_key, s.cursor)) + (s.running?.job.kind === "full" ? 1 : 0);
      out.push({ systemKey: s.edge.system_key, edge: s.edge.name, lag, outbox: s.outbox });
    }
    return out;
  }

  /** The edges connected to this node, with the outbox size each last reported (no database
   *  work: read on every scrape of /metrics). */
  connectedEdges(): { systemKey: string; edge: string; outbox: number }[] {
    const out = [];
    for (const s of this.sessions.values()) if (!s.closed && s.edge) out.push({ systemKey: s.edge.system_key, edge: s.edge.name, outbox: s.outbox });
    return out;
  }

  /** Assets that failed to apply, on every edge, by type (for /metrics). */
  async failedAssets(): Promise<Record<string, number>> {
    const by: Record<string, number> = {};
    for (const r of await statusRepo.failedByType(this.d.db)) by[r.asset_type] = Number(r.n);
    return by;
  }

  /** A live session, not a stored flag: a silent link ends the session (see sweep). */
  isConnected(sk: string, edge: string) { return this.sessions.has(`${sk}/${edge}`); }

  /** What an edge is owed, from its record and each asset's latest change (never the log
   *  itself): whether it needs a full snapshot, the template it holds, the assets changed since. */
  private async owed(sk: string, edge: EdgeRow) {
    const template = await this.d.edges.templateOf(this.d.db, sk, edge);
    const held = edge.applied_template === null ? null : edge.applied_template === "*" ? template : JSON.parse(edge.applied_template) as TemplateEntry[];
    const { valid } = await this.position(sk, edge.cursor, held !== null, "", "");
    const changed = new Map<string, number>(), versions = new Map<string, number>();
    for (const r of await changesRepo.latest(this.d.db, sk)) {
      const k = `${r.asset_type === "row" ? "collection_rows" : r.asset_type}\u0000${r.asset_name}`;
      versions.set(k, r.version);
      if (r.seq > edge.cursor && goesDown(template, r.asset_type as AssetType, r.asset_name, false)) changed.set(k, r.seq);
    }
    return { template, held: held ?? [], full: !valid || held === null, changed, versions };
  }

  /** How many changes the edge has not acknowledged (more while it needs a snapshot). */
  async lag(sk: string, edgeName: string): Promise<number | null> {
    const e = await edgesRepo.get(this.d.db, sk, edgeName);
    if (!e) return null;
    const o = await this.owed(sk, e);
    return (await changesRepo.countAfter(this.d.db, sk, e.cursor)) + (o.full || templateKey(o.held) !== templateKey(o.template) ? 1 : 0);
  }

  /** Every asset of an edge's template with its sync state: pending while the edge has not applied
   *  its latest change (or a snapshot that brings it is not complete), failed while the edge
   *  reports it failed, synced otherwise. */
  async status(sk: string, edgeName: string): Promise<AssetStatus[]> {
    const edge = await this.d.edges.find(this.d.db, sk, edgeName);
    const o = await this.owed(sk, edge);
    const recorded = new Map((await statusRepo.forEdge(this.d.db, sk, edgeName)).map((r) => [`${r.asset_type}\u0000${r.asset_name}`, r]));
    // the edge's outbox as it last said (hello, up batches, pings): writes still to come up
    const waitingUp = (this.sessions.get(`${sk}/${edgeName}`)?.outbox ?? 0) > 0;
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
    for (const a of await this.templateAssets(sk, o.template)) add(a.type, a.name);
    // assets no longer present but still recorded (deleted on the platform) keep showing their state
    for (const r of recorded.values()) if (!seen.has(`${r.asset_type}\u0000${r.asset_name}`)) add(r.asset_type, r.asset_name);
    // an edge whose clock runs further ahead than the platform accepts has its row stamps replaced
    const refused = this.refused.get(`${sk}/${edgeName}`);
    if (refused) out.push({ asset_type: "protocol", asset_name: "version", status: "failed", desired_version: PROTOCOL_VERSION, applied_version: 0, attempts: 0, updated_at: refused.at, last_error: refused.reason, source: "", entry: "" });
    const skew = this.skews.get(`${sk}/${edgeName}`);
    if (skew !== undefined && skew > this.d.maxClockSkewMs)
      out.push({ asset_type: "clock", asset_name: "skew", status: "failed", desired_version: 0, applied_version: 0, attempts: 0, updated_at: nowIso(), source: "", entry: "",
        last_error: `the edge's clock is ${Math.round(skew / 1000)} s ahead of the platform's, more than --max-clock-skew (${Math.round(this.d.maxClockSkewMs / 1000)} s): the platform stamps the edge's row writes itself` });
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
    if (!s && this.elsewhere) { const r = await this.elsewhere.retry(sk, edgeName, only); if (r) return r; }
    const failed = only ?? (await statusRepo.failedFor(this.d.db, sk, edgeName)).map((r) => ({ type: r.asset_type, name: r.asset_name }));
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

  /** Drops log entries every edge of a system that can resume from the log has acknowledged (and
   *  the tombstones of deletes among them); keeps the log bounded. */
  async compact() {
    for (const s of await lowestCursors(this.d.db, nowSeconds() - 7 * 86_400)) {
      let low = s.low ?? Number.MAX_SAFE_INTEGER;
      // a full snapshot under way ends at its own position: the log after it must stay
      for (const x of this.bySystem.get(s.system_key) ?? []) if (x.running?.job.kind === "full") low = Math.min(low, x.running.seq);
      const max = await changesRepo.maxSeq(this.d.db, s.system_key);
      const upTo = Math.min(max, Math.max(low, max - LOG_KEEP));
      if (upTo <= 0) continue;
      // a step at a time, each its own transaction: one transaction deleting 100,000 entries held
      // every other write of the node for a second
      for (let through = 0; through < upTo;) {
        const first = await changesRepo.minSeq(this.d.db, s.system_key);
        through = first === 0 ? upTo : Math.min(upTo, Math.max(through, first - 1) + COMPACT_STEP);
        const step = through;
        await this.d.db.tx((tx) => changesRepo.compact(tx, s.system_key, step));
        if (through < upTo) await new Promise((r) => setImmediate(r));
      }
      this.d.log.debug("change log compacted", { systemKey: s.system_key, upTo, head: max });
    }
  }
}

/** The shape of a row change an edge sends up (anything else is dropped). */
function isRowChange(b: Record<string, unknown>): b is Record<string, unknown> & RowChange {
  return typeof b.collection_id === "string" && typeof b.item_id === "string" && (b.op === "upsert" || b.op === "delete") &&
    typeof b.hlc === "string" && parseHlc(b.hlc) !== null && (b.values === null || b.values === undefined || (typeof b.values === "object" && !Array.isArray(b.values)));
}
