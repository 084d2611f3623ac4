// Reading requests the way existing clients send them: header spellings
// in any case, a token that identifies its system by itself, JSON bodies whatever the
// Content-Type, the first of repeated query parameters.
import { type Principal, readOnlyRefusal } from "../auth/principal.ts";
import type { Tokens } from "../auth/tokens.ts";
import { ApiError, fail } from "../core/errors.ts";
import { checkJsonText } from "../core/validate.ts";

const TOKEN_HEADERS = [
  "clearblade-usertoken", "platform-usertoken",
  "clearblade-devtoken", "platform-devtoken",
  "clearblade-devicetoken", "platform-devicetoken",
] as const;

export function tokenOf(req: Request): string | null {
  const h = req.headers;
  for (const name of TOKEN_HEADERS) {
    const v = h.get(name);
    if (v) return v;
  }
  return null;
}

/** The path of an absolute URL, without its query. */
export function pathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start < 0) return "/";
  const q = url.indexOf("?", start);
  return q < 0 ? url.slice(start) : url.slice(start, q);
}

export const systemKeyOf = (req: Request) => req.headers.get("clearblade-systemkey") ?? req.headers.get("platform-systemkey");
export const systemSecretOf = (req: Request) => req.headers.get("clearblade-systemsecret") ?? req.headers.get("platform-systemsecret");

/** The caller of a request, resolved from its token. */
export async function principalOf(tokens: Tokens, req: Request): Promise<Principal> {
  const token = tokenOf(req);
  if (!token) throw fail("AUTH_REQUIRED", "a token header is required (ClearBlade-UserToken, ClearBlade-DevToken or ClearBlade-DeviceToken)");
  const p = await tokens.resolve(token);
  if (!p) throw fail("INVALID_TOKEN", "the token is invalid, expired or logged out");
  const refused = readOnlyRefusal(p, req.method);
  if (refused) throw refused;
  return p;
}

/** The caller from the token cache without waiting; undefined when that needs the database. */
export function knownCaller(tokens: Tokens, req: Request): Principal | undefined {
  const token = tokenOf(req);
  const p = token ? tokens.resolveNow(token) : undefined;
  // a scoped developer key takes the slow path, which refuses what it may not do
  return p?.kind === "developer" && p.key ? undefined : p;
}

/** The caller from the token cache without waiting, or the principalOf promise on a miss (hot
 *  routes answer without an async step when they can). */
export function callerOf(tokens: Tokens, req: Request): Principal | Promise<Principal> {
  return knownCaller(tokens, req) ?? principalOf(tokens, req);
}

/** Route handlers that need their caller: `const caller = withCaller(s.tokens)`, then
 *  `.get(path, caller((p, { params }) => ...))`. The token is resolved before the handler runs (a
 *  missing or bad one fails as in principalOf), a cached one without waiting, so the wrapper costs
 *  nothing over resolving the caller by hand. The wrapper destructures the context rather than
 *  passing it on whole: Elysia reads a handler's source to decide what to prepare for it (body,
 *  query, headers), and request and params need nothing prepared. */
export const withCaller = (tokens: Tokens) =>
  <R>(handle: (p: Principal, ctx: RouteContext) => R) =>
    async ({ request, params }: { request: Request; params: object }): Promise<Awaited<R>> => {
      const known = callerOf(tokens, request);
      return await handle(known instanceof Promise ? await known : known, { request, params: params as PathParams });
    };

/** A route's handler that the API may call without Elysia (see `plain`): the request and its
 *  path's parameters in, a JSON-able value, a Response, or a promise of one out. */
export type PlainHandler = (request: Request, params: PathParams) => unknown;
const plainHandlers = new WeakMap<object, PlainHandler>();

/** A handler with nothing for Elysia to do per request (no hook, no schema, no body parsing:
 *  it reads the request itself), registered as usual, `.get(path, plain((request, params) => ...))`.
 *  The API answers its requests straight from its own wrap, with the same checks around it
 *  (throttle, CORS, metrics, the error envelope), without building Elysia's context: a tenth of
 *  a small request's CPU. Elysia's own route stays (it answers HEAD). */
export function plain(handle: PlainHandler) {
  const h = ({ request, params }: { request: Request; params: object }) => handle(request, params as PathParams);
  plainHandlers.set(h, handle);
  return h;
}

/** The plain handler a route was registered with, if any. */
export const plainHandlerOf = (handler: unknown): PlainHandler | undefined =>
  typeof handler === "function" ? plainHandlers.get(handler) : undefined;

/** JSON bodies encoded once, by the value they were encoded from (a cached answer the domain
 *  hands out again unchanged) and what else went into them. */
const encodedBodies = new WeakMap<object, { variant: unknown; base: string; body: Blob }>();

/** The JSON answer `make` gives, its body encoded once for `source` while `variant` (compared by
 *  identity) and `base` (by value: what else `make` reads) stay the same: a client polling a cached answer is sent the
 *  same bytes without encoding them again. The answer's type is Response.json's, the Blob's: Bun
 *  gives it to the headers when they are read before the body (a listener and the edge's relay
 *  do). A Response on a Blob costs a third of Response.json's CPU (no encoding, no headers
 *  object per request). */
export function reusedJson(source: object, variant: unknown, base: string, make: () => unknown): Response {
  const kept = encodedBodies.get(source);
  if (kept !== undefined && kept.variant === variant && kept.base === base) return new Response(kept.body);
  const body = new Blob([JSON.stringify(make())], { type: JSON_TYPE });
  encodedBodies.set(source, { variant, base, body });
  return new Response(body);
}
const JSON_TYPE = "application/json;charset=utf-8";

/** What a wrapped handler gets. Elysia types a handler's params from its path, but not through a
 *  wrapper: these are the names the routes use, and each route's path has those its handler reads. */
export interface RouteContext { request: Request; params: PathParams }
export interface PathParams { systemKey: string; name: string; key: string; file: string; caseName: string; version: string }

/** Like principalOf, but a request without a token is anonymous (null). A bad token is still an error. */
export async function optionalPrincipalOf(tokens: Tokens, req: Request): Promise<Principal | null> {
  return tokenOf(req) ? principalOf(tokens, req) : null;
}

export const MAX_BODY_BYTES = 32 * 1024 * 1024;

/** Each body read through textBody, by its request: what looks at a request once it is answered
 *  (the audit trail) reads it here, as the handler read it, rather than copying every body. */
export const bodyTexts = new WeakMap<Request, string>();

/** The body as text, within the size limit ("" for none). */
export async function textBody(req: Request): Promise<string> {
  if (req.method === "GET" || req.method === "HEAD") return "";
  const len = Number(req.headers.get("content-length") ?? "0");
  if (len > MAX_BODY_BYTES) throw fail("PAYLOAD_TOO_LARGE", `request body is larger than ${MAX_BODY_BYTES} bytes`);
  let text: string;
  try { text = await req.text(); } catch { throw fail("BAD_JSON", "could not read the request body"); }
  if (text.length > MAX_BODY_BYTES) throw fail("PAYLOAD_TOO_LARGE", `request body is larger than ${MAX_BODY_BYTES} bytes`);
  if (text) bodyTexts.set(req, text);
  return text;
}

/** Parses a JSON body regardless of Content-Type. Empty body: undefined. */
export async function jsonBody(req: Request): Promise<unknown> {
  const text = await textBody(req);
  if (!text.trim()) return undefined;
  checkJsonText(text);
  try { return JSON.parse(text); } catch (e) {
    throw new ApiError("BAD_JSON", `request body is not valid JSON: ${(e as Error).message}`);
  }
}

/** Query parameters with the FIRST value winning (clients sometimes repeat `query`);
 *  both %20 and + decode to a space. */
export class QueryParams {
  private params: URLSearchParams | undefined;
  private readonly search: string;
  constructor(url: string) {
    const i = url.indexOf("?");
    this.search = i < 0 ? "" : url.slice(i + 1);
  }
  private all(): URLSearchParams {
    return (this.params ??= new URLSearchParams(this.search));
  }
  get(name: string): string | null {
    // One scan for the common case of plain parameter names; URLSearchParams for the rest.
    if (this.params || !/^[A-Za-z_]+$/.test(name)) return this.all().get(name);
    const s = this.search;
    let at = 0;
    while (at < s.length) {
      const end = s.indexOf("&", at);
      const stop = end < 0 ? s.length : end;
      if (s.startsWith(name, at) && (s.charCodeAt(at + name.length) === 61 /* = */ || at + name.length === stop)) {
        const raw = at + name.length === stop ? "" : s.slice(at + name.length + 1, stop);
        try { return decodeURIComponent(raw.includes("+") ? raw.replace(/\+/g, " ") : raw); } catch { return this.all().get(name); }
      }
      at = stop + 1;
    }
    return null;
  }
  /** Every value of every parameter, in order (webhooks pass them all on). */
  entries(): [string, string][] { return [...this.all().entries()]; }
}

export const queryOf = (req: Request) => new QueryParams(req.url);

/** A query parameter that is "true" or "false" (absent: undefined); anything else is refused. */
export function flagParam(q: QueryParams, name: string): boolean | undefined {
  const v = q.get(name);
  if (v === null) return undefined;
  if (v !== "true" && v !== "false") throw fail("INVALID_ARGUMENT", `${name} must be true or false`);
  return v === "true";
}

/** Elements of a long array written between two turns of the event loop. */
const JSON_SLICE = 500;

/** JSON text of a value; a long array (a whole fleet's records: 8 MB for 10,000 edges, 20 ms in
 *  one go) is written a slice at a time, the event loop given back between slices. */
export async function jsonText(body: unknown): Promise<string> {
  if (!Array.isArray(body) || body.length <= JSON_SLICE) return JSON.stringify(body);
  const parts: string[] = [];
  for (let i = 0; i < body.length; i += JSON_SLICE) {
    if (i) await new Promise((r) => setImmediate(r));
    const text = JSON.stringify(body.slice(i, i + JSON_SLICE));
    parts.push(text.slice(1, -1));
  }
  return `[${parts.join(",")}]`;
}

/** A JSON answer, written as jsonText does. */
export const jsonAnswer = async (body: unknown) => new Response(await jsonText(body), { headers: { "content-type": JSON_TYPE } });

/** A JSON answer with an ETag of its body; a request whose If-None-Match names that tag gets 304
 *  and no body. A client polling a view (the console's fleet page) pays a few hundred bytes for
 *  an answer that did not change. */
export async function conditionalJson(req: Request, body: unknown): Promise<Response> {
  const text = await jsonText(body);
  const tag = `"${Bun.hash(text).toString(36)}"`;
  const headers = { etag: tag, "cache-control": "no-cache" };
  const asked = req.headers.get("if-none-match");
  if (asked && asked.split(",").some((t) => t.trim().replace(/^W\//, "") === tag)) return new Response(null, { status: 304, headers });
  return new Response(text, { headers: { ...headers, "content-type": "application/json; charset=utf-8" } });
}
