// Typed domain events. Domain modules emit them after their transaction commits; triggers,
// sync and tests subscribe. Handlers run after the emitting call returns and cannot fail it.
import { AsyncLocalStorage } from "node:async_hooks";
import type { Logger } from "./log.ts";

/** Set while a service run's calls execute: events they cause carry the run's trigger depth,
 *  so a trigger whose service fires its own event cannot loop forever. */
export const causeScope = new AsyncLocalStorage<{ depth: number }>();

/** Payload per event type ("Module::Action"), with the keys trigger filters match on. */
export interface EventPayloads {
  "User::UserCreated": { user: { email: string; user_id: string; creation_date: string } };
  "User::UserUpdated": { user: { email: string; user_id: string }; userId: string; changes: Record<string, unknown> };
  "User::UserDeleted": { user: { email: string; user_id: string }; userId: string };
  "User::UserAuth": { email: string; is_error: boolean; error: string };
  "UserRoles::UserRoleAdded": { userID: string; roleID: string; roles: string[] };
  "UserRoles::UserRoleRemoved": { userID: string; roleID: string; roles: string[] };
  "Data::CollectionCreated": { collectionId: string; collectionName: string };
  "Data::CollectionUpdated": { collectionId: string; collectionName: string };
  "Data::CollectionDeleted": { collectionId: string; collectionName: string };
  "Data::ItemCreated": { collectionId: string; collectionName: string; items: { item_id: string }[] };
  "Data::ItemUpdated": { collectionId: string; collectionName: string; items: { item_id: string }[]; query: unknown };
  "Data::ItemDeleted": { collectionId: string; collectionName: string; items: { item_id: string }[]; query: unknown };
  "Data::ItemUpserted": { collectionId: string; collectionName: string; items: { item_id: string }[] };
  "Device::DeviceCreated": { deviceName: string; device: Record<string, unknown> };
  "Device::DeviceUpdated": { deviceName: string; changes: Record<string, unknown> };
  "Device::DeviceDeleted": { deviceName: string; device: Record<string, unknown> };
  "Device::DeviceAuth": { deviceName: string; is_error: boolean; error: string };
  "Messaging::Publish": { topic: string; body: string; userId: string };
  "Messaging::Subscribe": { topic: string; userId: string };
  "Messaging::Unsubscribe": { topic: string; userId: string };
  "Messaging::MQTTUserConnected": { email: string; userId: string; clientId: string };
  "Messaging::MQTTUserDisconnected": { email: string; userId: string; clientId: string };
  "Messaging::MQTTDeviceConnected": { deviceName: string; clientId: string };
  "Messaging::MQTTDeviceDisconnected": { deviceName: string; clientId: string };
  "StartConnectDisconnect::PlatformStarted": Record<string, never>;
  "StartConnectDisconnect::EdgeStarted": Record<string, never>;
  "StartConnectDisconnect::PlatformConnectedOnEdge": Record<string, never>;
  "StartConnectDisconnect::PlatformDisconnectedOnEdge": Record<string, never>;
  "StartConnectDisconnect::EdgeConnectedOnPlatform": { edgeName: string };
  "StartConnectDisconnect::EdgeDisconnectedOnPlatform": { edgeName: string };
}
export type EventType = keyof EventPayloads;

export interface DomainEvent<K extends EventType = EventType> {
  type: K;
  systemKey: string;
  payload: EventPayloads[K];
  /** Set when the change came in through edge sync, so it is not sent back where it came from. */
  origin?: string;
  /** trigger depth of the service run that caused this event (0: not caused by a trigger) */
  depth: number;
  at: number;
}

export type EventHandler = (e: DomainEvent) => void | Promise<void>;

export class EventBus {
  private readonly handlers = new Map<EventHandler, Set<EventType> | null>();
  constructor(private readonly log?: Logger) {}

  /** Subscribes to every event, or only to `types`. */
  on(h: EventHandler, types?: EventType[]): () => void {
    this.handlers.set(h, types ? new Set(types) : null);
    return () => this.handlers.delete(h);
  }

  /** Whether anyone listens to `type`: hot paths skip building payloads nobody reads. */
  listening(type: EventType): boolean {
    for (const t of this.handlers.values()) if (t === null || t.has(type)) return true;
    return false;
  }

  emit<K extends EventType>(type: K, systemKey: string, payload: EventPayloads[K], origin?: string) {
    // (nothing built for a type no one listens to: the audit trail listens to MQTT connects only)
    if (this.handlers.size === 0 || !this.listening(type)) return;
    const scope = causeScope.getStore();
    const e: DomainEvent<K> = { type, systemKey, payload, origin, depth: scope?.depth ?? 0, at: Date.now() };
    // the events of one stretch of code are handled in one microtask, in order (a broker emits
    // thousands a second, and need not make a closure and a microtask for each); a batch keeps to
    // one cause scope, which its handlers run in as each event's did alone
    const last = this.pending;
    if (last && last.scope === scope) { last.events.push(e as DomainEvent); return; }
    const batch = { scope, events: [e as DomainEvent] };
    this.pending = batch;
    queueMicrotask(() => this.dispatch(batch));
  }

  /** the batch of events emitted last, until it is handed to the handlers */
  private pending: { scope: { depth: number } | undefined; events: DomainEvent[] } | null = null;

  private dispatch(batch: { events: DomainEvent[] }) {
    // one a handler emits goes into a batch of its own, after these
    if (this.pending === batch) this.pending = null;
    for (const e of batch.events) {
      for (const [h, types] of this.handlers) {
        if (types && !types.has(e.type)) continue;
        try {
          const r = h(e);
          if (r instanceof Promise) r.catch((err) => this.log?.error("event handler failed", { event: e.type, err }));
        } catch (err) {
          this.log?.error("event handler failed", { event: e.type, err });
        }
      }
    }
  }
}
