// An MQTT client's session as the broker keeps it (src/broker/broker.ts), and its topics in and out
// of its system's space ("<systemKey>/<topic>" inside aedes).
import type { Principal } from "../auth/principal.ts";

export interface Session {
  systemKey: string;
  prefix: string;
  /** the client id as the client sent it (aedes' client.id is it inside the system's space) */
  clientId: string;
  principal: Principal | null;
  ip: string;
  /** when it signed in (ms since the epoch; a number costs no string on each connection) */
  connectedAt: number;
  /** publish decisions by (prefixed) topic, cached like the role permissions they come from;
   *  made at the first publish */
  allowed: Map<string, { ok: boolean; until: number }> | null;
  /** gives back a concurrency slot of the MQTT Connections throttler when the client goes */
  release?: () => void;
  /** why the connection ended, as far as the broker saw (for its log line) */
  endedBy?: string;
  /** sent no client id and asked to keep its session ([MQTT-3.1.3-8]: refused) */
  keptWithoutId?: boolean;
}

/** A client's topic or filter in its system's space ($share/group/ keeps its place in front). */
export function inSystem(prefix: string, topic: string): string {
  if (topic.startsWith("$share/")) {
    const i = topic.indexOf("/", 7);
    if (i > 0) return topic.slice(0, i + 1) + prefix + topic.slice(i + 1);
  }
  return prefix + topic;
}

/** The client's own form of a topic or filter in its system's space, or null if it is not in it. */
export function ownTopic(prefix: string, topic: string): string | null {
  if (topic.startsWith("$share/")) {
    const i = topic.indexOf("/", 7);
    return i > 0 && topic.startsWith(prefix, i + 1) ? topic.slice(0, i + 1) + topic.slice(i + 1 + prefix.length) : null;
  }
  return topic.startsWith(prefix) ? topic.slice(prefix.length) : null;
}
