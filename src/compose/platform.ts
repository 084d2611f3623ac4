// The platform's parts: this node among the others on its database (a cluster when it has Redis:
// the bus between nodes, shared cache values and locks, the brokers' emitter), and the sync hub
// the edges connect to, with its metrics.
import { join } from "node:path";
import type { Config } from "../config.ts";
import type { Logger } from "../core/log.ts";
import { largest, type Metrics } from "../core/metrics.ts";
import { Port } from "../core/port.ts";
import type { MqttBroker } from "../broker/broker.ts";
import { type Db, isPostgresUrl, openDb } from "../store/db.ts";
import { SyncHub } from "../sync/platform/hub.ts";
import { edgeFileSender, FileSync } from "../sync/files.ts";
import { bucketSetsRepo } from "../store/fileAreas.ts";
import type { ClusterBus } from "../cluster/bus.ts";
import { SharedRedis } from "../cluster/redis.ts";
import { RedisCacheValues } from "../cluster/cacheValues.ts";
import { RedisLocks } from "../cluster/locks.ts";
import { type BrokerLinks, type Domain, localState, type ModeParts, type NodeIdentity, type SharedState, type Started } from "./common.ts";

type MessageRelay = NonNullable<BrokerLinks["relay"]>;

/** Starts this node's registry (and on a cluster its bus); the parts the platform adds later. */
export async function platformMode(config: Config, log: Logger, db: Db, node: NodeIdentity, started: Started): Promise<ModeParts> {
  if (node.clustered && isPostgresUrl(config.db)) {
    // the heartbeats on a connection of their own (see NodeRegistry.beatOn), closed after the registry stops
    const own = await openDb({ url: config.db, poolMax: 1 });
    started.push({ name: "heartbeat-db", stop: () => own.close() });
    node.nodes.beatOn(own);
  }
  await node.nodes.start();
  started.push({ name: "node", stop: () => node.nodes.stop() });
  // (loaded only by a node of a cluster: Redis' client is a large part of what a start loads)
  const cluster = node.clustered ? await import("../cluster/cluster.ts") : null;
  let bus: ClusterBus | null = null;
  if (node.clustered) {
    const b = bus = new (await import("../cluster/bus.ts")).ClusterBus(config.redisUrl!, node.nodeId, log);
    try { await b.start(); } catch (err) { throw new Error(`cluster: cannot reach Redis at --redis-url: ${(err as Error).message}`); }
    started.push({ name: "cluster-bus", stop: () => b.stop() });
    log.info("cluster node", { node: node.nodeId });
  }
  // messages whose suffix names edges go down through the sync hub (attached once it runs)
  const toEdges = new Port<MessageRelay>("relay to edges");
  return {
    sharedState: (s) => (node.clustered ? sharedRedis(config, log, s) : Promise.resolve(localState())),
    brokerLinks: () => ({
      mq: cluster ? cluster.redisEmitter(config.redisUrl!, log) : undefined,
      relay: (sk, topic, payload, qos) => toEdges.get()?.(sk, topic, payload, qos),
    }),
    startSync: async (d, broker, s) => {
      const hub = await startHub(d, broker, toEdges, s);
      if (bus && cluster) cluster.joinCluster({ db, log, nodeId: node.nodeId, bus, nodes: node.nodes, signals: d.signals, systems: d.systems, changes: d.changes, hub, elsewhere: d.ports.elsewhere });
      return { hub };
    },
  };
}

/** What code services share on a cluster: cache values and locks in the nodes' Redis. */
async function sharedRedis(config: Config, log: Logger, started: Started): Promise<SharedState> {
  const shared = new SharedRedis(config.redisUrl!, log);
  const redisLocks = new RedisLocks(shared, log);
  await shared.start();
  started.push({ name: "shared-redis", stop: () => shared.stop() });
  redisLocks.start();
  started.push({ name: "locks", stop: () => redisLocks.stop() });
  return { cacheValues: new RedisCacheValues(shared), lockBackend: redisLocks };
}

/** The sync hub, started, attached where the domain and the broker reach the edges. */
async function startHub(d: Domain, broker: MqttBroker, toEdges: Port<MessageRelay>, started: Started) {
  const { config, log, ports } = d;
  const files = fileSync(d);
  const hub = new SyncHub({ db: d.db, log, events: d.events, signals: d.signals, changes: d.changes, edges: d.edges, edgeLinks: ports.edgeLinks, elsewhere: ports.elsewhere,
    collections: d.collections, broker: () => broker, maxClockSkewMs: config.maxClockSkew * 1000, compactMs: config.syncCompactMs, logMs: config.syncLogMs, nodeId: d.node.nodeId, files, secrets: d.secrets });
  await hub.start();
  started.push({ name: "sync", stop: () => hub.stop() });
  toEdges.attach((sk, topic, payload, qos) => { void hub.relayDown(sk, topic, payload, qos)?.catch((err) => log.warn("relay to edges failed", { err })); });
  ports.edgeControl.attach((sk, edge, req) => hub.control(sk, edge, req));
  ports.fleetLink.attach(hub);
  hubMetrics(d.metrics, hub, config.metricsSystemLabels);
  return hub;
}

/** Files to and from edges: what edges write to a bucket set's outbox lands in its inbox/<edge>/,
 *  and a set's file sent to an edge (syncFileToEdge) lands in the edge's inbox. */
function fileSync(d: Domain): FileSync {
  const { config } = d;
  const files = new FileSync({
    db: d.db, log: d.log, side: "platform", dir: join(config.dataDir, "filesync"), maxBytes: config.fileSyncMaxBytes, inflightBytes: config.fileSyncInflightBytes,
    backend: async (sk, set) => { const r = await bucketSetsRepo.get(d.db, sk, set); return r ? d.bucketSets.backendOf(r) : null; },
    // (on a cluster the node holding an edge's link sends it what any node queued)
    shared: config.redisUrl ? { queued: (systemKey, edge) => d.signals.emit("fileSync.queued", { systemKey, edge }) } : undefined,
  });
  d.signals.on("fileSync.queued", ({ systemKey, edge }) => files.wake(systemKey, edge));
  d.ports.edgeFiles.attach(edgeFileSender(files, (sk, edge) => d.edges.requireEdge(sk, edge)));
  d.signals.on("edge.changed", ({ systemKey, edge, what }) => (what === "deleted" ? files.forget(systemKey, edge).catch((err) => d.log.warn("file transfers of a deleted edge not dropped", { err })) : undefined));
  d.signals.on("system.removed", ({ systemKey }) => files.forget(systemKey).catch((err) => d.log.warn("file transfers of a deleted system not dropped", { err })));
  d.metrics.readCounter("outpost_file_sync_sent_bytes_total", "file bytes sent to edges (files sent to their inbox)", () => [[{}, files.bytesSent]]);
  d.metrics.readCounter("outpost_file_sync_received_bytes_total", "file bytes received from edges (their bucket sets' outbox)", () => [[{}, files.bytesReceived]]);
  return files;
}

function hubMetrics(metrics: Metrics, hub: SyncHub, systemLabels: number) {
  metrics.readCounter("outpost_sync_relay_dropped_total", "relayed messages for one edge that was connected to no platform node, or whose link was too far behind", () => [[{}, hub.relayDropped]]);
  metrics.gauge("outpost_sync_edges_connected", "edges with a live sync session on this node", () => [[{}, hub.connectedEdges().length]]);
  metrics.gauge("outpost_sync_edges_outbox_items", "rows and messages waiting in the outboxes of the connected edges, together (as their last pings said)", () =>
    [[{}, hub.connectedEdges().reduce((n, e) => n + e.outbox, 0)]]);
  metrics.gauge("outpost_sync_failed_assets", "assets that failed to apply on an edge (every edge), by asset type", async () =>
    Object.entries(await hub.failedAssets()).map(([type, n]): [Record<string, string>, number] => [{ asset_type: type }, n]));
  // system keys and edge names in labels only when the operator asks, for that many at most; each
  // edge's lag costs a count in the change log: read only for the labelled series
  if (systemLabels > 0) {
    metrics.gauge("outpost_sync_edge_lag", "changes a connected edge has not acknowledged (--metrics-system-labels edges with most)", async () =>
      largest((await hub.linkMetrics()).map((e): [Record<string, string>, number] => [{ system_key: e.systemKey, edge: e.edge }, e.lag]), systemLabels));
    metrics.gauge("outpost_sync_edge_outbox_items", "rows and messages waiting in a connected edge's outbox, as its last ping said (--metrics-system-labels edges with most)", () =>
      largest(hub.connectedEdges().map((e): [Record<string, string>, number] => [{ system_key: e.systemKey, edge: e.edge }, e.outbox]), systemLabels));
  }
}
