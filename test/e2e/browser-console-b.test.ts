// More of the console's pages in headless Chromium (the kit of consoleBrowser.ts): a library
// written in the editor, refused with its syntax error, saved as versions and restored; a
// deployment made from the console whose status reaches "synced" on a real edge; a shared cache
// made, a value set and read back, one deleted; a bucket set and a file store, a file uploaded to
// each and downloaded back; a stream service's run listed and stopped; a user's session revoked
// (its token refused and its MQTT client closed at once); the audit trail filtered by actor, class
// and time; a collection exported as CSV and imported back, a bad row reported by its line. Each
// page at 1366 and 390 px: no sideways overflow, a screenshot, no serious or critical axe-core
// violation.
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import type { Page } from "puppeteer-core";
import { checkPage, done, launch, newPage, rowsOf, signIn, skip, stops, text, waitRows } from "./consoleBrowser.ts";
import { Client, collectionWith, devWithSystem, must, newUser, ok200, request, startOutpost, uniq, waitFor } from "./harness.ts";

const clear = async (page: Page, sel: string) => {
  await page.$eval(sel, (e) => { (e as any).value = ""; e.dispatchEvent(new Event("input", { bubbles: true })); });
  await page.focus(sel);
};
/** Downloads of the page land in a fresh directory; `next` waits for the next finished file and
 *  takes it out (Chromium names a second download of a name as the first). */
async function downloadsOf(page: Page) {
  const dir = mkdtempSync(join(tmpdir(), "console-dl-"));
  const cdp = await page.browser().target().createCDPSession();
  await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: dir });
  return {
    async next(): Promise<{ name: string; bytes: Buffer }> {
      let name = "";
      const ok = await waitFor(() => { name = readdirSync(dir).find((f) => !f.endsWith(".crdownload")) ?? ""; return !!name; }, 15_000);
      if (!ok) throw new Error(`no download (in the directory: ${readdirSync(dir).join(", ")}; the page says: ${await page.$$eval(".error", (els) => els.map((e) => e.textContent).join("; "))})`);
      const bytes = readFileSync(join(dir, name));
      rmSync(join(dir, name));
      return { name, bytes };
    },
  };
}

t.test("build and run: libraries, deployments on a real edge, caches, files, running code", skip, async (t) => {
  const o = await startOutpost();
  stops.push(() => o.stop());
  await launch();
  const s = await devWithSystem(o, "pages-b");
  const SK = s.systemKey;
  const gw = await must(s.dev.post(`/admin/edges/${SK}/gw-1`, {}), "edge gw-1");
  const edge = await startOutpost({ args: ["--mode", "edge", "--platform-url", o.url, "--system-key", SK, "--edge-name", "gw-1", "--edge-token", gw.token] });
  stops.push(() => edge.stop());
  const page = await newPage();
  await signIn(page, o.url, s.email, s.password);

  // a library: created, a syntax error refused, saved (version 2), version 1 restored (version 3)
  await page.goto(`${o.url}/console#/s/${SK}/libraries`, { waitUntil: "load" });
  await page.waitForSelector("#new-library");
  await page.type("#new-library-name", "bad name");
  await page.click("#new-library button[type=submit]");
  t.ok(await page.waitForSelector("#new-library-name-problem"), "a library name that is not a JavaScript name is refused beside its field");
  await clear(page, "#new-library-name");
  await page.type("#new-library-name", "mathlib");
  await page.type("#new-library-description", "sums");
  await page.click("#new-library button[type=submit]");
  await page.waitForSelector('#library-code[data-ready="true"] .cm-content');
  await checkPage(t, page, "library", '#library-code[data-ready="true"]');
  const setCode = async (code: string) => {
    await page.click("#library-code .cm-content");
    await page.keyboard.down("Control");
    await page.keyboard.press("a");
    await page.keyboard.up("Control");
    await page.keyboard.press("Backspace");
    await page.keyboard.sendCharacter(code);
  };
  await setCode("function add(a, b) {\n  return a +;\n}\n");
  await page.click("#save-library");
  t.match(await page.waitForSelector("#library-problem").then((e) => e!.evaluate((x) => x.textContent ?? "")), /line 2|Unexpected|expected/i, "a syntax error is refused with the API's reason");
  t.equal((await s.dev.get(`/codeadmin/v/2/library/${SK}/mathlib`)).body.version, 1, "and nothing was saved");
  await setCode("function add(a, b) {\n  return a + b;\n}\n");
  await page.click("#save-library");
  await page.waitForSelector('#versions-table tr[data-version="2"]');
  t.match((await s.dev.get(`/codeadmin/v/2/library/${SK}/mathlib`)).body.code, /return a \+ b/, "saved as version 2");
  await page.click('#versions-table tr[data-version="1"] button[aria-label="Show version 1"]');
  t.match(await text(page, "#version-shown pre"), /hello/, "version 1's code shown");
  await page.click('#versions-table tr[data-version="1"] button[aria-label="Restore version 1"]');
  await page.waitForSelector('#versions-table tr[data-version="3"]');
  const lib = (await s.dev.get(`/codeadmin/v/2/library/${SK}/mathlib`)).body;
  t.same([lib.version, /Hello/.test(lib.code)], [3, true], "version 1 restored as version 3");
  await page.waitForFunction(() => /mathlibHello/.test((globalThis as any).document.querySelector("#library-code .cm-content")?.textContent ?? ""));
  t.pass("and the editor shows the restored code");
  await page.goto(`${o.url}/console#/s/${SK}/libraries`, { waitUntil: "load" });
  await page.waitForSelector('tr[data-library="mathlib"]');
  await checkPage(t, page, "libraries", 'tr[data-library="mathlib"]');

  // a deployment: made in the console with the library and gw-1, its status synced on the edge
  await page.goto(`${o.url}/console#/s/${SK}/deployments`, { waitUntil: "load" });
  await page.waitForSelector("#new-deployment");
  await page.type("#new-deployment-name", "line-1");
  await page.type("#new-deployment-description", "the filling line");
  await page.type("#new-deployment-edges", "gw-1, gw-later");
  await page.click("#new-deployment button[type=submit]");
  await page.waitForSelector("#add-asset");
  await page.type("#add-asset-asset_class", "libraries");
  await page.type("#add-asset-asset_id", "nosuchlib");
  await page.click("#add-asset button[type=submit]");
  t.match(await page.waitForSelector("#add-asset .error").then((e) => e!.evaluate((x) => x.textContent ?? "")), /nosuchlib/, "an asset the system does not have: the API's refusal in the form");
  await clear(page, "#add-asset-asset_id");
  await page.type("#add-asset-asset_id", "mathlib");
  await page.select("#add-asset-mode", "sync_to_edge");
  await page.click("#add-asset button[type=submit]");
  await page.waitForSelector('#assets-table tr[data-asset="libraries/mathlib"]');
  t.equal(await page.$eval('#assets-table tr[data-asset="libraries/mathlib"] td:nth-child(3)', (e) => e.textContent), "sync_to_edge", "the asset and its mode");
  t.ok(await page.waitForSelector('#deployment-status tr[data-status-of="gw-1/library/mathlib"][data-status="synced"]', { timeout: 40_000 }), "its status on gw-1 reaches synced");
  t.ok(await page.$('#deployment-status tr[data-status-of="gw-later/"][data-status="no_such_edge"]'), "an edge not made yet says so");
  await checkPage(t, page, "deployment", '#deployment-status tr[data-status="synced"]');
  const onEdge = async () => (await request(edge.url, "GET", `/codeadmin/v/2/library/${SK}/mathlib`, { headers: { "ClearBlade-DevToken": (await request(edge.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } })).body.dev_token } })).status;
  t.equal(await onEdge(), 200, "the library is on the edge");
  await page.click('#deployment-edges tr[data-edge="gw-later"] button.danger');
  await waitRows(page, "deployment-edges", "data-edge", ["gw-1"]);
  t.same((await s.dev.get(`/admin/${SK}/deployments/line-1`)).body.edges, ["gw-1"], "an edge removed");
  await page.goto(`${o.url}/console#/s/${SK}/deployments`, { waitUntil: "load" });
  await page.waitForSelector('tr[data-deployment="line-1"]');
  await checkPage(t, page, "deployments", 'tr[data-deployment="line-1"]');

  // a shared cache: made, a value set (bad JSON refused) and read back, a key deleted
  await page.goto(`${o.url}/console#/s/${SK}/caches`, { waitUntil: "load" });
  await page.waitForSelector("#new-cache");
  await page.type("#new-cache-name", "state");
  await clear(page, "#new-cache-ttl");
  await page.type("#new-cache-ttl", "5");
  await page.click("#new-cache button[type=submit]");
  t.ok(await page.waitForSelector("#new-cache-ttl-problem"), "a TTL under 30 s is refused beside its field");
  await clear(page, "#new-cache-ttl");
  await page.type("#new-cache-ttl", "600");
  await page.click("#new-cache button[type=submit]");
  await page.waitForSelector("#set-value");
  await page.type("#set-value-key", "lamp/1");
  await page.type("#set-value-value", "{on: true}");
  await page.click("#set-value button[type=submit]");
  t.match(await page.waitForSelector("#set-value .error").then((e) => e!.evaluate((x) => x.textContent ?? "")), /not JSON/, "a value that is not JSON is refused");
  await clear(page, "#set-value-value");
  await page.type("#set-value-value", '{"on": true, "level": 3}');
  await page.click("#set-value button[type=submit]");
  await page.waitForSelector('#values-table tr[data-key="lamp/1"]');
  t.equal(await text(page, '#values-table tr[data-key="lamp/1"] pre'), '{"on":true,"level":3}', "the value set, read back in the list");
  t.same((await s.dev.get(`/admin/v/4/service_caches/${SK}/state/values?key=lamp%2F1`)).body.value, { on: true, level: 3 }, "and through the API");
  for (const k of ["a", "b"]) {
    await page.type("#set-value-key", k);
    await page.type("#set-value-value", "1");
    await page.click("#set-value button[type=submit]");
    await page.waitForSelector(`#values-table tr[data-key="${k}"]`);
  }
  await checkPage(t, page, "cache", '#values-table tr[data-key="lamp/1"]');
  await page.click('#values-table tr[data-key="a"] button.danger');
  await waitRows(page, "values-table", "data-key", ["b", "lamp/1"]);
  t.same(Object.keys((await s.dev.get(`/admin/v/4/service_caches/${SK}/state/values`)).body).sort(), ["b", "lamp/1"], "a key deleted");
  await page.goto(`${o.url}/console#/s/${SK}/caches`, { waitUntil: "load" });
  await page.waitForSelector('tr[data-cache="state"]');
  await checkPage(t, page, "caches", 'tr[data-cache="state"]');

  // files: a bucket set and a file store, a file uploaded to each and downloaded back
  const dl = await downloadsOf(page);
  const local = join(mkdtempSync(join(tmpdir(), "console-up-")), "report.dat");
  const content = Buffer.from(Array.from({ length: 3000 }, (_, i) => i % 256));
  writeFileSync(local, content);
  await page.goto(`${o.url}/console#/s/${SK}/files`, { waitUntil: "load" });
  await page.waitForSelector("#new-set");
  await page.type("#new-set-name", "../bad");
  await page.click("#new-set button[type=submit]");
  t.ok(await page.waitForSelector("#new-set .error"), "a bad bucket set name: the API's refusal in the form");
  await clear(page, "#new-set-name");
  await page.type("#new-set-name", "reports");
  await page.click("#new-set button[type=submit]");
  await page.type("#new-store-name", "blobs");
  await page.click("#new-store button[type=submit]");
  await page.waitForSelector('tr[data-set="reports"]');
  await page.waitForSelector('tr[data-store="blobs"]');
  await checkPage(t, page, "files", 'tr[data-store="blobs"]');
  await page.click('tr[data-set="reports"] a');
  await page.waitForSelector("#set-upload");
  await page.click("#set-upload button[type=submit]");
  t.match(await page.waitForSelector("#set-upload .error").then((e) => e!.evaluate((x) => x.textContent ?? "")), /choose a file/, "no file chosen: said in the form");
  await (await page.$("#set-upload-file"))!.uploadFile(local);
  await page.type("#set-upload-path", "2026/report.dat");
  await page.click("#set-upload button[type=submit]");
  await page.waitForSelector('#set-files tr[data-file="sandbox/2026/report.dat"]');
  t.equal(await page.$eval('#set-files tr[data-file="sandbox/2026/report.dat"] td.num', (e) => e.textContent), "2.9 KB", "uploaded to the sandbox box");
  await page.select("#set-files-box", "inbox");
  await waitRows(page, "set-files", "data-file", []);
  await page.select("#set-files-box", "");
  await page.waitForSelector('#set-files tr[data-file="sandbox/2026/report.dat"]');
  await page.click('#set-files tr[data-file="sandbox/2026/report.dat"] button.download');
  const got = await dl.next();
  t.same([got.name, got.bytes.equals(content)], ["report.dat", true], "downloaded back, byte for byte");
  await checkPage(t, page, "bucket-set", '#set-files tr[data-file]');
  await page.click('#set-files tr[data-file="sandbox/2026/report.dat"] button.danger');
  await waitRows(page, "set-files", "data-file", []);
  t.same((await s.dev.get(`/api/v/4/bucket_sets/${SK}/reports/files`)).body, {}, "and deleted");
  await page.goto(`${o.url}/console#/s/${SK}/files/store/blobs`, { waitUntil: "load" });
  await page.waitForSelector("#store-upload");
  await (await page.$("#store-upload-file"))!.uploadFile(local);
  await page.click("#store-upload button[type=submit]");
  await page.waitForSelector('#store-files tr[data-file="report.dat"]');
  const stored = await request(o.url, "GET", `/api/v/1/filestore/${SK}/blobs/file/report.dat`, { headers: { "ClearBlade-DevToken": s.devToken } });
  t.equal(stored.status, 200, "the store holds the file");
  await page.click('#store-files tr[data-file="report.dat"] button.download');
  const got2 = await dl.next();
  t.same([got2.name, got2.bytes.equals(content)], ["report.dat", true], "downloaded from the store, byte for byte");
  await checkPage(t, page, "file-store", '#store-files tr[data-file]');

  // running code: a stream service (started by auto_restart on save) listed, then stopped
  const svc = uniq("stream");
  await must(s.dev.post(`/admin/code/v/1/${SK}/${svc}`, { code: `function ${svc}(req, resp) { var m = ClearBlade.Messaging(); m.subscribe("hold/x", function () {}); while (true) { m.waitForMessage(["hold/x"], function () {}); } }`, parameters: [], execution_timeout: -1, auto_restart: true }), "stream service");
  await page.goto(`${o.url}/console#/s/${SK}/running`, { waitUntil: "load" });
  await page.waitForSelector(`#running-table tr[data-service="${svc}"]`, { timeout: 20_000 });
  await checkPage(t, page, "running", `#running-table tr[data-service="${svc}"]`);
  await page.click(`#running-table tr[data-service="${svc}"] button.danger`);
  await waitRows(page, "running-table", "data-service", []);
  t.same((await s.dev.get(`/codeadmin/v/3/running/${SK}`)).body, {}, "stopped: the node runs nothing of the system");
  await done(t, page);
});

t.test("operate: sessions revoked, the audit trail filtered, a collection exported as CSV and imported back", skip, async (t) => {
  const o = await startOutpost();
  stops.push(() => o.stop());
  await launch();
  const s = await devWithSystem(o, "pages-b-ops");
  const SK = s.systemKey;
  const ana = await newUser(s, {}), bob = await newUser(s, {});
  const anaToken = (await must(s.app.post("/api/v/1/user/auth", { email: ana.email, password: ana.password }), "ana auth")).user_token as string;
  const anaClient = new Client(o.url, { "ClearBlade-UserToken": anaToken });
  ok200(t, await anaClient.get("/api/v/1/user/info"), "ana's token works");
  const mqtt = (await import("mqtt")).default;
  const anaMqtt = await mqtt.connectAsync(`mqtt://127.0.0.1:${o.mqttPort}`, { username: anaToken, password: SK, clientId: uniq("ana"), reconnectPeriod: 0 });
  const closed = new Promise<void>((r) => anaMqtt.once("close", () => r()));
  const page = await newPage();
  await signIn(page, o.url, s.email, s.password);

  // sessions: ana's found by email and revoked: her token is refused, her MQTT client closed
  await page.goto(`${o.url}/console#/s/${SK}/sessions`, { waitUntil: "load" });
  await page.waitForSelector(`#user-sessions tr[data-session="${bob.email}"]`);
  t.equal((await rowsOf(page, "user-sessions", "data-session")).length, 3, "three user sessions: ana's two (sign-up, sign-in) and bob's");
  await page.type("#user-sessions-search", ana.email.slice(0, 12).toUpperCase());
  await page.keyboard.press("Enter");
  await waitRows(page, "user-sessions", "data-session", [ana.email, ana.email]);
  t.match(await text(page, "#user-sessions-page"), /2 in all/, "search by email on the server, any case: ana's two");
  await checkPage(t, page, "sessions", `#user-sessions tr[data-session="${ana.email}"]`);
  await page.click("#revoke-users-matching");
  await waitRows(page, "user-sessions", "data-session", []);
  await closed;
  t.pass("ana's MQTT client was closed");
  const refused = await anaClient.get("/api/v/1/user/info");
  t.ok(refused.status === 400 || refused.status === 401, `ana's token is refused (${refused.status} ${refused.body?.error?.detail})`);
  ok200(t, await bob.client.get("/api/v/1/user/info"), "bob's still works");
  await clear(page, "#user-sessions-search");
  await page.keyboard.press("Enter");
  await waitRows(page, "user-sessions", "data-session", [bob.email]);
  await page.click(`#user-sessions tr[data-session="${bob.email}"] button.danger`);
  await waitRows(page, "user-sessions", "data-session", []);
  t.not((await bob.client.get("/api/v/1/user/info")).status, 200, "one session revoked with its own button: bob's token refused");

  // a collection: exported as CSV, emptied, imported back; a bad row reported by its line
  const col = await collectionWith(s, [["site", "string"], ["temp", "float"]], "readings");
  const rows = [{ site: "north, gate \"A\"", temp: 21.5 }, { site: "south", temp: 19 }, { site: "east", temp: null }];
  await must(s.dev.post(`/api/v/1/data/${col.id}`, rows), "rows");
  await page.goto(`${o.url}/console#/s/${SK}/collections/${col.id}`, { waitUntil: "load" });
  await page.waitForSelector("#rows-table tbody tr[data-item]");
  const dl = await downloadsOf(page);
  await page.click("#export-csv");
  const csv = await dl.next();
  const lines = csv.bytes.toString("utf8").trim().split("\r\n");
  t.same([csv.name, lines[0], lines.length], ["readings.csv", "item_id,site,temp", 4], "exported: a header and three rows");
  t.ok(lines.some((l) => l.endsWith(',"north, gate ""A""",21.5')), "a field with a comma and quotes is quoted");
  await must(s.dev.del(`/api/v/1/data/${col.id}?query=${encodeURIComponent(JSON.stringify({ FILTERS: [] }))}`), "empty the collection");
  const file = join(mkdtempSync(join(tmpdir(), "console-csv-")), "readings.csv");
  writeFileSync(file, csv.bytes);
  await page.reload({ waitUntil: "load" });
  await page.waitForSelector("#import-csv");
  await (await page.$("#import-csv-file"))!.uploadFile(file);
  await page.click("#import-csv button[type=submit]");
  await page.waitForFunction(() => /^imported 3 of 3 rows$/.test((globalThis as any).document.querySelector("#csv-progress")?.textContent ?? ""), { timeout: 20_000 });
  const back = ((await s.dev.get(`/api/v/1/data/${col.id}`)).body.DATA as any[]).map((r) => ({ site: r.site, temp: r.temp })).sort((a, b) => a.site.localeCompare(b.site));
  t.same(back, rows.slice().sort((a, b) => a.site.localeCompare(b.site)), "imported back: the same rows");
  await page.waitForFunction(() => (globalThis as any).document.querySelectorAll("#rows-table tbody tr[data-item]").length === 3);
  const bad = join(mkdtempSync(join(tmpdir(), "console-csv-")), "bad.csv");
  writeFileSync(bad, "site,temp\nwest,20\nhill,warm\nvale\nlake,18\n");
  await (await page.$("#import-csv-file"))!.uploadFile(bad);
  await page.click("#import-csv button[type=submit]");
  await page.waitForSelector("#csv-refused");
  t.same(await rowsOf(page, "csv-refused", "data-line"), ["3", "4"], "the bad rows by their line: a number that is not one, a short row");
  t.match(await text(page, "#csv-progress"), /imported 2 of 4 rows; 2 refused/, "the others imported");
  t.equal((await s.dev.get(`/api/v/1/data/${col.id}`)).body.TOTAL, 5, "five rows now");
  // a new file: the browser refuses to read one changed after it was chosen
  const unknownColumn = join(mkdtempSync(join(tmpdir(), "console-csv-")), "colour.csv");
  writeFileSync(unknownColumn, "site,colour\nwest,red\n");
  await (await page.$("#import-csv-file"))!.uploadFile(unknownColumn);
  await page.click("#import-csv button[type=submit]");
  t.match(await page.waitForSelector("#csv .error").then((e) => e!.evaluate((x) => x.textContent ?? "")), /colour/, "a header naming an unknown column is refused before anything is sent");
  await checkPage(t, page, "collection-csv", "#csv .error");

  // the audit trail: the writes above, filtered by actor, class and time
  await page.goto(`${o.url}/console#/s/${SK}/audit`, { waitUntil: "load" });
  await page.waitForSelector("#audit-table tbody tr[data-audit]");
  await page.select("#audit-class", "usersessions");
  await page.waitForFunction(() => [...(globalThis as any).document.querySelectorAll("#audit-table tbody tr[data-audit]")].length === 2
    && [...(globalThis as any).document.querySelectorAll("#audit-table tbody tr[data-audit]")].every((e: any) => /^Delete usersessions/.test(e.getAttribute("data-audit"))), { timeout: 20_000 });
  t.pass("class usersessions: the two revocations");
  await page.select("#audit-class", "users");
  await page.type("#audit-table-search", ana.email.slice(0, 12));
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => (globalThis as any).document.querySelector("#audit-table-page")?.textContent === "page 1 of 1 · 1 in all", { timeout: 20_000 });
  t.match(await rowsOf(page, "audit-table", "data-audit"), [/^Create users/], "actor ana, class users: her sign-up");
  await clear(page, "#audit-table-search");
  await page.keyboard.press("Enter");
  await page.select("#audit-class", "collections");
  // the collections' rows themselves, not the count of the filter before (still shown until they come)
  await page.waitForFunction(() => {
    const rows = [...(globalThis as any).document.querySelectorAll("#audit-table tbody tr[data-audit]")];
    return rows.length > 0 && rows.every((e: any) => / collections( |$)/.test(e.getAttribute("data-audit"))) && /in all/.test((globalThis as any).document.querySelector("#audit-table-page")?.textContent ?? "");
  }, { timeout: 20_000 });
  const before = await text(page, "#audit-table-page");
  // from a minute ahead: nothing yet
  await page.$eval("#audit-from", (e) => {
    const d = new Date(Date.now() + 60_000), p = (n: number) => String(n).padStart(2, "0");
    (e as any).value = `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
    e.dispatchEvent(new Event("change", { bubbles: true }));
  });
  await page.waitForFunction(() => (globalThis as any).document.querySelector("#audit-table-page")?.textContent === "page 1 of 1 · 0 in all", { timeout: 20_000 });
  t.match(before, /[1-9]\d* in all/, `class collections: the collection's writes (${before})`);
  t.pass("from a minute ahead: none");
  await page.$eval("#audit-from", (e) => { (e as any).value = ""; e.dispatchEvent(new Event("change", { bubbles: true })); });
  await page.waitForFunction((b) => (globalThis as any).document.querySelector("#audit-table-page")?.textContent === b, {}, before);
  await checkPage(t, page, "audit", "#audit-table tbody tr[data-audit]");
  await anaMqtt.endAsync().catch(() => {});
  await done(t, page);
});
