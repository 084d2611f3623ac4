// On an edge, MQTT messages on relayed topics (the template's topics that flow up, and any topic
// ending in /_platform) wait in the outbox until the platform acknowledges them. The broker calls
// `relay` for every publish it accepts; `stop` waits for the outbox writes still in flight (called
// after the broker stops taking publishes, before the database closes), so a message the broker
// acknowledged is kept.
import type { Logger } from "../core/log.ts";
import type { ChangeRecorder } from "../domain/changes.ts";
import type { Db } from "../store/db.ts";
import { relayed } from "./assets.ts";

export class EdgeRelay {
  private readonly writing = new Set<Promise<unknown>>();

  constructor(private readonly d: { db: Db; changes: ChangeRecorder; log: Logger; systemKey: string }) {}

  /** Puts a message of the edge's system on a relayed topic in the outbox. */
  readonly relay = (sk: string, topic: string, payload: Uint8Array, qos: number): void => {
    const { db, changes, log } = this.d;
    if (sk !== this.d.systemKey || !relayed(changes.relayTopics, topic)) return;
    const write = db.tx((tx) => changes.relay(tx, sk, topic, payload, qos)).catch((err) => log.error("relay failed", { err }));
    this.writing.add(write);
    void write.finally(() => this.writing.delete(write));
  };

  async stop(): Promise<void> { await Promise.all(this.writing); }
}
