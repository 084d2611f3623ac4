// One edge's session on the platform: what has been sent to it and what it acknowledged, and the
// next message to send (one at a time): a snapshot's page or end, else the change log after its
// position, filtered by its template.
//
// A snapshot is one unit: the edge's cursor moves past it, and what it carries shows synced, only
// once the edge acknowledged its end. An interrupted one starts over at the next hello.
import type { TemplateEntry } from "../../domain/edges.ts";
import type { EdgeRow } from "../../store/edges.ts";
import { collectionsRepo } from "../../store/collections.ts";
import { type ChangeRow, changesRepo } from "../../store/sync.ts";
import type { ControlResult } from "../../adapters/runner.ts";
import type { AssetType } from "../../domain/changes.ts";
import { DEFINITION_TYPES } from "../../core/syncKinds.ts";
import { covered, goesDown, snapshot, type SnapshotScope } from "../assets.ts";
import { BATCH_BYTES, BATCH_CHANGES, type PlatformMessage, type WireChange } from "../protocol.ts";
import type { AnswerSink } from "../fleet.ts";
import type { SharedSnapshot, SharedSnapshots, SnapshotReader } from "./snapshots.ts";
import { templateKey } from "./templateKey.ts";
import type { AssetResult, HubDeps, Socket } from "./types.ts";

/** Log entries read at a time while a batch fills, and most read for one batch (entries that do
 *  not go to the edge are passed over, and acknowledged, in an empty batch). */
const LOG_READ = 250;
const LOG_SCAN = 20 * BATCH_CHANGES;
const DONE = Promise.resolve();
/** How soon an edge's position passes log entries that do not go to it. */
const CATCH_UP_MS = 1_000;

/** What a session needs of its hub. */
export interface SessionHub {
  readonly d: HubDeps;
  /** a log entry as the text a batch carries */
  wireText(r: ChangeRow): string;
  /** the system's log after a position (a read shared by the sessions at that position) */
  logAfter(sk: string, after: number, limit: number): Promise<ChangeRow[]>;
  /** such a read's rows when it is done and the log has not moved since */
  logRead(sk: string, after: number, limit: number): ChangeRow[] | undefined;
  /** the text of a batch of every log entry after `from` up to `upTo`, when one was made */
  sameBatch(sk: string, from: number, upTo: number): string | undefined;
  keepBatch(sk: string, from: number, upTo: number, text: string): void;
  /** full snapshots shared by the edges of one template at one position */
  readonly snapshots: SharedSnapshots;
}

/** A snapshot to send: everything of the template (`full`: a new, re-created or stale edge), what
 *  a template change added (`diff`), deploy-mode assets at the edge's start (`deploy`), or
 *  assets asked for again (`retry`). */
export interface SnapshotJob { kind: "full" | "diff" | "deploy" | "retry"; scope?: SnapshotScope; seq?: number }

export interface RunningSnapshot {
  job: SnapshotJob;
  /** its pages: read for this edge alone, or a full snapshot shared with others (and where this edge is in it) */
  gen?: AsyncGenerator<WireChange[]>;
  shared?: { snap: SharedSnapshot; reader: SnapshotReader };
  /** the position the edge takes at the end */
  seq: number;
  /** the template the edge holds once done (full, diff) */
  template: TemplateEntry[] | null;
  /** outcomes per asset, recorded when the edge acknowledges the end */
  results: Map<string, AssetResult>;
}

/** A snapshot's end: what the edge keeps of each kind the template covers, and for a full one the
 *  collections whose rows it brought whole. */
async function snapshotEnd(d: HubDeps, sk: string, template: TemplateEntry[] | null, kind: SnapshotJob["kind"], seq: number): Promise<PlatformMessage> {
  // the edge drops what it got from the platform of every kind that the template no longer
  // covers (a kind no longer in it included); what was made on the edge itself stays
  const keep: Record<string, string[]> = {};
  if (template) {
    Object.assign(keep, await covered(d.db, sk, template));
    for (const k of DEFINITION_TYPES) keep[k] ??= [];
  }
  // a full snapshot brought every row of its collections: the edge drops the others it holds
  // (deleted here while it was away or before it was made again: their tombstones may be gone)
  const rows = kind === "full" && template
    ? (await collectionsRepo.list(d.db, sk)).filter((c) => c.connection === null && goesDown(template, "row", c.name, false)).map((c) => c.collection_id)
    : undefined;
  return { t: "snapshot_end", seq, keep, ...(rows ? { rows } : {}) };
}

export class EdgeSession {
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
  /** when the edge was welcomed (ms), and why the platform ends its link when it does (the
   *  link's log says it once) */
  welcomedAt = 0;
  endCause = "";
  ended = false;
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

  constructor(readonly hub: SessionHub, readonly ws: Socket) {}

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
  pump(): Promise<void> {
    if (this.awaiting || this.closed) return DONE;
    // a wake-up while a pump reads the log: it may have read before the new changes, so look again
    if (this.pumping) { this.again = true; return DONE; }
    // what most pumps of a fan-out and of its acknowledgements need was read already (shared, see
    // logAfter): sent at once, in the wake's slice, without an await per edge
    if (!this.running && !this.jobs.length) {
      try {
        const sk = this.edge.system_key;
        if (this.sendLogFrom((after) => this.hub.logRead(sk, after, LOG_READ))) return DONE;
      } catch (err) { this.failed(err); return DONE; }
    }
    return this.pumpReading();
  }

  private async pumpReading(): Promise<void> {
    this.pumping = true;
    this.again = false;
    try {
      while (!this.running && this.jobs.length) await this.begin(this.jobs.shift()!);
      if (this.running) await this.sendSnapshot(this.running);
      else await this.sendLog();
    } catch (err) {
      this.failed(err);
    } finally {
      this.pumping = false;
    }
    if (this.again) return this.pump();
  }

  private failed(err: unknown) {
    this.hub.d.log.error("sync send failed", { edge: this.key, err });
    this.endCause ||= "error on the platform";
    this.ws.close(1011, "sync error");
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
    const hlc = d.changes.clock.now();
    if (job.kind === "full") {
      // (the same for every edge of this template at this position: made once, see snapshots.ts)
      const full = template!;
      const snap = this.hub.snapshots.full(sk, full, seq, () => ({
        gen: snapshot(d.db, sk, scope, seq, hlc, d.secrets),
        end: async () => JSON.stringify(await snapshotEnd(d, sk, full, "full", seq)),
      }));
      this.running = { job, shared: { snap, reader: snap.join() }, seq, template, results: new Map() };
    } else this.running = { job, gen: snapshot(d.db, sk, scope, seq, hlc, d.secrets), seq, template, results: new Map() };
  }

  private async sendSnapshot(r: RunningSnapshot) {
    if (r.shared) {
      const { snap, reader } = r.shared;
      const page = await snap.next(reader);
      const text = page ?? await snap.end();
      if (page === null) snap.leave(reader);
      this.awaiting = page === null ? "end" : "page";
      if (!this.closed) this.ws.send(text);
      return;
    }
    const next = await r.gen!.next();
    if (!next.done) {
      this.awaiting = "page";
      this.send({ t: "batch", changes: next.value, upTo: r.seq, snapshot: true });
      return;
    }
    this.awaiting = "end";
    this.send(await snapshotEnd(this.hub.d, this.edge.system_key, r.template, r.job.kind, r.seq));
  }

  /** The link is gone: a shared snapshot no longer keeps pages for it. */
  dropped() { if (this.running?.shared) this.running.shared.snap.leave(this.running.shared.reader); }

  /** The log after what was sent, filtered for this edge, in a batch of bounded size. */
  private async sendLog() {
    const sk = this.edge.system_key;
    const got = new Map<number, ChangeRow[]>();
    for (;;) {
      let missing = -1;
      const read = (after: number) => got.get(after) ?? this.hub.logRead(sk, after, LOG_READ) ?? ((missing = after), undefined);
      if (this.sendLogFrom(read)) return;
      got.set(missing, await this.hub.logAfter(sk, missing, LOG_READ));
    }
  }

  /** sendLog with the log's reads at hand: false (and nothing sent) when one is not. */
  private sendLogFrom(logRead: (after: number) => ChangeRow[] | undefined): boolean {
    const h = this.hub;
    const sk = this.edge.system_key;
    const parts: string[] = [];
    let upTo = this.sent, bytes = 0, scanned = 0;
    read: for (;;) {
      const rows = logRead(upTo);
      if (!rows) return false;
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
    if (upTo === this.sent) return true;
    // a batch of every entry between two positions is the same text for every edge sent it
    const whole = parts.length === scanned;
    let text = whole ? h.sameBatch(sk, this.sent, upTo) : undefined;
    if (text === undefined) {
      text = `{"t":"batch","changes":[${parts.join(",")}],"upTo":${upTo},"snapshot":false}`;
      if (whole) h.keepBatch(sk, this.sent, upTo, text);
    }
    this.sent = upTo;
    this.awaiting = "log";
    if (!this.closed) this.ws.send(text);
    return true;
  }

  /** Queues bringing the edge to its template, unless that is under way. */
  wantTemplate() {
    if (this.holdsTemplate()) return;
    const busy = this.jobs.some((j) => j.kind === "diff" || j.kind === "full") || (this.running && this.running.template !== null);
    if (!busy) this.jobs.push({ kind: "diff" });
  }
}
