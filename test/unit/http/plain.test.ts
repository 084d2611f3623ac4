// Plain routes (src/http/request.ts `plain`): the hot routes answered from the API's wrap without
// Elysia's per-request context, on the HTTP app in-process with stand-in domain parts. They must
// answer as Elysia would: values as JSON, failures in the envelope (a fault logged with its route),
// decoded path parameters, HEAD and "//" paths, counted on /metrics under their pattern.
import { describe, expect, test } from "bun:test";
import type { Principal } from "../../../src/auth/principal.ts";
import { loadConfig } from "../../../src/config.ts";
import { fail } from "../../../src/core/errors.ts";
import { createLogger } from "../../../src/core/log.ts";
import { Metrics } from "../../../src/core/metrics.ts";
import type { RequestMetrics } from "../../../src/http/metrics.ts";
import { reusedJson } from "../../../src/http/request.ts";
import { createHttpApp } from "../../../src/http/server.ts";
import type { Services } from "../../../src/http/services.ts";

const SK = "b".repeat(30);
const USER: Principal = { kind: "user", id: "u1", email: "u@example.com", systemKey: SK, tokenHash: "h" } as Principal;

/** The app over stand-ins; `info` is what users.info does for the test's user. */
function app(info: (p: Principal) => unknown, byName?: (name: string) => unknown) {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger("info", {}, (l) => { lines.push(JSON.parse(l)); });
  const tokens = { resolveNow: (t: string) => (t === "user-token" ? USER : undefined), resolve: async (t: string) => (t === "user-token" ? USER : null), forgetSystem: () => {} };
  const domain = (over: Record<string, unknown> = {}) => new Proxy(over, { get: (o, k) => (k in o ? o[k as string] : k === "then" ? undefined : async () => ({})) });
  const metrics = new Metrics();
  const parts: Record<string, unknown> = {
    config: loadConfig([], {}), log, tokens, metrics, throttle: { active: () => false },
    users: domain({ info }),
    collections: domain({
      byNameNow: () => undefined,
      byNameFor: async (_p: Principal, _key: string, name: string) => byName?.(name) ?? ({ name }),
      mayRead: async () => {},
      fetch: async (_p: Principal, c: { name: string }) => ({ rows: [{ name: c.name }], total: 1 }),
    }),
  };
  const s = new Proxy(parts, { get: (o, k) => (k in o ? o[k as string] : k === "requestMetrics" || k === "health" || k === "sync" || k === "edgeSync" ? undefined : domain()), set: (o, k, v) => { o[k as string] = v; return true; } }) as unknown as Services;
  const http = createHttpApp(s);
  const call = async (method: string, path: string, headers: Record<string, string> = { "ClearBlade-UserToken": "user-token" }) => {
    const r = await http.handle(new Request(`http://outpost${path}`, { method, headers }));
    // the type before the body, as a listener reads it (a Blob body's type is gone once it is read)
    const type = r.headers.get("content-type");
    const text = await r.text();
    return { status: r.status, type, text, body: text.startsWith("{") ? JSON.parse(text) : null };
  };
  return { call, lines, metrics, requests: (s as unknown as { requestMetrics: RequestMetrics }).requestMetrics };
}

describe("plain routes", () => {
  test("the hot routes are plain, and found with their parameters decoded", () => {
    const { requests } = app(() => ({}));
    expect(requests.match("GET", "/api/v/1/user/info").plain).not.toBeNull();
    expect(requests.match("POST", `/api/v/1/code/${SK}/svc`).plain).not.toBeNull();
    const read = requests.match("GET", `/api/v/1/collection/${SK}/my%20rows`);
    expect(read.plain).not.toBeNull();
    expect(read.params).toEqual({ key: SK, name: "my rows" });
    // another method of the same path, and a HEAD, are Elysia's
    expect(requests.match("PUT", "/api/v/1/user/info").plain).toBeNull();
    expect(requests.match("HEAD", "/api/v/1/user/info").plain).toBeNull();
    expect(requests.match("HEAD", "/api/v/1/user/info").route.label).toBe("/api/v/1/user/info");
  });

  test("a value is JSON; a promise's too; HEAD and a // path answer as before", async () => {
    const a = app(() => ({ email: "u@example.com" }));
    const r = await a.call("GET", "/api/v/1/user/info");
    expect(r.status).toBe(200);
    expect(r.type).toContain("application/json");
    expect(r.body).toEqual({ email: "u@example.com" });
    expect((await a.call("GET", "//api/v/1//user/info")).body).toEqual({ email: "u@example.com" });
    const head = await a.call("HEAD", "/api/v/1/user/info");
    expect(head.status).toBe(200);
    expect(head.text).toBe("");
    const later = await app(async () => ({ later: true })).call("GET", "/api/v/1/user/info");
    expect(later.body).toEqual({ later: true });
  });

  test("a cached answer is encoded once while it is the same object, and again once it is another", async () => {
    let info: Record<string, unknown> = Object.freeze({ email: "u@example.com", n: 1 });
    const a = app(() => info);
    const first = await a.call("GET", "/api/v/1/user/info");
    expect(first.type).toBe("application/json;charset=utf-8");
    expect(first.body).toEqual({ email: "u@example.com", n: 1 });
    expect((await a.call("GET", "/api/v/1/user/info")).text).toBe(first.text);
    info = Object.freeze({ email: "u@example.com", n: 2 });
    expect((await a.call("GET", "/api/v/1/user/info")).body).toEqual({ email: "u@example.com", n: 2 });
  });

  test("reusedJson: the body is made again for another variant or base", async () => {
    const source = {};
    let made = 0;
    const make = (x: unknown) => () => { made++; return { x }; };
    const v1 = {}, v2 = {};
    expect(await reusedJson(source, v1, "/a", make(1)).json()).toEqual({ x: 1 });
    expect(await reusedJson(source, v1, "/a", make(9)).json()).toEqual({ x: 1 });
    expect(made).toBe(1);
    expect(await reusedJson(source, v2, "/a", make(2)).json()).toEqual({ x: 2 });
    expect(await reusedJson(source, v2, "/b", make(3)).json()).toEqual({ x: 3 });
    expect(made).toBe(3);
  });

  test("failures: our errors in the envelope, a fault as a 500 logged with its route, no token refused", async () => {
    const refused = await app(() => { throw fail("INVALID_TOKEN", "user no longer exists"); }).call("GET", "/api/v/1/user/info");
    expect(refused.status).toBe(400);
    expect(refused.body.error.detail).toBe("user no longer exists");
    const rejected = await app(async () => { throw fail("NOT_FOUND", "gone"); }).call("GET", "/api/v/1/user/info");
    expect(rejected.status).toBe(404);
    const a = app(() => { throw new TypeError("a fault"); });
    const fault = await a.call("GET", "/api/v/1/user/info");
    expect(fault.status).toBe(500);
    expect(JSON.stringify(fault.body)).not.toContain("a fault");
    expect(a.lines.find((l) => l.msg === "unhandled error")).toMatchObject({ route: "/api/v/1/user/info", errorId: fault.body.error.id });
    const none = await a.call("GET", "/api/v/1/user/info", {});
    expect(none.status).toBe(401);
    const forged = await a.call("GET", "/api/v/1/user/info", { "ClearBlade-UserToken": "forged" });
    expect(forged.status).toBe(400);
  });

  test("a collection read gets its name decoded, and is counted under its pattern", async () => {
    const a = app(() => ({}));
    const r = await a.call("GET", `/api/v/1/collection/${SK}/my%20rows`);
    expect(r.status).toBe(200);
    expect(r.body.DATA).toEqual([{ name: "my rows" }]);
    const text = await a.metrics.render();
    expect(text).toContain('outpost_http_requests_total{route="/api/v/1/collection/:key/:name",status="200"} 1');
  });
});
