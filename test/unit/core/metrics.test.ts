// The Prometheus text of counters and histograms, and the HTTP request series: counted per route
// pattern (never a path) and status, with label values escaped; labels from open-ended sets
// (system keys) bounded.
import { describe, expect, test } from "bun:test";
import { largest, Metrics, OTHER, TopLabels } from "../../../src/core/metrics.ts";
import { pathElement, RequestMetrics } from "../../../src/http/metrics.ts";

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
  const ROUTES = [
    { method: "GET", path: "/api/v/1/data/:key" }, { method: "POST", path: "/api/v/1/data/:key" },
    { method: "GET", path: "/admin/edges/:systemKey/:name" }, { method: "GET", path: "/admin/edges/:systemKey" },
    { method: "WS", path: "/api/v/4/sync" }, { method: "GET", path: "/api/v/4/webhook/execute/:systemKey/:name/*" },
  ];
  const withRoutes = (m: Metrics, systemLabels = 0) => { const rm = new RequestMetrics(m, systemLabels); rm.useRoutes(ROUTES); return rm; };

  test("by route pattern and status", async () => {
    const m = new Metrics();
    const rm = withRoutes(m);
    const t0 = performance.now();
    rm.observe(new Request("http://h/api/v/1/data/0123456789abcdef0123?x=1"), t0, answer(200), null);
    rm.observe(new Request("http://h/api/v/1/data/fedcba98765432100123"), t0, answer(200), null);
    await rm.observe(new Request("http://h/api/v/1/data/fedcba98765432100123"), t0, Promise.resolve(answer(404)), null);
    rm.observe(new Request("http://h/nowhere/at/all"), t0, answer(404), null);
    rm.observe(new Request("http://h/api/v/1/data/x", { method: "PUT" }), t0, answer(404), null);
    rm.observe(new Request("http://h//api/v/1//data/abc/"), t0, answer(200), null);
    const out = await lines(m);
    expect(out).toContain('outpost_http_requests_total{route="/api/v/1/data/:key",status="200"} 3');
    expect(out).toContain('outpost_http_requests_total{route="/api/v/1/data/:key",status="404"} 1');
    expect(out).toContain('outpost_http_requests_total{route="unmatched",status="404"} 2');
    expect(out).toContain('outpost_http_request_seconds_count{route="/api/v/1/data/:key"} 4');
  });

  test("names in paths make no series: 1,000 edge names, one route", async () => {
    const m = new Metrics();
    const rm = withRoutes(m);
    const series = async () => (await lines(m)).filter((l) => l.startsWith("outpost_http_request")).length;
    rm.observe(new Request("http://h/admin/edges/sk/first"), performance.now(), answer(404), null);
    const before = await series();
    for (let i = 0; i < 1000; i++) rm.observe(new Request(`http://h/admin/edges/sk/edge-${i}-${"x".repeat(i % 50)}`), performance.now(), answer(404), null);
    expect(await series()).toBe(before);
    expect(await lines(m)).toContain('outpost_http_requests_total{route="/admin/edges/:systemKey/:name",status="404"} 1001');
  });

  test("a WebSocket route is a GET; a wildcard route takes any tail; a listener hears each answer with its route and path", () => {
    const m = new Metrics();
    const rm = withRoutes(m);
    const heard: string[] = [];
    const listener = (_r: Request, route: { label: string; systemKeyAt: number }, path: string, status: number) => heard.push(`${route.label} ${route.systemKeyAt} ${path} ${status}`);
    rm.observe(new Request("http://h/api/v/4/sync"), performance.now(), answer(101), listener);
    rm.observe(new Request("http://h/api/v/4/webhook/execute/abc/hook/a/b/c"), performance.now(), answer(200), listener);
    expect(heard).toEqual(["/api/v/4/sync -1 /api/v/4/sync 101", "/api/v/4/webhook/execute/:systemKey/:name/* 5 /api/v/4/webhook/execute/abc/hook/a/b/c 200"]);
    expect(pathElement("/api/v/4/webhook/execute/abc%20d/hook", 5)).toBe("abc d");
    expect(pathElement("/api/v/1/data/3b8a1cc5-77d5", 4)).toBe("3b8a1cc5-77d5");
    expect(pathElement("/api/v/1/data/bad%E0%A4%A", 4)).toBe("bad%E0%A4%A"); // not decodable: as sent
    expect(pathElement("/api/v/1/data", 4)).toBe("");
    expect(rm.params("GET", "/admin/edges/sk1/gw%201")).toEqual({ systemKey: "sk1", name: "gw%201" });
  });

  test("per system: no system series unless asked; asked, the busiest get places and keep them, the rest are other", async () => {
    expect(withRoutes(new Metrics()).systems).toBeNull();
    const m = new Metrics();
    const rm = withRoutes(m, 2);
    const sys = rm.systems!;
    for (let i = 0; i < 5; i++) sys.count("aaaa", true, 200);
    for (let i = 0; i < 3; i++) sys.count("bbbb", true, 500);
    sys.count("cccc", true, 200);
    for (let i = 0; i < 9; i++) sys.count("ffff", false, 401); // never shown to exist
    // until /metrics is read, every system is other
    let out = await lines(m);
    expect(out).toContain('outpost_system_http_requests_total{system_key="other"} 18');
    expect(out).toContain('outpost_system_http_errors_total{system_key="other"} 3');
    sys.count("aaaa", true, 200);
    sys.count("bbbb", true, 503);
    out = await lines(m);
    expect(out).toContain('outpost_system_http_requests_total{system_key="aaaa"} 1');
    expect(out).toContain('outpost_system_http_errors_total{system_key="bbbb"} 1');
    // a busier system later does not take a place (the two are kept), and 10,000 keys add nothing
    for (let i = 0; i < 50; i++) sys.count("cccc", true, 200);
    for (let i = 0; i < 10_000; i++) sys.count(`k${i}`, true, 200);
    out = await lines(m);
    out = await lines(m);
    const series = out.filter((l) => l.startsWith("outpost_system_http_requests_total{"));
    expect(series.sort()).toEqual(['outpost_system_http_requests_total{system_key="aaaa"} 1', 'outpost_system_http_requests_total{system_key="bbbb"} 1', 'outpost_system_http_requests_total{system_key="other"} 10068']);
  });
});

describe("bounded labels", () => {
  test("TopLabels: at most max places, to the keys counted most between two readings, kept", () => {
    const t = new TopLabels(2);
    for (const k of ["a", "b", "b", "c", "c", "c"]) expect(t.of(k)).toBe(OTHER);
    t.of("d", false);
    t.of("d", false);
    t.of("d", false);
    t.of("d", false);
    t.promote();
    expect([t.of("a"), t.of("b"), t.of("c"), t.of("d")]).toEqual([OTHER, "b", "c", OTHER]);
    for (let i = 0; i < 10; i++) t.of("a");
    t.promote();
    expect(t.of("a")).toBe(OTHER);
    expect(new TopLabels(0).of("x")).toBe(OTHER);
  });

  test("largest: the top readings, the rest summed or dropped", () => {
    const r: [Record<string, string>, number][] = [[{ k: "a" }, 1], [{ k: "b" }, 5], [{ k: "c" }, 3], [{ k: "d" }, 2]];
    expect(largest(r, 2, { k: "other" })).toEqual([[{ k: "b" }, 5], [{ k: "c" }, 3], [{ k: "other" }, 3]]);
    expect(largest(r, 2)).toEqual([[{ k: "b" }, 5], [{ k: "c" }, 3]]);
    expect(largest(r, 4)).toBe(r);
  });
});
