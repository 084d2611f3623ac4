// The access log and the audit lines, on the HTTP app in-process with stand-in domain parts: one
// line per answer with the route pattern (never the path), the error id a 5xx client got in its
// line and in the unhandled error's, sampling and --access-log, refused sign-ins with the login
// they named (and never the password), changes by developers with who and where, /metrics behind
// its token.
import { afterEach, describe, expect, spyOn, test } from "bun:test";
import type { Principal } from "../../../src/auth/principal.ts";
import { loadConfig } from "../../../src/config.ts";
import { fail } from "../../../src/core/errors.ts";
import { createLogger } from "../../../src/core/log.ts";
import { Metrics } from "../../../src/core/metrics.ts";
import { createHttpApp } from "../../../src/http/server.ts";
import type { Services } from "../../../src/http/services.ts";

const SK = "a".repeat(30);
const DEV: Principal = { kind: "developer", id: "d1", email: "dev@example.com", admin: false, tokenHash: "h" };
const METRICS_TOKEN = "metrics-token-0123456789";

/** The app over stand-ins: every domain call not named here answers {}; the log is kept. */
function app(flags: string[] = [], level: "info" | "warn" = "info") {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger(level, {}, (l) => { lines.push(JSON.parse(l)); });
  const config = loadConfig(flags, {});
  const tokens = { resolveNow: (t: string) => (t === "dev-token" ? DEV : undefined), resolve: async (t: string) => (t === "dev-token" ? DEV : null), forgetSystem: () => {} };
  const domain = (over: Record<string, unknown> = {}) => new Proxy(over, { get: (o, k) => (k in o ? o[k as string] : k === "then" ? undefined : async () => ({})) });
  const parts: Record<string, unknown> = {
    config, log, tokens, metrics: new Metrics(), throttle: { active: () => false },
    developers: domain({
      authenticate: async (b: { email: string }) => {
        if (b.email === "boom@example.com") throw new Error("a fault, not a refusal");
        throw fail("BAD_CREDENTIALS", "invalid email or password");
      },
    }),
    webhooks: domain({ invoke: async () => { throw fail("WEBHOOK_UNAUTHORIZED", "wrong user or password"); } }),
  };
  const s = new Proxy(parts, { get: (o, k) => (k in o ? o[k as string] : k === "requestMetrics" || k === "health" || k === "sync" || k === "edgeSync" ? undefined : domain()), set: (o, k, v) => { o[k as string] = v; return true; } }) as unknown as Services;
  const http = createHttpApp(s);
  const call = async (method: string, path: string, init: { body?: unknown; headers?: Record<string, string> } = {}) => {
    const r = await http.handle(new Request(`http://outpost${path}`, { method, headers: init.headers, body: init.body === undefined ? undefined : JSON.stringify(init.body) }));
    const text = await r.text();
    // lines written after the answer (a refused sign-in's body is read first)
    await Bun.sleep(5);
    return { status: r.status, text, body: text.startsWith("{") ? JSON.parse(text) : null };
  };
  return { call, lines, requests: () => lines.filter((l) => l.msg === "request") };
}

afterEach(() => { (Math.random as unknown as { mockRestore?: () => void }).mockRestore?.(); });

describe("access log", () => {
  test("one line per answer: method, route pattern, status, duration, principal, system key", async () => {
    const a = app();
    await a.call("GET", "/api/about");
    await a.call("GET", `/admin/devices/${SK}/pump-17`, { headers: { "ClearBlade-DevToken": "dev-token" } });
    await a.call("GET", "/no/such/route/x-123");
    const [about, device, lost] = a.requests();
    expect(about).toMatchObject({ level: "info", method: "GET", route: "/api/about", status: 200, principal: "none" });
    expect(typeof about!.ms).toBe("number");
    expect(device).toMatchObject({ route: "/admin/devices/:systemKey/:name", status: 200, principal: "developer", systemKey: SK });
    expect(JSON.stringify(device)).not.toContain("pump-17");
    expect(lost).toMatchObject({ route: "unmatched", status: 404 });
    expect(typeof lost!.errorId).toBe("string");
    expect(JSON.stringify(a.lines)).not.toContain("dev-token");
  });

  test("a 5xx: its line (warn) and the unhandled error's carry the id the client got", async () => {
    const a = app();
    const r = await a.call("POST", "/admin/auth", { body: { email: "boom@example.com", password: "pw-secret" } });
    expect(r.status).toBe(500);
    const id = r.body.error.id as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const fault = a.lines.find((l) => l.msg === "unhandled error");
    expect(fault).toMatchObject({ level: "error", errorId: id, route: "/admin/auth", method: "POST" });
    expect(a.requests()).toEqual([expect.objectContaining({ level: "warn", route: "/admin/auth", status: 500, errorId: id })]);
    expect(JSON.stringify(a.lines)).not.toContain("pw-secret");
  });

  test("--access-log errors: answers >= 400 only; off: 5xx only; --log-level warn: 5xx only", async () => {
    const errors = app(["--access-log", "errors"]);
    await errors.call("GET", "/api/about");
    await errors.call("GET", "/nowhere");
    expect(errors.requests().map((l) => l.status)).toEqual([404]);
    for (const a of [app(["--access-log", "off"]), app([], "warn")]) {
      await a.call("GET", "/api/about");
      await a.call("GET", "/nowhere");
      await a.call("POST", "/admin/auth", { body: { email: "boom@example.com", password: "x" } });
      expect(a.requests().map((l) => l.status)).toEqual([500]);
    }
  });

  test("--access-log-sample: that share of the answers below 400, every error", async () => {
    const a = app(["--access-log-sample", "0.25"]);
    const random = spyOn(Math, "random");
    random.mockReturnValue(0.5);
    await a.call("GET", "/api/about");
    await a.call("GET", "/nowhere");
    random.mockReturnValue(0.1);
    await a.call("GET", "/api/about");
    expect(a.requests().map((l) => l.status)).toEqual([404, 200]);
  });
});

describe("audit lines", () => {
  test("a refused sign-in: warn, with the login it named and why, never the password", async () => {
    const a = app();
    const r = await a.call("POST", "/admin/auth", { body: { email: "mallory@example.com", password: "guess-123" } });
    expect(r.status).toBe(401);
    expect(a.lines.find((l) => l.msg === "sign-in refused")).toMatchObject({ level: "warn", kind: "developer", login: "mallory@example.com", reason: "invalid email or password", errorId: r.body.error.id });
    expect(JSON.stringify(a.lines)).not.toContain("guess-123");
  });

  test("a webhook's refused Basic sign-in names its user and system", async () => {
    const a = app();
    const r = await a.call("POST", `/api/v/4/webhook/execute/${SK}/hook/more`, { headers: { authorization: `Basic ${Buffer.from("eve@example.com:pw-777").toString("base64")}` } });
    expect(r.status).toBe(401);
    expect(a.lines.find((l) => l.msg === "sign-in refused")).toMatchObject({ kind: "webhook", login: "eve@example.com", systemKey: SK });
    expect(JSON.stringify(a.lines)).not.toContain("pw-777");
  });

  test("a change by a developer: who, what, the route and its path values; reads, rows and failures are not changes", async () => {
    const a = app();
    const dev = { "ClearBlade-DevToken": "dev-token" };
    await a.call("POST", `/admin/devices/${SK}/pump%2017`, { headers: dev, body: { type: "pump" } });
    await a.call("DELETE", `/admin/code/v/1/${SK}/ingest`, { headers: dev });
    await a.call("GET", `/admin/devices/${SK}/pump-17`, { headers: dev });
    await a.call("POST", `/api/v/1/data/${"b".repeat(20)}`, { headers: dev, body: { x: 1 } });
    await a.call("POST", "/admin/devices/nowhere/at/all", { headers: dev, body: {} });
    const changes = a.lines.filter((l) => l.msg === "admin change");
    expect(changes).toEqual([
      expect.objectContaining({ level: "info", developer: "dev@example.com", action: "create", method: "POST", route: "/admin/devices/:systemKey/:name", systemKey: SK, params: { systemKey: SK, name: "pump 17" } }),
      expect.objectContaining({ developer: "dev@example.com", action: "delete", route: "/admin/code/v/1/:systemKey/:name", params: { systemKey: SK, name: "ingest" } }),
    ]);
  });
});

describe("/metrics on the API port", () => {
  test("without --metrics-token: 404", async () => {
    const r = await app().call("GET", "/metrics");
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe(103);
  });

  test("with --metrics-token: 401 without it or with another, the text with it", async () => {
    const a = app(["--metrics-token", METRICS_TOKEN]);
    expect((await a.call("GET", "/metrics")).status).toBe(401);
    expect((await a.call("GET", "/metrics", { headers: { authorization: "Bearer wrong-token-0123456789" } })).status).toBe(401);
    expect((await a.call("GET", "/metrics", { headers: { authorization: `Bearer ${METRICS_TOKEN}x` } })).status).toBe(401);
    const ok = await a.call("GET", "/metrics", { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(ok.status).toBe(200);
    expect(ok.text).toContain("# TYPE outpost_http_requests_total counter");
    expect(ok.text).toContain('outpost_http_requests_total{route="/metrics",status="401"} 3');
  });
});
