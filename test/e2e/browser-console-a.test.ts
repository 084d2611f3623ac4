// The console's pages for roles, triggers, timers, webhooks, adapters and topics in headless
// Chromium (the kit of consoleBrowser.ts): a role's permission toggled in its matrix, and a
// user's read of a collection refused before and allowed after; a timer created that then runs;
// a trigger created, disabled, deleted; a webhook created and invoked from its page and from
// outside; an adapter with a file, replaced by a new version, deleted; a message published from
// the topics page and another from outside, both seen in the live view, and the history of a
// time range. Each page at 1366 and 390 px (no sideways overflow, a screenshot, axe-core).
import t from "tap";
import type { Page } from "puppeteer-core";
import { checkPage, done, launch, newPage, signIn, skip, stops, text, waitRows } from "./consoleBrowser.ts";
import { collectionWith, devWithSystem, isErr, must, newUser, ok200, request, startOutpost, waitFor, type Outpost } from "./harness.ts";

/** Replaces an input's value as typing would. */
async function fill(page: Page, sel: string, value: string) {
  await page.$eval(sel, (e) => { (e as any).value = ""; e.dispatchEvent(new Event("input", { bubbles: true })); });
  if (value) await page.type(sel, value);
}
/** Sets an input whose value is not typed (datetime-local) and tells Preact. */
const setValue = (page: Page, sel: string, value: string) =>
  page.$eval(sel, (e, v) => { (e as any).value = v; e.dispatchEvent(new Event("input", { bubbles: true })); }, value);
const waitText = (page: Page, sel: string, re: RegExp) =>
  page.waitForFunction((s, src) => new RegExp(src).test((globalThis as any).document.querySelector(s)?.textContent ?? ""), { timeout: 20_000 }, sel, re.source);

t.test("roles, triggers, timers, webhooks, adapters, topics: each page's main flow", skip, async (t) => {
  const o: Outpost = await startOutpost();
  stops.push(() => o.stop());
  await launch();
  const s = await devWithSystem(o, "pages-a");
  const SK = s.systemKey;
  const col = await collectionWith(s, [["site", "string"]], "readings");
  await must(s.dev.post(`/admin/code/v/1/${SK}/hook`, { code: "function hook(req, resp) { resp.success(\"pong \" + JSON.stringify(req.params)); }", parameters: [] }), "service hook");
  const user = await newUser(s);
  const page = await newPage();
  await signIn(page, o.url, s.email, s.password);

  // ---- roles: a matrix toggle is what the API then enforces
  await page.goto(`${o.url}/console#/s/${SK}/roles`, { waitUntil: "load" });
  await page.waitForSelector('tr[data-role="Administrator"]');
  await page.click("#new-role button[type=submit]");
  t.ok(await page.waitForSelector("#new-role-name-problem"), "a role needs a name: said beside the field");
  await page.type("#new-role-name", "readers");
  await page.click("#new-role button[type=submit]");
  const cell = `tr[data-asset="collections/${col.id}"]`;
  await page.waitForSelector(`${cell}[data-level="0"] input[data-right="read"]`);
  await waitText(page, "#where", /Roles \/ readers$/);
  t.pass("the trail names the role once it is read");
  const roles = await must(s.dev.get(`/admin/user/${SK}/roles`), "roles") as { ID: string; Name: string }[];
  const readers = roles.find((r) => r.Name === "readers")!;
  t.ok(readers, "the role was created through the API");
  await must(s.dev.put(`/admin/user/${SK}`, { user: user.userId, changes: { roles: { add: [readers.ID] } } }), "user in readers");
  isErr(t, await user.client.get(`/api/v/1/data/${col.id}`), 401, 200, "before: the role does not let the user read the collection");
  t.equal(await page.$eval(`${cell} input[data-right="read"]`, (e) => e.getAttribute("aria-label")), "Collection readings: read", "each toggle says what it grants");
  await page.click(`${cell} input[data-right="read"]`);
  await page.waitForSelector(`${cell}[data-level="1"]`);
  ok200(t, await user.client.get(`/api/v/1/data/${col.id}`), "after the toggle: the user reads the collection");
  isErr(t, await user.client.post(`/api/v/1/data/${col.id}`, { site: "x" }), 401, 200, "but may not create in it (only read was granted)");
  await page.click(`tr[data-asset="services/hook"] input[data-right="execute"]`);
  await page.waitForSelector('tr[data-asset="services/hook"][data-level="1"]');
  ok200(t, await user.client.post(`/api/v/1/code/${SK}/hook`, {}), "execute on the service: the user runs it");
  await page.type("#matrix-topic-name", "alerts/#");
  await page.click("#matrix-topic button[type=submit]");
  await page.waitForSelector('tr[data-asset="topics/alerts/#"][data-level="1"]');
  await page.click(`${cell} input[data-right="read"]`);
  await page.waitForSelector(`${cell}[data-level="0"]`);
  isErr(t, await user.client.get(`/api/v/1/data/${col.id}`), 401, 200, "toggled off: refused again");
  await page.click(`${cell} input[data-right="update"]`);
  await page.waitForSelector(`${cell}[data-level="4"]`);
  await checkPage(t, page, "role-matrix", "#matrix");
  await page.type("#matrix-filter", "read");
  await page.waitForFunction(() => (globalThis as any).document.querySelectorAll("#matrix tbody tr").length === 1);
  t.pass("the matrix filters its rows");
  await must(s.dev.post(`/admin/user/${SK}/roles`, { name: "scratch" }), "role scratch");
  await page.goto(`${o.url}/console#/s/${SK}/roles`, { waitUntil: "load" });
  await page.type("#roles-table-search", "READ");
  await page.keyboard.press("Enter");
  t.same(await waitRows(page, "roles-table", "data-role", ["readers"]), ["readers"], "search on the server, any case");
  await fill(page, "#roles-table-search", "");
  await page.keyboard.press("Enter");
  await page.waitForSelector('tr[data-role="scratch"] button.danger');
  t.notOk(await page.$('tr[data-role="Administrator"] button.danger'), "a built-in role has no Delete");
  await checkPage(t, page, "roles", 'tr[data-role="scratch"]');
  await page.click('tr[data-role="scratch"] button.danger');
  await page.waitForFunction(() => !(globalThis as any).document.querySelector('tr[data-role="scratch"]'));
  t.notOk((await must(s.dev.get(`/admin/user/${SK}/roles`), "roles") as { Name: string }[]).some((r) => r.Name === "scratch"), "a role deleted");

  // ---- timers: created, runs, edited, deleted
  await page.goto(`${o.url}/console#/s/${SK}/timers`, { waitUntil: "load" });
  await page.waitForSelector("#new-timer");
  await page.type("#new-timer-name", "bad name");
  await fill(page, "#new-timer-every", "0");
  await page.click("#new-timer button[type=submit]");
  t.ok(await page.waitForSelector("#new-timer-name-problem"), "a bad timer name is refused beside its field");
  t.ok(await page.$("#new-timer-every-problem"), "and so is an interval of 0");
  await fill(page, "#new-timer-name", "tick");
  await fill(page, "#new-timer-every", "1");
  await page.select("#new-timer-unit", "seconds");
  await page.select("#new-timer-service", "hook");
  await page.click("#new-timer button[type=submit]");
  await page.waitForSelector("#edit-timer");
  const timer = await must(s.dev.get(`/admin/triggers/timers/${SK}/tick`), "timer");
  t.match(timer, { frequency: 1, repeats: -1, service_name: "hook" }, "the timer as the form set it");
  t.ok(await waitFor(async () => (await s.dev.get(`/admin/triggers/timers/${SK}/tick`)).body.runs >= 1, 20_000), "and it runs");
  await fill(page, "#edit-timer-description", "every second");
  await fill(page, "#edit-timer-repeats", "3");
  await page.click("#edit-timer button[type=submit]");
  await page.waitForSelector("#timer-saved");
  t.match((await s.dev.get(`/admin/triggers/timers/${SK}/tick`)).body, { description: "every second", repeats: 3 }, "edited through the API");
  await checkPage(t, page, "timer", "#edit-timer");
  await page.goto(`${o.url}/console#/s/${SK}/timers`, { waitUntil: "load" });
  await page.waitForSelector('tr[data-timer="tick"]');
  t.match(await text(page, 'tr[data-timer="tick"]'), /every 1 second, 3 times/, "the list says its schedule");
  await checkPage(t, page, "timers", 'tr[data-timer="tick"]');
  await page.click('tr[data-timer="tick"] button.danger');
  await waitRows(page, "timers-table", "data-timer", []);
  t.equal((await s.dev.get(`/admin/triggers/timers/${SK}/tick`)).status, 404, "deleted");

  // ---- triggers: the event picked from the definitions, with a filter; disabled; deleted
  await page.goto(`${o.url}/console#/s/${SK}/triggers`, { waitUntil: "load" });
  // the definitions are there: their modules are options (Preact sets an option's value as a property)
  await page.waitForFunction(() => [...(globalThis as any).document.querySelectorAll("#new-trigger-module option")].some((o: any) => o.value === "Messaging"));
  await page.select("#new-trigger-module", "Data");
  await page.select("#new-trigger-event", "ItemCreated");
  await page.type("#new-trigger-kv-collectionName", "readings");
  await page.click("#new-trigger button[type=submit]");
  t.ok(await page.waitForSelector("#new-trigger-name-problem"), "a trigger needs a name");
  await page.type("#new-trigger-name", "on-reading");
  await page.click("#new-trigger button[type=submit]");
  await page.waitForSelector("#edit-trigger");
  t.match((await s.dev.get(`/admin/triggers/handlers/${SK}/on-reading`)).body, { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: "readings" }, service_name: "hook", disabled: false }, "the trigger as picked");
  await page.click("#edit-trigger-enabled");
  await page.click("#edit-trigger button[type=submit]");
  await page.waitForSelector("#trigger-saved");
  t.equal((await s.dev.get(`/admin/triggers/handlers/${SK}/on-reading`)).body.disabled, true, "disabled from its page");
  await checkPage(t, page, "trigger", "#edit-trigger");
  await page.goto(`${o.url}/console#/s/${SK}/triggers`, { waitUntil: "load" });
  await page.waitForSelector('tr[data-trigger="on-reading"]');
  await checkPage(t, page, "triggers", 'tr[data-trigger="on-reading"]');
  await page.click('tr[data-trigger="on-reading"] button.danger');
  await waitRows(page, "triggers-table", "data-trigger", []);
  t.equal((await s.dev.get(`/admin/triggers/handlers/${SK}/on-reading`)).status, 404, "deleted");

  // ---- webhooks: created, its URL shown and invoked, edited, deleted
  await page.goto(`${o.url}/console#/s/${SK}/webhooks`, { waitUntil: "load" });
  await page.waitForSelector("#new-webhook");
  await page.type("#new-webhook-name", "bad name");
  await page.click("#new-webhook button[type=submit]");
  t.ok(await page.waitForSelector("#new-webhook-name-problem"), "a bad webhook name is refused beside its field");
  await fill(page, "#new-webhook-name", "orders");
  await page.click("#new-webhook button[type=submit]");
  await page.waitForSelector("#webhook-url");
  const url = await text(page, "#webhook-url");
  t.equal(url, `${o.url}/api/v/4/webhook/execute/${SK}/orders`, "the invoke URL");
  await fill(page, "#try-body", '{"n": 7}');
  await page.click("#try-send");
  await page.waitForSelector('#try-answer[data-status="200"]');
  t.match(await text(page, "#try-answer pre"), /pong .*"n":7/, "invoked from its page with the developer's token: the service's answer");
  const outside = await request(o.url, "POST", `/api/v/4/webhook/execute/${SK}/orders`, { body: { n: 1 } });
  t.equal(outside.status, 401, "platform authentication: a call without a token is refused");
  await checkPage(t, page, "webhook", "#try-answer");
  await page.select("#edit-webhook-auth_method", "no_auth");
  await page.click("#edit-webhook button[type=submit]");
  await page.waitForSelector("#webhook-saved");
  const anon = await request(o.url, "POST", url.slice(o.url.length), { body: { n: 2 } });
  t.equal(anon.status, 403, "changed to no authentication: a call without a token runs as Anonymous, which may not run the service yet");
  await must(s.dev.put(`/admin/user/${SK}/roles`, { id: "Anonymous", changes: { services: [{ itemInfo: { name: "hook" }, permissions: 1 }] } }), "Anonymous runs hook");
  const open = await request(o.url, "POST", url.slice(o.url.length), { body: { n: 2 } });
  t.equal(open.status, 200, "once Anonymous may: the URL shown answers anyone");
  t.match(open.text, /pong/, "with the service's answer");
  await page.goto(`${o.url}/console#/s/${SK}/webhooks`, { waitUntil: "load" });
  await page.waitForSelector('tr[data-webhook="orders"]');
  await checkPage(t, page, "webhooks", 'tr[data-webhook="orders"]');
  await page.click('tr[data-webhook="orders"] button.danger');
  await waitRows(page, "webhooks-table", "data-webhook", []);
  t.equal((await request(o.url, "POST", url.slice(o.url.length), { body: {} })).status, 404, "deleted: its URL answers 404");

  // ---- adapters and their files
  await page.goto(`${o.url}/console#/s/${SK}/adapters`, { waitUntil: "load" });
  await page.waitForSelector("#new-adapter");
  await page.type("#new-adapter-name", "-bad");
  await page.click("#new-adapter button[type=submit]");
  t.ok(await page.waitForSelector("#new-adapter-name-problem"), "a bad adapter name is refused beside its field");
  await fill(page, "#new-adapter-name", "modbus");
  await page.type("#new-adapter-protocol", "modbus-tcp");
  await page.click("#new-adapter button[type=submit]");
  await page.waitForSelector("#edit-adapter");
  await fill(page, "#edit-adapter-start_command", "./run.sh");
  await page.click("#edit-adapter button[type=submit]");
  await page.waitForSelector("#adapter-saved");
  t.match((await s.dev.get(`/api/v/4/${SK}/adapters/modbus`)).body, { protocol: "modbus-tcp", start_command: "./run.sh" }, "created and edited");
  await page.type("#new-adapter-file-name", "run.sh");
  await fill(page, "#new-adapter-file-permissions", "0755");
  await page.type("#new-adapter-file-content", "echo hi");
  await page.click("#new-adapter-file button[type=submit]");
  await page.waitForSelector('tr[data-file="run.sh"]');
  await page.click('tr[data-file="run.sh"] button[aria-label="Open file run.sh"]');
  await page.waitForSelector("#adapter-file-text");
  t.equal(await page.$eval("#adapter-file-text", (e) => (e as any).value), "echo hi", "the file's content, read back");
  await fill(page, "#adapter-file-text", "echo hello");
  await page.click("#adapter-file-save");
  await waitText(page, 'tr[data-file="run.sh"]', /2 \(2 kept\)/);
  const file = (await s.dev.get(`/api/v/4/${SK}/adapters/modbus/files/run.sh`)).body;
  t.same([file.version, Buffer.from(file.file, "base64").toString(), file.permissions], [2, "echo hello", "0755"], "a new version with the new content");
  await checkPage(t, page, "adapter", 'tr[data-file="run.sh"]');
  await page.click('tr[data-file="run.sh"] button.danger');
  await waitRows(page, "adapter-files", "data-file", []);
  t.equal((await s.dev.get(`/api/v/4/${SK}/adapters/modbus/files/run.sh`)).status, 404, "the file deleted");
  await page.goto(`${o.url}/console#/s/${SK}/adapters`, { waitUntil: "load" });
  await page.waitForSelector('tr[data-adapter="modbus"]');
  await checkPage(t, page, "adapters", 'tr[data-adapter="modbus"]');
  await page.click('tr[data-adapter="modbus"] button.danger');
  await waitRows(page, "adapters-table", "data-adapter", []);

  // ---- topics: publish, the live view, history by time range
  await page.goto(`${o.url}/console#/s/${SK}/topics`, { waitUntil: "load" });
  await page.waitForSelector("#publish");
  await page.type("#publish-topic", "sensors/+");
  await page.click("#publish button[type=submit]");
  t.ok(await page.waitForSelector("#publish-topic-problem"), "a wildcard topic is refused beside its field");
  await fill(page, "#publish-topic", "sensors/t1");
  await page.type("#publish-payload", "21.5");
  await page.click("#publish button[type=submit]");
  await page.waitForSelector('#live-table tr[data-payload="21.5"]', { timeout: 20_000 });
  t.pass("published from the console: in the live view");
  ok200(t, await s.dev.post(`/api/v/1/message/${SK}/publish`, { topic: "sensors/t1", body: "from-outside" }), "a message from outside");
  await page.waitForSelector('#live-table tr[data-payload="from-outside"]', { timeout: 20_000 });
  t.pass("the live view shows it");
  await page.type("#publish-payload", "23");
  await page.click("#publish button[type=submit]");
  await page.waitForSelector('#live-table tr[data-payload="23"]', { timeout: 20_000 });
  t.same(await page.$$eval("#live-table tbody tr[data-payload]", (els) => els.map((e) => e.getAttribute("data-payload"))).then((x) => x.length), 3, "each message once");
  await checkPage(t, page, "topic", '#live-table tr[data-payload="23"]');
  const local = (ms: number) => { const d = new Date(ms); return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16); };
  await setValue(page, "#history-from", local(Date.now() + 3_600_000));
  await setValue(page, "#history-to", local(Date.now()));
  await page.click("#history-range button[type=submit]");
  t.match(await page.waitForSelector("#history-range + .error").then((e) => e!.evaluate((x) => x.textContent)), /before its start/, "a range that ends before it starts is refused");
  await setValue(page, "#history-from", local(Date.now() - 3_600_000));
  await setValue(page, "#history-to", local(Date.now() + 120_000));
  await page.click("#history-range button[type=submit]");
  await page.waitForFunction(() => (globalThis as any).document.querySelectorAll("#history-table tbody tr[data-payload]").length === 3);
  t.pass("the last hour: the three messages");
  await setValue(page, "#history-from", local(Date.now() + 3_600_000));
  await setValue(page, "#history-to", "");
  await page.click("#history-range button[type=submit]");
  await page.waitForFunction(() => (globalThis as any).document.querySelectorAll("#history-table tbody tr[data-payload]").length === 0);
  t.pass("from an hour ahead: none");
  await page.goto(`${o.url}/console#/s/${SK}/topics`, { waitUntil: "load" });
  await page.waitForSelector('tr[data-topic="sensors/t1"]');
  t.match(await text(page, 'tr[data-topic="sensors/t1"] td.num'), /^3$/, "the topic list counts its messages");
  await checkPage(t, page, "topics", 'tr[data-topic="sensors/t1"]');
  await done(t, page);
});
