// Timers: the platform's definitions, run by the edge's own scheduler.
import { timersRepo, type TimerRow } from "../../store/triggers.ts";
import { byName, type DefinitionKind } from "./kind.ts";

export const timer: DefinitionKind<TimerRow> = {
  type: "timer",
  list: (ex, sk) => timersRepo.list(ex, sk), nameOf: (r) => r.name, body: (_ex, _sk, r) => r,
  apply: async (ex, sk, name, b: TimerRow) => {
    // the edge runs the timer itself: keep its own progress when the definition did not change
    const cur = await timersRepo.get(ex, sk, name);
    const t = { ...b, system_key: sk };
    const same = cur && cur.frequency === t.frequency && cur.repeats === t.repeats && cur.start_time === t.start_time;
    await timersRepo.upsert(ex, same ? { ...t, runs: cur.runs, next_run: cur.next_run } : t);
  },
  remove: async (ex, sk, name) => { await timersRepo.delete(ex, sk, name); },
  // the scheduler reads due timers from the database
  deleteBody: (_ex, _sk, name) => byName(name), stale: [],
};
