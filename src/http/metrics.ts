// HTTP requests on /metrics: a count by route and status and a latency histogram by route. The
// route is the path's first four elements with ids and keys as ":id", so the series stay few
// whatever callers send (a path no route answered is "unmatched", and beyond a bound "other").
import type { Counter, CounterSeries, HistogramSeries, LabeledHistogram, Metrics } from "../core/metrics.ts";

// (short numbers stay: they are API versions, /api/v/1)
const ID = /^(?:[0-9a-fA-F]{16,}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{3,})$/;
/** Beyond this many routes new ones count as "other": a bound on the series, come what may. */
const MAX_ROUTES = 500;
const MAX_PATHS = 10_000;

export function routeLabel(path: string): string {
  const parts = path.split("/").filter(Boolean).slice(0, 4);
  return "/" + parts.map((p) => (ID.test(p) ? ":id" : p.length > 40 ? ":name" : p)).join("/");
}

export class RequestMetrics {
  private readonly requests: Counter;
  private readonly seconds: LabeledHistogram;
  /** path -> its route's series, found once per path */
  private readonly labels = new Map<string, RouteSeries>();
  private readonly routes = new Map<string, RouteSeries>();

  constructor(metrics: Metrics) {
    this.requests = metrics.counter("outpost_http_requests_total", "HTTP requests answered, by route and status");
    this.seconds = metrics.labeledHistogram("outpost_http_request_seconds", "HTTP request latency by route",
      [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]);
  }

  /** requests no route answered (their paths are the caller's invention) */
  readonly unmatched = new WeakSet<Request>();

  /** Counts an answer (or, for a promise, the answer it settles to) and passes it on. */
  observe<T>(request: Request, t0: number, answer: T): T {
    if (answer instanceof Promise) return answer.then((r) => this.record(request, t0, r), (err) => { this.record(request, t0, undefined); throw err; }) as T;
    return this.record(request, t0, answer);
  }

  private record<T>(request: Request, t0: number, answer: T): T {
    const status = answer instanceof Response ? answer.status : 200;
    const route = this.unmatched.has(request) ? this.ofRoute("unmatched") : this.route(request.url);
    let count = route.byStatus.get(status);
    if (!count) route.byStatus.set(status, (count = this.requests.series({ route: route.label, status: String(status) })));
    count.n++;
    route.seconds.observe((performance.now() - t0) / 1000);
    return answer;
  }

  private route(url: string): RouteSeries {
    const start = url.indexOf("/", url.indexOf("//") + 2);
    const q = url.indexOf("?", start);
    const path = start < 0 ? "/" : q < 0 ? url.slice(start) : url.slice(start, q);
    let route = this.labels.get(path);
    if (route === undefined) {
      const label = routeLabel(path);
      route = this.ofRoute(this.routes.has(label) || this.routes.size < MAX_ROUTES ? label : "other");
      if (this.labels.size >= MAX_PATHS) this.labels.clear(); // paths are many, routes few
      this.labels.set(path, route);
    }
    return route;
  }

  private ofRoute(label: string): RouteSeries {
    let r = this.routes.get(label);
    if (!r) this.routes.set(label, (r = { label, seconds: this.seconds.series({ route: label }), byStatus: new Map() }));
    return r;
  }
}

/** The series of one route, kept so that counting a request builds no label text. */
interface RouteSeries { label: string; seconds: HistogramSeries; byStatus: Map<number, CounterSeries> }
