// Hellos admitted at a bounded pace: a herd of thousands of edges opening at once (after a
// platform restart, or a new fleet) held the event loop hello after hello, so accepts waited (opens
// timed out and were retried, feeding the herd), and /health and the welcomed edges'
// acknowledgements with them. Hellos wait in a queue and run a slice at a time, the loop given
// back between.
import type { EdgeSession } from "./session.ts";

/** Hellos started per turn of the loop: at least HELLO_SLICE, and enough for the queue to be
 *  through in HELLO_TURNS turns. A hello's cost shows only after its first await (its reads and
 *  first sends), so slices sized from how long a turn took shrank to a few hellos a turn while
 *  the herd's upgrades filled the loop; a fixed slice tied the herd's pace to the loop's turns,
 *  and the edges coming back after a restart waited for their welcome 2-5 times longer. */
const HELLO_SLICE = 200, HELLO_TURNS = 10;

export class HelloAdmission {
  private readonly queue: (() => Promise<void>)[] = [];
  /** each session's hello while it waits or runs */
  private readonly waiting = new WeakMap<EdgeSession, Promise<void>>();
  private running = false;

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

  /** One slice of waiting hellos. */
  private some() {
    const slice = Math.max(HELLO_SLICE, Math.ceil(this.queue.length / HELLO_TURNS));
    for (let n = 0; n < slice && this.queue.length; n++) void this.queue.shift()!();
    if (this.queue.length) setImmediate(() => this.some());
    else this.running = false;
  }
}
