// What both modes build, in the order app.ts starts it: storage, the kernel (signals, tokens,
// the change clock), the domain, the runtime (broker, code, triggers, timers), the listeners. Where
// the modes differ, the mode's parts (platform.ts, edge.ts) are asked through `ModeParts`.
import { existsSync, mkdirSync, statSync } from "node:fs";
import { hostname } from "node:os";
import { Permissions } from "../auth/permissions.ts";
import { Tokens } from "../auth/tokens.ts";
import { SecretBox } from "../auth/secrets.ts";
import type { Config } from "../config.ts";
import { EventBus } from "../core/events.ts";
import { Signals } from "../core/signals.ts";
import { Port } from "../core/port.ts";
import type { Logger } from "../core/log.ts";
import { largest, Metrics, OTHER } from "../core/metrics.ts";
import { newUuid } from "../core/ids.ts";
import type { EdgeFileSender } from "../domain/bucketSets.ts";
import type { DomainDeps } from "../domain/deps.ts";
import type { UpstreamSignIn } from "../domain/developers.ts";
import type { ConnectionView } from "../domain/devices.ts";
import type { Broker as MessagesBroker } from "../domain/messages.ts";
import { Webhooks } from "../domain/webhooks.ts";
import type { EdgeControl } from "../domain/adapters.ts";
import { LocalLocks } from "../domain/locks.ts";
import { buildModules, type ModuleParts } from "../domain/modules.ts";
import { Health, type HealthOptions } from "../domain/health.ts";
import type { EdgeLinks } from "../domain/edges.ts";
import type { FleetLink } from "../domain/edgeOps.ts";
import { ChangeRecorder } from "../domain/changes.ts";
import { CodeEngine } from "../code/engine.ts";
import { compileChecker } from "../code/syntax.ts";
import { EgressPolicy } from "../code/egress.ts";
import { OwnApi } from "../code/ownApi.ts";
import { MessageTimers, publishAsOwner } from "../code/messageTimers.ts";
import { ConnectorPool } from "../external/pool.ts";
import { Throttle } from "../throttle/throttle.ts";
import { TriggerDispatcher } from "../triggers/dispatcher.ts";
import { TimerScheduler } from "../triggers/scheduler.ts";
import { type BrokerDeps, MqttBroker } from "../broker/broker.ts";
import { LibsqlPersistence } from "../broker/persistence.ts";
import { type HttpServer, listenApi, listenMetrics } from "../http/server.ts";
import type { Services } from "../http/services.ts";
import { MemoryCacheValues } from "../store/cacheValues.ts";
import { type Db, databaseBytes, openDb, redactedUrl } from "../store/db.ts";
import { migrate } from "../store/migrations.ts";
import type { ElsewhereHub, SyncHub } from "../sync/platform/hub.ts";
import type { EdgeSync } from "../sync/edge/link.ts";
import { NodeRegistry } from "../cluster/nodes.ts";
import { COMMIT, VERSION } from "../version.ts";

/** A part with a lifecycle; stopped in reverse order of start. */
export interface Stoppable { name: string; stop(): Promise<void> | void }
/** The parts started so far, in their order (app.ts stops them in reverse). */
export type Started = Stoppable[];

/** What code services share: this process's memory, or on a cluster the nodes' Redis. */
export type SharedState = Pick<ModuleParts, "cacheValues" | "lockBackend">;
export const localState = (): SharedState => ({ cacheValues: new MemoryCacheValues(), lockBackend: new LocalLocks() });

/** The broker's links beyond this node: where messages on relayed topics go, a cluster's emitter. */
export type BrokerLinks = Pick<BrokerDeps, "relay" | "mq">;

/** The sync side a mode runs (the platform's hub or the edge's link) and what it adds to the API. */
export interface SyncSide {
  hub?: SyncHub;
  edgeSync?: EdgeSync;
  /** edge: the platform link /health watches */
  link?: HealthOptions["link"];
  /** called once the API listens */
  listening?(http: HttpServer): void;
}

/** What a mode adds to the common parts, asked at its point of the start. */
export interface ModeParts {
  /** after the kernel: what code services share */
  sharedState(started: Started): Promise<SharedState>;
  /** after the message history, before the broker */
  brokerLinks(k: Kernel, started: Started): BrokerLinks;
  /** once the runtime runs; registers the sync side's metrics */
  startSync(d: Domain, broker: MqttBroker, started: Started): Promise<SyncSide>;
}

/** Opens the database, migrated, with the metrics that read it and the process. */
export async function openStorage(config: Config, log: Logger, started: Started) {
  if (config.db.startsWith("file:")) mkdirSync(config.dataDir, { recursive: true });
  const metrics = new Metrics();
  const db = await openDb({
    latency: metrics.histogram("outpost_db_query_seconds", "Database statement duration (each statement, in a transaction or not)",
      [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5]),
    url: config.db, authToken: config.dbAuthToken, driver: config.dbDriver, poolMax: config.dbPoolMax,
    onRetry: (err, delayMs) => log.warn("the database cannot be reached yet; trying again", { db: redactedUrl(config.db), err: err.message, delayMs }),
  });
  started.push({ name: "db", stop: () => db.close() });
  const applied = await migrate(db);
  if (applied.length) log.info("migrations applied", { versions: applied });
  // the migrations' statements and pages, prepared and read once (a few hundred KB on a new edge)
  if (applied.length) db.release?.();
  // read when /metrics is asked
  metrics.gauge("outpost_build_info", "1, labelled with this binary's version, commit and mode", () => [[{ version: VERSION, commit: COMMIT, mode: config.mode }, 1]]);
  metrics.gauge("outpost_process_resident_bytes", "resident memory of the process", () => [[{}, process.memoryUsage.rss()]]);
  const dbFile = dbFileOf(config);
  if (dbFile) metrics.gauge("outpost_db_bytes", "size of the database file with its write-ahead log", () =>
    [[{}, [dbFile, `${dbFile}-wal`].reduce((n, f) => n + (existsSync(f) ? statSync(f).size : 0), 0)]]);
  else metrics.gauge("outpost_db_bytes", "size of the database (as its server reports it)", async () => [[{}, await databaseBytes(db)]]);
  return { db, metrics };
}

const dbFileOf = (config: Config) => (config.db.startsWith("file:") ? config.db.slice("file:".length) : null);

/** This node among the nodes on its database: a platform node alone, or one of a cluster when it
 *  has Redis (an edge is always alone; its registry is never started). */
export function nodeOf(config: Config, log: Logger, db: Db) {
  const nodeId = config.nodeId ?? `${hostname()}:${config.httpPort}`;
  const clustered = config.mode === "platform" && !!config.redisUrl;
  return { nodeId, clustered, nodes: new NodeRegistry({ db, log, nodeId, clustered }) };
}
export type NodeIdentity = ReturnType<typeof nodeOf>;

/** What every domain module is built with; the change clock started. */
export async function buildKernel(config: Config, log: Logger, db: Db, metrics: Metrics, node: NodeIdentity, started: Started) {
  const events = new EventBus(log);
  // what changed, from the part that changed it to those that keep state about it (listeners
  // declared while the parts are built; closed once the node has started)
  const signals = new Signals();
  const tokens = new Tokens(db, signals);
  // the platform is the fleet's time reference: it bounds the skew of the stamps it takes
  const changes = new ChangeRecorder(config.mode, config.mode === "edge" ? `edge:${config.edgeName}` : "platform", config.mode === "platform" ? config.maxClockSkew * 1000 : Infinity);
  await changes.startClock(db);
  started.push({ name: "clock", stop: () => changes.stopClock(db) });
  // a node of a cluster never caches rows as exact (another node may write them at any time)
  const writerAloneSince = () => (node.clustered ? null : node.nodes.aloneSince);
  const deps: DomainDeps = { db, tokens, perms: new Permissions(db, signals), events, signals, log, config, changes, writerAloneSince };
  return { config, log, db, metrics, node, events, signals, tokens, changes, deps };
}
export type Kernel = Awaited<ReturnType<typeof buildKernel>>;

/** What parts built later (the broker, the sync side, the listener) offer those built earlier:
 *  made first, attached once the later part runs. */
function makePorts() {
  return {
    // on an edge, the platform checks developers' passwords (its sync link attaches the check)
    upstream: new Port<UpstreamSignIn>("upstream sign-in"),
    // what the broker (built after the domain) offers it
    deviceConnections: new Port<ConnectionView>("device connections"),
    broker: new Port<MessagesBroker>("broker"),
    // what the sync hub (built later, on a platform) tells Edges of the links it holds, and what
    // the cluster tells the hub of the edges other nodes hold
    edgeLinks: new Port<EdgeLinks>("edge links"),
    elsewhere: new Port<ElsewhereHub>("edges elsewhere"),
    // what the sync hub (a platform's) does for them
    fleetLink: new Port<FleetLink>("fleet link"),
    edgeControl: new Port<EdgeControl>("edge control"),
    // what file sync (a platform's) does for syncFileToEdge
    edgeFiles: new Port<EdgeFileSender>("edge files"),
  };
}

/** The domain: every module (src/domain/modules.ts), the code engine it runs services with, and
 *  the ports later parts attach. */
export async function buildDomain(k: Kernel, mode: ModeParts, started: Started) {
  const { deps, signals, config, log, metrics } = k;
  const ports = makePorts();
  const secrets = SecretBox.load(config.dataDir, config.secretKey);
  // code is compiled at upload, and on an edge when it arrives, as a sandbox would load it
  const compileCheck = compileChecker(config.codeMemoryLimitMb * 1024 * 1024);
  const shared = await mode.sharedState(started);
  const connectors = new ConnectorPool(log);
  started.push({ name: "external-dbs", stop: () => connectors.stop() });
  const throttle = new Throttle({ db: k.db, config, log, metrics, nodeId: newUuid() });
  await throttle.start();
  started.push({ name: "throttle", stop: () => throttle.stop() });
  const m = buildModules(deps, { ...ports, ...shared, secrets, connectors, compileCheck, throttle });
  signals.on("system.removed", ({ systemKey }) => m.serviceCaches.forgetSystem(systemKey));
  signals.on("system.removed", ({ systemKey }) => m.fileStorage.removeSystem(systemKey));
  // started before the parts that record into it, stopped (its waiting rows written) after them
  await m.audit.start();
  started.push({ name: "audit", stop: () => m.audit.stop() });
  metrics.gauge("outpost_audit_rows_waiting", "audit rows recorded and not written yet", () => [[{}, m.audit.waitingRows]]);
  metrics.readCounter("outpost_audit_rows_dropped_total", "audit rows dropped: past the bound of rows waiting while the trail could not be written", () => [[{}, m.audit.dropped]]);
  // chosen device keys' argon2id hashes, including the ones a stop or crash left waiting
  m.devices.keyHashes.start();
  started.push({ name: "device-key-hashes", stop: () => m.devices.keyHashes.stop() });
  metrics.gauge("outpost_device_key_hashes_waiting", "chosen device keys whose argon2id hash is still to be computed (they sign in with their verifier meanwhile)", async () => [[{}, await m.devices.keyHashes.waiting()]]);
  const messageTimers = new MessageTimers(publishAsOwner(m), log);
  const ownApi = new OwnApi(config);
  const code = new CodeEngine({ d: deps, systems: m.systems, services: m.codeServices, collections: m.collections, users: m.users, devices: m.devices, messages: m.messages, triggers: m.triggers,
    roles: m.roles, externalDbs: m.externalDbs, deployments: m.deployments, messageTimers, caches: m.serviceCaches, locks: m.locks, bucketSets: m.bucketSets, fileStores: m.fileStores, secrets: m.userSecrets, adapters: m.adapters, egress: EgressPolicy.parse(config.codeEgressAllow), ownApi, metrics });
  const webhooks = new Webhooks(deps, m.systems, m.codeServices, m.users, k.tokens, code);
  // what a deleted system leaves on this node: its messaging timers and database connections
  signals.on("system.removed", ({ systemKey }) => { messageTimers.forgetSystem(systemKey); void m.externalDbs.forgetSystem(systemKey); });
  return { ...k, ...m, ports, secrets, compileCheck, throttle, messageTimers, code, webhooks, ownApi };
}
export type Domain = Awaited<ReturnType<typeof buildDomain>>;

/** The first admin when asked for, and expired tokens purged now and every hour. */
export async function prepareAccounts(d: Domain, started: Started) {
  const { config, log, tokens } = d;
  if (config.adminEmail && config.adminPassword) await d.developers.bootstrapAdmin(config.adminEmail, config.adminPassword);
  else if (config.adminEmail || config.adminPassword) log.warn("--admin-email and --admin-password go together; no admin created");

  await tokens.purgeExpired();
  const purge = setInterval(() => tokens.purgeExpired().catch((err) => log.warn("token purge failed", { err })), 3_600_000);
  purge.unref();
  started.push({ name: "token-purge", stop: () => clearInterval(purge) });
}

/** Starts the message history, the broker, the code engine, the trigger dispatcher and timers. */
export async function startRuntime(d: Domain, mode: ModeParts, started: Started) {
  const { config, log, db, events, messages, code, triggers, systems, signals } = d;
  await messages.start();
  started.push({ name: "history", stop: () => messages.stop() });
  const persistence = new LibsqlPersistence({ db, offlineQueueLimit: config.mqttOfflineQueueLimit, shared: d.node.clustered, log, scoped: true });
  const links = mode.brokerLinks(d, started);
  const broker = new MqttBroker({ config, log, tokens: d.tokens, perms: d.deps.perms, events, systems, messages, persistence, throttle: d.throttle,
    brokerId: d.node.nodeId, ...links });
  await broker.start();
  started.push({ name: "broker", stop: () => broker.stop() });
  d.ports.deviceConnections.attach(broker);
  // revoked sessions lose their MQTT connections (on every node: the signal is shared)
  signals.on("sessions.ended", ({ hashes }) => broker.endSessions(hashes));
  d.ports.broker.attach(broker);
  brokerMetrics(d.metrics, broker, config.metricsSystemLabels);
  // (stopped before the broker: a timer firing then would only fail)
  started.push({ name: "message-timers", stop: () => d.messageTimers.stop() });
  await code.start();
  started.push({ name: "code", stop: () => code.stop() });
  const dispatcher = new TriggerDispatcher(events, triggers, systems, code, log, signals, config.codeTriggerBacklog);
  await dispatcher.start();
  started.push({ name: "triggers", stop: () => dispatcher.stop() });
  const scheduler = new TimerScheduler(triggers, systems, code, log, (sk, topic, payload) => broker.publish(sk, topic, payload, 0, false, null), dispatcher.backlog);
  scheduler.start();
  started.push({ name: "timers", stop: () => scheduler.stop() });
  return broker;
}

function brokerMetrics(metrics: Metrics, broker: MqttBroker, systemLabels: number) {
  metrics.gauge("outpost_mqtt_connections", "MQTT clients connected", () => [[{}, broker.clientCount()]]);
  const byQos = (counts: number[]): [Record<string, string>, number][] => counts.map((n, qos) => [{ qos: String(qos) }, n]);
  metrics.readCounter("outpost_mqtt_messages_in_total", "PUBLISH packets received from MQTT clients, by QoS", () => byQos(broker.messagesIn));
  metrics.readCounter("outpost_mqtt_messages_out_total", "PUBLISH packets sent to MQTT clients, by QoS (after the subscription's QoS)", () => byQos(broker.messagesOut));
  // system keys in labels only when the operator asks, for that many at most
  if (systemLabels > 0)
    metrics.gauge("outpost_system_mqtt_connections", "MQTT clients connected per system (--metrics-system-labels systems with most, the rest as other)", () =>
      largest(broker.connectionsBySystem().map(([k, n]): [Record<string, string>, number] => [{ system_key: k }, n]), systemLabels, { system_key: OTHER }));
}

/** The API's listeners (and the metrics-only one when asked), with what /health watches. */
export function listen(d: Domain, broker: MqttBroker, sync: SyncSide, started: Started) {
  const { config, log, db, metrics } = d;
  const health = new Health({ db, dbFile: dbFileOf(config), minFreeMb: config.minFreeMb, link: sync.link });
  // the routes reach the domain's modules by their names in the domain (Services types them)
  const services: Services = { ...d, services: d.codeServices, sync: sync.hub, edgeSync: sync.edgeSync, health };
  const { http, https } = listenApi(services);
  sync.listening?.(http);
  d.ownApi.attach(http.handle);
  started.push({ name: "http", stop: () => http.stop() });
  if (https && https !== http) started.push({ name: "https", stop: () => https.stop() });
  const metricsServer = config.metricsPort ? listenMetrics(metrics, config.metricsPort) : null;
  if (metricsServer) started.push({ name: "metrics", stop: () => metricsServer.stop() });
  log.info("outpost started", { version: VERSION, commit: COMMIT, http: http.port, https: https?.port, mqtt: broker.ports, ...(metricsServer ? { metrics: metricsServer.port } : {}), db: config.db.startsWith("file:") ? config.db : "remote" });
  return { services, http, https };
}
