// Composition root: builds the parts for a mode, starts them in order, stops them in reverse. What
// both modes build is in compose/common.ts; what each adds, in compose/platform.ts and compose/edge.ts.
import type { Config } from "./config.ts";
import type { EventBus } from "./core/events.ts";
import { createLogger, type Logger } from "./core/log.ts";
import type { MqttBroker } from "./broker/broker.ts";
import type { HttpServer } from "./http/server.ts";
import type { Services } from "./http/services.ts";
import type { Db } from "./store/db.ts";
import { buildDomain, buildKernel, listen, nodeOf, openStorage, prepareAccounts, type Started, startRuntime } from "./compose/common.ts";
import { platformMode } from "./compose/platform.ts";
import { edgeMode } from "./compose/edge.ts";

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

export async function start(config: Config, opts: { log?: Logger; restart?: () => void } = {}): Promise<App> {
  const log = opts.log ?? createLogger(config.logLevel, { mode: config.mode });
  const started: Started = [];
  const stop = async () => {
    while (started.length) {
      const part = started.pop()!;
      try { await part.stop(); } catch (err) { log.error("stop failed", { part: part.name, err }); }
    }
  };
  try {
    const { db, metrics } = await openStorage(config, log, started);
    const node = nodeOf(config, log, db);
    const mode = config.mode === "platform" ? await platformMode(config, log, db, node, started) : edgeMode(config, opts.restart ?? null);
    const kernel = await buildKernel(config, log, db, metrics, node, started);
    const domain = await buildDomain(kernel, mode, started);
    await prepareAccounts(domain, started);
    const broker = await startRuntime(domain, mode, started);
    const sync = await mode.startSync(domain, broker, started);
    // every part is built: what listens to what is settled
    domain.signals.start();
    const { services, http, https } = listen(domain, broker, sync, started);

    for (const key of await domain.systems.keys())
      domain.events.emit(config.mode === "edge" ? "StartConnectDisconnect::EdgeStarted" : "StartConnectDisconnect::PlatformStarted", key, {});

    let stopping: Promise<void> | undefined;
    return { config, log, db, services, events: domain.events, http, https, broker, stop: () => (stopping ??= stop()) };
  } catch (err) {
    await stop();
    throw err;
  }
}
