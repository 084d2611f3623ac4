// Running snippets of service code against a server, for the black-box tests of the service
// library (code-admin, code-messaging-extras, code-database): a fresh service per snippet, its
// answer read as success or the host's error.
import type { Test } from "tap";
import { Client, type DevSystem, type HttpResponse, must, newUser, uniq } from "./harness.ts";

/** Every snippet starts with these: `done` ends a classic callback, `settle` a promise, `fails`
 *  a promise that must be refused (as `done` does). */
const PRELUDE = `var P = req.params;
  var done = function (err, data) { if (err) resp.error({ failed: data }); else resp.success(data === undefined ? "(undefined)" : data); };
  var settle = function (p) { return p.then(function (d) { resp.success(d === undefined ? "(undefined)" : d); }, function (e) { resp.error({ failed: e.error || e.message }); }); };`;

/** Runs `code` as the body of a fresh service of `sys`, called by `as` (its developer by default). */
export async function run(sys: DevSystem, code: string, as: Client = sys.dev, params: Record<string, unknown> = {}): Promise<HttpResponse> {
  const name = uniq("svc");
  await must(sys.dev.post(`/admin/code/v/1/${sys.systemKey}/${name}`, { code: `function ${name}(req, resp) { ${PRELUDE}\n${code}\n}`, parameters: [] }), "create service");
  return as.post(`/api/v/1/code/${sys.systemKey}/${name}`, params);
}

/** The snippet's success value (failing the test otherwise). */
export function ok(t: Test, r: HttpResponse, what: string): any {
  t.ok(r.status === 200 && r.body?.success === true, `${what}: succeeds${r.body?.success === true ? "" : ` (got ${r.status} ${r.text.slice(0, 400)})`}`);
  return r.body?.results;
}

/** The snippet ended with the host's error matching `re` (and that HTTP-like status, when given). */
export function refused(t: Test, r: HttpResponse, re: RegExp, status: number | undefined, what: string) {
  const f = r.body?.results?.failed;
  t.ok(r.status === 200 && r.body?.success === false && f, `${what}: refused${f ? "" : ` (got ${r.status} ${r.text.slice(0, 300)})`}`);
  t.match(String(f?.detail ?? f), re, `${what}: says ${re}`);
  if (status !== undefined) t.equal(f?.status, status, `${what}: status ${status}`);
}

export async function createRole(sys: DevSystem, body: Record<string, unknown>): Promise<string> {
  return (await must(sys.dev.post(`/admin/user/${sys.systemKey}/roles`, body), "create role")).role_id;
}

/** A user of `sys` holding a fresh role with `perms` plus the right to run every service. */
export async function userWith(sys: DevSystem, perms: Record<string, unknown>) {
  const u = await newUser(sys);
  const roleId = await createRole(sys, { name: uniq("R"), allservices: 1, ...perms });
  await must(sys.dev.put(`/admin/user/${sys.systemKey}`, { user: u.userId, changes: { roles: { add: [roleId] } } }), "user roles");
  const a = await must(sys.app.post("/api/v/1/user/auth", { email: u.email, password: u.password }), "user auth");
  return { ...u, roleId, token: a.user_token as string, client: new Client(sys.app.base, { "ClearBlade-UserToken": a.user_token }) };
}

/** A promise expression in a snippet, ended as `done` ends a callback. */
export const settleAs = (expr: string) => `${expr}.then(function (d) { done(false, d); }, function (e) { done(true, e.error || e.message); });`;

export const J = JSON.stringify;

/** The counter pattern (cache + lock, ClearBladeAsync): service `name` adds one to key "n" of cache
 *  `cache` under lock `lock` and answers the count it saw. */
export const counterCode = (name: string, cache: string, lock: string) => `async function ${name}(req) {
    var lock = ClearBladeAsync.Lock("${lock}", "${name}");
    var cache = ClearBladeAsync.Cache("${cache}");
    await lock.lock();
    var v = await cache.get("n");
    await cache.set("n", (v || 0) + 1);
    await lock.unlock();
    return v || 0;
  }`;
