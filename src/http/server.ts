// The HTTP API: one Elysia app serving every route group (docs/api.md lists them), with the
// conventions existing ClearBlade clients expect: repeated slashes normalised, one error envelope for every failure, CORS for
// web apps on other origins, plain HTTP and HTTPS listeners, and the web console (/console).
import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { Elysia } from "elysia";
import { ApiError, envelope, ErrorKinds, fail } from "../core/errors.ts";
import type { Metrics } from "../core/metrics.ts";
import { diskFull, uniqueViolation } from "../store/db.ts";
import { MAX_BODY_BYTES, type PathParams, pathOf, plainHandlerOf } from "./request.ts";
import * as routeGroups from "./routeGroups.ts";
import { HttpThrottle, throttledError } from "./throttle.ts";
import { RequestMetrics, type RouteMatch } from "./metrics.ts";
import { AccessLog, errorOf, noteError } from "./access.ts";
import { Cors } from "./cors.ts";
import { consoleRoutes } from "./console.ts";
import { relayedEdge, relayIdleSeconds, relayToEdge } from "./edgeRelay.ts";
import type { Services } from "./services.ts";
import { HttpAudit } from "./audit.ts";
import { COMMIT, VERSION } from "../version.ts";

const JSON_HEADERS = { "content-type": "application/json; charset=utf-8" };

const STORAGE_FULL_DETAIL = "the server's disk is full: nothing was written; try again once space has been freed";
const STORAGE_FULL_RETRY_S = 30;
/** A full disk is said in the log once a minute, not once per refused write. */
const STORAGE_FULL_LOG_MS = 60_000;

export function errorResponse(e: unknown): Response {
  // a unique key no check before the write caught (another node wrote the same name meanwhile)
  if (!(e instanceof ApiError) && uniqueViolation(e)) e = new ApiError("ALREADY_EXISTS", "it already exists (written at the same time by another request)");
  if (!(e instanceof ApiError) && diskFull(e)) e = Object.assign(new ApiError("STORAGE_FULL", STORAGE_FULL_DETAIL), { retryAfterS: STORAGE_FULL_RETRY_S });
  const env = envelope(e);
  const after = e instanceof ApiError ? e.retryAfterS ?? (e.kind === ErrorKinds.DB_UNAVAILABLE ? 1 : undefined) : undefined;
  const headers = after !== undefined ? { ...JSON_HEADERS, "retry-after": String(after) } : JSON_HEADERS;
  const r = new Response(JSON.stringify(env), { status: env.statusCode, headers });
  noteError(r, env.error);
  return r;
}

/** A plain route's value as Elysia answers a handler's: an object as JSON, a Response as it is. */
const asResponse = (x: unknown) => (x instanceof Response ? x : Response.json(x));

const METRICS_HEADERS = { "content-type": "text/plain; version=0.0.4; charset=utf-8" };
const sha256 = (s: string) => createHash("sha256").update(s).digest();

/** GET /metrics on the API port: only with --metrics-token, and only to a caller bearing it. */
async function metricsAnswer(metrics: Metrics, token: string | undefined, request: Request): Promise<Response> {
  if (!token) throw fail("ROUTE_NOT_FOUND", "no such route");
  const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.get("authorization") ?? "");
  if (!m) throw fail("AUTH_REQUIRED", "/metrics needs Authorization: Bearer <the --metrics-token>");
  // compared as digests: in constant time, whatever the lengths
  if (!timingSafeEqual(sha256(m[1]!), sha256(token))) throw fail("PERMISSION_DENIED", "wrong metrics token");
  return new Response(await metrics.render(), { headers: METRICS_HEADERS });
}

/** Elysia's own error codes mapped onto the envelope. */
function fromElysia(code: string | number, error: unknown): ApiError | unknown {
  switch (code) {
    case "NOT_FOUND": return new ApiError("ROUTE_NOT_FOUND", "no such route");
    case "PARSE": return new ApiError("BAD_JSON", "request body is not valid JSON");
    case "VALIDATION": return new ApiError("INVALID_ARGUMENT", "invalid request");
    case "INVALID_COOKIE_SIGNATURE": return new ApiError("INVALID_ARGUMENT", "invalid cookie");
    default: return error;
  }
}

/** The URL with repeated slashes in its path collapsed, or null if there were none. */
function withSingleSlashes(url: string): string | null {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start < 0) return null;
  const q = url.indexOf("?", start);
  const path = q < 0 ? url.slice(start) : url.slice(start, q);
  if (!path.includes("//")) return null;
  return url.slice(0, start) + path.replace(/\/{2,}/g, "/") + (q < 0 ? "" : url.slice(q));
}

export function createHttpApp(s: Services) {
  // made again when a SIGHUP reload changes --cors-origins
  let cors = new Cors(s.config.corsOrigins), corsOf = s.config.corsOrigins;
  const corsNow = () => (corsOf === s.config.corsOrigins ? cors : (cors = new Cors(corsOf = s.config.corsOrigins)));
  const throttle = new HttpThrottle(s.throttle, s.tokens, (d) => {
    const r = errorResponse(throttledError(d));
    if (d.retryAfterS) r.headers.set("retry-after", String(d.retryAfterS));
    return r;
  }, (request) => app.server?.requestIP(request)?.address);
  // a request that holds a concurrency slot gives it back once its handler has the answer (which
  // also tells whether a sign-in failed)
  const settle = (request: Request, r: unknown) => {
    if (!throttle.holds(request)) return r;
    if (!(r instanceof Promise)) { throttle.release(request, r); return r; }
    return r.then((res) => { throttle.release(request, res); return res; }, (err) => { throttle.release(request); throw err; });
  };
  // one per process: the HTTP and HTTPS listeners count into the same series
  const requests = (s.requestMetrics ??= new RequestMetrics(s.metrics, s.config.metricsSystemLabels));
  const access = new AccessLog(s, requests, (request) => app.server?.requestIP(request)?.address);
  // writes go to the audit trail once answered (after the access log's line)
  const audit = s.audit?.enabled ? new HttpAudit(s.audit, s.tokens, requests) : null;
  const answered = audit ? audit.after(access.answered) : access.answered;
  let diskFullLoggedAt = 0;
  /** The answer to a request whose handler failed: the envelope, its id noted for the access log,
   *  and the error logged when it is not one of ours. */
  const failed = (request: Request, e: unknown): Response => {
    const r = errorResponse(e);
    const sent = errorOf(request, r)!;
    // the id the client got, to find its line from its report
    noteError(request, sent);
    if (diskFull(e)) {
      const now = Date.now();
      if (now - diskFullLoggedAt >= STORAGE_FULL_LOG_MS) { diskFullLoggedAt = now; s.log.error("the disk under the database is full: writes are refused (507) until space is freed", { err: e, errorId: sent.id }); }
    } else if (!(e instanceof ApiError)) s.log.error("unhandled error", { err: e, errorId: sent.id, method: request.method, route: requests.routeOf(request.method, pathOf(request.url)).label });
    return r;
  };
  /** A plain route's answer (see `plain`), as Elysia would give it: a value as JSON, a failure
   *  in the envelope. */
  const answerPlain = (request: Request, m: RouteMatch): unknown => {
    let x: unknown;
    try { x = m.plain!(request, m.params as unknown as PathParams); } catch (e) { return failed(request, e); }
    if (x instanceof Promise) return x.then(asResponse, (e: unknown) => failed(request, e));
    return asResponse(x);
  };
  /** The handler's answer; a request for one of the platform's edges (ClearBlade-Edge) is the
   *  edge's to answer. */
  const answer = (next: (r: Request) => unknown, r: Request, m: RouteMatch) => {
    const edge = relayedEdge(s, r);
    if (!edge) return m.plain && r.method !== "HEAD" ? answerPlain(r, m) : next(r);
    // the edge may stay silent up to --edge-request-timeout: the listener's idle limit (30 s)
    // would cut the caller's connection first
    app.server?.timeout(r, relayIdleSeconds(s.config.edgeRequestTimeout));
    return relayToEdge(s, r, edge).catch(errorResponse);
  };
  /** A routed request (not a preflight) as the wrap below serves it: throttled, answered (by
   *  `next`, Elysia's handler, unless the route is plain), CORS-decorated, counted and logged. */
  const served = (next: (r: Request) => unknown, request: Request, path: string, m: RouteMatch) => {
    const c = corsNow();
    const t0 = performance.now();
    access.before(request);
    audit?.before(request);
    const early = throttle.onRequest(request, path);
    if (early === undefined) return requests.observe(request, t0, c.allow(request, settle(request, answer(next, request, m))), answered, m.route, path);
    if (early instanceof Promise) return requests.observe(request, t0, c.allow(request, early.then((refused) => refused ?? settle(request, answer(next, request, m)))), answered, m.route, path);
    return requests.observe(request, t0, c.allow(request, early), answered, m.route, path);
  };
  const app: Elysia = new Elysia()
    // HTTP throttling around every handler (routed ones and not-found alike): a refusal answers
    // at once, and a concurrency slot is given back when the handler has its answer (an error's
    // too), before the answer leaves, so a client's next request finds it free. A wrap rather than onRequest and
    // onAfterHandle hooks: with those, Elysia builds every route's full context and a slower
    // handler (about 5 µs per request over HTTP here).
    //
    // CORS around that: a preflight is answered here (never throttled: it carries no token), and
    // every answer, an error or a refusal too, says which origin may read it.
    //
    // Outermost, the request counts on /metrics by route and status, with its latency, and is
    // written to the access log.
    .wrap((next: (r: Request) => unknown) => (request: Request) => {
      if (request.method === "OPTIONS") return corsNow().preflight(request);
      const path = pathOf(request.url);
      const m = requests.match(request.method, path);
      // a re-routed "//" request is counted as the original
      if (throttle.internal.has(request)) return answer(next, request, m);
      return served(next, request, path, m);
    })
    .onError({ as: "global" }, ({ code, error, request }) => {
      // Go clients build some paths with "//": route them as if the slashes were single. Done
      // only when no route matched, so normal requests pay nothing for it.
      if (code === "NOT_FOUND") {
        const fixed = withSingleSlashes(request.url);
        if (fixed) {
          const again = new Request(fixed, request);
          throttle.internal.add(again);
          return app.handle(again);
        }
      }
      return failed(request, fromElysia(code, error));
    })
    .get("/health", async () => {
      // with the build, so a fleet's versions can be read where its health is
      const r = { ...(s.health ? await s.health.report() : { status: "ok" }), version: VERSION, commit: COMMIT };
      return r.status === "ok" ? r : new Response(JSON.stringify(r), { status: 503, headers: JSON_HEADERS });
    })
    .get("/metrics", ({ request }) => metricsAnswer(s.metrics, s.config.metricsToken, request))
    .get("/api/about", () => ({ about: "Outpost", buildId: s.config.mode, version: VERSION, commit: COMMIT })) as unknown as Elysia;
  for (const routes of Object.values(routeGroups)) app.use(routes(s));
  app.use(consoleRoutes());
  requests.useRoutes(app.routes);
  // Plain routes also go to Bun's own router (Elysia hands Bun.serve its routes and these
  // replace its entries for them): their requests reach `served` without Elysia's call per
  // request, and a static one's without reading its URL (which Bun builds on the first read:
  // about 1 µs of CPU here). What Bun's router does not match (a "//" path, another method) still
  // goes through Elysia and the wrap.
  const direct: Record<string, Record<string, (request: Request) => unknown>> = {};
  const elysia = (request: Request) => app.fetch(request);
  for (const r of app.routes) {
    if (!plainHandlerOf(r.handler)) continue;
    const label = r.path, method = r.method;
    const known = /[:*]/.test(label) ? null : requests.match(method, label);
    (direct[encodeURI(label)] ??= {})[method] = known
      ? (request) => served(elysia, request, label, known)
      : (request) => {
        const path = pathOf(request.url);
        const m = requests.match(method, path);
        // Elysia's router and ours disagreeing: its way, as for any other route
        return m.plain ? served(elysia, request, path, m) : app.fetch(request);
      };
  }
  app.config.serve = { ...app.config.serve, routes: { ...app.config.serve?.routes, ...direct } } as typeof app.config.serve;
  return app;
}


export interface HttpServer {
  port: number;
  stop(): Promise<void>;
  /** Answers a request in this process, as if it came through the listener (a request an edge's
   *  platform relays to it). */
  handle(req: Request): Promise<Response>;
  /** An HTTPS listener: a new certificate and key for the connections it accepts from now on. */
  reloadTls?(tls: { cert: string; key: string }): void;
}

export function listenHttp(app: ReturnType<typeof createHttpApp>, port: number, hostname: string, tls?: { cert: string; key: string }): HttpServer {
  // Bun refuses bodies above this by itself; ours (MAX_BODY_BYTES) answers with the envelope first.
  // reusePort off: Elysia turns SO_REUSEPORT on by default, and a second instance on the same port
  // would then start and take half the connections instead of failing.
  const options = { hostname, maxRequestBodySize: MAX_BODY_BYTES * 2, reusePort: false };
  app.listen({ port, ...options, ...(tls ? { tls } : {}) });
  const server = app.server!;
  /** servers a certificate reload replaced, finishing the connections they had */
  const retired = new Set<NonNullable<typeof app.server>>();
  return {
    port: server.port!,
    handle: (req) => app.handle(req),
    stop: async () => {
      for (const old of retired) void old.stop(true);
      await app.stop(true);
    },
    // Bun cannot change a listening server's certificate: the server stops listening and keeps
    // its connections until they end (an edge's sync link stays up), and the app listens again on
    // the port with the new one (straight on the Bun server: Elysia's own stop would wait for
    // those connections, then forget the new server)
    ...(tls ? {
      reloadTls: (next: { cert: string; key: string }) => {
        const old = app.server!;
        retired.add(old);
        void old.stop(false).then(() => retired.delete(old));
        app.listen({ port: server.port!, ...options, tls: next });
      },
    } : {}),
  };
}

/** /metrics without a token on 127.0.0.1 (--metrics-port), for a scraper on the same machine. */
export function listenMetrics(metrics: Metrics, port: number): HttpServer {
  const server = Bun.serve({
    port, hostname: "127.0.0.1", reusePort: false,
    fetch: async (request) => (request.method === "GET" && pathOf(request.url) === "/metrics"
      ? new Response(await metrics.render(), { headers: METRICS_HEADERS })
      : errorResponse(fail("ROUTE_NOT_FOUND", "no such route: this port serves GET /metrics"))),
  });
  return { port: server.port!, stop: async () => { await server.stop(true); }, handle: async (req) => await server.fetch(req) };
}

/** The API's listeners: plain HTTP, and HTTPS when a certificate is configured (then
 *  `--http-port 0` turns plain HTTP off; without TLS it means any free port). One app per
 *  listener: an Elysia app upgrades WebSockets (the sync channel) on the one server it listens on. */
export function listenApi(s: Services): { http: HttpServer; https?: HttpServer } {
  const c = s.config;
  if (!c.tlsCert || !c.tlsKey) return { http: listenHttp(createHttpApp(s), c.httpPort, c.httpHost) };
  const tls = { cert: readFileSync(c.tlsCert, "utf8"), key: readFileSync(c.tlsKey, "utf8") };
  const https = listenHttp(createHttpApp(s), c.httpsPort, c.httpHost, tls);
  if (c.httpPort === 0) return { http: https, https };
  try {
    return { http: listenHttp(createHttpApp(s), c.httpPort, c.httpHost), https };
  } catch (err) {
    void https.stop();
    throw err;
  }
}
