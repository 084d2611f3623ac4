// What the platform's sync steps share: the sessions this node holds (by edge, by system, by
// socket), what it knows of each edge beyond them, and the log entries as wire text.
import { LruMap } from "../../core/cache.ts";
import { isDefinitionType } from "../../core/syncKinds.ts";
import { KINDS } from "../kinds/index.ts";
import { type ChangeRow, changesRepo } from "../../store/sync.ts";
import type { EdgeSession, SessionHub } from "./session.ts";
import type { ElsewhereHub, HubDeps, Socket } from "./types.ts";
import { HelloReads } from "./known.ts";
import { SharedSnapshots } from "./snapshots.ts";
import { EdgeWrites } from "./writes.ts";

/** Log entries kept as wire text, shared by the sessions of a system's edges. */
const WIRE_CACHE = 20_000;
/** Reads of one system's log kept until its next change (its sessions are at a few positions). */
const LOG_READS = 1_000;

/** A system's reads of its log since it last moved: under way, and done. */
interface LogReads { reading: Map<string, Promise<ChangeRow[]>>; read: Map<string, ChangeRow[]> }

export class HubState implements SessionHub {
  readonly sessions = new Map<string, EdgeSession>();
  readonly bySystem = new Map<string, Set<EdgeSession>>();
  readonly bySocket = new WeakMap<Socket, EdgeSession>();
  /** log entries as wire text, by sequence number (an LruMap: dropping a plain Map's first key
   *  was the platform's largest cost of sending the log) */
  readonly wire = new LruMap<number, string>(WIRE_CACHE);
  /** how far ahead of the platform's clock an edge's clock was (ms), at its last hello */
  readonly skews = new Map<string, number>();
  /** edges refused at their last hello for the protocol they speak: why, and when */
  readonly refused = new Map<string, { reason: string; at: string }>();
  /** per refused edge (by system key and name as its hello gave them): when it was last logged
   *  and its record last updated, and how many refusals followed unlogged */
  readonly refusals = new LruMap<string, { why: string; loggedAt: number; more: number; recordedAt: number; recordedWhy: string }>(10_000);

  /** relayed messages for one edge that was connected to no node, or whose link was too far
   *  behind (/metrics) */
  relayDropped = 0;

  /** the hub is stopping: a link's close leaves the edge's release to the stop (one statement) */
  private stoppingNow = false;
  get stopping() { return this.stoppingNow; }
  beginStop() { this.stoppingNow = true; }
  /** links' closes whose writes are under way (a stop waits for them before the database goes) */
  readonly closing = new Set<Promise<void>>();

  /** positions, outcomes and last_talked waiting to be written together */
  readonly writes: EdgeWrites;

  /** reads of each system's log after a position, shared by its sessions until the log moves:
   *  a change that wakes thousands of edges at the same position is read once, and so is the
   *  empty read each of them makes after acknowledging it */
  private readonly logReads = new Map<string, LogReads>();

  /** what a hello reads, kept in memory */
  readonly reads: HelloReads;

  /** full snapshots shared by the edges of one template at one position */
  readonly snapshots = new SharedSnapshots();

  constructor(readonly d: HubDeps) { this.writes = new EdgeWrites(d); this.reads = new HelloReads(d); }

  /** The system's log entries after `after`, at most `limit` (the rows are shared: read only). */
  logAfter(sk: string, after: number, limit: number): Promise<ChangeRow[]> {
    let reads = this.logReads.get(sk);
    if (!reads) this.logReads.set(sk, reads = { reading: new Map(), read: new Map() });
    const k = `${after}/${limit}`;
    let p = reads.reading.get(k);
    if (!p) {
      p = changesRepo.after(this.d.db, sk, after, limit);
      if (reads.reading.size < LOG_READS) {
        const kept = reads, mine = p;
        kept.reading.set(k, mine);
        // (into the reads of the log as it was: a read the log moved past is not kept after)
        mine.then((rows) => { if (kept.reading.get(k) === mine) kept.read.set(k, rows); }, () => { if (kept.reading.get(k) === mine) kept.reading.delete(k); });
      }
    }
    return p;
  }

  /** The rows of such a read when it is done and still kept (the log has not moved since), else
   *  undefined: what most sessions of a fan-out and their acknowledgements need, with no await. */
  logRead(sk: string, after: number, limit: number): ChangeRow[] | undefined {
    return this.logReads.get(sk)?.read.get(`${after}/${limit}`);
  }

  /** the last batch made of every entry between two positions, per system */
  private readonly batches = new Map<string, { from: number; upTo: number; text: string }>();
  sameBatch(sk: string, from: number, upTo: number): string | undefined {
    const b = this.batches.get(sk);
    return b && b.from === from && b.upTo === upTo ? b.text : undefined;
  }
  keepBatch(sk: string, from: number, upTo: number, text: string) { this.batches.set(sk, { from, upTo, text }); }

  /** New entries are in the system's log (or may be): reads from before are stale. */
  logMoved(sk: string) { this.logReads.delete(sk); this.reads.logMoved(sk); this.snapshots.logMoved(sk); }

  /** set in a cluster: reaches the edges other nodes hold */
  get elsewhere(): ElsewhereHub | null { return this.d.elsewhere.get(); }

  /** A log entry as the text a batch carries (its body is stored as JSON already). */
  wireText(r: ChangeRow): string {
    let t = this.wire.get(r.seq);
    if (t === undefined) {
      const wire = r.op === "upsert" && r.body !== null && isDefinitionType(r.asset_type) ? KINDS[r.asset_type].wire : undefined;
      const body = wire ? JSON.stringify(wire.out(JSON.parse(r.body!), this.d.secrets)) : r.body ?? "null";
      t = `{"seq":${r.seq},"type":${JSON.stringify(r.asset_type)},"name":${JSON.stringify(r.asset_name)},"item":${JSON.stringify(r.item_id)},"op":${JSON.stringify(r.op)},"hlc":${JSON.stringify(r.hlc)},${r.version ? `"version":${r.version},` : ""}"body":${body}}`;
      this.wire.set(r.seq, t);
    }
    return t;
  }
}
