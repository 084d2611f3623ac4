// The HTTP Requests throttler on every API call (document 001 §2.3, §5.6, §7): the caller's
// identity from its token (developers pass untouched), the system from the token, the headers or
// the path, the IP address of the connection. A refused request is a 429 in the error envelope;
// a concurrency slot is given back when the handler is done.
import type { Principal } from "../auth/principal.ts";
import { principalEmail } from "../auth/principal.ts";
import { fail } from "../core/errors.ts";
import type { Subject } from "../throttle/cases.ts";
import type { Decision, Throttle } from "../throttle/throttle.ts";
import type { Tokens } from "../auth/tokens.ts";
import { systemKeyOf, tokenOf } from "./request.ts";

const SYSTEM_KEY_IN_PATH = /\/([0-9a-f]{30})(?:\/|$)/;
/** Bodies larger than this are not read for a login name. */
const PEEK_MAX = 64 * 1024;

const pathOf = (url: string) => {
  // a request's url is absolute: its path starts after "http://" or "https://" and a host
  const start = url.indexOf("/", 8);
  const q = url.indexOf("?", start);
  return start < 0 ? "/" : q < 0 ? url.slice(start) : url.slice(start, q);
};
const plainIp = (a: string | undefined) => (a?.startsWith("::ffff:") ? a.slice(7) : a ?? "");

/** The login name an unauthenticated request carries in its JSON body (user or device sign-in). */
async function loginIn(request: Request): Promise<string> {
  if (request.method !== "POST" && request.method !== "PUT") return "";
  if (Number(request.headers.get("content-length") ?? PEEK_MAX + 1) > PEEK_MAX) return "";
  try {
    const b = JSON.parse(await request.clone().text()) as Record<string, unknown>;
    for (const k of ["email", "username", "deviceName", "name"]) if (typeof b?.[k] === "string" && b[k]) return b[k] as string;
  } catch { /* not JSON: no name */ }
  return "";
}

export type Refusal = (d: Decision) => Response;
/** The client address of a request's connection. */
export type AddressOf = (request: Request) => string | undefined;

/** What the cases look at for one request. The address is read, and a login name looked for,
 *  only when a case that matched system and resource asks (a class: its getter lives on the
 *  prototype, where an object literal's would be made per request). */
class RequestSubject implements Subject {
  private address: string | undefined;
  /** a case asked who an unauthenticated caller is */
  askedForEmail = false;
  constructor(readonly systemKey: string, readonly resource: string, public login: string, private readonly request: Request, private readonly addressOf: AddressOf) {}
  get ip() { return (this.address ??= plainIp(this.addressOf(this.request))); }
  email() { this.askedForEmail = true; return this.login; }
}

export class HttpThrottle {
  private readonly releases = new WeakMap<Request, () => void>();
  /** requests the server makes to itself (re-routing "//" paths): counted once, as the original */
  readonly internal = new WeakSet<Request>();

  constructor(private readonly throttle: Throttle, private readonly tokens: Tokens, private readonly refuse: Refusal, private readonly addressOf: AddressOf) {}

  /** Runs before routing; a Response ends the request there. */
  onRequest(request: Request): Response | undefined | Promise<Response | undefined> {
    if (!this.throttle.active("HTTP Requests") || this.internal.has(request)) return undefined;
    const token = tokenOf(request);
    if (!token) return this.decide(request, null);
    const p = this.tokens.resolveNow(token);
    if (p !== undefined) return this.decide(request, p);
    return this.tokens.resolve(token).then((q) => this.decide(request, q), () => this.decide(request, null));
  }

  /** Whether the request holds a concurrency slot to give back. */
  holds(request: Request) { return this.releases.has(request); }

  /** Gives back the request's concurrency slot (once; later calls do nothing). */
  release(request: Request) {
    const release = this.releases.get(request);
    if (release) { this.releases.delete(request); release(); }
  }

  private decide(request: Request, p: Principal | null): Response | undefined | Promise<Response | undefined> {
    if (p?.kind === "developer") return undefined; // §5.6: developers are never throttled
    const resource = pathOf(request.url);
    const systemKey = (p ? p.systemKey : systemKeyOf(request)) ?? SYSTEM_KEY_IN_PATH.exec(resource)?.[1] ?? "";
    const subject = new RequestSubject(systemKey, resource, p ? principalEmail(p) : "", request, this.addressOf);
    if (!p) {
      // only read the body when a case that matched system and resource wants to know who it is
      this.throttle.find("HTTP Requests", subject);
      if (subject.askedForEmail) return loginIn(request).then((name) => { subject.login = name; return this.outcome(request, this.throttle.evaluate("HTTP Requests", subject)); });
    }
    return this.outcome(request, this.throttle.evaluate("HTTP Requests", subject));
  }

  private outcome(request: Request, d: Decision | Promise<Decision>): Response | undefined | Promise<Response | undefined> {
    if (d instanceof Promise) return d.then((x) => this.outcome(request, x) as Response | undefined);
    if (!d.ok) return this.refuse(d);
    if (d.release) this.releases.set(request, d.release);
    return undefined;
  }
}

/** The 429 answer: the envelope, naming the case, with Retry-After for frequency limits. */
export function throttledError(d: Decision) {
  return fail("THROTTLED", d.caseName ? `throttled by case '${d.caseName}'` : "throttled");
}
