// The edge's parts: the outbox relay that carries messages up, the sync link to its platform (with
// the fleet agent that answers what the platform relays down), and their metrics.
import { join } from "node:path";
import type { Config } from "../config.ts";
import type { Metrics } from "../core/metrics.ts";
import { Port } from "../core/port.ts";
import type { MqttBroker } from "../broker/broker.ts";
import type { HttpServer } from "../http/server.ts";
import { AdapterRunner } from "../adapters/runner.ts";
import { staleCaches } from "../sync/kinds/index.ts";
import { EdgeRelay } from "../sync/relay.ts";
import { EdgeSync } from "../sync/edge/link.ts";
import { FleetAgent } from "../sync/fleetAgent.ts";
import { FileSync } from "../sync/files.ts";
import { bucketSetsRepo } from "../store/fileAreas.ts";
import { type Domain, localState, type ModeParts, type Started } from "./common.ts";

/** The parts an edge adds; `restart` starts the edge again in this process when its platform asks. */
export function edgeMode(config: Config, restart: (() => void) | null): ModeParts {
  return {
    // an edge always keeps its own
    sharedState: () => Promise.resolve(localState()),
    // messages on relayed topics wait in the outbox for the platform (stopped after the broker)
    brokerLinks: (k, started) => {
      const relay = new EdgeRelay({ db: k.db, changes: k.changes, log: k.log, systemKey: config.systemKey!, edgeName: config.edgeName! });
      started.push({ name: "relay", stop: () => relay.stop() });
      return { relay: relay.relay };
    },
    startSync: (d, broker, started) => startLink(d, broker, restart, started),
  };
}

/** The sync link to the platform, started, with the fleet agent behind it. */
async function startLink(d: Domain, broker: MqttBroker, restart: (() => void) | null, started: Started) {
  const { config, log } = d;
  log.info("edge mode", { platform: config.platformUrl, systemKey: config.systemKey, edge: config.edgeName });
  // relayed requests and remote operations: answered by this edge's API (attached once it listens)
  const edgeApi = new Port<(req: Request) => Promise<Response>>("edge API");
  const fleet = new FleetAgent({ config, log, tokens: d.tokens, commands: new AdapterRunner(join(config.dataDir, "commands"), { user: config.edgeCommandsUser, dataDir: config.dataDir }),
    api: edgeApi, restart });
  const files = fileSync(d);
  const edgeSync = new EdgeSync({
    db: d.db, config, log, events: d.events, changes: d.changes, compileCheck: d.compileCheck, fleet, files, secrets: d.secrets,
    // as from the edge itself: its broker does not relay it up again
    deliver: (topic, payload, qos) => broker.publish(config.systemKey!, topic, payload, qos, false, { kind: "edge", systemKey: config.systemKey!, id: config.edgeName!, name: config.edgeName!, tokenHash: "" }),
    invalidate: (sk, types, ids) => {
      d.systems.forget(sk);
      d.deps.perms.invalidate(sk);
      const stale = staleCaches(types);
      if (stale.has("code")) d.code.forgetSystem(sk);
      if (stale.has("triggers")) void d.triggers.changed(sk);
      if (stale.has("tokens")) d.tokens.forgetSystem(sk);
      if (stale.has("servicecaches")) d.serviceCaches.forget(sk);
      if (stale.has("webhooks")) d.webhooks.forgetSystem(sk);
      for (const id of ids) d.collections.forgetId(id);
    },
  });
  d.ports.upstream.attach((email, password) => edgeSync.verifyDeveloper(email, password));
  await edgeSync.start();
  started.push({ name: "sync", stop: () => edgeSync.stop() });
  linkMetrics(d.metrics, edgeSync);
  return {
    edgeSync,
    link: { connected: () => edgeSync.connected, lastContactAt: () => edgeSync.lastContactAt, graceS: config.linkGrace, informational: config.linkLossOk },
    listening: (http: HttpServer) => edgeApi.attach(http.handle),
  };
}

/** Files to and from the platform: what is written to a bucket set's outbox here goes up (a delete
 *  before it arrived stops it). */
function fileSync(d: Domain): FileSync {
  const { config } = d;
  const files = new FileSync({
    db: d.db, log: d.log, side: "edge", dir: join(config.dataDir, "filesync"), maxBytes: config.fileSyncMaxBytes, inflightBytes: config.fileSyncInflightBytes,
    backend: async (sk, set) => { const r = await bucketSetsRepo.get(d.db, sk, set); return r ? d.bucketSets.backendOf(r) : null; },
  });
  d.signals.on("bucketSet.fileChanged", ({ systemKey, set, path, deleted }) => {
    if (systemKey !== config.systemKey || !path.startsWith("outbox/")) return;
    const rel = path.slice("outbox/".length);
    const done = deleted ? files.cancel(systemKey, config.edgeName!, set, rel) : files.enqueue(systemKey, config.edgeName!, set, path, rel);
    return done.catch((err) => d.log.warn("file not queued for the platform", { set, path, err }));
  });
  d.metrics.readCounter("outpost_file_sync_sent_bytes_total", "file bytes sent to the platform (bucket sets' outbox)", () => [[{}, files.bytesSent]]);
  d.metrics.readCounter("outpost_file_sync_received_bytes_total", "file bytes received from the platform", () => [[{}, files.bytesReceived]]);
  return files;
}

function linkMetrics(metrics: Metrics, link: EdgeSync) {
  metrics.gauge("outpost_sync_link_up", "1 while the edge has a live session with its platform", () => [[{}, link.connected ? 1 : 0]]);
  metrics.gauge("outpost_sync_outbox_items", "rows and messages waiting to go up to the platform", async () => [[{}, await link.outboxSize()]]);
  metrics.readCounter("outpost_sync_outbox_dropped_total", "outbox items dropped past --outbox-max-mb or --outbox-max-age", () => [[{}, link.outboxDropped]]);
  metrics.gauge("outpost_sync_failed_assets", "assets that failed to apply on this edge, by asset type", async () =>
    Object.entries(await link.failedAssets()).map(([type, n]): [Record<string, string>, number] => [{ asset_type: type }, n]));
}
