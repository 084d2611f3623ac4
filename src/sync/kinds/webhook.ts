// Webhook definitions: the edge answers its own webhook calls with its copy of the service.
import { type WebhookRow, webhooksRepo } from "../../store/webhooks.ts";
import { byName, type DefinitionKind } from "./kind.ts";

export const webhook: DefinitionKind<WebhookRow> = {
  type: "webhook",
  list: (ex, sk) => webhooksRepo.list(ex, sk), nameOf: (r) => r.name, body: (_ex, _sk, r) => r,
  apply: (ex, sk, _n, b: WebhookRow) => webhooksRepo.put(ex, { ...b, system_key: sk }),
  remove: (ex, sk, name) => webhooksRepo.delete(ex, sk, name),
  deleteBody: (_ex, _sk, name) => byName(name), stale: ["webhooks"],
};
