// Webhook definitions: name, service, authentication method and accepted methods per system.
import type { Executor } from "./db.ts";
import { upsert } from "./sql.ts";

export interface WebhookRow {
  system_key: string; name: string; id: string; description: string; service_name: string;
  /** normalised: "" or "/a/{b}/c" */
  path: string;
  auth_method: string; created_at: string; updated_at: string;
}

export const webhooksRepo = {
  get: (ex: Executor, systemKey: string, name: string) => ex.get<WebhookRow>(`SELECT * FROM webhooks WHERE system_key = ? AND name = ?`, [systemKey, name]),
  list: (ex: Executor, systemKey: string) => ex.all<WebhookRow>(`SELECT * FROM webhooks WHERE system_key = ? ORDER BY name`, [systemKey]),
  put: (ex: Executor, r: WebhookRow) => upsert(ex, "webhooks", r as unknown as Record<string, unknown>, ["system_key", "name"]),
  delete: (ex: Executor, systemKey: string, name: string) => ex.run(`DELETE FROM webhooks WHERE system_key = ? AND name = ?`, [systemKey, name]),
};
