// The runs under way on this node, as ClearBlade lists them (/codeadmin/v/3/running): each with
// its instance id (the run's req.service_instance_id), so one can be found and stopped; and the
// last runs of each system that ended (/api/v/3/code/{systemKey}/completed).
import type { PoolOutcome } from "./pool.ts";

export interface Instance {
  id: string;
  systemKey: string;
  service: string;
  /** epoch ms */
  startedAt: number;
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

/** A run that ended, as kept: shaped for the wire only when read (most are never read). */
interface Ended { i: Instance; args: unknown; o: PoolOutcome; userType: string; at: number }

/** The newest COMPLETED_KEPT runs of a system that ended, in a ring. */
interface EndedRing { list: Ended[]; next: number }

export class Instances {
  private readonly byId = new Map<string, Instance>();
  private readonly streams = new Map<string, number>();
  private readonly completed = new Map<string, EndedRing>();

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
    let ring = this.completed.get(i.systemKey);
    if (!ring) this.completed.set(i.systemKey, (ring = { list: [], next: 0 }));
    const e: Ended = { i, args, o, userType, at: Date.now() };
    if (ring.list.length < COMPLETED_KEPT) ring.list.push(e);
    else { ring.list[ring.next] = e; ring.next = (ring.next + 1) % COMPLETED_KEPT; }
  }

  /** The runs of a system that ended, newest first. */
  completedOf(systemKey: string): CompletedRun[] {
    const ring = this.completed.get(systemKey);
    if (!ring) return [];
    const inOrder = [...ring.list.slice(ring.next), ...ring.list.slice(0, ring.next)];
    return inOrder.reverse().map(completedRun);
  }

  forgetSystem(systemKey: string) { this.completed.delete(systemKey); }
}

function completedRun({ i, args, o, userType, at }: Ended): CompletedRun {
  const failed = o.kind === "failed";
  let results: unknown = null;
  if (!failed) { try { results = o.raw[0] === "t" ? o.raw.slice(1) : JSON.parse(o.raw.slice(1)); } catch { results = null; } }
  return {
    Id: i.id, Service: i.service, Args: args ?? {}, Response: { results: failed ? o.error : results, success: o.kind === "success" },
    Error: failed ? { status_code: 500, error: o.error } : { status_code: 0, error: "" }, UserId: i.userId, UserType: userType, Datetime: new Date(at).toISOString(),
  };
}

export const instanceToWire = (i: Instance) =>
  ({ instance_id: i.id, service_name: i.service, system_key: i.systemKey, started_at: new Date(i.startedAt).toISOString(), user_id: i.userId, stream: i.stream });
