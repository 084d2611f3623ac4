// Messaging timers: ClearBlade's Messaging().setTimeout / setInterval publish a message later, or
// repeatedly, after the run that asked for them has ended. They live in this node's memory, per
// system and bounded (how many, how often, how far ahead, how large); a restart forgets them, and
// deleting the system cancels its own. Each publish goes through the messaging domain with the
// rights of whoever set the timer, checked again at every firing: a timer whose publish is refused
// (rights taken away, system gone) ends.
import type { Principal } from "../auth/principal.ts";
import { fail } from "../core/errors.ts";
import { newKey } from "../core/ids.ts";
import type { Logger } from "../core/log.ts";
import type { Devices } from "../domain/devices.ts";
import type { Messages } from "../domain/messages.ts";
import type { Users } from "../domain/users.ts";

export interface MessageTimerLimits {
  /** timers (timeouts and intervals) a system may have waiting at once */
  perSystem: number;
  /** the shortest period of an interval (a shorter one asked for is lengthened to it) */
  minIntervalMs: number;
  /** the longest delay or period */
  maxDelayMs: number;
  /** the largest message a timer holds */
  maxPayloadBytes: number;
  /** the most firings of one interval with a count (a negative count: until cancelled) */
  maxIterations: number;
}

export const MESSAGE_TIMER_LIMITS: MessageTimerLimits = {
  perSystem: 100, minIntervalMs: 100, maxDelayMs: 86_400_000, maxPayloadBytes: 65_536, maxIterations: 1_000_000,
};

export type MessageTimerKind = "timeout" | "interval";

/** A publish as the timer's owner; rejects when it is refused. */
export type TimerPublish = (p: Principal, systemKey: string, topic: string, payload: string) => Promise<unknown>;

/** A timer's publish through the messaging domain, as its owner is at the firing: a user's or
 *  device's current roles (one deleted or disabled since is refused), a developer as it was. */
export function publishAsOwner(d: { users: Users; devices: Devices; messages: Messages }): TimerPublish {
  const now = async (p: Principal, systemKey: string): Promise<Principal> => {
    if (p.kind === "user") return d.users.principalFor(systemKey, p.id);
    if (p.kind !== "device") return p;
    const dev = await d.devices.principalFor(systemKey, p.name);
    if (!dev) throw fail("INVALID_ARGUMENT", `device '${p.name}' that set the timer is gone or disabled`);
    return dev;
  };
  return async (p, systemKey, topic, payload) => d.messages.publish(await now(p, systemKey), systemKey, { topic, body: payload });
}

/** How timers are scheduled (the platform's own; tests pass a controllable clock). */
export interface Scheduler {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}
const realScheduler: Scheduler = {
  set: (fn, ms) => { const t = setTimeout(fn, ms); t.unref?.(); return t; },
  clear: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

interface Timer {
  id: string; kind: MessageTimerKind; systemKey: string; owner: Principal;
  topic: string; payload: string; periodMs: number;
  /** firings still to come */
  left: number;
  handle: unknown;
}

export interface TimerRequest { delayMs: unknown; topic: unknown; payload: unknown; iterations?: unknown }

export class MessageTimers {
  private readonly bySystem = new Map<string, Map<string, Timer>>();
  private stopped = false;

  constructor(
    private readonly publish: TimerPublish,
    private readonly log: Logger,
    readonly limits: MessageTimerLimits = MESSAGE_TIMER_LIMITS,
    private readonly scheduler: Scheduler = realScheduler,
  ) {}

  /** Checks a request and schedules it; returns the timer's id. */
  add(owner: Principal, systemKey: string, kind: MessageTimerKind, r: TimerRequest): string {
    if (this.stopped) throw fail("INVALID_ARGUMENT", "the server is stopping");
    const L = this.limits;
    const asked = r.delayMs;
    if (typeof asked !== "number" || !Number.isFinite(asked) || asked < 0 || asked > L.maxDelayMs)
      throw fail("INVALID_ARGUMENT", `timeout must be a number of milliseconds from 0 to ${L.maxDelayMs}`);
    // ClearBlade's own examples repeat every 30 ms: a period that short is taken as the shortest
    // this node keeps, rather than refused
    const delay = kind === "interval" ? Math.max(asked, L.minIntervalMs) : asked;
    if (typeof r.topic !== "string" || !r.topic || r.topic.length > 1024 || /[+#]/.test(r.topic))
      throw fail("INVALID_ARGUMENT", "topic must be a topic name without wildcards");
    const payload = typeof r.payload === "string" ? r.payload : r.payload === undefined || r.payload === null ? "" : JSON.stringify(r.payload);
    if (Buffer.byteLength(payload) > L.maxPayloadBytes) throw fail("INVALID_ARGUMENT", `the message is larger than ${L.maxPayloadBytes} bytes`);
    let left = 1;
    if (kind === "interval") {
      const n = r.iterations;
      if (typeof n !== "number" || !Number.isInteger(n) || n === 0 || n > L.maxIterations)
        throw fail("INVALID_ARGUMENT", `iterations must be a whole number from 1 to ${L.maxIterations}, or -1 (until cancelled)`);
      // -1 (ClearBlade's "forever"): until cancelled, the system deleted or the node stopped
      left = n < 0 ? Infinity : n;
    }
    const mine = this.bySystem.get(systemKey) ?? new Map<string, Timer>();
    if (mine.size >= L.perSystem) throw fail("INVALID_ARGUMENT", `this system already has ${L.perSystem} messaging timers waiting (cancel some first)`);
    this.bySystem.set(systemKey, mine);
    const t: Timer = { id: newKey(), kind, systemKey, owner, topic: r.topic, payload, periodMs: Math.floor(delay), left, handle: null };
    mine.set(t.id, t);
    this.schedule(t);
    return t.id;
  }

  /** Cancels a system's timer of that kind; returns its id. */
  cancel(systemKey: string, kind: MessageTimerKind, id: unknown): string {
    if (typeof id !== "string" || !id) throw fail("INVALID_ARGUMENT", `a ${kind} id is required`);
    const t = this.bySystem.get(systemKey)?.get(id);
    if (!t) throw fail("NOT_FOUND", `no ${kind} '${id.slice(0, 100)}' is waiting (it fired, was cancelled, or was never set here)`);
    if (t.kind !== kind) throw fail("INVALID_ARGUMENT", `'${id}' is ${t.kind === "timeout" ? "a timeout: cancel it with cancelCBTimeout" : "an interval: cancel it with cancelCBInterval"}`);
    this.remove(t);
    return id;
  }

  /** Timers a system has waiting. */
  count(systemKey: string): number { return this.bySystem.get(systemKey)?.size ?? 0; }

  /** Cancels every timer of a system (it was deleted). */
  forgetSystem(systemKey: string) {
    const mine = this.bySystem.get(systemKey);
    if (!mine) return;
    for (const t of [...mine.values()]) this.remove(t);
  }

  stop() {
    this.stopped = true;
    for (const key of [...this.bySystem.keys()]) this.forgetSystem(key);
  }

  private schedule(t: Timer) {
    t.handle = this.scheduler.set(() => void this.fire(t), t.periodMs);
  }

  private remove(t: Timer) {
    this.scheduler.clear(t.handle);
    const mine = this.bySystem.get(t.systemKey);
    mine?.delete(t.id);
    if (mine && mine.size === 0) this.bySystem.delete(t.systemKey);
  }

  private async fire(t: Timer) {
    if (this.bySystem.get(t.systemKey)?.get(t.id) !== t) return;
    t.left--;
    // the next firing is set before this publish: a slow publish does not stretch the period
    if (t.left > 0) this.schedule(t);
    else this.remove(t);
    try {
      await this.publish(t.owner, t.systemKey, t.topic, t.payload);
    } catch (err) {
      this.log.warn("a messaging timer's publish was refused: the timer ends", { systemKey: t.systemKey, topic: t.topic, err });
      this.remove(t);
    }
  }
}
