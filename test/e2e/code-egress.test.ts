// Outbound HTTP from code services, black-box: Requests() and fetch against a local HTTP server,
// the platform started with --code-egress-allow 127.0.0.1 (GET with qs and headers, POST JSON,
// full, a 404, a timeout, redirects, size limits, hostile arguments), and without it: loopback,
// the metadata address, a private address and localhost are refused before any connection. A
// redirect from the allowed 127.0.0.1 to 127.0.0.2 is refused too. Also the flag itself: a wrong
// entry stops the start with status 2, and --help lists it.
import http from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import { type DevSystem, devWithSystem, runBin, startOutpost, uniq } from "./harness.ts";

// ---- the local server the services call ---------------------------------------------------------

interface Seen { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }
const seen: Seen[] = [];
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
    const u = new URL(req.url ?? "/", "http://x");
    const json = (status: number, v: unknown) => { res.writeHead(status, { "content-type": "application/json", "x-served-by": "egress-test" }); res.end(JSON.stringify(v)); };
    switch (u.pathname) {
      case "/echo": return json(200, { method: req.method, path: u.pathname, query: Object.fromEntries(u.searchParams), headers: req.headers, body });
      case "/missing": res.writeHead(404, { "content-type": "text/plain" }); return res.end("no such page");
      case "/slow": { const timer = setTimeout(() => { res.end("late"); }, 10_000); res.on("close", () => clearTimeout(timer)); return; }
      case "/redirect": res.writeHead(302, { location: u.searchParams.get("to") ?? "/echo" }); return res.end();
      case "/huge": res.writeHead(200, { "content-type": "application/octet-stream" }); return res.end(Buffer.alloc((10 << 20) + 1, 97));
      default: res.writeHead(500); return res.end();
    }
  });
});
await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
const PORT = (server.address() as AddressInfo).port;
const BASE = `http://127.0.0.1:${PORT}`;
t.teardown(() => { server.closeAllConnections(); server.close(); });

const allowed = await startOutpost({ args: ["--code-egress-allow", "127.0.0.1"] });
const closed = await startOutpost();
t.teardown(() => Promise.all([allowed.stop(), closed.stop()]));
const A = await devWithSystem(allowed, "egress-allowed");
const C = await devWithSystem(closed, "egress-default");

/** Rejects when `p` takes longer than `ms` (a hung request fails its test instead of the file). */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  return Promise.race([p, new Promise<T>((_, rej) => { timer = setTimeout(() => rej(new Error(`${what}: no answer within ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(timer));
}

/** Creates the service `code` defines (a function named by the returned name) and runs it with
 *  `params`: its HTTP answer and how long the run took. */
async function runCode(sys: DevSystem, code: (name: string) => string, params: Record<string, unknown> = {}, timeoutS = 20) {
  const name = uniq("egress");
  const made = await sys.dev.post(`/admin/code/v/1/${sys.systemKey}/${name}`, { code: code(name), parameters: [], execution_timeout: timeoutS });
  if (made.status !== 200) throw new Error(`create service: ${made.status} ${made.text}`);
  const t0 = Date.now();
  const r = await within(sys.dev.post(`/api/v/1/code/${sys.systemKey}/${name}`, params), 30_000, name);
  return { status: r.status, body: r.body, results: r.body?.results, ms: Date.now() - t0 };
}

/** A service calling Requests()[verb](options) and answering [err, data]. */
const requests = (verb: string, options: string) => (name: string) =>
  `function ${name}(req, resp) { Requests().${verb}(${options}, function (err, data) { resp.success([err, data]); }); }`;

// ---- allowed: 127.0.0.1 ---------------------------------------------------------------------------

t.test("Requests().get with qs and headers reaches the server; err false and the body", async (t) => {
  const r = await runCode(A, requests("get", `{ uri: "${BASE}/echo", qs: { site: "north", n: 2 }, headers: { "X-Trace": "t-1" } }`));
  t.equal(r.status, 200);
  const [err, data] = r.results;
  t.equal(err, false);
  t.equal(typeof data, "string", "without json:true the body is text");
  const echo = JSON.parse(data);
  t.same(echo.query, { site: "north", n: "2" });
  t.equal(echo.headers["x-trace"], "t-1");
  t.equal(echo.headers.host, `127.0.0.1:${PORT}`);
});

t.test("Requests().post with json:true sends JSON and parses the answer", async (t) => {
  const r = await runCode(A, requests("post", `{ uri: "${BASE}/echo", body: { temp: 21.5, tags: ["a"] }, json: true }`));
  const [err, data] = r.results;
  t.equal(err, false);
  t.equal(data.method, "POST");
  t.same(JSON.parse(data.body), { temp: 21.5, tags: ["a"] });
  t.match(data.headers["content-type"], /^application\/json/);
});

t.test("full:true answers statusCode, headers and body (and ClearBlade's Status, Header, Body)", async (t) => {
  const r = await runCode(A, requests("put", `{ uri: "${BASE}/echo", body: "raw text", full: true }`));
  const [err, data] = r.results;
  t.equal(err, false);
  t.equal(data.statusCode, 200);
  t.equal(data.Status, 200);
  t.equal(data.headers["x-served-by"], "egress-test");
  t.same(data.Header["X-Served-By"], ["egress-test"]);
  t.equal(JSON.parse(data.body).body, "raw text");
  t.equal(data.Body, data.body);
});

t.test("a 404 is err=true with the body", async (t) => {
  const r = await runCode(A, requests("get", `{ uri: "${BASE}/missing" }`));
  t.same(r.results, [true, "no such page"]);
});

t.test("a server that does not answer: err=true at the timeout, the run goes on", async (t) => {
  const r = await runCode(A, requests("get", `{ uri: "${BASE}/slow", timeout: 1 }`));
  t.same(r.results, [true, `the request to ${BASE} timed out after 1000 ms`]);
  t.ok(r.ms < 5_000, `answered in ${r.ms} ms`);
});

t.test("fetch: a response with status, ok, statusText, headers, json() and text() answering directly", async (t) => {
  const r = await runCode(A, (name) => `async function ${name}(req, resp) {
    var r = await fetch("${BASE}/echo?x=1", { method: "POST", body: JSON.stringify({ a: 1 }), headers: { "Content-Type": "application/json" } });
    var missing = await fetch("${BASE}/missing");
    resp.success({ status: r.status, ok: r.ok, statusText: r.statusText(), served: r.headers.get("X-SERVED-BY"), has: r.headers.has("content-type"),
      body: r.json().body, method: (await r.json()).method, bytes: r.body.length === r.text().length, missing: [missing.status, missing.ok, missing.text()] });
  }`);
  t.same(r.results, { status: 200, ok: true, statusText: "200 OK", served: "egress-test", has: true, body: '{"a":1}', method: "POST", bytes: true, missing: [404, false, "no such page"] });
});

t.test("a redirect to 127.0.0.2 (loopback, not in the list) is refused; one to 127.0.0.1 is followed", async (t) => {
  const before = seen.length;
  const to = encodeURIComponent(`http://127.0.0.2:${PORT}/echo`);
  const r = await runCode(A, requests("get", `{ uri: "${BASE}/redirect?to=${to}" }`));
  t.equal(r.results[0], true);
  t.equal(r.results[1], "egress refused: 127.0.0.2, a loopback address (127.0.0.0/8), which --code-egress-allow does not allow");
  t.equal(seen.length, before + 1, "only the first hop reached a server");
  const ok = await runCode(A, requests("get", `{ uri: "${BASE}/redirect?to=%2Fecho%3Fr%3D1", json: true }`));
  t.same(ok.results[1].query, { r: "1" });
  const meta = await runCode(A, (name) => `function ${name}(req, resp) { fetch("${BASE}/redirect?to=${encodeURIComponent("http://169.254.169.254/latest/meta-data/")}").then(function () { resp.success("reached"); }, function (e) { resp.success(e.message); }); }`);
  t.match(meta.results, /^egress refused: 169\.254\.169\.254, a link-local address/);
});

t.test("a response over 10 MiB is an error, not a cut body", async (t) => {
  const r = await runCode(A, requests("get", `{ uri: "${BASE}/huge" }`));
  t.same(r.results, [true, "the response body is larger than 10 MiB"]);
});

// ---- hostile arguments ---------------------------------------------------------------------------

t.test("wrong types for every option: err=true with what is wrong, never a crash", async (t) => {
  const cases: [string, string][] = [
    [`{ uri: 42 }`, "the uri must be a string"],
    [`{ uri: ["${BASE}/echo"] }`, "the uri must be a string"],
    [`{ uri: "ftp://127.0.0.1/x" }`, "only http and https"],
    [`{ uri: "not a url" }`, "is not an absolute URL"],
    [`{ uri: "${BASE}/echo", qs: "a=1" }`, "qs must be an object"],
    [`{ uri: "${BASE}/echo", qs: { a: { deep: 1 } } }`, "query parameter 'a' must be"],
    [`{ uri: "${BASE}/echo", headers: "X-A: 1" }`, "headers must be an object"],
    [`{ uri: "${BASE}/echo", headers: { "X-A": { v: 1 } } }`, "the value of header 'X-A' must be"],
    [`{ uri: "${BASE}/echo", headers: { "bad name": "v" } }`, "is not a header name"],
    [`{ uri: "${BASE}/echo", headers: { "X-A": "v\\r\\nX-Injected: 1" } }`, "line break"],
    [`{ uri: "${BASE}/echo", json: "yes" }`, "json must be true or false"],
    [`{ uri: "${BASE}/echo", timeout: "5" }`, "timeout must be a positive number"],
    [`{ uri: "${BASE}/echo", timeout: -1 }`, "timeout must be a positive number"],
    [`{ uri: "${BASE}/echo", auth: "me:pw" }`, "auth must be"],
    [`{ uri: "${BASE}/echo", auth: { user: 1, pass: [] } }`, "auth must be {user, pass} with strings"],
    [`{ uri: "${BASE}/echo", strictSSL: "no" }`, "strictSSL must be true or false"],
    [`{ uri: "${BASE}/echo", followRedirect: "always" }`, "followRedirect must be"],
    [`{ uri: "${BASE}/echo", form: 7 }`, "form must be an object"],
    [`7`, "the options must be an object"],
    [`null`, "the options must be an object"],
  ];
  const before = seen.length;
  const r = await runCode(A, (name) => `function ${name}(req, resp) { var out = [], cases = [${cases.map(([c]) => c).join(", ")}];
    (function next(i) { if (i === cases.length) return resp.success(out);
      Requests().post(cases[i], function (err, data) { out.push([err, data]); next(i + 1); }); })(0); }`);
  t.equal(r.status, 200);
  for (let i = 0; i < cases.length; i++) {
    t.equal(r.results[i][0], true, `${cases[i]![0]}: err`);
    t.match(r.results[i][1], cases[i]![1], `${cases[i]![0]}: says ${cases[i]![1]}`);
  }
  t.equal(seen.length, before, "none of them reached the server");
});

t.test("a huge headers object is refused; the platform stays responsive", async (t) => {
  // 20,000 names, 200 times the bound (building 200,000 in the interpreter outlasted the run's
  // 20 s on a loaded machine)
  const r = await runCode(A, (name) => `function ${name}(req, resp) { var h = {}; for (var i = 0; i < 20000; i++) h["x-h" + i] = "v";
    Requests().get({ uri: "${BASE}/echo", headers: h }, function (err, data) { resp.success([err, data]); }); }`);
  t.same(r.results, [true, "at most 100 request headers"]);
  t.equal((await allowed.proc.exitCode), null, "still running");
});

t.test("request bodies: 11 MiB is refused before sending; 100 MB cannot be built in the sandbox; both end cleanly", async (t) => {
  const before = seen.length;
  const eleven = await runCode(A, (name) => `function ${name}(req, resp) { var s = "x".repeat((11 << 20) + 1);
    Requests().post({ uri: "${BASE}/echo", body: s }, function (err, data) { resp.success([err, data]); }); }`);
  t.equal(eleven.results[0], true);
  t.match(eleven.results[1], /^the request body is larger than 10 MiB/);
  const hundred = await runCode(A, (name) => `function ${name}(req, resp) { var s = "x".repeat(100 * 1000 * 1000);
    fetch("${BASE}/echo", { method: "POST", body: s }).then(function (r) { resp.success(r.status); }, function (e) { resp.success(e.message); }); }`);
  t.not(hundred.results, 200, "the 100 MB body did not go out");
  t.match(JSON.stringify(hundred.body), /out of memory|larger than 10 MiB/);
  t.equal(seen.length, before, "neither reached the server");
  const after = await runCode(A, requests("get", `{ uri: "${BASE}/echo", json: true }`));
  t.equal(after.results[0], false, "the next request works");
});

// ---- the default policy ---------------------------------------------------------------------------

t.test("without the flag: 127.0.0.1, 169.254.169.254, a private address and localhost are refused before connecting", async (t) => {
  const before = seen.length;
  const cases: [string, RegExp][] = [
    [`${BASE}/echo`, /^egress refused: 127\.0\.0\.1, a loopback address \(127\.0\.0\.0\/8\)/],
    ["http://169.254.169.254/latest/meta-data/iam/security-credentials/", /^egress refused: 169\.254\.169\.254, a link-local address \(the cloud metadata service among them\)/],
    ["http://10.255.255.1/", /^egress refused: 10\.255\.255\.1, a private address \(10\.0\.0\.0\/8\)/],
    [`http://localhost:${PORT}/echo`, /^egress refused: 'localhost' resolves to (127\.0\.0\.1|::1), a loopback address/],
    [`http://[::1]:${PORT}/echo`, /^egress refused: ::1, a loopback address/],
    [`http://[::ffff:127.0.0.1]:${PORT}/echo`, /^egress refused: 127\.0\.0\.1, a loopback address/],
    [`http://2130706433:${PORT}/echo`, /^egress refused: 127\.0\.0\.1, a loopback address/],
    ["http://0.0.0.0/", /^egress refused: 0\.0\.0\.0, an unspecified/],
    ["https://192.168.1.1/", /^egress refused: 192\.168\.1\.1, a private address/],
  ];
  for (const [url, re] of cases) {
    const r = await runCode(C, requests("get", `{ uri: "${url}", timeout: 20 }`));
    t.equal(r.results?.[0], true, `${url}: err`);
    t.match(r.results?.[1], re, url);
    t.ok(r.ms < 3_000, `${url}: refused at once (${r.ms} ms), no connection attempted`);
  }
  const f = await runCode(C, (name) => `function ${name}(req, resp) { fetch("http://169.254.169.254/").then(function () { resp.success("reached"); }, function (e) { resp.success(e.message); }); }`);
  t.match(f.results, /^egress refused: 169\.254\.169\.254/);
  t.equal(seen.length, before, "the local server saw none of them");
});

t.test("without the flag, 'https://' + cbmeta.platform_url reaches this platform's own routes, with their checks; no other port or spelling of it", async (t) => {
  const target = uniq("target");
  const made = await C.dev.post(`/admin/code/v/1/${C.systemKey}/${target}`, { code: `function ${target}(req, resp) { resp.success({ who: req.userEmail, p: req.params }); }`, parameters: [] });
  t.equal(made.status, 200, "the service called over the API");
  // as ClearBlade's REST helper libraries write it: https, the platform_url, the caller's token
  const call = (headers: string) => (name: string) => `function ${name}(req, resp) {
    fetch("https://" + cbmeta.platform_url + "/api/v/1/code/" + cbmeta.system_key + "/${target}", { method: "POST", headers: ${headers}, body: JSON.stringify({ x: 1 }) })
      .then(function (r) { var body = r.text(); try { body = JSON.parse(body); } catch (e) {} resp.success({ status: r.status, body: body }); }, function (e) { resp.success(e.message); });
  }`;
  const withToken = await runCode(C, call(`{ "ClearBlade-UserToken": req.userToken, "Content-Type": "application/json" }`));
  t.equal(withToken.results?.status, 200, "answered 200");
  t.same(withToken.results?.body?.results, { who: C.email, p: { x: 1 } }, "the other service ran as the caller, with the parameters sent");
  const noToken = await runCode(C, call("{}"));
  t.equal(noToken.results?.status, 401, "without a token the route refuses it, as for any caller");
  const badToken = await runCode(C, call(`{ "ClearBlade-UserToken": "not-a-token" }`));
  const direct = await C.app.post(`/api/v/1/code/${C.systemKey}/${target}`, { x: 1 }, { "ClearBlade-UserToken": "not-a-token" });
  t.equal(direct.status, 400, "a token that is no token, sent from outside: refused");
  t.same([badToken.results?.status, badToken.results?.body?.error?.detail], [direct.status, direct.body?.error?.detail], "and from code: refused the same way");

  // only the host and port platform_url names: the MQTT port, another spelling of the host
  for (const url of [`http://127.0.0.1:${closed.mqttPort}/`, `http://localhost:${closed.httpPort}/api/about`]) {
    const r = await runCode(C, requests("get", `{ uri: "${url}", timeout: 5 }`));
    t.equal(r.results?.[0], true, `${url}: err`);
    t.match(r.results?.[1], /^egress refused: /, `${url}: refused by the egress policy`);
  }
});

// ---- the flag ---------------------------------------------------------------------------------

t.test("--code-egress-allow: a wrong entry exits 2 naming it; --help lists the flag", async (t) => {
  for (const [value, why] of [["10.0.0.0/33", "the prefix '/33' must be a number from 0 to 32"], ["127.0.0.1,not a host", "'not a host' is not a host name"]] as const) {
    const r = await runBin(["--code-egress-allow", value, "--data-dir", "/nonexistent/egress-test"]);
    t.equal(r.code, 2, `${value}: exit 2`);
    t.match(r.stderr + r.stdout, `--code-egress-allow: `);
    t.match(r.stderr + r.stdout, why);
    t.notMatch(r.stderr + r.stdout, /\bat \S+:\d+/, "no stack trace");
  }
  const env = await runBin([], { env: { OUTPOST_CODE_EGRESS_ALLOW: "10.1.0.0/8", OUTPOST_DATA_DIR: "/nonexistent/egress-test" } });
  t.equal(env.code, 2);
  t.match(env.stderr + env.stdout, "did you mean 10.0.0.0/8?");
  const help = await runBin(["--help"]);
  t.match(help.stdout, /--code-egress-allow LIST/);
});
