// Runs trigger handlers: every domain event is matched against the triggers of its system
// (definition and key_value_pairs filters) and each match runs its service with the event's
// payload in req.params plus params.trigger = "Module::Action".
import { topicMatches } from "../auth/permissions.ts";
import type { DomainEvent, EventBus, EventType } from "../core/events.ts";
import type { Logger } from "../core/log.ts";
import type { Signals } from "../core/signals.ts";
import { type CodeEngine, isQueueFull } from "../code/engine.ts";
import type { Systems } from "../domain/systems.ts";
import type { Triggers } from "../domain/triggers.ts";
import type { TriggerRow } from "../store/triggers.ts";
import { TriggerBacklog } from "./backlog.ts";

/** A trigger whose service causes its own event again stops after this many rounds. */
export const MAX_TRIGGER_DEPTH = 4;

/** Which payload value a key_value_pairs filter compares with. */
function payloadValues(key: string, p: Record<string, any>): unknown[] {
  switch (key) {
    case "itemId": return Array.isArray(p.items) ? p.items.map((i: { item_id: string }) => i.item_id) : [];
    case "userId": return [p.userId ?? p.user?.user_id];
    default: return [p[key]];
  }
}

/** Each trigger's key_value_pairs filters, parsed once (an event type a trigger watches, such as
 *  Messaging::Publish, matches every one of its events against them) without the empty ones. */
const parsedFilters = new WeakMap<TriggerRow, [string, string][]>();
function filters(t: TriggerRow): [string, string][] {
  let f = parsedFilters.get(t);
  if (!f) parsedFilters.set(t, (f = Object.entries(JSON.parse(t.key_value_pairs) as Record<string, string>).filter(([, want]) => want !== ""))); // empty = any
  return f;
}

export function matches(t: TriggerRow, e: DomainEvent): boolean {
  for (const [k, want] of filters(t)) {
    const have = payloadValues(k, e.payload as Record<string, unknown>);
    const ok = k === "topic"
      ? have.some((v) => typeof v === "string" && topicMatches(want, v))
      : have.some((v) => v !== undefined && v !== null && String(v) === want);
    if (!ok) return false;
  }
  return true;
}

export class TriggerDispatcher {
  /** systemKey -> event type -> triggers */
  private index = new Map<string, Map<string, TriggerRow[]>>();
  /** the reload waiting to start, and the last one started */
  private queued: Promise<void> | null = null;
  private running: Promise<void> = Promise.resolve();
  private off: (() => void) | null = null;
  fired = 0;
  loopsStopped = 0;
  /** runs waiting while their system's code queue is full */
  readonly backlog: TriggerBacklog;

  constructor(private readonly events: EventBus, private readonly triggers: Triggers, private readonly systems: Systems,
    private readonly engine: CodeEngine, private readonly log: Logger, signals: Signals, backlogMax?: number) {
    this.backlog = new TriggerBacklog({ room: (sk) => engine.queueRoom(sk), isQueueFull, log }, backlogMax);
    // (before start: a change then reloads an index not yet loaded, and start loads it anyway)
    signals.on("triggers.changed", () => this.reload().catch((err) => this.log.error("trigger index reload failed", { err })));
  }

  async start() {
    await this.reload();
    this.subscribe();
  }

  /** Listens only to the event types some trigger uses, so unwatched events stay free. */
  private subscribe() {
    this.off?.();
    const types = new Set<string>();
    for (const m of this.index.values()) for (const t of m.keys()) types.add(t);
    this.off = types.size ? this.events.on((e) => this.handle(e), [...types] as EventType[]) : null;
  }

  /** Reloads the index; resolves once an index read after this call is in place. Reloads run one
   *  at a time (a slower, older one can never replace a newer index), and callers arriving while
   *  one waits to start share it (it reads every change made before it starts). */
  reload(): Promise<void> {
    if (this.queued) return this.queued;
    const next = this.running.catch(() => {}).then(() => { this.queued = null; return this.load(); });
    this.queued = next;
    this.running = next;
    return next;
  }
  private async load() {
    const index = new Map<string, Map<string, TriggerRow[]>>();
    for (const t of await this.triggers.allTriggers()) {
      if (t.disabled) continue;
      const m = index.get(t.system_key) ?? new Map<string, TriggerRow[]>();
      index.set(t.system_key, m);
      const type = `${t.def_module}::${t.def_name}`;
      m.set(type, [...(m.get(type) ?? []), t]);
    }
    this.index = index;
    this.subscribe();
  }

  /** Matched at once: an event no trigger matches (most publishes, with a trigger on a topic)
   *  costs no promise and no system lookup. */
  private handle(e: DomainEvent): Promise<void> | undefined {
    const list = this.index.get(e.systemKey)?.get(e.type);
    if (!list) return;
    let matched: TriggerRow[] | undefined;
    for (const t of list) if (matches(t, e)) (matched ??= []).push(t);
    if (matched) return this.fire(e, matched);
  }

  private async fire(e: DomainEvent, list: TriggerRow[]) {
    if (e.depth >= MAX_TRIGGER_DEPTH) {
      this.loopsStopped++;
      this.log.warn("trigger chain stopped: too deep", { event: e.type, systemKey: e.systemKey, depth: e.depth });
      return;
    }
    const system = await this.systems.find(e.systemKey);
    if (!system) return;
    // a trigger runs as whoever defined it (see RunAs); a service with a run_user runs as that user
    for (const t of list) {
      this.fired++;
      const params = { ...(e.payload as Record<string, unknown>), trigger: e.type };
      this.engine.runner(e.systemKey, system.owner_id, t)
        .then((p) => this.backlog.add(e.systemKey, {
          trigger: t.name,
          run: () => this.engine.execute(p, e.systemKey, t.service_name, params, { internal: true, trigger: e.type, depth: e.depth }),
          drop: (why) => this.engine.recordUnrun(p, e.systemKey, t.service_name, params, e.type, why),
        }))
        .catch((err) => this.log.warn("trigger run failed", { trigger: t.name, err }));
    }
  }

  /** Stops taking events; the runs still waiting are recorded as failed. */
  async stop() {
    this.off?.();
    this.off = null;
    await this.backlog.stop();
  }
}
