// The HTTP Requests throttler on every API call (docs/security.md): the caller's
// identity from its token (developers pass untouched), the system from the token, the headers or
// the path, the IP address of the connection. A refused request is a 429 in the error envelope;
// a concurrency slot is given back when the handler is done.
import type { Principal } from "../auth/principal.ts";
import { principalEmail } from "../auth/principal.ts";
import { fail } from "../core/errors.ts";
import { emailKey, type Subject } from "../throttle/cases.ts";
import type { Decision, Throttle } from "../throttle/throttle.ts";
import type { Tokens } from "../auth/tokens.ts";
import { MAX_BODY_BYTES, pathOf, systemKeyOf, tokenOf } from "./request.ts";


const SYSTEM_KEY_IN_PATH = /\/([0-9a-f]{30})(?:\/|$)/;
/** Bodies larger than this are not read for a login name (sign-in routes excepted). */
const PEEK_MAX = 64 * 1024;

// The sign-in routes: their handlers check credentials from the request itself.
const USER_AUTH = "/api/v/1/user/auth";
const DEVELOPER_AUTH = "/admin/auth";
const DEVICES = "/api/v/2/devices/";
const DEVICE_AUTH = /^\/api\/v\/2\/devices\/([^/]+)\/auth$/;
const WEBHOOK = "/api/v/4/webhook/execute/";


/** The path as the router matches it: repeated slashes as one, no trailing slash. Every spelling
 *  the router answers must count in one bucket (and "//" requests are re-routed unthrottled). */
export function routedPath(path: string): string {
  if (path.indexOf("//") >= 0) path = path.replace(/\/{2,}/g, "/");
  return path.length > 1 && path.charCodeAt(path.length - 1) === 47 /* / */ ? path.slice(0, -1) : path;
}

const plainIp = (a: string | undefined) => (a?.startsWith("::ffff:") ? a.slice(7) : a ?? "");
/** A path element as its handler sees it (decoded), so spellings of one key share a bucket. */
const element = (x: string) => { try { return decodeURIComponent(x); } catch { return x; } };

/** The consumer of a token: emails as sign-in finds them, devices by their exact name. */
const consumerOf = (p: Principal) => (p.kind === "user" || p.kind === "developer" ? emailKey(p.email) : principalEmail(p));

/** The login name an unauthenticated request carries in its JSON body (user or device sign-in). */
async function loginIn(request: Request): Promise<string> {
  if (request.method !== "POST" && request.method !== "PUT") return "";
  if (Number(request.headers.get("content-length") ?? PEEK_MAX + 1) > PEEK_MAX) return "";
  try {
    const b = JSON.parse(await request.clone().text()) as Record<string, unknown>;
    for (const k of ["email", "username", "deviceName", "name"]) {
      const v = b?.[k];
      if (typeof v === "string" && v) return k === "email" || k === "username" ? emailKey(v) : v;
    }
  } catch { /* not JSON: no name */ }
  return "";
}

type LoginReader = (request: Request) => Promise<string>;

/** A sign-in's login name from the whole body, the field its handler reads: a name behind padding
 *  or chunked encoding would otherwise fall back to the address's bucket, a fresh one per address. */
const signInLogin = (field: (b: Record<string, unknown>) => unknown, isEmail: boolean): LoginReader => async (request) => {
  // a larger body is refused unread by the handler
  if (Number(request.headers.get("content-length") ?? 0) > MAX_BODY_BYTES) return "";
  let v: unknown;
  try {
    const b = JSON.parse(await request.clone().text()) as unknown;
    v = b !== null && typeof b === "object" ? field(b as Record<string, unknown>) : undefined;
  } catch { /* not JSON: refused by the handler */ }
  return typeof v !== "string" ? "" : isEmail ? emailKey(v) : v;
};
const emailLogin = signInLogin((b) => b.email ?? b.username, true);
const deviceLogin = signInLogin((b) => b.deviceName, false);

/** The raw credential and user name of an `Authorization: Basic` email:password, decoded as the
 *  webhook handler decodes it; null when there is no user name (no header, or a bare token). */
function basicUser(request: Request): { raw: string; user: string } | null {
  const m = /^Basic\s+(.+)$/i.exec(request.headers.get("authorization") ?? "");
  if (!m) return null;
  const raw = m[1]!.trim();
  const decoded = Buffer.from(raw, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon > 0 ? { raw, user: decoded.slice(0, colon) } : null;
}

export type Refusal = (d: Decision) => Response;
/** The client address of a request's connection. */
export type AddressOf = (request: Request) => string | undefined;

/** What the cases look at for one request. The address is read, and a login name looked for,
 *  only when a case that matched system and resource asks (a class: its getter lives on the
 *  prototype, where an object literal's would be made per request). */
class RequestSubject implements Subject {
  private address: string | undefined;
  /** a case asked who the caller is */
  askedForEmail = false;
  constructor(readonly systemKey: string, readonly resource: string, public login: string | null, private readonly principal: Principal | null,
    readonly signIn: boolean, private readonly request: Request, private readonly addressOf: AddressOf) {}
  get ip() { return (this.address ??= plainIp(this.addressOf(this.request))); }
  email() {
    this.askedForEmail = true;
    return (this.login ??= this.principal ? consumerOf(this.principal) : "");
  }
}

export class HttpThrottle {
  /** passes to settle when the handler has answered: a concurrency slot, a sign-in's outcome */
  private readonly pending = new WeakMap<Request, Decision>();
  /** requests the server makes to itself (re-routing "//" paths): counted once, as the original */
  readonly internal = new WeakSet<Request>();

  constructor(private readonly throttle: Throttle, private readonly tokens: Tokens, private readonly refuse: Refusal, private readonly addressOf: AddressOf) {}

  /** Runs before routing; a Response ends the request there. `path`: the request's, when known. */
  onRequest(request: Request, path?: string): Response | undefined | Promise<Response | undefined> {
    if (!this.throttle.active("HTTP Requests") || this.internal.has(request)) return undefined;
    const resource = routedPath(path ?? pathOf(request.url));
    // no case names this path: nothing to decide, and the token need not be read
    if (!this.throttle.covers("HTTP Requests", resource)) return undefined;
    // A sign-in is counted for the system and login its credentials name. A token header is not
    // looked at: the handler ignores it, so it must neither pick the bucket nor let a developer
    // token skip the limit.
    if (request.method === "POST") {
      if (resource === USER_AUTH) return this.signIn(request, systemKeyOf(request) ?? "", resource, emailLogin);
      if (resource === DEVELOPER_AUTH) return this.signIn(request, "", resource, emailLogin);
      const device = resource.startsWith(DEVICES) ? DEVICE_AUTH.exec(resource) : null;
      if (device) return this.signIn(request, element(device[1]!), resource, deviceLogin);
    }
    if (resource.startsWith(WEBHOOK)) {
      const basic = basicUser(request);
      if (basic) return this.webhookSignIn(request, resource, basic);
    }
    return this.byToken(request, resource);
  }

  /** Whether the request holds something to settle when it is answered. */
  holds(request: Request) { return this.pending.has(request); }

  /** Settles the request once its handler answered (later calls do nothing): gives back its
   *  concurrency slot, and tells a sign-in's lockout whether the credentials were refused (401)
   *  or accepted (2xx). */
  release(request: Request, answer?: unknown) {
    const d = this.pending.get(request);
    if (!d) return;
    this.pending.delete(request);
    d.release?.();
    if (d.settle) {
      const status = answer instanceof Response ? answer.status : 500;
      d.settle(status === 401 ? "failed" : status < 300 ? "succeeded" : "other");
    }
  }

  private byToken(request: Request, resource: string): Response | undefined | Promise<Response | undefined> {
    const token = tokenOf(request);
    if (!token) return this.byPrincipal(request, resource, null);
    const p = this.tokens.resolveNow(token);
    if (p !== undefined) return this.byPrincipal(request, resource, p);
    return this.tokens.resolve(token).then((q) => this.byPrincipal(request, resource, q), () => this.byPrincipal(request, resource, null));
  }

  private byPrincipal(request: Request, resource: string, p: Principal | null): Response | undefined | Promise<Response | undefined> {
    if (p?.kind === "developer") return undefined; // developers are never throttled
    const systemKey = (p ? p.systemKey : systemKeyOf(request)) ?? SYSTEM_KEY_IN_PATH.exec(resource)?.[1] ?? "";
    return this.decide(request, new RequestSubject(systemKey, resource, null, p, false, request, this.addressOf), p ? null : loginIn);
  }

  private signIn(request: Request, systemKey: string, resource: string, read: LoginReader) {
    return this.decide(request, new RequestSubject(systemKey, resource, null, null, true, request, this.addressOf), read);
  }

  /** http_basic_auth: an email:password attempt counts for its user name in the path's system.
   *  The handler tries the credential as a token first; one that is a token is no attempt. */
  private webhookSignIn(request: Request, resource: string, basic: { raw: string; user: string }): Response | undefined | Promise<Response | undefined> {
    const attempt = () => {
      const systemKey = element(resource.slice(WEBHOOK.length).split("/", 1)[0]!);
      return this.decide(request, new RequestSubject(systemKey, resource, emailKey(basic.user), null, true, request, this.addressOf), null);
    };
    const known = this.tokens.resolveNow(basic.raw);
    if (known !== undefined) return this.byToken(request, resource);
    return this.tokens.resolve(basic.raw).then((p) => (p ? this.byToken(request, resource) : attempt()), attempt);
  }

  /** `read` finds the login name when the subject has none yet; the body is read only when a case
   *  that matched system and resource wants to know who it is. */
  private decide(request: Request, subject: RequestSubject, read: LoginReader | null): Response | undefined | Promise<Response | undefined> {
    if (read) {
      this.throttle.find("HTTP Requests", subject);
      if (subject.askedForEmail) return read(request).then((name) => { subject.login = name; return this.outcome(request, this.throttle.evaluate("HTTP Requests", subject)); });
    }
    return this.outcome(request, this.throttle.evaluate("HTTP Requests", subject));
  }

  private outcome(request: Request, d: Decision | Promise<Decision>): Response | undefined | Promise<Response | undefined> {
    if (d instanceof Promise) return d.then((x) => this.outcome(request, x) as Response | undefined);
    if (!d.ok) return this.refuse(d);
    if (d.release || d.settle) this.pending.set(request, d);
    return undefined;
  }
}

/** The 429 answer: the envelope, naming the case, with Retry-After for frequency limits. */
export function throttledError(d: Decision) {
  return fail("THROTTLED", d.caseName ? `throttled by case '${d.caseName}'` : "throttled");
}
