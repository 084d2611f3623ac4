// The domain's modules, one line each: what the API, the code engine and the sync side call. A new
// resource's module is built here, with what it needs; `Services` (src/http/services.ts) takes its
// name and type from this list. What the modules need from outside the domain is passed in.
import type { Port } from "../core/port.ts";
import type { SecretBox } from "../auth/secrets.ts";
import { DeviceKeys } from "../auth/deviceKeys.ts";
import type { ConnectorPool } from "../external/pool.ts";
import type { CacheValueStore } from "../store/cacheValues.ts";
import type { Throttle } from "../throttle/throttle.ts";
import type { DomainDeps } from "./deps.ts";
import { Adapters, type EdgeControl } from "./adapters.ts";
import { Collections } from "./collections.ts";
import { DeveloperKeys } from "./developerKeys.ts";
import { Deployments } from "./deployments.ts";
import { Developers, type UpstreamSignIn } from "./developers.ts";
import { type ConnectionView, Devices } from "./devices.ts";
import { EdgeGroups } from "./edgeGroups.ts";
import { EdgeOps, type FleetLink } from "./edgeOps.ts";
import { type EdgeLinks, Edges } from "./edges.ts";
import { ExternalDbs } from "./externalDbs.ts";
import { type LockBackend, Locks } from "./locks.ts";
import { type Broker, Messages } from "./messages.ts";
import { Roles } from "./roles.ts";
import { type CompileCheck, CodeServices } from "./services.ts";
import { ServiceCaches } from "./serviceCaches.ts";
import { Portals } from "./portals.ts";
import { BucketSets, type EdgeFileSender } from "./bucketSets.ts";
import { FileStorage } from "./fileStorage.ts";
import { FileStores } from "./fileStores.ts";
import { Sessions } from "./sessions.ts";
import { AuditTrail } from "./audit.ts";
import { InstanceSettings } from "./settings.ts";
import { TwoFactor } from "./twoFactor.ts";
import { Systems } from "./systems.ts";
import { Throttlers } from "./throttlers.ts";
import { Triggers } from "./triggers.ts";
import { Users } from "./users.ts";
import { UserSecrets } from "./userSecrets.ts";

/** What the modules get from parts built after them (ports) or outside the domain. */
export interface ModuleParts {
  secrets: SecretBox;
  connectors: ConnectorPool;
  compileCheck: CompileCheck;
  cacheValues: CacheValueStore;
  lockBackend: LockBackend;
  throttle: Throttle;
  upstream: Port<UpstreamSignIn>;
  deviceConnections: Port<ConnectionView>;
  broker: Port<Broker>;
  edgeLinks: Port<EdgeLinks>;
  fleetLink: Port<FleetLink>;
  edgeControl: Port<EdgeControl>;
  edgeFiles: Port<EdgeFileSender>;
}

export function buildModules(deps: DomainDeps, p: ModuleParts) {
  const systems = new Systems(deps);
  const roles = new Roles(deps, systems);
  const users = new Users(deps, systems, roles, p.secrets);
  const externalDbs = new ExternalDbs(deps, systems, p.secrets, p.connectors);
  const codeServices = new CodeServices(deps, systems, p.compileCheck);
  const edges = new Edges(deps, systems, p.edgeLinks);
  const settings = new InstanceSettings(deps, p.secrets);
  const fileStorage = new FileStorage(deps.config, p.secrets);
  return {
    systems, roles, users, externalDbs, codeServices, edges, settings,
    developers: new Developers(deps, p.upstream, new TwoFactor(deps, settings, p.secrets)),
    developerKeys: new DeveloperKeys(deps),
    collections: new Collections(deps, systems, externalDbs),
    devices: new Devices(deps, systems, roles, new DeviceKeys(p.secrets), p.deviceConnections),
    messages: new Messages(deps, systems, p.broker),
    serviceCaches: new ServiceCaches(deps, systems, p.cacheValues),
    portals: new Portals(deps, systems),
    userSecrets: new UserSecrets(deps, systems, p.secrets),
    fileStorage,
    bucketSets: new BucketSets(deps, systems, fileStorage, p.secrets, p.edgeFiles),
    fileStores: new FileStores(deps, systems, roles, fileStorage, p.secrets),
    locks: new Locks(p.lockBackend),
    triggers: new Triggers(deps, systems, codeServices),
    edgeGroups: new EdgeGroups(deps, systems),
    deployments: new Deployments(deps, systems),
    edgeOps: new EdgeOps(deps, systems, edges, p.fleetLink),
    throttlers: new Throttlers(deps, p.throttle),
    adapters: new Adapters(deps, systems, edges, p.edgeControl),
    sessions: new Sessions(deps, systems),
    // (recording nothing with --audit off; started and stopped in compose/common.ts)
    audit: new AuditTrail(deps, systems, { enabled: deps.config.audit === "on", retentionDays: deps.config.auditRetentionDays, maxRows: deps.config.auditMaxRows }),
  };
}
export type DomainModules = ReturnType<typeof buildModules>;
