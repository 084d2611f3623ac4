// src/code/outbound.ts against local servers on 127.0.0.1 (allowed by the tests' policy): the
// connection goes to the address checked with the name kept for Host and TLS, redirects are
// followed by hand and checked again, and time, bodies and headers are bounded.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EgressPolicy, type Lookup } from "../../../src/code/egress.ts";
import { OUTBOUND_LIMITS, type OutboundRequest, sendOutbound } from "../../../src/code/outbound.ts";
import { ApiError } from "../../../src/core/errors.ts";

const LOOPBACK = EgressPolicy.parse("127.0.0.1");
const dir = mkdtempSync(join(tmpdir(), "outpost-outbound-"));

/** A CA and a server certificate for svc.test (and 127.0.0.1) it signed. */
function certificates() {
  const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  openssl("req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Outbound test CA");
  openssl("req", ...ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=svc.test");
  writeFileSync(join(dir, "ext.cnf"), "subjectAltName=DNS:svc.test,IP:127.0.0.1\n");
  openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf");
  const read = (f: string) => readFileSync(join(dir, f), "utf8");
  return { ca: read("ca.pem"), cert: read("server.pem"), key: read("server.key") };
}

let plain: ReturnType<typeof Bun.serve>;
let secure: ReturnType<typeof Bun.serve>;
let ca = "";
let base = "";
const seen: { path: string; method: string; host: string | null; headers: Record<string, string>; body: string }[] = [];

function handler(req: Request): Response | Promise<Response> {
  const u = new URL(req.url);
  const p = u.pathname;
  return req.text().then(async (body) => {
    seen.push({ path: p + u.search, method: req.method, host: req.headers.get("host"), headers: Object.fromEntries(req.headers), body });
    const n = Number(u.searchParams.get("n") ?? 0);
    if (p === "/echo") return Response.json({ method: req.method, host: req.headers.get("host"), query: u.search, body, headers: Object.fromEntries(req.headers) });
    if (p === "/redirect") return new Response(null, { status: Number(u.searchParams.get("status") ?? 302), headers: { location: u.searchParams.get("to")! } });
    if (p === "/loop") return new Response(null, { status: 302, headers: { location: `/loop?n=${n + 1}` } });
    if (p === "/chain") return new Response(null, { status: 302, headers: { location: n > 1 ? "/echo" : `/chain?n=${n + 1}` } });
    if (p === "/slow") { await Bun.sleep(3_000); return new Response("late"); }
    if (p === "/slow-body") {
      return new Response(new ReadableStream({ async pull(c) { c.enqueue(new TextEncoder().encode("x")); await Bun.sleep(200); } }));
    }
    if (p === "/size") {
      const bytes = Number(u.searchParams.get("bytes"));
      if (u.searchParams.get("chunked")) {
        let left = bytes;
        return new Response(new ReadableStream({ pull(c) { const k = Math.min(left, 1 << 20); if (k === 0) { c.close(); return; } left -= k; c.enqueue(new Uint8Array(k).fill(97)); } }));
      }
      return new Response(new Uint8Array(bytes).fill(97));
    }
    if (p === "/gzip-bomb") return new Response(Bun.gzipSync(new Uint8Array(OUTBOUND_LIMITS.bodyBytes + 1)), { headers: { "content-encoding": "gzip" } });
    if (p === "/big-headers") return new Response("ok", { headers: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`x-h${i}`, "v".repeat(2000)])) });
    if (p === "/status") return new Response("status body", { status: Number(u.searchParams.get("code")) });
    return new Response("not here", { status: 404 });
  });
}

beforeAll(() => {
  const c = certificates();
  ca = c.ca;
  plain = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: handler });
  secure = Bun.serve({ port: 0, hostname: "127.0.0.1", tls: { cert: c.cert, key: c.key }, fetch: handler });
  base = `http://127.0.0.1:${plain.port}`;
});
afterAll(() => { plain.stop(true); secure.stop(true); rmSync(dir, { recursive: true, force: true }); });

const req = (url: string, more: Partial<OutboundRequest> = {}): OutboundRequest =>
  ({ method: "GET", url, headers: [], timeoutMs: 5_000, maxRedirects: 5, strictSSL: true, ...more });

async function failure(p: Promise<unknown>): Promise<ApiError> {
  let thrown: unknown;
  try { await p; } catch (e) { thrown = e; }
  expect(thrown).toBeInstanceOf(ApiError);
  return thrown as ApiError;
}

/** A resolver answering from a table, counting its calls. */
function lookupOf(table: Record<string, string[][]>): Lookup & { calls: string[] } {
  const calls: string[] = [];
  const f = async (host: string) => {
    calls.push(host);
    const answers = table[host] ?? [];
    const a = answers[Math.min(calls.filter((h) => h === host).length - 1, answers.length - 1)] ?? [];
    return a.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
  return Object.assign(f, { calls });
}

const text = (b: Uint8Array) => new TextDecoder().decode(b);

describe("requests", () => {
  test("a GET answers status, headers, body and URL; the method, headers and body go as given", async () => {
    const r = await sendOutbound(LOOPBACK, req(`${base}/echo?a=1`, { method: "POST", headers: [["X-One", "1"], ["Content-Type", "text/plain"]], body: "hello" }));
    expect(r.status).toBe(200);
    expect(r.statusText).toBe("OK");
    expect(r.url).toBe(`${base}/echo?a=1`);
    expect(r.headers).toContainEqual(["content-type", "application/json;charset=utf-8"]);
    const echo = JSON.parse(text(r.body));
    expect(echo).toMatchObject({ method: "POST", query: "?a=1", body: "hello", host: `127.0.0.1:${plain.port}` });
    expect(echo.headers).toMatchObject({ "x-one": "1", "content-type": "text/plain", "user-agent": expect.stringMatching(/^Outpost\//) });
  });

  test("a binary body goes byte for byte; a GET's body is not sent", async () => {
    const bytes = new Uint8Array([0, 1, 2, 255, 254]);
    const r = await sendOutbound(LOOPBACK, req(`${base}/echo`, { method: "PUT", body: bytes }));
    expect(JSON.parse(text(r.body)).body).toBe(new TextDecoder().decode(bytes));
    const g = await sendOutbound(LOOPBACK, req(`${base}/echo`, { body: "ignored" }));
    expect(JSON.parse(text(g.body)).body).toBe("");
  });

  test("headers the client sets itself are not taken from the caller (Host stays the URL's)", async () => {
    const r = await sendOutbound(LOOPBACK, req(`${base}/echo`, { headers: [["Host", "evil.example"], ["Content-Length", "99"], ["Connection", "upgrade"]] }));
    expect(JSON.parse(text(r.body)).host).toBe(`127.0.0.1:${plain.port}`);
  });

  test("error statuses are answers, not errors", async () => {
    const r = await sendOutbound(LOOPBACK, req(`${base}/status?code=503`));
    expect(r.status).toBe(503);
    expect(r.statusText).toBe("Service Unavailable");
    expect(text(r.body)).toBe("status body");
  });

  test("a refused connection says so", async () => {
    const free = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") });
    const port = free.port;
    free.stop(true);
    const e = await failure(sendOutbound(LOOPBACK, req(`http://127.0.0.1:${port}/`)));
    expect(e.detail).toContain("connection refused by 127.0.0.1");
  });
});

describe("the egress policy", () => {
  test("an address the policy refuses is refused before any connection", async () => {
    const before = seen.length;
    const e = await failure(sendOutbound(EgressPolicy.DEFAULT, req(`${base}/echo`)));
    expect(e.kind.code).toBe(408);
    expect(e.detail).toBe("egress refused: 127.0.0.1, a loopback address (127.0.0.0/8), which --code-egress-allow does not allow");
    expect(seen.length).toBe(before);
    const t0 = Date.now();
    expect((await failure(sendOutbound(EgressPolicy.DEFAULT, req("http://169.254.169.254/latest/meta-data/")))).detail).toContain("link-local");
    expect((await failure(sendOutbound(EgressPolicy.DEFAULT, req("http://10.255.255.1/")))).detail).toContain("a private address (10.0.0.0/8)");
    expect((await failure(sendOutbound(EgressPolicy.DEFAULT, req("http://[::ffff:127.0.0.1]:1/")))).detail).toContain("127.0.0.1, a loopback address");
    expect((await failure(sendOutbound(EgressPolicy.DEFAULT, req("http://0x7f.1:1/")))).detail).toContain("127.0.0.1, a loopback address");
    expect((await failure(sendOutbound(EgressPolicy.DEFAULT, req("http://localhost:1/")))).detail).toContain("'localhost' resolves to");
    expect(Date.now() - t0).toBeLessThan(1_000);
  });

  test("the connection goes to the address checked, with the name as Host; the name is looked up once (no rebinding)", async () => {
    // first answer 127.0.0.1 (allowed), any later one 10.0.0.1: a second lookup would be caught
    const lookup = lookupOf({ "svc.test": [["127.0.0.1"], ["10.0.0.1"]] });
    const r = await sendOutbound(LOOPBACK, req(`http://svc.test:${plain.port}/echo`), { lookup });
    expect(JSON.parse(text(r.body)).host).toBe(`svc.test:${plain.port}`);
    expect(r.url).toBe(`http://svc.test:${plain.port}/echo`);
    expect(lookup.calls).toEqual(["svc.test"]);
  });

  test("an address that cannot be connected to gives way to the name's next one", async () => {
    // the server listens on 127.0.0.1 only: 127.0.0.2 refuses the connection
    const lookup = lookupOf({ "two.test": [["127.0.0.2", "127.0.0.1"]], "none.test": [["127.0.0.2", "127.0.0.3"]] });
    const policy = EgressPolicy.parse("127.0.0.0/8");
    const r = await sendOutbound(policy, req(`http://two.test:${plain.port}/echo`), { lookup });
    expect(JSON.parse(text(r.body)).host).toBe(`two.test:${plain.port}`);
    expect((await failure(sendOutbound(policy, req(`http://none.test:${plain.port}/echo`), { lookup }))).detail).toContain("connection refused by 127.0.0.3");
  });

  test("a name with any refused address is refused", async () => {
    const lookup = lookupOf({ "rebind.test": [["127.0.0.1", "169.254.169.254"]] });
    const e = await failure(sendOutbound(LOOPBACK, req(`http://rebind.test:${plain.port}/echo`), { lookup }));
    expect(e.detail).toContain("'rebind.test' resolves to 169.254.169.254");
  });

  test("only http and https; no credentials in the URL", async () => {
    for (const u of ["ftp://127.0.0.1/", "file:///etc/passwd", "ws://127.0.0.1/", "javascript:alert(1)"])
      expect((await failure(sendOutbound(LOOPBACK, req(u)))).detail).toContain("only http and https");
    expect((await failure(sendOutbound(LOOPBACK, req(`http://u:p@127.0.0.1:${plain.port}/`)))).detail).toContain("credentials in the URL");
    expect((await failure(sendOutbound(LOOPBACK, req("not a url")))).detail).toContain("is not an absolute URL");
  });
});

describe("redirects", () => {
  test("followed, each hop checked; 303 and a POST's 302 become a GET without a body", async () => {
    const r = await sendOutbound(LOOPBACK, req(`${base}/chain`));
    expect(r.status).toBe(200);
    expect(r.redirects).toBe(3);
    expect(r.url).toBe(`${base}/echo`);
    const post = await sendOutbound(LOOPBACK, req(`${base}/redirect?status=302&to=/echo`, { method: "POST", body: "b", headers: [["Content-Type", "text/plain"]] }));
    expect(JSON.parse(text(post.body))).toMatchObject({ method: "GET", body: "" });
    expect(JSON.parse(text(post.body)).headers["content-type"]).toBeUndefined();
    const kept = await sendOutbound(LOOPBACK, req(`${base}/redirect?status=307&to=/echo`, { method: "POST", body: "b" }));
    expect(JSON.parse(text(kept.body))).toMatchObject({ method: "POST", body: "b" });
  });

  test("at most 5, or the number asked; 0 answers the redirect itself", async () => {
    expect((await failure(sendOutbound(LOOPBACK, req(`${base}/loop`)))).detail).toContain("more than 5 redirects");
    expect((await failure(sendOutbound(LOOPBACK, req(`${base}/chain`, { maxRedirects: 2 })))).detail).toContain("more than 2 redirects");
    const r = await sendOutbound(LOOPBACK, req(`${base}/chain`, { maxRedirects: 0 }));
    expect(r.status).toBe(302);
    expect(r.headers).toContainEqual(["location", "/chain?n=1"]);
  });

  test("a redirect to an address the policy refuses is refused before connecting", async () => {
    const target = `http://127.0.0.2:${plain.port}/echo`;
    const before = seen.length;
    const e = await failure(sendOutbound(LOOPBACK, req(`${base}/redirect?to=${encodeURIComponent(target)}`)));
    expect(e.detail).toContain("egress refused: 127.0.0.2, a loopback address");
    expect(seen.length).toBe(before + 1); // the first hop only
    const meta = await failure(sendOutbound(LOOPBACK, req(`${base}/redirect?to=${encodeURIComponent("http://169.254.169.254/")}`)));
    expect(meta.detail).toContain("169.254.169.254, a link-local address");
  });

  test("a redirect to another scheme is refused; credentials do not follow to another origin", async () => {
    expect((await failure(sendOutbound(LOOPBACK, req(`${base}/redirect?to=${encodeURIComponent("file:///etc/passwd")}`)))).detail)
      .toContain("cannot be followed: only http and https");
    const lookup = lookupOf({ "other.test": [["127.0.0.1"]] });
    const to = `http://other.test:${plain.port}/echo`;
    const r = await sendOutbound(LOOPBACK, req(`${base}/redirect?to=${encodeURIComponent(to)}`, { headers: [["Authorization", "Basic x"], ["Cookie", "a=1"], ["X-Keep", "1"]] }), { lookup });
    const echo = JSON.parse(text(r.body));
    expect(echo.host).toBe(`other.test:${plain.port}`);
    expect(echo.headers.authorization).toBeUndefined();
    expect(echo.headers.cookie).toBeUndefined();
    expect(echo.headers["x-keep"]).toBe("1");
    const same = await sendOutbound(LOOPBACK, req(`${base}/redirect?to=/echo`, { headers: [["Authorization", "Basic x"]] }));
    expect(JSON.parse(text(same.body)).headers.authorization).toBe("Basic x");
  });
});

describe("limits", () => {
  test("a server that does not answer in time: the request fails at its timeout", async () => {
    const t0 = Date.now();
    const e = await failure(sendOutbound(LOOPBACK, req(`${base}/slow`, { timeoutMs: 300 })));
    expect(e.detail).toBe(`the request to ${base} timed out after 300 ms`);
    expect(Date.now() - t0).toBeLessThan(1_500);
  });

  test("a body that trickles in: the timeout covers reading it too", async () => {
    const t0 = Date.now();
    const e = await failure(sendOutbound(LOOPBACK, req(`${base}/slow-body`, { timeoutMs: 500 })));
    expect(e.detail).toContain("timed out after 500 ms");
    expect(Date.now() - t0).toBeLessThan(2_000);
  });

  test("a timeout past 60 s is 60 s", async () => {
    // nothing waits a minute here: the request is cancelled through the run's signal
    const run = new AbortController();
    const p = failure(sendOutbound(LOOPBACK, req(`${base}/slow`, { timeoutMs: 10_000_000 }), { signal: run.signal }));
    setTimeout(() => run.abort(), 100);
    expect((await p).detail).toBe("the request was cancelled (the run ended)");
  });

  test("a response body over 10 MiB is an error, with or without a length, never cut short; 10 MiB passes", async () => {
    const limit = OUTBOUND_LIMITS.bodyBytes;
    expect((await sendOutbound(LOOPBACK, req(`${base}/size?bytes=${limit}`))).body.byteLength).toBe(limit);
    expect((await failure(sendOutbound(LOOPBACK, req(`${base}/size?bytes=${limit + 1}`)))).detail).toBe("the response body is larger than 10 MiB");
    expect((await failure(sendOutbound(LOOPBACK, req(`${base}/size?bytes=${limit * 3}&chunked=1`)))).detail).toBe("the response body is larger than 10 MiB");
    // counted after decompression
    expect((await failure(sendOutbound(LOOPBACK, req(`${base}/gzip-bomb`)))).detail).toBe("the response body is larger than 10 MiB");
  });

  test("a request body over 10 MiB is refused before sending", async () => {
    const before = seen.length;
    const e = await failure(sendOutbound(LOOPBACK, req(`${base}/echo`, { method: "POST", body: "x".repeat(OUTBOUND_LIMITS.bodyBytes + 1) })));
    expect(e.detail).toContain("the request body is larger than 10 MiB");
    expect(seen.length).toBe(before);
  });

  test("request headers: at most 100, 64 KiB together, valid names, no line breaks", async () => {
    const many = Array.from({ length: 101 }, (_, i): [string, string] => [`x-${i}`, "v"]);
    expect((await failure(sendOutbound(LOOPBACK, req(`${base}/echo`, { headers: many })))).detail).toContain("at most 100 request headers");
    const big = Array.from({ length: 10 }, (_, i): [string, string] => [`x-${i}`, "v".repeat(8_000)]);
    expect((await failure(sendOutbound(LOOPBACK, req(`${base}/echo`, { headers: big })))).detail).toContain("larger than 64 KiB");
    expect((await failure(sendOutbound(LOOPBACK, req(`${base}/echo`, { headers: [["bad name", "v"]] })))).detail).toContain("is not a header name");
    expect((await failure(sendOutbound(LOOPBACK, req(`${base}/echo`, { headers: [["x-a", "v\r\nInjected: 1"]] })))).detail).toContain("line break");
  });

  test("response headers over 64 KiB are an error", async () => {
    expect((await failure(sendOutbound(LOOPBACK, req(`${base}/big-headers`)))).detail).toContain("the response's headers are larger than 64 KiB");
  });
});

describe("https", () => {
  test("a certificate no trusted authority signed is refused with strictSSL, accepted without", async () => {
    const url = `https://127.0.0.1:${secure.port}/echo`;
    const e = await failure(sendOutbound(LOOPBACK, req(url)));
    expect(e.detail).toContain("the server's certificate was not accepted");
    expect(e.detail).toContain("strictSSL: false");
    const r = await sendOutbound(LOOPBACK, req(url, { strictSSL: false }));
    expect(r.status).toBe(200);
  });

  test("the certificate is checked against the URL's name, sent as SNI, while the connection goes to the address", async () => {
    const lookup = lookupOf({ "svc.test": [["127.0.0.1"]], "wrong.test": [["127.0.0.1"]] });
    const ok = await sendOutbound(LOOPBACK, req(`https://svc.test:${secure.port}/echo`), { lookup, ca });
    expect(JSON.parse(text(ok.body)).host).toBe(`svc.test:${secure.port}`);
    const e = await failure(sendOutbound(LOOPBACK, req(`https://wrong.test:${secure.port}/echo`), { lookup, ca }));
    expect(e.detail).toContain("certificate was not accepted");
    // by address: the certificate's IP entry
    expect((await sendOutbound(LOOPBACK, req(`https://127.0.0.1:${secure.port}/echo`), { ca })).status).toBe(200);
  });

  test("a connection made without checks is never reused for a request with them", async () => {
    const url = `https://127.0.0.1:${secure.port}/echo`;
    expect((await sendOutbound(LOOPBACK, req(url, { strictSSL: false }))).status).toBe(200);
    expect((await failure(sendOutbound(LOOPBACK, req(url)))).detail).toContain("certificate was not accepted");
  });
});
