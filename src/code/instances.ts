// The runs under way on this node, as ClearBlade lists them (/codeadmin/v/3/running): each with
// its instance id (the run's req.service_instance_id), so one can be found and stopped; and the
// last runs of each system that ended (/api/v/3/code/{systemKey}/completed).
import type { PoolOutcome } from "./pool.ts";

export interface Instance {
  id: string;
  systemKey: string;
  service: string;
  startedAt: string;
  userId: string;
  /** a stream service (execution_timeout -1): runs until stopped */
  stream: boolean;
  /** ends the run */
  stop(why: string): void;
}

/** Completed runs kept per system. */
export const COMPLETED_KEPT = 100;

export interface CompletedRun {
  Id: string; Service: string; Args: unknown; Response: { results: unknown; success: boolean };
  Error: { status_code: number; error: string }; UserId: string; UserType: string; Datetime: string;
}

export class Instances {
  private readonly byId = new Map<string, Instance>();
  private readonly streams = new Map<string, number>();
  private readonly completed = new Map<string, CompletedRun[]>();

  add(i: Instance) {
    this.byId.set(i.id, i);
    if (i.stream) this.streams.set(i.systemKey, (this.streams.get(i.systemKey) ?? 0) + 1);
  }

  remove(i: Instance) {
    if (!this.byId.delete(i.id)) return;
    if (i.stream) {
      const n = (this.streams.get(i.systemKey) ?? 1) - 1;
      if (n > 0) this.streams.set(i.systemKey, n); else this.streams.delete(i.systemKey);
    }
  }

  get(id: string) { return this.byId.get(id); }
  /** Stream services of a system running now. */
  streamsOf(systemKey: string) { return this.streams.get(systemKey) ?? 0; }
  list(systemKey: string, service?: string): Instance[] {
    return [...this.byId.values()].filter((i) => i.systemKey === systemKey && (service === undefined || i.service === service));
  }

  /** Remembers a run that ended (the newest COMPLETED_KEPT of its system). */
  ended(i: Instance, args: unknown, o: PoolOutcome, userType: string) {
    let list = this.completed.get(i.systemKey);
    if (!list) this.completed.set(i.systemKey, (list = []));
    const failed = o.kind === "failed";
    let results: unknown = null;
    if (!failed) { try { results = o.raw[0] === "t" ? o.raw.slice(1) : JSON.parse(o.raw.slice(1)); } catch { results = null; } }
    list.push({
      Id: i.id, Service: i.service, Args: args ?? {}, Response: { results: failed ? o.error : results, success: o.kind === "success" },
      Error: failed ? { status_code: 500, error: o.error } : { status_code: 0, error: "" }, UserId: i.userId, UserType: userType, Datetime: new Date().toISOString(),
    });
    if (list.length > COMPLETED_KEPT) list.splice(0, list.length - COMPLETED_KEPT);
  }

  completedOf(systemKey: string): CompletedRun[] { return [...(this.completed.get(systemKey) ?? [])].reverse(); }
  forgetSystem(systemKey: string) { this.completed.delete(systemKey); }
}

export const instanceToWire = (i: Instance) =>
  ({ instance_id: i.id, service_name: i.service, system_key: i.systemKey, started_at: i.startedAt, user_id: i.userId, stream: i.stream });
