// Why the edge cannot reach its platform, while it cannot: the cause of each failed try (name
// resolution, TCP, time, TLS, HTTP, a refusal, a close before the welcome), counted and logged at
// once, then the same failure once per --sync-log-ms with the tries in between.
import type { Config } from "../../config.ts";
import type { Logger } from "../../core/log.ts";
import type { RefusalReason } from "../protocol.ts";

/** What failed when the edge tried to reach its platform: the name did not resolve (dns), no
 *  TCP connection (tcp: refused, reset, unreachable), none in time (timeout), the TLS handshake
 *  (tls: the certificate, the CA), an HTTP answer that is not the sync channel (http), a refusal
 *  by the platform (refused: name or token, protocol, version), the link closed before the
 *  welcome (closed). */
export type LinkCause = "dns" | "tcp" | "timeout" | "tls" | "http" | "refused" | "closed";

export const hostOf = (url: string) => { try { return new URL(url).host; } catch { return url; } };

/** A socket's error (Bun's: "WebSocket connection to '<url>' failed: <why>", with a code) as a cause. */
export function linkCause(err: unknown, platformUrl: string): { cause: LinkCause; message: string } {
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === "string" ? e.code : "";
  const text = String(e?.message ?? err ?? "").replace(/^WebSocket connection to '[^']*' failed: /, "");
  const host = hostOf(platformUrl);
  if (/^(ENOTFOUND|EAI_AGAIN|EAI_NONAME|EAI_FAIL|EAI_NODATA)$/.test(code) || /getaddrinfo|DNS/i.test(text))
    return { cause: "dns", message: `the platform's host name in ${host} does not resolve (${code || text})` };
  if (code === "ETIMEDOUT") return { cause: "timeout", message: `no connection to ${host} in time (${code})` };
  if (/^(ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ENETUNREACH|EADDRNOTAVAIL|EPIPE)$/.test(code))
    return { cause: "tcp", message: `${code === "ECONNREFUSED" ? `connection refused by ${host}: nothing listens there` : `${text} (${code})`}` };
  if (/TLS|SSL|certificate|CERT|self.signed/i.test(`${code} ${text}`) || code === "EPROTO")
    return { cause: "tls", message: `TLS with ${host} failed: ${text}${code ? ` (${code})` : ""}` };
  const http = /Expected 101 status code: (\d+)/.exec(text);
  if (http) return { cause: "http", message: `${host} answered HTTP ${http[1]} instead of opening the sync channel (is --platform-url the platform's address?)` };
  return { cause: "tcp", message: text || "the connection failed" };
}

/** A socket's try that failed, as far as it said; `byEdge`: this edge refused the platform (its protocol). */
export type TryFailure = { cause: LinkCause; message: string; byEdge?: boolean; platformBuild?: string };

/** The failures of the tries to reach the platform since the last welcome. */
export class LinkFailures {
  /** why the platform (or this edge) refused the link ("" : it did not): a wrong name or token, a
   *  sync protocol or version the other side does not serve */
  refusal = "";
  /** what kind of refusal it was: an incompatible peer is tried again only after a while */
  refusalReason: RefusalReason | "" = "";
  /** how reaching the platform fails, while it does: the latest cause, since when, how many tries
   *  (null: the last try was welcomed) */
  linkFailure: { cause: LinkCause; message: string; since: number; last: number; attempts: number } | null = null;
  /** the failure last logged, when, and the tries counted then (failures are logged at once, and
   *  the same one again only once per --sync-log-ms) */
  private linkLogged = { key: "", at: 0, attempts: 0 };
  /** why each socket's try failed, as far as it said (the error event comes before the close);
   *  `byEdge`: this edge refused the platform (its protocol) */
  readonly failureOf = new WeakMap<WebSocket, TryFailure>();

  constructor(private readonly log: Logger, private readonly config: Config) {}

  /** A platform that refused this edge's protocol or version will not take it a second later (a
   *  refused token may be put right on the platform at any time). */
  get incompatible() { return this.refusalReason === "protocol" || this.refusalReason === "version"; }

  /** A welcome: the link works again. */
  welcomed() {
    this.refusal = "";
    this.refusalReason = "";
    if (this.linkFailure) this.log.info("the platform is reachable again", { after: this.linkFailure.attempts, lastCause: this.linkFailure.cause, failingForS: Math.round((Date.now() - this.linkFailure.since) / 1000) });
    this.linkFailure = null;
    this.linkLogged = { key: "", at: 0, attempts: 0 };
  }

  /** The platform refused the link (or this edge refused the platform's protocol): the socket's
   *  try failed for that reason (logged as the socket closes, see attemptFailed). */
  refused(ws: WebSocket, reason: RefusalReason, message: string, byEdge = false, platformBuild?: string) {
    this.refusal = message;
    this.refusalReason = reason;
    this.failureOf.set(ws, { cause: "refused", message: reason === "credentials" ? `the platform refused this edge's name or token: ${message}` : message, byEdge, platformBuild });
  }

  /** A try to reach the platform failed: counted, and logged with its cause at once, then the same
   *  failure only once per --sync-log-ms (with the tries in between), a new one at once. */
  attemptFailed({ byEdge, platformBuild, ...f }: TryFailure) {
    const now = Date.now();
    if (f.cause !== "refused") { this.refusal = ""; this.refusalReason = ""; }
    const l = this.linkFailure = this.linkFailure ? { ...this.linkFailure, ...f, last: now, attempts: this.linkFailure.attempts + 1 } : { ...f, since: now, last: now, attempts: 1 };
    const key = `${f.cause}\u0000${f.message}`;
    if (key === this.linkLogged.key && now - this.linkLogged.at < this.config.syncLogMs) return;
    const fields = { cause: f.cause, message: f.message, url: this.config.platformUrl, ...(platformBuild ? { platform: platformBuild } : {}), attempts: l.attempts,
      failingForS: Math.round((now - l.since) / 1000), ...(this.linkLogged.key ? { attemptsSinceLastLine: l.attempts - this.linkLogged.attempts } : {}) };
    if (f.cause === "refused") this.log.error(byEdge ? "the platform's sync protocol is not one this edge speaks" : "the platform refused the edge", fields);
    else this.log.warn("cannot reach the platform", fields);
    this.linkLogged = { key, at: now, attempts: l.attempts };
  }
}
