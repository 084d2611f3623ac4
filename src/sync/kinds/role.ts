// Roles: the platform's, but for the built-in ones every node keeps its own.
import { rolesRepo, type RoleRow } from "../../store/roles.ts";
import type { DefinitionKind } from "./kind.ts";

const BUILT_IN_ROLES = ["Administrator", "Authenticated", "Anonymous"];

export const role: DefinitionKind<RoleRow> = {
  type: "role",
  list: (ex, sk) => rolesRepo.all(ex, sk), nameOf: (r) => r.name, body: (_ex, _sk, r) => r,
  apply: (ex, sk, _n, b: RoleRow) => rolesRepo.put(ex, { ...b, system_key: sk }),
  remove: async (ex, sk, _n, b: { role_id: string }) => { await rolesRepo.delete(ex, sk, b.role_id); },
  deleteBody: async (ex, sk, name) => {
    // the built-in roles are every node's own
    if (BUILT_IN_ROLES.includes(name)) return undefined;
    const r = await rolesRepo.byName(ex, sk, name);
    return r ? { role_id: r.role_id } : undefined;
  },
  stale: ["tokens"],
};
