// Limiters: a per-node token bucket, a per-node in-flight counter, and a
// cluster-wide fixed window on Redis that reports itself unavailable so the caller can fall back
// to the local bucket while Redis is down.
import { RedisClient } from "bun";
import { LruMap } from "../core/cache.ts";
import type { Logger } from "../core/log.ts";

const TAKEN = Object.freeze({ ok: true, retryAfterS: 0 });

/** Per-node token buckets: up to `capacity` tokens, one more every duration/capacity seconds.
 *  Bounded: when full, the keys used least recently go first (a bucket that goes starts full
 *  again: the cap errs on the lenient side instead of growing without end). */
export class TokenBuckets {
  private readonly buckets: LruMap<string, { tokens: number; at: number }>;
  constructor(maxKeys = 100_000) { this.buckets = new LruMap(maxKeys); }

  /** Takes a token; when there is none, how many seconds until one comes back. `now` in ms on
   *  any steady clock (the throttle passes performance.now, which does not jump with the date). */
  take(key: string, capacity: number, durationS: number, now = performance.now()): { ok: boolean; retryAfterS: number } {
    const perMs = capacity / (durationS * 1000);
    let b = this.buckets.get(key);
    if (b) {
      b.tokens = Math.min(capacity, b.tokens + (now - b.at) * perMs);
      b.at = now;
    } else {
      b = { tokens: capacity, at: now };
      this.buckets.set(key, b);
    }
    if (b.tokens >= 1) { b.tokens -= 1; return TAKEN; }
    return { ok: false, retryAfterS: Math.ceil((1 - b.tokens) / perMs / 1000) };
  }

  /** Gives a token back (never above capacity); a bucket that went meanwhile is full already. */
  give(key: string, capacity: number) {
    const b = this.buckets.peek(key);
    if (b) b.tokens = Math.min(capacity, b.tokens + 1);
  }

  clear() { this.buckets.clear(); }
  get size() { return this.buckets.size; }
}

/** In-flight counters: a request that would raise the count above the limit is refused at once. */
export class InFlight {
  private readonly counts = new Map<string, number>();

  acquire(key: string, max: number): (() => void) | null {
    const n = (this.counts.get(key) ?? 0) + 1;
    if (n > max) return null;
    this.counts.set(key, n);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.counts.get(key) ?? 1) - 1;
      if (left <= 0) this.counts.delete(key);
      else this.counts.set(key, left);
    };
  }

  count(key: string) { return this.counts.get(key) ?? 0; }
}

// INCR, and on the first hit of a window start its expiry: one round trip (a script, so the two cannot be split by a crash).
const WINDOW_SCRIPT = `local c = redis.call('INCR', KEYS[1]) if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return c`;
// A hit given back: only within the window that counted it (an ended window must not start below 0).
const REFUND_SCRIPT = `local c = tonumber(redis.call('GET', KEYS[1]) or '0') if c > 0 then redis.call('DECR', KEYS[1]) end return c`;
const COMMAND_TIMEOUT_MS = 250;
const RECONNECT_MS = 1_000;
export const CASES_CHANNEL = "outpost:throttle:cases";

/** Redis for the cluster: fixed windows, and news of case changes between nodes. */
export class SharedStore {
  private readonly cmd: RedisClient;
  private readonly sub: RedisClient;
  private up = false;
  private subscribed = false;
  private stopped = false;
  private retry: ReturnType<typeof setTimeout> | null = null;

  constructor(url: string, private readonly log: Logger, private readonly onCasesChanged: (from: string) => void, private readonly nodeId: string) {
    const opts = { autoReconnect: false, enableOfflineQueue: false, connectionTimeout: 1_000 };
    this.cmd = new RedisClient(url, opts);
    this.sub = new RedisClient(url, opts);
    this.cmd.onclose = () => this.down("connection closed");
    this.sub.onclose = () => { this.subscribed = false; this.down("subscriber closed"); };
  }

  get available() { return this.up; }

  async start() { await this.connect(); }

  private async connect() {
    if (this.stopped) return;
    try {
      if (!this.cmd.connected) await this.cmd.connect();
      if (!this.sub.connected || !this.subscribed) {
        if (!this.sub.connected) await this.sub.connect();
        await this.sub.subscribe(CASES_CHANNEL, (from) => { if (from !== this.nodeId) this.onCasesChanged(from); });
        this.subscribed = true;
      }
      if (!this.up) {
        this.up = true;
        this.log.info("throttling: shared store connected");
        this.onCasesChanged("reconnect"); // changes made while we were away
      }
    } catch (err) {
      this.down(String((err as Error)?.message ?? err));
    }
  }

  private down(why: string) {
    if (this.up) this.log.warn("throttling: shared store unavailable, frequency limits are per node until it is back", { why });
    this.up = false;
    if (this.stopped || this.retry) return;
    this.retry = setTimeout(() => { this.retry = null; void this.connect(); }, RECONNECT_MS);
    this.retry.unref?.();
  }

  /** Counts a hit in the key's window; true when within `max`, null when Redis cannot answer. */
  async hit(key: string, max: number, durationS: number): Promise<boolean | null> {
    if (!this.up) return null;
    const count = await this.eval([WINDOW_SCRIPT, "1", `outpost:throttle:${key}`, String(durationS * 1000)]);
    return count === null ? null : count <= max;
  }

  /** Takes back one hit of the key's current window (a sign-in that did not fail). */
  async refund(key: string): Promise<void> {
    if (this.up) await this.eval([REFUND_SCRIPT, "1", `outpost:throttle:${key}`]);
  }

  /** A script's number, or null when Redis cannot answer in time. */
  private async eval(args: string[]): Promise<number | null> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const n = await Promise.race([
        this.cmd.send("EVAL", args) as Promise<number>,
        new Promise<never>((_r, rej) => { timer = setTimeout(() => rej(new Error("timed out")), COMMAND_TIMEOUT_MS); }),
      ]);
      return Number(n);
    } catch (err) {
      this.down(String((err as Error)?.message ?? err));
      return null;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Tells the other nodes to reload their cases. */
  async announce() {
    if (!this.up) return;
    try { await this.cmd.publish(CASES_CHANNEL, this.nodeId); } catch (err) { this.down(String(err)); }
  }

  stop() {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.cmd.onclose = null;
    this.sub.onclose = null;
    try { this.cmd.close(); } catch { /* closed */ }
    try { this.sub.close(); } catch { /* closed */ }
  }
}
