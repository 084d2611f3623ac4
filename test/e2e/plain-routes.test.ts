// The plain routes (user info, a collection's item read, a code service's run) are answered
// through Bun's own router, past Elysia: black-box, every check of the ordinary path still holds
// on them: the token decides (none: 401, a bad one: 400, in the envelope), /metrics counts each
// request under its route's pattern and status, a browser's request gets its CORS header, the
// HTTP Requests throttler refuses past its limit, and the spellings Bun's router does not match
// ("//", HEAD) are still answered.
import t from "tap";
import { collectionWith, devWithSystem, isErr, metrics, must, newUser, type Outpost, qs, request, startOutpost, uniq } from "./harness.ts";

let o: Outpost;
t.before(async () => { o = await startOutpost(); });
t.teardown(async () => { await o?.stop(); });

/** The count /metrics has for a route pattern and status (0 when it has no series yet). */
async function counted(route: string, status: number): Promise<number> {
  const text = (await metrics(o)).text;
  const line = text.split("\n").find((l) => l.startsWith(`outpost_http_requests_total{route="${route}",status="${status}"} `));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : 0;
}

t.test("user info: the token decides, each answer is counted under its pattern, a browser's gets CORS", async (t) => {
  const s = await devWithSystem(o, "plain-info");
  const u = await newUser(s);
  const info = "/api/v/1/user/info";
  const ok0 = await counted(info, 200), refused0 = await counted(info, 401);
  for (let i = 0; i < 3; i++) {
    const r = await u.client.get(info);
    t.equal(r.status, 200, `answered (${i + 1})`);
    t.equal(r.body.email, u.email, "the token's own user");
  }
  isErr(t, await request(o.url, "GET", info), 401, undefined, "no token");
  const bad0 = await counted(info, 400);
  isErr(t, await request(o.url, "GET", info, { headers: { "ClearBlade-UserToken": "not-a-token" } }), 400, undefined, "a bad token");
  t.equal(await counted(info, 200), ok0 + 3, "the three answers counted");
  t.equal(await counted(info, 401), refused0 + 1, "the refusal without a token counted");
  t.equal(await counted(info, 400), bad0 + 1, "the bad token's counted");
  const browser = await request(o.url, "GET", info, { headers: { "ClearBlade-UserToken": u.token, origin: "https://app.example.com" } });
  t.equal(browser.status, 200);
  t.equal(browser.headers["access-control-allow-origin"], "*", "a browser's request names who may read it");
  t.notOk((await u.client.get(info)).headers["access-control-allow-origin"], "no CORS header without an Origin");
  const slashes = await request(o.url, "GET", "/api/v/1//user/info", { headers: { "ClearBlade-UserToken": u.token } });
  t.equal(slashes.status, 200, "a \"//\" spelling is answered too");
  t.equal(slashes.body.email, u.email);
  const head = await request(o.url, "HEAD", info, { headers: { "ClearBlade-UserToken": u.token } });
  t.equal(head.status, 200, "HEAD is answered");
  t.equal(head.text, "", "without a body");
});

t.test("a collection read: the caller's rights decide, and the answer is counted under the pattern", async (t) => {
  const s = await devWithSystem(o, "plain-read");
  const { id, name } = await collectionWith(s, [["sensor", "string"]], uniq("read col"));
  await must(s.dev.post(`/api/v/1/data/${id}`, [{ sensor: "a" }, { sensor: "b" }]), "rows");
  const pattern = "/api/v/1/collection/:key/:name";
  const path = `/api/v/1/collection/${s.systemKey}/${encodeURIComponent(name)}?query=${qs({ FILTERS: [[{ EQ: [{ sensor: "b" }] }]] })}`;
  const u = await newUser(s);
  const before = await counted(pattern, 200);
  const refused = await u.client.get(path);
  isErr(t, refused, 401, undefined, "a user whose roles do not grant reading");
  const dev1 = await s.dev.get(path);
  const dev2 = await s.dev.get(path);
  t.equal(dev1.status, 200, "the developer reads (its name decoded from the path)");
  t.same(dev2.body.DATA?.map((r: any) => r.sensor), ["b"], "the query applied");
  t.equal(await counted(pattern, 200), before + 2, "both reads counted");
  t.equal(await counted(pattern, 401), 1, "the refusal counted");
});

t.test("the HTTP Requests throttler still refuses on a plain route", async (t) => {
  const s = await devWithSystem(o, "plain-throttle");
  const u = await newUser(s);
  const kase = { case_name: uniq("info"), system_key: s.systemKey, consumer: "*", resource: "/api/v/1/user/info", limiter_type: "frequency", max_num: 1, duration: 60, priority: 10 };
  await must(s.dev.post("/admin/throttlers/HTTP%20Requests/cases", kase), "case");
  t.equal((await u.client.get("/api/v/1/user/info")).status, 200, "the first within the limit");
  const second = await u.client.get("/api/v/1/user/info");
  isErr(t, second, 429, undefined, "the second refused");
  t.ok(second.headers["retry-after"], "with Retry-After");
});
