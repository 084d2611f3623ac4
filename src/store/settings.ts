// Platform-wide key/value settings (license key and the like).
import type { Executor } from "./db.ts";

export const settingsRepo = {
  async get(ex: Executor, key: string): Promise<string | undefined> {
    return (await ex.get<{ value: string }>(`SELECT value FROM settings WHERE key = ?`, [key]))?.value;
  },
  put: (ex: Executor, key: string, value: string) =>
    ex.run(`INSERT INTO settings(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, [key, value]),
  delete: (ex: Executor, key: string) => ex.run(`DELETE FROM settings WHERE key = ?`, [key]),
  /** Inserts only when absent; returns the stored value either way. */
  async getOrInit(ex: Executor, key: string, value: string): Promise<string> {
    await ex.run(`INSERT INTO settings(key, value) VALUES (?, ?) ON CONFLICT(key) DO NOTHING`, [key, value]);
    return (await this.get(ex, key))!;
  },
};
