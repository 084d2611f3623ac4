// Locks: ClearBlade.Lock(name, caller) (callbacks optional) and ClearBladeAsync.Lock(name,
// caller) (promises that settle once granted or released): lock/unlock exclusive, rlock/runlock
// shared, per system by name (domain/locks.ts). What a run holds or waits for is given up when the
// run ends.
import type { LockMode, LockSession } from "../../domain/locks.ts";
import type { HostContext, LibraryArea } from "./types.ts";

/** The run's locks: taken on its first lock call, before anything waits (a run that ends
 *  meanwhile still closes it), and given up when the run ends. */
const sessionOf = (x: HostContext) =>
  x.run.resource<LockSession>("locks", () => {
    const s = x.e.locks.session(x.systemKey);
    return { value: s, close: () => s.close() };
  });

const take = (mode: LockMode) => async (x: HostContext, a: Record<string, any>) => { await sessionOf(x).lock(a.name, a.caller, mode); return null; };
const give = (mode: LockMode) => async (x: HostContext, a: Record<string, any>) => { await sessionOf(x).unlock(a.name, a.caller, mode); return null; };

export const lock: LibraryArea = {
  ops: {
    "lock.lock": take("exclusive"),
    "lock.unlock": give("exclusive"),
    "lock.rlock": take("shared"),
    "lock.runlock": give("shared"),
  },
};
