// Trigger handlers and timers:
// definitions stored per system. Firing them is src/triggers' job.
import { LEVEL } from "../auth/permissions.ts";
import { type Principal, principalId } from "../auth/principal.ts";
import { fail, notFound } from "../core/errors.ts";
import { nowIso, timerKey } from "../core/ids.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import { type TimerRow, type TriggerRow, timersRepo, triggersRepo } from "../store/triggers.ts";
import { TRIGGER_DEFINITIONS, findDefinition } from "./triggerDefinitions.ts";
import type { DomainDeps } from "./deps.ts";
import type { CodeServices } from "./services.ts";
import type { Systems } from "./systems.ts";

/** The fields a trigger or timer body may carry (clients send back what they read). */
const TRIGGER_FIELDS = new Set(["def_module", "def_name", "key_value_pairs", "service_name", "system_key", "system_secret", "name", "disabled", "event_definition", "namespace"]);
const TIMER_FIELDS = new Set(["frequency", "repeats", "start_time", "service_name", "description", "user_id", "user_type", "disabled", "name", "system_key", "system_secret", "timer_key", "user_token", "namespace"]);

const NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

export function nextRunAfterStart(startMs: number, now: number): number {
  return Math.max(startMs, now);
}

/** Whose rights a trigger's or timer's service runs with, as timers carry it on the wire. */
export const RUN_AS_DEVELOPER = 1, RUN_AS_USER = 2, RUN_AS_DEVICE = 3;
export interface RunAs { user_id: string; user_type: number }

/** A trigger or timer runs with the rights of whoever defined it last: a developer's as the
 *  system's developer, anyone else's as that caller (so defining one never lends rights). */
function runAsOf(p: Principal): RunAs {
  if (p.kind === "developer") return { user_id: "", user_type: RUN_AS_DEVELOPER };
  return { user_id: principalId(p), user_type: p.kind === "device" ? RUN_AS_DEVICE : RUN_AS_USER };
}

export class Triggers {
  constructor(private readonly d: DomainDeps, private readonly systems: Systems, private readonly services: CodeServices) {}

  /** Says a system's triggers or timers changed (the dispatcher reloads its index, on every node);
   *  a trigger change answers once this resolves, so a trigger is live, changed or gone when its
   *  request returns. */
  changed(systemKey: string): Promise<void> | undefined { return this.d.signals.emit("triggers.changed", { systemKey }); }

  definitions() { return TRIGGER_DEFINITIONS; }

  private async guard(p: Principal, systemKey: string, kind: "triggers" | "timers", level: number) {
    const s = await this.systems.access(p, systemKey);
    if (p.kind !== "developer") await this.d.perms.require(p, { kind }, level, kind);
    return s;
  }

  // ---- triggers -------------------------------------------------------------------------------

  private triggerToWire(t: TriggerRow, secret: string) {
    const def = findDefinition(t.def_module, t.def_name);
    return {
      name: t.name, system_key: t.system_key, system_secret: secret,
      event_definition: { def_module: t.def_module, def_name: t.def_name, def_keys: def?.def_keys ?? [], visibility: true },
      def_module: t.def_module, def_name: t.def_name,
      key_value_pairs: JSON.parse(t.key_value_pairs) as Record<string, string>, service_name: t.service_name, namespace: "", disabled: t.disabled === 1,
    };
  }

  /** Accepts the flat body and the nested one (`event_definition`). */
  private async parseTrigger(p: Principal, systemKey: string, name: string, body: unknown, base?: TriggerRow): Promise<TriggerRow> {
    const b = objectBody(body);
    const nested = b.event_definition === undefined ? {} : objectBody(b.event_definition, "event_definition");
    knownFields(b, TRIGGER_FIELDS);
    const module = b.def_module ?? nested.def_module ?? base?.def_module;
    const action = b.def_name ?? nested.def_name ?? base?.def_name;
    if (typeof module !== "string" || typeof action !== "string") throw fail("INVALID_ARGUMENT", "def_module and def_name are required");
    const def = findDefinition(module, action);
    if (!def) throw fail("INVALID_ARGUMENT", `unknown trigger definition '${module}::${action}' (see GET /admin/triggers/definitions)`);
    // null is "no filters" (an SDK's nil map)
    const kvpIn = b.key_value_pairs === undefined ? (base ? JSON.parse(base.key_value_pairs) : {}) : b.key_value_pairs === null ? {} : objectBody(b.key_value_pairs, "key_value_pairs");
    const kvp: Record<string, string> = {};
    for (const [k, v] of Object.entries(kvpIn as Record<string, unknown>)) {
      if (!def.def_keys.includes(k)) throw fail("INVALID_ARGUMENT", `key_value_pairs: '${k}' is not a filter of ${def.def_module}::${def.def_name} (${def.def_keys.join(", ") || "none"})`);
      if (typeof v !== "string" && typeof v !== "boolean" && typeof v !== "number") throw fail("INVALID_ARGUMENT", `key_value_pairs.${k} must be a string`);
      kvp[k] = String(v);
    }
    const service = b.service_name ?? base?.service_name;
    if (typeof service !== "string" || !service) throw fail("INVALID_ARGUMENT", "service_name is required");
    if (!(await this.services.get(systemKey, service))) throw fail("INVALID_ARGUMENT", `service_name: service '${service}' does not exist`);
    if (b.disabled !== undefined && typeof b.disabled !== "boolean") throw fail("INVALID_ARGUMENT", "disabled must be a boolean");
    return {
      system_key: systemKey, name, def_module: def.def_module, def_name: def.def_name, key_value_pairs: JSON.stringify(kvp),
      service_name: service, disabled: b.disabled === undefined ? (base?.disabled ?? 0) : b.disabled ? 1 : 0, created_at: base?.created_at ?? nowIso(),
      ...runAsOf(p),
    };
  }

  async listTriggers(p: Principal, systemKey: string) {
    const s = await this.guard(p, systemKey, "triggers", LEVEL.READ);
    return (await triggersRepo.list(this.d.db, systemKey)).map((t) => this.triggerToWire(t, s.system_secret));
  }

  async getTrigger(p: Principal, systemKey: string, name: string) {
    const s = await this.guard(p, systemKey, "triggers", LEVEL.READ);
    const t = await triggersRepo.get(this.d.db, systemKey, name);
    if (!t) throw notFound("trigger", name, "Triggers");
    return this.triggerToWire(t, s.system_secret);
  }

  async createTrigger(p: Principal, systemKey: string, name: string, body: unknown) {
    const s = await this.guard(p, systemKey, "triggers", LEVEL.CREATE);
    if (!NAME_RE.test(name)) throw fail("INVALID_ARGUMENT", `invalid trigger name '${name}'`);
    const row = await this.parseTrigger(p, systemKey, name, body);
    await this.d.db.tx(async (tx) => {
      if (await triggersRepo.get(tx, systemKey, name)) throw fail("ALREADY_EXISTS", `trigger '${name}' already exists`);
      await triggersRepo.upsert(tx, row);
      await this.d.changes.record(tx, systemKey, "trigger", name, "upsert", row);
    });
    await this.changed(systemKey);
    return this.triggerToWire(row, s.system_secret);
  }

  async updateTrigger(p: Principal, systemKey: string, name: string, body: unknown) {
    const s = await this.guard(p, systemKey, "triggers", LEVEL.UPDATE);
    const cur = await triggersRepo.get(this.d.db, systemKey, name);
    if (!cur) throw notFound("trigger", name, "Triggers");
    const row = await this.parseTrigger(p, systemKey, name, body, cur);
    await this.d.db.tx(async (tx) => {
      await triggersRepo.upsert(tx, row);
      await this.d.changes.record(tx, systemKey, "trigger", name, "upsert", row);
    });
    await this.changed(systemKey);
    return this.triggerToWire(row, s.system_secret);
  }

  async deleteTrigger(p: Principal, systemKey: string, name: string) {
    await this.guard(p, systemKey, "triggers", LEVEL.DELETE);
    await this.d.db.tx(async (tx) => {
      if (!(await triggersRepo.delete(tx, systemKey, name)).changes) throw notFound("trigger", name, "Triggers");
      await this.d.changes.record(tx, systemKey, "trigger", name, "delete", null);
    });
    await this.changed(systemKey);
    return {};
  }

  allTriggers() { return triggersRepo.all(this.d.db); }

  // ---- timers ---------------------------------------------------------------------------------

  private timerToWire(t: TimerRow, secret: string) {
    return {
      timer_key: timerKey(t.system_key, t.name), name: t.name, description: t.description, start_time: t.start_time,
      repeats: t.repeats, frequency: t.frequency, service_name: t.service_name, system_key: t.system_key, system_secret: secret,
      user_id: t.user_id, user_type: t.user_type, user_token: "", namespace: "", disabled: t.disabled === 1,
      runs: t.runs, next_run: t.next_run === null ? null : new Date(t.next_run).toISOString(),
    };
  }

  private async parseTimer(p: Principal, systemKey: string, name: string, body: unknown, base?: TimerRow): Promise<TimerRow> {
    const b = objectBody(body);
    knownFields(b, TIMER_FIELDS);
    const frequency = b.frequency ?? base?.frequency;
    if (typeof frequency !== "number" || !Number.isInteger(frequency) || frequency < 1) throw fail("INVALID_ARGUMENT", "frequency must be a whole number of seconds >= 1");
    const repeats = b.repeats ?? base?.repeats ?? -1;
    if (typeof repeats !== "number" || !Number.isInteger(repeats) || repeats < -1) throw fail("INVALID_ARGUMENT", "repeats must be -1 (forever) or the number of runs");
    // "": a timer that runs no service and only publishes on $timer/<name> (stream services
    // subscribe to it; ClearBlade exports such timers)
    const service = b.service_name ?? base?.service_name;
    if (typeof service !== "string") throw fail("INVALID_ARGUMENT", "service_name is required (\"\" for a timer that only publishes on $timer/<name>)");
    if (service && !(await this.services.get(systemKey, service))) throw fail("INVALID_ARGUMENT", `service_name: service '${service}' does not exist`);
    let start: unknown = b.start_time ?? base?.start_time ?? "now";
    if (typeof start !== "string") throw fail("INVALID_ARGUMENT", "start_time must be RFC 3339 text or \"now\"");
    let startMs: number;
    if (start.toLowerCase() === "now") { startMs = Date.now(); start = new Date(startMs).toISOString(); }
    else {
      startMs = Date.parse(start);
      if (Number.isNaN(startMs) || !/^\d{4}-\d{2}-\d{2}T/.test(start)) throw fail("INVALID_ARGUMENT", "start_time must be RFC 3339 (e.g. 2026-01-01T00:00:00Z) or \"now\"");
    }
    const description = b.description ?? base?.description ?? "";
    if (typeof description !== "string") throw fail("INVALID_ARGUMENT", "description must be a string");
    if (b.disabled !== undefined && typeof b.disabled !== "boolean") throw fail("INVALID_ARGUMENT", "disabled must be a boolean");
    const changedSchedule = !base || b.frequency !== undefined || b.start_time !== undefined || b.repeats !== undefined;
    const runs = changedSchedule ? 0 : base!.runs;
    const done = repeats > 0 && runs >= repeats;
    return {
      system_key: systemKey, name, description, frequency, repeats, start_time: start as string, service_name: service,
      ...this.timerRunAs(p, b, base),
      disabled: b.disabled === undefined ? (base?.disabled ?? 0) : b.disabled ? 1 : 0, runs,
      next_run: done ? null : changedSchedule ? nextRunAfterStart(startMs, Date.now()) : base!.next_run,
      created_at: base?.created_at ?? nowIso(),
    };
  }

  /** A developer may name the user a timer runs as; anyone else defines it as itself. */
  private timerRunAs(p: Principal, b: Record<string, unknown>, base?: TimerRow): RunAs {
    const own = runAsOf(p);
    if (b.user_id !== undefined && typeof b.user_id !== "string") throw fail("INVALID_ARGUMENT", "user_id must be a string");
    if (b.user_type !== undefined && !(b.user_type === RUN_AS_DEVELOPER || b.user_type === RUN_AS_USER || b.user_type === RUN_AS_DEVICE))
      throw fail("INVALID_ARGUMENT", "user_type must be 1 (developer), 2 (user) or 3 (device)");
    if (p.kind !== "developer") {
      if ((b.user_id !== undefined && b.user_id !== own.user_id) || (b.user_type !== undefined && b.user_type !== own.user_type))
        throw fail("FORBIDDEN", "user_id: only a developer may make a timer run with another user's rights");
      return own;
    }
    if (b.user_id === undefined && b.user_type === undefined) return base && base.user_type !== RUN_AS_DEVELOPER ? { user_id: base.user_id, user_type: base.user_type } : own;
    const userId = (b.user_id as string | undefined) ?? base?.user_id ?? "";
    const userType = (b.user_type as number | undefined) ?? (userId ? RUN_AS_USER : RUN_AS_DEVELOPER);
    return userType === RUN_AS_DEVELOPER ? own : { user_id: userId, user_type: userType };
  }

  async listTimers(p: Principal, systemKey: string) {
    const s = await this.guard(p, systemKey, "timers", LEVEL.READ);
    return (await timersRepo.list(this.d.db, systemKey)).map((t) => this.timerToWire(t, s.system_secret));
  }

  async getTimer(p: Principal, systemKey: string, name: string) {
    const s = await this.guard(p, systemKey, "timers", LEVEL.READ);
    const t = await timersRepo.get(this.d.db, systemKey, name);
    if (!t) throw notFound("timer", name, "Timers");
    return this.timerToWire(t, s.system_secret);
  }

  async createTimer(p: Principal, systemKey: string, name: string, body: unknown) {
    const s = await this.guard(p, systemKey, "timers", LEVEL.CREATE);
    if (!NAME_RE.test(name)) throw fail("INVALID_ARGUMENT", `invalid timer name '${name}'`);
    const row = await this.parseTimer(p, systemKey, name, body);
    await this.d.db.tx(async (tx) => {
      if (await timersRepo.get(tx, systemKey, name)) throw fail("ALREADY_EXISTS", `timer '${name}' already exists`);
      await timersRepo.upsert(tx, row);
      await this.d.changes.record(tx, systemKey, "timer", name, "upsert", row);
    });
    this.changed(systemKey);
    return this.timerToWire(row, s.system_secret);
  }

  async updateTimer(p: Principal, systemKey: string, name: string, body: unknown) {
    const s = await this.guard(p, systemKey, "timers", LEVEL.UPDATE);
    const cur = await timersRepo.get(this.d.db, systemKey, name);
    if (!cur) throw notFound("timer", name, "Timers");
    const row = await this.parseTimer(p, systemKey, name, body, cur);
    await this.d.db.tx(async (tx) => {
      await timersRepo.upsert(tx, row);
      await this.d.changes.record(tx, systemKey, "timer", name, "upsert", row);
    });
    this.changed(systemKey);
    return this.timerToWire(row, s.system_secret);
  }

  async deleteTimer(p: Principal, systemKey: string, name: string) {
    await this.guard(p, systemKey, "timers", LEVEL.DELETE);
    await this.d.db.tx(async (tx) => {
      if (!(await timersRepo.delete(tx, systemKey, name)).changes) throw notFound("timer", name, "Timers");
      await this.d.changes.record(tx, systemKey, "timer", name, "delete", null);
    });
    this.changed(systemKey);
    return {};
  }

  dueTimers(now: number) { return timersRepo.due(this.d.db, now); }
  /** Records a firing unless another node did already; returns whether this node fires it. */
  async claimFiring(t: TimerRow, next: number | null) {
    return (await timersRepo.fired(this.d.db, t.system_key, t.name, t.next_run!, next)).changes === 1;
  }
}
