// Services that stand in for every part when only the registered routes matter (api-docs,
// routeGroups): registering routes touches only the config and a few methods, and nothing is
// called. Both s.syncHub and s.edgeSync are present, so the routes only a platform or only an edge
// registers are both there.
import { loadConfig } from "../../../src/config.ts";
import type { Services } from "../../../src/http/services.ts";

export function standIn(): Services {
  const any: unknown = new Proxy(function () {}, {
    get: (_t, k) => (k === "then" ? undefined : k === Symbol.toPrimitive ? () => "" : any),
    apply: () => any,
    construct: () => any as object,
  });
  const config = { ...loadConfig([], {}), edgeToken: "edge-token" };
  return new Proxy({} as Services, { get: (_t, k) => (k === "config" ? config : k === "requestMetrics" ? undefined : any), set: () => true });
}
