// Compaction of the change log: entries every edge of a system that can resume from the log has
// acknowledged go (with the tombstones of deletes among them), a step at a time.
import { nowSeconds } from "../../core/ids.ts";
import { changesRepo, lowestCursors } from "../../store/sync.ts";
import type { HubState } from "./state.ts";

/** Change log entries kept per system beyond what every edge acknowledged (an edge further
 *  behind than this gets a fresh snapshot). */
const LOG_KEEP = 200_000;
/** Log entries a compaction step spans at most (seqs: entries of other systems count). */
const COMPACT_STEP = 5_000;

/** Drops log entries every edge of a system that can resume from the log has acknowledged (and
 *  the tombstones of deletes among them); keeps the log bounded. */
export async function compact(h: HubState) {
  for (const s of await lowestCursors(h.d.db, nowSeconds() - 7 * 86_400)) {
    let low = s.low ?? Number.MAX_SAFE_INTEGER;
    // a full snapshot under way ends at its own position: the log after it must stay
    for (const x of h.bySystem.get(s.system_key) ?? []) if (x.running?.job.kind === "full") low = Math.min(low, x.running.seq);
    const max = await changesRepo.maxSeq(h.d.db, s.system_key);
    const upTo = Math.min(max, Math.max(low, max - LOG_KEEP));
    if (upTo <= 0) continue;
    // a step at a time, each its own transaction: one transaction deleting 100,000 entries held
    // every other write of the node for a second
    for (let through = 0; through < upTo;) {
      const first = await changesRepo.minSeq(h.d.db, s.system_key);
      through = first === 0 ? upTo : Math.min(upTo, Math.max(through, first - 1) + COMPACT_STEP);
      const step = through;
      await h.d.db.tx((tx) => changesRepo.compact(tx, s.system_key, step));
      h.logMoved(s.system_key);
      if (through < upTo) await new Promise((r) => setImmediate(r));
    }
    h.d.log.debug("change log compacted", { systemKey: s.system_key, upTo, head: max });
  }
}
