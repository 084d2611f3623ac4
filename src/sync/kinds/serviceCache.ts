// Shared cache definitions (name, TTL, description): the definition deploys, its values stay
// each node's own (they live in memory where the services run).
import { type ServiceCacheRow, serviceCachesRepo } from "../../store/serviceCaches.ts";
import { byName, type DefinitionKind } from "./kind.ts";

export const serviceCache: DefinitionKind<ServiceCacheRow> = {
  type: "servicecache",
  list: (ex, sk) => serviceCachesRepo.list(ex, sk), nameOf: (r) => r.name, body: (_ex, _sk, r) => r,
  apply: (ex, sk, _n, b: ServiceCacheRow) => serviceCachesRepo.put(ex, { ...b, system_key: sk }),
  remove: (ex, sk, name) => serviceCachesRepo.delete(ex, sk, name),
  deleteBody: (_ex, _sk, name) => byName(name), stale: ["servicecaches"],
};
