// Outbound HTTP for code services, through the egress policy. Each hop (the request, then every
// redirect, followed here by hand) resolves its host once, checks every address, and connects to
// the first of them by address: no second lookup stands between the check and the connection
// (DNS rebinding). The Host header and the TLS server name stay the URL's name, and the
// certificate is checked against that name. Everything is bounded: time (one deadline over all
// hops), request and response bodies (a larger one is an error, never truncated), headers.
import { STATUS_CODES } from "node:http";
import { checkServerIdentity } from "node:tls";
import { ApiError, fail } from "../core/errors.ts";
import { VERSION } from "../version.ts";
import { type EgressPolicy, type Lookup, systemLookup } from "./egress.ts";

export const OUTBOUND_LIMITS = {
  /** request and response bodies */
  bodyBytes: 10 << 20,
  /** request headers, and response headers, each: their count and their bytes together */
  headers: 100,
  headerBytes: 64 << 10,
  redirects: 5,
  defaultTimeoutMs: 30_000,
  maxTimeoutMs: 60_000,
} as const;

export const METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"] as const;
export type Method = (typeof METHODS)[number];

export interface OutboundRequest {
  method: Method;
  /** an absolute http:// or https:// URL */
  url: string;
  headers: [string, string][];
  body?: string | Uint8Array;
  timeoutMs: number;
  /** the timeout the caller asked for, named when the request times out (`timeoutMs` may be what
   *  was left of it after waiting for a slot) */
  statedTimeoutMs?: number;
  /** redirects followed at most (0: a 3xx is the answer) */
  maxRedirects: number;
  /** check the server's certificate (false: any certificate, as ClearBlade's strictSSL:false) */
  strictSSL: boolean;
}

export interface OutboundResponse {
  status: number;
  statusText: string;
  /** the URL of the answer (after redirects) */
  url: string;
  /** lower-case names; a repeated header is one entry per value */
  headers: [string, string][];
  body: Uint8Array;
  /** redirects followed */
  redirects: number;
}

export interface OutboundDeps {
  lookup?: Lookup;
  /** aborts the request (the run ended) */
  signal?: AbortSignal;
  /** extra trusted CA certificates (tests only: user code cannot set it) */
  ca?: string;
}

const mib = (n: number) => `${n / (1 << 20)} MiB`;
const outboundFail = (detail: string) => fail("OUTBOUND_FAILED", detail);

/** The URL as the request goes out: http or https, no credentials in it. */
export function outboundUrl(text: string): URL {
  let u: URL;
  try { u = new URL(text); } catch { throw fail("INVALID_ARGUMENT", `'${text.length > 200 ? `${text.slice(0, 200)}…` : text}' is not an absolute URL`); }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw fail("INVALID_ARGUMENT", `only http and https URLs can be requested, not ${u.protocol.replace(/:$/, "")}`);
  if (u.username || u.password) throw fail("INVALID_ARGUMENT", "credentials in the URL are not sent: use the auth option or an Authorization header");
  return u;
}

/** Header names and values as HTTP allows them, and as many as the limits allow. */
export function checkHeaders(headers: [string, string][], what = "request"): void {
  if (headers.length > OUTBOUND_LIMITS.headers) throw fail("INVALID_ARGUMENT", `at most ${OUTBOUND_LIMITS.headers} ${what} headers (got ${headers.length})`);
  let bytes = 0;
  for (const [k, v] of headers) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/.test(k)) throw fail("INVALID_ARGUMENT", `'${k.slice(0, 64)}' is not a header name`);
    if (/[\r\n\0]/.test(v)) throw fail("INVALID_ARGUMENT", `the value of header '${k}' has a line break or NUL in it`);
    bytes += k.length + Buffer.byteLength(v) + 4;
  }
  if (bytes > OUTBOUND_LIMITS.headerBytes) throw fail("INVALID_ARGUMENT", `the ${what} headers are larger than ${OUTBOUND_LIMITS.headerBytes >> 10} KiB`);
}

/** Headers the client sets itself: a caller's own would contradict what is sent. */
const OWN_HEADERS = new Set(["host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer", "proxy-connection"]);
/** Headers a redirect to another origin does not carry on. */
const CREDENTIAL_HEADERS = new Set(["authorization", "cookie", "proxy-authorization"]);

/** Sends the request, following redirects, through the policy. */
export async function sendOutbound(policy: EgressPolicy, req: OutboundRequest, deps: OutboundDeps = {}): Promise<OutboundResponse> {
  const timeoutMs = Math.min(Math.max(1, Math.floor(req.timeoutMs)), OUTBOUND_LIMITS.maxTimeoutMs);
  checkHeaders(req.headers);
  const bodySize = req.body === undefined ? 0 : typeof req.body === "string" ? Buffer.byteLength(req.body) : req.body.byteLength;
  if (bodySize > OUTBOUND_LIMITS.bodyBytes) throw fail("INVALID_ARGUMENT", `the request body is larger than ${mib(OUTBOUND_LIMITS.bodyBytes)} (${bodySize} bytes)`);

  let url = outboundUrl(req.url);
  const first = url.origin;
  let method: Method = req.method;
  let body = method === "GET" || method === "HEAD" ? undefined : req.body;
  let headers = req.headers.filter(([k]) => !OWN_HEADERS.has(k.toLowerCase()));
  if (!headers.some(([k]) => k.toLowerCase() === "user-agent")) headers.push(["User-Agent", `Outpost/${VERSION}`]);

  // one deadline over every hop, the lookups included; the run's end aborts too
  const abort = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => { timedOut = true; abort.abort(); }, timeoutMs);
  const onRunEnd = () => abort.abort();
  deps.signal?.addEventListener("abort", onRunEnd, { once: true });
  const stopped = () => timedOut ? outboundFail(`the request to ${first} timed out after ${req.statedTimeoutMs ?? timeoutMs} ms`) : outboundFail("the request was cancelled (the run ended)");
  const until = <T>(p: Promise<T>): Promise<T> => new Promise<T>((resolve, reject) => {
    if (abort.signal.aborted) return reject(stopped());
    const onAbort = () => reject(stopped());
    abort.signal.addEventListener("abort", onAbort, { once: true });
    p.then((v) => { abort.signal.removeEventListener("abort", onAbort); resolve(v); }, (e) => { abort.signal.removeEventListener("abort", onAbort); reject(e); });
  });

  try {
    for (let hop = 0; ; hop++) {
      const res = await until(sendOnce(policy, url, method, headers, body, req.strictSSL, abort.signal, deps));
      const location = res.headers.get("location");
      if (res.status < 300 || res.status > 399 || res.status === 304 || !location || req.maxRedirects <= 0) {
        return { ...(await until(answerOf(res, url))), redirects: hop };
      }
      void res.body?.cancel().catch(() => {});
      if (hop >= Math.min(req.maxRedirects, OUTBOUND_LIMITS.redirects)) throw outboundFail(`more than ${Math.min(req.maxRedirects, OUTBOUND_LIMITS.redirects)} redirects (the last to ${location.slice(0, 200)})`);
      let next: URL;
      try { next = outboundUrl(new URL(location, url).toString()); }
      catch (e) { throw outboundFail(`a redirect to '${location.slice(0, 200)}' cannot be followed: ${e instanceof ApiError ? e.detail : String(e)}`); }
      // as browsers do: 303, and 301/302 after a POST, become a GET without a body
      if (res.status === 303 ? method !== "HEAD" : (res.status === 301 || res.status === 302) && method === "POST") {
        method = "GET";
        body = undefined;
        headers = headers.filter(([k]) => !k.toLowerCase().startsWith("content-"));
      }
      if (next.origin !== url.origin) headers = headers.filter(([k]) => !CREDENTIAL_HEADERS.has(k.toLowerCase()));
      url = next;
    }
  } finally {
    clearTimeout(timer);
    deps.signal?.removeEventListener("abort", onRunEnd);
    if (!abort.signal.aborted) abort.abort(); // whatever is still open (a body not read) closes
  }
}

/** One hop: the host resolved and checked, the connection made to the address checked. */
async function sendOnce(policy: EgressPolicy, url: URL, method: Method, headers: [string, string][], body: string | Uint8Array | undefined,
  strictSSL: boolean, signal: AbortSignal, deps: OutboundDeps): Promise<Response> {
  const addresses = await policy.resolve(url.hostname, deps.lookup ?? systemLookup);
  const name = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const https = url.protocol === "https:";
  const init: RequestInit & Record<string, unknown> = {
    method, headers: [...headers, ["Host", url.host]], body, signal, redirect: "manual",
    // never a proxy from the environment: the connection goes to the address checked
    proxy: false,
    // never a pooled connection: one made for another name, or without certificate checks, must
    // not carry this request
    keepalive: false,
  };
  // the addresses in the resolver's order, the next when one cannot be connected to (an IPv6
  // address without an IPv6 route); nothing was sent to it, so nothing is sent twice
  for (let i = 0; ; i++) {
    const address = addresses[i]!;
    const target = new URL(url);
    target.hostname = address.includes(":") ? `[${address}]` : address;
    if (https) {
      init.tls = {
        rejectUnauthorized: strictSSL,
        ...(target.hostname !== url.hostname ? { serverName: name } : {}),
        ...(deps.ca ? { ca: deps.ca } : {}),
        // a request with its own check gets a connection of its own (see above)
        checkServerIdentity: (_host: string, cert: Parameters<typeof checkServerIdentity>[1]) => checkServerIdentity(name, cert),
      };
    }
    try {
      return await fetch(target, init as RequestInit);
    } catch (e) {
      if (signal.aborted) throw e; // the caller says why (timeout, run ended)
      if (i + 1 < Math.min(addresses.length, MAX_ADDRESSES) && NOT_CONNECTED.has((e as { code?: string }).code ?? "")) continue;
      throw outboundFail(`${method} ${url.origin}${url.pathname.length > 100 ? `${url.pathname.slice(0, 100)}…` : url.pathname} failed: ${networkError(e, address, https)}`);
    }
  }
}

/** Addresses of one name tried at most. */
const MAX_ADDRESSES = 4;
/** Errors of a connection that was never made. */
const NOT_CONNECTED = new Set(["ConnectionRefused", "ECONNREFUSED", "ENETUNREACH", "EHOSTUNREACH", "NetworkUnreachable", "HostUnreachable", "EADDRNOTAVAIL"]);

/** A network error as a service developer can act on it. */
function networkError(e: unknown, address: string, https: boolean): string {
  const err = e as { code?: string; message?: string };
  const code = err.code ?? "";
  if (code === "ConnectionRefused" || code === "ECONNREFUSED") return `connection refused by ${address}`;
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME|TLS|SSL/i.test(code) && https)
    return `the server's certificate was not accepted (${code}); with a certificate no public authority signed, pass strictSSL: false`;
  if (code === "ECONNRESET" || code === "ConnectionClosed") return "the connection was closed by the server";
  return `${err.message ?? String(e)}${code && !(err.message ?? "").includes(code) ? ` (${code})` : ""}`;
}

/** The answer, its body read up to the limit. */
export async function answerOf(res: Response, url: URL): Promise<Omit<OutboundResponse, "redirects">> {
  const headers: [string, string][] = [];
  res.headers.forEach((v, k) => { if (k !== "set-cookie") headers.push([k, v]); });
  for (const c of res.headers.getSetCookie()) headers.push(["set-cookie", c]);
  let headerBytes = 0;
  for (const [k, v] of headers) headerBytes += k.length + v.length + 4;
  if (headers.length > 4 * OUTBOUND_LIMITS.headers || headerBytes > OUTBOUND_LIMITS.headerBytes) {
    void res.body?.cancel().catch(() => {});
    throw outboundFail(`the response's headers are larger than ${OUTBOUND_LIMITS.headerBytes >> 10} KiB`);
  }
  const tooLarge = () => outboundFail(`the response body is larger than ${mib(OUTBOUND_LIMITS.bodyBytes)}`);
  const declared = Number(res.headers.get("content-length") ?? "");
  if (declared > OUTBOUND_LIMITS.bodyBytes && !res.headers.get("content-encoding")) { void res.body?.cancel().catch(() => {}); throw tooLarge(); }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (res.body) {
    const reader = res.body.getReader();
    for (;;) {
      let next: Awaited<ReturnType<typeof reader.read>>;
      try { next = await reader.read(); }
      catch (e) { throw outboundFail(`the response body from ${url.origin} could not be read: ${(e as Error).message ?? String(e)}`); }
      const { done, value } = next;
      if (done) break;
      size += value.byteLength;
      if (size > OUTBOUND_LIMITS.bodyBytes) { void reader.cancel().catch(() => {}); throw tooLarge(); }
      chunks.push(value);
    }
  }
  const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
  return { status: res.status, statusText: res.statusText || STATUS_CODES[res.status] || "", url: url.toString(), headers, body: new Uint8Array(body.buffer, body.byteOffset, body.byteLength) };
}
