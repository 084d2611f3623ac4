// The outbox: rows of collections that flow up and messages on relayed topics, written on this
// edge, wait here until the platform acknowledges them, sent a batch at a time; held to
// --outbox-max-mb and --outbox-max-age while the platform is out of reach.
import type { RowChange } from "../../domain/changes.ts";
import { collectionsRepo } from "../../store/collections.ts";
import { outboxRepo, snapshotSeenRepo, tombstonesRepo } from "../../store/sync.ts";
import { BATCH_BYTES } from "../protocol.ts";
import type { EdgeSyncDeps } from "./deps.ts";

/** Most items and about the most bytes sent up at once. */
const OUTBOX_BATCH = 500;
const OUTBOX_READ = 100;
/** How often the outbox is held to its bounds (--outbox-max-mb, --outbox-max-age). */
const OUTBOX_CHECK_MS = 1_000;

/** What the outbox needs of the link it sends on. */
export interface OutboxLink {
  /** the current socket (null while there is none) */
  ws(): WebSocket | null;
  /** whether the platform welcomed it */
  connected(): boolean;
  send(ws: WebSocket, m: unknown): void;
}

export class Outbox {
  private upInflight = false;
  /** the outbox's size in bytes as last measured, plus what went in since, less what went up */
  private bytes = 0;
  /** bytes of the batch waiting for the platform's acknowledgement */
  private inflightBytes = 0;
  private timer: ReturnType<typeof setInterval> | null = null;
  private trimming = false;
  /** outbox items dropped past its bounds since the process started (/metrics) */
  dropped = 0;
  /** rows of the batch waiting for the platform's acknowledgement (a full snapshot keeps them) */
  private inflightRows: { collection_id: string; item_id: string }[] = [];

  constructor(private readonly d: EdgeSyncDeps, private readonly link: OutboxLink) {}

  /** Measures the outbox and starts holding it to its bounds. */
  async start() {
    this.bytes = await outboxRepo.bytes(this.d.db);
    this.timer = setInterval(() => { void this.trim().catch((err) => this.d.log.warn("outbox bounds not checked", { err })); }, OUTBOX_CHECK_MS);
    this.timer.unref?.();
  }

  stop() { if (this.timer) clearInterval(this.timer); }

  /** The link is gone: what was in flight goes again on the next one. */
  linkLost() { this.upInflight = false; }

  /** Sends the next outbox batch (at most OUTBOX_BATCH items, about BATCH_BYTES) when connected and
   *  nothing is waiting for an acknowledgement. A row write this edge already holds a later write
   *  or delete of (its own, or the platform's) is not sent: it lost, and would only come back. */
  async send() {
    const ws = this.link.ws();
    if (!ws || !this.link.connected() || this.upInflight) return;
    this.upInflight = true;
    try {
      const items: { id: number; kind: string; body: string }[] = [];
      let bytes = 0, after = 0;
      read: for (;;) {
        const next = await outboxRepo.after(this.d.db, after, OUTBOX_READ);
        for (const i of next) {
          after = i.id;
          items.push(i);
          bytes += i.body.length + 50;
          if (items.length >= OUTBOX_BATCH || bytes >= BATCH_BYTES) break read;
        }
        if (next.length < OUTBOX_READ) break;
      }
      const stale = await this.superseded(items);
      if (stale.size) await outboxRepo.remove(this.d.db, [...stale]);
      const send = items.filter((i) => !stale.has(i.id));
      if (!send.length || this.link.ws() !== ws) { this.upInflight = false; if (stale.size && this.link.ws() === ws) void this.send(); return; }
      this.inflightBytes = send.reduce((n, i) => n + i.body.length, 0);
      this.inflightRows = send.filter((i) => i.kind === "row").map((i) => { const c = JSON.parse(i.body) as RowChange; return { collection_id: c.collection_id, item_id: c.item_id }; });
      const left = Math.max(0, (await this.size()) - send.length);
      if (this.link.ws() !== ws) { this.upInflight = false; return; }
      this.link.send(ws, { t: "up", items: send.map((i) => ({ id: i.id, kind: i.kind, body: i.body })), left });
    } catch (err) {
      this.upInflight = false;
      throw err;
    }
  }

  /** The platform has the batch in flight: it leaves the outbox, and the next goes. */
  async acked(upTo: number, fullSince: string | null) {
    // the platform has these now: a full snapshot that read their rows before keeps them
    if (fullSince) for (const [id, rows] of groupBy(this.inflightRows)) await snapshotSeenRepo.add(this.d.db, id, rows);
    this.inflightRows = [];
    await outboxRepo.ackUpTo(this.d.db, upTo);
    this.bytes = Math.max(0, this.bytes - this.inflightBytes);
    this.inflightBytes = 0;
    this.upInflight = false;
    void this.send();
  }

  /** Outbox row writes older than what the edge holds of their row. */
  private async superseded(items: { id: number; kind: string; body: string }[]): Promise<Set<number>> {
    const byCollection = new Map<string, { id: number; item: string; hlc: string }[]>();
    for (const i of items) {
      if (i.kind !== "row") continue;
      const c = JSON.parse(i.body) as RowChange;
      (byCollection.get(c.collection_id) ?? byCollection.set(c.collection_id, []).get(c.collection_id)!).push({ id: i.id, item: c.item_id, hlc: c.hlc });
    }
    const out = new Set<number>();
    for (const [collection, list] of byCollection) {
      if (!(await collectionsRepo.byId(this.d.db, collection))) continue;
      const ids = list.map((x) => x.item);
      const stamps = await collectionsRepo.stamps(this.d.db, collection, ids);
      const tombs = await tombstonesRepo.forItems(this.d.db, collection, ids);
      for (const x of list) {
        const row = stamps.get(x.item) ?? "", tomb = tombs.get(x.item) ?? "";
        if (row > x.hlc || tomb > x.hlc) out.add(x.id);
      }
    }
    return out;
  }

  size() { return outboxRepo.count(this.d.db); }

  /** Holds the outbox to --outbox-max-mb and --outbox-max-age: past either, the oldest items are
   *  dropped (they would otherwise fill the gateway's disk while the platform is out of reach),
   *  with a log line, and counted. The size is measured only when the running tally passes the
   *  bound. */
  async trim() {
    if (this.trimming) return;
    this.trimming = true;
    try {
      const db = this.d.db, { outboxMaxMb, outboxMaxAge } = this.d.config;
      this.bytes += this.d.changes.takeOutboxAdded();
      const reasons: string[] = [];
      let dropped = 0;
      const dropThrough = async (id: number) => db.tx(async (tx) => { const n = await outboxRepo.countThrough(tx, id); await outboxRepo.ackUpTo(tx, id); return n; });
      const max = outboxMaxMb * 1024 * 1024;
      if (this.bytes > max) {
        let excess = (await outboxRepo.bytes(db)) - max, through = 0;
        if (excess > 0) {
          reasons.push(`more than --outbox-max-mb (${outboxMaxMb} MB)`);
          for (let more = true; more && excess > 0;) {
            const sizes = await outboxRepo.sizesAfter(db, through, 1_000);
            more = sizes.length === 1_000;
            for (const x of sizes) { through = x.id; excess -= x.n; if (excess <= 0) break; }
          }
          dropped += await dropThrough(through);
        }
        this.bytes = await outboxRepo.bytes(db);
      }
      if (outboxMaxAge > 0) {
        const cutoff = Date.now() - outboxMaxAge * 1000;
        const oldest = await outboxRepo.oldest(db);
        if (oldest !== null && oldest < cutoff) {
          reasons.push(`older than --outbox-max-age (${outboxMaxAge} s)`);
          dropped += await dropThrough(await outboxRepo.lastBefore(db, cutoff));
          this.bytes = await outboxRepo.bytes(db);
        }
      }
      if (dropped) {
        this.dropped += dropped;
        this.d.log.warn("outbox over its bounds: the oldest items were dropped", { dropped, why: reasons.join(", "), bytes: this.bytes });
      }
    } finally {
      this.trimming = false;
    }
  }
}

/** Rows by collection. */
function groupBy(rows: { collection_id: string; item_id: string }[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const r of rows) (out.get(r.collection_id) ?? out.set(r.collection_id, []).get(r.collection_id)!).push(r.item_id);
  return out;
}
