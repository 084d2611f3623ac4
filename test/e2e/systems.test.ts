// System management: /admin/systemmanagement and
// /admin/v/4/systemmanagement (GET/POST/PUT/DELETE), /admin/allapps, /admin/allsystems,
// /admin/regensystemsecret, token lifetime, ownership and header spellings.
import t, { type Test } from "tap";
import { Client, type HttpResponse, type Outpost, isEnvelope, request, startOutpost, uniq, sleep } from "./harness.ts";

// error codes of src/core/errors.ts
const E = {
  BAD_JSON: 106, INVALID_ARGUMENT: 111, NOT_AUTHORIZED_FOR_SYSTEM: 201, AUTH_REQUIRED: 202,
  INVALID_TOKEN: 204, DEVELOPER_ONLY: 205, INVALID_SECRET: 209, SYSTEM_NOT_FOUND: 210,
} as const;

const BASES = ["/admin/systemmanagement", "/admin/v/4/systemmanagement"] as const;

let o: Outpost;
let anon: Client;

t.before(async () => {
  o = await startOutpost();
  anon = new Client(o.url);
});
t.teardown(() => o?.stop());

type T = Test;

function isError(t: T, r: HttpResponse, status: number, code: number, detail?: RegExp, what = "") {
  const p = what ? `${what}: ` : "";
  t.equal(r.status, status, `${p}status ${status}`);
  t.ok(isEnvelope(r.body, status), `${p}error envelope`);
  t.equal(r.body?.error?.code, code, `${p}error code ${code}`);
  if (detail) t.match(r.body?.error?.detail, detail, `${p}detail names the problem`);
}

/** The fields Go's DevClient type-asserts on a system. */
function isSystem(t: T, b: any, what: string) {
  t.type(b?.appID, "string", `${what}: appID is a string`);
  t.match(b?.appID, /^[0-9a-f]{28,30}$/, `${what}: appID is lowercase hex`);
  t.type(b?.appSecret, "string", `${what}: appSecret is a string`);
  t.match(b?.appSecret, /^[0-9A-F]{30}$/, `${what}: appSecret is 30 uppercase hex`);
  t.type(b?.name, "string", `${what}: name is a string`);
  t.type(b?.description, "string", `${what}: description is a string`);
  t.type(b?.token_ttl, "number", `${what}: token_ttl is a JSON number`);
  t.ok(Number.isInteger(b?.token_ttl) && (b.token_ttl > 0 || b.token_ttl === -1), `${what}: token_ttl is positive seconds or -1`);
}

interface Dev { email: string; token: string; id: string; client: Client }

async function register(): Promise<Dev> {
  const email = `${uniq("sdev")}@example.com`;
  const r = await anon.post("/admin/reg", { email, password: "pw-systems" });
  if (r.status !== 200) throw new Error(`register failed: ${r.text}`);
  return { email, token: r.body.dev_token, id: r.body.user_id, client: new Client(o.url, { "ClearBlade-DevToken": r.body.dev_token }) };
}

async function createSystem(dev: Dev, body: Record<string, unknown> = {}, base: string = BASES[0]) {
  const r = await dev.client.post(base, { name: uniq("sys"), description: "a system", ...body });
  if (r.status !== 200) throw new Error(`create failed: ${r.status} ${r.text}`);
  return r.body as { appID: string; appSecret: string; name: string; description: string; token_ttl: number };
}

/** key + secret headers (no token), as anonymous/auth calls send them */
const appClient = (key: string, secret: string) => new Client(o.url, { "ClearBlade-SystemKey": key, "ClearBlade-SystemSecret": secret });

async function userOf(key: string, secret: string) {
  const email = `${uniq("u")}@example.com`;
  const r = await appClient(key, secret).post("/api/v/1/user/reg", { email, password: "user-pw" });
  if (r.status !== 200) throw new Error(`user reg failed: ${r.status} ${r.text}`);
  return { token: r.body.user_token as string, client: new Client(o.url, { "ClearBlade-UserToken": r.body.user_token }) };
}

let devA: Dev, devB: Dev;
t.before(async () => {
  devA = await register();
  devB = await register();
});

// ---- POST / GET ---------------------------------------------------------------------------------

t.test("POST then GET systemmanagement (both path versions) returns the system settings", async (t) => {
  for (const base of BASES) {
    const name = uniq("Plant ");
    const r = await devA.client.post(base, { name, description: "Boilers and pumps" });
    t.equal(r.status, 200, `${base}: created`);
    isSystem(t, r.body, `${base} create`);
    t.equal(r.body.name, name);
    t.equal(r.body.description, "Boilers and pumps");

    for (const getBase of BASES) {
      const g = await devA.client.get(`${getBase}?id=${r.body.appID}`);
      t.equal(g.status, 200, `${base} -> ${getBase}: readable`);
      isSystem(t, g.body, `${getBase} get`);
      t.equal(g.body.appID, r.body.appID);
      t.equal(g.body.appSecret, r.body.appSecret);
      t.equal(g.body.name, name);
      t.equal(g.body.description, "Boilers and pumps");
      t.equal(g.body.token_ttl, r.body.token_ttl);
    }
    // the secret from the create response is a working secret
    const a = await appClient(r.body.appID, r.body.appSecret).post("/api/v/1/user/anon");
    t.equal(a.status, 200, `${base}: key + secret from the create response work`);
    t.type(a.body.user_token, "string");
  }
});

t.test("systems get distinct keys and secrets; description is optional; token_ttl is settable", async (t) => {
  const s1 = await createSystem(devA);
  const s2 = await createSystem(devA);
  t.not(s1.appID, s2.appID, "distinct keys");
  t.not(s1.appSecret, s2.appSecret, "distinct secrets");
  isError(t, await appClient(s1.appID, s2.appSecret).post("/api/v/1/user/anon"), 401, E.INVALID_SECRET, undefined, "one system's secret does not open another");

  const noDesc = await devA.client.post(BASES[0], { name: "bare" });
  t.equal(noDesc.status, 200, "description may be omitted");
  t.equal(noDesc.body.description, "", "description defaults to empty");

  const ttl = await devA.client.post(BASES[1], { name: "ttl", token_ttl: 3600 });
  t.equal(ttl.status, 200);
  t.equal(ttl.body.token_ttl, 3600, "token_ttl as given");
  t.equal((await devA.client.get(`${BASES[0]}?id=${ttl.body.appID}`)).body.token_ttl, 3600, "token_ttl stored");

  const never = await devA.client.post(BASES[0], { name: "never", token_ttl: -1 });
  t.equal(never.status, 200, "-1 means never expires");
  t.equal(never.body.token_ttl, -1);

  const go = await devA.client.post(BASES[0], { name: "go-client", description: "d", auth_required: true });
  t.equal(go.status, 200, "Go clients' auth_required flag is accepted");
});

t.test("POST systemmanagement validates its body", async (t) => {
  const before = (await devA.client.get("/admin/allsystems")).body.length;
  const cases: [string, unknown, RegExp | undefined, number][] = [
    ["missing name", { description: "d" }, /name/, E.INVALID_ARGUMENT],
    ["empty name", { name: "" }, /name/, E.INVALID_ARGUMENT],
    ["blank name", { name: "   " }, /name/, E.INVALID_ARGUMENT],
    ["name of wrong type", { name: 5 }, /name/, E.INVALID_ARGUMENT],
    ["description of wrong type", { name: "n", description: ["x"] }, /description/, E.INVALID_ARGUMENT],
    ["token_ttl as a string", { name: "n", token_ttl: "60" }, /token_ttl/, E.INVALID_ARGUMENT],
    ["token_ttl zero", { name: "n", token_ttl: 0 }, /token_ttl/, E.INVALID_ARGUMENT],
    ["token_ttl negative", { name: "n", token_ttl: -5 }, /token_ttl/, E.INVALID_ARGUMENT],
    ["token_ttl fractional", { name: "n", token_ttl: 1.5 }, /token_ttl/, E.INVALID_ARGUMENT],
    ["unknown field", { name: "n", colour: "red" }, /colour/, E.INVALID_ARGUMENT],
    ["array body", [{ name: "n" }], undefined, E.INVALID_ARGUMENT],
    ["no body", undefined, /name/, E.INVALID_ARGUMENT],
  ];
  for (const base of BASES) {
    for (const [what, body, field, code] of cases) {
      isError(t, await devA.client.post(base, body), 400, code, field, `${base} ${what}`);
    }
    isError(t, await devA.client.post(base, "{\"name\": \"x\""), 400, E.BAD_JSON, undefined, `${base} malformed JSON`);
    isError(t, await devA.client.post(base, "{\"name\": \"x\"}}", { "Content-Type": "application/json" }), 400, E.BAD_JSON, undefined, `${base} malformed JSON with Content-Type`);
  }
  t.equal((await devA.client.get("/admin/allsystems")).body.length, before, "no system was created by a rejected request");
});

t.test("POST systemmanagement needs a developer token", async (t) => {
  const s = await createSystem(devA);
  const u = await userOf(s.appID, s.appSecret);
  for (const base of BASES) {
    isError(t, await anon.post(base, { name: "x" }), 401, E.AUTH_REQUIRED, undefined, `${base} no token`);
    isError(t, await new Client(o.url, { "ClearBlade-DevToken": "garbage" }).post(base, { name: "x" }), 400, E.INVALID_TOKEN, undefined, `${base} bad token`);
    isError(t, await u.client.post(base, { name: "x" }), 401, E.DEVELOPER_ONLY, undefined, `${base} user token`);
  }
});

t.test("GET systemmanagement: missing id 400, unknown id 404", async (t) => {
  for (const base of BASES) {
    isError(t, await devA.client.get(base), 400, E.INVALID_ARGUMENT, undefined, `${base} without id`);
    isError(t, await devA.client.get(`${base}?id=`), 400, E.INVALID_ARGUMENT, undefined, `${base} empty id`);
    isError(t, await devA.client.get(`${base}?id=0123456789abcdef0123456789abcd`), 404, E.SYSTEM_NOT_FOUND, undefined, `${base} unknown id`);
  }
});

t.test("GET and DELETE tolerate a JSON body (Node/JS clients send {} on every call)", async (t) => {
  const s = await createSystem(devA, { name: "with-body" });
  for (const base of BASES) {
    const g = await devA.client.req("GET", `${base}?id=${s.appID}`, {});
    t.equal(g.status, 200, `${base}: GET with {} body`);
    t.equal(g.body.appID, s.appID);
  }
  t.equal((await devA.client.req("GET", "/admin/allsystems", {})).status, 200, "allsystems with {} body");
  const d = await devA.client.del(`${BASES[1]}?id=${s.appID}`, {});
  t.equal(d.status, 200, "DELETE with {} body");
  isError(t, await devA.client.get(`${BASES[0]}?id=${s.appID}`), 404, E.SYSTEM_NOT_FOUND, undefined, "really deleted");
});

t.test("concurrent creates yield distinct systems, all listed", async (t) => {
  const dev = await register();
  const rs = await Promise.all(Array.from({ length: 8 }, (_, i) => dev.client.post(BASES[i % 2]!, { name: `par-${i}` })));
  t.ok(rs.every((r) => r.status === 200), "all created");
  const keys = new Set(rs.map((r) => r.body.appID));
  t.equal(keys.size, 8, "distinct keys");
  const list = (await dev.client.get("/admin/allsystems")).body;
  t.equal(list.length, 8, "all listed");
  t.same(new Set(list.map((x: any) => x.appID)), keys);
});

// ---- PUT --------------------------------------------------------------------------------------

t.test("PUT systemmanagement updates name, description and token_ttl", async (t) => {
  for (const base of BASES) {
    const s = await createSystem(devA, { name: "orig", description: "orig desc" });
    const r1 = await devA.client.put(base, { id: s.appID, name: "renamed" });
    t.equal(r1.status, 200, `${base}: name`);
    t.equal(r1.body.name, "renamed");
    t.equal(r1.body.description, "orig desc", "description untouched");
    const r2 = await devA.client.put(base, { id: s.appID, description: "new desc" });
    t.equal(r2.status, 200, `${base}: description`);
    const r3 = await devA.client.put(base, { id: s.appID, token_ttl: 120 });
    t.equal(r3.status, 200, `${base}: token_ttl`);
    t.equal(r3.body.token_ttl, 120);
    const g = await devA.client.get(`${BASES[0]}?id=${s.appID}`);
    isSystem(t, g.body, `${base} after update`);
    t.equal(g.body.name, "renamed");
    t.equal(g.body.description, "new desc");
    t.equal(g.body.token_ttl, 120);
    t.equal(g.body.appID, s.appID, "key unchanged");
    t.equal(g.body.appSecret, s.appSecret, "secret unchanged");
    const listed = (await devA.client.get("/admin/allsystems")).body.find((x: any) => x.appID === s.appID);
    t.equal(listed?.name, "renamed", "listing shows the update");
  }
});

t.test("PUT systemmanagement rejects bad bodies and unknown systems", async (t) => {
  const s = await createSystem(devA, { name: "keep", description: "keep desc", token_ttl: 500 });
  for (const base of BASES) {
    isError(t, await devA.client.put(base, { name: "x" }), 400, E.INVALID_ARGUMENT, /id/, `${base} missing id`);
    isError(t, await devA.client.put(base, { id: s.appID, name: "" }), 400, E.INVALID_ARGUMENT, /name/, `${base} empty name`);
    isError(t, await devA.client.put(base, { id: s.appID, name: 7 }), 400, E.INVALID_ARGUMENT, /name/, `${base} name of wrong type`);
    isError(t, await devA.client.put(base, { id: s.appID, token_ttl: "x" }), 400, E.INVALID_ARGUMENT, /token_ttl/, `${base} token_ttl of wrong type`);
    isError(t, await devA.client.put(base, { id: s.appID, token_ttl: 0 }), 400, E.INVALID_ARGUMENT, /token_ttl/, `${base} token_ttl zero`);
    isError(t, await devA.client.put(base, { id: s.appID, appSecret: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }), 400, E.INVALID_ARGUMENT, /appSecret/, `${base} secret cannot be set`);
    isError(t, await devA.client.put(base, { id: s.appID, owner: devB.id }), 400, E.INVALID_ARGUMENT, /owner/, `${base} unknown field`);
    isError(t, await devA.client.put(base, "{\"id\":"), 400, E.BAD_JSON, undefined, `${base} malformed JSON`);
    isError(t, await devA.client.put(base, { id: "0123456789abcdef0123456789abcd", name: "x" }), 404, E.SYSTEM_NOT_FOUND, undefined, `${base} unknown id`);
  }
  const g = await devA.client.get(`${BASES[0]}?id=${s.appID}`);
  t.equal(g.body.name, "keep");
  t.equal(g.body.description, "keep desc");
  t.equal(g.body.token_ttl, 500);
  t.equal(g.body.appSecret, s.appSecret);
});

// ---- DELETE -----------------------------------------------------------------------------------

t.test("DELETE systemmanagement removes the system and invalidates its tokens and secret", async (t) => {
  for (const base of BASES) {
    const s = await createSystem(devA);
    const keep = await createSystem(devA);
    const u = await userOf(s.appID, s.appSecret);
    const anonTok = (await appClient(s.appID, s.appSecret).post("/api/v/1/user/anon")).body.user_token as string;
    const keepUser = await userOf(keep.appID, keep.appSecret);
    t.equal((await u.client.post("/api/v/1/user/checkauth")).status, 200, `${base}: user token valid before`);

    const d = await devA.client.del(`${base}?id=${s.appID}`);
    t.equal(d.status, 200, `${base}: deleted`);
    t.type(d.body, "object", "a JSON body");

    isError(t, await devA.client.get(`${BASES[0]}?id=${s.appID}`), 404, E.SYSTEM_NOT_FOUND, undefined, `${base}: GET after delete`);
    isError(t, await devA.client.get(`${BASES[1]}?id=${s.appID}`), 404, E.SYSTEM_NOT_FOUND, undefined, `${base}: GET v4 after delete`);
    const list = (await devA.client.get("/admin/allsystems")).body.map((x: any) => x.appID);
    t.notOk(list.includes(s.appID), `${base}: gone from allsystems`);
    t.ok(list.includes(keep.appID), `${base}: other systems stay`);
    isError(t, await u.client.post("/api/v/1/user/checkauth"), 400, E.INVALID_TOKEN, undefined, `${base}: user token of the deleted system`);
    isError(t, await u.client.get("/api/v/1/user/info"), 400, E.INVALID_TOKEN, undefined, `${base}: user info with that token`);
    isError(t, await new Client(o.url, { "ClearBlade-UserToken": anonTok }).post("/api/v/1/user/checkauth"), 400, E.INVALID_TOKEN, undefined, `${base}: anonymous token of the deleted system`);
    isError(t, await appClient(s.appID, s.appSecret).post("/api/v/1/user/anon"), 401, E.INVALID_SECRET, undefined, `${base}: key + secret no longer work`);
    t.equal((await keepUser.client.post("/api/v/1/user/checkauth")).status, 200, `${base}: tokens of other systems stay valid`);

    isError(t, await devA.client.del(`${base}?id=${s.appID}`), 404, E.SYSTEM_NOT_FOUND, undefined, `${base}: second delete`);
    isError(t, await devA.client.del(base), 400, E.INVALID_ARGUMENT, undefined, `${base}: without id`);
    isError(t, await devA.client.del(`${base}?id=0123456789abcdef0123456789abcd`), 404, E.SYSTEM_NOT_FOUND, undefined, `${base}: unknown id`);
  }
});

// ---- listing ----------------------------------------------------------------------------------

t.test("GET /admin/allapps and /admin/allsystems list exactly the caller's systems", async (t) => {
  const fresh = await register();
  for (const path of ["/admin/allapps", "/admin/allsystems"]) {
    const empty = await fresh.client.get(path);
    t.equal(empty.status, 200, `${path}: a developer without systems`);
    t.same(empty.body, [], `${path}: empty array`);
  }
  const mine = [await createSystem(fresh, { name: "one", description: "first" }), await createSystem(fresh, { name: "two", description: "second" }, BASES[1])];
  const theirs = await createSystem(devB);
  for (const path of ["/admin/allapps", "/admin/allsystems"]) {
    const r = await fresh.client.get(path);
    t.equal(r.status, 200, path);
    t.ok(Array.isArray(r.body), `${path}: an array`);
    t.equal(r.body.length, 2, `${path}: only the caller's two systems`);
    for (const s of mine) {
      const e = r.body.find((x: any) => x.appID === s.appID);
      t.ok(e, `${path}: lists ${s.name}`);
      isSystem(t, e, `${path} entry`);
      t.equal(e?.name, s.name);
      t.equal(e?.description, s.description);
      t.equal(e?.appSecret, s.appSecret);
    }
    t.notOk(r.body.some((x: any) => x.appID === theirs.appID), `${path}: another developer's system is not listed`);
    const b = await devB.client.get(path);
    t.notOk(b.body.some((x: any) => mine.some((s) => s.appID === x.appID)), `${path}: the other developer does not see them either`);
    t.ok(b.body.some((x: any) => x.appID === theirs.appID), `${path}: but sees their own`);
  }
  const s = mine[0]!;
  const u = await userOf(s.appID, s.appSecret);
  for (const path of ["/admin/allapps", "/admin/allsystems"]) {
    isError(t, await anon.get(path), 401, E.AUTH_REQUIRED, undefined, `${path}: no token`);
    isError(t, await new Client(o.url, { "ClearBlade-DevToken": "nope" }).get(path), 400, E.INVALID_TOKEN, undefined, `${path}: bad token`);
    isError(t, await u.client.get(path), 401, E.DEVELOPER_ONLY, undefined, `${path}: user token`);
  }
});

// ---- regensystemsecret ------------------------------------------------------------------------

t.test("PUT /admin/regensystemsecret issues a new secret and retires the old one", async (t) => {
  const s = await createSystem(devA);
  const oldApp = appClient(s.appID, s.appSecret);
  t.equal((await oldApp.post("/api/v/1/user/anon")).status, 200, "old secret works before");

  const r = await devA.client.put("/admin/regensystemsecret", { id: s.appID });
  t.equal(r.status, 200);
  t.equal(r.body.appID, s.appID, "same system");
  t.match(r.body.appSecret, /^[0-9A-F]{30}$/, "new secret is 30 uppercase hex");
  t.not(r.body.appSecret, s.appSecret, "new secret differs");
  const newSecret = r.body.appSecret as string;

  isError(t, await oldApp.post("/api/v/1/user/anon"), 401, E.INVALID_SECRET, undefined, "old secret rejected for anon");
  isError(t, await oldApp.post("/api/v/1/user/reg", { email: `${uniq("x")}@example.com`, password: "p" }), 401, E.INVALID_SECRET, undefined, "old secret rejected for reg");
  const n = await appClient(s.appID, newSecret).post("/api/v/1/user/anon");
  t.equal(n.status, 200, "new secret works");
  t.type(n.body.user_token, "string");
  t.equal((await devA.client.get(`${BASES[0]}?id=${s.appID}`)).body.appSecret, newSecret, "GET shows the new secret");
  t.equal((await devA.client.get("/admin/allsystems")).body.find((x: any) => x.appID === s.appID)?.appSecret, newSecret, "listing shows the new secret");

  const r2 = await devA.client.put("/admin/regensystemsecret", { id: s.appID });
  t.equal(r2.status, 200, "can regenerate again");
  t.not(r2.body.appSecret, newSecret, "another new secret");
  isError(t, await appClient(s.appID, newSecret).post("/api/v/1/user/anon"), 401, E.INVALID_SECRET, undefined, "previous secret rejected");
  t.equal((await appClient(s.appID, r2.body.appSecret).post("/api/v/1/user/anon")).status, 200, "latest secret works");
});

t.test("PUT /admin/regensystemsecret rejects bad requests", async (t) => {
  const s = await createSystem(devA);
  const u = await userOf(s.appID, s.appSecret);
  isError(t, await devA.client.put("/admin/regensystemsecret", {}), 400, E.INVALID_ARGUMENT, /id/, "missing id");
  isError(t, await devA.client.put("/admin/regensystemsecret"), 400, E.INVALID_ARGUMENT, /id/, "no body");
  isError(t, await devA.client.put("/admin/regensystemsecret", { id: 5 }), 400, E.INVALID_ARGUMENT, /id/, "id of wrong type");
  isError(t, await devA.client.put("/admin/regensystemsecret", { id: s.appID, secret: "X" }), 400, E.INVALID_ARGUMENT, /secret/, "unknown field");
  isError(t, await devA.client.put("/admin/regensystemsecret", "{\"id\""), 400, E.BAD_JSON, undefined, "malformed JSON");
  isError(t, await devA.client.put("/admin/regensystemsecret", { id: "0123456789abcdef0123456789abcd" }), 404, E.SYSTEM_NOT_FOUND, undefined, "unknown system");
  isError(t, await anon.put("/admin/regensystemsecret", { id: s.appID }), 401, E.AUTH_REQUIRED, undefined, "no token");
  isError(t, await u.client.put("/admin/regensystemsecret", { id: s.appID }), 401, E.DEVELOPER_ONLY, undefined, "user token of that system");
  t.equal((await appClient(s.appID, s.appSecret).post("/api/v/1/user/anon")).status, 200, "secret unchanged by the refused requests");
});

// ---- ownership --------------------------------------------------------------------------------

t.test("another developer cannot read, change, delete or re-key someone else's system", async (t) => {
  const s = await createSystem(devA, { name: "private", description: "mine" });
  for (const base of BASES) {
    const g = await devB.client.get(`${base}?id=${s.appID}`);
    isError(t, g, 401, E.NOT_AUTHORIZED_FOR_SYSTEM, undefined, `${base} GET`);
    t.notMatch(g.text, s.appSecret, `${base} GET: secret not leaked`);
    isError(t, await devB.client.put(base, { id: s.appID, name: "hijacked" }), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, undefined, `${base} PUT`);
    isError(t, await devB.client.del(`${base}?id=${s.appID}`), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, undefined, `${base} DELETE`);
  }
  const rg = await devB.client.put("/admin/regensystemsecret", { id: s.appID });
  isError(t, rg, 401, E.NOT_AUTHORIZED_FOR_SYSTEM, undefined, "regensystemsecret");
  t.notMatch(rg.text, s.appSecret, "regen refusal does not leak the secret");
  for (const path of ["/admin/allsystems", "/admin/allapps"]) {
    t.notOk((await devB.client.get(path)).body.some((x: any) => x.appID === s.appID), `${path}: not listed for the other developer`);
  }
  const g = await devA.client.get(`${BASES[0]}?id=${s.appID}`);
  t.equal(g.status, 200, "owner still has it");
  t.equal(g.body.name, "private", "name unchanged");
  t.equal(g.body.appSecret, s.appSecret, "secret unchanged");
  t.equal((await appClient(s.appID, s.appSecret).post("/api/v/1/user/anon")).status, 200, "old secret still valid");
});

t.test("user tokens are refused on the developer-only system routes", async (t) => {
  const s = await createSystem(devA);
  const u = await userOf(s.appID, s.appSecret);
  const anonTok = (await appClient(s.appID, s.appSecret).post("/api/v/1/user/anon")).body.user_token as string;
  for (const [label, c] of [["user", u.client], ["anonymous", new Client(o.url, { "ClearBlade-UserToken": anonTok })], ["user in dev header", new Client(o.url, { "ClearBlade-DevToken": u.token })]] as [string, Client][]) {
    for (const base of BASES) {
      isError(t, await c.get(`${base}?id=${s.appID}`), 401, E.DEVELOPER_ONLY, undefined, `${label} ${base} GET`);
      isError(t, await c.put(base, { id: s.appID, name: "by user" }), 401, E.DEVELOPER_ONLY, undefined, `${label} ${base} PUT`);
      isError(t, await c.del(`${base}?id=${s.appID}`), 401, E.DEVELOPER_ONLY, undefined, `${label} ${base} DELETE`);
    }
  }
  const g = await devA.client.get(`${BASES[0]}?id=${s.appID}`);
  t.equal(g.status, 200, "system still there");
  t.not(g.body.name, "by user", "not renamed");
  for (const base of BASES) {
    isError(t, await anon.get(`${base}?id=${s.appID}`), 401, E.AUTH_REQUIRED, undefined, `no token ${base} GET`);
    isError(t, await anon.put(base, { id: s.appID, name: "x" }), 401, E.AUTH_REQUIRED, undefined, `no token ${base} PUT`);
    isError(t, await anon.del(`${base}?id=${s.appID}`), 401, E.AUTH_REQUIRED, undefined, `no token ${base} DELETE`);
  }
});

// ---- token lifetime ---------------------------------------------------------------------------


t.test("token_ttl bounds the lifetime of user tokens", async (t) => {
  const short = await createSystem(devA, { token_ttl: 1 });
  t.equal(short.token_ttl, 1);
  const changed = await createSystem(devA);
  t.equal((await devA.client.put(BASES[1], { id: changed.appID, token_ttl: 1 })).status, 200);
  const long = await createSystem(devA);
  const never = await createSystem(devA, { token_ttl: -1 });

  const uLong = await userOf(long.appID, long.appSecret);
  const neverReg = await appClient(never.appID, never.appSecret).post("/api/v/1/user/reg", { email: `${uniq("nv")}@example.com`, password: "p" });
  t.equal(neverReg.body.expires_at, -1, "token_ttl -1: expires_at -1 (never)");
  const uNever = new Client(o.url, { "ClearBlade-UserToken": neverReg.body.user_token });

  // Issue the short-lived tokens about 600 ms into a wall-clock second, then use them just after
  // the next second boundary: well inside their 1 s lifetime, whatever whole-second rounding the
  // server does internally.
  await sleep((1600 - (Date.now() % 1000)) % 1000);
  const t0 = Date.now();
  const [uShort, uChanged] = await Promise.all([userOf(short.appID, short.appSecret), userOf(changed.appID, changed.appSecret)]);
  const issuedBy = Date.now();
  await sleep(Math.max(0, Math.ceil(t0 / 1000) * 1000 + 80 - Date.now()));
  const early = await Promise.all([uShort.client.post("/api/v/1/user/checkauth"), uChanged.client.post("/api/v/1/user/checkauth")]);
  const age = Date.now() - t0;
  if (age < 800) {
    t.equal(early[0].status, 200, `token_ttl 1 (at creation): still valid ${age} ms after issue`);
    t.equal(early[1].status, 200, `token_ttl 1 (set by PUT): still valid ${age} ms after issue`);
  } else t.comment(`machine too slow (${age} ms) to check the early part of a 1 s lifetime`);

  await sleep(Math.max(0, issuedBy + 2200 - Date.now()));
  isError(t, await uShort.client.post("/api/v/1/user/checkauth"), 400, E.INVALID_TOKEN, undefined, "expired (token_ttl at creation)");
  isError(t, await uShort.client.get("/api/v/1/user/info"), 400, E.INVALID_TOKEN, undefined, "expired token on user info");
  isError(t, await uChanged.client.post("/api/v/1/user/checkauth"), 400, E.INVALID_TOKEN, undefined, "expired (token_ttl set by PUT)");
  t.equal((await uLong.client.post("/api/v/1/user/checkauth")).status, 200, "default lifetime: still valid");
  t.equal((await uNever.post("/api/v/1/user/checkauth")).status, 200, "token_ttl -1: still valid");
  t.equal((await devA.client.post("/admin/checkauth")).status, 200, "developer token unaffected");

  const reg = await appClient(short.appID, short.appSecret).post("/api/v/1/user/reg", { email: `${uniq("ttl")}@example.com`, password: "p" });
  t.type(reg.body.expires_at, "number", "expires_at is a number");
  const now = Date.now() / 1000;
  t.ok(reg.body.expires_at >= now - 1 && reg.body.expires_at <= now + 2, "expires_at is about one second from now");
});

// ---- header spellings -------------------------------------------------------------------------

t.test("header spellings: Platform-* and ClearBlade-* names in any letter case", async (t) => {
  const s = await createSystem(devA, { name: "headers" });
  for (const h of ["Platform-DevToken", "ClearBlade-DevToken", "platform-devtoken", "clearblade-devtoken", "PLATFORM-DEVTOKEN", "CLEARBLADE-DEVTOKEN", "Clearblade-Devtoken"]) {
    const c = new Client(o.url, { [h]: devA.token });
    const g = await c.get(`${BASES[1]}?id=${s.appID}`);
    t.equal(g.status, 200, `${h}: GET`);
    t.equal(g.body.name, "headers", `${h}: right system`);
    t.ok((await c.get("/admin/allsystems")).body.some((x: any) => x.appID === s.appID), `${h}: allsystems`);
    const made = await c.post(BASES[0], { name: `via ${h}` });
    t.equal(made.status, 200, `${h}: create`);
    t.ok((await devA.client.get("/admin/allsystems")).body.some((x: any) => x.appID === made.body.appID), `${h}: created for the right developer`);
  }
  for (const [k, sec] of [["ClearBlade-SystemKey", "ClearBlade-SystemSecret"], ["Platform-SystemKey", "Platform-SystemSecret"], ["clearblade-systemkey", "clearblade-systemsecret"], ["PLATFORM-SYSTEMKEY", "PLATFORM-SYSTEMSECRET"], ["Clearblade-Systemkey", "Clearblade-Systemsecret"]]) {
    const r = await request(o.url, "POST", "/api/v/1/user/anon", { headers: { [k!]: s.appID, [sec!]: s.appSecret } });
    t.equal(r.status, 200, `${k} / ${sec}: anon login`);
    t.type(r.body.user_token, "string");
  }
});

// ---- SQL text is data -------------------------------------------------------------------------

t.test("SQL text in system names, descriptions and ids is stored verbatim and harmless", async (t) => {
  const name = "x'); DROP TABLE systems;--";
  const description = "'; DELETE FROM systems WHERE '1'='1'; --\" OR 1=1 /* ünïcødé ✓ */";
  const before = await createSystem(devA, { name: "canary" });
  const s = await createSystem(devA, { name, description });
  t.equal(s.name, name, "name echoed verbatim");
  t.equal(s.description, description, "description echoed verbatim");
  const g = await devA.client.get(`${BASES[0]}?id=${encodeURIComponent(s.appID)}`);
  t.equal(g.body.name, name, "name stored verbatim");
  t.equal(g.body.description, description, "description stored verbatim");
  const list = (await devA.client.get("/admin/allsystems")).body;
  t.ok(list.some((x: any) => x.appID === before.appID), "other systems survived");
  t.ok(list.some((x: any) => x.name === name), "listed with its name");

  const upd = await devA.client.put(BASES[1], { id: s.appID, name: "'; UPDATE systems SET owner_id = 'x'; --" });
  t.equal(upd.status, 200);
  t.equal((await devA.client.get(`${BASES[0]}?id=${s.appID}`)).body.name, "'; UPDATE systems SET owner_id = 'x'; --", "updated name verbatim");
  t.equal((await devA.client.get(`${BASES[0]}?id=${before.appID}`)).status, 200, "owner of other systems unchanged");

  for (const id of ["' OR '1'='1", `${before.appID}' OR '1'='1`, "1; DROP TABLE systems"]) {
    const q = `?id=${encodeURIComponent(id)}`;
    isError(t, await devB.client.get(`${BASES[0]}${q}`), 404, E.SYSTEM_NOT_FOUND, undefined, `GET id ${id}`);
    isError(t, await devB.client.del(`${BASES[0]}${q}`), 404, E.SYSTEM_NOT_FOUND, undefined, `DELETE id ${id}`);
    isError(t, await devB.client.put("/admin/regensystemsecret", { id }), 404, E.SYSTEM_NOT_FOUND, undefined, `regen id ${id}`);
  }
  const after = await devA.client.get(`${BASES[0]}?id=${before.appID}`);
  t.equal(after.status, 200, "canary system still exists");
  t.equal(after.body.appSecret, before.appSecret, "canary secret unchanged");
});
