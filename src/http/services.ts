// What the HTTP routes call: the domain's modules (by their names in src/domain/modules.ts), plus
// the token resolver and the parts above the domain.
import type { Tokens } from "../auth/tokens.ts";
import type { Config } from "../config.ts";
import type { DomainModules } from "../domain/modules.ts";
import type { CodeServices } from "../domain/services.ts";
import type { CodeEngine } from "../code/engine.ts";
import type { Webhooks } from "../domain/webhooks.ts";
import type { Throttle } from "../throttle/throttle.ts";
import type { Metrics } from "../core/metrics.ts";
import type { SyncHub } from "../sync/platform/hub.ts";
import type { EdgeSync } from "../sync/edge/link.ts";
import type { Db } from "../store/db.ts";
import type { Logger } from "../core/log.ts";
import type { Health } from "../domain/health.ts";
import type { RequestMetrics } from "./metrics.ts";

export interface Services extends DomainModules {
  config: Config;
  log: Logger;
  tokens: Tokens;
  /** the code services module (codeServices), by the name the routes have always used */
  services: CodeServices;
  code: CodeEngine;
  webhooks: Webhooks;
  throttle: Throttle;
  metrics: Metrics;
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
