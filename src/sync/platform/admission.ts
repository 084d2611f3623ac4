// Hellos admitted at a bounded pace: a herd of thousands of edges opening at once (after a
// platform restart, or a new fleet) held the event loop hello after hello, so accepts waited (opens
// timed out and were retried, feeding the herd), and /health and the welcomed edges'
// acknowledgements with them. Hellos wait in a queue and run in slices of about HELLO_TURN_MS of
// the loop, which is given back between.
import type { EdgeSession } from "./session.ts";

const HELLO_TURN_MS = 8;
const HELLO_FIRST_SLICE = 50, HELLO_MIN_SLICE = 5, HELLO_MAX_SLICE = 2_000;

export class HelloAdmission {
  private readonly queue: (() => Promise<void>)[] = [];
  /** each session's hello while it waits or runs */
  private readonly waiting = new WeakMap<EdgeSession, Promise<void>>();
  private running = false;
  private slice = HELLO_FIRST_SLICE;

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

  /** One slice of waiting hellos. A hello's cost shows only once the loop comes back (its reads
   *  and first sends follow its first await), so each slice is sized from how long the last took. */
  private some() {
    const t0 = performance.now();
    for (let n = 0; n < this.slice && this.queue.length; n++) void this.queue.shift()!();
    if (!this.queue.length) { this.running = false; return; }
    setImmediate(() => {
      const took = performance.now() - t0;
      this.slice = Math.max(HELLO_MIN_SLICE, Math.min(HELLO_MAX_SLICE, Math.round(this.slice * HELLO_TURN_MS / Math.max(took, 0.1))));
      this.some();
    });
  }
}
