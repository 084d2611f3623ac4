// The console's pages in headless Chromium (as browser.test.ts): a 2,000-edge fleet filtered to
// the failing one, its idle transfer measured; an edge created, its token rotated, an edge
// deleted; a collection with columns and rows (filtered, edited in place); a service written in
// the editor, refused with the line of its syntax error, run with parameters, its log read; users
// created, searched, deleted; a device added that then connects over MQTT. Each
// page at 1366 and 390 px: no horizontal overflow of the page, a screenshot in
// artifacts/console/ (OUTPOST_ARTIFACTS overrides), and no serious or critical axe-core violation.
import t from "tap";
import { checkPage, done, launch, newPage, rowsOf, signIn, skip, stops, text, waitRows } from "./consoleBrowser.ts";
import { Client, devWithSystem, must, ok200, request, startOutpost, uniq, waitFor, type Outpost } from "./harness.ts";

t.test("a 2,000-edge fleet: counts, search, filters, paging, the failing edge, idle transfer; edges created, rotated, deleted", skip, async (t) => {
  const platform = await startOutpost();
  stops.push(() => platform.stop());
  await launch();
  const s = await devWithSystem(platform, "fleet-2000");
  const SK = s.systemKey;
  // one real edge, gw-0000, with a failed asset: a collection it made itself holds the name of
  // one its template then brings
  const gw = await s.dev.post(`/admin/edges/${SK}/gw-0000`, {});
  ok200(t, gw, "edge gw-0000");
  const clash = uniq("clash");
  ok200(t, await s.dev.post("/admin/collectionmanagement", { name: clash, appID: SK }), "the platform's collection");
  const edge = await startOutpost({ args: ["--mode", "edge", "--platform-url", platform.url, "--system-key", SK, "--edge-name", "gw-0000", "--edge-token", gw.body.token] });
  stops.push(() => edge.stop());
  const record = async () => (await s.dev.get(`/admin/edges/${SK}/gw-0000`)).body;
  t.ok(await waitFor(async () => (await record()).isConnected === true, 30_000), "gw-0000 connected");
  const a = await request(edge.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
  const edgeDev = new Client(edge.url, { "ClearBlade-DevToken": a.body.dev_token });
  ok200(t, await edgeDev.post("/admin/collectionmanagement", { name: clash, appID: SK }), "a local collection of that name on gw-0000");
  ok200(t, await s.dev.put(`/admin/edges/template/${SK}/gw-0000`, { add: [{ def_module: "collection", def_name: clash, mode: "sync_to_edge" }] }), "its template names it");
  // 1,999 more edge records, 25 at a time
  const names = Array.from({ length: 1999 }, (_, i) => `gw-${String(i + 1).padStart(4, "0")}`);
  for (let i = 0; i < names.length; i += 25) await Promise.all(names.slice(i, i + 25).map((n) => must(s.dev.post(`/admin/edges/${SK}/${n}`, {}), n)));
  const counts = async () => (await s.dev.get(`/api/v/3/edges/${SK}/count?by=state`)).body;
  t.ok(await waitFor(async () => (await counts()).failing === 1, 30_000), "gw-0000's asset failed");

  const page = await newPage();
  await signIn(page, platform.url, s.email, s.password);
  await page.goto(`${platform.url}/console#/s/${SK}`, { waitUntil: "load" });
  await page.waitForFunction(() => (globalThis as any).document.querySelector("#count-all strong")?.textContent === "2000", { timeout: 20_000 });
  t.same({ connected: await text(page, "#count-connected strong"), never: await text(page, "#count-never strong"), failing: await text(page, "#count-failing strong") },
    { connected: "1", never: "1999", failing: "1" }, "counts at the top: 1 connected, 1,999 never connected, 1 failing");
  await page.waitForFunction(() => (globalThis as any).document.querySelectorAll("#edges-table tbody tr[data-edge]").length === 50);
  t.equal(await text(page, "#edges-page"), "page 1 of 40 · 2000 in all", "a page of 50 of 2,000");
  t.equal(await page.$eval('tr[data-edge="gw-0000"] td.failed', (e) => e.textContent), "2", "gw-0000 counts its two failed assets (the collection and its rows)");
  t.equal(await page.$eval('tr[data-edge="gw-0001"] td.link', (e) => e.textContent), "never connected", "a record that never connected says so");
  await checkPage(t, page, "fleet", "#edges-table tbody tr[data-edge]");

  // idle: the page keeps polling; an answer that did not change costs its headers only. The
  // window holds gw-0000's pings (every 15 s): its record changes, the fleet rows do not.
  const cdp = await page.createCDPSession();
  await cdp.send("Network.enable");
  // bytes received per request: a 304 ends with its response (no loadingFinished), an answer
  // with a body with loadingFinished's total (headers and body)
  const received = new Map<string, number>();
  cdp.on("Network.responseReceived", (e: { requestId: string; response: { encodedDataLength: number } }) => { received.set(e.requestId, Math.max(received.get(e.requestId) ?? 0, e.response.encodedDataLength)); });
  cdp.on("Network.loadingFinished", (e: { requestId: string; encodedDataLength: number }) => { received.set(e.requestId, Math.max(received.get(e.requestId) ?? 0, e.encodedDataLength)); });
  const talkedBefore = (await record()).last_talked;
  const WINDOW_MS = 20_000;
  await new Promise((r) => setTimeout(r, WINDOW_MS));
  const answers = received.size, bytes = [...received.values()].reduce((a, b) => a + b, 0);
  const perMinute = Math.round((bytes * 60_000) / WINDOW_MS);
  t.ok(answers >= 9, `the page polled during the window (${answers} answers in ${WINDOW_MS / 1000} s)`);
  t.ok((await record()).last_talked > talkedBefore, "gw-0000 pinged in the window (its record changed)");
  t.ok(perMinute < 50 * 1024, `an idle fleet page of 2,000 edges transfers under 50 KB a minute (${bytes} bytes in ${WINDOW_MS / 1000} s: ${perMinute} bytes/min)`);
  t.comment(`idle transfer: ${bytes} bytes, ${answers} answers in ${WINDOW_MS / 1000} s -> ${perMinute} bytes/min`);
  await cdp.detach();

  await page.click("#edges-next");
  await page.waitForFunction(() => (globalThis as any).document.querySelector("#edges-table tbody tr[data-edge]")?.getAttribute("data-edge") === "gw-0050");
  t.equal(await text(page, "#edges-page"), "page 2 of 40 · 2000 in all", "the next page");
  await page.type("#edges-search", "GW-1234");
  await page.keyboard.press("Enter");
  t.same(await waitRows(page, "edges-table", "data-edge", ["gw-1234"]), ["gw-1234"], "search by name, any case, back to page 1");
  await page.$eval("#edges-search", (e) => { (e as any).value = ""; e.dispatchEvent(new Event("input", { bubbles: true })); });
  await page.keyboard.press("Enter");
  await page.click("#count-failing");
  t.same(await waitRows(page, "edges-table", "data-edge", ["gw-0000"]), ["gw-0000"], "failing: gw-0000 alone of 2,000");
  t.equal(await text(page, "#edges-summary").then((x) => x.split(" ·")[0]), "1 edges match", "one matches");
  await checkPage(t, page, "fleet-failing", 'tr[data-edge="gw-0000"]');
  await page.click("#count-failing");
  await page.select("#edges-link", "connected");
  t.same(await waitRows(page, "edges-table", "data-edge", ["gw-0000"]), ["gw-0000"], "connected: gw-0000 alone");
  await page.select("#edges-link", "never_connected");
  await page.waitForFunction(() => (globalThis as any).document.querySelector("#edges-page")?.textContent === "page 1 of 40 · 1999 in all");
  t.notOk((await rowsOf(page, "edges-table", "data-edge")).includes("gw-0000"), "never connected: the 1,999 others");
  await page.select("#edges-link", "any");

  // a new edge from the form: its token shown once
  await page.type("#new-edge-name", "bad name!");
  await page.click("#new-edge button[type=submit]");
  t.ok(await page.waitForSelector("#new-edge-name-problem"), "a bad name is refused beside its field");
  await page.$eval("#new-edge-name", (e) => { (e as any).value = ""; e.dispatchEvent(new Event("input", { bubbles: true })); });
  await page.type("#new-edge-name", "gw-0001");
  await page.click("#new-edge button[type=submit]");
  t.match(await page.waitForSelector("#new-edge .error").then((e) => e!.evaluate((x) => x.textContent)), /exist/, "a name taken: the API's refusal in the form");
  await page.$eval("#new-edge-name", (e) => { (e as any).value = ""; e.dispatchEvent(new Event("input", { bubbles: true })); });
  await page.type("#new-edge-name", "gw-new");
  await page.click("#new-edge button[type=submit]");
  await page.waitForSelector("#edge-created-token");
  const token = await text(page, "#edge-created-token");
  t.ok(token.length >= 8, "the new edge's token is shown");
  await page.waitForFunction(() => (globalThis as any).document.querySelector("#count-all strong")?.textContent === "2001", { timeout: 20_000 });
  t.pass("and the counts follow: 2,001");

  // one edge: its failed asset, then a record's token rotated and the record deleted
  await page.goto(`${platform.url}/console#/s/${SK}/edge/gw-0000`, { waitUntil: "load" });
  await page.waitForSelector(`tr[data-asset="collection/${clash}"][data-status="failed"]`);
  await checkPage(t, page, "edge", `tr[data-asset="collection/${clash}"] button.retry`);
  await page.goto(`${platform.url}/console#/s/${SK}/edge/gw-new`, { waitUntil: "load" });
  await page.waitForSelector("#edge-link");
  await page.click("#rotate-token");
  const rotated = await page.waitForSelector("#new-token code").then((e) => e!.evaluate((x) => x.textContent ?? ""));
  t.match(rotated, /^[0-9a-f]{64}$/, "a new token, shown once");
  t.not(rotated, token, "not the old one");
  await page.click("#delete-edge");
  await page.waitForFunction(() => (globalThis as any).document.querySelector("#count-all strong")?.textContent === "2000", { timeout: 20_000 });
  t.equal((await s.dev.get(`/admin/edges/${SK}/gw-new`)).status, 404, "deleted: back on the fleet page, 2,000 edges");
  await done(t, page);
});

t.test("build: systems, a collection with rows, a service written, refused, run and logged, users, a device that connects", skip, async (t) => {
  const o: Outpost = await startOutpost();
  stops.push(() => o.stop());
  await launch();
  const s = await devWithSystem(o, "builder");
  const SK = s.systemKey;
  const page = await newPage();
  await page.goto(`${o.url}/console`, { waitUntil: "load" });
  await checkPage(t, page, "sign-in", "#signin");
  await signIn(page, o.url, s.email, s.password);
  await page.waitForSelector(`tr[data-system="${SK}"]`);
  // a system from the form, then deleted
  await page.click("#new-system button[type=submit]");
  t.ok(await page.waitForSelector("#new-system-name-problem"), "a system needs a name: said beside the field");
  await page.type("#new-system-name", "scratch");
  await page.click("#new-system button[type=submit]");
  const scratch = await page.waitForSelector("#systems-table tr[data-system] a ::-p-text(scratch)");
  t.ok(scratch, "a system created from the console");
  await checkPage(t, page, "systems", "#systems-table");
  const scratchKey = await scratch!.evaluate((e) => e.closest("tr")!.getAttribute("data-system"));
  await page.click(`tr[data-system="${scratchKey}"] button.danger`);
  await page.waitForFunction((k) => !(globalThis as any).document.querySelector(`tr[data-system="${k}"]`), {}, scratchKey);
  t.notOk(((await s.dev.get("/admin/allsystems")).body as any[]).some((x) => x.systemKey === scratchKey), "and deleted");

  // a collection: created, columns, rows, a filter, an edit in place
  await page.goto(`${o.url}/console#/s/${SK}/collections`, { waitUntil: "load" });
  await page.waitForSelector("#new-collection");
  await page.type("#new-collection-name", "readings");
  await page.click("#new-collection button[type=submit]");
  await page.waitForSelector('tr[data-collection="readings"] a');
  await checkPage(t, page, "collections", 'tr[data-collection="readings"]');
  await page.click('tr[data-collection="readings"] a');
  await page.waitForSelector("#new-column");
  for (const [name, type] of [["site", "string"], ["temp", "float"]] as const) {
    await page.type("#new-column-name", name);
    await page.select("#new-column-type", type);
    await page.click("#new-column button[type=submit]");
    await page.waitForSelector(`tr[data-column="${name}"]`);
  }
  for (const [site, temp] of [["north", "21.5"], ["south", "19"], ["north", "23"]]) {
    await page.waitForSelector("#new-row-site");
    await page.type("#new-row-site", site!);
    await page.type("#new-row-temp", temp!);
    await page.click("#new-row button[type=submit]");
    await page.waitForFunction((n) => (globalThis as any).document.querySelectorAll("#rows-table tbody tr[data-item]").length === n, {}, [["north", "21.5"], ["south", "19"], ["north", "23"]].findIndex((r) => r[0] === site && r[1] === temp) + 1);
  }
  const colId = page.url().split("/").pop()!;
  t.equal((await s.dev.get(`/api/v/1/data/${colId}`)).body.TOTAL, 3, "three rows through the console");
  await page.type("#new-row-temp", "warm");
  await page.click("#new-row button[type=submit]");
  t.match(await page.waitForSelector("#new-row .error").then((e) => e!.evaluate((x) => x.textContent)), /not a number/, "a bad number is refused in the form");
  await page.select("#rows-filter-column", "temp");
  await page.select("#rows-filter-op", "GT");
  await page.type("#rows-table-search", "20");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => (globalThis as any).document.querySelectorAll("#rows-table tbody tr[data-item]").length === 2);
  const warm = await page.$$eval("#rows-table tbody tr[data-item] td.col-temp", (els) => els.map((e) => e.textContent));
  t.same(warm.sort(), ["21.5", "23"], "filter temp > 20: two rows");
  await page.click("#rows-table tbody tr[data-item] td.col-site button.cell");
  await page.waitForSelector("#rows-table form.inline input");
  await page.$eval("#rows-table form.inline input", (e) => { (e as any).value = ""; e.dispatchEvent(new Event("input", { bubbles: true })); });
  await page.type("#rows-table form.inline input", "east");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#rows-table td.col-site button.cell ::-p-text(east)");
  const rows = (await s.dev.get(`/api/v/1/data/${colId}`)).body.DATA as any[];
  t.equal(rows.filter((r) => r.site === "east").length, 1, "an edit in place reaches the collection");
  await checkPage(t, page, "collection", "#rows-table tbody tr[data-item]");

  // a service: created, a syntax error refused with its line, fixed, run with parameters, its log
  await page.goto(`${o.url}/console#/s/${SK}/services`, { waitUntil: "load" });
  await page.waitForSelector("#new-service");
  await page.type("#new-service-name", "greet");
  await page.type("#new-service-params", "who");
  await page.click("#new-service button[type=submit]");
  await page.waitForSelector('#service-code[data-ready="true"] .cm-content');
  await checkPage(t, page, "service", '#service-code[data-ready="true"]');
  const setCode = async (code: string) => {
    await page.click("#service-code .cm-content");
    await page.keyboard.down("Control");
    await page.keyboard.press("a");
    await page.keyboard.up("Control");
    await page.keyboard.press("Backspace");
    await page.keyboard.sendCharacter(code);
  };
  await setCode("function greet(req, resp) {\n  resp.success(\"hello \" +;\n}\n");
  await page.click("#save-service");
  const problem = await page.waitForSelector("#service-problem").then((e) => e!.evaluate((x) => x.textContent ?? ""));
  t.match(problem, /line 2/, `the syntax error names its line (${problem})`);
  await setCode("function greet(req, resp) {\n  log(\"greeting \" + req.params.who);\n  resp.success(\"hello \" + req.params.who);\n}\n");
  await page.click("#save-service");
  await page.waitForSelector("#service-saved");
  t.match((await s.dev.get(`/admin/code/v/1/${SK}/greet`)).body.code, /greeting/, "the code is saved");
  await page.$eval("#run-params", (e) => { (e as any).value = ""; e.dispatchEvent(new Event("input", { bubbles: true })); });
  await page.type("#run-params", '{"who": "ana"}');
  await page.click("#run-service");
  t.match(await page.waitForSelector("#run-result.ok pre").then((e) => e!.evaluate((x) => x.textContent)), /hello ana/, "run with parameters: the result");
  t.ok(await page.waitForSelector("#logs-table pre.payload ::-p-text(greeting ana)"), "and the run's log");
  await page.$eval("#run-params", (e) => { (e as any).value = ""; e.dispatchEvent(new Event("input", { bubbles: true })); });
  await page.type("#run-params", "not json");
  await page.click("#run-service");
  t.match(await page.waitForSelector("#run-result.bad").then((e) => e!.evaluate((x) => x.textContent)), /not JSON/, "parameters that are not JSON are refused");
  await checkPage(t, page, "service-run", "#run-result");
  await page.goto(`${o.url}/console#/s/${SK}/services`, { waitUntil: "load" });
  await page.waitForSelector('tr[data-service="greet"]');
  await checkPage(t, page, "services", 'tr[data-service="greet"]');

  // users: created (a bad email refused beside its field), searched on the server, deleted
  await page.goto(`${o.url}/console#/s/${SK}/users`, { waitUntil: "load" });
  await page.waitForSelector("#new-user");
  await page.type("#new-user-email", "not-an-email");
  await page.type("#new-user-password", "secret-pass-1");
  await page.click("#new-user button[type=submit]");
  t.ok(await page.waitForSelector("#new-user-email-problem"), "a bad email is refused beside its field");
  for (const email of ["ana@example.com", "bob@example.com"]) {
    await page.$eval("#new-user-email", (e) => { (e as any).value = ""; e.dispatchEvent(new Event("input", { bubbles: true })); });
    await page.type("#new-user-email", email);
    await page.$eval("#new-user-password", (e) => { (e as any).value = ""; e.dispatchEvent(new Event("input", { bubbles: true })); });
    await page.type("#new-user-password", "secret-pass-1");
    await page.click("#new-user button[type=submit]");
    await page.waitForSelector(`tr[data-user="${email}"]`);
  }
  await page.type("#users-table-search", "ANA");
  await page.keyboard.press("Enter");
  t.same(await waitRows(page, "users-table", "data-user", ["ana@example.com"]), ["ana@example.com"], "search by email on the server, any case");
  await checkPage(t, page, "users", 'tr[data-user="ana@example.com"]');
  await page.click('tr[data-user="ana@example.com"] button.danger');
  await waitRows(page, "users-table", "data-user", []);
  const left = await s.dev.get(`/admin/user/${SK}?query=${encodeURIComponent(JSON.stringify({ PAGESIZE: 10, PAGENUM: 1 }))}`);
  t.same((left.body as any[]).map((u) => u.email), ["bob@example.com"], "ana deleted, bob left");

  // devices: one added from the form, which then connects over MQTT with its key: the page sees it
  await page.goto(`${o.url}/console#/s/${SK}/devices`, { waitUntil: "load" });
  await page.waitForSelector("#new-device");
  await page.type("#new-device-name", "sensor-1");
  await page.type("#new-device-type", "thermometer");
  await page.type("#new-device-active_key", "short");
  await page.click("#new-device button[type=submit]");
  t.ok(await page.waitForSelector("#new-device-active_key-problem"), "a short key is refused beside its field");
  await page.$eval("#new-device-active_key", (e) => { (e as any).value = ""; e.dispatchEvent(new Event("input", { bubbles: true })); });
  await page.type("#new-device-active_key", "sensor-key-123");
  await page.click("#new-device button[type=submit]");
  await page.waitForSelector('tr[data-device="sensor-1"][data-connected="false"]');
  const auth = await request(o.url, "POST", `/api/v/2/devices/${SK}/auth`, { body: { deviceName: "sensor-1", activeKey: "sensor-key-123" } });
  ok200(t, auth, "the device signs in with the key set in the console");
  const mqtt = (await import("mqtt")).default;
  const device = await mqtt.connectAsync(`mqtt://127.0.0.1:${o.mqttPort}`, { username: auth.body.deviceToken, password: SK, clientId: uniq("sensor"), reconnectPeriod: 0 });
  t.ok(await page.waitForSelector('tr[data-device="sensor-1"][data-connected="true"]', { timeout: 20_000 }), "and the page shows it connected");
  await checkPage(t, page, "devices", 'tr[data-device="sensor-1"]');
  await device.endAsync();
  t.ok(await page.waitForSelector('tr[data-device="sensor-1"][data-connected="false"]', { timeout: 20_000 }), "then disconnected");
  await done(t, page);
});
