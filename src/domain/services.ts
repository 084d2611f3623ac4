// Code services and libraries: definitions with versions,
// code meta, failed-run records and their retry. Running them is the code engine's job
// (src/code/engine.ts); this module owns what is stored.
import type { SignalPayloads } from "../core/signals.ts";
import { LEVEL } from "../auth/permissions.ts";
import type { Principal } from "../auth/principal.ts";
import { fail, notFound } from "../core/errors.ts";
import { newUuid, nowIso } from "../core/ids.ts";
import { parseQuery } from "../core/query.ts";
import { objectBody } from "../core/validate.ts";
import type { Executor } from "../store/db.ts";
import { type CodeLogRow, codeLogsRepo, type FailedRunRow, type LibraryRow, type ServiceRow, failedRunsRepo, librariesRepo, servicesRepo } from "../store/services.ts";
import type { DomainDeps } from "./deps.ts";
import type { Systems } from "./systems.ts";

/** ClearBlade's native library names that the runtime provides (docs/runtime.md): listing them
 *  in `dependencies` changes nothing, everything is there. */
export const PROVIDED_LIBRARIES = new Set(["clearblade", "clearblade_async", "log", "http", "crypto", "mqtt", "fetch"]);
/** ClearBlade's native libraries that Outpost does not provide, with the global each defines: a
 *  service listing one is accepted, and a run that touches that global gets an error naming it. */
export const MISSING_LIBRARIES = new Map([
  ["geo", "geo"], ["file_writer", "fileWriter"], ["jsutil", "util"], ["mailer", "mailer"], ["net_cb", "net"], ["oauth2_lib", "oauth2"],
  ["clearblade_ai", "ClearBladeAI"], ["grpc", "grpc"], ["websockets", "WebSocket"], ["streams", "streams"], ["node", "node"],
]);
/** Library names the platform owns: a service may list them in `dependencies` freely, and no
 *  system library may take them. */
export const NATIVE_LIBRARIES = new Set([...PROVIDED_LIBRARIES, ...MISSING_LIBRARIES.keys()]);
/** The system default a service's execution_timeout of 0 stands for, in seconds. */
export const DEFAULT_EXECUTION_TIMEOUT_S = 60;
const NAME_RE = /^[A-Za-z_$][A-Za-z0-9_$]{0,127}$/;
const MAX_CODE = 5 * 1024 * 1024;
/** Failed runs kept per service. */
export const FAILED_RUNS_KEPT = 1000;
/** Run logs kept per service (besides its log_ttl_minutes), and the most text one keeps. */
export const LOGS_KEPT = 100;
export const LOG_TEXT_MAX = 64 * 1024;

const logToWire = (l: CodeLogRow) => ({ id: l.id, log: l.log, service_execution_time: l.started_at, duration_ms: l.duration_ms, success: l.success === 1 });

export function parseDependencies(v: unknown): string[] {
  if (v === undefined || v === null || v === "") return [];
  const list = Array.isArray(v) ? v : typeof v === "string" ? v.split(",") : null;
  if (!list || !list.every((x) => typeof x === "string")) throw fail("INVALID_ARGUMENT", "dependencies must be a comma-separated string or an array of library names");
  return list.map((x) => x.trim()).filter(Boolean);
}

export function serviceToWire(s: ServiceRow) {
  return {
    name: s.name, code: s.code, params: JSON.parse(s.params) as string[], parameters: JSON.parse(s.params) as string[],
    dependencies: s.dependencies, run_user: s.run_user, execution_timeout: s.execution_timeout, concurrency: s.concurrency,
    logging_enabled: s.logging_enabled === 1, auto_restart: s.auto_restart === 1, auto_balance: s.auto_balance === 1,
    log_ttl_minutes: s.log_ttl_minutes, run_on_edge: s.run_on_edge === 1, run_on_platform: s.run_on_platform === 1,
    current_version: s.version, system_key: s.system_key, source_map: "", created_at: s.created_at, updated_at: s.updated_at,
  };
}

export function libraryToWire(l: LibraryRow) {
  return { system_key: l.system_key, name: l.name, description: l.description, version: l.version, code: l.code, dependencies: l.dependencies, api: l.api, visibility: l.visibility };
}

function failedToWire(r: FailedRunRow) {
  const params = JSON.parse(r.params) as unknown;
  return {
    id: r.id, service_name: r.service_name, params, error: r.error, user_id: r.user_id, user_type: r.user_type, trigger: r.trigger, created_at: r.created_at,
    Id: r.id, Service: r.service_name, Args: params, Error: { status_code: 500, error: r.error }, UserId: r.user_id, UserType: r.user_type, Datetime: r.created_at,
  };
}

/** Whose rights code runs with is a developer's choice: anyone else may name only itself (or ""
 *  for the default). `runAs` is a user id or email, as in a service's run_user. */
export function checkRunAs(p: Principal, runAs: string, what: string): void {
  if (p.kind === "developer" || runAs === "") return;
  if (p.kind === "user" && (runAs === p.id || runAs.toLowerCase() === p.email.toLowerCase())) return;
  throw fail("FORBIDDEN", `${what} runs as '${runAs}': only a developer may make code run with another user's rights`);
}

export type ServiceChange = SignalPayloads["code.changed"];

/** Why code does not compile, and where (1-based, as QuickJS counts). */
export interface CompileProblem { message: string; line?: number; column?: number }
/** Compiles code as the code engine loads it, without running it: null when it compiles. `file`
 *  names it in the engine's messages ("service calc.js"). Provided by the code engine
 *  (code/syntax.ts). */
export type CompileCheck = (code: string, file: string) => Promise<CompileProblem | null>;

/** A problem as text: "SyntaxError: expecting ';' (line 2, column 7)". */
export const problemText = (p: CompileProblem) => p.line ? `${p.message} (line ${p.line}, column ${p.column})` : p.message;

export class CodeServices {
  /** `compile`: code that does not compile is refused at upload with where it fails (none: not
   *  checked, as in tests of other parts). */
  constructor(private readonly d: DomainDeps, private readonly systems: Systems, private readonly compile?: CompileCheck) {}

  /** Says a service or library changed (the engine drops its warm sandboxes, on every node). */
  private changed(c: ServiceChange) { this.d.signals.emit("code.changed", c); }

  /** Refuses code that does not compile, naming the line and column. */
  private async compiles(kind: "service" | "library", name: string, code: string) {
    const p = this.compile && (await this.compile(code, `${kind} ${name}.js`));
    if (p) throw fail("INVALID_ARGUMENT", `${kind} '${name}' does not compile: ${problemText(p)}`, { error: p.message, line: p.line ?? null, column: p.column ?? null });
  }

  // ---- access ---------------------------------------------------------------------------------

  /** Managing code: the system's developer, or a user with the all-services level. */
  mayManage(p: Principal, systemKey: string, level: number) { return this.manage(p, systemKey, level); }
  private async manage(p: Principal, systemKey: string, level: number) {
    await this.systems.access(p, systemKey);
    if (p.kind !== "developer") await this.d.perms.require(p, { kind: "allservices" }, level, "code services");
  }

  async get(systemKey: string, name: string): Promise<ServiceRow | undefined> {
    return servicesRepo.get(this.d.db, systemKey, name);
  }

  async require(systemKey: string, name: string): Promise<ServiceRow> {
    const s = await servicesRepo.get(this.d.db, systemKey, name);
    if (!s) throw notFound("service", name, "Code");
    return s;
  }

  // ---- services -------------------------------------------------------------------------------

  private fields(p: Principal, body: Record<string, unknown>, base: ServiceRow): ServiceRow {
    const out = { ...base };
    for (const [k, v] of Object.entries(body)) {
      switch (k) {
        case "code":
          if (typeof v !== "string" || v.length > MAX_CODE) throw fail("INVALID_ARGUMENT", "code must be a string (at most 5 MB)");
          out.code = v; break;
        case "parameters": case "params":
          if (v !== null && (!Array.isArray(v) || !v.every((x) => typeof x === "string"))) throw fail("INVALID_ARGUMENT", `${k} must be an array of strings`);
          out.params = JSON.stringify(v ?? []); break;
        case "dependencies": out.dependencies = parseDependencies(v).join(","); break;
        case "run_user":
          if (typeof v !== "string") throw fail("INVALID_ARGUMENT", "run_user must be a user id (or empty)");
          out.run_user = v; break;
        case "execution_timeout":
          // 0: the system default (ClearBlade's CLI sends it for services that never set one)
          if (typeof v !== "number" || !Number.isInteger(v) || (v !== -1 && (v < 0 || v > 86_400))) throw fail("INVALID_ARGUMENT", "execution_timeout must be -1 (stream service), 0 (the default) or 1..86400 seconds");
          out.execution_timeout = v; break;
        case "concurrency":
          // -1, as some exported services carry, is no limit as 0 is
          if (typeof v !== "number" || !Number.isInteger(v) || v < -1 || v > 10_000) throw fail("INVALID_ARGUMENT", "concurrency must be 0 (no limit) or a positive integer");
          out.concurrency = Math.max(0, v); break;
        case "log_ttl_minutes":
          if (typeof v !== "number" || !Number.isInteger(v) || v < 0) throw fail("INVALID_ARGUMENT", "log_ttl_minutes must be a whole number");
          out.log_ttl_minutes = v; break;
        case "logging_enabled": case "auto_restart": case "auto_balance": case "run_on_edge": case "run_on_platform":
          if (typeof v !== "boolean" && v !== "true" && v !== "false") throw fail("INVALID_ARGUMENT", `${k} must be a boolean`);
          out[k] = v === true || v === "true" ? 1 : 0; break;
        case "name": case "systemID": case "system_key": case "systemKey": case "source_map": case "log_level": case "namespace":
          if (v !== null && typeof v !== "string") throw fail("INVALID_ARGUMENT", `${k} must be a string`);
          break; // identifiers or settings we accept and do not use
        case "engine_type":
          // ClearBlade's CLI sends a number (0), its console a string: one engine here either way
          if (v !== null && typeof v !== "string" && typeof v !== "number") throw fail("INVALID_ARGUMENT", `${k} must be a string or a number`);
          break;
        case "current_version":
          if (v !== null && typeof v !== "number") throw fail("INVALID_ARGUMENT", `${k} must be a number`);
          break;
        // what ClearBlade's exports carry beside a service's settings: the name of its code's
        // file, and the levels its roles hold on it (roles carry those here); accepted, not used
        case "source":
          if (v !== null && typeof v !== "string") throw fail("INVALID_ARGUMENT", `${k} must be a string (the code's file name)`);
          break;
        case "permissions":
          if (v !== null && (typeof v !== "object" || Array.isArray(v) || !Object.values(v as object).every((x) => typeof x === "number")))
            throw fail("INVALID_ARGUMENT", `${k} must be an object of role names and levels`);
          break;
        default: throw fail("INVALID_ARGUMENT", `body: unknown field '${k}'`);
      }
    }
    // also when run_user is not in the body: changing a service's code is acting with its rights
    checkRunAs(p, out.run_user, `service '${base.name}'`);
    return out;
  }

  /** Dependencies name libraries: a system library that does not exist yet is accepted (an
   *  exported system is imported services first, as ClearBlade accepts it too) and resolved when the
   *  service runs, which then fails naming it if it still does not exist. */
  private checkDependencies(deps: string) {
    for (const dep of parseDependencies(deps)) {
      if (!NAME_RE.test(dep)) throw fail("INVALID_ARGUMENT", `dependencies: '${dep}' is not a library name`);
    }
  }

  async create(p: Principal, systemKey: string, name: string, body: unknown) {
    await this.manage(p, systemKey, LEVEL.CREATE);
    if (!NAME_RE.test(name)) throw fail("INVALID_ARGUMENT", `invalid service name '${name}': it names the entry function, so letters, digits, _ and $ only`);
    const b = objectBody(body);
    if (typeof b.code !== "string") throw fail("INVALID_ARGUMENT", "code is required");
    const now = nowIso();
    const row = this.fields(p, b, {
      system_key: systemKey, name, code: "", params: "[]", dependencies: "", run_user: "", execution_timeout: 60, concurrency: 0,
      logging_enabled: 0, auto_restart: 0, auto_balance: 0, log_ttl_minutes: 10080, run_on_edge: 1, run_on_platform: 1, version: 1, created_at: now, updated_at: now,
    });
    await this.compiles("service", name, row.code);
    await this.d.db.tx(async (tx) => {
      if (await servicesRepo.get(tx, systemKey, name)) throw fail("ALREADY_EXISTS", `service '${name}' already exists`);
      this.checkDependencies(row.dependencies);
      await servicesRepo.insert(tx, row);
      await this.d.changes.record(tx, systemKey, "service", name, "upsert", row);
    });
    this.changed({ systemKey, name, kind: "service", deleted: false });
    return { created: true, name, uri: `/api/v/1/code/${systemKey}/${name}`, version_number: 1 };
  }

  async update(p: Principal, systemKey: string, name: string, body: unknown) {
    await this.manage(p, systemKey, LEVEL.UPDATE);
    const b = objectBody(body);
    // compiled before the transaction (it holds the database's writer on libSQL meanwhile)
    if (typeof b.code === "string" && b.code.length <= MAX_CODE) await this.compiles("service", name, b.code);
    const row = await this.d.db.tx(async (tx) => {
      const cur = await servicesRepo.get(tx, systemKey, name);
      if (!cur) throw notFound("service", name, "Code");
      const next = this.fields(p, b, cur);
      next.version = cur.version + 1;
      next.updated_at = nowIso();
      this.checkDependencies(next.dependencies);
      await servicesRepo.update(tx, next);
      await this.d.changes.record(tx, systemKey, "service", name, "upsert", next);
      return next;
    });
    this.changed({ systemKey, name, kind: "service", deleted: false });
    return { ...serviceToWire(row), uri: `/api/v/1/code/${systemKey}/${name}`, version_number: row.version };
  }

  async remove(p: Principal, systemKey: string, name: string) {
    await this.manage(p, systemKey, LEVEL.DELETE);
    await this.d.db.tx(async (tx) => {
      if (!(await servicesRepo.delete(tx, systemKey, name)).changes) throw notFound("service", name, "Code");
      await codeLogsRepo.deleteService(tx, systemKey, name);
      await this.d.changes.record(tx, systemKey, "service", name, "delete", null);
    });
    this.changed({ systemKey, name, kind: "service", deleted: true });
    return {};
  }

  async read(p: Principal, systemKey: string, name: string) {
    await this.manage(p, systemKey, LEVEL.READ);
    return serviceToWire(await this.require(systemKey, name));
  }

  async names(p: Principal, systemKey: string) {
    await this.manage(p, systemKey, LEVEL.READ);
    return { code: (await servicesRepo.list(this.d.db, systemKey)).map((s) => s.name) };
  }

  async codeMeta(p: Principal, systemKey: string) {
    await this.manage(p, systemKey, LEVEL.READ);
    return {
      code: (await servicesRepo.list(this.d.db, systemKey)).map((s) => ({
        name: s.name, system_key: s.system_key, uuid: `${s.system_key}:${s.name}`, version: s.version, version_id: `${s.name}@${s.version}`,
        euid: s.run_user, execution_timeout: s.execution_timeout, logging_enabled: s.logging_enabled === 1, concurrency: s.concurrency,
        auto_balance: s.auto_balance === 1, auto_balance_euid: "", auto_restart: s.auto_restart === 1, namespace: "",
      })),
    };
  }

  list(systemKey: string) { return servicesRepo.list(this.d.db, systemKey); }
  streamServices() { return servicesRepo.streamServices(this.d.db); }

  // ---- libraries ------------------------------------------------------------------------------

  async libraries(p: Principal, systemKey: string) {
    await this.manage(p, systemKey, LEVEL.READ);
    return (await librariesRepo.list(this.d.db, systemKey)).map(libraryToWire);
  }

  async library(p: Principal, systemKey: string, name: string) {
    await this.manage(p, systemKey, LEVEL.READ);
    const l = await librariesRepo.get(this.d.db, systemKey, name);
    if (!l) throw notFound("library", name, "Code");
    return libraryToWire(l);
  }

  private libraryFields(b: Record<string, unknown>, base: LibraryRow): LibraryRow {
    const out = { ...base };
    for (const [k, v] of Object.entries(b)) {
      switch (k) {
        case "code": if (typeof v !== "string" || v.length > MAX_CODE) throw fail("INVALID_ARGUMENT", "code must be a string"); out.code = v; break;
        case "dependencies": out.dependencies = parseDependencies(v).join(","); break;
        case "description": case "api": case "visibility":
          // exported libraries carry "api": null
          if (v !== null && typeof v !== "string") throw fail("INVALID_ARGUMENT", `${k} must be a string`);
          if (v !== null) out[k] = v;
          break;
        case "name": case "system_key": case "systemKey": case "version": break;
        default: throw fail("INVALID_ARGUMENT", `body: unknown field '${k}'`);
      }
    }
    return out;
  }

  async createLibrary(p: Principal, systemKey: string, name: string, body: unknown) {
    await this.manage(p, systemKey, LEVEL.CREATE);
    if (!NAME_RE.test(name)) throw fail("INVALID_ARGUMENT", `invalid library name '${name}'`);
    if (NATIVE_LIBRARIES.has(name)) throw fail("ALREADY_EXISTS", `'${name}' is a native library name`);
    const b = objectBody(body);
    if (typeof b.code !== "string") throw fail("INVALID_ARGUMENT", "code is required");
    const now = nowIso();
    const row = this.libraryFields(b, { system_key: systemKey, name, code: "", dependencies: "", description: "", api: "", visibility: "system", version: 1, created_at: now, updated_at: now });
    await this.compiles("library", name, row.code);
    await this.d.db.tx(async (tx) => {
      if (await librariesRepo.get(tx, systemKey, name)) throw fail("ALREADY_EXISTS", `library '${name}' already exists`);
      this.checkDependencies(row.dependencies);
      await librariesRepo.insert(tx, row);
      await librariesRepo.addVersion(tx, row);
      await this.d.changes.record(tx, systemKey, "library", name, "upsert", row);
    });
    this.changed({ systemKey, name, kind: "library", deleted: false });
    return libraryToWire(row);
  }

  async updateLibrary(p: Principal, systemKey: string, name: string, body: unknown) {
    await this.manage(p, systemKey, LEVEL.UPDATE);
    const b = objectBody(body);
    if (typeof b.code === "string" && b.code.length <= MAX_CODE) await this.compiles("library", name, b.code);
    const row = await this.d.db.tx(async (tx) => {
      const cur = await librariesRepo.get(tx, systemKey, name);
      if (!cur) throw notFound("library", name, "Code");
      const next = this.libraryFields(b, cur);
      next.version = cur.version + 1;
      next.updated_at = nowIso();
      this.checkDependencies(next.dependencies);
      await librariesRepo.update(tx, next);
      await librariesRepo.addVersion(tx, next);
      await this.d.changes.record(tx, systemKey, "library", name, "upsert", next);
      return next;
    });
    this.changed({ systemKey, name, kind: "library", deleted: false });
    return libraryToWire(row);
  }

  async removeLibrary(p: Principal, systemKey: string, name: string) {
    await this.manage(p, systemKey, LEVEL.DELETE);
    const users = (await servicesRepo.list(this.d.db, systemKey)).filter((s) => parseDependencies(s.dependencies).includes(name)).map((s) => s.name);
    if (users.length) throw fail("INVALID_ARGUMENT", `library '${name}' is used by ${users.map((u) => `'${u}'`).join(", ")}`);
    await this.d.db.tx(async (tx) => {
      if (!(await librariesRepo.delete(tx, systemKey, name)).changes) throw notFound("library", name, "Code");
      await this.d.changes.record(tx, systemKey, "library", name, "delete", null);
    });
    this.changed({ systemKey, name, kind: "library", deleted: true });
    return {};
  }

  async libraryHistory(p: Principal, systemKey: string, name: string, version?: string) {
    await this.manage(p, systemKey, LEVEL.READ);
    const versions = await librariesRepo.versions(this.d.db, systemKey, name);
    if (!versions.length) throw notFound("library", name, "Code");
    const wire = versions.map((v) => ({ system_key: systemKey, name, ...v }));
    if (version === undefined) return wire;
    const one = wire.find((v) => String(v.version) === version);
    if (!one) throw notFound(`version of library '${name}'`, version, "Code");
    return one;
  }

  /** A library and, before it, everything it depends on (each once, in load order). */
  async libraryChain(ex: Executor, systemKey: string, names: string[], seen = new Set<string>()): Promise<LibraryRow[]> {
    const out: LibraryRow[] = [];
    for (const n of names) {
      if (NATIVE_LIBRARIES.has(n) || seen.has(n)) continue;
      seen.add(n);
      const lib = await librariesRepo.get(ex, systemKey, n);
      if (!lib) throw fail("INVALID_ARGUMENT", `library '${n}' (a dependency) does not exist in this system`);
      out.push(...(await this.libraryChain(ex, systemKey, parseDependencies(lib.dependencies), seen)), lib);
    }
    return out;
  }

  // ---- logs ---------------------------------------------------------------------------------------

  /** Keeps a run's log (the engine calls this for services that keep theirs). */
  async recordLog(svc: ServiceRow, r: Omit<CodeLogRow, "system_key" | "service_name">) {
    const row: CodeLogRow = { ...r, system_key: svc.system_key, service_name: svc.name, log: r.log.length > LOG_TEXT_MAX ? `${r.log.slice(0, LOG_TEXT_MAX)}\n[cut at ${LOG_TEXT_MAX} characters]` : r.log };
    const since = new Date(Date.now() - svc.log_ttl_minutes * 60_000).toISOString();
    await this.d.db.tx(async (tx) => {
      await codeLogsRepo.insert(tx, row);
      await codeLogsRepo.trim(tx, svc.system_key, svc.name, LOGS_KEPT, since);
    });
  }

  async logs(p: Principal, systemKey: string, name: string) {
    await this.manage(p, systemKey, LEVEL.READ);
    await this.require(systemKey, name);
    return (await codeLogsRepo.list(this.d.db, systemKey, name, LOGS_KEPT)).map(logToWire);
  }

  async log(p: Principal, systemKey: string, name: string, id: string) {
    await this.manage(p, systemKey, LEVEL.READ);
    const l = await codeLogsRepo.get(this.d.db, systemKey, name, id);
    if (!l) throw notFound("log of run", id, "Code");
    return logToWire(l);
  }

  /** ClearBlade's answer: logging_enabled as a string. */
  async loggingActive(p: Principal, systemKey: string, name: string) {
    await this.manage(p, systemKey, LEVEL.READ);
    return { logging_enabled: (await this.require(systemKey, name)).logging_enabled === 1 ? "true" : "false" };
  }

  /** `{logging: true|"true"|false|"false"}` turns a service's kept logs on or off. */
  async setLogging(p: Principal, systemKey: string, name: string, body: unknown) {
    await this.manage(p, systemKey, LEVEL.UPDATE);
    const b = objectBody(body);
    const v = b.logging;
    if (typeof v !== "boolean" && v !== "true" && v !== "false") throw fail("INVALID_ARGUMENT", "logging must be true or false");
    await this.require(systemKey, name);
    // the engine reads the setting with the service (cached a few seconds): no sandbox need go
    await codeLogsRepo.setLogging(this.d.db, systemKey, name, v === true || v === "true");
    return { logging_enabled: v === true || v === "true" ? "true" : "false" };
  }

  /** `{log_level}`: accepted as ClearBlade's clients send it; every line is kept here. */
  async setLogLevel(p: Principal, systemKey: string, name: string, body: unknown) {
    await this.manage(p, systemKey, LEVEL.UPDATE);
    const b = objectBody(body);
    if (b.log_level !== undefined && typeof b.log_level !== "string" && typeof b.log_level !== "number") throw fail("INVALID_ARGUMENT", "log_level must be a string or a number");
    await this.require(systemKey, name);
    return {};
  }

  // ---- failed runs ----------------------------------------------------------------------------

  async recordFailure(r: Omit<FailedRunRow, "id" | "created_at">) {
    await this.d.db.tx(async (tx) => {
      await failedRunsRepo.insert(tx, { ...r, id: newUuid(), created_at: nowIso() });
      await failedRunsRepo.trim(tx, r.system_key, r.service_name, FAILED_RUNS_KEPT);
    });
  }

  async failed(p: Principal, systemKey: string, query: string | null) {
    await this.manage(p, systemKey, LEVEL.READ);
    const q = parseQuery(query ?? undefined);
    const rows = await failedRunsRepo.list(this.d.db, systemKey, q);
    return rows.map(failedToWire);
  }

  async failedRows(p: Principal, systemKey: string, ids: unknown): Promise<FailedRunRow[]> {
    await this.manage(p, systemKey, LEVEL.UPDATE);
    const list = Array.isArray(ids) ? ids : typeof ids === "string" ? [ids] : null;
    if (!list || !list.length || !list.every((x) => typeof x === "string")) throw fail("INVALID_ARGUMENT", "id must be a failed-run id or an array of them");
    return failedRunsRepo.byIds(this.d.db, systemKey, list as string[]);
  }

  async deleteFailed(p: Principal, systemKey: string, ids: unknown) {
    const rows = await this.failedRows(p, systemKey, ids);
    if (rows.length) await failedRunsRepo.delete(this.d.db, systemKey, rows.map((r) => r.id));
    return rows.map(failedToWire);
  }
}
