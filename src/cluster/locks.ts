// Locks shared by the nodes of a cluster, in Redis. Per lock a queue of tickets in the order
// they came (a sorted set, `outpost:lockq:<system key>:<name>`) and each ticket's mode and lease
// (a hash, `outpost:lockm:...`). A ticket is granted when it is exclusive and first, or shared
// with only shared tickets before it: the holders are the front of the queue, so nothing says
// "granted" but the order, and a grant cannot be lost between two commands. Every command is a
// script, with Redis' own clock.
//
// Leases: a ticket (held or waiting) lives LOCK_LEASE_MS unless this node renews it, which it
// does every LOCK_RENEW_MS while the run holding it lasts; a ticket whose lease ran out (its node
// died) is dropped by the next script that passes it. Waiting: a release publishes the lock's
// key and the nodes with waiters for it check them at once; besides, each node checks its first
// waiter of a lock at growing intervals (POLL_MIN_MS doubling up to POLL_MAX_MS), which covers a
// lost message and a lease that ran out. Only a node's first waiter of a lock is checked: if it is
// not granted, none behind it is.
import { fail } from "../core/errors.ts";
import { newUuid } from "../core/ids.ts";
import type { Logger } from "../core/log.ts";
import { type LockBackend, type LockGrant, type LockRequest, lockGivenUp, lockTimeout } from "../domain/locks.ts";
import type { SharedRedis } from "./redis.ts";

export const LOCK_LEASE_MS = 30_000;
export const LOCK_RENEW_MS = 10_000;
const POLL_MIN_MS = 50;
const POLL_MAX_MS = 1_000;
export const LOCKS_CHANNEL = "outpost:locks";

// Shared by the scripts: KEYS[1] the queue, KEYS[2] the tickets (mode and lease end: "x 1712..."),
// `now` Redis' clock in ms. granted(t): 1 granted, 0 waiting, -1 no such ticket (its lease ran
// out). Tickets ahead whose lease ran out are dropped on the way (and the lock's waiters woken).
const COMMON = `
local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local Q, M = KEYS[1], KEYS[2]
local function over(v) return tonumber(string.sub(v, 3)) <= now end
local function granted(id)
  local mine = redis.call('HGET', M, id)
  local rank = redis.call('ZRANK', Q, id)
  if not mine or not rank then return -1 end
  local mode = string.sub(mine, 1, 1)
  local dropped = false
  local verdict = 1
  local ahead = {}
  if rank > 0 then ahead = redis.call('ZRANGE', Q, 0, rank - 1) end
  for _, o in ipairs(ahead) do
    local v = redis.call('HGET', M, o)
    if not v or over(v) then
      redis.call('ZREM', Q, o) redis.call('HDEL', M, o) dropped = true
    elseif mode == 'x' or string.sub(v, 1, 1) == 'x' then verdict = 0 break end
  end
  if dropped then redis.call('PUBLISH', '${LOCKS_CHANNEL}', ARGV[1]) end
  return verdict
end
local function keep(lease) redis.call('PEXPIRE', Q, lease * 2) redis.call('PEXPIRE', M, lease * 2) end
`;
// ARGV: lock key, ticket, mode (x/s), lease ms. Answers {granted, position}.
const ACQUIRE_SCRIPT = `${COMMON}
local seq = redis.call('HINCRBY', M, '#', 1)
redis.call('ZADD', Q, seq, ARGV[2])
redis.call('HSET', M, ARGV[2], ARGV[3] .. ' ' .. (now + tonumber(ARGV[4])))
keep(tonumber(ARGV[4]))
return {granted(ARGV[2]), seq}`;
// ARGV: lock key, ticket, lease ms. Renews the ticket's lease; answers granted(ticket).
const CHECK_SCRIPT = `${COMMON}
local v = redis.call('HGET', M, ARGV[2])
if not v then return -1 end
redis.call('HSET', M, ARGV[2], string.sub(v, 1, 1) .. ' ' .. (now + tonumber(ARGV[3])))
keep(tonumber(ARGV[3]))
return granted(ARGV[2])`;
// ARGV: lock key, lease ms, tickets... Renews each; answers the tickets that were gone.
const RENEW_SCRIPT = `${COMMON}
local lost = {}
for i = 3, #ARGV do
  local v = redis.call('HGET', M, ARGV[i])
  if v then redis.call('HSET', M, ARGV[i], string.sub(v, 1, 1) .. ' ' .. (now + tonumber(ARGV[2]))) else lost[#lost + 1] = ARGV[i] end
end
keep(tonumber(ARGV[2]))
return lost`;
// ARGV: lock key, ticket. Drops the ticket (held or waiting) and wakes the lock's waiters.
const RELEASE_SCRIPT = `${COMMON}
redis.call('ZREM', Q, ARGV[2]) redis.call('HDEL', M, ARGV[2])
if redis.call('ZCARD', Q) == 0 then redis.call('DEL', Q, M) else redis.call('PUBLISH', '${LOCKS_CHANNEL}', ARGV[1]) end
return 0`;

interface Waiter { id: string; seq: number; r: LockRequest; grant(): void; fail(e: unknown): void }
/** A lock this node has tickets of: its waiters in queue order, its polling. */
interface LockState { waiters: Waiter[]; held: Set<string>; timer: ReturnType<typeof setTimeout> | null; delayMs: number; checking: boolean; again: boolean }

export class RedisLocks implements LockBackend {
  private readonly locks = new Map<string, LockState>();
  private renewer: ReturnType<typeof setInterval> | null = null;

  private readonly leaseMs: number;
  private readonly renewMs: number;

  /** `leaseMs` and `renewMs` are for tests (the defaults: LOCK_LEASE_MS, LOCK_RENEW_MS). */
  constructor(private readonly redis: SharedRedis, private readonly log: Logger, opts: { leaseMs?: number; renewMs?: number } = {}) {
    this.leaseMs = opts.leaseMs ?? LOCK_LEASE_MS;
    this.renewMs = opts.renewMs ?? LOCK_RENEW_MS;
    redis.subscribe(LOCKS_CHANNEL, (key) => { const s = this.locks.get(key); if (s?.waiters.length) this.check(key, s, true); });
  }

  start() {
    this.renewer ??= setInterval(() => void this.renew(), this.renewMs);
    this.renewer.unref?.();
  }

  stop() {
    if (this.renewer) clearInterval(this.renewer);
    this.renewer = null;
    for (const s of this.locks.values()) if (s.timer) clearTimeout(s.timer);
  }

  private static keys(key: string) { return [`outpost:lockq:${key}`, `outpost:lockm:${key}`]; }

  private state(key: string): LockState {
    let s = this.locks.get(key);
    if (!s) this.locks.set(key, (s = { waiters: [], held: new Set(), timer: null, delayMs: POLL_MIN_MS, checking: false, again: false }));
    return s;
  }

  private forgetIfIdle(key: string, s: LockState) {
    if (s.waiters.length || s.held.size || s.checking) return;
    if (s.timer) clearTimeout(s.timer);
    this.locks.delete(key);
  }

  async acquire(r: LockRequest): Promise<LockGrant> {
    if (r.signal.aborted) throw lockGivenUp(r);
    const id = newUuid();
    const s = this.state(r.key);
    s.held.add(id); // renewed from now on, whatever comes of it
    let answer: [number, number];
    try {
      answer = await this.redis.eval<[number, number]>(ACQUIRE_SCRIPT, RedisLocks.keys(r.key), [r.key, id, r.mode === "exclusive" ? "x" : "s", this.leaseMs]);
    } catch (err) {
      s.held.delete(id);
      this.forgetIfIdle(r.key, s);
      throw err;
    }
    const grant = this.grantOf(r.key, s, id);
    if (answer[0] === 1) {
      if (r.signal.aborted) { await grant.release(); throw lockGivenUp(r); }
      return grant;
    }
    s.held.delete(id);
    return new Promise<LockGrant>((resolve, reject) => {
      const leave = (e: unknown) => {
        clearTimeout(timer);
        r.signal.removeEventListener("abort", giveUp);
        const i = s.waiters.indexOf(w);
        if (i >= 0) s.waiters.splice(i, 1);
        void this.release(r.key, id);
        this.forgetIfIdle(r.key, s);
        reject(e);
      };
      const giveUp = () => leave(lockGivenUp(r));
      const timer = setTimeout(() => leave(lockTimeout(r)), r.waitMs);
      const w: Waiter = {
        id, seq: Number(answer[1]), r, fail: leave,
        grant: () => {
          clearTimeout(timer);
          r.signal.removeEventListener("abort", giveUp);
          s.held.add(id);
          resolve(grant);
        },
      };
      r.signal.addEventListener("abort", giveUp, { once: true });
      // in queue order (two requests of this node may come back from Redis in either order)
      let at = s.waiters.length;
      while (at > 0 && s.waiters[at - 1]!.seq > w.seq) at--;
      s.waiters.splice(at, 0, w);
      this.schedule(r.key, s);
    });
  }

  private grantOf(key: string, s: LockState, id: string): LockGrant {
    let released = false;
    return {
      release: async () => {
        if (released) return;
        released = true;
        s.held.delete(id);
        this.forgetIfIdle(key, s);
        await this.release(key, id);
      },
    };
  }

  private async release(key: string, id: string) {
    try { await this.redis.eval(RELEASE_SCRIPT, RedisLocks.keys(key), [key, id]); }
    catch (err) { this.log.warn("a lock could not be released in Redis; its lease ends it", { lock: key, err: (err as Error).message }); }
  }

  private schedule(key: string, s: LockState) {
    if (s.timer || s.checking || !s.waiters.length) return;
    s.timer = setTimeout(() => { s.timer = null; this.check(key, s, false); }, s.delayMs);
    s.delayMs = Math.min(POLL_MAX_MS, s.delayMs * 2);
  }

  /** Checks this node's waiters of a lock in queue order, granting until one is not. */
  private check(key: string, s: LockState, woken: boolean) {
    if (woken) { s.delayMs = POLL_MIN_MS; if (s.timer) { clearTimeout(s.timer); s.timer = null; } }
    if (s.checking) { s.again = true; return; }
    s.checking = true;
    void (async () => {
      try {
        for (;;) {
          const w = s.waiters[0];
          if (!w) break;
          const g = await this.redis.eval<number>(CHECK_SCRIPT, RedisLocks.keys(key), [key, w.id, this.leaseMs]);
          if (s.waiters[0] !== w) continue; // it gave up meanwhile (and released its ticket)
          if (g === 1) { s.waiters.shift(); s.delayMs = POLL_MIN_MS; w.grant(); continue; }
          if (g === -1) { w.fail(fail("SHARED_STORE_UNAVAILABLE", `${w.r.what}: the request's place in the queue was lost (Redis restarted?)`)); continue; }
          break;
        }
      } catch (err) {
        this.log.debug("lock check failed; tried again", { lock: key, err: (err as Error).message });
      } finally {
        s.checking = false;
      }
      if (s.again) { s.again = false; this.check(key, s, false); return; }
      this.schedule(key, s);
      this.forgetIfIdle(key, s);
    })();
  }

  /** Renews the leases of every ticket of this node. */
  private async renew() {
    for (const [key, s] of this.locks) {
      const ids = [...s.held, ...s.waiters.map((w) => w.id)];
      if (!ids.length) continue;
      try {
        const lost = await this.redis.eval<string[]>(RENEW_SCRIPT, RedisLocks.keys(key), [key, this.leaseMs, ...ids]);
        for (const id of lost ?? []) if (s.held.has(id)) this.log.warn("a lock's lease ran out while held (Redis lost it or this node stalled); others may hold it now", { lock: key });
      } catch (err) {
        this.log.warn("lock leases could not be renewed", { lock: key, err: (err as Error).message });
      }
    }
  }

  /** Locks this node has tickets of (for tests). */
  get size() { return this.locks.size; }
}
