// Throttling cases. The three throttlers are fixed names, not rows; the
// built-in cases are not rows either (they exist by configuration, src/throttle/cases.ts).
import type { Executor } from "./db.ts";
import { upsert } from "./sql.ts";

export interface CaseRow {
  throttler_name: string; case_name: string; system_key: string; consumer: string; resource: string;
  limiter_type: string; max_num: number; duration: number | null; priority: number; created_at: string; updated_at: string;
}

export const casesRepo = {
  all: (ex: Executor) => ex.all<CaseRow>(`SELECT * FROM throttle_cases ORDER BY throttler_name, priority, case_name`),
  get: (ex: Executor, throttler: string, name: string) =>
    ex.get<CaseRow>(`SELECT * FROM throttle_cases WHERE throttler_name = ? AND case_name = ?`, [throttler, name]),
  put: (ex: Executor, r: CaseRow) => upsert(ex, "throttle_cases", r as unknown as Record<string, unknown>, ["throttler_name", "case_name"]),
  delete: (ex: Executor, throttler: string, name: string) =>
    ex.run(`DELETE FROM throttle_cases WHERE throttler_name = ? AND case_name = ?`, [throttler, name]),
  deleteThrottler: (ex: Executor, throttler: string) => ex.run(`DELETE FROM throttle_cases WHERE throttler_name = ?`, [throttler]),
  deleteAll: (ex: Executor) => ex.run(`DELETE FROM throttle_cases`),
};
