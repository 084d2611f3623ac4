// A client polling the same query is answered from caches without waiting (the token, the
// collection, the caller's rights and the query's result). Each answer must still be the one the
// full path would give: after a write, a revoked right, a logout, a dropped collection, and for a
// token of another system. Over real HTTP, on both addressings of a collection.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, start } from "../../../src/app.ts";
import { loadConfig } from "../../../src/config.ts";

let app: App;
let base = "";
let dev: Record<string, string>;
let systemKey = "", collectionID = "", roleId = "", userToken = "";

async function call(method: string, path: string, payload?: unknown, headers: Record<string, string> = {}) {
  const r = await fetch(base + path, { method, headers: { ...headers, ...(payload === undefined ? {} : { "content-type": "application/json" }) }, body: payload === undefined ? undefined : JSON.stringify(payload) });
  const text = await r.text();
  const body = text ? JSON.parse(text) : null;
  if (body?.error?.id) body.error.id = "(per request)";
  return { status: r.status, body };
}

const query = encodeURIComponent(JSON.stringify({ FILTERS: [[{ EQ: [{ sensor: "s-1" }] }]] }));
const paths = () => [`/api/v/1/collection/${systemKey}/readings?query=${query}`, `/api/v/1/data/${collectionID}?query=${query}`];
/** Polls both addressings three times; every answer must be the same. */
async function poll(token: string) {
  const answers = [];
  for (let i = 0; i < 3; i++) for (const p of paths()) answers.push(await call("GET", p, undefined, { "ClearBlade-UserToken": token }));
  for (const a of answers) expect(a).toEqual(answers[0]!);
  return answers[0]!;
}

async function newUser(email: string, sk = systemKey) {
  const sys = await call("GET", `/admin/systemmanagement?id=${sk}`, undefined, dev);
  const keys = { "ClearBlade-SystemKey": sk, "ClearBlade-SystemSecret": sys.body.systemSecret ?? sys.body.system_secret ?? sys.body.appSecret };
  await call("POST", "/api/v/1/user/reg", { email, password: "pw" }, keys);
  return (await call("POST", "/api/v/1/user/auth", { email, password: "pw" }, keys)).body.user_token as string;
}

beforeAll(async () => {
  app = await start(loadConfig(["--db", ":memory:", "--http-port", "0", "--mqtt-port", "0", "--mqtt-ws-port", "0", "--log-level", "silent"]));
  base = `http://127.0.0.1:${app.http.port}`;
  dev = { "ClearBlade-DevToken": (await call("POST", "/admin/reg", { email: "poll@example.com", password: "pw" })).body.dev_token };
  systemKey = (await call("POST", "/admin/systemmanagement", { name: "poll" }, dev)).body.appID;
  collectionID = (await call("POST", "/admin/collectionmanagement", { name: "readings", appID: systemKey }, dev)).body.collectionID;
  await call("PUT", "/admin/collectionmanagement", { id: collectionID, addColumn: { name: "sensor", type: "string" } }, dev);
  await call("POST", `/api/v/1/data/${collectionID}`, [{ sensor: "s-1" }, { sensor: "s-2" }], dev);
  roleId = (await call("POST", `/admin/user/${systemKey}/roles`, { name: "reader", collections: [{ itemInfo: { id: collectionID }, permissions: 1 }] }, dev)).body.role_id;
  userToken = await newUser("reader@example.com");
  expect((await call("PUT", `/admin/user/${systemKey}`, { user: "reader@example.com", changes: { roles: { add: [roleId] } } }, dev)).status).toBe(200);
});
afterAll(() => app.stop());

describe("polling one query", () => {
  test("a write is in the next answer", async () => {
    expect((await poll(userToken)).body.TOTAL).toBe(1);
    await call("POST", `/api/v/1/data/${collectionID}`, { sensor: "s-1" }, dev);
    const after = await poll(userToken);
    expect(after.body.TOTAL).toBe(2);
    expect(after.body.DATA.map((r: { sensor: string }) => r.sensor)).toEqual(["s-1", "s-1"]);
  });

  test("a token of another system gets the same refusal as on its first call", async () => {
    const other = (await call("POST", "/admin/systemmanagement", { name: "other" }, dev)).body.appID;
    const stranger = await newUser("stranger@example.com", other);
    const a = await poll(stranger);
    expect(a.status).toBeGreaterThanOrEqual(400);
    expect(a.status).toBeLessThan(500);
  });

  test("a right taken away refuses the next poll", async () => {
    expect((await poll(userToken)).status).toBe(200);
    await call("PUT", `/admin/user/${systemKey}`, { user: "reader@example.com", changes: { roles: { delete: [roleId] } } }, dev);
    const refused = await poll(userToken);
    expect(refused.status).toBe(401);
    expect(refused.body.error.message).toBe("Permission denied");
    await call("PUT", `/admin/user/${systemKey}`, { user: "reader@example.com", changes: { roles: { add: [roleId] } } }, dev);
    expect((await poll(userToken)).status).toBe(200);
  });

  test("a logged-out token refuses the next poll", async () => {
    const token = await newUser("leaver@example.com");
    await call("PUT", `/admin/user/${systemKey}`, { user: "leaver@example.com", changes: { roles: { add: [roleId] } } }, dev);
    expect((await poll(token)).status).toBe(200);
    const out = await call("POST", "/api/v/1/user/logout", undefined, { "ClearBlade-UserToken": token });
    expect(out.status).toBe(200);
    // the envelope of an unknown token (400, as ClearBlade answers it)
    const refused = await poll(token);
    expect(refused.status).toBe(400);
    expect(refused.body.error.detail).toMatch(/invalid, expired or logged out/);
  });

  test("a dropped collection is not found on the next poll", async () => {
    expect((await poll(userToken)).status).toBe(200);
    await call("DELETE", `/admin/collectionmanagement?id=${collectionID}`, undefined, dev);
    for (const p of paths()) expect((await call("GET", p, undefined, { "ClearBlade-UserToken": userToken })).status).toBe(404);
  });
});
