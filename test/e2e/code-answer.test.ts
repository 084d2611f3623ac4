// The answer of POST /api/v/1/code/{systemKey}/{name}, black-box: the run's results go out as the
// run gave them (not parsed and written again on the way), so every kind of value, text with
// characters JSON escapes, resp.error, logs and the failures keep the shape and the content type
// a client reads.
import t from "tap";
import { devWithSystem, isEnvelope, newUser, request, startOutpost, uniq } from "./harness.ts";

const o = await startOutpost();
t.teardown(() => o.stop());
const s = await devWithSystem(o, "code-answer");
const SK = s.systemKey;

/** Creates a service as the developer that the users of the system may run. */
async function service(code: string, extra: Record<string, unknown> = {}) {
  const name = uniq("svc");
  const r = await s.dev.post(`/admin/code/v/1/${SK}/${name}`, { code: code.replace("NAME", name), parameters: [], ...extra });
  if (r.status !== 200) throw new Error(`create service: ${r.status} ${r.text}`);
  return name;
}

const user = await newUser(s);
const runAs = (token: string, name: string, body: string | undefined, headers: Record<string, string> = {}) =>
  request(o.url, "POST", `/api/v/1/code/${SK}/${name}`, { headers: { "ClearBlade-UserToken": token, "Content-Type": "application/json", ...headers }, body });
// (the developer runs every service; a user needs the service in a role, tested below)
const devRun = (name: string, body = "{}", headers: Record<string, string> = {}) =>
  request(o.url, "POST", `/api/v/1/code/${SK}/${name}`, { headers: { "ClearBlade-DevToken": s.devToken, "Content-Type": "application/json", ...headers }, body });

t.test("every kind of result comes back as the run gave it, as JSON", async (t) => {
  const cases: [string, unknown][] = [
    ["'ok'", "ok"],
    ["42.5", 42.5],
    ["-0", 0],
    ["null", null],
    ["true", true],
    ["[1, 'two', {three: 3}]", [1, "two", { three: 3 }]],
    ["{b: 1, a: {c: [null]}, '2': 'n'}", { 2: "n", b: 1, a: { c: [null] } }],
    ["'quote \" backslash \\\\ newline \\n tab \\t \\u2028 é 😀'", "quote \" backslash \\ newline \n tab \t \u2028 é 😀"],
    ["req.params", { x: 1, y: ["z"] }],
  ];
  for (const [expr, want] of cases) {
    const name = await service(`function NAME(req, resp){ resp.success(${expr}) }`);
    const r = await devRun(name, expr === "req.params" ? JSON.stringify({ x: 1, y: ["z"] }) : "{}");
    t.equal(r.status, 200, `${expr}: 200`);
    t.match(String(r.headers["content-type"]), /^application\/json/, `${expr}: JSON content type`);
    t.same(JSON.parse(r.text), { success: true, results: want }, `${expr}: body`);
  }
  // key order as the service built it (integer keys first, as JSON.stringify orders them anywhere)
  const ordered = await service("function NAME(req, resp){ resp.success({z: 1, a: 2, m: 3}) }");
  t.equal((await devRun(ordered)).text, '{"success":true,"results":{"z":1,"a":2,"m":3}}', "the exact body text");
});

t.test("resp.error answers success false with its value; a thrown error and a timeout too", async (t) => {
  const err = await service("function NAME(req, resp){ resp.error({reason: 'no', n: 1}) }");
  const r = await devRun(err);
  t.equal(r.status, 200);
  t.same(r.body, { success: false, results: { reason: "no", n: 1 } }, "resp.error's value");
  const thrown = await service("function NAME(req, resp){ throw new Error('broken here') }");
  const r2 = await devRun(thrown);
  t.equal(r2.body.success, false, "a thrown error: success false");
  t.match(r2.body.results, /broken here/, "with the error's message");
  const slow = await service("function NAME(req, resp){ while (true) {} }", { execution_timeout: 1 });
  const r3 = await devRun(slow);
  t.equal(r3.body.success, false, "a timed-out run: success false");
  t.match(r3.body.results, /timed out/, "says it timed out");
});

t.test("logs come with the answer when asked for, escaped as JSON", async (t) => {
  const name = await service("function NAME(req, resp){ log('line \"one\"'); log({k: 'v'}); resp.success('done') }");
  const r = await devRun(name, "{}", { "logging-enabled": "true" });
  t.equal(r.status, 200);
  t.equal(r.body.success, true);
  t.equal(r.body.results, "done");
  t.match(r.body.logs, /line "one"/, "the first line, its quotes intact");
  t.match(r.body.logs, /"k"/, "the second line");
  const r2 = await devRun(name);
  t.notOk("logs" in r2.body, "no logs unless asked for");
});

t.test("the failures still answer in the envelope", async (t) => {
  const name = await service("function NAME(req, resp){ resp.success('ok') }");
  const bad = await devRun(name, "{not json");
  t.equal(bad.status, 400, "a body that is not JSON: 400");
  t.ok(isEnvelope(bad.body, 400), "in the envelope");
  const arr = await devRun(name, "[1,2]");
  t.equal(arr.status, 400, "a body that is not an object: 400");
  t.ok(isEnvelope(arr.body, 400), "in the envelope");
  const missing = await devRun(uniq("nothere"));
  t.equal(missing.status, 404, "an unknown service: 404");
  t.ok(isEnvelope(missing.body, 404), "in the envelope");
  const refused = await runAs(user.token, name, "{}");
  t.equal(refused.status, 401, "a user without the service in a role: 401 (as ClearBlade answers a denial)");
  t.ok(isEnvelope(refused.body, 401), "in the envelope");
  const anon = await request(o.url, "POST", `/api/v/1/code/${SK}/${name}`, { body: "{}" });
  t.equal(anon.status, 401, "no token: 401");
  t.ok(isEnvelope(anon.body, 401), "in the envelope");
  // and after all that, the service still answers
  t.same((await devRun(name)).body, { success: true, results: "ok" }, "the service still runs");
});

t.test("a user whose roles change gets the rights of the new roles on the next run", async (t) => {
  const name = await service("function NAME(req, resp){ resp.success(req.params.n) }");
  const u = await newUser(s);
  t.equal((await runAs(u.token, name, '{"n":1}')).status, 401, "no role with the service yet: refused");
  const role = await s.dev.post(`/admin/user/${SK}/roles`, { name: uniq("runner"), services: [{ itemInfo: { name }, permissions: 1 }] });
  t.equal(role.status, 200, "role made");
  const add = await s.dev.put(`/admin/user/${SK}`, { user: u.email, changes: { roles: { add: [role.body.role_id] } } });
  t.equal(add.status, 200, "role given");
  for (let n = 0; n < 3; n++) {
    const r = await runAs(u.token, name, JSON.stringify({ n }));
    t.same([r.status, r.body], [200, { success: true, results: n }], `run ${n} with the role`);
  }
  const remove = await s.dev.put(`/admin/user/${SK}`, { user: u.email, changes: { roles: { delete: [role.body.role_id] } } });
  t.equal(remove.status, 200, "role taken away");
  t.equal((await runAs(u.token, name, "{}")).status, 401, "refused again once the role is gone");
});
