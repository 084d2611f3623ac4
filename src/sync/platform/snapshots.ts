// Full snapshots shared between edges: every edge of one template (deployments included) that
// needs a full snapshot at one position of its system's log gets the same one, so it is read
// and serialized once, by the first of them, and its pages go as the same text to all of them (a
// herd of new edges spent about half of the event loop building one per edge). What decides a
// full snapshot's content is its system, the assets its template covers and the log's position:
// the key. A snapshot is kept until its system's log moves (the next edge's position differs
// anyway), for at most SNAPSHOT_KEEP_MS, and only while smaller than SHARED_BYTES: a larger one
// is no longer offered to new edges and keeps only the pages its readers still need.
import type { TemplateEntry } from "../../domain/edges.ts";
import type { WireChange } from "../protocol.ts";
import { templateKey } from "./templateKey.ts";

/** How long a shared snapshot is offered to edges welcomed later at the same position (a change
 *  the log did not record, such as a purged tombstone, shows in a new snapshot after it). */
export const SNAPSHOT_KEEP_MS = 30_000;
/** The most a shared snapshot's pages keep (bytes of text) while it is offered. */
export const SHARED_BYTES = 32 * 1024 * 1024;
/** Snapshots kept per system (templates at the current position). */
const PER_SYSTEM = 16;

/** One edge's place in a shared snapshot: the next page it is sent. */
export interface SnapshotReader { at: number }

export class SharedSnapshot {
  /** page texts from `base` on (pages no reader needs any more are dropped once it is not offered) */
  private readonly pages: string[] = [];
  private base = 0;
  private done = false;
  private failed: unknown = null;
  private pulling: Promise<void> | null = null;
  private endText: Promise<string> | null = null;
  private readonly readers = new Set<SnapshotReader>();
  /** bytes of text made so far */
  bytes = 0;
  /** whether new edges still join it */
  offered = true;
  readonly madeAt = Date.now();

  constructor(private readonly gen: AsyncGenerator<WireChange[]>, readonly seq: number, private readonly makeEnd: () => Promise<string>, private readonly grew: (s: SharedSnapshot) => void) {}

  join(): SnapshotReader { const r = { at: 0 }; this.readers.add(r); return r; }
  /** The reader is gone (its link closed) or done. */
  leave(r: SnapshotReader) { this.readers.delete(r); this.trim(); }

  /** The reader's next page as the text of its batch message, or null after the last. */
  async next(r: SnapshotReader): Promise<string | null> {
    while (r.at - this.base >= this.pages.length && !this.done) {
      if (this.failed) throw this.failed;
      this.pulling ??= this.pull();
      await this.pulling;
    }
    if (this.failed) throw this.failed;
    const text = this.pages[r.at - this.base];
    if (text === undefined) return null;
    r.at++;
    this.trim();
    return text;
  }

  /** The snapshot_end message's text (the same for every edge of the key). */
  end(): Promise<string> {
    if (!this.endText) {
      this.endText = this.makeEnd();
      this.endText.catch(() => { this.endText = null; });
    }
    return this.endText;
  }

  private async pull() {
    try {
      const next = await this.gen.next();
      if (next.done) { this.done = true; return; }
      const text = JSON.stringify({ t: "batch", changes: next.value, upTo: this.seq, snapshot: true });
      this.pages.push(text);
      this.bytes += text.length;
      this.grew(this);
    } catch (err) {
      // (a generator that threw ends as if done: its readers must not take that for the end)
      this.failed = err;
      this.offered = false;
      throw err;
    } finally {
      this.pulling = null;
    }
  }

  /** Once no new reader can join, pages every reader is past go. */
  private trim() {
    if (this.offered) return;
    let low = Infinity;
    for (const r of this.readers) low = Math.min(low, r.at);
    if (low === Infinity) low = this.base + this.pages.length;
    if (low > this.base) { this.pages.splice(0, low - this.base); this.base = low; }
  }

  /** No longer offered to new edges. */
  withdraw() { this.offered = false; this.trim(); }
}

/** The shared full snapshots of each system's edges, by template and position. */
export class SharedSnapshots {
  private readonly bySystem = new Map<string, Map<string, SharedSnapshot>>();

  /** The full snapshot of `template` at `seq`: the one kept, else one made by `build`. */
  full(sk: string, template: TemplateEntry[], seq: number, build: () => { gen: AsyncGenerator<WireChange[]>; end: () => Promise<string> }): SharedSnapshot {
    const k = `${seq}\u0002${templateKey(template)}`;
    let kept = this.bySystem.get(sk);
    const s = kept?.get(k);
    if (s?.offered && Date.now() - s.madeAt < SNAPSHOT_KEEP_MS) return s;
    if (s) this.drop(sk, k, s);
    const { gen, end } = build();
    const made = new SharedSnapshot(gen, seq, end, (x) => { if (x.bytes > SHARED_BYTES) this.drop(sk, k, x); });
    if (!kept) this.bySystem.set(sk, kept = new Map());
    if (kept.size >= PER_SYSTEM) { const [oldK, old] = kept.entries().next().value!; this.drop(sk, oldK, old); }
    kept.set(k, made);
    return made;
  }

  /** The system's log moved: its snapshots are of an older position (their readers finish them). */
  logMoved(sk: string) {
    const kept = this.bySystem.get(sk);
    if (!kept) return;
    this.bySystem.delete(sk);
    for (const s of kept.values()) s.withdraw();
  }

  private drop(sk: string, k: string, s: SharedSnapshot) {
    s.withdraw();
    const kept = this.bySystem.get(sk);
    if (kept?.get(k) === s) kept.delete(k);
    if (kept && !kept.size) this.bySystem.delete(sk);
  }
}
