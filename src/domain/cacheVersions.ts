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
// Only a node that keeps the values itself (one platform, an edge) has versions: in a cluster
// another node may change a value at any time, so every read asks Redis.
import type { Principal } from "../auth/principal.ts";

/** Slots (Int32) in the shared buffer. */
export const VERSION_SLOTS = 4096;
/** The slot after the caches' counting changes of rights. */
export const RIGHTS_SLOT = VERSION_SLOTS;

/** What a cache call's answer tells the worker that made it (the `_m` of its data): the cache's
 *  values id and slot, the levels the run's user holds on it (for that run, and for runs with the
 *  same roles while the rights count holds), and when the answer's values are a copy a worker may
 *  keep, the version they were read or written at (`v`) and when the cache expires if nothing
 *  writes to it (`x`, epoch ms). */
export interface MirrorNote { id: string; s: number; lv: number; v?: number; x?: number }

export class CacheVersions {
  readonly buffer = new SharedArrayBuffer((VERSION_SLOTS + 1) * 4);
  private readonly versions = new Int32Array(this.buffer);

  /** The slot of a cache's values (FNV-1a of its system key and id). */
  slotOf(systemKey: string, id: string): number {
    let h = 0x811c9dc5;
    const s = `${systemKey}/${id}`;
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
    return (h >>> 0) % VERSION_SLOTS;
  }

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
