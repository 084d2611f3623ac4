// Outbound HTTP: ClearBlade's Requests() (classic callbacks) and fetch (promises), with a small
// AbortController/AbortSignal for fetch's signal. One host operation, http.request, sends every
// request through the egress policy (outbound.ts); its arguments come from user code and are
// checked here, type by type.
//
// Bodies cross the sandbox boundary as JSON text: a response as its text when it is valid UTF-8,
// else (fetch only) as its bytes percent-escaped (see escapedOf), which fetch's body, text() and
// arrayBuffer() decode only when asked; a binary request body (a typed array) escaped the same way.
import { fail } from "../../core/errors.ts";
import { METHODS, type Method, OUTBOUND_LIMITS, type OutboundRequest, sendOutbound } from "../outbound.ts";
import type { HostContext, LibraryArea } from "./types.ts";

/** Outbound requests of one system under way at once; more wait (within their own timeout). */
export const SYSTEM_IN_FLIGHT = 16;
/** Requests of one system waiting for a slot; more are refused. */
const SYSTEM_WAITING = 256;
/** A URL's length at most, query string included. */
const URL_MAX = 16 << 10;

const slots = new Map<string, { n: number; waiting: (() => void)[] }>();

/** A slot for one of the system's requests, or an error when none frees up before `deadline`. */
async function acquire(systemKey: string, deadline: number, signal: AbortSignal): Promise<() => void> {
  let s = slots.get(systemKey);
  if (!s) slots.set(systemKey, (s = { n: 0, waiting: [] }));
  const slot = s;
  const release = () => {
    const next = slot.waiting.shift();
    if (next) next();
    else if (--slot.n === 0) slots.delete(systemKey);
  };
  if (slot.n < SYSTEM_IN_FLIGHT) { slot.n++; return release; }
  if (slot.waiting.length >= SYSTEM_WAITING) throw fail("OUTBOUND_FAILED", `too many outbound requests of this system at once (${SYSTEM_IN_FLIGHT} under way, ${SYSTEM_WAITING} waiting)`);
  await new Promise<void>((resolve, reject) => {
    const go = () => { clearTimeout(timer); signal.removeEventListener("abort", gone); resolve(); };
    const drop = (why: string) => { const i = slot.waiting.indexOf(go); if (i >= 0) slot.waiting.splice(i, 1); reject(fail("OUTBOUND_FAILED", why)); };
    const gone = () => drop("the request was cancelled (the run ended)");
    const timer = setTimeout(() => drop(`the request waited for its turn past its timeout (${SYSTEM_IN_FLIGHT} requests of this system under way)`), Math.max(0, deadline - Date.now()));
    signal.addEventListener("abort", gone, { once: true });
    slot.waiting.push(go);
  });
  return release;
}

/** What the run's requests hold: aborted when the run ends. */
const runRequests = (x: HostContext) =>
  x.run.resource("http", () => {
    const abort = new AbortController();
    return { value: abort.signal, close: () => abort.abort() };
  });

const isPlainObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);
const scalar = (v: unknown) => typeof v === "string" || typeof v === "number" || typeof v === "boolean";

/** The headers as pairs: an object of names to values (or arrays of values), or pairs. */
function headerList(h: unknown): [string, string][] {
  if (h === undefined || h === null) return [];
  const out: [string, string][] = [];
  const add = (k: unknown, v: unknown) => {
    if (out.length > OUTBOUND_LIMITS.headers) throw fail("INVALID_ARGUMENT", `at most ${OUTBOUND_LIMITS.headers} request headers`);
    if (typeof k !== "string") throw fail("INVALID_ARGUMENT", "header names must be strings");
    if (Array.isArray(v)) { for (const x of v) add(k, x); return; }
    if (!scalar(v)) throw fail("INVALID_ARGUMENT", `the value of header '${k.slice(0, 64)}' must be a string, a number or a boolean`);
    out.push([k, String(v)]);
  };
  if (Array.isArray(h)) {
    for (const p of h) { if (!Array.isArray(p) || p.length !== 2) throw fail("INVALID_ARGUMENT", "headers given as a list must be [name, value] pairs"); add(p[0], p[1]); }
  } else if (isPlainObject(h)) {
    let n = 0;
    for (const k in h) {
      if (++n > OUTBOUND_LIMITS.headers) throw fail("INVALID_ARGUMENT", `at most ${OUTBOUND_LIMITS.headers} request headers`);
      add(k, h[k]);
    }
  } else throw fail("INVALID_ARGUMENT", "headers must be an object of names to values");
  return out;
}

/** Form and query parameters: an object of names to scalars (or arrays of them). */
function params(v: Record<string, unknown>, what: string): URLSearchParams {
  const p = new URLSearchParams();
  let n = 0;
  for (const k in v) {
    const x = v[k];
    for (const item of Array.isArray(x) ? x : [x]) {
      if (++n > 1000) throw fail("INVALID_ARGUMENT", `at most 1000 ${what} parameters`);
      if (item === undefined || item === null) continue;
      if (!scalar(item)) throw fail("INVALID_ARGUMENT", `${what} parameter '${k.slice(0, 64)}' must be a string, a number or a boolean`);
      p.append(k, String(item));
    }
  }
  return p;
}

const has = (headers: [string, string][], name: string) => headers.some(([k]) => k.toLowerCase() === name);

/** The request user code asked for, every argument checked. */
export function requestOf(a: Record<string, any>): OutboundRequest {
  const fromRequests = a.from === "requests";
  const method = typeof a.method === "string" ? a.method.toUpperCase() : a.method;
  if (!METHODS.includes(method)) throw fail("INVALID_ARGUMENT", `the method must be one of ${METHODS.join(", ")}`);
  if (typeof a.url !== "string" || a.url === "") throw fail("INVALID_ARGUMENT", `the ${fromRequests ? "uri" : "URL"} must be a string (an absolute http or https URL)`);
  let url = a.url;
  if (a.qs !== undefined && a.qs !== null) {
    if (!isPlainObject(a.qs)) throw fail("INVALID_ARGUMENT", "qs must be an object of query parameters");
    const q = params(a.qs, "query").toString();
    if (q) url += (url.includes("?") ? "&" : "?") + q;
  }
  if (url.length > URL_MAX) throw fail("INVALID_ARGUMENT", `the URL is longer than ${URL_MAX >> 10} KiB`);
  const headers = headerList(a.headers);

  for (const k of ["json", "strictSSL"] as const)
    if (a[k] !== undefined && a[k] !== null && typeof a[k] !== "boolean") throw fail("INVALID_ARGUMENT", `${k} must be true or false`);
  if (a.json === true && !has(headers, "accept")) headers.push(["Accept", "application/json"]);

  let body: string | Uint8Array | undefined;
  let contentType = "";
  if (a.bodyEscaped !== undefined) {
    const latin1 = typeof a.bodyEscaped === "string" ? unescape(a.bodyEscaped) : "";
    if (typeof a.bodyEscaped !== "string" || /[^\x00-\xff]/.test(latin1)) throw fail("INVALID_ARGUMENT", "the body must be a string or bytes");
    body = new Uint8Array(Buffer.from(latin1, "latin1"));
  } else if (isPlainObject(a.form) || (a.form === true && isPlainObject(a.body))) {
    body = params(isPlainObject(a.form) ? a.form : a.body, "form").toString();
    contentType = "application/x-www-form-urlencoded";
  } else if (a.form !== undefined && a.form !== null && typeof a.form !== "boolean") {
    throw fail("INVALID_ARGUMENT", "form must be an object of form fields (or true, to send the body as a form)");
  } else if (typeof a.body === "string") {
    body = a.body;
  } else if (a.body !== undefined && a.body !== null) {
    body = JSON.stringify(a.body);
    contentType = "application/json";
  }
  // a GET or HEAD carries no body (ClearBlade's examples pass one anyway): none is sent
  if (method === "GET" || method === "HEAD") body = undefined;
  else if (contentType && !has(headers, "content-type")) headers.push(["Content-Type", contentType]);

  if (a.auth !== undefined && a.auth !== null) {
    if (!isPlainObject(a.auth)) throw fail("INVALID_ARGUMENT", "auth must be {user, pass} (or {bearer})");
    const user = a.auth.user ?? a.auth.username, pass = a.auth.pass ?? a.auth.password ?? "";
    if (typeof a.auth.bearer === "string") headers.push(["Authorization", `Bearer ${a.auth.bearer}`]);
    else if (typeof user === "string" && typeof pass === "string") headers.push(["Authorization", `Basic ${Buffer.from(`${user}:${pass}`).toString("base64")}`]);
    else throw fail("INVALID_ARGUMENT", "auth must be {user, pass} with strings (or {bearer})");
  }

  let timeoutMs: number = OUTBOUND_LIMITS.defaultTimeoutMs;
  if (a.timeout !== undefined && a.timeout !== null) {
    if (typeof a.timeout !== "number" || !Number.isFinite(a.timeout) || a.timeout <= 0) throw fail("INVALID_ARGUMENT", "timeout must be a positive number");
    // ClearBlade's Requests takes seconds, the request library milliseconds: a Requests timeout
    // up to 60 is seconds (no one means 60 ms), a larger one milliseconds
    timeoutMs = fromRequests && a.timeout <= 60 ? a.timeout * 1000 : a.timeout;
  }

  let maxRedirects: number = OUTBOUND_LIMITS.redirects;
  const f = a.followRedirect;
  if (f === false) maxRedirects = 0;
  else if (typeof f === "number" && Number.isInteger(f) && f >= 0) maxRedirects = Math.min(f, OUTBOUND_LIMITS.redirects);
  else if (f !== undefined && f !== null && f !== true) throw fail("INVALID_ARGUMENT", "followRedirect must be true, false or a number of redirects");

  return { method: method as Method, url, headers, body, timeoutMs: Math.min(timeoutMs, OUTBOUND_LIMITS.maxTimeoutMs), maxRedirects, strictSSL: a.strictSSL !== false };
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

export const http: LibraryArea = {
  ops: {
    "http.request": async (x, a) => {
      const req = requestOf(a);
      const signal = runRequests(x);
      const deadline = Date.now() + req.timeoutMs;
      const release = await acquire(x.systemKey, deadline, signal);
      let res: Awaited<ReturnType<typeof sendOutbound>>;
      // the wait for a slot counts toward the request's timeout
      try {
        const left = { ...req, timeoutMs: Math.max(1, deadline - Date.now()), statedTimeoutMs: req.timeoutMs };
        res = x.e.ownApi?.serves(req.url) ? await x.e.ownApi.send(left, signal) : await sendOutbound(x.e.egress, left, { signal });
      }
      finally { release(); }
      const head = { status: res.status, statusText: res.statusText, url: res.url, redirected: res.redirects > 0, headers: res.headers };
      const bytes = Buffer.from(res.body.buffer, res.body.byteOffset, res.body.byteLength);
      // Requests answers text; fetch the bytes when they are not text
      if (a.from !== "fetch") return { ...head, text: bytes.toString("utf8") };
      try { return { ...head, text: strictUtf8.decode(bytes) }; }
      catch { return { ...head, escaped: escape(bytes.toString("latin1")) }; }
    },
  },
};
