// HTTP requests on /metrics: a count by route and status and a latency histogram by route. The
// route is the pattern the request matched, as registered (`/admin/edges/:systemKey/:name`),
// never the path: ids and names a caller sends make no series, and a path no route matches is
// "unmatched". With --metrics-system-labels, requests and server errors per system too.
import { Memoirist } from "memoirist";
import { type Counter, type CounterSeries, type HistogramSeries, type LabeledHistogram, type Metrics, OTHER, type TopLabels } from "../core/metrics.ts";
import { type PlainHandler, pathOf, plainHandlerOf } from "./request.ts";
import { routedPath } from "./throttle.ts";

/** Paths remembered with their route (paths are many, routes few): past this the memory starts over. */
const MAX_PATHS = 10_000;
export const UNMATCHED = "unmatched";

/** A route as requests are counted and logged under it. */
export interface Route {
  /** the pattern as registered, or "unmatched" */
  readonly label: string;
  /** the index of the path element that is the route's `:systemKey`, -1 when it has none */
  readonly systemKeyAt: number;
  readonly seconds: HistogramSeries;
  readonly byStatus: Map<number, CounterSeries>;
}

/** What a request's method and path find: its route, and for a route declared plain its handler
 *  with the path's parameters (decoded), for the API to answer without Elysia. */
export interface RouteMatch {
  readonly route: Route;
  readonly plain: PlainHandler | null;
  readonly params: Record<string, string>;
}

/** Where the router points: a route's label, and its plain handler for that method. */
interface Routed { label: string; plain: PlainHandler | null }

const NO_PARAMS: Record<string, string> = Object.freeze({}) as Record<string, string>;

/** Called with each answer counted (the access log, per-system counts). `path`: the request's
 *  path, its repeated slashes collapsed. */
export type AnswerListener = (request: Request, route: Route, path: string, status: number, ms: number, answer: unknown) => void;

/** The element of a path at an index (0: the first after the leading slash), decoded. */
export function pathElement(path: string, index: number): string {
  // (found by scanning rather than split: no array and no strings but the one returned)
  let start = 1;
  for (let i = 0; i < index; i++) {
    const slash = path.indexOf("/", start);
    if (slash < 0) return "";
    start = slash + 1;
  }
  const end = path.indexOf("/", start);
  const raw = path.slice(start, end < 0 ? path.length : end);
  // (decodeURIComponent costs the better part of a microsecond even with nothing to decode: it
  // was about a fifth of the audit trail's CPU per audited write)
  if (!raw.includes("%")) return raw;
  try { return decodeURIComponent(raw); } catch { return raw; }
}

export class RequestMetrics {
  private readonly requests: Counter;
  private readonly seconds: LabeledHistogram;
  private router: Memoirist<Routed> | null = null;
  /** per method, path -> its route (and plain handler), found once per path */
  private readonly paths = new Map<string, Map<string, RouteMatch>>();
  private readonly routes = new Map<string, Route>();
  /** per system (with --metrics-system-labels) */
  readonly systems: SystemRequestMetrics | null;

  constructor(metrics: Metrics, systemLabels = 0) {
    this.systems = systemLabels > 0 ? new SystemRequestMetrics(metrics, metrics.topLabels(systemLabels)) : null;
    this.requests = metrics.counter("outpost_http_requests_total", "HTTP requests answered, by route pattern and status");
    this.seconds = metrics.labeledHistogram("outpost_http_request_seconds", "HTTP request latency by route pattern",
      [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]);
  }

  /** The routes requests are counted under: the app's, given once it is built (the HTTP and
   *  HTTPS listeners' apps have the same). A WebSocket route is reached by a GET. */
  useRoutes(routes: readonly { method: string; path: string; handler?: unknown }[]) {
    if (this.router) return;
    const router = new Memoirist<Routed>();
    for (const r of routes) router.add(r.method === "WS" ? "GET" : r.method, r.path, { label: r.path, plain: plainHandlerOf(r.handler) ?? null });
    this.router = router;
  }

  /** The route a request is counted under. */
  routeOf(method: string, path: string): Route { return this.match(method, path).route; }

  /** The route of a method and path (the request's path, its query left out), with its plain
   *  handler and parameters. */
  match(method: string, path: string): RouteMatch {
    let byPath = this.paths.get(method);
    if (!byPath) this.paths.set(method, (byPath = new Map()));
    let m = byPath.get(path);
    if (m === undefined) {
      const routed = routedPath(path);
      const found = this.router?.find(method, routed);
      // a HEAD is counted under its GET route, and answered by Elysia (without a body)
      const head = !found && method === "HEAD" ? this.router?.find("GET", routed) : null;
      const store = found?.store ?? head?.store;
      m = { route: this.ofRoute(store ? store.label : UNMATCHED), plain: found?.store.plain ?? null, params: found?.store.plain ? decodedParams(found.params) : NO_PARAMS };
      if (byPath.size >= MAX_PATHS) byPath.clear();
      byPath.set(path, m);
    }
    return m;
  }

  /** The values of a path's parameters under its route (only when a line needs them). */
  params(method: string, path: string): Record<string, string> {
    const found = this.router?.find(method, routedPath(path));
    return (found?.params as Record<string, string> | undefined) ?? {};
  }

  /** Counts an answer (or, for a promise, the answer it settles to), tells `then` of it, and
   *  passes it on. */
  observe<T>(request: Request, t0: number, answer: T, then: AnswerListener | null, route?: Route, path?: string): T {
    if (answer instanceof Promise) return answer.then((r) => this.record(request, t0, r, then, route, path), (err) => { this.record(request, t0, undefined, then, route, path); throw err; }) as T;
    return this.record(request, t0, answer, then, route, path);
  }

  /** `route` and `path`: the request's, when the caller has already found them. */
  private record<T>(request: Request, t0: number, answer: T, then: AnswerListener | null, known?: Route, knownPath?: string): T {
    const status = answer instanceof Response ? answer.status : 200;
    const path = knownPath ?? pathOf(request.url);
    const route = known ?? this.routeOf(request.method, path);
    let count = route.byStatus.get(status);
    if (!count) route.byStatus.set(status, (count = this.requests.series({ route: route.label, status: String(status) })));
    count.n++;
    const ms = performance.now() - t0;
    route.seconds.observe(ms / 1000);
    then?.(request, route, path, status, ms, answer);
    return answer;
  }

  private ofRoute(label: string): Route {
    let r = this.routes.get(label);
    if (!r) {
      const systemKeyAt = label.split("/").indexOf(":systemKey") - 1;
      this.routes.set(label, (r = { label, systemKeyAt: systemKeyAt < 0 ? -1 : systemKeyAt, seconds: this.seconds.series({ route: label }), byStatus: new Map() }));
    }
    return r;
  }
}

/** A plain route's parameters as Elysia gives them to a handler: decoded. */
function decodedParams(raw: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k in raw) {
    const v = raw[k]!;
    if (!v.includes("%")) { out[k] = v; continue; }
    try { out[k] = decodeURIComponent(v); } catch { out[k] = v; }
  }
  return out;
}

/** Requests and server errors (5xx) per system, for the systems --metrics-system-labels gives a
 *  label (the others are "other"). */
export class SystemRequestMetrics {
  private readonly requests: Counter;
  private readonly errors: Counter;
  private readonly series = new Map<string, { requests: CounterSeries; errors: CounterSeries }>();

  constructor(metrics: Metrics, private readonly labels: TopLabels) {
    this.requests = metrics.counter("outpost_system_http_requests_total", "HTTP requests answered per system (--metrics-system-labels busiest systems, the rest as other)");
    this.errors = metrics.counter("outpost_system_http_errors_total", "HTTP answers with a 5xx status per system (--metrics-system-labels busiest systems, the rest as other)");
  }

  /** `known`: the system is known to exist (a token of it, or a successful answer), so it may get a place. */
  count(systemKey: string, known: boolean, status: number) {
    const label = systemKey ? this.labels.of(systemKey, known) : OTHER;
    let s = this.series.get(label);
    if (!s) this.series.set(label, (s = { requests: this.requests.series({ system_key: label }), errors: this.errors.series({ system_key: label }) }));
    s.requests.n++;
    if (status >= 500) s.errors.n++;
  }
}
