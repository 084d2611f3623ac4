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

  clear() { this.buckets.clear(); }
  get size() { return this.buckets.size; }
}

/** The first lockout's length; each further one doubles it, up to the case's duration. */
export const LOCKOUT_BASE_MS = 60_000;

/** One account's failed sign-ins (see Lockouts). */
export interface FailureState { failures: number; lockouts: number; lockedUntil: number; lastFailure: number }

/** A failed sign-in: counts it, and locks the account out once `max` failures fell within
 *  `windowMs` of each other. A quiet window forgets the failures; a quiet window after a lockout
 *  ended forgets the lockouts too. Returns the lockout's length in ms (0: not locked). The shared
 *  store runs the same rule in Redis (LOCKOUT_FAIL_SCRIPT). */
export function countFailure(s: FailureState, max: number, windowMs: number, now: number): number {
  if (now - s.lastFailure > windowMs) {
    s.failures = 0;
    if (now - s.lockedUntil > windowMs) s.lockouts = 0;
  }
  s.lastFailure = now;
  if (++s.failures < max) return 0;
  s.failures = 0;
  s.lockouts++;
  const ms = Math.min(windowMs, LOCKOUT_BASE_MS * 2 ** (s.lockouts - 1));
  s.lockedUntil = now + ms;
  return ms;
}

/** Per-node lockouts for sign-ins (as identity servers do it): only failures count, `max` of them
 *  lock the account out, a good sign-in clears its record. Attempts still being checked count as
 *  failures until answered, so parallel guesses cannot pass the limit before the first one fails.
 *  Bounded like the buckets (a record that goes starts clean). */
export class Lockouts {
  private readonly states: LruMap<string, FailureState & { inFlight: number }>;
  constructor(maxKeys = 100_000) { this.states = new LruMap(maxKeys); }

  /** Takes an attempt: 0 when it may go ahead (settle it with failed or succeeded), else the
   *  seconds until the next attempt may. */
  attempt(key: string, max: number, now = performance.now()): number {
    const s = this.states.get(key);
    if (!s) { this.states.set(key, { failures: 0, lockouts: 0, lockedUntil: -Infinity, lastFailure: -Infinity, inFlight: 1 }); return 0; }
    if (s.lockedUntil > now) return Math.ceil((s.lockedUntil - now) / 1000);
    if (s.failures + s.inFlight >= max) return 1; // the attempts under way could reach the limit
    s.inFlight++;
    return 0;
  }

  /** An attempt was answered: a failure counts (and may lock out), a success clears the record,
   *  anything else (a bad body, an error) only ends the attempt. Returns the lockout in ms. */
  settle(key: string, outcome: SignInOutcome, max: number, windowMs: number, now = performance.now()): number {
    const s = this.states.peek(key);
    if (!s) return 0;
    s.inFlight = Math.max(0, s.inFlight - 1);
    if (outcome === "succeeded") {
      if (s.inFlight === 0) this.states.delete(key);
      else { s.failures = 0; s.lockouts = 0; }
      return 0;
    }
    return outcome === "failed" ? countFailure(s, max, windowMs, now) : 0;
  }

  clear() { this.states.clear(); }
}

/** How a sign-in that a lockout let through was answered. */
export type SignInOutcome = "failed" | "succeeded" | "other";

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
// Lockouts (see countFailure, the same rule): one hash per account, f failures, l lockouts, u locked
// until, at the last failure (ms, the server's clock, so every node agrees).
const NOW_LUA = `local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;
const LOCKOUT_CHECK_SCRIPT = `${NOW_LUA} local u = tonumber(redis.call('HGET', KEYS[1], 'u') or '0') if u > now then return u - now end return 0`;
const LOCKOUT_FAIL_SCRIPT = `${NOW_LUA}
local max, win, base = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local h = redis.call('HMGET', KEYS[1], 'f', 'l', 'u', 'at')
local f, l, u, at = tonumber(h[1] or '0'), tonumber(h[2] or '0'), tonumber(h[3] or '0'), tonumber(h[4] or '0')
if now - at > win then f = 0 if now - u > win then l = 0 end end
f = f + 1
local ms = 0
if f >= max then f = 0 l = l + 1 ms = math.min(win, base * 2 ^ (l - 1)) u = now + ms end
redis.call('HSET', KEYS[1], 'f', f, 'l', l, 'u', u, 'at', now)
redis.call('PEXPIRE', KEYS[1], math.max(u - now, 0) + win)
return ms`;
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

  /** ms the account is still locked out for (0: not locked), null when Redis cannot answer. */
  lockedFor(key: string): Promise<number | null> {
    return this.up ? this.eval([LOCKOUT_CHECK_SCRIPT, "1", `outpost:lockout:${key}`]) : Promise.resolve(null);
  }

  /** Counts a failed sign-in; the lockout it started in ms (0: none), null when Redis cannot answer. */
  failed(key: string, max: number, windowMs: number): Promise<number | null> {
    return this.up ? this.eval([LOCKOUT_FAIL_SCRIPT, "1", `outpost:lockout:${key}`, String(max), String(windowMs), String(LOCKOUT_BASE_MS)]) : Promise.resolve(null);
  }

  /** A good sign-in: the account's failures and lockouts are forgotten. */
  async succeeded(key: string): Promise<void> {
    if (!this.up) return;
    try { await this.cmd.send("DEL", [`outpost:lockout:${key}`]); } catch (err) { this.down(String((err as Error)?.message ?? err)); }
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
