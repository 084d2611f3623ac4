// CORS, as ClearBlade serves web apps: a page on another origin calls the API with the SDKs' token
// and key headers. A preflight is answered at once (204); every other answer to a browser (a
// request with an Origin), errors included, names the origin that may read it. `--cors-origins`
// is "*" (any origin) or a list of origins.
import { envelope, fail } from "../core/errors.ts";

const METHODS = "GET, POST, PUT, PATCH, DELETE, OPTIONS";
/** The headers the ClearBlade SDKs send, in both spellings; header names are case-insensitive. */
const HEADERS = [
  "ClearBlade-UserToken", "ClearBlade-DevToken", "ClearBlade-DeviceToken", "ClearBlade-SystemKey", "ClearBlade-SystemSecret",
  "ClearBlade-Devicename", "ClearBlade-Edge", "Platform-UserToken", "Platform-DevToken", "Platform-DeviceToken",
  "Platform-SystemKey", "Platform-SystemSecret", "Content-Type", "Accept", "Authorization", "Logging-Enabled", "X-Requested-With",
].join(", ");
/** How long a browser may reuse a preflight's answer (seconds). */
const MAX_AGE = "600";

export class Cors {
  private readonly any: boolean;
  private readonly origins: Set<string>;

  constructor(list: string) {
    const items = list.split(",").map((x) => x.trim()).filter(Boolean);
    this.any = items.includes("*");
    // browsers send an origin in its serialised form (lower-case host, no default port)
    this.origins = new Set(items.filter((o) => o !== "*").map((o) => new URL(o).origin));
  }

  /** The Access-Control-Allow-Origin for a request: "*", the request's own origin when listed, or
   *  null (no browser on that origin may read the answer). */
  private originFor(request: Request): string | null {
    if (this.any) return "*";
    const o = request.headers.get("origin");
    return o !== null && this.origins.has(o) ? o : null;
  }

  preflight(request: Request): Response {
    const origin = this.originFor(request);
    const headers: Record<string, string> = { allow: METHODS };
    if (!this.any) headers.vary = "Origin";
    if (origin === null && request.headers.get("origin") !== null) {
      const env = envelope(fail("FORBIDDEN", `origin ${request.headers.get("origin")} may not call this API (--cors-origins)`));
      return new Response(JSON.stringify(env), { status: env.statusCode, headers: { ...headers, "content-type": "application/json; charset=utf-8" } });
    }
    if (origin !== null) {
      headers["access-control-allow-origin"] = origin;
      headers["access-control-allow-methods"] = METHODS;
      headers["access-control-allow-headers"] = HEADERS;
      headers["access-control-max-age"] = MAX_AGE;
    }
    return new Response(null, { status: 204, headers });
  }

  /** The answer (or its promise) with the CORS headers added. */
  allow(request: Request, r: unknown): unknown {
    if (r instanceof Promise) return r.then((x) => this.decorate(request, x));
    return this.decorate(request, r);
  }

  private decorate(request: Request, r: unknown): unknown {
    // not a Response: a WebSocket upgrade
    if (!(r instanceof Response)) return r;
    // A request without Origin is not a browser's cross-origin call (browsers send it on every
    // CORS request): with any origin allowed there is nothing to say, and setting the header on
    // each answer was a tenth of a small request's CPU. A list still says Vary: Origin.
    const sent = request.headers.get("origin");
    if (sent === null && this.any) return r;
    const origin = this.any ? "*" : sent !== null && this.origins.has(sent) ? sent : null;
    try {
      if (origin !== null) {
        r.headers.set("access-control-allow-origin", origin);
        // a throttled client may read when to come back
        if (r.status === 429) r.headers.set("access-control-expose-headers", "Retry-After");
      }
      if (!this.any) r.headers.append("vary", "Origin");
    } catch { /* a Response with immutable headers (Response.error()): nothing to add */ }
    return r;
  }
}
