// Named signals between the parts of one node: a module says what changed, the parts that keep
// state about it (caches, the trigger dispatcher, the code engine, the sync hub) listen. Delivery
// is synchronous (a listener runs before emit returns); listeners are declared while the node
// starts, and refused after. The signals marked shared are forwarded by the cluster to every
// other node, where they are emitted again as remote.

/** Payload per signal. */
export interface SignalPayloads {
  /** cached principals of these tokens are stale (revoked, refreshed) */
  "tokens.revoked": { hashes: string[] };
  /** a subject's principal is stale (roles, email, key or state changed) */
  "tokens.subjectChanged": { kind: string; id: string; systemKey?: string };
  /** every cached principal of a system is stale */
  "tokens.systemChanged": { systemKey: string };
  /** a system's roles or their permissions changed */
  "permissions.changed": { systemKey: string };
  /** a system's record changed (or went) */
  "system.changed": { systemKey: string };
  /** a collection's schema changed (or it went) */
  "collection.changed": { collectionId: string };
  /** a collection's rows were written; `added`: rows added (removed: negative) when known */
  "collection.written": { collectionId: string; added?: number };
  /** a service or library changed */
  "code.changed": { systemKey: string; name: string; kind: "service" | "library"; deleted: boolean };
  /** a trigger or timer changed */
  "triggers.changed": { systemKey: string };
  /** an edge's template or record changed, or it was deleted */
  "edge.changed": { systemKey: string; edge: string; what: "template" | "deleted" | "record" };
  /** a service cache's definition changed (name null: all of the system's) */
  "serviceCache.changed": { systemKey: string; name: string | null };
  /** sessions were revoked: the MQTT clients connected with these tokens are closed */
  "sessions.ended": { hashes: string[] };
  /** a system was deleted on this node: what lives outside its rows goes (each node its own) */
  "system.removed": { systemKey: string };
  /** a bucket set's file was written or deleted on this node (`path`: <box>/<path in the box>);
   *  edge sync sends what an edge writes to its outbox */
  "bucketSet.fileChanged": { systemKey: string; set: string; path: string; deleted: boolean };
  /** a file was queued for an edge: the node holding its link (any node of a cluster) sends it */
  "fileSync.queued": { systemKey: string; edge: string };
}
export type SignalName = keyof SignalPayloads;

/** Which signals cross to the other nodes of a cluster (true) and which stay on this node. */
export const SIGNAL_SHARED: { readonly [K in SignalName]: boolean } = {
  "tokens.revoked": true,
  "tokens.subjectChanged": true,
  "tokens.systemChanged": true,
  "permissions.changed": true,
  "system.changed": true,
  "collection.changed": true,
  "collection.written": true,
  "code.changed": true,
  "triggers.changed": true,
  "edge.changed": true,
  "serviceCache.changed": true,
  "sessions.ended": true,
  "system.removed": false,
  "bucketSet.fileChanged": false,
  "fileSync.queued": true,
};

/** `remote`: the signal came from another node of the cluster. A listener's promise, if any, is
 *  what `emit` returns (a trigger change answers once the dispatcher has its index). */
export type SignalListener<K extends SignalName> = (payload: SignalPayloads[K], remote: boolean) => void | Promise<unknown>;

export class Signals {
  private readonly listeners = new Map<SignalName, SignalListener<never>[]>();
  private started = false;

  /** Listens to `name`. Refused once the node has started: what a part listens to is declared
   *  while it is built. */
  on<K extends SignalName>(name: K, listener: SignalListener<K>): void {
    if (this.started) throw new Error(`signal '${name}': listeners are declared before the node starts`);
    let list = this.listeners.get(name);
    if (!list) this.listeners.set(name, (list = []));
    list.push(listener as SignalListener<never>);
  }

  /** Closes the list of listeners. */
  start() { this.started = true; }

  /** Runs every listener of `name` now, in the order they were declared; a promise when some
   *  listener returned one (settled once they all have). */
  emit<K extends SignalName>(name: K, payload: SignalPayloads[K], remote = false): Promise<void> | undefined {
    const list = this.listeners.get(name) as SignalListener<K>[] | undefined;
    if (!list) return undefined;
    let waits: Promise<unknown>[] | undefined;
    for (const l of list) {
      const r = l(payload, remote);
      if (r instanceof Promise) (waits ??= []).push(r);
    }
    return waits && Promise.all(waits).then(() => {});
  }
}
