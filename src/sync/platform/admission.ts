// Hellos admitted at a bounded pace: a herd of thousands of edges opening at once (after a
// platform restart, or a new fleet) held the event loop hello after hello, so accepts waited (opens
// timed out and were retried, feeding the herd), and /health and the welcomed edges'
// acknowledgements with them. Hellos wait in a queue and run a slice at a time, in the order they
// came, the loop given back (a macrotask: its sockets and timers run) between slices.
import type { EdgeSession } from "./session.ts";

/** How long one slice of hellos holds the loop (ms of CPU): a request arriving meanwhile (/health, the
 *  API) waits at most about this for the hellos' part of a turn. Slices of 200 hellos, or a tenth
 *  of the queue, held it 40-490 ms each during a herd of 10,000 (a hello is 0.2-0.4 ms of the
 *  loop, more on a loaded machine). */
export const HELLO_TURN_MS = 8;
/** (at least 8: a warm loop's 2-3 ms; one slow hello, the first of a process, say, shrank the
 *  slices to one hello, and a few edges opening together were admitted a turn each) */
const FIRST_SLICE = 20, MIN_SLICE = 8, MAX_SLICE = 500;
/** The process's CPU time (ms): a slice is measured by it, not by the clock, which counts the time
 *  the machine gave other processes (at a load of 25 on 2 cores, slices timed by the clock shrank
 *  to a hello or two while the herd's opens, not bounded, took the loop). */
export const cpuMs = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1_000; };

/** The next batch's size from the last one's: `done` items in `ms` of CPU, sized to take `turnMs`,
 *  within [min, max]. Grown at most twice, and only after a full batch (`done` reached `size`):
 *  a few items' time says little of a larger batch's. Hello slices and the edges' write
 *  transactions (writes.ts) are both paced by it. */
export function sizedFromCpu(done: number, size: number, ms: number, turnMs: number, min: number, max: number): number {
  const fit = Math.round(done * turnMs / Math.max(ms, 0.05));
  return Math.max(min, Math.min(max, done < size ? Math.min(fit, size) : Math.min(fit, 2 * done)));
}

export class HelloAdmission {
  private readonly queue: (() => Promise<void>)[] = [];
  /** each session's hello while it waits or runs */
  private readonly waiting = new WeakMap<EdgeSession, Promise<void>>();
  private running = false;
  /** hellos started per slice: sized from how long the last slice held the loop */
  private slice = FIRST_SLICE;
  /** slices run so far (tests: a herd is admitted across turns) */
  slices = 0;

  /** Runs a session's hello in its turn; resolves when it has run. */
  admit(s: EdgeSession, run: () => Promise<void>): Promise<void> {
    const done = new Promise<void>((resolve, reject) => { this.queue.push(() => run().then(resolve, reject)); });
    const mine = done.finally(() => { if (this.waiting.get(s) === mine) this.waiting.delete(s); });
    mine.catch(() => {});
    this.waiting.set(s, mine);
    if (!this.running) { this.running = true; setImmediate(() => this.some()); }
    return done;
  }

  /** The session's hello, while it has not been admitted (what the edge sends after it waits). */
  pending(s: EdgeSession): Promise<void> | undefined { return this.waiting.get(s); }

  /** One slice of waiting hellos. A hello's cost shows only after its first await (its reads are
   *  in memory: promises settled in this same turn), so the slice is timed until all of it has
   *  settled, and only when that was within the turn (a hello that waited for the database, in a
   *  cluster, says nothing of the loop's time); the next slice is sized from it. The loop's own
   *  turn length is not the measure: a herd's upgrades fill it, and slices sized from it shrank
   *  to a few hellos a turn. */
  private some() {
    this.slices++;
    const t0 = cpuMs(), n = Math.min(this.slice, this.queue.length);
    const runs: Promise<void>[] = [];
    for (let i = 0; i < n; i++) runs.push(this.queue.shift()!());
    let sameTurn = true;
    void Promise.allSettled(runs).then(() => {
      if (!sameTurn) return;
      this.slice = sizedFromCpu(n, this.slice, cpuMs() - t0, HELLO_TURN_MS, MIN_SLICE, MAX_SLICE);
    });
    setImmediate(() => {
      sameTurn = false;
      if (this.queue.length) this.some();
      else this.running = false;
    });
  }
}
