// User secrets from code: ClearBladeAsync.Secret(). Through the user secrets domain with the
// rights its REST routes need (developers; users and devices by the role permission usersecrets).
import { fail } from "../../core/errors.ts";
import type { LibraryArea } from "./types.ts";
import { queryText } from "./types.ts";

const nameOf = (v: unknown): string => {
  if (typeof v !== "string" || !v) throw fail("INVALID_ARGUMENT", "a secret's name is required");
  return v;
};

export const secrets: LibraryArea = {
  ops: {
    "secrets.create": (x, a) => x.e.secrets.create(x.p, x.systemKey, nameOf(a.name), a.data),
    "secrets.read": (x, a) => x.e.secrets.get(x.p, x.systemKey, nameOf(a.name)),
    // [{name, data}] of the secrets the query matches (by name)
    "secrets.readWithQuery": (x, a) => x.e.secrets.find(x.p, x.systemKey, queryText(a.query) ?? undefined),
    "secrets.update": (x, a) => x.e.secrets.update(x.p, x.systemKey, nameOf(a.name), a.data),
    "secrets.delete": (x, a) => x.e.secrets.remove(x.p, x.systemKey, nameOf(a.name)),
    "secrets.deleteWithQuery": (x, a) => x.e.secrets.removeMatching(x.p, x.systemKey, queryText(a.query) ?? undefined),
  },
};
