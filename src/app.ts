// Composition root: builds the parts for a mode, starts them in order, stops them in reverse.
import { existsSync, mkdirSync, statSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { Permissions } from "./auth/permissions.ts";
import { Tokens } from "./auth/tokens.ts";
import type { Config } from "./config.ts";
import { EventBus } from "./core/events.ts";
import { Signals } from "./core/signals.ts";
import { Port } from "./core/port.ts";
import { createLogger, type Logger } from "./core/log.ts";
import type { DomainDeps } from "./domain/deps.ts";
import { Collections } from "./domain/collections.ts";
import { Developers, type UpstreamSignIn } from "./domain/developers.ts";
import { DeveloperKeys } from "./domain/developerKeys.ts";
import { type ConnectionView, Devices } from "./domain/devices.ts";
import { type Broker as MessagesBroker, Messages } from "./domain/messages.ts";
import { CodeServices } from "./domain/services.ts";
import { CodeEngine } from "./code/engine.ts";
import { compileChecker } from "./code/syntax.ts";
import { EgressPolicy } from "./code/egress.ts";
import { MessageTimers, publishAsOwner } from "./code/messageTimers.ts";
import { Triggers } from "./domain/triggers.ts";
import { Webhooks } from "./domain/webhooks.ts";
import { Throttlers } from "./domain/throttlers.ts";
import { Adapters, type EdgeControl } from "./domain/adapters.ts";
import { ExternalDbs } from "./domain/externalDbs.ts";
import { ServiceCaches } from "./domain/serviceCaches.ts";
import { Portals } from "./domain/portals.ts";
import { InstanceSettings } from "./domain/settings.ts";
import { type SecondFactor, TwoFactor } from "./domain/twoFactor.ts";
import { type LockBackend, LocalLocks, Locks } from "./domain/locks.ts";
import { MemoryCacheValues } from "./store/cacheValues.ts";
import { SharedRedis } from "./cluster/redis.ts";
import { RedisCacheValues } from "./cluster/cacheValues.ts";
import { RedisLocks } from "./cluster/locks.ts";
import { ConnectorPool } from "./external/pool.ts";
import { DeviceKeys } from "./auth/deviceKeys.ts";
import { SecretBox } from "./auth/secrets.ts";
import { Throttle } from "./throttle/throttle.ts";
import { largest, Metrics, OTHER } from "./core/metrics.ts";
import { newUuid } from "./core/ids.ts";
import { TriggerDispatcher } from "./triggers/dispatcher.ts";
import { TimerScheduler } from "./triggers/scheduler.ts";
import { MqttBroker } from "./broker/broker.ts";
import { LibsqlPersistence } from "./broker/persistence.ts";
import { Roles } from "./domain/roles.ts";
import { Systems } from "./domain/systems.ts";
import { Users } from "./domain/users.ts";
import { type HttpServer, listenApi, listenMetrics } from "./http/server.ts";
import { Health } from "./domain/health.ts";
import type { Services } from "./http/services.ts";
import { type Db, databaseBytes, openDb, redactedUrl } from "./store/db.ts";
import { migrate } from "./store/migrations.ts";
import { COMMIT, VERSION } from "./version.ts";
import { staleCaches } from "./sync/kinds/index.ts";
import { EdgeRelay } from "./sync/relay.ts";
import { type EdgeLinks, Edges } from "./domain/edges.ts";
import { EdgeGroups } from "./domain/edgeGroups.ts";
import { EdgeOps, type FleetLink } from "./domain/edgeOps.ts";
import { ChangeRecorder } from "./domain/changes.ts";
import { EdgeSync } from "./sync/edge/link.ts";
import { FleetAgent } from "./sync/fleetAgent.ts";
import { AdapterRunner } from "./adapters/runner.ts";
import { type ElsewhereHub, SyncHub } from "./sync/platform/hub.ts";
import type { ClusterBus } from "./cluster/bus.ts";
import { NodeRegistry } from "./cluster/nodes.ts";

export interface App {
  config: Config;
  log: Logger;
  db: Db;
  services: Services;
  events: EventBus;
  /** the API's plain HTTP listener (its HTTPS one when plain HTTP is off) */
  http: HttpServer;
  https?: HttpServer;
  broker: MqttBroker;
  stop(): Promise<void>;
}

/** A part with a lifecycle; stopped in reverse order of start. */
interface Stoppable { name: string; stop(): Promise<void> | void }

export async function start(config: Config, opts: { log?: Logger; restart?: () => void } = {}): Promise<App> {
  const log = opts.log ?? createLogger(config.logLevel, { mode: config.mode });
  const started: Stoppable[] = [];
  const stop = async () => {
    while (started.length) {
      const part = started.pop()!;
      try { await part.stop(); } catch (err) { log.error("stop failed", { part: part.name, err }); }
    }
  };
  try {
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

    // a platform node: alone, or one of a cluster on this database when it has Redis
    const nodeId = config.nodeId ?? `${hostname()}:${config.httpPort}`;
    const clustered = config.mode === "platform" && !!config.redisUrl;
    const nodes = new NodeRegistry({ db, log, nodeId, clustered });
    let bus: ClusterBus | null = null;
    if (config.mode === "platform") {
      await nodes.start();
      started.push({ name: "node", stop: () => nodes.stop() });
    }
    // (loaded only by a node of a cluster: Redis' client is a large part of what a start loads)
    const cluster = clustered ? await import("./cluster/cluster.ts") : null;
    if (clustered) {
      bus = new (await import("./cluster/bus.ts")).ClusterBus(config.redisUrl!, nodeId, log);
      try { await bus.start(); } catch (err) { throw new Error(`cluster: cannot reach Redis at --redis-url: ${(err as Error).message}`); }
      started.push({ name: "cluster-bus", stop: () => bus!.stop() });
      log.info("cluster node", { node: nodeId });
    }

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
    const writerAloneSince = () => (clustered ? null : nodes.aloneSince);
    const deps: DomainDeps = { db, tokens, perms: new Permissions(db, signals), events, signals, log, config, changes, writerAloneSince };
    const systems = new Systems(deps);
    const roles = new Roles(deps, systems);
    // on an edge, the platform checks developers' passwords (its sync link attaches the check)
    const upstream = new Port<UpstreamSignIn>("upstream sign-in");
    // two-factor sign-in and the admin's token lifetime (built once the secret key is loaded)
    const secondFactor = new Port<SecondFactor>("second factor");
    const developers = new Developers(deps, upstream, secondFactor);
    const developerKeys = new DeveloperKeys(deps);
    const secrets = SecretBox.load(config.dataDir, config.secretKey);
    const settings = new InstanceSettings(deps, secrets);
    secondFactor.attach(new TwoFactor(deps, settings, secrets));
    const portals = new Portals(deps, systems);
    const users = new Users(deps, systems, roles, secrets);
    const connectors = new ConnectorPool(log);
    const externalDbs = new ExternalDbs(deps, systems, secrets, connectors);
    const collections = new Collections(deps, systems, externalDbs);
    // what the broker (built after the domain) offers it: attached once it runs
    const deviceConnections = new Port<ConnectionView>("device connections");
    const brokerPort = new Port<MessagesBroker>("broker");
    const devices = new Devices(deps, systems, roles, new DeviceKeys(secrets), deviceConnections);
    const messages = new Messages(deps, systems, brokerPort);
    // code is compiled at upload, and on an edge when it arrives, as a sandbox would load it
    const compileCheck = compileChecker(config.codeMemoryLimitMb * 1024 * 1024);
    const codeServices = new CodeServices(deps, systems, compileCheck);
    // what code services share (cache values, locks): this process's memory, or on a cluster the
    // nodes' Redis (an edge always keeps its own)
    const shared = clustered ? new SharedRedis(config.redisUrl!, log) : null;
    let lockBackend: LockBackend = new LocalLocks();
    if (shared) {
      const redisLocks = new RedisLocks(shared, log);
      lockBackend = redisLocks;
      await shared.start();
      started.push({ name: "shared-redis", stop: () => shared.stop() });
      redisLocks.start();
      started.push({ name: "locks", stop: () => redisLocks.stop() });
    }
    const serviceCaches = new ServiceCaches(deps, systems, shared ? new RedisCacheValues(shared) : new MemoryCacheValues());
    signals.on("system.removed", ({ systemKey }) => serviceCaches.forgetSystem(systemKey));
    const locks = new Locks(lockBackend);
    const triggers = new Triggers(deps, systems, codeServices);
    started.push({ name: "external-dbs", stop: () => connectors.stop() });
    const messageTimers = new MessageTimers(publishAsOwner({ users, devices, messages }), log);
    const code = new CodeEngine({ d: deps, systems, services: codeServices, collections, users, devices, messages, triggers, roles, externalDbs, messageTimers, caches: serviceCaches, locks, egress: EgressPolicy.parse(config.codeEgressAllow), metrics });
    // what the sync hub (built later, on a platform) tells Edges of the links it holds, and what
    // the cluster tells the hub of the edges other nodes hold
    const edgeLinks = new Port<EdgeLinks>("edge links");
    const elsewhere = new Port<ElsewhereHub>("edges elsewhere");
    const edges = new Edges(deps, systems, edgeLinks);
    const edgeGroups = new EdgeGroups(deps, systems);
    // what the sync hub (a platform's) does for them: attached once it runs
    const fleetLink = new Port<FleetLink>("fleet link");
    const edgeControl = new Port<EdgeControl>("edge control");
    const edgeOps = new EdgeOps(deps, systems, edges, fleetLink);
    const webhooks = new Webhooks(deps, systems, codeServices, users, tokens, code);
    const throttle = new Throttle({ db, config, log, metrics, nodeId: newUuid() });
    await throttle.start();
    started.push({ name: "throttle", stop: () => throttle.stop() });
    const throttlers = new Throttlers(deps, throttle);
    const adapters = new Adapters(deps, systems, edges, edgeControl);
    // what a deleted system leaves on this node: its messaging timers and database connections
    signals.on("system.removed", ({ systemKey }) => { messageTimers.forgetSystem(systemKey); void externalDbs.forgetSystem(systemKey); });

    if (config.adminEmail && config.adminPassword) await developers.bootstrapAdmin(config.adminEmail, config.adminPassword);
    else if (config.adminEmail || config.adminPassword) log.warn("--admin-email and --admin-password go together; no admin created");

    await tokens.purgeExpired();
    const purge = setInterval(() => tokens.purgeExpired().catch((err) => log.warn("token purge failed", { err })), 3_600_000);
    purge.unref();
    started.push({ name: "token-purge", stop: () => clearInterval(purge) });

    await messages.start();
    started.push({ name: "history", stop: () => messages.stop() });
    const persistence = new LibsqlPersistence({ db, offlineQueueLimit: config.mqttOfflineQueueLimit, shared: clustered, log, scoped: true });
    // on an edge, messages on relayed topics wait in the outbox for the platform (stopped after the
    // broker); on a platform, messages whose suffix names edges go down through the sync hub
    const relay = config.mode === "edge" ? new EdgeRelay({ db, changes, log, systemKey: config.systemKey!, edgeName: config.edgeName! }) : null;
    if (relay) started.push({ name: "relay", stop: () => relay.stop() });
    let toEdges: ((sk: string, topic: string, payload: Buffer, qos: number) => void) | null = null;
    const broker = new MqttBroker({ config, log, tokens, perms: deps.perms, events, systems, messages, persistence, throttle,
      brokerId: nodeId, mq: cluster ? cluster.redisEmitter(config.redisUrl!, log) : undefined,
      relay: relay?.relay ?? ((sk, topic, payload, qos) => toEdges?.(sk, topic, payload, qos)) });
    await broker.start();
    started.push({ name: "broker", stop: () => broker.stop() });
    deviceConnections.attach(broker);
    brokerPort.attach(broker);
    // (stopped before the broker: a timer firing then would only fail)
    started.push({ name: "message-timers", stop: () => messageTimers.stop() });
    await code.start();
    started.push({ name: "code", stop: () => code.stop() });
    const dispatcher = new TriggerDispatcher(events, triggers, systems, code, log, signals);
    await dispatcher.start();
    started.push({ name: "triggers", stop: () => dispatcher.stop() });
    const scheduler = new TimerScheduler(triggers, systems, code, log, (sk, topic, payload) => broker.publish(sk, topic, payload, 0, false, null));
    scheduler.start();
    started.push({ name: "timers", stop: () => scheduler.stop() });

    let fleet: FleetAgent | null = null;
    let hub: SyncHub | undefined;
    let edgeLink: EdgeSync | undefined;
    // the edge's own API, for relayed requests: attached once it listens
    const edgeApi = new Port<(req: Request) => Promise<Response>>("edge API");
    if (config.mode === "platform") {
      const platformHub = hub = new SyncHub({ db, log, events, signals, changes, edges, edgeLinks, elsewhere, collections, broker: () => broker, maxClockSkewMs: config.maxClockSkew * 1000, compactMs: config.syncCompactMs, logMs: config.syncLogMs, nodeId });
      await platformHub.start();
      started.push({ name: "sync", stop: () => platformHub.stop() });
      toEdges = (sk, topic, payload, qos) => { void platformHub.relayDown(sk, topic, payload, qos)?.catch((err) => log.warn("relay to edges failed", { err })); };
      edgeControl.attach((sk, edge, req) => platformHub.control(sk, edge, req));
      fleetLink.attach(platformHub);
      if (bus && cluster) cluster.joinCluster({ db, log, nodeId, bus, nodes, signals, systems, changes, hub: platformHub, elsewhere });
    } else {
      log.info("edge mode", { platform: config.platformUrl, systemKey: config.systemKey, edge: config.edgeName });
      // relayed requests and remote operations: answered by this edge's API (attached below, once it listens)
      fleet = new FleetAgent({ config, log, tokens, commands: new AdapterRunner(join(config.dataDir, "commands"), { user: config.edgeCommandsUser, dataDir: config.dataDir }),
        api: edgeApi, restart: opts.restart ?? null });
      const edgeSync = edgeLink = new EdgeSync({
        db, config, log, events, changes, compileCheck, fleet,
        // as from the edge itself: its broker does not relay it up again
        deliver: (topic, payload, qos) => broker.publish(config.systemKey!, topic, payload, qos, false, { kind: "edge", systemKey: config.systemKey!, id: config.edgeName!, name: config.edgeName!, tokenHash: "" }),
        invalidate: (sk, types, ids) => {
          systems.forget(sk);
          deps.perms.invalidate(sk);
          const stale = staleCaches(types);
          if (stale.has("code")) code.forgetSystem(sk);
          if (stale.has("triggers")) void triggers.changed(sk);
          if (stale.has("tokens")) tokens.forgetSystem(sk);
          for (const id of ids) collections.forgetId(id);
        },
      });
      upstream.attach((email, password) => edgeSync.verifyDeveloper(email, password));
      await edgeSync.start();
      started.push({ name: "sync", stop: () => edgeSync.stop() });
    }

    // every part is built: what listens to what is settled
    signals.start();

    // read when /metrics is asked
    const dbFile = config.db.startsWith("file:") ? config.db.slice("file:".length) : null;
    metrics.gauge("outpost_build_info", "1, labelled with this binary's version, commit and mode", () => [[{ version: VERSION, commit: COMMIT, mode: config.mode }, 1]]);
    metrics.gauge("outpost_mqtt_connections", "MQTT clients connected", () => [[{}, broker.clientCount()]]);
    const byQos = (counts: number[]): [Record<string, string>, number][] => counts.map((n, qos) => [{ qos: String(qos) }, n]);
    metrics.readCounter("outpost_mqtt_messages_in_total", "PUBLISH packets received from MQTT clients, by QoS", () => byQos(broker.messagesIn));
    metrics.readCounter("outpost_mqtt_messages_out_total", "PUBLISH packets sent to MQTT clients, by QoS (after the subscription's QoS)", () => byQos(broker.messagesOut));
    metrics.gauge("outpost_process_resident_bytes", "resident memory of the process", () => [[{}, process.memoryUsage.rss()]]);
    if (dbFile) metrics.gauge("outpost_db_bytes", "size of the database file with its write-ahead log", () =>
      [[{}, [dbFile, `${dbFile}-wal`].reduce((n, f) => n + (existsSync(f) ? statSync(f).size : 0), 0)]]);
    else metrics.gauge("outpost_db_bytes", "size of the database (as its server reports it)", async () => [[{}, await databaseBytes(db)]]);
    // system keys and edge names in labels only when the operator asks, for that many at most
    const systemLabels = config.metricsSystemLabels;
    type Reading = [Record<string, string>, number][];
    if (systemLabels > 0)
      metrics.gauge("outpost_system_mqtt_connections", "MQTT clients connected per system (--metrics-system-labels systems with most, the rest as other)", () =>
        largest(broker.connectionsBySystem().map(([k, n]): [Record<string, string>, number] => [{ system_key: k }, n]), systemLabels, { system_key: OTHER }));
    const failedByType = (by: Record<string, number>): Reading => Object.entries(by).map(([type, n]) => [{ asset_type: type }, n]);
    if (hub) {
      metrics.readCounter("outpost_sync_relay_dropped_total", "relayed messages for one edge that was connected to no platform node, or whose link was too far behind", () => [[{}, hub.relayDropped]]);
      metrics.gauge("outpost_sync_edges_connected", "edges with a live sync session on this node", () => [[{}, hub.connectedEdges().length]]);
      metrics.gauge("outpost_sync_edges_outbox_items", "rows and messages waiting in the outboxes of the connected edges, together (as their last pings said)", () =>
        [[{}, hub.connectedEdges().reduce((n, e) => n + e.outbox, 0)]]);
      metrics.gauge("outpost_sync_failed_assets", "assets that failed to apply on an edge (every edge), by asset type", async () => failedByType(await hub.failedAssets()));
      // each edge's lag costs a count in the change log: read only for the labelled series
      if (systemLabels > 0) {
        metrics.gauge("outpost_sync_edge_lag", "changes a connected edge has not acknowledged (--metrics-system-labels edges with most)", async () =>
          largest((await hub.linkMetrics()).map((e): [Record<string, string>, number] => [{ system_key: e.systemKey, edge: e.edge }, e.lag]), systemLabels));
        metrics.gauge("outpost_sync_edge_outbox_items", "rows and messages waiting in a connected edge's outbox, as its last ping said (--metrics-system-labels edges with most)", () =>
          largest(hub.connectedEdges().map((e): [Record<string, string>, number] => [{ system_key: e.systemKey, edge: e.edge }, e.outbox]), systemLabels));
      }
    }
    if (edgeLink) {
      metrics.gauge("outpost_sync_link_up", "1 while the edge has a live session with its platform", () => [[{}, edgeLink.connected ? 1 : 0]]);
      metrics.gauge("outpost_sync_outbox_items", "rows and messages waiting to go up to the platform", async () => [[{}, await edgeLink.outboxSize()]]);
      metrics.readCounter("outpost_sync_outbox_dropped_total", "outbox items dropped past --outbox-max-mb or --outbox-max-age", () => [[{}, edgeLink.outboxDropped]]);
      metrics.gauge("outpost_sync_failed_assets", "assets that failed to apply on this edge, by asset type", async () => failedByType(await edgeLink.failedAssets()));
    }
    const health = new Health({
      db, dbFile, minFreeMb: config.minFreeMb,
      link: edgeLink && { connected: () => edgeLink.connected, lastContactAt: () => edgeLink.lastContactAt, graceS: config.linkGrace, informational: config.linkLossOk },
    });
    const services: Services = { config, log, tokens, developers, developerKeys, systems, users, roles, collections, devices, messages, services: codeServices, code, triggers, webhooks, throttle, throttlers, adapters, externalDbs, serviceCaches, portals, settings, metrics, edges, edgeGroups, edgeOps, db,
      sync: hub, edgeSync: edgeLink, health };
    const { http, https } = listenApi(services);
    if (fleet) edgeApi.attach(http.handle);
    started.push({ name: "http", stop: () => http.stop() });
    if (https && https !== http) started.push({ name: "https", stop: () => https.stop() });
    const metricsServer = config.metricsPort ? listenMetrics(metrics, config.metricsPort) : null;
    if (metricsServer) started.push({ name: "metrics", stop: () => metricsServer.stop() });
    log.info("outpost started", { version: VERSION, commit: COMMIT, http: http.port, https: https?.port, mqtt: broker.ports, ...(metricsServer ? { metrics: metricsServer.port } : {}), db: config.db.startsWith("file:") ? config.db : "remote" });

    for (const key of await systems.keys())
      events.emit(config.mode === "edge" ? "StartConnectDisconnect::EdgeStarted" : "StartConnectDisconnect::PlatformStarted", key, {});

    let stopping: Promise<void> | undefined;
    return { config, log, db, services, events, http, https, broker, stop: () => (stopping ??= stop()) };
  } catch (err) {
    await stop();
    throw err;
  }
}
