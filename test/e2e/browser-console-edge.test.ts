// An edge's console manages the edge's own system (headless Chromium, the kit of
// consoleBrowser.ts): its tabs are the pages the edge serves; a collection and a service its
// platform sent are shown read-only (no edit or delete controls, the reason said) while the
// service still runs; a collection made on the edge is created, given a column and rows, edited in
// place and deleted through the console, each change seen through the edge's API. At 1366 and
// 390 px (no sideways overflow, a screenshot, axe-core).
import t from "tap";
import { checkPage, done, launch, newPage, rowsOf, signIn, skip, stops, text, waitRows } from "./consoleBrowser.ts";
import { Client, collectionWith, devWithSystem, must, request, startOutpost, waitFor } from "./harness.ts";

t.test("an edge's console: its system's pages, what the platform sent read-only, local assets editable", skip, async (t) => {
  const platform = await startOutpost();
  stops.push(() => platform.stop());
  await launch();
  const s = await devWithSystem(platform, "edge-console");
  const SK = s.systemKey;
  const readings = await collectionWith(s, [["site", "string"]], "readings");
  await must(s.dev.post(`/api/v/1/data/${readings.id}`, { site: "north" }), "a row on the platform");
  await must(s.dev.post(`/admin/code/v/1/${SK}/calc`, { code: `function calc(req, resp) { resp.success("from the platform"); }`, parameters: [], run_on_edge: true }), "service calc");
  const gw = await must(s.dev.post(`/admin/edges/${SK}/gw-1`, {}), "edge gw-1");
  await must(s.dev.put(`/admin/edges/template/${SK}/gw-1`, { add: [
    { def_module: "collection", def_name: "readings", mode: "sync_to_edge" }, { def_module: "service", def_name: "calc", mode: "sync_to_edge" },
  ] }), "gw-1's template");
  const edge = await startOutpost({ args: ["--mode", "edge", "--platform-url", platform.url, "--system-key", SK, "--edge-name", "gw-1", "--edge-token", gw.token] });
  stops.push(() => edge.stop());
  const signInApi = () => request(edge.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
  t.ok(await waitFor(async () => (await signInApi()).status === 200, 20_000), "the developer signs in on the edge");
  const ed = new Client(edge.url, { "ClearBlade-DevToken": (await signInApi()).body.dev_token });
  t.ok(await waitFor(async () => (await ed.get("/api/v/4/edge/status")).body.synced === 2, 20_000), "the edge holds the collection and the service");

  const page = await newPage();
  await signIn(page, edge.url, s.email, s.password);
  await page.waitForSelector("#edge-self");
  const tabs = await page.$$eval("nav.tabs a", (els) => els.map((e) => e.textContent));
  t.same(tabs.slice(0, 3), ["This edge", "Collections", "Services"], "the edge's own page first, then its system's pages");
  for (const other of ["Edges", "Deployments", "Settings", "Throttling"]) t.notOk(tabs.includes(other), `no ${other} tab: the platform's own`);

  // the platform's collection: listed without Delete, its page without schema or row controls
  await page.click("nav.tabs a[href$='/collections']");
  await page.waitForSelector('tr[data-collection="readings"]');
  t.equal(await page.$('tr[data-collection="readings"] button.danger'), null, "no Delete for the platform's collection");
  t.equal(await text(page, 'tr[data-collection="readings"] .owned-cell'), "from the platform", "it says where it comes from");
  await page.click('tr[data-collection="readings"] a');
  await page.waitForSelector("#rows-table tbody tr[data-item]");
  t.equal(await text(page, "#owned-note"), "From the platform's template: change it there. Its rows come down from the platform too.", "the reason is shown");
  for (const sel of ["#new-column", "#new-row", "#rows-table button.cell", "#rows-table button.danger"]) t.equal(await page.$(sel), null, `no ${sel}`);
  t.equal(await text(page, "#rows-table td.col-site"), "north", "its rows are shown");
  await checkPage(t, page, "edge-collection-owned", "#owned-note");

  // the platform's service: its code shown, not editable; it runs here
  await page.goto(`${edge.url}/console#/s/${SK}/services`, { waitUntil: "load" });
  await page.waitForSelector('tr[data-service="calc"]');
  t.equal(await page.$('tr[data-service="calc"] button.danger'), null, "no Delete for the platform's service");
  await page.click('tr[data-service="calc"] a');
  await page.waitForSelector("#owned-note");
  // the note comes from the edge's status, the code from the service's own answer: once the
  // code is shown, the page is whole
  await page.waitForSelector("pre#service-code");
  t.equal(await page.$("#save-service"), null, "no Save");
  t.match(await text(page, "pre#service-code"), /from the platform/, "its code is shown as text");
  await page.click("#run-service");
  t.match(await page.waitForSelector("#run-result").then((e) => e!.evaluate((x) => x.textContent ?? "")), /from the platform/, "it runs on the edge");
  await checkPage(t, page, "edge-service-owned", "#run-result");

  // a collection of the edge's own: created, a column, a row, an edit in place, deleted
  await page.goto(`${edge.url}/console#/s/${SK}/collections`, { waitUntil: "load" });
  await page.waitForSelector("#new-collection");
  await page.type("#new-collection-name", "local");
  await page.click("#new-collection button[type=submit]");
  await page.waitForSelector('tr[data-collection="local"] button.danger');
  const localId = async () => ((await ed.get(`/admin/allcollections?appid=${SK}`)).body as { name: string; collectionID: string }[]).find((c) => c.name === "local")?.collectionID;
  const id = await localId();
  t.ok(id, "the edge's API has it");
  await checkPage(t, page, "edge-collections", 'tr[data-collection="local"] button.danger');
  await page.click('tr[data-collection="local"] a');
  await page.waitForSelector("#new-column");
  t.equal(await page.$("#owned-note"), null, "no reason: it is the edge's own");
  await page.type("#new-column-name", "note");
  await page.click("#new-column button[type=submit]");
  await page.waitForSelector('tr[data-column="note"]');
  await page.waitForSelector("#new-row-note");
  await page.type("#new-row-note", "first");
  await page.click("#new-row button[type=submit]");
  await page.waitForSelector("#rows-table tbody tr[data-item]");
  const rows = async () => ((await ed.get(`/api/v/1/data/${id}`)).body.DATA as { note: string }[]).map((r) => r.note);
  t.same(await rows(), ["first"], "the row is in the edge's collection");
  await page.click("#rows-table td.col-note button.cell");
  await page.waitForSelector("#rows-table form.inline input");
  await page.$eval("#rows-table form.inline input", (e) => { (e as any).value = ""; e.dispatchEvent(new Event("input", { bubbles: true })); });
  await page.type("#rows-table form.inline input", "edited");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#rows-table td.col-note button.cell ::-p-text(edited)");
  t.same(await rows(), ["edited"], "the edit in place reaches the edge's collection");
  await checkPage(t, page, "edge-collection-local", "#rows-table tbody tr[data-item]");
  await page.goto(`${edge.url}/console#/s/${SK}/collections`, { waitUntil: "load" });
  await page.waitForSelector('tr[data-collection="local"] button.danger');
  await page.click('tr[data-collection="local"] button.danger');
  await waitRows(page, "collections-table", "data-collection", ["readings"]);
  t.equal(await localId(), undefined, "deleted on the edge");
  t.same(await rowsOf(page, "collections-table", "data-collection"), ["readings"], "the platform's collection stays");
  await done(t, page);
});
