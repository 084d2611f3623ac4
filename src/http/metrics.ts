// HTTP requests on /metrics: a count by route and status and a latency histogram by route. The
// route is the path's first four elements with ids and keys as ":id", so the series stay few
// whatever callers send (a path no route answered is "unmatched", and beyond a bound "other").
import type { Counter, LabeledHistogram, Metrics } from "../core/metrics.ts";

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
  /** path -> route label, made once per path */
  private readonly labels = new Map<string, string>();
  private readonly routes = new Set<string>();

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
    const route = this.unmatched.has(request) ? "unmatched" : this.route(request.url);
    this.requests.inc({ route, status: String(status) });
    this.seconds.observe({ route }, (performance.now() - t0) / 1000);
    return answer;
  }

  private route(url: string): string {
    const start = url.indexOf("/", url.indexOf("//") + 2);
    const q = url.indexOf("?", start);
    const path = start < 0 ? "/" : q < 0 ? url.slice(start) : url.slice(start, q);
    let label = this.labels.get(path);
    if (label === undefined) {
      label = routeLabel(path);
      if (!this.routes.has(label)) {
        if (this.routes.size >= MAX_ROUTES) label = "other";
        else this.routes.add(label);
      }
      if (this.labels.size >= MAX_PATHS) this.labels.clear(); // paths are many, routes few
      this.labels.set(path, label);
    }
    return label;
  }
}
