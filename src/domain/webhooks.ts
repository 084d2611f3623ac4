// Webhooks: definitions per system, and invocation: match the extra path, authenticate by the
// webhook's method, run its service with a request object (method, headers, query, body, extra
// path), and turn the service's answer into the HTTP answer.
import type { Principal } from "../auth/principal.ts";
import type { Tokens } from "../auth/tokens.ts";
import { TtlCache } from "../core/cache.ts";
import { ApiError, fail, notFound } from "../core/errors.ts";
import { newUuid, nowIso } from "../core/ids.ts";
import { checkJsonText, knownFields, objectBody } from "../core/validate.ts";
import { type WebhookRow, webhooksRepo } from "../store/webhooks.ts";
import type { DomainDeps } from "./deps.ts";
import type { CodeServices } from "./services.ts";
import type { Systems } from "./systems.ts";
import type { Users } from "./users.ts";

const WEBHOOK_FIELDS = new Set(["name", "description", "service_name", "path", "auth_method", "id", "system_key", "system_secret"]);

/** What a webhook needs of the code engine (src/code/engine.ts), as messaging has its Broker:
 *  run a service as the caller and hand back its answer. The domain does not import the engine. */
export interface ServiceRunner {
  execute(p: Principal, systemKey: string, name: string, params: unknown, opts: { userToken?: string; logging?: boolean }): Promise<ServiceAnswer>;
}

/** A run's answer, as far as a webhook reads it. */
export interface ServiceAnswer {
  success: boolean;
  results: unknown;
  status?: number;
  headers?: Record<string, string>;
  /** the run itself failed (exception, timeout, limits) */
  failed?: boolean;
  timedOut?: boolean;
}

export const AUTH_METHODS = ["platform_auth", "http_basic_auth", "payload_auth", "no_auth"] as const;
export type AuthMethod = (typeof AUTH_METHODS)[number];
/** The spellings existing clients send, stored under one name each. */
const AUTH_ALIASES = new Map<string, AuthMethod>([["cb_auth", "platform_auth"], ["clearblade_auth", "platform_auth"], ["http_auth", "http_basic_auth"]]);

const NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const WILDCARD_RE = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/;
const CACHE_MS = 5_000;

export function canonicalAuthMethod(v: unknown): AuthMethod {
  if (typeof v !== "string") throw fail("INVALID_ARGUMENT", `auth_method must be one of ${AUTH_METHODS.join(", ")}`);
  const m = AUTH_ALIASES.get(v.toLowerCase()) ?? (AUTH_METHODS as readonly string[]).find((x) => x === v.toLowerCase());
  if (!m) throw fail("INVALID_ARGUMENT", `auth_method '${v}' is not one of ${AUTH_METHODS.join(", ")} (or cb_auth, clearblade_auth, http_auth)`);
  return m as AuthMethod;
}

/** "" or "/a/{b}/c": several levels, whole elements in {} as wildcards, each wildcard named once. */
export function normalisePath(v: unknown): string {
  if (v === undefined || v === null || v === "" || v === "/") return "";
  if (typeof v !== "string") throw fail("INVALID_ARGUMENT", "path must be a string like /states/{stateCode}/devices");
  const parts = v.replace(/^\/+/, "").replace(/\/+$/, "").split("/");
  const names = new Set<string>();
  for (const part of parts) {
    if (!part) throw fail("INVALID_ARGUMENT", `path '${v}' has an empty element`);
    const w = WILDCARD_RE.exec(part);
    if (w) {
      if (names.has(w[1]!)) throw fail("INVALID_ARGUMENT", `path '${v}' names the wildcard '${w[1]}' twice`);
      names.add(w[1]!);
    } else if (/[{}?#]/.test(part)) throw fail("INVALID_ARGUMENT", `path element '${part}' must be plain text or a whole {name} wildcard`);
  }
  return "/" + parts.join("/");
}

/** The placeholder values of `rest` (the request path after the webhook's name), or null when it does not match. */
export function matchPath(path: string, rest: string[]): Record<string, string> | null {
  const want = path ? path.slice(1).split("/") : [];
  if (want.length !== rest.length) return null;
  const out: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = WILDCARD_RE.exec(want[i]!);
    if (w) { if (!rest[i]) return null; out[w[1]!] = rest[i]!; }
    else if (want[i] !== rest[i]) return null;
  }
  return out;
}

/** "MyHeader1" → "Myheader1": header names reach the service in this one spelling. */
export const headerName = (n: string) => (n ? n[0]!.toUpperCase() + n.slice(1).toLowerCase() : n);

/** One invocation as the HTTP layer read it. */
export interface WebhookCall {
  method: string;
  /** the full request path */
  uri: string;
  /** decoded path elements after the webhook's name */
  rest: string[];
  query: [string, string][];
  headers: [string, string][];
  body: string;
  logging: boolean;
}

export interface WebhookReply { status: number; headers: Record<string, string>; body: string }

export class Webhooks {
  private readonly cache = new TtlCache<string, WebhookRow | null>(CACHE_MS, 10_000);

  constructor(
    private readonly d: DomainDeps, private readonly systems: Systems, private readonly services: CodeServices,
    private readonly users: Users, private readonly tokens: Tokens, private readonly engine: ServiceRunner,
  ) {}

  private toWire(w: WebhookRow, secret: string) {
    return { id: w.id, name: w.name, description: w.description, auth_method: w.auth_method, service_name: w.service_name, system_key: w.system_key, system_secret: secret, path: w.path };
  }

  private async parse(systemKey: string, name: string, body: unknown, base?: WebhookRow): Promise<WebhookRow> {
    const b = objectBody(body);
    knownFields(b, WEBHOOK_FIELDS);
    if (b.name !== undefined && b.name !== name) throw fail("INVALID_ARGUMENT", `body: name '${String(b.name)}' differs from the name in the path ('${name}'); a webhook cannot be renamed`);
    const service = b.service_name ?? base?.service_name;
    if (typeof service !== "string" || !service) throw fail("INVALID_ARGUMENT", "service_name is required");
    if (b.service_name !== undefined && !(await this.services.get(systemKey, service))) throw fail("INVALID_ARGUMENT", `service_name: service '${service}' does not exist`);
    const description = b.description ?? base?.description ?? "";
    if (typeof description !== "string") throw fail("INVALID_ARGUMENT", "description must be a string");
    const now = nowIso();
    return {
      system_key: systemKey, name, id: base?.id ?? newUuid(), description, service_name: service,
      path: b.path === undefined ? base?.path ?? "" : normalisePath(b.path),
      auth_method: b.auth_method === undefined ? base?.auth_method ?? "platform_auth" : canonicalAuthMethod(b.auth_method),
      created_at: base?.created_at ?? now, updated_at: now,
    };
  }

  private changed(systemKey: string, name: string) { this.cache.delete(`${systemKey}/${name}`); }

  /** Drops what this node remembers of a system's webhooks (an edge applied synced definitions). */
  forgetSystem(systemKey: string) { this.cache.deleteWhere((_, k) => k.startsWith(`${systemKey}/`)); }

  async list(p: Principal, systemKey: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    return (await webhooksRepo.list(this.d.db, s.system_key)).map((w) => this.toWire(w, s.system_secret));
  }

  async get(p: Principal, systemKey: string, name: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const w = await webhooksRepo.get(this.d.db, s.system_key, name);
    if (!w) throw notFound("webhook", name, "Webhooks");
    return this.toWire(w, s.system_secret);
  }

  async create(p: Principal, systemKey: string, name: string, body: unknown) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    if (!NAME_RE.test(name)) throw fail("INVALID_ARGUMENT", `invalid webhook name '${name}'`);
    const row = await this.parse(s.system_key, name, body);
    await this.d.db.tx(async (tx) => {
      if (await webhooksRepo.get(tx, s.system_key, name)) throw fail("ALREADY_EXISTS", `webhook '${name}' already exists`);
      await webhooksRepo.put(tx, row);
      await this.d.changes.record(tx, s.system_key, "webhook", name, "upsert", row);
    });
    this.changed(s.system_key, name);
    return { success: true };
  }

  async update(p: Principal, systemKey: string, name: string, body: unknown) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const cur = await webhooksRepo.get(this.d.db, s.system_key, name);
    if (!cur) throw notFound("webhook", name, "Webhooks");
    const row = await this.parse(s.system_key, name, body, cur);
    await this.d.db.tx(async (tx) => {
      await webhooksRepo.put(tx, row);
      await this.d.changes.record(tx, s.system_key, "webhook", name, "upsert", row);
    });
    this.changed(s.system_key, name);
    return { success: true };
  }

  async remove(p: Principal, systemKey: string, name: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    await this.d.db.tx(async (tx) => {
      if (!(await webhooksRepo.delete(tx, s.system_key, name)).changes) throw notFound("webhook", name, "Webhooks");
      await this.d.changes.record(tx, s.system_key, "webhook", name, "delete", { name });
    });
    this.changed(s.system_key, name);
    return { success: true };
  }

  // ---- invocation -----------------------------------------------------------------------------

  private async definition(systemKey: string, name: string): Promise<WebhookRow> {
    const key = `${systemKey}/${name}`;
    const w = this.cache.get(key) ?? (await this.cache.getOr(key, async () => (await webhooksRepo.get(this.d.db, systemKey, name)) ?? null));
    if (!w) {
      if (!(await this.systems.find(systemKey))) throw fail("SYSTEM_NOT_FOUND", `system '${systemKey}' does not exist`);
      throw notFound("webhook", name, "Webhooks");
    }
    return w;
  }

  /** The caller by a token, which must belong to this system. */
  private async byToken(systemKey: string, token: string | null | undefined, where: string): Promise<{ p: Principal; token: string }> {
    if (!token) throw fail("WEBHOOK_UNAUTHORIZED", `this webhook needs a token in ${where}`);
    const p = await this.tokens.resolve(token);
    if (!p || p.kind === "edge") throw fail("WEBHOOK_UNAUTHORIZED", "the token is invalid, expired or logged out");
    if (p.kind !== "developer" && p.systemKey !== systemKey) throw fail("WEBHOOK_UNAUTHORIZED", "the token belongs to another system");
    if (p.kind === "developer" && p.key && (p.key.readOnly || (p.key.systems && !p.key.systems.includes(systemKey)))) throw fail("WEBHOOK_FORBIDDEN", "this developer key may not run this system's webhooks");
    return { p, token };
  }

  /** HTTP Basic: the raw token (what existing clients send), or base64 of `email:password` or `:token`. */
  private async byBasic(systemKey: string, header: string | undefined) {
    const m = /^Basic\s+(.+)$/i.exec(header ?? "");
    if (!m) throw fail("WEBHOOK_UNAUTHORIZED", "this webhook needs an Authorization: Basic header");
    const raw = m[1]!.trim();
    const p = await this.tokens.resolve(raw);
    if (p) return this.byToken(systemKey, raw, "the Authorization header");
    let decoded = "";
    try { decoded = Buffer.from(raw, "base64").toString("utf8"); } catch { /* not base64 */ }
    const colon = decoded.indexOf(":");
    if (colon < 0) throw fail("WEBHOOK_UNAUTHORIZED", "the Authorization header carries neither a valid token nor email:password");
    const user = decoded.slice(0, colon), secret = decoded.slice(colon + 1);
    if (!user) return this.byToken(systemKey, secret, "the Authorization header");
    const u = await this.users.principalByPassword(systemKey, user, secret);
    if (!u) throw fail("WEBHOOK_UNAUTHORIZED", "invalid email or password");
    return { p: u, token: "" };
  }

  private async caller(w: WebhookRow, call: WebhookCall, body: unknown): Promise<{ p: Principal; token: string }> {
    const header = (n: string) => call.headers.find(([k]) => k.toLowerCase() === n)?.[1];
    switch (w.auth_method as AuthMethod) {
      case "no_auth":
        return { p: { kind: "anonymous", systemKey: w.system_key, id: "anon", email: "anon", roles: ["Anonymous"], tokenHash: "" }, token: "" };
      case "platform_auth":
        return this.byToken(w.system_key, header("platform-usertoken") ?? header("clearblade-usertoken") ?? header("clearblade-devicetoken") ?? header("clearblade-devtoken"), "the Platform-UserToken header");
      case "payload_auth": {
        const fromBody = body && typeof body === "object" && typeof (body as Record<string, unknown>).token === "string" ? (body as Record<string, string>).token : undefined;
        return this.byToken(w.system_key, call.query.find(([k]) => k === "token")?.[1] ?? fromBody, "the token query parameter or the body's token field");
      }
      case "http_basic_auth":
        return this.byBasic(w.system_key, header("authorization"));
    }
  }

  async invoke(systemKey: string, name: string, call: WebhookCall): Promise<WebhookReply> {
    const w = await this.definition(systemKey, name);
    const urlParams = matchPath(w.path, call.rest);
    if (!urlParams) {
      const got = call.rest.length ? "/" + call.rest.join("/") : "(none)";
      throw fail("ROUTE_NOT_FOUND", `path ${got} does not match webhook '${name}' (path ${w.path || "(none)"})`);
    }
    const body = parseBody(call.body);
    const { p, token } = await this.caller(w, call, body);
    const params = {
      body, query: group(call.query, (k) => k), headers: group(call.headers, headerName), urlParams, method: call.method, uri: call.uri,
    };
    let r: ServiceAnswer;
    try {
      r = await this.engine.execute(p, systemKey, w.service_name, params, { userToken: token, logging: call.logging });
    } catch (e) {
      // an authenticated caller without permission to run the service
      if (e instanceof ApiError && e.kind.code === 200) throw fail("WEBHOOK_FORBIDDEN", e.detail);
      throw e;
    }
    if (r.failed) throw fail(r.timedOut ? "SERVICE_TIMED_OUT" : "SERVICE_FAILED", `service '${w.service_name}': ${String(r.results)}`);
    return reply(r);
  }
}

/** An object for a JSON object or array body, the text otherwise, {} for none. */
function parseBody(text: string): unknown {
  if (!text) return {};
  const t = text.trimStart();
  if (t[0] === "{" || t[0] === "[") {
    checkJsonText(text);
    try { return JSON.parse(text); } catch { /* not JSON: the text */ }
  }
  return text;
}

function group(pairs: [string, string][], name: (k: string) => string): Record<string, string[]> {
  const out: Record<string, string[]> = Object.create(null);
  for (const [k, v] of pairs) (out[name(k)] ??= []).push(v);
  return { ...out };
}

const TOKEN_HEADER_RE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** resp.success → 200, resp.error → 500, unless resp.status chose a status of the same class; resp.set headers. */
function reply(r: ServiceAnswer): WebhookReply {
  const s = r.status;
  const valid = typeof s === "number" && Number.isInteger(s) && s >= 200 && s <= 599;
  const status = r.success ? (valid ? s! : 200) : valid && s! >= 400 ? s! : 500;
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(r.headers ?? {})) if (TOKEN_HEADER_RE.test(k) && !/[\r\n]/.test(String(v))) headers[k] = String(v);
  const text = typeof r.results === "string";
  if (!Object.keys(headers).some((k) => k.toLowerCase() === "content-type")) headers["content-type"] = text ? "text/plain; charset=utf-8" : "application/json";
  return { status, headers, body: text ? (r.results as string) : JSON.stringify(r.results ?? null) };
}
