// What the sessions write about their edges most often: what an edge's hello says of it (its
// build, OS, that this node holds its link), the position it acknowledged, the outcome per asset
// it reported, and when it was last heard from. Written together every
// FLUSH_MS in a few transactions, not one transaction per acknowledgement and per ping (with
// thousands of edges those were most of the platform's work, and each held the event loop; a
// herd of hellos after a restart filled the listen queue). Whatever reads them (edge records,
// status, lag, a hello reporting failures, a link's close) writes what is waiting first; a clean
// stop writes it too. A kill loses at most FLUSH_MS of positions: the edges say theirs again
// at their next hello, and the log keeps what they had not acknowledged.
// The links' events (connected, disconnected, refused) go in the same batches and transactions: a
// herd of connects costs a few transactions, each edge's log trimmed to its newest in the one that adds.
import { nowSeconds } from "../../core/ids.ts";
import type { Executor } from "../../store/db.ts";
import { type EdgeChanges, edgesRepo } from "../../store/edges.ts";
import { linkEventsRepo, type NewLinkEvent } from "../../store/linkEvents.ts";
import { changesRepo, statusRepo } from "../../store/sync.ts";
import { cpuMs, sizedFromCpu } from "./admission.ts";
import type { EdgeSession } from "./session.ts";
import type { AssetResult, HubDeps } from "./types.ts";

export const FLUSH_MS = 100;
/** Edges (and link events) written per transaction, at most and at first; the event loop is
 *  given back between transactions. SQLite runs on the main thread: a transaction of 500 hellos
 *  and their link events held it 30-600 ms during a herd (its statements and its commit), and
 *  every request with it. */
const PER_TX = 500, MIN_PER_TX = 10;
/** How long one transaction of these writes holds the loop (ms of CPU, not the clock's: see
 *  admission.ts): the next is sized from the last. */
export const TX_TURN_MS = 5;
/** the longest wait before writing again after failures */
const RETRY_MAX_MS = 5_000;
/** link events kept while writes fail */
const EVENTS_KEPT = 50_000;

interface Waiting {
  s: EdgeSession; cursor: boolean; results: { results: AssetResult[]; at: string }[]; hello: { fields: EdgeChanges; nodeId: string } | null;
  /** the template a snapshot it completed brought (JSON), for the record of that incarnation */
  applied: { template: string; incarnation: string } | null;
}

export class EdgeWrites {
  private waiting = new Map<EdgeSession, Waiting>();
  /** link events, in the order they happened */
  private events: NewLinkEvent[] = [];
  private timer: ReturnType<typeof setTimeout> | null = null;
  private running: Promise<void> | null = null;
  /** edges per transaction: sized from how long the last one took */
  private perTx = PER_TX;
  /** transactions written so far (tests) */
  transactions = 0;

  constructor(private readonly d: HubDeps) {}

  private entry(s: EdgeSession): Waiting {
    let w = this.waiting.get(s);
    if (!w) { this.waiting.set(s, w = { s, cursor: false, results: [], hello: null, applied: null }); this.schedule(); }
    return w;
  }

  /** writes that failed in a row (the next try waits longer, up to RETRY_MAX_MS) */
  private failures = 0;

  private schedule() {
    if (this.timer) return;
    const wait = this.failures ? Math.min(RETRY_MAX_MS, FLUSH_MS * 2 ** this.failures) : FLUSH_MS;
    this.timer = setTimeout(() => { this.timer = null; this.flush().catch((err) => this.d.log.warn("writing the edges' positions failed; tried again", { err, failures: this.failures })); }, wait);
    this.timer.unref?.();
  }

  /** The edge's hello was welcomed on this node: what it said of the edge, that this node holds
   *  its link, and its position when the log serves it (`cursor`). */
  welcomed(s: EdgeSession, fields: EdgeChanges, nodeId: string, cursor: boolean) {
    const w = this.entry(s);
    w.hello = { fields, nodeId };
    if (cursor) w.cursor = true;
  }

  /** The edge was heard from (its last_talked). */
  talked(s: EdgeSession) { this.entry(s); }

  /** The edge acknowledged a batch: its position (the session's cursor when written) and what it
   *  reports per asset. */
  acknowledged(s: EdgeSession, moved: boolean, results: AssetResult[], at: string) {
    const w = this.entry(s);
    if (moved) w.cursor = true;
    if (results.length) w.results.push({ results, at });
  }

  /** The edge applied a snapshot: what it reports per asset (after the outcomes waiting before,
   *  which are older), the template it now holds (null: unchanged) and, for a full one, its
   *  position (the session's cursor when written). One transaction per snapshot end was a
   *  herd's largest cost on PostgreSQL (transactions run one at a time): 38,000 new edges queued
   *  a change's write 9 s behind theirs. */
  snapshotEnded(s: EdgeSession, results: AssetResult[], at: string, template: string | null, full: boolean) {
    const w = this.entry(s);
    if (results.length) w.results.push({ results, at });
    if (template !== null) w.applied = { template, incarnation: s.edge.incarnation };
    if (full) w.cursor = true;
  }

  /** Something happened to an edge's link (written with the next batch). */
  linkEvent(sk: string, edge: string, event: string, detail: Record<string, unknown>) {
    this.events.push({ system_key: sk, edge_name: edge, time: new Date().toISOString(), event, detail: JSON.stringify(detail) });
    this.schedule();
  }

  /** Drops what waits for an edge (deleted: nothing of it is written again). */
  forget(sk: string, edge: string) {
    for (const s of this.waiting.keys()) if (s.edge?.system_key === sk && s.edge.name === edge) this.waiting.delete(s);
    this.events = this.events.filter((e) => e.system_key !== sk || e.edge_name !== edge);
  }

  /** Writes everything waiting now (and waits for a write under way). */
  async flush(): Promise<void> {
    while (this.running) await this.running;
    if (!this.waiting.size && !this.events.length) return;
    const batch = [...this.waiting.values()], events = this.events;
    this.waiting = new Map();
    this.events = [];
    this.running = this.write(batch, events).finally(() => { this.running = null; });
    await this.running;
  }

  /** Writes what waits for this session now (before something that must follow it). */
  async flushOne(s: EdgeSession): Promise<void> {
    while (this.running) await this.running;
    const w = this.waiting.get(s);
    if (!w) return;
    this.waiting.delete(s);
    await this.write([w]);
  }

  /** What a write could not store goes back in front of what came meanwhile, and is tried again
   *  (a database briefly out of reach lost an edge's position: an edge that had everything and
   *  then went quiet showed pending until its next hello). */
  private putBack(batch: Waiting[], events: NewLinkEvent[]) {
    // (first: of an edge's replaced link and its new one, the later counts)
    const merged = new Map(batch.map((w) => [w.s, w]));
    for (const [s, w] of this.waiting) {
      const old = merged.get(s);
      if (!old) { merged.set(s, w); continue; }
      old.cursor ||= w.cursor;
      old.results.push(...w.results);
      if (w.hello) old.hello = w.hello;
      if (w.applied) old.applied = w.applied;
    }
    this.waiting = merged;
    // (a database out of reach for long keeps the newest events, not every one)
    this.events = [...events, ...this.events].slice(-EVENTS_KEPT);
    this.failures++;
    this.schedule();
  }

  private async write(batch: Waiting[], events: NewLinkEvent[] = []) {
    const now = nowSeconds();
    // the links' events go in the same transactions as the edges' writes (a herd's hellos: each
    // commit is 3-5 ms of the loop, and a transaction of their own per 500 events doubled them)
    for (let i = 0, per = this.perTx; i < Math.max(batch.length, events.length); i += per, per = this.perTx) {
      if (i) await new Promise((r) => setImmediate(r));
      let ms: number;
      try { ms = await this.slice(batch, events, i, per, now); } catch (err) {
        this.putBack(batch.slice(i), events.slice(i));
        throw err;
      }
      // (PostgreSQL's time is the server's, not the loop's)
      if (this.d.db.driver === "postgres") continue;
      const rows = Math.max(Math.min(per, batch.length - i), Math.min(per, events.length - i));
      this.perTx = sizedFromCpu(rows, per, ms, TX_TURN_MS, MIN_PER_TX, PER_TX);
    }
    this.failures = 0;
  }

  /** The transaction of one slice of a batch: the CPU ms it took (not its wait for another
   *  transaction). */
  private async slice(batch: Waiting[], events: NewLinkEvent[], i: number, per: number, now: number): Promise<number> {
    let t0 = 0;
    await this.d.db.tx(async (tx) => {
      t0 = cpuMs();
      this.transactions++;
      // what most edges have waiting (a position, being heard from) goes in one statement per system
      // (by name: of an edge's replaced link and its new one, the later counts)
      const plain = new Map<string, Map<string, { name: string; cursor: number | null }>>();
      // and a herd's hellos, most of which say the same of their edges, one statement per system
      // and the same changes (by name, as above)
      const hellos = new Map<string, { sk: string; changes: EdgeChanges; nodeId: string; names: Set<string> }>();
      for (const w of batch.slice(i, i + per)) {
        const sk = w.s.edge.system_key, edge = w.s.edge.name;
        if (!w.hello && !w.results.length && !w.applied) {
          let list = plain.get(sk);
          if (!list) plain.set(sk, list = new Map());
          list.set(edge, { name: edge, cursor: w.cursor ? w.s.cursor : null });
          continue;
        }
        for (const r of w.results) await record(tx, sk, edge, r.results, r.at);
        if (w.applied) await edgesRepo.snapshotDone(tx, sk, edge, w.applied.incarnation, w.applied.template, null);
        const changes: EdgeChanges = { ...w.hello?.fields, ...(w.cursor ? { cursor: w.s.cursor } : {}), last_talked: now };
        if (!w.hello) { await edgesRepo.update(tx, sk, edge, changes); continue; }
        const key = `${sk}\u0000${w.hello.nodeId}\u0000${JSON.stringify(changes)}`;
        let same = hellos.get(key);
        if (!same) hellos.set(key, same = { sk, changes, nodeId: w.hello.nodeId, names: new Set() });
        for (const other of hellos.values()) if (other !== same && other.sk === sk) other.names.delete(edge);
        same.names.add(edge);
      }
      for (const { sk, changes, nodeId, names } of hellos.values()) await edgesRepo.updateMany(tx, sk, [...names], changes, nodeId);
      // (and held by this node: marked so again if another node freed them, see talked)
      for (const [sk, list] of plain) await edgesRepo.talked(tx, sk, now, [...list.values()], this.d.nodeId);
      if (i < events.length) await writeLinkEvents(tx, events.slice(i, i + per));
    });
    return cpuMs() - t0;
  }
}

/** Link events in order, then each of their edges' logs trimmed to its newest LINK_EVENTS_KEPT. */
export async function writeLinkEvents(tx: Executor, events: NewLinkEvent[]) {
  const edges = new Map<string, NewLinkEvent>();
  for (const e of events) { await linkEventsRepo.add(tx, e); edges.set(`${e.system_key}/${e.edge_name}`, e); }
  for (const e of edges.values()) await linkEventsRepo.trim(tx, e.system_key, e.edge_name);
}

/** An edge's outcomes per asset, as it reported them. */
export async function record(tx: Executor, sk: string, edge: string, results: AssetResult[], at: string) {
  for (const r of results) {
    const type = r.type === "row" ? "collection_rows" : r.type;
    const version = await versionOf(tx, sk, r);
    if (r.error) await statusRepo.failed(tx, sk, edge, type, r.name, version, r.error.slice(0, 2000), at);
    else await statusRepo.applied(tx, sk, edge, type, r.name, version, at);
  }
}

/** The asset version an edge's result is about: as the change carried it and the edge echoes
 *  it, else the version of the log entry at its position, else (a snapshot's position, or an
 *  entry compacted away) the asset's current version. */
export async function versionOf(ex: Executor, sk: string, r: AssetResult): Promise<number> {
  if (r.version) return r.version;
  return (await changesRepo.versionAt(ex, sk, r.seq, r.type, r.name)) || changesRepo.versionOf(ex, sk, r.type, r.name);
}
