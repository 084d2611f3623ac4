// The code engine: runs services as their effective user in QuickJS sandboxes on the code workers
// (pool.ts), enforces concurrency limits, records failures, keeps stream services running, and
// answers the runtime API's calls through the domain layer, on this thread, with the rights of
// the run's principal (never anything a worker says).
import { availableParallelism } from "node:os";
import { LEVEL } from "../auth/permissions.ts";
import { type Principal, principalEmail, principalId } from "../auth/principal.ts";
import { TtlCache } from "../core/cache.ts";
import { randomUUID } from "node:crypto";
import { ApiError, fail, failFor, notFound } from "../core/errors.ts";
import { causeScope } from "../core/events.ts";
import { type Counter, type CounterSeries, type Histogram, type Metrics, OTHER, type TopLabels } from "../core/metrics.ts";
import { cacheRightsKey } from "../domain/cacheVersions.ts";
import { DEFAULT_EXECUTION_TIMEOUT_S, MISSING_LIBRARIES, parseDependencies, type ServiceChange } from "../domain/services.ts";
import { type RunAs, RUN_AS_DEVICE, RUN_AS_USER } from "../domain/triggers.ts";
import type { ServiceRow } from "../store/services.ts";
import { OPS } from "./library/index.ts";
import { type EngineDeps, type ExecOptions, type ExecResult, type HostContext, RunState } from "./library/types.ts";

export type { EngineDeps, ExecOptions, ExecResult };
export { isQueueFull } from "./pool.ts";
import { type Instance, instanceToWire, Instances } from "./instances.ts";
import { defaultWorkers, type PoolOutcome, WorkerPool } from "./pool.ts";
import { platformHost } from "./ownApi.ts";
import { needsSuspending, outcomeValue, paramsJson, type SandboxSource } from "./sandbox.ts";

const SERVICE_CACHE_MS = 5_000;
const SOURCE_CACHE_MS = 600_000;
const RESTART_DELAY_MS = 1_000;

/** A service's source as its sandboxes load it: of its version, with the system's libraries of
 *  one epoch (together, the version string workers compare). */
interface Source { v: number; epoch: number; version: string; source: SandboxSource }

export class CodeEngine {
  readonly pool: WorkerPool;
  private readonly sources = new TtlCache<string, Source>(SOURCE_CACHE_MS, 5_000);
  /** the caller part of req as JSON, by principal (a cached token keeps its principal object) */
  private readonly contexts = new WeakMap<Principal, { systemKey: string; secret: string; userToken: string; isLogging: boolean; json: string }>();
  /** cacheRightsKey by principal (see cacheRights) */
  private readonly rightsKeys = new WeakMap<Principal, { systemKey: string; key: string | undefined }>();
  /** runs of each service under way, for its concurrency limit */
  private readonly inFlight = new Map<string, number>();
  private readonly waiting = new Map<string, (() => void)[]>();
  private readonly rows = new TtlCache<string, ServiceRow>(SERVICE_CACHE_MS, 5_000);
  /** library versions per system, part of a pool's version: a library change retires sandboxes */
  private libraryEpoch = new Map<string, number>();
  private readonly streams = new Map<string, { stop(): void }>();
  /** the runs under way, and the last that ended (listed and stopped through /codeadmin/v/3/running) */
  readonly instances = new Instances();
  /** stream services stopped by request: not restarted until they change or the node restarts */
  private readonly held = new Set<string>();
  private stopped = false;
  /** on /metrics: runs by outcome (success, error: resp.error, failed: threw, timed out, could not run) and their durations */
  private readonly runs?: Counter;
  /** its series by outcome, kept: a run counts without building a series key */
  private readonly runsBy: Record<string, CounterSeries> = {};
  private readonly runSeconds?: Histogram;
  /** and per service, with --metrics-system-labels */
  private readonly perService: ServiceRunMetrics | null;

  constructor(private readonly e: EngineDeps) {
    e.d.signals.on("code.changed", (c) => this.changed(c));
    const c = e.d.config;
    this.pool = new WorkerPool({
      workers: c.codeWorkers ?? defaultWorkers(availableParallelism(), c.codeMemoryMb, c.codeMemoryLimitMb), memoryMb: c.codeMemoryMb, sandboxMemoryMb: c.codeMemoryLimitMb,
      sliceMs: c.codeSliceMs, maxShare: c.codeMaxShare, nice: c.codeNice, queueMax: c.codeQueue, log: e.d.log, cacheVersions: e.caches.versions?.buffer,
      cacheWrites: (m) => e.caches.applyPosted(m),
      restarts: e.metrics?.counter("outpost_code_worker_restarts_total", "Code workers replaced, by reason: memory (to give memory back), stuck (in code past its deadline), failed"),
    });
    this.runs = e.metrics?.counter("outpost_code_runs_total", "Service runs by outcome: success, error (resp.error), failed (threw, timed out or could not run)");
    this.runSeconds = e.metrics?.histogram("outpost_code_run_seconds", "Service run duration, queueing included", [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60]);
    this.perService = e.metrics && c.metricsSystemLabels > 0 ? new ServiceRunMetrics(e.metrics, e.metrics.topLabels(c.metricsSystemLabels)) : null;
  }

  private changed(c: ServiceChange) {
    if (c.kind === "library") this.libraryEpoch.set(c.systemKey, (this.libraryEpoch.get(c.systemKey) ?? 0) + 1);
    const key = `${c.systemKey}/${c.name}`;
    this.rows.delete(key);
    const gone = c.kind === "library" ? `${c.systemKey}/` : key;
    this.sources.deleteWhere((_, k) => k === gone || (gone.endsWith("/") && k.startsWith(gone)));
    this.pool.forget(gone);
    if (c.kind === "service") {
      this.streams.get(key)?.stop();
      this.held.delete(key);
      for (const i of this.instances.list(c.systemKey, c.name)) if (i.stream) i.stop(c.deleted ? "the service was deleted" : "the service changed");
      if (!c.deleted) this.maybeStartStream(c.systemKey, c.name);
    }
  }

  private async service(systemKey: string, name: string): Promise<ServiceRow> {
    const key = `${systemKey}/${name}`;
    return this.rows.get(key) ?? (await this.rows.getOr(key, () => this.e.services.get(systemKey, name))) ?? (() => { throw fail("NOT_FOUND", `service '${name}' does not exist`); })();
  }

  // ---- sources ------------------------------------------------------------------------------

  /** The service's source at its current version, made once per version (workers keep it too). */
  private async source(key: string, s: ServiceRow): Promise<Source> {
    const epoch = this.libraryEpoch.get(s.system_key) ?? 0;
    const hit = this.sources.get(key);
    if (hit && hit.v === s.version && hit.epoch === epoch) return hit;
    const libs = await this.e.services.libraryChain(this.e.d.db, s.system_key, parseDependencies(s.dependencies));
    const system = await this.e.systems.get(s.system_key);
    return this.sources.set(key, {
      v: s.version, epoch, version: `${s.version}.${epoch}`,
      source: {
        libraries: [...missingNatives(parseDependencies(s.dependencies)), ...libs.map((l) => ({ name: l.name, code: l.code }))],
        service: { name: s.name, code: s.code },
        suspends: needsSuspending({ libraries: libs, service: s }),
        meta: {
          is_edge: this.e.d.config.mode === "edge", edge_id: this.e.d.config.edgeName ?? "", platform_url: platformHost(this.e.d.config),
          node_id: this.e.d.config.mode, service_id: key, service_name: s.name, system_key: s.system_key, system_secret: system.system_secret,
          code_versions: { [s.name]: s.version },
        },
      },
    });
  }

  // ---- concurrency ----------------------------------------------------------------------------

  private async acquire(key: string, limit: number, timeoutMs: number) {
    if (limit <= 0) return;
    const n = this.inFlight.get(key) ?? 0;
    if (n < limit) { this.inFlight.set(key, n + 1); return; }
    // wait for a slot, at most as long as the run itself may take
    await new Promise<void>((resolve, reject) => {
      const q = this.waiting.get(key) ?? [];
      this.waiting.set(key, q);
      const timer = timeoutMs > 0 ? setTimeout(() => { q.splice(q.indexOf(go), 1); reject(fail("INVALID_ARGUMENT", `service is at its concurrency limit (${limit})`)); }, timeoutMs) : null;
      const go = () => { if (timer) clearTimeout(timer); resolve(); };
      q.push(go);
    });
  }

  private release(key: string, limit: number) {
    if (limit <= 0) return;
    const next = this.waiting.get(key)?.shift();
    if (next) next(); // the slot passes on
    else this.inFlight.set(key, Math.max(0, (this.inFlight.get(key) ?? 1) - 1));
  }

  // ---- running --------------------------------------------------------------------------------

  /** The principal a trigger or timer runs its service as (see RunAs): the system's developer,
   *  or the user or device that defined it, which must still exist. */
  async runner(systemKey: string, ownerId: string, r: RunAs): Promise<Principal> {
    if (r.user_type === RUN_AS_USER) return this.e.users.principalFor(systemKey, r.user_id);
    if (r.user_type === RUN_AS_DEVICE) {
      const p = await this.e.devices.principalFor(systemKey, r.user_id);
      if (!p) throw fail("INVALID_ARGUMENT", `device '${r.user_id}' it runs as does not exist or is disabled`);
      return p;
    }
    return { kind: "developer", id: ownerId, email: "", admin: false, tokenHash: "" };
  }

  /** Runs a service for a caller. */
  async execute(p: Principal, systemKey: string, name: string, params: unknown, opts: ExecOptions = {}): Promise<ExecResult> {
    // the hot path answers from caches without waiting; a miss takes the ordinary way
    const key = `${systemKey}/${name}`;
    const system = this.e.systems.accessNow(p, systemKey) ?? (await this.e.systems.access(p, systemKey));
    const svc = this.rows.get(key) ?? (await this.service(systemKey, name));
    const res = { kind: "service" as const, name };
    if (!opts.internal && !this.e.d.perms.checkedNow(p, res, LEVEL.READ, `service '${name}' (running a service needs read)`))
      await this.e.d.perms.require(p, res, LEVEL.READ, `service '${name}' (running a service needs read)`);
    const here = this.e.d.config.mode === "edge" ? svc.run_on_edge : svc.run_on_platform;
    if (!here) throw fail("INVALID_ARGUMENT", `service '${name}' is not set to run on the ${this.e.d.config.mode}`);
    if (params !== undefined && params !== null && (typeof params !== "object" || Array.isArray(params))) throw fail("INVALID_ARGUMENT", "the body (the service's parameters) must be a JSON object");
    const effective = svc.run_user ? await this.e.users.principalFor(systemKey, svc.run_user) : p;
    const timeoutMs = svc.execution_timeout < 0 ? 0 : (svc.execution_timeout || DEFAULT_EXECUTION_TIMEOUT_S) * 1000;
    if (svc.concurrency > 0) await this.acquire(key, svc.concurrency, timeoutMs);
    const run = new RunState();
    const stream = svc.execution_timeout < 0;
    const limit = this.e.d.config.codeStreamsMax;
    if (stream && this.instances.streamsOf(systemKey) >= limit) {
      this.release(key, svc.concurrency);
      throw failFor(5, "THROTTLED", `this system runs ${limit} stream services already, its most at once (--code-streams-max): stop one first (/codeadmin/v/3/running)`);
    }
    let outcome: PoolOutcome;
    let id = -1;
    const instance: Instance = {
      id: randomUUID(), systemKey, service: name, startedAt: Date.now(), userId: principalId(p), stream,
      stop: (why) => { if (id >= 0) this.pool.abort(id, why); },
    };
    this.instances.add(instance);
    const t0 = performance.now();
    try {
      let src: Source;
      const hit = this.sources.get(key);
      if (hit && hit.v === svc.version && hit.epoch === (this.libraryEpoch.get(systemKey) ?? 0)) src = hit;
      else {
        try { src = await this.source(key, svc); }
        catch (e) { return await this.result(svc, p, params, opts, { kind: "failed", error: e instanceof ApiError ? e.message : "could not load the service" }); }
      }
      const scope = { depth: (opts.depth ?? 0) + (opts.trigger ? 1 : 0) };
      const depth = opts.depth ?? 0;
      const submitted = this.pool.submit({
        system: systemKey, key, version: src.version, source: src.source, entry: name,
        context: this.contextJson(p, systemKey, system.system_secret, opts.userToken ?? "", wantsLogs(svc, opts)),
        params: paramsJson(params), timeoutMs, logs: wantsLogs(svc, opts), instanceId: instance.id,
        host: (op, args) => this.answer(effective, systemKey, op, args, scope, depth, run),
        ...(this.e.caches.versions ? { cacheRights: this.cacheRights(effective, systemKey) } : {}),
      });
      id = submitted.id;
      outcome = await submitted.done;
      const seconds = (performance.now() - t0) / 1000;
      if (this.runs) (this.runsBy[outcome.kind] ??= this.runs.series({ outcome: outcome.kind })).n++;
      this.runSeconds?.observe(seconds);
      this.perService?.count(systemKey, name, outcome.kind, seconds);
      this.instances.ended(instance, params, outcome, p.kind);
      if (svc.logging_enabled === 1) this.keepLog(svc, instance, outcome, t0);
    } finally {
      this.instances.remove(instance);
      this.release(key, svc.concurrency);
      // what the run opened (subscriptions, clients, locks) ends with it
      void run.close((what, err) => this.e.d.log.warn("could not close what a service run opened", { what, err }));
    }
    return this.result(svc, p, params, opts, outcome);
  }

  /** Keeps the log of a run of a service that keeps its logs (off the caller's way). */
  private keepLog(svc: ServiceRow, i: Instance, o: PoolOutcome, t0: number) {
    const lines = o.logs ?? [];
    if (o.kind === "failed") lines.push(`run failed: ${o.error}`);
    void this.e.services.recordLog(svc, { id: i.id, started_at: new Date(i.startedAt).toISOString(), duration_ms: Math.round(performance.now() - t0), success: o.kind === "success" ? 1 : 0, log: lines.join("\n") })
      .catch((err) => this.e.d.log.warn("could not keep a service run's log", { service: svc.name, err }));
  }

  // ---- running instances ----------------------------------------------------------------------

  /** The runs of a system (or one of its services) under way on this node. */
  async running(p: Principal, systemKey: string, service?: string) {
    await this.e.services.mayManage(p, systemKey, LEVEL.READ);
    const out: Record<string, ReturnType<typeof instanceToWire>> = {};
    for (const i of this.instances.list(systemKey, service)) out[i.id] = instanceToWire(i);
    return out;
  }

  /** Stops a run; a stream service stopped so is not restarted until it changes or the node
   *  restarts. */
  async stopInstance(p: Principal, systemKey: string, id: unknown) {
    await this.e.services.mayManage(p, systemKey, LEVEL.UPDATE);
    if (typeof id !== "string" || !id) throw fail("INVALID_ARGUMENT", "id: the instance to stop is required");
    const i = this.instances.get(id);
    if (!i || i.systemKey !== systemKey) throw notFound("running instance", id, "Code");
    if (i.stream) {
      const key = `${systemKey}/${i.service}`;
      this.held.add(key);
      this.streams.get(key)?.stop();
    }
    i.stop("stopped by request");
    return {};
  }

  /** The last runs of a system that ended on this node. */
  async completed(p: Principal, systemKey: string) {
    await this.e.services.mayManage(p, systemKey, LEVEL.READ);
    return this.instances.completedOf(systemKey);
  }

  /** cacheRightsKey, made once per caller (it sorts the roles): a cached token keeps its principal
   *  object, and a change of roles makes a new one */
  private cacheRights(p: Principal, systemKey: string): string | undefined {
    const hit = this.rightsKeys.get(p);
    if (hit && hit.systemKey === systemKey) return hit.key;
    const key = cacheRightsKey(p, systemKey);
    this.rightsKeys.set(p, { systemKey, key });
    return key;
  }

  /** The caller's part of req as JSON, made once per caller: it is the same run after run. */
  private contextJson(p: Principal, systemKey: string, secret: string, userToken: string, isLogging: boolean): string {
    const hit = this.contexts.get(p);
    if (hit && hit.systemKey === systemKey && hit.secret === secret && hit.userToken === userToken && hit.isLogging === isLogging) return hit.json;
    const userEmail = principalEmail(p), userid = principalId(p);
    const json = JSON.stringify({ systemKey, systemSecret: secret, userEmail, userid, userToken, isLogging, caller: { userid, userEmail, userToken } });
    this.contexts.set(p, { systemKey, secret, userToken, isLogging, json });
    return json;
  }

  private result(svc: ServiceRow, p: Principal, params: unknown, opts: ExecOptions, o: PoolOutcome): ExecResult | Promise<ExecResult> {
    if (o.kind === "failed") return this.failed(svc, p, params, opts, o);
    // a caller that answers with JSON takes the results as the run gave them: never parsed here
    const r: ExecResult = opts.resultsJson
      ? { success: o.kind === "success", results: undefined, resultsJson: o.raw[0] === "t" ? JSON.stringify(o.raw.slice(1)) : o.raw.slice(1), status: o.status, headers: o.headers }
      : { success: o.kind === "success", results: outcomeValue(o.raw), status: o.status, headers: o.headers };
    if (wantsLogs(svc, opts)) r.logs = o.logs ? o.logs.join("\n") : "";
    return r;
  }

  /** A failed run: recorded (unless it is a retry), logged, answered with the error. A run whose
   *  worker had to be terminated answers 504. */
  private async failed(svc: ServiceRow, p: Principal, params: unknown, opts: ExecOptions, o: PoolOutcome & { kind: "failed" }): Promise<ExecResult> {
    const withLogs = wantsLogs(svc, opts);
    if (!opts.retry) await this.e.services.recordFailure({
      system_key: svc.system_key, service_name: svc.name, params: JSON.stringify(params ?? {}), error: o.error,
      user_id: principalId(p), user_type: p.kind, trigger: opts.trigger ?? "",
    }).catch((err) => this.e.d.log.error("could not record a failed run", { err }));
    this.e.d.log.warn("service run failed", { systemKey: svc.system_key, service: svc.name, error: o.error });
    if (o.killed) throw fail("SERVICE_TIMED_OUT", `service '${svc.name}': ${o.error}`);
    return { success: false, results: o.error, failed: true, ...(o.timedOut ? { timedOut: true } : {}), ...(withLogs ? { logs: o.logs ? o.logs.join("\n") : "" } : {}) };
  }

  /** Runs of a system the pool takes now before refusing them as its queue is full. */
  queueRoom(systemKey: string): number { return this.pool.room(systemKey); }

  /** A run that never ran (a trigger's that could not wait for room): recorded as a failed run,
   *  which can be retried like any other. */
  async recordUnrun(p: Principal, systemKey: string, service: string, params: unknown, trigger: string, why: string) {
    await this.e.services.recordFailure({
      system_key: systemKey, service_name: service, params: JSON.stringify(params ?? {}), error: why, user_id: principalId(p), user_type: p.kind, trigger,
    });
  }

  /** Runs failed runs again with their parameters, as the caller; a success removes the record. */
  async retry(p: Principal, systemKey: string, ids: unknown): Promise<string[]> {
    const rows = await this.e.services.failedRows(p, systemKey, ids);
    const out: string[] = [];
    for (const r of rows) {
      const res = await this.execute(p, systemKey, r.service_name, JSON.parse(r.params), { internal: true, retry: true });
      if (!res.failed && res.success) await this.e.services.deleteFailed(p, systemKey, [r.id]);
      out.push(JSON.stringify({ id: r.id, success: res.success, results: res.results }));
    }
    return out;
  }

  // ---- the runtime API ------------------------------------------------------------------------

  /** A run's runtime-API call from its worker, answered as JSON text: {ok, data} or {ok, error}.
   *  The operation runs as the effective user, through the same domain calls as the HTTP API. */
  private answer(p: Principal, systemKey: string, op: string, argsJson: string, scope: { depth: number }, depth: number, run: RunState): Promise<string> {
    let args: unknown;
    try { args = JSON.parse(argsJson); } catch { args = null; }
    const fn = OPS.get(op);
    const ctx: HostContext = { p, systemKey, depth, run, e: this.e, execute: (...a) => this.execute(...a) };
    return causeScope.run(scope, async () => {
      if (!fn) throw fail("INVALID_ARGUMENT", `unknown runtime operation '${op}'`);
      return fn(ctx, (args ?? {}) as Record<string, any>);
    }).then(
      (data) => JSON.stringify({ ok: true, data: data === undefined ? null : data }),
      (err) => JSON.stringify({ ok: false, error: errorInfo(err) }),
    );
  }

  // ---- stream services (execution_timeout -1) -------------------------------------------------

  /** Resolves once the code workers can take runs (they load and warm up in the background). */
  ready(): Promise<void> { return this.pool.ready(); }

  /** Starts the code workers if none runs yet, and resolves once they can take runs. */
  warm(): Promise<void> { return this.pool.warm(); }

  /** Starts the code workers, then every stream service with auto_restart (at start-up). */
  async start() {
    this.stopped = false;
    this.pool.start();
    for (const s of await this.e.services.streamServices()) this.maybeStartStream(s.system_key, s.name);
  }

  /** Keeps a stream service with auto_restart running: started now, again after it ends. Its entry
   *  is taken before anything is awaited, so two calls at once start one loop. */
  private maybeStartStream(systemKey: string, name: string) {
    const key = `${systemKey}/${name}`;
    if (this.stopped || this.streams.has(key) || this.held.has(key)) return;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | null = null;
    const entry = { stop: () => { stopped = true; if (timer) clearTimeout(timer); if (this.streams.get(key) === entry) this.streams.delete(key); for (const i of this.instances.list(systemKey, name)) if (i.stream) i.stop("the stream service was stopped"); } };
    this.streams.set(key, entry);
    const loop = async () => {
      while (!stopped && !this.stopped) {
        const svc = await this.e.services.get(systemKey, name);
        // a stream service set not to run here is not started here (it failed every second)
        const here = svc && (this.e.d.config.mode === "edge" ? svc.run_on_edge : svc.run_on_platform);
        const system = svc && here && svc.execution_timeout === -1 && svc.auto_restart ? await this.e.systems.find(systemKey) : undefined;
        if (!system || stopped) break;
        const owner: Principal = { kind: "developer", id: system.owner_id, email: "", admin: false, tokenHash: "" };
        await this.execute(owner, systemKey, name, {}, { internal: true }).catch((err) => this.e.d.log.warn("stream service failed", { service: name, err }));
        if (stopped || this.stopped) break;
        await new Promise<void>((r) => (timer = setTimeout(r, RESTART_DELAY_MS)));
      }
      if (this.streams.get(key) === entry) this.streams.delete(key);
    };
    void loop();
  }

  /** Drops every warm sandbox of a system (its code changed underneath, through sync). */
  forgetSystem(systemKey: string) {
    this.libraryEpoch.set(systemKey, (this.libraryEpoch.get(systemKey) ?? 0) + 1);
    this.rows.deleteWhere((r) => r.system_key === systemKey);
    this.sources.deleteWhere((_, k) => k.startsWith(`${systemKey}/`));
    this.pool.forget(`${systemKey}/`);
  }

  async stop() {
    this.stopped = true;
    for (const s of [...this.streams.values()]) s.stop();
    await this.pool.stop();
  }
}

/** A run's logs are kept and answered when the caller asks (Logging-enabled) or the service logs. */
const wantsLogs = (svc: ServiceRow, opts: ExecOptions) => !!opts.logging || svc.logging_enabled === 1;

function errorInfo(err: unknown): unknown {
  if (err && typeof err === "object" && "detail" in err && "kind" in err) {
    const e = err as { detail: string; kind: { code: number; status: number } };
    return { detail: e.detail, code: e.kind.code, status: e.kind.status };
  }
  return { detail: err instanceof Error ? err.message : String(err) };
}

/** Stand-ins for the native libraries a service lists that Outpost does not provide: the global
 *  each would define throws, naming the library, when the code first touches it. */
function missingNatives(deps: string[]): { name: string; code: string }[] {
  const missing = deps.filter((d) => MISSING_LIBRARIES.has(d));
  if (!missing.length) return [];
  const code = missing.map((lib) => {
    const global = MISSING_LIBRARIES.get(lib)!;
    const why = JSON.stringify(`the native library '${lib}' is not available in Outpost (docs/runtime.md lists what is)`);
    return `Object.defineProperty(globalThis, ${JSON.stringify(global)}, { configurable: true, get: function () { throw new Error(${why}); } });`;
  }).join("\n");
  return [{ name: "native libraries not provided", code }];
}

/** Runs and their time per service, for the services --metrics-system-labels gives series (the
 *  busiest), the others together as "other". */
class ServiceRunMetrics {
  private readonly runs: Counter;
  private readonly seconds: Counter;
  constructor(metrics: Metrics, private readonly labels: TopLabels) {
    this.runs = metrics.counter("outpost_service_runs_total", "Service runs per service by outcome (success, error, failed), for the busiest services (--metrics-system-labels), the rest as other");
    this.seconds = metrics.counter("outpost_service_run_seconds_total", "Time spent in runs per service (seconds), for the same services");
  }
  count(systemKey: string, service: string, outcome: string, seconds: number) {
    const l = this.labels.of(`${systemKey}/${service}`) === OTHER ? { system_key: OTHER, service: OTHER } : { system_key: systemKey, service };
    this.runs.inc({ ...l, outcome });
    this.seconds.inc(l, seconds);
  }
}
