// The console's detail pages in headless Chromium (the kit of consoleBrowser.ts): a user's page
// (columns edited, a role assigned and the user then allowed what it grants, removed and refused
// again, a new password that ends its sessions); a device's page (fields and columns edited, its
// key rotated: the new key signs in, the old one no longer; a role; its MQTT connection seen;
// deleted); a system's settings (renamed, a token lifetime, deleted once its name is typed); an
// edge added to a deployment and removed from it. Each page at 1366 and 390 px (no sideways
// overflow, a screenshot, axe-core), and the API's refusals shown in its words.
import t from "tap";
import type { Page } from "puppeteer-core";
import { checkPage, done, launch, newPage, signIn, skip, stops, text, waitRows } from "./consoleBrowser.ts";
import { collectionWith, devWithSystem, isErr, must, newUser, ok200, request, startOutpost, type Outpost } from "./harness.ts";

/** Replaces an input's value as typing would. */
async function fill(page: Page, sel: string, value: string) {
  await page.$eval(sel, (e) => { (e as any).value = ""; e.dispatchEvent(new Event("input", { bubbles: true })); });
  if (value) await page.type(sel, value);
}
const waitText = (page: Page, sel: string, re: RegExp) =>
  page.waitForFunction((s, src) => new RegExp(src).test((globalThis as any).document.querySelector(s)?.textContent ?? ""), { timeout: 20_000 }, sel, re.source);
/** Waits for a select to offer a value (Preact sets an option's value as a property, which no
 *  attribute selector sees). */
const waitOption = (page: Page, sel: string, value: string) =>
  page.waitForFunction((s, v) => [...(globalThis as any).document.querySelectorAll(`${s} option`)].some((o: any) => o.value === v), { timeout: 20_000 }, sel, value);

t.test("users, devices, systems, edges: each detail page's main flow", skip, async (t) => {
  const o: Outpost = await startOutpost();
  stops.push(() => o.stop());
  await launch();
  const s = await devWithSystem(o, "pages-c");
  const SK = s.systemKey;
  const col = await collectionWith(s, [["site", "string"]], "readings");
  await must(s.dev.post(`/admin/user/${SK}/roles`, { name: "readers", collections: [{ itemInfo: { id: col.id }, permissions: 1 }] }), "role readers");
  const readersId = (await must(s.dev.get(`/admin/user/${SK}/roles`), "roles") as { ID: string; Name: string }[]).find((r) => r.Name === "readers")!.ID;
  const page = await newPage();
  await signIn(page, o.url, s.email, s.password);

  // ---- a user's page: columns, roles, password
  await must(s.dev.post(`/admin/user/${SK}/columns`, { column_name: "floor", type: "int" }), "user column floor");
  await must(s.dev.post(`/admin/user/${SK}/columns`, { column_name: "vip", type: "bool" }), "user column vip");
  const user = await newUser(s);
  const other = await newUser(s);
  await page.goto(`${o.url}/console#/s/${SK}/users`, { waitUntil: "load" });
  await page.waitForSelector(`tr[data-user="${user.email}"] a`);
  await page.click(`tr[data-user="${user.email}"] a`);
  await page.waitForSelector("#edit-user-floor");
  await waitText(page, "#where", new RegExp(`Users / ${user.email.replace(/[.+]/g, "\\$&")}$`));
  t.pass("the list links to the user's page, named in the trail");
  await waitText(page, "#user-sessions", /^1$/);
  t.pass("its live sessions are counted (the one registration gave)");
  t.equal(await page.$eval("#edit-user-floor", (e) => e.getAttribute("type")), "number", "an int column is a number box");
  t.equal(await page.$eval("#edit-user-vip", (e) => e.getAttribute("type")), "checkbox", "a bool column a checkbox");
  await fill(page, "#edit-user-floor", "7");
  await page.click("#edit-user-vip");
  await page.click("#edit-user button[type=submit]");
  await page.waitForSelector("#user-saved");
  const stored = (await must(s.dev.get(`/admin/user/${SK}?query=${encodeURIComponent(JSON.stringify({ FILTERS: [[{ EQ: [{ user_id: user.userId }] }]] }))}`), "user"))[0];
  t.match(stored, { floor: 7, vip: true }, "the columns saved in their types");
  // the API's refusal, in its words: another user's email
  await fill(page, "#edit-user-email", other.email);
  await page.click("#edit-user button[type=submit]");
  await waitText(page, "#edit-user .error", /already exists/);
  t.pass("an email another user has: the API's words shown in the form");

  isErr(t, await user.client.get(`/api/v/1/data/${col.id}`), 401, "before the role: the user may not read the collection");
  await waitOption(page, "#user-roles-pick", readersId);
  await page.select("#user-roles-pick", readersId);
  await page.click("#user-roles-add button[type=submit]");
  await page.waitForSelector('#user-roles-table tr[data-role="readers"]');
  ok200(t, await user.client.get(`/api/v/1/data/${col.id}`), "role assigned on the page: the user reads the collection");
  await page.click('#user-roles-table tr[data-role="readers"] button.remove');
  await page.waitForFunction(() => !(globalThis as any).document.querySelector('#user-roles-table tr[data-role="readers"]'));
  isErr(t, await user.client.get(`/api/v/1/data/${col.id}`), 401, "role removed: refused again");

  await page.click("#user-password button[type=submit]");
  t.ok(await page.waitForSelector("#user-password-password-problem"), "an empty password is refused beside its field");
  await page.type("#user-password-password", "a-new-password-2");
  await page.click("#user-password button[type=submit]");
  await page.waitForSelector("#user-password-set");
  isErr(t, await user.client.get(`/api/v/1/user/info`), 400, 204, "the new password ended the user's session");
  await waitText(page, "#user-sessions", /^0$/);
  t.pass("and the page counts no live session");
  ok200(t, await s.app.post("/api/v/1/user/auth", { email: user.email, password: "a-new-password-2" }), "and the user signs in with it");
  await checkPage(t, page, "user", "#user-roles");

  // ---- a device's page: fields, columns, key rotation, roles, connection, delete
  await must(s.dev.post(`/admin/devices/${SK}/columns`, { column_name: "rack", type: "string" }), "device column rack");
  await must(s.dev.post(`/admin/devices/${SK}/pump-1`, { type: "pump", state: "new", active_key: "old-key-123", allow_key_auth: true, enabled: true }), "device pump-1");
  await page.goto(`${o.url}/console#/s/${SK}/devices`, { waitUntil: "load" });
  await page.waitForSelector('tr[data-device="pump-1"] a');
  await page.click('tr[data-device="pump-1"] a');
  await page.waitForSelector("#edit-device-rack");
  await page.waitForSelector('#device-link[data-connected="false"]');
  t.pass("the list links to the device's page; not connected");
  await fill(page, "#edit-device-state", "running");
  await page.type("#edit-device-rack", "B2");
  await page.click("#edit-device-allow_certificate_auth");
  await page.click("#edit-device button[type=submit]");
  await page.waitForSelector("#device-saved");
  t.match(await must(s.dev.get(`/admin/devices/${SK}/pump-1`), "device"), { state: "running", rack: "B2", allow_certificate_auth: true, type: "pump", enabled: true }, "fields and columns saved, the rest kept");

  const old = await request(o.url, "POST", `/api/v/2/devices/${SK}/auth`, { body: { deviceName: "pump-1", activeKey: "old-key-123" } });
  ok200(t, old, "before the rotation the old key signs in");
  await page.click("#rotate-key");
  await page.waitForSelector("#new-key code");
  const newKey = (await text(page, "#new-key code")).trim();
  t.ok(newKey.length >= 16, "a new key, shown once");
  const auth = await request(o.url, "POST", `/api/v/2/devices/${SK}/auth`, { body: { deviceName: "pump-1", activeKey: newKey } });
  ok200(t, auth, "the device signs in with the new key");
  isErr(t, await request(o.url, "POST", `/api/v/2/devices/${SK}/auth`, { body: { deviceName: "pump-1", activeKey: "old-key-123" } }), 401, "and no longer with the old one");
  // what docs/console.md says: a token issued before the rotation lives on until its session ends
  ok200(t, await request(o.url, "GET", `/api/v/2/devices/${SK}/pump-1`, { headers: { "ClearBlade-DeviceToken": old.body.deviceToken } }), "a token issued before the rotation still works");

  const asDevice = { "ClearBlade-DeviceToken": auth.body.deviceToken };
  isErr(t, await request(o.url, "GET", `/api/v/1/data/${col.id}`, { headers: asDevice }), 401, "before the role: the device may not read the collection");
  await waitOption(page, "#device-roles-pick", readersId);
  await page.select("#device-roles-pick", readersId);
  await page.click("#device-roles-add button[type=submit]");
  await page.waitForSelector('#device-roles-table tr[data-role="readers"]');
  ok200(t, await request(o.url, "GET", `/api/v/1/data/${col.id}`, { headers: asDevice }), "role assigned on the page: the device reads the collection");

  const mqtt = (await import("mqtt")).default;
  const conn = await mqtt.connectAsync(`mqtt://127.0.0.1:${o.mqttPort}`, { username: auth.body.deviceToken, password: SK, clientId: "pump-1-client", reconnectPeriod: 0 });
  await page.waitForSelector('#device-link[data-connected="true"]', { timeout: 20_000 });
  t.match(await text(page, "#device-connections"), /pump-1-client/, "connected: its MQTT client is listed");
  await waitText(page, "#device-sessions", /^[1-9]/);
  t.pass("and its live sessions counted");
  await checkPage(t, page, "device", "#device-roles");
  await conn.endAsync();
  await page.waitForSelector('#device-link[data-connected="false"]', { timeout: 20_000 });
  t.pass("then disconnected");
  // the API's refusal, in its words: the device went away under the page
  await must(s.dev.post(`/admin/devices/${SK}/pump-2`, { type: "pump", active_key: "pump-2-key", allow_key_auth: true, enabled: true }), "device pump-2");
  await page.goto(`${o.url}/console#/s/${SK}/devices/pump-2`, { waitUntil: "load" });
  await page.waitForSelector("#edit-device-state");
  await must(s.dev.del(`/admin/devices/${SK}/pump-2`), "pump-2 deleted elsewhere");
  await page.type("#edit-device-state", "gone");
  await page.click("#edit-device button[type=submit]");
  await waitText(page, "#edit-device .error", /pump-2/);
  t.pass("saving a device deleted elsewhere: the API's not-found shown in the form");
  await page.goto(`${o.url}/console#/s/${SK}/devices/pump-1`, { waitUntil: "load" });
  await page.waitForSelector("#delete-device");
  await page.click("#delete-device");
  await page.waitForSelector('#devices-table');
  t.equal((await s.dev.get(`/admin/devices/${SK}/pump-1`)).status, 404, "deleted from its page");

  // ---- an edge added to a deployment, and removed
  await must(s.dev.post(`/admin/edges/${SK}/gw-1`, { token: "gw-1-token-123", description: "line gateway" }), "edge gw-1");
  await must(s.dev.post(`/admin/${SK}/deployments`, { name: "line-1", description: "the filling line", assets: [{ asset_class: "readings", asset_id: "", sync_to_edge: true, sync_to_platform: false }], edges: [] }), "deployment line-1");
  await must(s.dev.post(`/admin/${SK}/deployments`, { name: "doomed", assets: [], edges: [] }), "deployment doomed");
  await page.goto(`${o.url}/console#/s/${SK}/edge/gw-1`, { waitUntil: "load" });
  await waitOption(page, "#edge-deployment-pick", "line-1");
  t.same(await waitRows(page, "edge-deployments-table", "data-deployment", []), [], "no deployment names the edge yet");
  await page.select("#edge-deployment-pick", "line-1");
  await page.click("#edge-deployment-add button[type=submit]");
  await waitRows(page, "edge-deployments-table", "data-deployment", ["line-1"]);
  t.same((await must(s.dev.get(`/admin/${SK}/deployments/line-1`), "line-1")).edges, ["gw-1"], "added through the deployments API");
  const entries = (await must(s.dev.get(`/admin/edges/template/${SK}`), "templates"))["gw-1"] as { def_name: string; source?: string }[];
  t.ok(entries.some((e) => e.def_name === "readings" && /deployment:line-1/.test(e.source ?? "")), "and the edge's template now brings the deployment's collection");
  t.ok(await page.waitForSelector('#template-table tr[data-source*="deployment:line-1"]'), "which the page's template shows at once");
  await checkPage(t, page, "edge-deployments", '#edge-deployments-table tr[data-deployment="line-1"]');
  await page.click('#edge-deployments-table tr[data-deployment="line-1"] button.remove');
  await waitRows(page, "edge-deployments-table", "data-deployment", []);
  t.same((await must(s.dev.get(`/admin/${SK}/deployments/line-1`), "line-1")).edges, [], "removed through the API");
  // the API's refusal, in its words: a deployment deleted under the page
  await must(s.dev.del(`/admin/${SK}/deployments/doomed`), "doomed deleted elsewhere");
  await page.select("#edge-deployment-pick", "doomed");
  await page.click("#edge-deployment-add button[type=submit]");
  await waitText(page, "#edge-deployments .error", /doomed/);
  t.pass("adding to a deployment deleted elsewhere: the API's words shown");

  // ---- a system's settings: renamed, a token lifetime, refusals, deleted by its typed name
  await page.goto(`${o.url}/console#/s/${SK}/settings`, { waitUntil: "load" });
  await page.waitForSelector("#edit-system-name");
  await fill(page, "#edit-system-token_ttl_user", "0");
  await page.click("#edit-system button[type=submit]");
  t.ok(await page.waitForSelector("#edit-system-token_ttl_user-problem"), "a token lifetime of 0 is refused beside its field");
  await fill(page, "#edit-system-token_ttl_user", "3600");
  await fill(page, "#edit-system-name", "x".repeat(201));
  await page.click("#edit-system button[type=submit]");
  await waitText(page, "#edit-system .error", /name/);
  t.pass("a name the API refuses: its words shown in the form");
  await fill(page, "#edit-system-name", "pages-c renamed");
  await page.click("#edit-system-registration");
  await page.click("#edit-system button[type=submit]");
  await page.waitForSelector("#system-saved");
  t.match(await must(s.dev.get(`/admin/systemmanagement?id=${SK}`), "system"), { name: "pages-c renamed", token_ttl_user: 3600, registration: false }, "renamed and changed through the API");
  await waitText(page, "h1", /^pages-c renamed$/);
  await waitText(page, "#where", /pages-c renamed \/ Settings$/);
  t.pass("the heading and the trail carry the new name");
  await checkPage(t, page, "system-settings", "#delete-system");
  const doomed = await must(s.dev.post("/admin/systemmanagement", { name: "scratch system" }), "system scratch");
  await page.goto(`${o.url}/console#/`, { waitUntil: "load" });
  await page.waitForSelector(`tr[data-system="${doomed.appID}"] a.settings`);
  await page.click(`tr[data-system="${doomed.appID}"] a.settings`);
  await page.waitForSelector("#delete-system-name");
  await waitText(page, "#where", /scratch system \/ Settings$/);
  t.pass("the systems list links to each system's settings");
  await page.type("#delete-system-name", "scratch");
  t.ok(await page.$eval("#delete-system button[type=submit]", (e) => (e as any).disabled), "Delete stays off until the whole name is typed");
  await page.type("#delete-system-name", " system");
  await page.click("#delete-system button[type=submit]");
  await page.waitForSelector("#systems-table");
  t.notOk((await must(s.dev.get("/admin/allsystems"), "systems") as { systemKey: string }[]).some((x) => x.systemKey === doomed.appID), "deleted");
  ok200(t, await s.dev.get(`/admin/systemmanagement?id=${SK}`), "the other system stays");
  await done(t, page);
});
