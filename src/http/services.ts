// What the HTTP routes call: the domain modules, plus the token resolver.
import type { Tokens } from "../auth/tokens.ts";
import type { Config } from "../config.ts";
import type { Collections } from "../domain/collections.ts";
import type { Developers } from "../domain/developers.ts";
import type { DeveloperKeys } from "../domain/developerKeys.ts";
import type { Devices } from "../domain/devices.ts";
import type { Messages } from "../domain/messages.ts";
import type { CodeServices } from "../domain/services.ts";
import type { CodeEngine } from "../code/engine.ts";
import type { Triggers } from "../domain/triggers.ts";
import type { Webhooks } from "../domain/webhooks.ts";
import type { Throttlers } from "../domain/throttlers.ts";
import type { Adapters } from "../domain/adapters.ts";
import type { ExternalDbs } from "../domain/externalDbs.ts";
import type { ServiceCaches } from "../domain/serviceCaches.ts";
import type { Portals } from "../domain/portals.ts";
import type { InstanceSettings } from "../domain/settings.ts";
import type { Throttle } from "../throttle/throttle.ts";
import type { Metrics } from "../core/metrics.ts";
import type { Edges } from "../domain/edges.ts";
import type { EdgeGroups } from "../domain/edgeGroups.ts";
import type { EdgeOps } from "../domain/edgeOps.ts";
import type { SyncHub } from "../sync/platform/hub.ts";
import type { EdgeSync } from "../sync/edge/link.ts";
import type { Db } from "../store/db.ts";
import type { Roles } from "../domain/roles.ts";
import type { Systems } from "../domain/systems.ts";
import type { Users } from "../domain/users.ts";
import type { Logger } from "../core/log.ts";
import type { Health } from "../domain/health.ts";
import type { RequestMetrics } from "./metrics.ts";

export interface Services {
  config: Config;
  log: Logger;
  tokens: Tokens;
  developers: Developers;
  developerKeys: DeveloperKeys;
  systems: Systems;
  users: Users;
  roles: Roles;
  collections: Collections;
  devices: Devices;
  messages: Messages;
  services: CodeServices;
  code: CodeEngine;
  triggers: Triggers;
  webhooks: Webhooks;
  throttle: Throttle;
  throttlers: Throttlers;
  adapters: Adapters;
  externalDbs: ExternalDbs;
  serviceCaches: ServiceCaches;
  portals: Portals;
  settings: InstanceSettings;
  metrics: Metrics;
  edges: Edges;
  edgeGroups: EdgeGroups;
  edgeOps: EdgeOps;
  /** the platform's sync hub (absent on an edge) */
  sync?: SyncHub;
  /** the edge's sync client (absent on a platform) */
  edgeSync?: EdgeSync;
  db: Db;
  /** HTTP requests on /metrics (made with the first listener's app) */
  requestMetrics?: RequestMetrics;
  /** what /health reports (made once the parts it watches are up) */
  health?: Health;
}
