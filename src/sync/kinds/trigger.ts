// Triggers: the platform's definitions; a change makes the trigger dispatcher's index stale.
import { triggersRepo, type TriggerRow } from "../../store/triggers.ts";
import { byName, type DefinitionKind } from "./kind.ts";

export const trigger: DefinitionKind<TriggerRow> = {
  type: "trigger",
  list: (ex, sk) => triggersRepo.list(ex, sk), nameOf: (r) => r.name, body: (_ex, _sk, r) => r,
  // a platform from before run identities sends neither field
  apply: (ex, sk, _n, t: TriggerRow) => triggersRepo.upsert(ex, { ...t, user_id: t.user_id ?? "", user_type: t.user_type ?? 1, system_key: sk }),
  remove: async (ex, sk, name) => { await triggersRepo.delete(ex, sk, name); },
  deleteBody: (_ex, _sk, name) => byName(name), stale: ["triggers"],
};
