// Globals services use beyond ClearBlade's objects: sleep, JavaScript timers within a run,
// atob/btoa, TextEncoder/TextDecoder, and ClearBlade's crypto module (hashes, HMAC, encode/decode,
// JWTs) with random bytes and UUIDs. Timers wait on the main thread; crypto runs in the worker
// itself (code/local.ts), with no round trip.
import { fail } from "../../core/errors.ts";
import type { HostContext, LibraryArea } from "./types.ts";

/** The longest one timer or sleep waits (a run's own deadline usually ends it first). */
export const TIMER_MAX_MS = 24 * 3600_000;

/** A run's timers: each waiting timer's way to end its wait early (cleared). */
type RunTimers = Map<number, () => void>;
const timersOf = (x: HostContext) => x.run.resource<RunTimers>("timers", () => {
  const m: RunTimers = new Map();
  return { value: m, close: () => { for (const end of m.values()) end(); m.clear(); } };
});

function waitMs(v: unknown): number {
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw fail("INVALID_ARGUMENT", "the time to wait must be a number of milliseconds, 0 or more");
  return Math.min(v, TIMER_MAX_MS);
}

export const globals: LibraryArea = {
  ops: {
    "timer.wait": (x, a) => {
      const ms = waitMs(a.ms);
      const id = a.id;
      return new Promise<null>((resolve) => {
        const t = setTimeout(() => { if (typeof id === "number") timersOf(x).delete(id); resolve(null); }, ms);
        if (typeof id === "number") timersOf(x).set(id, () => { clearTimeout(t); resolve(null); });
      });
    },
    "timer.cancel": (x, a) => {
      const timers = x.run.peek<RunTimers>("timers");
      const end = typeof a.id === "number" ? timers?.get(a.id) : undefined;
      if (end) { timers!.delete(a.id); end(); }
      return null;
    },
  },
};
