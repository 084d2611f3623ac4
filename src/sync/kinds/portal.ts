// Portal and plugin records: the row is the body; nothing on the edge caches them.
import type { PortalKind, PortalRow } from "../../store/portals.ts";
import { portalsRepo } from "../../store/portals.ts";
import { byName, type DefinitionKind } from "./kind.ts";

function records(type: PortalKind): DefinitionKind<PortalRow> {
  const repo = portalsRepo(type);
  return {
    type,
    list: (ex, sk) => repo.list(ex, sk), nameOf: (r) => r.name, body: (_ex, _sk, r) => r,
    apply: (ex, sk, _n, b: PortalRow) => repo.put(ex, { ...b, system_key: sk }),
    remove: (ex, sk, name) => repo.delete(ex, sk, name),
    deleteBody: (_ex, _sk, name) => byName(name), stale: [],
  };
}

export const portal = records("portal");
export const plugin = records("plugin");
