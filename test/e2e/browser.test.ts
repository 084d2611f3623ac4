// In a real browser (Debian's chromium, headless, driven by puppeteer-core): a web app served from
// another origin loads clearblade-js-client from npm and uses it against the binary (CORS: init and
// sign-in, collections and queries, code, users, messaging over WebSocket, devices, logout), and
// an operator drives the console (/console): signs in, watches an edge go from connected to
// disconnected when its process is killed, finds a failed asset with its error and retries it,
// edits a template, reads throttling cases and message history, and opens an edge's own console.
// Screenshots go to artifacts/browser/ (OUTPOST_ARTIFACTS overrides).
import { existsSync, mkdirSync, readFileSync, } from "node:fs";
import http from "node:http";
import { join, resolve } from "node:path";
import t from "tap";
import type { Browser, Page } from "puppeteer-core";
import { CHROMIUM, launchChromium } from "./chromium.ts";
import { Client, devWithSystem, freePort, needs, newUser, ok200, request, startOutpost, uniq, waitFor, type Outpost } from "./harness.ts";

const ARTIFACTS = resolve(process.env.OUTPOST_ARTIFACTS ?? "artifacts", "browser");
const SDK_DIR = resolve("node_modules/clearblade-js-client");
const skip = await needs("chromium (apt-get install chromium)", existsSync(CHROMIUM));

let browser: Browser | undefined;
const stops: (() => Promise<unknown>)[] = [];
t.teardown(async () => {
  await browser?.close().catch(() => {});
  for (const s of stops.reverse()) await s().catch(() => {});
});

const launch = () => launchChromium(stops, 60_000);

async function newPage(): Promise<Page> {
  const page = await browser!.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  page.on("pageerror", (e) => t.comment(`page error: ${(e as Error).message}`));
  return page;
}

async function shot(page: Page, name: string) {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** A web app on its own origin (http://localhost:PORT; the API is at http://127.0.0.1:...): a page
 *  and the SDK's files from node_modules, as a bundler would ship them. */
async function webApp(): Promise<string> {
  const port = await freePort();
  const files: Record<string, [string, string]> = {
    "/": ["text/html", `<!doctype html><meta charset="utf-8"><title>web app</title>
<script src="/sdk/mqttws31.js"></script>
<script>var module = { exports: {} };</script>
<script src="/sdk/index.js"></script>
<script>window.CB = module.exports;</script>`],
    "/sdk/index.js": ["text/javascript", readFileSync(join(SDK_DIR, "index.js"), "utf8")],
    "/sdk/mqttws31.js": ["text/javascript", readFileSync(join(SDK_DIR, "lib/mqttws31.js"), "utf8")],
  };
  const server = http.createServer((req, res) => {
    const f = files[req.url ?? ""];
    if (!f) { res.writeHead(404).end(); return; }
    res.writeHead(200, { "content-type": f[0] }).end(f[1]);
  });
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  stops.push(() => new Promise((r) => server.close(r)));
  return `http://localhost:${port}`;
}

t.test("a web app on another origin uses clearblade-js-client against the binary", skip, async (t) => {
  const o = await startOutpost();
  stops.push(() => o.stop());
  browser ??= await launch();
  const s = await devWithSystem(o, "browser-sdk");
  const u = await newUser(s);
  ok200(t, await s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { roles: { add: ["Administrator"] } } }), "the user is an Administrator");
  const col = uniq("things");
  const c = await s.dev.post("/admin/collectionmanagement", { name: col, appID: s.systemKey });
  ok200(t, c, "collection");
  ok200(t, await s.dev.put("/admin/collectionmanagement", { id: c.body.collectionID, addColumn: { name: "label", type: "string" } }), "column");
  ok200(t, await s.dev.post(`/admin/code/v/1/${s.systemKey}/hello`, { code: "function hello(req, resp) { resp.success('hi ' + req.params.who); }", parameters: ["who"] }), "service");

  const origin = await webApp();
  const page = await newPage();
  await page.goto(`${origin}/`, { waitUntil: "load" });
  const r = await page.evaluate(async (cfg) => {
    const w = globalThis as any;
    const out: Record<string, unknown> = {};
    // the SDK answers (err, body): err is true on a failure
    const p = <T>(f: (cb: (err: unknown, body: T) => void) => void) => new Promise<T>((res, rej) => f((err, body) => (err ? rej(new Error(typeof body === "string" ? body : JSON.stringify(body))) : res(body))));
    const cb = w.CB.ClearBlade();
    const user = await p<any>((k) => cb.init({ systemKey: cfg.sk, systemSecret: cfg.secret, URI: cfg.api, messagingURI: "127.0.0.1", messagingPort: cfg.ws, email: cfg.email, password: cfg.password, callback: k }));
    out.signedIn = typeof user?.authToken === "string" && user.authToken.length > 0;
    const col = cb.Collection({ collectionName: cfg.col });
    await p((k) => col.create({ label: "alpha" }, k));
    await p((k) => col.create({ label: "beta" }, k));
    const q = cb.Query({ collectionName: cfg.col });
    q.equalTo("label", "beta");
    const found = await p<any>((k) => q.fetch(k));
    out.query = (Array.isArray(found) ? found : found.DATA ?? []).map((x: any) => x.data?.label ?? x.label);
    out.count = (await p<any>((k) => col.count(undefined, k))).count;
    out.code = (await p<any>((k) => cb.Code().execute("hello", { who: "browser" }, k))).results;
    out.me = (await p<any>((k) => cb.User().getUser(k))).email;
    const dev = cb.Device();
    await p((k) => dev.create({ name: cfg.device, type: "sensor", state: "on", enabled: true, allow_key_auth: true, active_key: "k-123456" }, k));
    out.device = (await p<any>((k) => dev.getDeviceByName(cfg.device, k))).state;
    // messaging over MQTT WebSocket: subscribe, publish, receive
    const got = await new Promise<string>((res, rej) => {
      const timer = setTimeout(() => rej(new Error("no message over WebSocket")), 10_000);
      const m = cb.Messaging({}, (err: unknown) => {
        if (err) { rej(new Error(`messaging: ${String(err)}`)); return; }
        m.subscribe("browser/t", {}, (payload: string) => { clearTimeout(timer); m.disconnect(); res(payload); });
        setTimeout(() => m.publish("browser/t", "over the socket"), 300);
      });
    });
    out.message = got;
    await p((k) => cb.logoutUser(k));
    out.afterLogout = await p((k) => cb.User().getUser(k)).then(() => "still signed in", (e: Error) => e.message);
    return out;
  }, { api: o.url, ws: o.mqttWsPort, sk: s.systemKey, secret: s.systemSecret, email: u.email, password: u.password, col, device: uniq("dev") });
  t.equal(r.signedIn, true, "init signs the user in");
  t.same(r.query, ["beta"], "a query through the SDK");
  t.equal(r.count, 2, "count");
  t.equal(r.code, "hi browser", "code service");
  t.equal(r.me, u.email, "the user's own record");
  t.equal(r.device, "on", "device created and read");
  t.equal(r.message, "over the socket", "a message over MQTT WebSocket");
  t.not(r.afterLogout, "still signed in", "logged out: the token no longer works");
});

t.test("an origin left out of --cors-origins cannot read answers; a listed one can", skip, async (t) => {
  const origin = await webApp();
  const o = await startOutpost({ args: ["--cors-origins", `http://app.example.com,${origin}`] });
  stops.push(() => o.stop());
  const blocked = await startOutpost({ args: ["--cors-origins", "http://app.example.com"] });
  stops.push(() => blocked.stop());
  browser ??= await launch();
  const page = await newPage();
  await page.goto(`${origin}/`, { waitUntil: "load" });
  const read = (url: string) => page.evaluate((u) => fetch(u, { headers: { "ClearBlade-UserToken": "x" } }).then((r) => `status ${r.status}`, () => "blocked"), url);
  t.equal(await read(`${o.url}/api/v/1/user/info`), "status 400", "a listed origin reads even an error answer (preflighted: the token header)");
  t.equal(await read(`${blocked.url}/api/v/1/user/info`), "blocked", "another origin's preflight is refused");
  t.equal(await page.evaluate((u) => fetch(u).then((r) => `status ${r.status}`, () => "blocked"), `${blocked.url}/api/about`), "blocked", "and a simple request's answer is not readable");
});

// ---- the console ------------------------------------------------------------------------------

t.test("the console: sign in, edges live, a failed asset retried, template, throttling, history, an edge's own view", skip, async (t) => {
  const platform = await startOutpost({ args: ["--edge-templates-dir", resolve("edge-templates")] });
  stops.push(() => platform.stop());
  browser ??= await launch();
  const s = await devWithSystem(platform, "plant-north");
  const SK = s.systemKey;
  const edges: Record<string, Outpost> = {};
  const tokens: Record<string, string> = {};
  for (const name of ["gw-a", "gw-b", "gw-c"]) {
    const e = await s.dev.post(`/admin/edges/${SK}/${name}`, { description: `gateway ${name}` });
    ok200(t, e, `edge ${name}`);
    tokens[name] = e.body.token;
    ok200(t, await s.dev.put(`/admin/edges/template/${SK}/${name}`, { add: [{ def_module: "service", def_name: "*", mode: "sync_to_edge" }] }), `template of ${name}`);
  }
  ok200(t, await s.dev.post(`/admin/code/v/1/${SK}/calc`, { code: "function calc(req, resp) { resp.success(1); }", parameters: [] }), "a service");
  const startEdge = async (name: string) => {
    const e = await startOutpost({ args: ["--mode", "edge", "--platform-url", platform.url, "--system-key", SK, "--edge-name", name, "--edge-token", tokens[name]!] });
    stops.push(() => e.stop());
    edges[name] = e;
    return e;
  };
  await startEdge("gw-a");
  await startEdge("gw-b");
  const connected = async (name: string) => (await s.dev.get(`/admin/edges/${SK}/${name}`)).body?.isConnected === true;
  t.ok(await waitFor(async () => (await connected("gw-a")) && (await connected("gw-b"))), "both edges connected");

  // a failed asset: a collection made on gw-a holds the name of a platform collection its template then brings
  const clash = uniq("clash");
  ok200(t, await s.dev.post("/admin/collectionmanagement", { name: clash, appID: SK }), "the platform's collection");
  const onEdge = async (o: Outpost) => {
    const a = await request(o.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
    if (a.status !== 200) throw new Error(`developer sign-in on the edge: ${a.status} ${a.text}`);
    return new Client(o.url, { "ClearBlade-DevToken": a.body.dev_token });
  };
  const edgeDev = await onEdge(edges["gw-a"]!);
  const local = await edgeDev.post("/admin/collectionmanagement", { name: clash, appID: SK });
  ok200(t, local, "a local collection of that name on gw-a");
  ok200(t, await s.dev.put(`/admin/edges/template/${SK}/gw-a`, { add: [{ def_module: "collection", def_name: clash, mode: "sync_to_edge" }] }), "gw-a's template names it");

  const page = await newPage();
  await page.goto(`${platform.url}/console`, { waitUntil: "load" });
  await page.waitForSelector("#signin");
  await shot(page, "01-sign-in");
  await page.type("#email", s.email);
  await page.type("#password", "wrong password");
  await page.click("#signin button[type=submit]");
  t.ok(await page.waitForSelector("#signin .error"), "a wrong password is refused in the page");
  await page.$eval("#password", (el) => { (el as any).value = ""; });
  await page.type("#password", s.password);
  await page.click("#signin button[type=submit]");
  await page.waitForSelector(`tr[data-system="${SK}"]`);
  const stored = await page.evaluate(() => ({ session: (globalThis as any).sessionStorage.getItem("outpost.devToken"), local: (globalThis as any).localStorage.length, url: (globalThis as any).location.href }));
  t.ok(stored.session, "the token is kept in sessionStorage");
  t.equal(stored.local, 0, "nothing in localStorage");
  t.notMatch(stored.url, stored.session!, "and never in the URL");
  await shot(page, "02-systems");

  await page.click(`tr[data-system="${SK}"] a`);
  await page.waitForSelector('tr[data-edge="gw-a"][data-connected="true"]');
  await page.waitForSelector('tr[data-edge="gw-b"][data-connected="true"]');
  t.ok(await page.waitForSelector('tr[data-edge="gw-c"][data-connected="false"]'), "the edges table shows gw-a and gw-b connected, gw-c never started");
  t.ok(await page.waitForFunction(() => (globalThis as any).document.querySelector('tr[data-edge="gw-a"] td.failed')?.textContent === "2", { timeout: 20_000 }), "gw-a counts two failed assets: the collection, and its rows with it");
  await shot(page, "03-edges");

  // the process of gw-b dies: the table follows without a reload
  await edges["gw-b"]!.kill();
  t.ok(await page.waitForSelector('tr[data-edge="gw-b"][data-connected="false"]', { timeout: 30_000 }), "gw-b goes from connected to disconnected when its process is killed");
  await page.click("#failed-only");
  await page.waitForFunction(() => (globalThis as any).document.querySelectorAll("#edges-table tbody tr[data-edge]").length === 1);
  t.equal(await page.$eval("#edges-table tbody tr[data-edge]", (el) => el.getAttribute("data-edge")), "gw-a", "failed only: gw-a alone");
  await shot(page, "04-edges-gw-b-down-failed-only");
  await page.click("#failed-only");

  // one edge: the failed asset with its error, retried once its cause is gone
  await page.click('tr[data-edge="gw-a"] a');
  const row = `tr[data-asset="collection/${clash}"]`;
  await page.waitForSelector(`${row}[data-status="failed"]`);
  const err = await page.$eval(`${row} td.err`, (el) => el.textContent ?? "");
  t.match(err, /clash|exists/, `the failed asset shows its error (${err})`);
  await shot(page, "05-edge-failed-asset");
  ok200(t, await edgeDev.del(`/admin/collectionmanagement?id=${local.body.collectionID}`), "the cause removed on the edge");
  await page.click(`${row} button.retry`);
  t.ok(await page.waitForSelector(`${row}[data-status="synced"]`, { timeout: 30_000 }), "retried from the console: synced");
  t.ok(await page.waitForSelector(`tr[data-asset="collection_rows/${clash}"][data-status="synced"]`, { timeout: 30_000 }), "and its rows with it");
  await shot(page, "06-edge-retried");

  // the template: add an entry (it names a library the system has), change its mode, remove it
  const lib = uniq("lib");
  ok200(t, await s.dev.post(`/codeadmin/v/2/library/${SK}/${lib}`, { code: "var x = 1;" }), "a library");
  await page.select("#tpl-module", "library");
  await page.type("#tpl-name", lib);
  await page.select("#tpl-mode", "deploy");
  await page.click("#tpl-add button[type=submit]");
  await page.waitForSelector(`tr[data-entry="library/${lib}"]`);
  const tpl = async () => ((await s.dev.get(`/admin/edges/template/${SK}`)).body["gw-a"] as any[]).find((e) => e.def_name === lib);
  t.equal((await tpl())?.mode, "deploy", "an entry added from the console");
  await page.select(`tr[data-entry="library/${lib}"] select`, "sync_to_edge");
  t.ok(await waitFor(async () => (await tpl())?.mode === "sync_to_edge"), "its mode changed from the console");
  await shot(page, "07-template");
  await page.click(`tr[data-entry="library/${lib}"] button.remove`);
  await page.waitForFunction((sel) => !(globalThis as any).document.querySelector(sel), {}, `tr[data-entry="library/${lib}"]`);
  t.equal(await tpl(), undefined, "and removed");

  // an edge with a named template: the page names it, each entry says where it comes from, and
  // Remove takes an entry of the named template away
  ok200(t, await s.dev.put(`/admin/edges/${SK}/gw-c`, { template: "gateway-basic" }), "gw-c gets the named template gateway-basic");
  await page.goto(`${platform.url}/console#/s/${SK}/edge/gw-c`, { waitUntil: "load" });
  await page.waitForSelector('tr[data-entry="library/*"][data-source="template:gateway-basic"]');
  // (the edge's record and its entries load apart: either may be shown first)
  await page.waitForSelector("#edge-template");
  t.equal(await page.$eval("#edge-template", (el) => el.textContent), "gateway-basic", "the page names the named template");
  t.equal(await page.$eval('tr[data-entry="library/*"] td.source', (el) => el.textContent), "template gateway-basic", "an entry shows its source");
  t.equal(await page.$eval('tr[data-entry="service/*"] td.source', (el) => el.textContent), "this edge", "the edge's own entry over the named one shows that");
  await page.click('tr[data-entry="library/*"] button.remove');
  await page.waitForFunction(() => !(globalThis as any).document.querySelector('tr[data-entry="library/*"]'));
  const gwc = (await s.dev.get(`/admin/edges/template/${SK}`)).body["gw-c"] as any[];
  t.notOk(gwc.some((e) => e.def_module === "library" && e.def_name === "*"), "an entry of the named template is removed");
  t.ok(gwc.some((e) => e.def_module === "trigger" && e.source === "template:gateway-basic"), "the rest of it stays");
  await shot(page, "07b-named-template");

  // throttling cases of the system
  const kase = uniq("case");
  ok200(t, await s.dev.post("/admin/throttlers/HTTP%20Requests/cases", { case_name: kase, system_key: SK, consumer: "?", resource: `/api/v/1/code/${SK}/*`, limiter_type: "frequency", max_num: 100, duration: 60, priority: 10 }), "a throttling case");
  await page.goto(`${platform.url}/console#/s/${SK}/throttling`, { waitUntil: "load" });
  t.ok(await page.waitForSelector(`tr[data-case="${kase}"]`), "the system's throttling case is listed");
  await shot(page, "08-throttling");

  // message history, with a payload that would run if it were taken for markup
  const hostile = `<img src=x onerror="window.__pwned=1">reading 21.5`;
  ok200(t, await s.dev.post(`/api/v/1/message/${SK}/publish`, { topic: "plant/temp", body: hostile }), "a message published");
  await page.goto(`${platform.url}/console#/s/${SK}/messages/plant%2Ftemp`, { waitUntil: "load" });
  await page.waitForSelector("#history-table pre.payload");
  t.equal(await page.$eval("#history-table pre.payload", (el) => el.textContent), hostile, "the payload is shown as text");
  t.equal(await page.evaluate(() => (globalThis as any).__pwned), undefined, "and nothing in it ran");
  t.equal(await page.$$eval("#history-table img", (els) => els.length), 0, "no element was made from it");
  await shot(page, "09-messages");

  // an edge's own console: its link, outbox and assets
  const ep = await newPage();
  await ep.goto(`${edges["gw-a"]!.url}/console`, { waitUntil: "load" });
  await ep.waitForSelector("#signin");
  await ep.type("#email", s.email);
  await ep.type("#password", s.password);
  await ep.click("#signin button[type=submit]");
  await ep.waitForSelector("#edge-link .pill.ok");
  await ep.waitForSelector(`tr[data-asset="service/calc"][data-status="synced"]`);
  t.match(await ep.$eval("#outbox", (el) => el.textContent), /^\d+ waiting$/, "the outbox size is shown");
  await shot(ep, "10-edge-own-view");
  await ep.click("#signout");
  await ep.waitForSelector("#signin");
  t.equal(await ep.evaluate(() => (globalThis as any).sessionStorage.getItem("outpost.devToken")), null, "signing out forgets the token");
  await ep.close();
  await page.close();
});
