// Behaviour behind the flat cost curves (bench/scale.ts), black-box: the QoS a client receives
// with overlapping subscriptions (the highest of the matching ones, MQTT 3.1.1 §3.3.5), bulk
// device creation (an array body, refused whole for one bad entry), device sign-in with every kind
// of stored key (also across a restart), history reads bounded by `count`, and paging: totals,
// continuation through NEXTPAGEURL, deep pages.
import { rmSync } from "node:fs";
import mqtt from "mqtt";
import type { IPublishPacket, MqttClient } from "mqtt";
import t from "tap";
import { type DevSystem, type HttpResponse, collectionWith, devWithSystem, isErr, ok200, qs, request, startOutpost, uniq, waitFor } from "./harness.ts";

const o = await startOutpost();
t.teardown(() => o.stop());
const s = await devWithSystem(o, "scale");

// ---- MQTT helpers -----------------------------------------------------------------------------

const clients = new Set<MqttClient>();
t.teardown(() => { for (const c of clients) c.end(true); });

function connect(sys: DevSystem): Promise<MqttClient> {
  return new Promise((res, rej) => {
    const c = mqtt.connect(`mqtt://127.0.0.1:${o.mqttPort}`, { reconnectPeriod: 0, connectTimeout: 10_000, clientId: uniq("cid"), protocolVersion: 4, username: sys.devToken, password: sys.systemKey });
    clients.add(c);
    c.once("connect", () => res(c));
    c.once("error", rej);
  });
}

interface Got { topic: string; qos: number; text: string }
function collect(c: MqttClient): Got[] {
  const got: Got[] = [];
  c.on("message", (topic, payload, packet: IPublishPacket) => got.push({ topic, qos: packet.qos, text: payload.toString("utf8") }));
  return got;
}

/** One SUBSCRIBE per filter, in this order (the order aedes adds their handlers in). */
async function subscribe(c: MqttClient, subs: [string, 0 | 1 | 2][]) {
  for (const [topic, qos] of subs) {
    const granted = await c.subscribeAsync(topic, { qos });
    if (granted[0]?.qos !== qos) throw new Error(`SUBSCRIBE ${topic} at ${qos}: granted ${JSON.stringify(granted)}`);
  }
}

/** Publishes each [topic, qos] with a unique payload; resolves to what `got` received of each
 *  (waiting for all of them), or undefined for one that did not arrive. */
async function deliveries(pub: MqttClient, got: Got[], sends: [string, 0 | 1 | 2][]): Promise<(Got[] | undefined)[]> {
  const texts = sends.map(() => uniq("m"));
  for (const [i, [topic, qos]] of sends.entries()) await pub.publishAsync(topic, texts[i]!, { qos });
  await waitFor(() => texts.every((x) => got.some((g) => g.text === x)), 5_000);
  // a duplicate would arrive right behind the first copy
  await new Promise((r) => setTimeout(r, 150));
  return texts.map((x) => { const all = got.filter((g) => g.text === x); return all.length ? all : undefined; });
}

t.test("QoS with overlapping subscriptions: the highest matching one, once", async (t) => {
  const pub = await connect(s);
  // a wildcard at QoS 0 and an exact filter at QoS 1 (added in both orders), wildcards of each kind
  for (const order of ["wildcard first", "exact first"]) {
    const p = uniq("ov");
    const sub = await connect(s);
    const got = collect(sub);
    const subs: [string, 0 | 1 | 2][] = [[`${p}/#`, 0], [`${p}/a`, 1]];
    await subscribe(sub, order === "wildcard first" ? subs : subs.reverse());
    const [a1, b1, a2, a0] = await deliveries(pub, got, [[`${p}/a`, 1], [`${p}/b`, 1], [`${p}/a`, 2], [`${p}/a`, 0]]);
    t.same(a1?.map((g) => g.qos), [1], `${order}: QoS 1 publish on the exact topic arrives once at QoS 1`);
    t.same(b1?.map((g) => g.qos), [0], `${order}: on a topic only the QoS 0 wildcard matches, QoS 0`);
    t.same(a2?.map((g) => g.qos), [1], `${order}: a QoS 2 publish is capped at the best grant (1)`);
    t.same(a0?.map((g) => g.qos), [0], `${order}: a QoS 0 publish stays QoS 0`);
    sub.end(true);
  }

  const p = uniq("ov");
  const sub = await connect(s);
  const got = collect(sub);
  await subscribe(sub, [[`${p}/#`, 0], [`${p}/+/x`, 1], [`${p}/a/x`, 2], [`${p}/a/#`, 0]]);
  const [ax, bx, by] = await deliveries(pub, got, [[`${p}/a/x`, 2], [`${p}/b/x`, 2], [`${p}/b/y`, 2]]);
  t.same(ax?.map((g) => g.qos), [2], "four filters match: QoS 2 from the exact one");
  t.same(bx?.map((g) => g.qos), [1], "'+' at QoS 1 beats '#' at QoS 0");
  t.same(by?.map((g) => g.qos), [0], "only '#' at QoS 0 matches");

  // the grants follow UNSUBSCRIBE and a SUBSCRIBE again at another QoS
  await sub.unsubscribeAsync(`${p}/a/x`);
  const [ax2] = await deliveries(pub, got, [[`${p}/a/x`, 2]]);
  t.same(ax2?.map((g) => g.qos), [1], "after UNSUBSCRIBE of the QoS 2 filter: QoS 1 from '+'");
  await subscribe(sub, [[`${p}/+/x`, 0]]);
  const [ax3] = await deliveries(pub, got, [[`${p}/a/x`, 2]]);
  t.same(ax3?.map((g) => g.qos), [0], "'+' subscribed again at QoS 0: QoS 0");
  await subscribe(sub, [[`${p}/#`, 2]]);
  const [ax4] = await deliveries(pub, got, [[`${p}/a/x`, 1]]);
  t.same(ax4?.map((g) => g.qos), [1], "'#' subscribed again at QoS 2: a QoS 1 publish arrives at QoS 1");

  // many subscriptions on the receiver do not change which grant applies
  const q = uniq("many");
  const many = await connect(s);
  const gotMany = collect(many);
  const filters = Array.from({ length: 2000 }, (_, i) => `${q}/f${i}`);
  for (let i = 0; i < filters.length; i += 500) await many.subscribeAsync(Object.fromEntries(filters.slice(i, i + 500).map((f) => [f, { qos: 0 as const }])));
  await subscribe(many, [[`${q}/+`, 1]]);
  const [f7, other] = await deliveries(pub, gotMany, [[`${q}/f7`, 1], [`${q}/zz`, 1]]);
  t.same(f7?.map((g) => g.qos), [1], "2,000 QoS 0 filters and a QoS 1 '+': QoS 1");
  t.same(other?.map((g) => g.qos), [1], "a topic only '+' matches: QoS 1");
  many.end(true);
  sub.end(true);
  pub.end(true);
});

// ---- devices: bulk creation, sign-in with every kind of stored key ----------------------------

const devicesOf = (sys: DevSystem, base: "api" | "admin") => `${base === "api" ? "/api/v/2/devices" : "/admin/devices"}/${sys.systemKey}`;
const signIn = (url: string, sys: DevSystem, deviceName: string, activeKey: string) =>
  request(url, "POST", `/api/v/2/devices/${sys.systemKey}/auth`, { body: { deviceName, activeKey } });
const detail = (r: HttpResponse) => String(r.body?.error?.detail ?? "");

t.test("bulk device creation: an array body, the records in order, all or nothing", async (t) => {
  for (const base of ["admin", "api"] as const) {
    const p = uniq(base);
    const r = await s.dev.post(devicesOf(s, base), [
      { name: `${p}-a`, active_key: "chosen-key-a", type: "sensor" },
      { name: `${p}-b`, state: "new", enabled: true },
      { name: `${p}-c`, description: "third", allow_key_auth: true },
    ]);
    ok200(t, r, `POST ${base} array`);
    t.same(r.body.map((d: any) => d.name), [`${p}-a`, `${p}-b`, `${p}-c`], "in the order sent");
    t.equal(r.body[0].type, "sensor");
    t.equal(r.body[1].state, "new");
    t.equal(r.body[2].description, "third");
    t.equal(r.body[0].active_key, undefined, "a chosen key is not echoed");
    t.type(r.body[1].active_key, "string", "a generated key is shown once");
    t.equal(r.body[0].device_key, `${s.systemKey} :: ${p}-a`);
    ok200(t, await signIn(o.url, s, `${p}-a`, "chosen-key-a"), "the chosen key signs in");
    ok200(t, await signIn(o.url, s, `${p}-b`, r.body[1].active_key), "the generated key signs in");
    isErr(t, await signIn(o.url, s, `${p}-c`, "not-its-key"), 401, "a wrong key does not");
    const got = await s.dev.get(`${devicesOf(s, "admin")}/${p}-c`);
    ok200(t, got, "the record is there");
    t.same(got.body.name, `${p}-c`);
    const roles = await s.dev.get(`/admin/devices/roles/${s.systemKey}/${p}-c`);
    t.same(roles.body.roles?.map((x: any) => x.name), ["Authenticated"], "with the role a single create gives");
  }

  // one bad entry refuses the batch and the error names it; nothing of the batch is created
  const names = (p: string) => [`${p}-0`, `${p}-1`, `${p}-2`];
  const none = async (p: string, what: string) => {
    const q = qs({ FILTERS: [[{ RE: [{ name: `^${p}-` }] }]] });
    const l = await s.dev.get(`${devicesOf(s, "admin")}?query=${q}`);
    t.same(l.body, [], `${what}: none of the batch exists`);
  };
  const existing = uniq("exists");
  ok200(t, await s.dev.post(`${devicesOf(s, "admin")}/${existing}`, { active_key: "existing-key" }));
  const bad: [string, (p: string) => unknown[], number][] = [
    ["an invalid name", (p) => [{ name: names(p)[0] }, { name: "has space" }, { name: names(p)[2] }], 1],
    ["a missing name", (p) => [{ name: names(p)[0] }, { name: names(p)[1] }, { type: "x" }], 2],
    ["a field of the wrong type", (p) => [{ name: names(p)[0] }, { name: names(p)[1], enabled: "maybe" }, { name: names(p)[2] }], 1],
    ["a short key", (p) => [{ name: names(p)[0], active_key: "abc" }, { name: names(p)[1] }], 0],
    ["an unknown field", (p) => [{ name: names(p)[0] }, { name: names(p)[1] }, { name: names(p)[2], colour: "red" }], 2],
    ["a name twice", (p) => [{ name: names(p)[0] }, { name: names(p)[1] }, { name: names(p)[0] }], 2],
    ["an existing device", (p) => [{ name: names(p)[0] }, { name: existing }, { name: names(p)[2] }], 1],
    ["an entry that is not an object", (p) => [{ name: names(p)[0] }, "device", { name: names(p)[2] }], 1],
  ];
  for (const [what, body, index] of bad) {
    const p = uniq("bad");
    for (const base of ["admin", "api"] as const) {
      const r = await s.dev.post(devicesOf(s, base), body(p));
      isErr(t, r, 400, `${what} (${base})`);
      t.ok(detail(r).startsWith(`[${index}]`), `${what}: the error names entry ${index} (${detail(r)})`);
    }
    await none(p, what);
  }
  isErr(t, await s.dev.post(devicesOf(s, "admin"), { name: uniq("obj") }), 400, "an object body (not an array)");
  isErr(t, await s.dev.post(devicesOf(s, "admin"), []), 400, "an empty array");
  isErr(t, await request(o.url, "POST", devicesOf(s, "api"), { body: [{ name: uniq("anon") }] }), 401, "no token");
  // the single-device create is unchanged
  const one = uniq("single");
  const r = await s.dev.post(`${devicesOf(s, "api")}/${one}`, { active_key: "single-key-1" });
  ok200(t, r, "POST .../{name}");
  t.equal(r.body.name, one);
});

t.test("device sign-in with chosen, generated, rotating and changed keys, across restarts and a new secret key", async (t) => {
  const srv = await startOutpost({ keepData: true, args: ["--secret-key", "first-secret-key-0123456789"] });
  const dir = srv.dataDir;
  let url = srv.url;
  let current = srv;
  t.teardown(async () => { await current.stop(); rmSync(dir, { recursive: true, force: true }); });
  const sys = await devWithSystem(srv, "signin");
  const p = uniq("k");
  const bulk = await sys.dev.post(devicesOf(sys, "admin"), [{ name: `${p}-chosen`, active_key: "my-chosen-key" }, { name: `${p}-generated` }, { name: `${p}-rotating` }, { name: `${p}-changed`, active_key: "before-change" }]);
  ok200(t, bulk, "created");
  const rot = await sys.dev.post(`/admin/devices/keys/${sys.systemKey}/${p}-rotating`, { count: 2 });
  ok200(t, rot, "rotating keys");
  ok200(t, await sys.dev.put(`${devicesOf(sys, "admin")}/${p}-changed`, { active_key: "after-change" }), "key changed");
  const good: [string, string][] = [
    [`${p}-chosen`, "my-chosen-key"], [`${p}-generated`, bulk.body[1].active_key], [`${p}-rotating`, rot.body.keys[0]],
    [`${p}-rotating`, rot.body.keys[1]], [`${p}-changed`, "after-change"],
  ];
  const badKeys: [string, string][] = [[`${p}-chosen`, "my-chosen-kez"], [`${p}-generated`, "x".repeat(43)], [`${p}-changed`, "before-change"], [`${p}-nobody`, "whatever-key"]];
  const check = async (when: string) => {
    for (const [name, key] of good) ok200(t, await signIn(url, sys, name, key), `${when}: ${name} signs in`);
    for (const [name, key] of badKeys) isErr(t, await signIn(url, sys, name, key), 401, `${when}: ${name} with a wrong key`);
  };
  await check("first");
  await check("again");
  for (const [when, secret] of [["after a restart", "first-secret-key-0123456789"], ["after a restart with another secret key", "second-secret-key-0123456789"]]) {
    await current.stop();
    current = await startOutpost({ dataDir: dir, args: ["--secret-key", secret!] });
    url = current.url;
    await check(when!);
    await check(`${when!}, again`);
  }
});

// ---- paging: NEXTPAGEURL continues after the last row, TOTAL follows writes -------------------

t.test("paging through NEXTPAGEURL: every row once, in order, for each kind of SORT", async (t) => {
  const { id, name } = await collectionWith(s, [["n", "int"], ["s", "string"], ["grp", "int"]]);
  // n unique; s with NULLs and repeats; grp with many repeats
  const rows = Array.from({ length: 173 }, (_, i) => ({ n: (i * 37) % 173, s: i % 7 === 0 ? null : `s${(i * 11) % 40}`, grp: i % 5 }));
  ok200(t, await s.dev.post(`/api/v/1/data/${id}`, rows.slice(0, 100)));
  ok200(t, await s.dev.post(`/api/v/1/data/${id}`, rows.slice(100)));
  ok200(t, await s.dev.post(`/api/v/4/data/${s.systemKey}/${name}/index?columnName=n`));
  ok200(t, await s.dev.post(`/api/v/4/data/${s.systemKey}/${name}/index?columnName=s`));
  const sorts: [string, unknown[]][] = [
    ["no SORT", []], ["n ASC (indexed)", [{ ASC: "n" }]], ["n DESC", [{ DESC: "n" }]],
    ["s ASC (NULLs first)", [{ ASC: "s" }]], ["s DESC (NULLs last)", [{ DESC: "s" }]],
    ["grp DESC, n ASC", [{ DESC: "grp" }, { ASC: "n" }]], ["grp ASC, s DESC", [{ ASC: "grp" }, { DESC: "s" }]],
    ["s ASC, grp DESC (unindexed second key)", [{ ASC: "s" }, { DESC: "grp" }]],
  ];
  for (const [what, SORT] of sorts) {
    for (const filtered of [false, true]) {
      const FILTERS = filtered ? [[{ GT: [{ n: 20 }] }]] : [];
      const everything = await s.dev.get(`/api/v/1/data/${id}?query=${qs({ FILTERS, SORT, PAGESIZE: 0, PAGENUM: 0 })}`);
      const expected = everything.body.DATA.map((r: any) => r.item_id);
      for (const base of [`/api/v/1/data/${id}`, `/api/v/1/collection/${s.systemKey}/${name}`]) {
        const seen: string[] = [];
        let url: string | null = `${base}?query=${qs({ FILTERS, SORT, PAGESIZE: 17, PAGENUM: 1 })}`;
        let page = 0;
        let totals = true;
        while (url && page < 50) {
          const r: HttpResponse = await s.dev.get(url);
          if (r.status !== 200) { ok200(t, r, `${what}: page ${page + 1}`); break; }
          page++;
          totals &&= r.body.TOTAL === expected.length && r.body.CURRENTPAGE === page && (page === 1) === (r.body.PREVPAGEURL === null);
          seen.push(...r.body.DATA.map((x: any) => x.item_id));
          t.notOk(r.body.DATA.some((x: any) => Object.keys(x).some((k) => k.startsWith("_"))), `${what}: no position columns on the wire`);
          url = r.body.NEXTPAGEURL;
          if (url) t.match(url, /\?query=[^/]+$/, "the next request is the text after the last /");
        }
        t.ok(totals, `${what}${filtered ? " (filtered)" : ""}: TOTAL, CURRENTPAGE and PREVPAGEURL on every page`);
        t.equal(page, Math.ceil(expected.length / 17), `${what}${filtered ? " (filtered)" : ""}: ${page} pages`);
        t.same(seen, expected, `${what}${filtered ? " (filtered)" : ""} via ${base.slice(0, 16)}: every row once, in the order of the whole result`);
      }
    }
  }
  // the page numbers alone (clients that build PAGENUM themselves) give the same pages
  const byNumber: string[] = [];
  for (let p = 1; p <= 11; p++) byNumber.push(...(await s.dev.get(`/api/v/1/data/${id}?query=${qs({ SORT: [{ DESC: "n" }], PAGESIZE: 17, PAGENUM: p })}`)).body.DATA.map((x: any) => x.n));
  t.same(byNumber, Array.from({ length: 173 }, (_, i) => 172 - i), "PAGENUM paging");
});

t.test("NEXTPAGEURL continues after the row it ended with while rows come and go; TOTAL follows writes", async (t) => {
  const { id } = await collectionWith(s, [["n", "int"]]);
  ok200(t, await s.dev.post(`/api/v/1/data/${id}`, Array.from({ length: 30 }, (_, i) => ({ n: 100 + i * 10 }))));
  const first = await s.dev.get(`/api/v/1/data/${id}?query=${qs({ SORT: [{ ASC: "n" }], PAGESIZE: 10 })}`);
  t.same(first.body.DATA.map((r: any) => r.n), [100, 110, 120, 130, 140, 150, 160, 170, 180, 190]);
  t.equal(first.body.TOTAL, 30);
  // rows sorting before the page's end appear, one of the page goes
  ok200(t, await s.dev.post(`/api/v/1/data/${id}`, [{ n: 1 }, { n: 2 }, { n: 3 }]));
  ok200(t, await s.dev.del(`/api/v/1/data/${id}?query=${qs([[{ EQ: [{ n: 150 }] }]])}`));
  const second = await s.dev.get(first.body.NEXTPAGEURL);
  t.same(second.body.DATA.map((r: any) => r.n), [200, 210, 220, 230, 240, 250, 260, 270, 280, 290], "the next page starts right after 190: nothing repeated, nothing skipped");
  t.equal(second.body.TOTAL, 32, "TOTAL counts the rows written since");
  t.equal(second.body.CURRENTPAGE, 2);
  const third = await s.dev.get(second.body.NEXTPAGEURL);
  t.same(third.body.DATA.map((r: any) => r.n), [300, 310, 320, 330, 340, 350, 360, 370, 380, 390]);
  t.equal(third.body.NEXTPAGEURL, null, "the last page has no NEXTPAGEURL");
  ok200(t, await s.dev.post(`/api/v/1/data/${id}`, [{ n: 400 }]));
  const again = await s.dev.get(second.body.NEXTPAGEURL);
  t.type(again.body.NEXTPAGEURL, "string", "a row added at the end makes a next page");
  t.same((await s.dev.get(again.body.NEXTPAGEURL)).body.DATA.map((r: any) => r.n), [400]);

  // PAGEAFTER is checked like the rest of the query
  const bad: [string, unknown][] = [
    ["a value too many", { SORT: [{ ASC: "n" }], PAGESIZE: 10, PAGEAFTER: [1, 2, 3] }],
    ["no row number", { SORT: [{ ASC: "n" }], PAGESIZE: 10, PAGEAFTER: [1, "x"] }],
    ["an object for a value", { SORT: [{ ASC: "n" }], PAGESIZE: 10, PAGEAFTER: [{ a: 1 }, 5] }],
    ["not an array", { PAGESIZE: 10, PAGEAFTER: 5 }],
    ["without paging", { PAGESIZE: 0, PAGENUM: 0, PAGEAFTER: [5] }],
  ];
  for (const [what, query] of bad) isErr(t, await s.dev.get(`/api/v/1/data/${id}?query=${qs(query)}`), 400, `PAGEAFTER with ${what}`);
  isErr(t, await s.dev.get(`/api/v/2/devices/${s.systemKey}?query=${qs({ PAGESIZE: 10, PAGEAFTER: [5] })}`), 400, "PAGEAFTER where listings do not continue");
});
