// The messages a service run subscribed to (ClearBlade.Messaging().subscribe / waitForMessage).
// A run's subscriptions live as long as the run: closing the inbox ends them and answers every
// waiting waitForMessage with null. Messages nobody waits for yet are queued, up to a bound (the
// oldest go first), so a slow service cannot grow memory without limit.
import { topicMatches } from "../auth/permissions.ts";

export interface InboxMessage { topic: string; payload: string }
type Subscribe = (filter: string, deliver: (topic: string, payload: Buffer) => void) => Promise<() => Promise<void>>;

const QUEUE_MAX = 1_000;

export class RunInbox {
  private readonly subscriptions = new Map<string, Promise<() => Promise<void>>>();
  private readonly queue: InboxMessage[] = [];
  private readonly waiters: { filters: string[] | null; resolve(m: InboxMessage | null): void }[] = [];
  private closed = false;
  /** messages dropped because the queue was full */
  dropped = 0;

  constructor(private readonly open: Subscribe) {}

  async subscribe(filter: string): Promise<void> {
    if (this.closed) return;
    if (this.subscriptions.has(filter)) return;
    const started = this.open(filter, (topic, payload) => this.deliver({ topic, payload: payload.toString("utf8") }));
    this.subscriptions.set(filter, started);
    // one that is still starting when the run closes is ended by close()
    try { await started; } catch (e) { this.subscriptions.delete(filter); throw e; }
  }

  async unsubscribe(filter: string): Promise<void> {
    const started = this.subscriptions.get(filter);
    if (!started) return;
    this.subscriptions.delete(filter);
    await (await started)();
  }

  get subscribed(): boolean { return this.subscriptions.size > 0; }

  private deliver(m: InboxMessage) {
    if (this.closed) return;
    const i = this.waiters.findIndex((w) => matches(w.filters, m.topic));
    if (i >= 0) { this.waiters.splice(i, 1)[0]!.resolve(m); return; }
    if (this.queue.length >= QUEUE_MAX) { this.queue.shift(); this.dropped++; }
    this.queue.push(m);
  }

  /** The next message on one of `filters` (any subscribed topic when null); null once closed. */
  next(filters: string[] | null): Promise<InboxMessage | null> {
    if (this.closed) return Promise.resolve(null);
    const i = this.queue.findIndex((m) => matches(filters, m.topic));
    if (i >= 0) return Promise.resolve(this.queue.splice(i, 1)[0]!);
    return new Promise((resolve) => this.waiters.push({ filters, resolve }));
  }

  /** Ends every subscription and answers every waiter with null. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const w of this.waiters.splice(0)) w.resolve(null);
    this.queue.length = 0;
    const ends = [...this.subscriptions.values()];
    this.subscriptions.clear();
    await Promise.all(ends.map((s) => s.then((end) => end(), () => undefined)));
  }
}

/** A shared subscription's filter ($share/<group>/<filter>) as messages match it: the filter
 *  (a wait names the subscription; what comes names its own topic). */
const matchable = (filter: string) => {
  if (!filter.startsWith("$share/")) return filter;
  const s = filter.indexOf("/", 7);
  return s < 0 ? "" : filter.slice(s + 1);
};

const matches = (filters: string[] | null, topic: string) => filters === null || filters.some((f) => topicMatches(matchable(f), topic));
