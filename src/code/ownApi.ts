// The platform's own API as code services reach it. ClearBlade gives a service its platform's
// address in cbmeta.platform_url, and services call the REST API there at 'https://' +
// platform_url (its admin REST helper libraries do, to list edges or run other services). Here
// that address is this node's own listener: on loopback or a private address, which the egress
// policy refuses, and plain HTTP when the node has no certificate. So a request to exactly that
// host and port, either scheme, is answered by this node's routes in process, as if it came
// through the listener: the token it carries, its rights and the throttles are checked as for any
// caller. No other address is reached this way, and nothing else of the egress policy changes.
import { fail } from "../core/errors.ts";
import type { Config } from "../config.ts";
import { answerOf, checkHeaders, OUTBOUND_LIMITS, type OutboundRequest, type OutboundResponse, outboundUrl } from "./outbound.ts";

/** cbmeta.platform_url: where services reach this platform's API, as ClearBlade gives it (host
 *  and port, no scheme: services write 'https://' + platform_url). An edge names its platform. */
export function platformHost(c: Pick<Config, "mode" | "platformUrl" | "httpHost" | "httpPort" | "httpsPort" | "tlsCert">): string {
  if (c.mode === "edge" && c.platformUrl) return new URL(c.platformUrl).host;
  const host = c.httpHost === "0.0.0.0" || c.httpHost === "::" ? "localhost" : c.httpHost;
  return `${host}:${c.tlsCert ? c.httpsPort : c.httpPort}`;
}

type Handler = (req: Request) => Promise<Response>;

/** Headers the listener would set: a caller's own are not carried in. */
const HOP_HEADERS = new Set(["host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer", "proxy-connection"]);

export class OwnApi {
  private handler: Handler | null = null;
  /** the host:port cbmeta.platform_url names, lower case; null on an edge (it names its
   *  platform, another node) */
  private readonly host: string | null;

  constructor(config: Parameters<typeof platformHost>[0]) {
    this.host = config.mode === "edge" && config.platformUrl ? null : platformHost(config).toLowerCase();
  }

  /** The routes, once the listener is up (requests before that go out as any other). */
  attach(handler: Handler) { this.handler = handler; }

  /** Whether a URL names this node's own API (the host and port of cbmeta.platform_url). */
  serves(url: string): boolean {
    if (!this.handler || !this.host) return false;
    try { return new URL(url).host.toLowerCase() === this.host; } catch { return false; }
  }

  /** Answers a request to this node's own API through its routes (no redirect is followed: the
   *  routes answer none a service would follow). */
  async send(req: OutboundRequest, signal: AbortSignal): Promise<OutboundResponse> {
    const handler = this.handler;
    if (!handler) throw fail("OUTBOUND_FAILED", "the platform's API is not listening yet");
    const url = outboundUrl(req.url);
    checkHeaders(req.headers);
    const timeoutMs = Math.min(Math.max(1, Math.floor(req.timeoutMs)), OUTBOUND_LIMITS.maxTimeoutMs);
    const body = req.method === "GET" || req.method === "HEAD" ? undefined : req.body;
    const headers = req.headers.filter(([k]) => !HOP_HEADERS.has(k.toLowerCase()));
    const inside = new Request(`http://${url.host}${url.pathname}${url.search}`, { method: req.method, headers, body });
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: (() => void) | undefined;
    const stopped = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(fail("OUTBOUND_FAILED", `the request to ${url.origin} timed out after ${req.statedTimeoutMs ?? timeoutMs} ms`)), timeoutMs);
      onAbort = () => reject(fail("OUTBOUND_FAILED", "the request was cancelled (the run ended)"));
      signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      const res = await Promise.race([handler(inside), stopped]);
      return { ...(await Promise.race([answerOf(res, url), stopped])), redirects: 0 };
    } finally {
      clearTimeout(timer);
      if (onAbort) signal.removeEventListener("abort", onAbort);
    }
  }
}
