// Message relay between a platform and its edges, as ClearBlade's suffixes say where a message
// goes (the topic is kept whole on every side; receivers subscribe to the suffixed topic):
//   <topic>/_platform                    an edge's message for the platform's subscribers
//   <topic>/_edge/<edgeName>             for that edge's subscribers (from the platform or an edge)
//   <topic>/_broadcast                   for every edge of the system (and the platform, from an edge)
//   <topic>/_edgeAndPlatform/<edgeName>  for that edge's subscribers and the platform's
// Upward, messages wait in the edge's durable outbox (with the template's `topic` entries, an
// Outpost extension); downward, the platform sends them to the edges connected at the time.
//
// On an edge, the broker calls `relay` for every publish it accepts; `stop` waits for the outbox
// writes still in flight (called after the broker stops taking publishes, before the database
// closes), so a message the broker acknowledged is kept.
import { topicMatches } from "../auth/permissions.ts";
import type { Logger } from "../core/log.ts";
import type { ChangeRecorder } from "../domain/changes.ts";
import type { Db } from "../store/db.ts";

/** Where a relay suffix sends a message: the platform, one edge (and the platform too, for
 *  _edgeAndPlatform), or every edge. */
export type RelayTarget = { to: "platform" } | { to: "edge"; edge: string; platform: boolean } | { to: "broadcast" };

const PLATFORM: RelayTarget = { to: "platform" };
const BROADCAST: RelayTarget = { to: "broadcast" };

/** The relay target a topic's suffix names, or null (a topic without one stays where it is
 *  published, unless the edge's template relays it). */
export function relayTarget(topic: string): RelayTarget | null {
  if (!topic.includes("/_")) return null; // most topics: asked of every publish on a platform
  const last = topic.lastIndexOf("/");
  if (last < 0) return null;
  const tail = topic.slice(last + 1);
  if (tail === "_platform") return PLATFORM;
  if (tail === "_broadcast") return BROADCAST;
  if (!tail) return null;
  const prev = topic.lastIndexOf("/", last - 1);
  if (prev < 0) return null;
  const level = topic.slice(prev + 1, last);
  if (level === "_edge") return { to: "edge", edge: tail, platform: false };
  if (level === "_edgeAndPlatform") return { to: "edge", edge: tail, platform: true };
  return null;
}

/** Whether a message published on the edge `edge` goes up to the platform: its suffix sends it
 *  beyond this edge (a message for this edge alone stays), or the template relays its topic. */
export function goesUp(topic: string, edge: string, filters: readonly string[]): boolean {
  const r = relayTarget(topic);
  if (r) return r.to !== "edge" || r.platform || r.edge !== edge;
  return filters.some((f) => topicMatches(f, topic));
}

/** Whether a topic an edge sends up can be published as it is: no wildcard, not a `$` topic, no
 *  NUL (an MQTT client could not publish it; a confused edge's is dropped). */
export const publishable = (topic: string) => topic.length > 0 && topic.length <= 65_535 && topic.charCodeAt(0) !== 36 && !/[+#\u0000]/.test(topic);

export class EdgeRelay {
  private readonly writing = new Set<Promise<unknown>>();

  constructor(private readonly d: { db: Db; changes: ChangeRecorder; log: Logger; systemKey: string; edgeName: string }) {}

  /** Puts a message of the edge's system that goes up in the outbox. */
  readonly relay = (sk: string, topic: string, payload: Uint8Array, qos: number): void => {
    const { db, changes, log } = this.d;
    if (sk !== this.d.systemKey || !goesUp(topic, this.d.edgeName, changes.relayTopics)) return;
    const write = db.tx((tx) => changes.relay(tx, sk, topic, payload, qos)).catch((err) => log.error("relay failed", { err }));
    this.writing.add(write);
    void write.finally(() => this.writing.delete(write));
  };

  async stop(): Promise<void> { await Promise.all(this.writing); }
}
