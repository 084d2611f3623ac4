// Versions of the service caches' values, in memory every code worker shares, so that a worker
// can answer a cache read from its own copy of the values (code/cacheMirror.ts) instead of asking
// the main thread: the main thread adds one to a cache's version after every change of its values
// (set, delete, flush, the cache deleted), and a copy read at another version is not used.
// Caches share the slots by a hash of their ids: two caches on one slot only make each other's
// copies go more often.
//
// One more slot counts changes of rights on caches (roles and their permissions, cache
// definitions, systems changed or removed): a worker may remember what a run's rights on caches were for
// later runs with the same roles only while that count has not moved (code/cacheMirror.ts).
//
// A worker may also make a set itself (code/cacheMirror.ts) without waiting for the main thread:
// it takes a ticket from the slot's issued count, reserves the pair's bytes in the slot's bound,
// bumps the version and posts the set. The main thread applies posted sets in ticket order, and
// anything else it does with a cache's values (a get from a worker whose copy is stale, a set it
// was asked for, the REST routes) first waits until every ticket issued before it came has been
// applied: a set that returned in one run is seen by any later call anywhere. The bound is an
// upper bound of the bytes the slot's caches hold once every reserved set is applied; a worker
// sets locally only while its pair keeps it under a cache's limit, and the main thread reserves
// its own writes there before it looks at the tickets, so a set a worker let through is never
// refused later.
//
// Only a node that keeps the values itself (one platform, an edge) has versions: in a cluster
// another node may change a value at any time, so every read asks Redis.
import type { Principal } from "../auth/principal.ts";

/** Slots (Int32) in the shared buffer. */
export const VERSION_SLOTS = 4096;
/** The slot after the caches' counting changes of rights. */
export const RIGHTS_SLOT = VERSION_SLOTS;
/** Where the slots' issued counts (tickets of sets made by workers) and byte bounds start. */
export const ISSUED_BASE = RIGHTS_SLOT + 1;
export const BOUND_BASE = ISSUED_BASE + VERSION_SLOTS;
/** A posted ticket that did not come within this long is given up on (its worker died between
 *  taking it and posting its set: no run saw that set), so later calls do not wait forever. */
const TICKET_WAIT_MS = 5_000;

/** A set a worker made itself, as it posts it to the main thread (protocol.ts); without `k`, a
 *  ticket it took and gave up (the set went to the main thread instead). */
export interface PostedSet {
  /** the slot and the ticket */
  s: number;
  n: number;
  /** the cache: system key, values id, TTL (ms) */
  sk?: string;
  id?: string;
  ttl?: number;
  /** the key, the value's JSON text, the bytes reserved for it, when it was made (epoch ms) */
  k?: string;
  j?: string;
  r?: number;
  at?: number;
}

/** What a cache call's answer tells the worker that made it (the `_m` of its data): the cache's
 *  values id and slot, the levels the run's user holds on it (for that run, and for runs with the
 *  same roles while the rights count holds), and when the answer's values are a copy a worker may
 *  keep, the version they were read or written at (`v`) and when the cache expires if nothing
 *  writes to it (`x`, epoch ms). */
export interface MirrorNote { id: string; s: number; lv: number; v?: number; x?: number; sk?: string; ttl?: number }

export class CacheVersions {
  readonly buffer = new SharedArrayBuffer((BOUND_BASE + VERSION_SLOTS) * 4);
  private readonly versions = new Int32Array(this.buffer);
  /** by slot: the tickets applied (main thread only) */
  private readonly applied = new Int32Array(VERSION_SLOTS);
  /** by slot: posted sets not applied yet by ticket (null: a ticket given up), and calls waiting
   *  for the tickets issued before them */
  private readonly queued = new Map<number, Map<number, (() => Promise<void> | undefined) | null>>();
  private readonly waiting = new Map<number, { upTo: number; go: () => void }[]>();
  private readonly draining = new Set<number>();
  private readonly stalls = new Map<number, ReturnType<typeof setTimeout>>();

  constructor(private readonly onLost: (slot: number, ticket: number) => void = () => {}, private readonly ticketWaitMs = TICKET_WAIT_MS) {}

  /** The slot of a cache's values (FNV-1a of its system key and id). */
  slotOf(systemKey: string, id: string): number {
    let h = 0x811c9dc5;
    const s = `${systemKey}/${id}`;
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
    return (h >>> 0) % VERSION_SLOTS;
  }

  readonly slots = VERSION_SLOTS;

  current(slot: number): number { return Atomics.load(this.versions, slot); }

  /** Marks the slot's values changed, after they were. The new version when `before` (read
   *  before the change was made) was still the version, so the change made is the newest;
   *  undefined when another change came meanwhile (what this one wrote may not be the value). */
  bump(slot: number, before?: number): number | undefined {
    const old = Atomics.add(this.versions, slot, 1);
    return before !== undefined && old === before ? (old + 1) | 0 : undefined;
  }

  /** Every copy goes (a whole system's values went). */
  bumpAll() { for (let i = 0; i < VERSION_SLOTS; i++) Atomics.add(this.versions, i, 1); }

  /** Counts `bytes` more (less, when negative) in the slot's bound. */
  reserve(slot: number, bytes: number) { if (bytes) Atomics.add(this.versions, BOUND_BASE + slot, bytes); }

  bound(slot: number): number { return Atomics.load(this.versions, BOUND_BASE + slot); }

  /** Undefined when every set issued on the slot so far is applied; else a promise that resolves
   *  once they are (later ones are not waited for). */
  settled(slot: number): Promise<void> | undefined {
    const upTo = Atomics.load(this.versions, ISSUED_BASE + slot);
    if (((this.applied[slot]! - upTo) | 0) >= 0) return undefined;
    return new Promise((go) => {
      const w = this.waiting.get(slot);
      if (w) w.push({ upTo, go });
      else this.waiting.set(slot, [{ upTo, go }]);
      this.watch(slot);
    });
  }

  /** A posted set (`apply`, answering undefined when it applied it at once) or a ticket given up
   *  (null): applied in ticket order. */
  posted(slot: number, ticket: number, apply: (() => Promise<void> | undefined) | null) {
    let q = this.queued.get(slot);
    if (!q) this.queued.set(slot, (q = new Map()));
    q.set(ticket, apply);
    this.drain(slot);
  }

  /** Applies the slot's tickets in order, within the call, until one has not come or its apply
   *  answers a promise (the rest go on once it settles): the sets a message brought are applied
   *  in a row, without a promise or an await each (a worker's run that sets a key posts one). */
  private drain(slot: number) {
    if (this.draining.has(slot)) return;
    for (;;) {
      const q = this.queued.get(slot), next = this.applied[slot]!;
      const apply = q?.get(next);
      if (apply === undefined) break;
      q!.delete(next);
      if (!q!.size) this.queued.delete(slot);
      // (an apply reports its own failure: the tickets after it go on)
      const applying = apply?.();
      if (applying) {
        this.draining.add(slot);
        void applying.catch(() => {}).then(() => { this.draining.delete(slot); this.advance(slot); this.drain(slot); });
        return;
      }
      this.advance(slot);
    }
    this.watch(slot);
  }

  /** One more ticket applied: the calls waiting for it go on. */
  private advance(slot: number) {
    const now = (this.applied[slot] = (this.applied[slot]! + 1) | 0);
    const w = this.waiting.get(slot);
    if (!w) return;
    const still = w.filter((x) => ((now - x.upTo) | 0) < 0);
    if (still.length === w.length) return;
    if (still.length) this.waiting.set(slot, still);
    else this.waiting.delete(slot);
    for (const x of w) if (((now - x.upTo) | 0) >= 0) x.go();
  }

  /** While something waits for the slot's next ticket, a timer gives it up if it never comes. */
  private watch(slot: number) {
    const stalled = this.queued.has(slot) || this.waiting.has(slot);
    const t = this.stalls.get(slot);
    if (!stalled) { if (t) { clearTimeout(t); this.stalls.delete(slot); } return; }
    if (t) return;
    const at = this.applied[slot]!;
    const timer = setTimeout(() => {
      this.stalls.delete(slot);
      if (this.applied[slot] !== at || this.draining.has(slot)) { this.watch(slot); return; }
      this.onLost(slot, at);
      this.advance(slot);
      this.drain(slot);
    }, this.ticketWaitMs);
    timer.unref?.();
    this.stalls.set(slot, timer);
  }

  /** What runs' rights on caches were is forgotten by every worker (called once a change of roles,
   *  permissions or cache definitions is made, before anyone is told it is). */
  rightsChanged() { Atomics.add(this.versions, RIGHTS_SLOT, 1); }
}

/** Whose rights on caches a run has, as far as they decide them: runs with the same key hold the
 *  same rights while no role, permission or cache definition changes. Only users, devices and
 *  anonymous callers (their rights are their roles'); undefined for the others, whose runs ask. */
export function cacheRightsKey(p: Principal, systemKey: string): string | undefined {
  if (p.kind !== "user" && p.kind !== "device" && p.kind !== "anonymous") return undefined;
  if (p.systemKey !== systemKey) return undefined;
  return `${p.kind}/${systemKey}/${[...p.roles].sort().join(",")}`;
}
