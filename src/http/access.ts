// What the HTTP API tells its operator about each request: the access log (one line per answer,
// at info, 5xx at warn with the error id the client got), refused and throttled sign-ins (warn,
// with the login they named), and changes developers make (info: who, what, where). Nothing secret
// is written: no token, password, key or body, only the login name of a failed sign-in.
// Lines are built only when they are written.
import type { Principal } from "../auth/principal.ts";
import type { Tokens } from "../auth/tokens.ts";
import type { Config } from "../config.ts";
import type { ErrorEnvelope } from "../core/errors.ts";
import type { Logger } from "../core/log.ts";
import { pathElement, type RequestMetrics, type Route, UNMATCHED } from "./metrics.ts";
import { pathOf, systemKeyOf, tokenOf } from "./request.ts";

/** The error each error answer carries, so its line names the id the client got: by answer, or
 *  by request for an answer Elysia copies on its way out (a handler's error). */
const answerErrors = new WeakMap<Request | Response, ErrorEnvelope["error"]>();
export const noteError = (of: Request | Response, error: ErrorEnvelope["error"]) => { answerErrors.set(of, error); };
export const errorOf = (request: Request, answer: unknown) => (answer instanceof Response ? answerErrors.get(answer) : undefined) ?? answerErrors.get(request);

/** The sign-in routes (POST) and who signs in on each. */
const SIGN_INS = new Map([["/admin/auth", "developer"], ["/api/v/1/user/auth", "user"], ["/api/v/2/devices/:systemKey/auth", "device"]]);
const WEBHOOK_EXECUTE = "/api/v/4/webhook/execute/";
/** Writes by developers that are not administration: rows, publishes, runs, their own session. */
const NOT_ADMIN = new Set([
  "/admin/auth", "/admin/logout", "/admin/checkauth",
  "/api/v/1/data/:key", "/api/v/1/collection/:key/:name", "/api/v/4/data/:key/upsert", "/api/v/4/data/:key/:name/upsert",
  "/api/v/4/collection/:key/:name/upsert", "/api/v/1/message/:systemKey/publish", "/api/v/1/code/:systemKey/:name",
]);
const ACTIONS: Record<string, string> = { POST: "create", PUT: "update", PATCH: "update", DELETE: "delete" };
/** Bodies larger than this are not read for a refused sign-in's login name. */
const LOGIN_BODY_MAX = 64 * 1024;

export type AddressOf = (request: Request) => string | undefined;

interface Parts { config: Config; log: Logger; tokens: Tokens }

export class AccessLog {
  /** sign-in requests' bodies, kept for the line of a refusal */
  private readonly signIns = new WeakMap<Request, Request>();

  constructor(private readonly s: Parts, private readonly requests: RequestMetrics, private readonly addressOf: AddressOf) {}

  /** Before the handler reads it: a sign-in's body is kept, to name its login if it is refused. */
  before(request: Request) {
    if (request.method !== "POST" || !this.s.log.enabled("warn")) return;
    const route = this.requests.routeOf("POST", pathOf(request.url));
    if (SIGN_INS.has(route.label) && Number(request.headers.get("content-length") ?? 0) <= LOGIN_BODY_MAX) this.signIns.set(request, request.clone() as Request);
  }

  /** Each answer (RequestMetrics.observe's listener). */
  readonly answered = (request: Request, route: Route, path: string, status: number, ms: number, answer: unknown) => {
    const c = this.s.config;
    const line = status >= 500 || (c.accessLog === "all" ? status >= 400 || c.accessLogSample >= 1 || Math.random() < c.accessLogSample : c.accessLog === "errors" && status >= 400);
    const level = status >= 500 ? "warn" : "info";
    let caller: Caller | null = null;
    const systems = this.requests.systems;
    if (systems) {
      caller = callerOf(this.s.tokens, request, route, path);
      systems.count(caller.systemKey, caller.principal !== null || status < 400, status);
    }
    if (line && this.s.log.enabled(level)) {
      caller ??= callerOf(this.s.tokens, request, route, path);
      const error = status >= 400 ? errorOf(request, answer) : undefined;
      const fields: Record<string, unknown> = { method: request.method, route: route.label, status, ms: Math.round(ms * 100) / 100, principal: caller.kind };
      if (caller.systemKey) fields.systemKey = caller.systemKey;
      fields.ip = this.ip(request);
      if (error) fields.errorId = error.id;
      this.s.log[level]("request", fields);
    }
    if (status === 401 || status === 429) this.signIn(request, route, path, status, answer);
    else if (status < 400 && ACTIONS[request.method] && route.label !== UNMATCHED && !NOT_ADMIN.has(route.label)) this.change(request, route, path, caller);
  };

  /** A refused or throttled sign-in: who it named, from where, why. */
  private signIn(request: Request, route: Route, path: string, status: number, answer: unknown) {
    if (!this.s.log.enabled("warn")) return;
    let kind = request.method === "POST" ? SIGN_INS.get(route.label) : undefined;
    const basic = !kind && route.label.startsWith(WEBHOOK_EXECUTE) ? basicLogin(request) : null;
    if (basic !== null) kind = "webhook";
    if (!kind) return;
    const error = errorOf(request, answer);
    const systemKey = kind === "device" || kind === "webhook" ? pathElement(path, route.systemKeyAt) : kind === "user" ? systemKeyOf(request) ?? "" : "";
    const write = (login: string) => this.s.log.warn(status === 429 ? "sign-in throttled" : "sign-in refused", {
      kind, login, ...(systemKey ? { systemKey } : {}), ip: this.ip(request), ...(error ? { reason: error.detail, errorId: error.id } : {}),
    });
    if (basic !== null) return write(basic);
    const kept = this.signIns.get(request);
    if (!kept) return write("");
    kept.text().then((text) => write(loginIn(text, kind === "device" ? ["deviceName"] : ["email", "username"])), () => write(""));
  }

  /** A change a developer made. */
  private change(request: Request, route: Route, path: string, known: Caller | null) {
    if (!this.s.log.enabled("info")) return;
    const caller = known ?? callerOf(this.s.tokens, request, route, path);
    const p = caller.principal;
    if (p?.kind !== "developer") return;
    const params = this.requests.params(request.method, path);
    delete params["*"];
    for (const k in params) { try { params[k] = decodeURIComponent(params[k]!); } catch { /* as sent */ } }
    this.s.log.info("admin change", {
      developer: p.email, ...(p.key ? { developerKey: p.key.id } : {}), action: ACTIONS[request.method], method: request.method, route: route.label,
      ...(caller.systemKey ? { systemKey: caller.systemKey } : {}), ...(Object.keys(params).length ? { params } : {}),
    });
  }

  private ip(request: Request): string {
    const a = this.addressOf(request) ?? "";
    return a.startsWith("::ffff:") ? a.slice(7) : a;
  }
}

/** Who made a request, as far as the token cache knows once it is answered. */
interface Caller {
  /** developer, user, anonymous, device, edge; "none" without a token; "unknown" for a token the cache does not hold (refused, or expired) */
  kind: string;
  principal: Principal | null;
  /** the system it was about: its token's, its header's, or its path's (developers' requests) */
  systemKey: string;
}

function callerOf(tokens: Tokens, request: Request, route: Route, path: string): Caller {
  const token = tokenOf(request);
  const principal = token ? tokens.resolveNow(token) ?? null : null;
  const kind = principal ? principal.kind : token ? "unknown" : "none";
  const systemKey = (principal && principal.kind !== "developer" ? principal.systemKey : null)
    ?? systemKeyOf(request) ?? (route.systemKeyAt >= 0 ? pathElement(path, route.systemKeyAt) : "");
  return { kind, principal, systemKey };
}

/** The login name a sign-in body gives in the first of `fields` it has ("" for none). */
function loginIn(text: string, fields: string[]): string {
  try {
    const b = JSON.parse(text) as Record<string, unknown>;
    for (const f of fields) if (typeof b?.[f] === "string") return (b[f] as string).slice(0, 200);
  } catch { /* not JSON */ }
  return "";
}

/** The user name of an `Authorization: Basic` header, or null without one. */
function basicLogin(request: Request): string | null {
  const m = /^Basic\s+(.+)$/i.exec(request.headers.get("authorization") ?? "");
  if (!m) return null;
  const decoded = Buffer.from(m[1]!.trim(), "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon > 0 ? decoded.slice(0, colon).slice(0, 200) : null;
}
