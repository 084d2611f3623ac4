// src/code/library/http.ts: the arguments of http.request as user code gives them (every option,
// wrong types refused with a clear message), and Requests() and fetch inside a sandbox, against a
// local server, with the host operation answering on this thread as the engine would.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { EgressPolicy } from "../../../src/code/egress.ts";
import { requestOf } from "../../../src/code/library/http.ts";
import { OPS } from "../../../src/code/library/index.ts";
import { type HostContext, RunState } from "../../../src/code/library/types.ts";
import { outcomeValue, Sandbox } from "../../../src/code/sandbox.ts";
import { ApiError } from "../../../src/core/errors.ts";

let server: ReturnType<typeof Bun.serve>;
let base = "";
beforeAll(() => {
  server = Bun.serve({
    port: 0, hostname: "127.0.0.1",
    async fetch(req) {
      const u = new URL(req.url);
      if (u.pathname === "/bytes") return new Response(new Uint8Array([0, 255, 1, 200, 65]), { headers: { "x-multi": "a", "X-Other": "b" } });
      if (u.pathname === "/missing") return new Response("no such thing", { status: 404 });
      if (u.pathname === "/moved") return new Response(null, { status: 302, headers: { location: "/echo?moved=1" } });
      if (u.pathname === "/slow") { await Bun.sleep(3_000); return new Response("late"); }
      const h = new Headers({ "content-type": "application/json" });
      h.append("set-cookie", "a=1");
      h.append("set-cookie", "b=2");
      return new Response(JSON.stringify({ method: req.method, query: u.search, headers: Object.fromEntries(req.headers), body: await req.text() }), { headers: h });
    },
  });
  base = `http://127.0.0.1:${server.port}`;
});
afterAll(() => server.stop(true));

function argError(a: Record<string, unknown>): string {
  let thrown: unknown;
  try { requestOf(a); } catch (e) { thrown = e; }
  expect(thrown).toBeInstanceOf(ApiError);
  expect((thrown as ApiError).kind.code).toBe(111);
  return (thrown as ApiError).detail;
}

describe("http.request arguments", () => {
  const ok = { from: "requests", method: "GET", url: "http://example.com/" };

  test("the defaults: 30 s, 5 redirects, certificates checked, no body", () => {
    expect(requestOf(ok)).toEqual({ method: "GET", url: "http://example.com/", headers: [], body: undefined, timeoutMs: 30_000, maxRedirects: 5, strictSSL: true });
  });

  test("qs joins the URL's query; headers from an object or pairs; arrays repeat a header", () => {
    const r = requestOf({ ...ok, url: "http://example.com/p?x=1", qs: { a: 1, b: "x y", c: [true, "z"], d: null }, headers: { "X-A": "1", "X-N": 2, "X-M": ["a", "b"] } });
    expect(r.url).toBe("http://example.com/p?x=1&a=1&b=x+y&c=true&c=z");
    expect(r.headers).toEqual([["X-A", "1"], ["X-N", "2"], ["X-M", "a"], ["X-M", "b"]]);
    expect(requestOf({ ...ok, from: "fetch", headers: [["a", "1"], ["b", "2"]] }).headers).toEqual([["a", "1"], ["b", "2"]]);
  });

  test("bodies: a string as is, an object as JSON, form fields urlencoded, json:true asks for JSON", () => {
    expect(requestOf({ ...ok, method: "post", body: "raw" })).toMatchObject({ method: "POST", body: "raw", headers: [] });
    expect(requestOf({ ...ok, method: "POST", body: { k: [1] } })).toMatchObject({ body: '{"k":[1]}', headers: [["Content-Type", "application/json"]] });
    expect(requestOf({ ...ok, method: "POST", body: { k: 1 }, headers: { "content-type": "application/x-custom" } }).headers).toEqual([["content-type", "application/x-custom"]]);
    expect(requestOf({ ...ok, method: "POST", form: { a: "1 2", b: 3 } })).toMatchObject({ body: "a=1+2&b=3", headers: [["Content-Type", "application/x-www-form-urlencoded"]] });
    expect(requestOf({ ...ok, method: "POST", form: true, body: { a: "x" } }).body).toBe("a=x");
    expect(requestOf({ ...ok, json: true }).headers).toEqual([["Accept", "application/json"]]);
    expect(requestOf({ ...ok, method: "POST", bodyEscaped: escape("\x00\xff") }).body).toEqual(new Uint8Array([0, 255]));
    // ClearBlade's examples give a GET a body: it is not sent, and nor is a type for it
    expect(requestOf({ ...ok, body: { msg: "hello" } })).toMatchObject({ body: undefined, headers: [] });
  });

  test("auth is Basic (or Bearer); timeout: Requests' up to 60 is seconds, past it milliseconds, fetch's milliseconds, at most 60 s", () => {
    expect(requestOf({ ...ok, auth: { user: "me", pass: "pw" } }).headers).toEqual([["Authorization", `Basic ${btoa("me:pw")}`]]);
    expect(requestOf({ ...ok, auth: { username: "me", password: "pw" } }).headers).toEqual([["Authorization", `Basic ${btoa("me:pw")}`]]);
    expect(requestOf({ ...ok, auth: { bearer: "tok" } }).headers).toEqual([["Authorization", "Bearer tok"]]);
    expect(requestOf({ ...ok, timeout: 30 }).timeoutMs).toBe(30_000);
    expect(requestOf({ ...ok, timeout: 0.5 }).timeoutMs).toBe(500);
    expect(requestOf({ ...ok, timeout: 2_500 }).timeoutMs).toBe(2_500);
    expect(requestOf({ ...ok, timeout: 600_000 }).timeoutMs).toBe(60_000);
    expect(requestOf({ ...ok, from: "fetch", timeout: 30 }).timeoutMs).toBe(30);
  });

  test("followRedirect: true, false or a number; strictSSL false", () => {
    expect(requestOf({ ...ok, followRedirect: false }).maxRedirects).toBe(0);
    expect(requestOf({ ...ok, followRedirect: 2 }).maxRedirects).toBe(2);
    expect(requestOf({ ...ok, followRedirect: 12 }).maxRedirects).toBe(5);
    expect(requestOf({ ...ok, strictSSL: false }).strictSSL).toBe(false);
  });

  test("every option of a wrong type is refused, naming it", () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ method: "TRACE" }, "the method must be one of"], [{ method: 7 }, "the method must be one of"],
      [{ url: 42 }, "the uri must be a string"], [{ url: { href: "x" } }, "the uri must be a string"], [{ url: "" }, "the uri must be a string"],
      [{ from: "fetch", url: null }, "the URL must be a string"],
      [{ qs: "a=1" }, "qs must be an object"], [{ qs: [1] }, "qs must be an object"], [{ qs: { a: { b: 1 } } }, "query parameter 'a' must be"],
      [{ headers: "x" }, "headers must be an object"], [{ headers: { a: { b: 1 } } }, "the value of header 'a' must be"],
      [{ headers: [["a"]] }, "[name, value] pairs"], [{ headers: [[1, "v"]] }, "header names must be strings"],
      [{ json: "yes" }, "json must be true or false"], [{ strictSSL: "false" }, "strictSSL must be true or false"],
      [{ form: "a=1" }, "form must be an object"],
      [{ auth: "me:pw" }, "auth must be"], [{ auth: { user: 1, pass: 2 } }, "auth must be {user, pass} with strings"],
      [{ timeout: "10" }, "timeout must be a positive number"], [{ timeout: -1 }, "timeout must be a positive number"], [{ timeout: Number.NaN }, "timeout must be"],
      [{ followRedirect: "yes" }, "followRedirect must be"], [{ followRedirect: -1 }, "followRedirect must be"],
      [{ bodyEscaped: 5 }, "the body must be a string or bytes"], [{ bodyEscaped: "%u0100" }, "the body must be a string or bytes"],
      [{ url: `http://example.com/${"a".repeat(17_000)}` }, "the URL is longer than 16 KiB"],
    ];
    for (const [a, why] of cases) expect({ a: Object.keys(a), d: argError({ ...ok, ...a }) }).toEqual({ a: Object.keys(a), d: expect.stringContaining(why) });
  });

  test("a huge headers object is refused without walking all of it", () => {
    const headers: Record<string, string> = {};
    for (let i = 0; i < 200_000; i++) headers[`h${i}`] = "v";
    // the values read tell how far the check walked: it stops at the 101st header
    let read = 0;
    const counted = new Proxy(headers, { get: (o, k) => { read++; return Reflect.get(o, k); } });
    expect(argError({ ...ok, headers: counted })).toContain("at most 100 request headers");
    expect(read).toBeLessThanOrEqual(101);
    expect(argError({ ...ok, headers: Array.from({ length: 500 }, (_, i) => [`h${i}`, "v"]) })).toContain("at most 100 request headers");
  });
});

// ---- inside a sandbox ------------------------------------------------------------------------

const opened: Sandbox[] = [];
afterAll(() => { for (const s of opened) s.dispose(); });

/** What the host operations of the last service answered, when they settled. */
let settled: Promise<string[]> = Promise.resolve([]);

/** Runs `code` (a service named svc) with http.request answered by the real operation. */
async function service(code: string, egress = EgressPolicy.parse("127.0.0.1"), timeoutMs = 10_000): Promise<{ kind: string; value?: any; error?: string }> {
  const sb = await Sandbox.create({ libraries: [], service: { name: "svc", code }, meta: {} }, { memoryBytes: 64 << 20, sliceMs: 2_000 });
  opened.push(sb);
  const run = new RunState();
  const calls: Promise<string>[] = [];
  const ctx = { p: {}, systemKey: "sk", depth: 0, run, e: { egress }, execute: () => { throw new Error("no"); } } as unknown as HostContext;
  const o = await sb.run("svc", { context: JSON.stringify({ systemKey: "sk" }), params: null, instanceId: "i" }, {
    host: (op, args, answer) => {
      const t0 = Date.now();
      calls.push(Promise.resolve().then(() => OPS.get(op)!(ctx, JSON.parse(args))).then(
        (d) => { answer(JSON.stringify({ ok: true, data: d ?? null })); return `ok after ${Date.now() - t0} ms`; },
        (e) => { answer(JSON.stringify({ ok: false, error: { detail: e.detail ?? String(e), code: e.kind?.code } })); return e.detail ?? String(e); },
      ));
    },
    log: () => {},
  }, timeoutMs);
  await run.close(() => {});
  settled = Promise.all(calls);
  return o.kind === "failed" ? o : { kind: o.kind, value: outcomeValue(o.raw) };
}

describe("Requests()", () => {
  test("get with qs, headers and json:true: err false and the parsed body", async () => {
    const o = await service(`function svc(req, resp) { Requests().get({ uri: "${base}/echo", qs: { a: 1 }, headers: { "X-T": "v" }, json: true }, function (err, body) { resp.success({ err: err, body: body }); }); }`);
    expect(o.value.err).toBe(false);
    expect(o.value.body).toMatchObject({ method: "GET", query: "?a=1", headers: { "x-t": "v", accept: "application/json" } });
  });

  test("post of an object sends JSON; without json:true the answer is text", async () => {
    const o = await service(`function svc(req, resp) { Requests().post({ url: "${base}/echo", body: { k: 1 } }, function (err, body) { resp.success({ err: err, type: typeof body, body: JSON.parse(body) }); }); }`);
    expect(o.value).toMatchObject({ err: false, type: "string", body: { method: "POST", body: '{"k":1}', headers: { "content-type": "application/json" } } });
  });

  test("full: statusCode, headers and body, and ClearBlade's Status, Header and Body", async () => {
    const o = await service(`function svc(req, resp) { Requests().put({ uri: "${base}/echo", body: "x", full: true }, function (err, r) { resp.success(r); }); }`);
    expect(o.value).toMatchObject({ statusCode: 200, Status: 200, headers: { "content-type": "application/json", "set-cookie": "a=1, b=2" }, Header: { "Content-Type": ["application/json"], "Set-Cookie": ["a=1", "b=2"] } });
    expect(JSON.parse(o.value.body).method).toBe("PUT");
    expect(o.value.Body).toBe(o.value.body);
  });

  test("a 404 is err=true with the body; a redirect is followed; delete and patch", async () => {
    const o = await service(`function svc(req, resp) { var out = []; var r = Requests();
      r.get({ uri: "${base}/missing" }, function (err, body) { out.push([err, body]);
      r.get({ uri: "${base}/moved", json: true }, function (err, body) { out.push([err, body.query]);
      r.delete({ uri: "${base}/echo", json: true }, function (err, body) { out.push([err, body.method]);
      r.patch({ uri: "${base}/echo", json: true, body: { a: 1 } }, function (err, body) { out.push([err, body.method, body.body]); resp.success(out); }); }); }); }); }`);
    expect(o.value).toEqual([[true, "no such thing"], [false, "?moved=1"], [false, "DELETE"], [false, "PATCH", '{"a":1}']]);
  });

  test("errors are err=true with their text: refused by policy, timeout, wrong options", async () => {
    const o = await service(`function svc(req, resp) { var out = []; var r = Requests();
      r.get({ uri: "http://169.254.169.254/latest" }, function (err, e) { out.push([err, e]);
      r.get({ uri: "${base}/slow", timeout: 0.3 }, function (err, e) { out.push([err, e]);
      r.get({ uri: 42 }, function (err, e) { out.push([err, e]);
      r.get(null, function (err, e) { out.push([err, e]);
      r.post({ uri: "${base}/echo", headers: 5 }, function (err, e) { out.push([err, e]); resp.success(out); }); }); }); }); }); }`);
    expect(o.value).toEqual([
      [true, "egress refused: 169.254.169.254, a link-local address (the cloud metadata service among them) (169.254.0.0/16), which --code-egress-allow does not allow"],
      [true, `the request to ${base} timed out after 300 ms`],
      [true, "the uri must be a string (an absolute http or https URL)"],
      [true, "the options must be an object (or a URL)"],
      [true, "headers must be an object of names to values"],
    ]);
  });

  test("a string is the uri", async () => {
    const o = await service(`function svc(req, resp) { Requests().get("${base}/echo?s=1", function (err, body) { resp.success([err, JSON.parse(body).query]); }); }`);
    expect(o.value).toEqual([false, "?s=1"]);
  });
});

describe("fetch", () => {
  test("a response: status, ok, statusText (a string that can be called), url, headers case-insensitive, text and json directly", async () => {
    const o = await service(`async function svc(req, resp) { var r = await fetch("${base}/echo?q=1", { method: "POST", body: "hi", headers: { "X-T": "v" } });
      var j = await r.json();
      resp.success({ status: r.status, ok: r.ok, st: r.statusText(), st2: "" + r.statusText, url: r.url, ct: r.headers.get("CONTENT-TYPE"), has: r.headers.has("Set-Cookie"),
        none: r.headers.get("x-none"), cookies: r.headers.headers["Set-Cookie"], textType: typeof r.text(), method: r.json().method, body: j.body, xt: j.headers["x-t"] }); }`);
    expect(o.value).toEqual({ status: 200, ok: true, st: "200 OK", st2: "200 OK", url: `${base}/echo?q=1`, ct: "application/json", has: true, none: null,
      cookies: ["a=1", "b=2"], textType: "string", method: "POST", body: "hi", xt: "v" });
  });

  test("bytes: body is a Uint8Array of the exact bytes (not UTF-8), arrayBuffer too; text() replaces bad sequences", async () => {
    const o = await service(`function svc(req, resp) { fetch("${base}/bytes").then(function (r) {
      resp.success({ isU8: r.body instanceof Uint8Array, bytes: Array.prototype.slice.call(r.body), ab: r.arrayBuffer().byteLength, text: r.text(), multi: r.headers.get("x-multi") }); }); }`);
    expect(o.value).toEqual({ isU8: true, bytes: [0, 255, 1, 200, 65], ab: 5, text: "\u0000\ufffd\u0001\ufffdA", multi: "a" });
  });

  test("a binary request body goes byte for byte; a text body's bytes are its UTF-8", async () => {
    const o = await service(`function svc(req, resp) { var b = new Uint8Array(256); for (var i = 0; i < 256; i++) b[i] = i;
      fetch("${base}/echo", { method: "POST", body: b.buffer }).then(function (r) { var got = r.json().headers["content-length"];
      return fetch("${base}/echo", { method: "PUT", body: "é" }).then(function (r2) { resp.success([got, r2.json().body, Array.prototype.slice.call(utf8(r2))]); }); }); }
      function utf8(r) { return new Uint8Array(r.body.buffer, r.body.byteOffset, 3); }`);
    expect(o.value[0]).toBe("256");
    expect(o.value[1]).toBe("é");
    expect(o.value[2]).toEqual([123, 34, 109]); // '{"m'
  });

  test("a 404 resolves with ok false; a refusal rejects with its reason; an aborted signal rejects at once", async () => {
    const o = await service(`async function svc(req, resp) { var out = [];
      var r = await fetch("${base}/missing"); out.push([r.status, r.ok, r.text()]);
      try { await fetch("http://10.255.255.1/"); } catch (e) { out.push(e.message); }
      try { await fetch("http://localhost:1/"); } catch (e) { out.push(e.message); }
      var c = new AbortController(); c.abort();
      try { await fetch("${base}/echo", { signal: c.signal }); } catch (e) { out.push(e.name); }
      try { await fetch("${base}/slow", { signal: AbortSignal.timeout(300) }); } catch (e) { out.push(e.message); }
      resp.success(out); }`);
    expect(o.value).toEqual([
      [404, false, "no such thing"],
      "egress refused: 10.255.255.1, a private address (10.0.0.0/8), which --code-egress-allow does not allow",
      "GET http://localhost:1/ failed: connection refused by 127.0.0.1",
      "AbortError",
      `the request to ${base} timed out after 300 ms`,
    ]);
  });

  test("AbortController and AbortSignal before any request: abort, reason, listeners, statics", async () => {
    const o = await service(`function svc(req, resp) { var c = new AbortController(), heard = [];
      c.signal.addEventListener("abort", function () { heard.push("listener"); }); c.signal.onabort = function () { heard.push("onabort"); };
      var before = c.signal.aborted; c.abort("why"); c.abort("again");
      var thrown; try { c.signal.throwIfAborted(); } catch (e) { thrown = e; }
      resp.success({ before: before, after: c.signal.aborted, reason: c.signal.reason, heard: heard, thrown: thrown,
        staticAbort: AbortSignal.abort().aborted, name: AbortSignal.abort().reason.name, timeout: AbortSignal.timeout(5).aborted, isSignal: c.signal instanceof AbortSignal }); }`);
    expect(o.value).toEqual({ before: false, after: true, reason: "why", heard: ["onabort", "listener"], thrown: "why", staticAbort: true, name: "AbortError", timeout: false, isSignal: false });
  });

  test("redirect: 'manual' answers the redirect itself", async () => {
    const o = await service(`async function svc(req, resp) { var r = await fetch("${base}/moved", { redirect: "manual" }); resp.success([r.status, r.headers.get("location")]); }`);
    expect(o.value).toEqual([302, "/echo?moved=1"]);
  });

  test("wrong types reject with a clear message", async () => {
    const o = await service(`async function svc(req, resp) { var out = [];
      var bad = [[42], ["${base}/echo", { method: 5 }], ["${base}/echo", { headers: "x" }], ["${base}/echo", { method: "POST", body: 5 }]];
      for (var i = 0; i < bad.length; i++) { try { var r = await fetch.apply(null, bad[i]); out.push(r.json().body); } catch (e) { out.push(e.message); } }
      resp.success(out); }`);
    expect(o.value).toEqual(["the URL must be a string (an absolute http or https URL)", expect.stringContaining("the method must be one of"),
      "headers must be an object of names to values", "5"]);
  });

  test("the run's end cancels its requests", async () => {
    const t0 = Date.now();
    const o = await service(`function svc(req, resp) { fetch("${base}/slow"); fetch("${base}/slow"); }`, EgressPolicy.parse("127.0.0.1"), 300);
    expect(o.kind).toBe("failed");
    expect(o.error).toContain("timed out");
    expect(await settled).toEqual(["the request was cancelled (the run ended)", "the request was cancelled (the run ended)"]);
    expect(Date.now() - t0).toBeLessThan(2_000);
  });
});
