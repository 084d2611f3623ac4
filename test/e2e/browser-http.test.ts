// What browsers get over HTTP, black-box and without a browser: CORS preflights and headers on
// every kind of answer (success, error, not found, throttled, sign-in refused), a restricted
// --cors-origins, and the console's files (served from the binary with a strict content policy).
import http from "node:http";
import { gunzipSync } from "node:zlib";
import t from "tap";
import { devWithSystem, isEnvelope, request, startOutpost } from "./harness.ts";

const any = await startOutpost();
const listed = await startOutpost({ args: ["--cors-origins", "https://app.example.com, http://localhost:3000"] });
t.teardown(async () => { await any.stop(); await listed.stop(); });
const s = await devWithSystem(any, "cors");

const preflight = (base: string, path: string, origin: string, headers = "clearblade-usertoken, clearblade-systemkey, clearblade-systemsecret, content-type") =>
  request(base, "OPTIONS", path, { headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": headers } });

t.test("preflights: 204 with the methods and the SDKs' headers, on any path", async (t) => {
  for (const path of ["/api/v/1/user/auth", `/api/v/1/code/${s.systemKey}/svc`, "/admin/systemmanagement", "/no/such/route"]) {
    const r = await preflight(any.url, path, "https://web.example.org");
    t.equal(r.status, 204, `${path}: 204`);
    t.equal(r.headers["access-control-allow-origin"], "*", "any origin");
    t.match(r.headers["access-control-allow-methods"], /GET.*POST.*PUT.*DELETE/);
    const allowed = String(r.headers["access-control-allow-headers"]).toLowerCase();
    for (const h of ["clearblade-usertoken", "clearblade-devtoken", "clearblade-devicetoken", "clearblade-systemkey", "clearblade-systemsecret", "platform-usertoken", "platform-devtoken", "platform-systemkey", "platform-systemsecret", "content-type", "accept"])
      t.ok(allowed.includes(h), `allows ${h}`);
    t.ok(Number(r.headers["access-control-max-age"]) > 0, "cacheable");
    t.equal(r.text, "", "no body");
  }
  const plain = await request(any.url, "OPTIONS", "/api/about");
  t.equal(plain.status, 204, "an OPTIONS without CORS headers is answered too");
  t.match(plain.headers.allow, /GET/);
});

t.test("every answer says who may read it: success, error, not found, refused sign-in, throttled", async (t) => {
  const origin = { origin: "https://web.example.org" };
  const ok = await request(any.url, "GET", "/api/about", { headers: origin });
  t.equal(ok.status, 200);
  t.equal(ok.headers["access-control-allow-origin"], "*", "success");
  const err = await request(any.url, "GET", "/api/v/1/user/info", { headers: { ...origin, "ClearBlade-UserToken": "forged" } });
  t.equal(err.status, 400);
  t.ok(isEnvelope(err.body, 400), "the error envelope");
  t.equal(err.headers["access-control-allow-origin"], "*", "an error");
  const nf = await request(any.url, "GET", "/no/such/route", { headers: origin });
  t.equal(nf.status, 404);
  t.equal(nf.headers["access-control-allow-origin"], "*", "not found");
  const slashes = await request(any.url, "GET", "//api//about", { headers: origin });
  t.equal(slashes.status, 200, "a re-routed path");
  t.equal(slashes.headers["access-control-allow-origin"], "*", "answered with the header once");
  const bad = await request(any.url, "POST", "/admin/auth", { headers: origin, body: { email: s.email, password: "wrong" } });
  t.equal(bad.status, 401);
  t.equal(bad.headers["access-control-allow-origin"], "*", "a refused sign-in");
  const badJson = await request(any.url, "POST", "/admin/auth", { headers: origin, body: "{ not json" });
  t.equal(badJson.status, 400);
  t.equal(badJson.headers["access-control-allow-origin"], "*", "malformed JSON");

  const th = await startOutpost({ defaultThrottlers: true });
  t.teardown(() => th.stop());
  const d = await devWithSystem(th, "cors-throttle");
  let last = await request(th.url, "POST", "/admin/auth", { headers: origin, body: { email: d.email, password: "wrong" } });
  for (let i = 0; i < 5 && last.status !== 429; i++) last = await request(th.url, "POST", "/admin/auth", { headers: origin, body: { email: d.email, password: "wrong" } });
  t.equal(last.status, 429, "throttled");
  t.equal(last.headers["access-control-allow-origin"], "*", "a throttled answer");
  t.match(String(last.headers["access-control-expose-headers"]), /retry-after/i, "whose Retry-After a page may read");
});

t.test("--cors-origins with a list: listed origins only", async (t) => {
  const ok = await preflight(listed.url, "/api/v/1/user/auth", "https://app.example.com");
  t.equal(ok.status, 204);
  t.equal(ok.headers["access-control-allow-origin"], "https://app.example.com", "the listed origin, echoed");
  t.match(String(ok.headers.vary), /Origin/, "Vary: Origin");
  t.equal((await preflight(listed.url, "/api/about", "http://localhost:3000")).headers["access-control-allow-origin"], "http://localhost:3000", "the second one");
  const no = await preflight(listed.url, "/api/v/1/user/auth", "https://evil.example.net");
  t.equal(no.status, 403, "another origin's preflight: 403");
  t.ok(isEnvelope(no.body, 403), "with the envelope");
  t.equal(no.headers["access-control-allow-origin"], undefined, "and no allow-origin");
  const get = await request(listed.url, "GET", "/api/about", { headers: { origin: "https://evil.example.net" } });
  t.equal(get.status, 200, "a simple request is still served (a browser will not let the page read it)");
  t.equal(get.headers["access-control-allow-origin"], undefined, "without allow-origin");
  t.match(String(get.headers.vary), /Origin/, "and Vary: Origin");
  const mine = await request(listed.url, "GET", "/api/about", { headers: { origin: "https://app.example.com" } });
  t.equal(mine.headers["access-control-allow-origin"], "https://app.example.com", "the listed origin reads it");
  const none = await request(listed.url, "GET", "/api/about");
  t.equal(none.status, 200, "a client that is not a browser (no Origin) is not affected");
});

t.test("the console's files come from the binary, with a strict content policy", async (t) => {
  for (const path of ["/console", "/console/"]) {
    const r = await request(any.url, "GET", path);
    t.equal(r.status, 200, path);
    t.match(r.headers["content-type"], /text\/html/);
    t.match(r.text, /<script type="module" src="\/console\/app\.js">/);
    t.match(r.headers["content-security-policy"], /default-src 'none'; script-src 'self'/, "a content policy without inline script");
    t.match(r.headers["content-security-policy"], /connect-src 'self'/, "talking to this server only");
    t.equal(r.headers["x-content-type-options"], "nosniff");
    t.match(r.headers["content-security-policy"], /frame-ancestors 'none'/, "never framed");
    t.equal(r.headers["x-frame-options"], "DENY");
  }
  const js = await request(any.url, "GET", "/console/app.js");
  t.equal(js.status, 200);
  t.match(js.headers["content-type"], /javascript/);
  t.ok(js.text.length > 2000, `the script (${js.text.length} bytes)`);
  t.notMatch(js.text, /outerHTML|insertAdjacentHTML|document\.write/, "builds no markup from text");
  // Preact writes innerHTML only for a dangerouslySetInnerHTML prop, which no page passes (JSX
  // would compile one to an object key)
  t.notMatch(js.text, /dangerouslySetInnerHTML:/, "no page hands Preact markup");
  t.notMatch(js.text, /https?:\/\/(?!www\.w3\.org)/, "loads nothing from elsewhere");
  const css = await request(any.url, "GET", "/console/app.css");
  t.equal(css.status, 200);
  t.match(css.headers["content-type"], /text\/css/);
  const total = Buffer.byteLength(js.text) + Buffer.byteLength(css.text) + Buffer.byteLength((await request(any.url, "GET", "/console")).text);
  // (every page of the console is in it but the code editor, a chunk of its own; what a browser
  // transfers is the gzipped script, checked below)
  t.ok(total < 250_000, `small: ${total} bytes in all on a first load`);
  // carried and sent gzipped to a client that takes it (browsers); the text to one that does not
  const zipped = await new Promise<{ encoding?: string; body: Buffer }>((ok, no) => {
    http.get(`${any.url}/console/app.js`, { headers: { "accept-encoding": "gzip, deflate" } }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (c: Buffer) => parts.push(c)).on("end", () => ok({ encoding: res.headers["content-encoding"], body: Buffer.concat(parts) }));
    }).on("error", no);
  });
  t.equal(zipped.encoding, "gzip", "gzip to a browser");
  t.equal(gunzipSync(zipped.body).toString("utf8"), js.text, "the same script");
  t.ok(zipped.body.length < js.text.length / 2, `a third of the bytes (${zipped.body.length})`);
  t.ok(zipped.body.length < 64_000, `under 64 KB over the wire (${zipped.body.length})`);
  // the code editor is a chunk of its own, fetched by import() on the pages that show code
  const chunk = js.text.match(/chunk-[a-z0-9]+\.js/)?.[0];
  t.ok(chunk, `the script names the editor's chunk (${chunk})`);
  const editor = await request(any.url, "GET", `/console/${chunk}`);
  t.equal(editor.status, 200, "served");
  t.match(editor.headers["content-type"], /javascript/);
  t.ok(editor.text.length < 450_000, `the editor's chunk: ${editor.text.length} bytes`);
  t.notMatch(editor.text, /innerHTML|outerHTML|insertAdjacentHTML|document\.write/, "it builds no markup from text either");
  t.notMatch(editor.text, /https?:\/\/(?!www\.w3\.org)/, "nor loads anything from elsewhere");
  // the page's nonce (for the editor's <style> element) is new with each load and in the policy
  const [a, b] = [await request(any.url, "GET", "/console"), await request(any.url, "GET", "/console")];
  const nonceOf = (r: typeof a) => r.text.match(/<meta name="csp-nonce" content="([^"]+)">/)?.[1];
  t.ok(nonceOf(a) && nonceOf(a) !== nonceOf(b), "a nonce per load");
  t.match(a.headers["content-security-policy"], new RegExp(`style-src 'self' 'nonce-${nonceOf(a)!.replace(/[+/=]/g, "\\$&")}'`), "admitted by the policy, for styles only");
  t.notMatch(a.headers["content-security-policy"], /script-src[^;]*nonce/, "never for scripts");
  for (const path of ["/console/nope.js", "/console/..%2Fpackage.json", "/console/app.js/x"]) {
    const r = await request(any.url, "GET", path);
    t.equal(r.status, 404, `${path}: 404`);
    t.ok(isEnvelope(r.body, 404), "the envelope");
  }
});
