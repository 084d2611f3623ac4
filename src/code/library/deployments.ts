// Deployments from code: ClearBlade.Deployment() (callbacks) and ClearBladeAsync.Deployment()
// (promises). Through the deployments domain with the rights its REST routes need (developers;
// users and devices by the role permission deployments).
import { fail } from "../../core/errors.ts";
import type { LibraryArea } from "./types.ts";
import { queryText } from "./types.ts";

const nameOf = (v: unknown): string => {
  if (typeof v !== "string" || !v) throw fail("INVALID_ARGUMENT", "a deployment's name is required");
  return v;
};

export const deployments: LibraryArea = {
  ops: {
    // create(name, description, options): options holds the assets and edges
    "deployments.create": (x, a) => {
      const options = (a.options ?? {}) as Record<string, unknown>;
      if (typeof options !== "object" || Array.isArray(options)) throw fail("INVALID_ARGUMENT", "a deployment's options must be an object of assets and edges");
      return x.e.deployments.create(x.p, x.systemKey, { ...options, name: nameOf(a.name), description: a.description ?? "" });
    },
    "deployments.read": (x, a) => x.e.deployments.get(x.p, x.systemKey, nameOf(a.name)),
    // readAll answers whole deployments (not the REST list's {name, description})
    "deployments.readAll": (x, a) => x.e.deployments.all(x.p, x.systemKey, queryText(a.query) ?? null),
    "deployments.update": (x, a) => x.e.deployments.update(x.p, x.systemKey, nameOf(a.name), a.changes),
    "deployments.delete": (x, a) => x.e.deployments.remove(x.p, x.systemKey, nameOf(a.name)),
  },
};
