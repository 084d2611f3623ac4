// The Prometheus text of counters and histograms, and the HTTP request series: counted per route
// and status, with label values escaped and the number of routes bounded.
import { describe, expect, test } from "bun:test";
import { Metrics } from "../../../src/core/metrics.ts";
import { RequestMetrics, routeLabel } from "../../../src/http/metrics.ts";

const lines = async (m: Metrics) => (await m.render()).split("\n");

describe("metrics text", () => {
  test("counters by label set, escaped; a series kept by its owner counts into the same line", async () => {
    const m = new Metrics();
    const c = m.counter("x_total", "things");
    c.inc({ a: "1" });
    c.inc({ a: "1" }, 2);
    c.inc({ a: 'q"\\\nz' });
    c.series({ a: "1" }).n += 4;
    c.inc();
    expect(c.get({ a: "1" })).toBe(7);
    const out = await lines(m);
    expect(out).toContain('x_total{a="1"} 7');
    expect(out).toContain('x_total{a="q\\"\\\\\\nz"} 1');
    expect(out).toContain("x_total 1");
    expect(out.filter((l) => l.startsWith("x_total")).length).toBe(3);
  });

  test("histograms: cumulative buckets, sum and count, with and without labels", async () => {
    const m = new Metrics();
    const h = m.histogram("d_seconds", "d", [0.1, 1]);
    for (const v of [0.05, 0.5, 5]) h.observe(v);
    const lh = m.labeledHistogram("r_seconds", "r", [0.1, 1]);
    lh.observe({ route: "/a" }, 0.05);
    lh.series({ route: "/a" }).observe(2);
    lh.observe({ route: "/b" }, 0.5);
    const out = await lines(m);
    expect(out).toEqual(expect.arrayContaining([
      'd_seconds_bucket{le="0.1"} 1', 'd_seconds_bucket{le="1"} 2', 'd_seconds_bucket{le="+Inf"} 3', "d_seconds_sum 5.55", "d_seconds_count 3",
      'r_seconds_bucket{route="/a",le="0.1"} 1', 'r_seconds_bucket{route="/a",le="1"} 1', 'r_seconds_bucket{route="/a",le="+Inf"} 2', 'r_seconds_count{route="/a"} 2',
      'r_seconds_bucket{route="/b",le="1"} 1', 'r_seconds_count{route="/b"} 1',
    ]));
  });
});

describe("HTTP request series", () => {
  const answer = (status: number) => new Response(null, { status });

  test("by route (ids folded) and status", async () => {
    const m = new Metrics();
    const rm = new RequestMetrics(m);
    const t0 = performance.now();
    rm.observe(new Request("http://h/api/v/1/data/0123456789abcdef0123?x=1"), t0, answer(200));
    rm.observe(new Request("http://h/api/v/1/data/fedcba98765432100123"), t0, answer(200));
    await rm.observe(new Request("http://h/api/v/1/data/fedcba98765432100123"), t0, Promise.resolve(answer(404)));
    const lost = new Request("http://h/nowhere/at/all");
    rm.unmatched.add(lost);
    rm.observe(lost, t0, answer(404));
    const out = await lines(m);
    expect(out).toContain('outpost_http_requests_total{route="/api/v/1/data",status="200"} 2');
    expect(out).toContain('outpost_http_requests_total{route="/api/v/1/data",status="404"} 1');
    expect(out).toContain('outpost_http_requests_total{route="unmatched",status="404"} 1');
    expect(out).toContain('outpost_http_request_seconds_count{route="/api/v/1/data"} 3');
    expect(routeLabel("/api/v/4/data/0123456789abcdef0123/x")).toBe("/api/v/4/data");
    expect(routeLabel("/admin/user/0123456789abcdef0123")).toBe("/admin/user/:id");
  });

  test("a caller inventing paths cannot grow the series past the bound: the rest count as other", async () => {
    const m = new Metrics();
    const rm = new RequestMetrics(m);
    for (let i = 0; i < 700; i++) rm.observe(new Request(`http://h/p${i}`), performance.now(), answer(200));
    const out = await lines(m);
    const series = out.filter((l) => l.startsWith("outpost_http_requests_total{"));
    expect(series.length).toBeLessThanOrEqual(501);
    const other = series.find((l) => l.includes('route="other"'));
    expect(other).toBeDefined();
    expect(Number(other!.split(" ")[1])).toBe(200);
  });
});
