// src/http/cors.ts: preflights and the allow-origin header, for any origin and for a list.
import { describe, expect, test } from "bun:test";
import { Cors } from "../../../src/http/cors.ts";

const req = (origin?: string, method = "GET") => new Request("http://x/api/about", { method, headers: origin ? { origin } : {} });

describe("Cors", () => {
  test("any origin: a preflight answers 204 with methods, the SDKs' headers and max-age", () => {
    const r = new Cors("*").preflight(req("https://web.example.org", "OPTIONS"));
    expect(r.status).toBe(204);
    expect(r.headers.get("access-control-allow-origin")).toBe("*");
    expect(r.headers.get("access-control-allow-methods")).toContain("DELETE");
    const h = r.headers.get("access-control-allow-headers")!.toLowerCase();
    for (const x of ["clearblade-usertoken", "clearblade-devtoken", "clearblade-devicetoken", "clearblade-systemkey", "clearblade-systemsecret", "platform-usertoken", "content-type"]) expect(h).toContain(x);
    expect(Number(r.headers.get("access-control-max-age"))).toBeGreaterThan(0);
    expect(r.headers.get("vary")).toBeNull();
  });

  test("every answer to a browser gets the header; a promise's answer too; a WebSocket upgrade is left alone", async () => {
    const c = new Cors("*");
    const r = c.allow(req("https://a.example"), new Response("{}", { status: 404 })) as Response;
    expect(r.headers.get("access-control-allow-origin")).toBe("*");
    expect(r.headers.get("access-control-expose-headers")).toBeNull();
    const p = (await c.allow(req("https://a.example"), Promise.resolve(new Response("x", { status: 429 })))) as Response;
    expect(p.headers.get("access-control-allow-origin")).toBe("*");
    expect(p.headers.get("access-control-expose-headers")).toBe("Retry-After");
    // no Origin: not a browser's cross-origin call, nothing to add
    const plain = c.allow(req(), new Response("{}")) as Response;
    expect(plain.headers.get("access-control-allow-origin")).toBeNull();
    expect(plain.headers.get("vary")).toBeNull();
    expect(c.allow(req(), undefined)).toBeUndefined();
    expect(() => c.allow(req(), Response.error())).not.toThrow();
  });

  test("a list: listed origins are echoed with Vary, others get nothing and their preflight 403", async () => {
    const c = new Cors("https://App.Example.com:443, http://localhost:3000");
    const ok = c.preflight(req("https://app.example.com", "OPTIONS"));
    expect(ok.status).toBe(204);
    expect(ok.headers.get("access-control-allow-origin")).toBe("https://app.example.com");
    expect(ok.headers.get("vary")).toBe("Origin");
    const no = c.preflight(req("https://evil.example.net", "OPTIONS"));
    expect(no.status).toBe(403);
    expect(no.headers.get("access-control-allow-origin")).toBeNull();
    expect(((await no.json()) as { statusCode: number }).statusCode).toBe(403);
    const plain = c.preflight(req(undefined, "OPTIONS"));
    expect(plain.status).toBe(204);
    expect(plain.headers.get("allow")).toContain("GET");
    const other = c.allow(req("https://evil.example.net"), new Response("{}")) as Response;
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    expect(other.headers.get("vary")).toBe("Origin");
    const mine = c.allow(req("http://localhost:3000"), new Response("{}")) as Response;
    expect(mine.headers.get("access-control-allow-origin")).toBe("http://localhost:3000");
  });
});
