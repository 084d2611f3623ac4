// The throttling engine (docs/security.md): for each of the three throttlers, the cases sorted by
// priority; the first case whose system, resource and consumer all match decides, through its
// limiter. Answers synchronously unless a shared (Redis) window has to be asked.
import type { Config } from "../config.ts";
import type { Logger } from "../core/log.ts";
import type { Metrics } from "../core/metrics.ts";
import type { Db } from "../store/db.ts";
import { type CaseRow, casesRepo } from "../store/throttle.ts";
import { BUILT_IN_CASES, type BuiltInCase, type CompiledCase, compileCase, type Counts, EXACT, matchRest, resourceMatches, type Subject, THROTTLERS, type ThrottlerName } from "./cases.ts";
import { InFlight, Lockouts, SharedStore, type SignInOutcome, TokenBuckets } from "./limiters.ts";

export interface Decision {
  ok: boolean;
  /** the case that decided (absent when none matched) */
  caseName?: string;
  /** seconds until a frequency limiter lets the next request through */
  retryAfterS?: number;
  /** for concurrency limiters: call when the request or connection ends */
  release?: () => void;
  /** for cases counting failed sign-ins: call with how the attempt was answered */
  settle?: (outcome: SignInOutcome) => void;
}

const ALLOW: Decision = Object.freeze({ ok: true });
const EPOCH = "1970-01-01T00:00:00.000Z";
const rowOf = ({ counts: _, ...c }: BuiltInCase): CaseRow => ({ ...c, created_at: EPOCH, updated_at: EPOCH });
/** Above this many entries the per-system index is not built (the scan is still correct). */
const INDEX_MAX = 200_000;
/** Distinct resources remembered per case list (paths with ids in them would grow it forever). */
const RESOURCES_MAX = 5_000;
/** A refusal is logged once per this long per throttler, case, system and address, with the
 *  count of those not logged (a client retrying in a loop would otherwise fill the log). */
const REFUSAL_LOG_MS = 60_000;
const REFUSALS_KEPT = 10_000;

/** Cases in priority order, with the ones each resource can match remembered: a resource's
 *  filters give the same answer until the cases change, so most requests look at a few cases. */
class CaseList {
  private readonly byResource = new Map<string, CompiledCase[]>();
  constructor(readonly cases: CompiledCase[]) {}
  candidates(resource: string): CompiledCase[] {
    let c = this.byResource.get(resource);
    if (!c) {
      c = this.cases.filter((x) => resourceMatches(x, resource));
      if (this.byResource.size >= RESOURCES_MAX) this.byResource.clear();
      this.byResource.set(resource, c);
    }
    return c;
  }
}

/** Cases by the system they can match: a system named exactly by some case gets its own list
 *  (its exact cases merged with the `?`/`*` ones, in priority order); every other system the
 *  `?`/`*` list. */
interface CaseIndex { bySystem: Map<string, CaseList>; generic: CaseList; all: CaseList }

function indexCases(sorted: CompiledCase[]): CaseIndex {
  const generic = sorted.filter((c) => c.system.kind !== EXACT);
  const exactKeys = new Set(sorted.flatMap((c) => (c.system.kind === EXACT ? [c.system.value] : [])));
  const bySystem = new Map<string, CaseList>();
  const all = new CaseList(sorted);
  if (exactKeys.size * (generic.length + 1) > INDEX_MAX) return { bySystem, generic: all, all };
  for (const key of exactKeys) bySystem.set(key, new CaseList(sorted.filter((c) => c.system.kind !== EXACT || c.system.value === key)));
  return { bySystem, generic: new CaseList(generic), all };
}

export class Throttle {
  private cases: Record<ThrottlerName, CompiledCase[]> = { "HTTP Requests": [], "MQTT Connections": [], "MQTT Publishes": [] };
  private index: Record<ThrottlerName, CaseIndex> = { "HTTP Requests": indexCases([]), "MQTT Connections": indexCases([]), "MQTT Publishes": indexCases([]) };
  private readonly buckets = new TokenBuckets();
  private readonly inFlight = new InFlight();
  private readonly lockouts = new Lockouts();
  private shared: SharedStore | null = null;
  private readonly throttled;
  private readonly latency;
  /** refusals logged lately: when the next may be, and how many were not */
  private readonly refusals = new Map<string, { until: number; skipped: number }>();

  constructor(private readonly d: { db: Db; config: Config; log: Logger; metrics: Metrics; nodeId: string }) {
    this.throttled = d.metrics.counter("outpost_throttled_total", "Requests, connections and publishes refused by throttling, per throttler");
    this.latency = d.metrics.histogram("outpost_throttle_evaluation_seconds", "Time to evaluate the throttling cases of one request",
      [0.000001, 0.000005, 0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01]);
  }

  /** The built-in cases are active unless disabled (development mode disables them regardless). */
  get builtInsActive() { return this.d.config.enableDefaultThrottlers && !this.d.config.developmentMode; }

  builtInRows(): CaseRow[] {
    return this.builtInsActive ? BUILT_IN_CASES.map(rowOf) : [];
  }

  async start() {
    await this.reload();
    const url = this.d.config.redisUrl;
    if (url) {
      this.shared = new SharedStore(url, this.d.log, () => { void this.reload().catch((err) => this.d.log.error("throttling: reload failed", { err })); }, this.d.nodeId);
      await this.shared.start();
    }
    if (this.d.config.enableGlobalThrottlers && !url) this.d.log.warn("throttling: --enable-global-throttlers needs --redis-url; frequency limits stay per node");
  }

  /** Reads the cases again (after a change here, or news of one from another node). */
  async reload() {
    const builtIns = this.builtInsActive ? BUILT_IN_CASES.map((c) => ({ r: rowOf(c), builtIn: true, counts: c.counts })) : [];
    const stored = (await casesRepo.all(this.d.db)).map((r) => ({ r, builtIn: false, counts: "requests" as Counts }));
    const next: Record<ThrottlerName, CompiledCase[]> = { "HTTP Requests": [], "MQTT Connections": [], "MQTT Publishes": [] };
    for (const { r, builtIn, counts } of [...builtIns, ...stored]) {
      if (!(THROTTLERS as readonly string[]).includes(r.throttler_name)) continue;
      try { next[r.throttler_name as ThrottlerName].push(compileCase(r, builtIn, counts)); }
      catch (err) { this.d.log.warn("throttling: a stored case does not compile and is skipped", { case: r.case_name, err }); }
    }
    // lower priority number first; equal priorities keep a stable order by name
    for (const t of THROTTLERS) next[t].sort((a, b) => a.row.priority - b.row.priority || (a.row.case_name < b.row.case_name ? -1 : 1));
    this.index = { "HTTP Requests": indexCases(next["HTTP Requests"]), "MQTT Connections": indexCases(next["MQTT Connections"]), "MQTT Publishes": indexCases(next["MQTT Publishes"]) };
    this.cases = next;
  }

  /** After a case change on this node: reload here, and tell the other nodes. */
  async changed() {
    await this.reload();
    await this.shared?.announce();
  }

  /** True when the throttler has any case (callers skip building a subject otherwise). */
  active(t: ThrottlerName) { return this.cases[t].length > 0; }

  /** True when some case of the throttler can match this resource, whatever the system and
   *  consumer: a request no case can match is allowed without finding out who sends it (the
   *  built-in cases name only sign-in routes, so most requests end here). */
  covers(t: ThrottlerName, resource: string) { return this.index[t].all.candidates(resource).length > 0; }

  /** The first case whose filters match, and its bucket key. */
  find(t: ThrottlerName, s: Subject): { c: CompiledCase; key: string } | null {
    const ix = this.index[t];
    for (const c of (ix.bySystem.get(s.systemKey) ?? ix.generic).candidates(s.resource)) {
      const key = matchRest(c, s);
      if (key !== null) return { c, key };
    }
    return null;
  }

  evaluate(t: ThrottlerName, s: Subject): Decision | Promise<Decision> {
    if (this.cases[t].length === 0) return ALLOW;
    const t0 = performance.now();
    const hit = this.find(t, s);
    const d = hit ? this.apply(hit.c, hit.key, t0) : ALLOW;
    if (d instanceof Promise) return d.then((x) => this.done(t, s, t0, x));
    return this.done(t, s, t0, d);
  }

  private done(t: ThrottlerName, s: Subject, t0: number, d: Decision): Decision {
    this.latency.observe((performance.now() - t0) / 1000);
    if (!d.ok) {
      this.throttled.inc({ throttler: t });
      this.refused(t, s, d);
    }
    return d;
  }

  /** A refusal in the log (warn), rate-limited: throttler, case, system, address, resource. */
  private refused(t: ThrottlerName, s: Subject, d: Decision) {
    if (!this.d.log.enabled("warn")) return;
    const key = `${t}\u0000${d.caseName}\u0000${s.systemKey}\u0000${s.ip}`;
    const now = Date.now();
    const seen = this.refusals.get(key);
    if (seen && seen.until > now) { seen.skipped++; return; }
    if (this.refusals.size >= REFUSALS_KEPT) this.refusals.clear();
    this.refusals.set(key, { until: now + REFUSAL_LOG_MS, skipped: 0 });
    this.d.log.warn("throttled", {
      throttler: t, case: d.caseName, ...(s.systemKey ? { systemKey: s.systemKey } : {}), ip: s.ip, resource: s.resource,
      ...(d.retryAfterS !== undefined ? { retryAfterS: d.retryAfterS } : {}), ...(seen?.skipped ? { refusedSinceLastLine: seen.skipped } : {}),
    });
  }

  /** `now`: the monotonic clock (performance.now), which the buckets measure their refills by. */
  private apply(c: CompiledCase, key: string, now: number): Decision | Promise<Decision> {
    const { max_num: max, limiter_type: type, duration, case_name: caseName } = c.row;
    if (max === -1) return c.allowed;
    if (max === 0) return { ok: false, caseName };
    if (type === "concurrency") {
      const release = this.inFlight.acquire(key, max);
      return release ? { ok: true, caseName, release } : { ok: false, caseName };
    }
    const shared = this.d.config.enableGlobalThrottlers && this.shared?.available ? this.shared : null;
    if (c.lockout) return shared ? this.sharedLockout(shared, c, key, now) : this.localLockout(c, key, now);
    if (shared) {
      return shared.hit(key, max, duration ?? 1).then((ok) => (ok === null ? this.local(c, key, performance.now())
        : ok ? c.allowed : { ok, caseName, retryAfterS: duration ?? 1 }));
    }
    return this.local(c, key, now);
  }

  /** A frequency case on this node's token bucket. */
  private local(c: CompiledCase, key: string, now: number): Decision {
    const r = this.buckets.take(key, c.row.max_num, c.row.duration ?? 1, now);
    return r.ok ? c.allowed : { ok: false, caseName: c.row.case_name, retryAfterS: r.retryAfterS };
  }

  /** A sign-in case on this node's lockouts. */
  private localLockout(c: CompiledCase, key: string, now: number): Decision {
    const { max_num: max, duration, case_name: caseName } = c.row;
    const wait = this.lockouts.attempt(key, max, now);
    if (wait > 0) return { ok: false, caseName, retryAfterS: wait };
    return { ok: true, caseName, settle: (outcome) => this.lockedOut(c, key, this.lockouts.settle(key, outcome, max, (duration ?? 1) * 1000)) };
  }

  /** A sign-in case on the cluster's lockouts: attempts under way are bounded per node (the
   *  shared record learns of a failure when it is answered). Redis gone: this node's lockouts. */
  private async sharedLockout(shared: SharedStore, c: CompiledCase, key: string, now: number): Promise<Decision> {
    const { max_num: max, duration, case_name: caseName } = c.row;
    const ms = await shared.lockedFor(key);
    if (ms === null) return this.localLockout(c, key, now);
    if (ms > 0) return { ok: false, caseName, retryAfterS: Math.ceil(ms / 1000) };
    const release = this.inFlight.acquire(`lockout\u0000${key}`, max);
    if (!release) return { ok: false, caseName, retryAfterS: 1 };
    return {
      ok: true, caseName,
      settle: (outcome) => {
        release();
        if (outcome === "succeeded") void shared.succeeded(key);
        else if (outcome === "failed") void shared.failed(key, max, (duration ?? 1) * 1000).then((locked) => this.lockedOut(c, key, locked ?? 0));
      },
    };
  }

  /** Logs a lockout that a failure started (the key names the system, resource and account). */
  private lockedOut(c: CompiledCase, key: string, ms: number) {
    if (ms <= 0) return;
    const [system, , who] = key.slice(c.keyPrefix.length).split("\u0000");
    this.d.log.warn("sign-in locked out after repeated failures", { case: c.row.case_name, system, account: who?.split(",")[0], seconds: Math.ceil(ms / 1000) });
  }

  stop() { this.shared?.stop(); }
}
