// Trigger handlers and timers.
import type { Executor } from "./db.ts";

export interface TriggerRow {
  system_key: string; name: string; def_module: string; def_name: string; key_value_pairs: string;
  service_name: string; disabled: number; created_at: string;
  /** whose rights the service runs with (see RunAs in domain/triggers.ts) */
  user_id: string; user_type: number;
}
export interface TimerRow {
  system_key: string; name: string; description: string; frequency: number; repeats: number; start_time: string;
  service_name: string; user_id: string; user_type: number; disabled: number; runs: number; next_run: number | null; created_at: string;
}

const TRIGGER_COLS = ["system_key", "name", "def_module", "def_name", "key_value_pairs", "service_name", "disabled", "created_at", "user_id", "user_type"] as const;
const TIMER_COLS = ["system_key", "name", "description", "frequency", "repeats", "start_time", "service_name", "user_id", "user_type", "disabled", "runs", "next_run", "created_at"] as const;

export const triggersRepo = {
  get: (ex: Executor, systemKey: string, name: string) => ex.get<TriggerRow>(`SELECT * FROM triggers WHERE system_key = ? AND name = ?`, [systemKey, name]),
  list: (ex: Executor, systemKey: string) => ex.all<TriggerRow>(`SELECT * FROM triggers WHERE system_key = ? ORDER BY name`, [systemKey]),
  all: (ex: Executor) => ex.all<TriggerRow>(`SELECT * FROM triggers`),
  upsert: (ex: Executor, r: TriggerRow) =>
    ex.run(`INSERT INTO triggers(${TRIGGER_COLS.join(", ")}) VALUES (${TRIGGER_COLS.map(() => "?").join(", ")})
      ON CONFLICT(system_key, name) DO UPDATE SET def_module = excluded.def_module, def_name = excluded.def_name,
      key_value_pairs = excluded.key_value_pairs, service_name = excluded.service_name, disabled = excluded.disabled,
      user_id = excluded.user_id, user_type = excluded.user_type`, TRIGGER_COLS.map((c) => r[c])),
  delete: (ex: Executor, systemKey: string, name: string) => ex.run(`DELETE FROM triggers WHERE system_key = ? AND name = ?`, [systemKey, name]),
};

export const timersRepo = {
  get: (ex: Executor, systemKey: string, name: string) => ex.get<TimerRow>(`SELECT * FROM timers WHERE system_key = ? AND name = ?`, [systemKey, name]),
  list: (ex: Executor, systemKey: string) => ex.all<TimerRow>(`SELECT * FROM timers WHERE system_key = ? ORDER BY name`, [systemKey]),
  /** Enabled timers due at `now` (epoch ms). */
  due: (ex: Executor, now: number) => ex.all<TimerRow>(`SELECT * FROM timers WHERE disabled = 0 AND next_run IS NOT NULL AND next_run <= ?`, [now]),
  upsert: (ex: Executor, r: TimerRow) =>
    ex.run(`INSERT INTO timers(${TIMER_COLS.join(", ")}) VALUES (${TIMER_COLS.map(() => "?").join(", ")})
      ON CONFLICT(system_key, name) DO UPDATE SET description = excluded.description, frequency = excluded.frequency, repeats = excluded.repeats,
      start_time = excluded.start_time, service_name = excluded.service_name, user_id = excluded.user_id, user_type = excluded.user_type,
      disabled = excluded.disabled, runs = excluded.runs, next_run = excluded.next_run`, TIMER_COLS.map((c) => r[c])),
  /** Records a firing: only if the timer is still at `expectedNext` (another node may have fired it). */
  fired: (ex: Executor, systemKey: string, name: string, expectedNext: number, nextRun: number | null) =>
    ex.run(`UPDATE timers SET runs = runs + 1, next_run = ? WHERE system_key = ? AND name = ? AND next_run = ?`, [nextRun, systemKey, name, expectedNext]),
  delete: (ex: Executor, systemKey: string, name: string) => ex.run(`DELETE FROM timers WHERE system_key = ? AND name = ?`, [systemKey, name]),
};
