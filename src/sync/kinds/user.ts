// Users, named by their email, with the roles they hold (what an edge may hold of them: see
// userForEdge).
import { rolesRepo } from "../../store/roles.ts";
import { usersRepo, type UserRow } from "../../store/users.ts";
import { userForEdge } from "../../domain/users.ts";
import type { DefinitionKind } from "./kind.ts";

export const user: DefinitionKind<UserRow> = {
  type: "user",
  list: (ex, sk) => usersRepo.all(ex, sk), nameOf: (u) => u.email,
  body: async (ex, sk, u) => ({ user: userForEdge(u), roles: await rolesRepo.rolesOf(ex, sk, "user", u.user_id) }),
  apply: async (ex, sk, _n, b: { user: UserRow; roles: string[] }) => {
    await usersRepo.put(ex, { ...b.user, system_key: sk });
    await rolesRepo.setMembers(ex, sk, "user", b.user.user_id, b.roles);
  },
  remove: async (ex, sk, _n, b: { user_id: string }) => {
    await rolesRepo.removeSubject(ex, sk, "user", b.user_id);
    await usersRepo.delete(ex, sk, b.user_id);
  },
  deleteBody: async (ex, sk, name) => { const u = await usersRepo.byEmail(ex, sk, name); return u ? { user_id: u.user_id } : undefined; },
  stale: ["tokens"],
};
