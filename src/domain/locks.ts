// Locks for code services (ClearBlade.Lock / ClearBladeAsync.Lock): named per system, exclusive
// (lock/unlock) or shared (rlock/runlock), granted first come first served. A request waits at
// most LOCK_WAIT_MS. What a run holds or waits for is released when the run ends, however it
// ends (LockSession, a resource of the run). Kept in this process (LocalLocks: one node, an
// edge) or, on a cluster, in Redis (cluster/locks.ts), where a lease bounds how long a node that
// died can keep a lock.
import { fail } from "../core/errors.ts";

export type LockMode = "exclusive" | "shared";

/** How long a lock request waits before it is answered LOCK_TIMEOUT. */
export const LOCK_WAIT_MS = 60_000;
/** Lock names and callers: strings up to this many characters. */
export const LOCK_NAME_MAX = 256;

/** A granted lock: release() gives it up (a second call does nothing). */
export interface LockGrant { release(): Promise<void> }

export interface LockRequest {
  /** the lock, scoped by system: `<system key>:<name>` */
  key: string;
  mode: LockMode;
  waitMs: number;
  /** aborting gives up the request (its place in the queue goes) */
  signal: AbortSignal;
  /** the lock as error messages name it */
  what: string;
}

/** Where locks are kept: grants requests of one key in the order they came, shared ones together
 *  (a shared request behind a waiting exclusive one waits: writers do not starve). */
export interface LockBackend { acquire(r: LockRequest): Promise<LockGrant> }

export const lockTimeout = (r: LockRequest) => fail("LOCK_TIMEOUT", `${r.what} was not granted within ${Math.round(r.waitMs / 1000)} s`);
export const lockGivenUp = (r: LockRequest) => fail("INVALID_ARGUMENT", `the run ended while it waited for ${r.what}`);

interface Ticket { mode: LockMode; granted: boolean; grant(): void }

/** Locks of this process: per key a queue of requests, holders first. */
export class LocalLocks implements LockBackend {
  private readonly queues = new Map<string, Ticket[]>();

  acquire(r: LockRequest): Promise<LockGrant> {
    return new Promise((resolve, reject) => {
      if (r.signal.aborted) return reject(lockGivenUp(r));
      let q = this.queues.get(r.key);
      if (!q) this.queues.set(r.key, (q = []));
      const giveUp = () => { clearTimeout(timer); this.remove(r.key, t); reject(lockGivenUp(r)); };
      const timer = setTimeout(() => { r.signal.removeEventListener("abort", giveUp); this.remove(r.key, t); reject(lockTimeout(r)); }, r.waitMs);
      const t: Ticket = {
        mode: r.mode, granted: false,
        grant: () => {
          clearTimeout(timer);
          r.signal.removeEventListener("abort", giveUp);
          resolve({ release: async () => this.remove(r.key, t) });
        },
      };
      r.signal.addEventListener("abort", giveUp, { once: true });
      q.push(t);
      this.grant(q);
    });
  }

  /** Grants the front of the queue: one exclusive request, or the shared ones before the first
   *  exclusive. */
  private grant(q: Ticket[]) {
    for (let i = 0; i < q.length; i++) {
      const t = q[i]!;
      if (t.mode === "exclusive") {
        if (i === 0 && !t.granted) { t.granted = true; t.grant(); }
        return;
      }
      if (!t.granted) { t.granted = true; t.grant(); }
    }
  }

  private remove(key: string, t: Ticket) {
    const q = this.queues.get(key);
    const i = q ? q.indexOf(t) : -1;
    if (!q || i < 0) return;
    q.splice(i, 1);
    if (q.length) this.grant(q);
    else this.queues.delete(key);
  }

  /** Keys with holders or waiters (for tests). */
  get size() { return this.queues.size; }
}

/** A lock name or a caller from user code: a string of 1 to LOCK_NAME_MAX characters. */
function checkName(v: unknown, what: string): string {
  if (typeof v !== "string" || !v.length || v.length > LOCK_NAME_MAX) throw fail("INVALID_ARGUMENT", `${what} must be a string of 1 to ${LOCK_NAME_MAX} characters`);
  return v;
}

/** A caller (who takes the lock, as the service names itself): a string up to LOCK_NAME_MAX
 *  characters, "" when left out. */
function checkCaller(v: unknown): string {
  if (v === undefined || v === null) return "";
  if (typeof v !== "string" || v.length > LOCK_NAME_MAX) throw fail("INVALID_ARGUMENT", `the lock's caller must be a string of up to ${LOCK_NAME_MAX} characters`);
  return v;
}

/** The locks of code services, by system. */
export class Locks {
  constructor(readonly backend: LockBackend, readonly waitMs = LOCK_WAIT_MS) {}

  /** A holder's locks in a system: what one service run takes. */
  session(systemKey: string): LockSession { return new LockSession(this, systemKey); }
}

/** What one holder (a service run) holds and waits for, by lock name and caller: a run's Lock
 *  objects with different callers are different holders (one may wait for the other). close()
 *  gives everything up; it runs when the run ends. */
export class LockSession {
  private readonly held = new Map<string, { mode: LockMode; grant: LockGrant }>();
  private readonly waiting = new Map<string, AbortController>();
  private closed = false;

  constructor(private readonly locks: Locks, private readonly systemKey: string) {}

  /** Resolves once the lock is granted to (name, caller). */
  async lock(name: unknown, caller: unknown, mode: LockMode): Promise<void> {
    const n = checkName(name, "the lock's name"), c = checkCaller(caller);
    const k = `${n}\u0000${c}`;
    if (this.closed) throw fail("INVALID_ARGUMENT", "the run has ended");
    const h = this.held.get(k);
    if (h) throw fail("INVALID_ARGUMENT", h.mode === mode ? `lock '${n}' is already held by '${c}' in this run`
      : `'${c}' holds lock '${n}' ${h.mode === "shared" ? "shared (rlock): runlock it" : "exclusively (lock): unlock it"} before taking it ${mode === "shared" ? "shared" : "exclusively"}`);
    if (this.waiting.has(k)) throw fail("INVALID_ARGUMENT", `'${c}' is already waiting for lock '${n}' in this run`);
    const ac = new AbortController();
    this.waiting.set(k, ac);
    let grant: LockGrant;
    try {
      grant = await this.locks.backend.acquire({ key: `${this.systemKey}:${n}`, mode, waitMs: this.locks.waitMs, signal: ac.signal, what: `lock '${n}'` });
    } finally {
      this.waiting.delete(k);
    }
    // granted as the run ended: nobody is left to release it
    if (this.closed) { await grant.release(); throw fail("INVALID_ARGUMENT", "the run has ended"); }
    this.held.set(k, { mode, grant });
  }

  /** Releases what (name, caller) holds in `mode`. */
  async unlock(name: unknown, caller: unknown, mode: LockMode): Promise<void> {
    const n = checkName(name, "the lock's name"), c = checkCaller(caller);
    const k = `${n}\u0000${c}`;
    const h = this.held.get(k);
    if (!h || h.mode !== mode) throw fail("INVALID_ARGUMENT", `lock '${n}' is not held ${mode === "shared" ? "shared (rlock)" : "exclusively (lock)"} by '${c}' in this run`);
    this.held.delete(k);
    await h.grant.release();
  }

  /** Gives up every wait and releases every lock held. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const ac of this.waiting.values()) ac.abort();
    const held = [...this.held.values()];
    this.held.clear();
    await Promise.all(held.map((h) => h.grant.release()));
  }
}
