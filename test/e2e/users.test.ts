// Users of a system, black-box: registration, sign-in (password, refresh, anonymous), sessions,
// the user's own record, password changes, managing other users, user listing with the query
// object, token expiry, cross-system tokens, and the developer's /admin/user/{systemKey} routes
// with custom user columns.
import t from "tap";
import { Client, type DevSystem, type HttpResponse, devWithSystem, isEnvelope, newUser, request, startOutpost, uniq, isErr, ok200, qs } from "./harness.ts";

const o = await startOutpost();
t.teardown(() => o.stop());
const s = await devWithSystemNamed("users-a");
const s2 = await devWithSystemNamed("users-b");

function devWithSystemNamed(name: string): Promise<DevSystem> {
  return devWithSystem(o, name);
}

// ---- helpers ----------------------------------------------------------------------------------

const nowSec = () => Date.now() / 1000;
const HEX_ID = /^[0-9a-f]{28,30}$/;

/** Asserts an error response: status, the ClearBlade envelope, optionally the app code. */
async function addColumn(sys: DevSystem, name: string, type: string) {
  const r = await sys.dev.post(`/admin/user/${sys.systemKey}/columns`, { column_name: name, type });
  if (r.status !== 200) throw new Error(`add column ${name}: ${r.status} ${r.text}`);
}

/** Creates a role, sets its permissions with PUT changes, and returns its id. */
async function makeRole(sys: DevSystem, name: string, changes: Record<string, unknown>) {
  const c = await sys.dev.post(`/admin/user/${sys.systemKey}/roles`, { name, description: `${name} role` });
  if (c.status !== 200) throw new Error(`role create ${name}: ${c.status} ${c.text}`);
  const p = await sys.dev.put(`/admin/user/${sys.systemKey}/roles`, { id: c.body.role_id, changes });
  if (p.status !== 200) throw new Error(`role update ${name}: ${p.status} ${p.text}`);
  return c.body.role_id as string;
}

async function addUserToRole(sys: DevSystem, userId: string, role: string) {
  const r = await sys.dev.put(`/admin/user/${sys.systemKey}`, { user: userId, changes: { roles: { add: [role] } } });
  if (r.status !== 200) throw new Error(`role add ${role}: ${r.status} ${r.text}`);
}

const auth = (sys: DevSystem, email: string, password: string) => sys.app.post("/api/v/1/user/auth", { email, password });
const withToken = (sys: DevSystem, token: string) => sys.app.with({ "ClearBlade-UserToken": token });
const info = (sys: DevSystem, token: string) => sys.app.with({ "ClearBlade-UserToken": token }).get("/api/v/1/user/info");

// custom columns used throughout
await addColumn(s, "age", "int");
await addColumn(s, "nickname", "string");
await addColumn(s, "vip", "bool");

// ---- registration -----------------------------------------------------------------------------

t.test("POST /api/v/1/user/reg registers a user and returns a session", async (t) => {
  const email = `${uniq("reg")}@example.com`;
  const before = nowSec();
  const r = await s.app.post("/api/v/1/user/reg", { email, password: "pw-reg-1" });
  ok200(t, r, "reg");
  t.type(r.body.user_token, "string");
  t.ok(r.body.user_token.length > 10, "non-trivial user_token");
  t.type(r.body.user_id, "string");
  t.match(r.body.user_id, HEX_ID, "user_id is a hex id");
  t.type(r.body.expires_at, "number", "expires_at is a JSON number");
  t.ok(r.body.expires_at > before, "expires_at is in the future (unix seconds)");
  t.ok(r.body.expires_at < before + 10 * 365 * 86400, "expires_at is unix seconds, not ms");
  t.type(r.body.refresh_token, "string");
  t.ok(r.body.refresh_token.length > 10);
  t.not(r.body.refresh_token, r.body.user_token, "refresh token differs from access token");
  t.equal(r.body.email, email);
  t.type(r.body.creation_date, "string");
  t.notOk(Number.isNaN(Date.parse(r.body.creation_date)), "creation_date is a date string");
  t.match(r.body.creation_date, /^\d{4}-\d{2}-\d{2}T/, "RFC3339");

  const me = await info(s, r.body.user_token);
  ok200(t, me, "the new token works");
  t.equal(me.body.user_id, r.body.user_id);
  t.equal(me.body.email, email);
  t.equal(me.body.creation_date, r.body.creation_date);
  t.notOk("password" in me.body, "no password in the record");
  t.notOk("password_hash" in me.body, "no password hash in the record");

  const a = await auth(s, email, "pw-reg-1");
  ok200(t, a, "can sign in with the registered password");
  t.equal(a.body.user_id, r.body.user_id);
});

t.test("registration needs the right system key and secret", async (t) => {
  const body = { email: `${uniq("reg")}@example.com`, password: "pw" };
  isErr(t, await s.app.post("/api/v/1/user/reg", body, { "ClearBlade-SystemSecret": s.systemSecret.replace(/.$/, (c) => (c === "0" ? "1" : "0")) }), 401, undefined, "wrong secret");
  isErr(t, await s.app.post("/api/v/1/user/reg", body, { "ClearBlade-SystemSecret": s2.systemSecret }), 401, undefined, "another system's secret");
  isErr(t, await request(o.url, "POST", "/api/v/1/user/reg", { body }), 401, undefined, "no headers at all");
  isErr(t, await request(o.url, "POST", "/api/v/1/user/reg", { body, headers: { "ClearBlade-SystemKey": s.systemKey } }), 401, undefined, "key without secret");
  isErr(t, await request(o.url, "POST", "/api/v/1/user/reg", { body, headers: { "ClearBlade-SystemSecret": s.systemSecret } }), 401, undefined, "secret without key");
  isErr(t, await request(o.url, "POST", "/api/v/1/user/reg", { body, headers: { "ClearBlade-SystemKey": "0".repeat(30), "ClearBlade-SystemSecret": s.systemSecret } }), 401, undefined, "unknown system key");
  // none of these created the user
  ok200(t, await s.app.post("/api/v/1/user/reg", body), "the email is still free");
});

t.test("registration validates email, password and duplicates", async (t) => {
  const email = `${uniq("dup")}@example.com`;
  ok200(t, await s.app.post("/api/v/1/user/reg", { email, password: "pw" }), "first");
  isErr(t, await s.app.post("/api/v/1/user/reg", { email, password: "other" }), 400, undefined, "duplicate email");
  t.equal((await auth(s, email, "other")).status, 401, "the duplicate did not overwrite the password");
  ok200(t, await auth(s, email, "pw"), "the original password still works");
  for (const bad of ["not-an-email", "", "a b@example.com", 42, null]) {
    isErr(t, await s.app.post("/api/v/1/user/reg", { email: bad, password: "pw" }), 400, undefined, `invalid email ${JSON.stringify(bad)}`);
  }
  isErr(t, await s.app.post("/api/v/1/user/reg", { password: "pw" }), 400, undefined, "missing email");
  isErr(t, await s.app.post("/api/v/1/user/reg", { email: `${uniq("np")}@example.com` }), 400, undefined, "missing password");
  isErr(t, await s.app.post("/api/v/1/user/reg", { email: `${uniq("np")}@example.com`, password: "" }), 400, undefined, "empty password");
  isErr(t, await s.app.post("/api/v/1/user/reg", [{ email: `${uniq("arr")}@example.com`, password: "pw" }]), 400, undefined, "array body");
});

t.test("registration accepts custom column values, type-checked, and rejects unknown fields", async (t) => {
  const email = `${uniq("cols")}@example.com`;
  const r = await s.app.post("/api/v/1/user/reg", { email, password: "pw", age: 33, nickname: "Bobby", vip: true });
  ok200(t, r, "reg with custom columns");
  const me = await info(s, r.body.user_token);
  ok200(t, me);
  t.equal(me.body.age, 33, "int column round-trips as a number");
  t.equal(me.body.nickname, "Bobby");
  t.equal(me.body.vip, true, "bool column round-trips as a boolean");

  const wrongInt = await s.app.post("/api/v/1/user/reg", { email: `${uniq("c")}@example.com`, password: "pw", age: "thirty" });
  isErr(t, wrongInt, 400, undefined, "string for an int column");
  t.match(wrongInt.body.error.detail, /age/, "the error names the column");
  const wrongStr = await s.app.post("/api/v/1/user/reg", { email: `${uniq("c")}@example.com`, password: "pw", nickname: 12 });
  isErr(t, wrongStr, 400, undefined, "number for a string column");
  t.match(wrongStr.body.error.detail, /nickname/);
  const wrongBool = await s.app.post("/api/v/1/user/reg", { email: `${uniq("c")}@example.com`, password: "pw", vip: "maybe" });
  isErr(t, wrongBool, 400, undefined, "bad bool");
  t.match(wrongBool.body.error.detail, /vip/);
  const frac = await s.app.post("/api/v/1/user/reg", { email: `${uniq("c")}@example.com`, password: "pw", age: 1.5 });
  isErr(t, frac, 400, undefined, "fraction for an int column");

  const unknownEmail = `${uniq("c")}@example.com`;
  const unknown = await s.app.post("/api/v/1/user/reg", { email: unknownEmail, password: "pw", favourite_colour: "red" });
  isErr(t, unknown, 400, undefined, "unknown field");
  t.match(unknown.body.error.detail, /favourite_colour/, "the error names the unknown field");
  t.equal((await auth(s, unknownEmail, "pw")).status, 401, "the rejected registration created no user");

  // a column of another system is unknown here
  await addColumn(s2, "only_in_b", "string");
  const other = await s.app.post("/api/v/1/user/reg", { email: `${uniq("c")}@example.com`, password: "pw", only_in_b: "x" });
  isErr(t, other, 400, undefined, "column of another system");
  t.match(other.body.error.detail, /only_in_b/);
});

t.test("registration with a token of another system is refused", async (t) => {
  const a = await newUser(s);
  const r = await s2.app.post("/api/v/1/user/reg", { email: `${uniq("x")}@example.com`, password: "pw" }, { "ClearBlade-UserToken": a.token });
  isErr(t, r, 401, 201, "A's token with B's key/secret");
  const own = await newUser(s2);
  ok200(t, await s2.app.post("/api/v/1/user/reg", { email: `${uniq("x")}@example.com`, password: "pw" }, { "ClearBlade-UserToken": own.token }), "B's token with B's key/secret");
});

// ---- sign-in ----------------------------------------------------------------------------------

t.test("POST /api/v/1/user/auth with email or username", async (t) => {
  const u = await newUser(s);
  const a = await auth(s, u.email, u.password);
  ok200(t, a, "email + password");
  t.type(a.body.user_token, "string");
  t.equal(a.body.user_id, u.userId);
  t.type(a.body.expires_at, "number");
  t.ok(a.body.expires_at > nowSec());
  t.type(a.body.refresh_token, "string");
  t.not(a.body.user_token, u.token, "a new session token");
  ok200(t, await info(s, a.body.user_token), "the token works");
  ok200(t, await info(s, u.token), "the registration session is still valid too");

  const b = await s.app.post("/api/v/1/user/auth", { username: u.email, password: u.password });
  ok200(t, b, "username + password");
  t.equal(b.body.user_id, u.userId);
  t.equal((await info(s, b.body.user_token)).body.email, u.email);
});

t.test("auth failures", async (t) => {
  const u = await newUser(s);
  isErr(t, await auth(s, u.email, "wrong-password"), 401, 203, "wrong password");
  isErr(t, await auth(s, `${uniq("nobody")}@example.com`, u.password), 401, 203, "unknown user");
  isErr(t, await auth(s, u.email, ""), 401, undefined, "empty password");
  isErr(t, await s.app.post("/api/v/1/user/auth", { password: u.password }), 400, undefined, "no email/username");
  isErr(t, await s2.app.post("/api/v/1/user/auth", { email: u.email, password: u.password }), 401, undefined, "user of A with B's key/secret");
  isErr(t, await s.app.post("/api/v/1/user/auth", { email: u.email, password: u.password }, { "ClearBlade-SystemSecret": s2.systemSecret }), 401, undefined, "A's key with B's secret");
  isErr(t, await request(o.url, "POST", "/api/v/1/user/auth", { body: { email: u.email, password: u.password } }), 401, undefined, "no key/secret");
});

t.test("refresh grant", async (t) => {
  const u = await newUser(s);
  const a = await auth(s, u.email, u.password);
  ok200(t, a);
  const r = await s.app.post("/api/v/1/user/auth", { grant_type: "refresh_token", refresh_token: a.body.refresh_token, access_token: a.body.user_token });
  ok200(t, r, "refresh");
  t.type(r.body.user_token, "string");
  t.not(r.body.user_token, a.body.user_token, "a new access token");
  t.type(r.body.refresh_token, "string");
  t.type(r.body.expires_at, "number", "expires_at is a number (Go asserts float64)");
  t.ok(r.body.expires_at > nowSec());
  const me = await info(s, r.body.user_token);
  ok200(t, me, "refreshed token works");
  t.equal(me.body.user_id, u.userId, "for the same user");

  isErr(t, await s.app.post("/api/v/1/user/auth", { grant_type: "refresh_token", refresh_token: "bogus", access_token: r.body.user_token }), 401, undefined, "unknown refresh token");
  isErr(t, await s.app.post("/api/v/1/user/auth", { grant_type: "refresh_token", refresh_token: r.body.refresh_token, access_token: u.token }), 401, undefined, "refresh token with another access token");
  isErr(t, await s.app.post("/api/v/1/user/auth", { grant_type: "password", refresh_token: r.body.refresh_token, access_token: r.body.user_token }), 400, undefined, "grant_type other than refresh_token");
  isErr(t, await s.app.post("/api/v/1/user/auth", { grant_type: "refresh_token", refresh_token: r.body.refresh_token }), 400, undefined, "missing access_token");
  ok200(t, await info(s, r.body.user_token), "failed refresh attempts left the session alone");
});

t.test("a refresh attempt with another system's key/secret fails without consuming the session", async (t) => {
  const u = await newUser(s);
  const a = await auth(s, u.email, u.password);
  const bad = await s2.app.post("/api/v/1/user/auth", { grant_type: "refresh_token", refresh_token: a.body.refresh_token, access_token: a.body.user_token });
  isErr(t, bad, 401, undefined, "A's refresh token at system B");
  ok200(t, await info(s, a.body.user_token), "A's access token still works after the refused attempt");
  const good = await s.app.post("/api/v/1/user/auth", { grant_type: "refresh_token", refresh_token: a.body.refresh_token, access_token: a.body.user_token });
  ok200(t, good, "A's refresh token still works at system A");
});

// ---- anonymous, checkauth, logout -------------------------------------------------------------

t.test("POST /api/v/1/user/anon", async (t) => {
  const r = await s.app.post("/api/v/1/user/anon");
  ok200(t, r, "anon");
  t.type(r.body.user_token, "string");
  t.ok(r.body.user_token.length > 10);
  const c = await withToken(s, r.body.user_token).post("/api/v/1/user/checkauth");
  ok200(t, c, "anon token is authenticated");
  t.same(c.body, { is_authenticated: true });
  const r2 = await s.app.post("/api/v/1/user/anon");
  t.not(r2.body.user_token, r.body.user_token, "each call issues a new token");
  isErr(t, await s.app.post("/api/v/1/user/anon", undefined, { "ClearBlade-SystemSecret": s2.systemSecret }), 401, undefined, "wrong secret");
  isErr(t, await request(o.url, "POST", "/api/v/1/user/anon"), 401, undefined, "no headers");
  isErr(t, await withToken(s, r.body.user_token).get("/api/v/1/user"), 403, undefined, "anonymous may not list users");
});

t.test("POST /api/v/1/user/checkauth", async (t) => {
  const u = await newUser(s);
  const r = await withToken(s, u.token).post("/api/v/1/user/checkauth");
  ok200(t, r);
  t.same(r.body, { is_authenticated: true });
  t.type(r.body.is_authenticated, "boolean");
  const onlyToken = await u.client.with({ "ClearBlade-SystemKey": s.systemKey }).post("/api/v/1/user/checkauth");
  ok200(t, onlyToken, "UT + SK, no secret");
  t.equal(onlyToken.body.is_authenticated, true);
  isErr(t, await s.app.with({ "ClearBlade-UserToken": "not-a-token" }).post("/api/v/1/user/checkauth"), 400, 204, "bad token");
  isErr(t, await s.app.with({ "ClearBlade-UserToken": u.token.slice(0, -2) }).post("/api/v/1/user/checkauth"), 400, 204, "truncated token");
  isErr(t, await s2.app.with({ "ClearBlade-UserToken": u.token }).post("/api/v/1/user/checkauth"), 400, undefined, "token of A with B's system key: not authenticated with B");
  const none = await s.app.post("/api/v/1/user/checkauth");
  t.ok(none.status === 400 || none.status === 401, `no token -> 400/401 (${none.status})`);
  t.ok(isEnvelope(none.body, none.status), "no token: envelope");
});

t.test("POST /api/v/1/user/logout invalidates only that token", async (t) => {
  const u = await newUser(s);
  const other = await auth(s, u.email, u.password);
  const r = await u.client.post("/api/v/1/user/logout");
  ok200(t, r, "logout");
  isErr(t, await info(s, u.token), 400, 204, "logged-out token on user/info");
  isErr(t, await withToken(s, u.token).post("/api/v/1/user/checkauth"), 400, 204, "logged-out token on checkauth");
  isErr(t, await u.client.post("/api/v/1/user/logout"), 400, 204, "logging out twice");
  ok200(t, await info(s, other.body.user_token), "another session of the same user survives");
  const anon = await s.app.post("/api/v/1/user/anon");
  ok200(t, await withToken(s, anon.body.user_token).post("/api/v/1/user/logout"), "anon logout");
  isErr(t, await withToken(s, anon.body.user_token).post("/api/v/1/user/checkauth"), 400, 204, "anon token after logout");
  isErr(t, await s.app.post("/api/v/1/user/logout"), 401, undefined, "logout without a token");
});

// ---- the user's own record --------------------------------------------------------------------

t.test("GET and PUT /api/v/1/user/info", async (t) => {
  const u = await newUser(s, { age: 20, nickname: "before" });
  const g = await u.client.get("/api/v/1/user/info");
  ok200(t, g);
  t.equal(g.body.user_id, u.userId);
  t.equal(g.body.email, u.email);
  t.type(g.body.creation_date, "string");
  t.equal(g.body.age, 20);
  t.equal(g.body.nickname, "before");
  t.ok("vip" in g.body, "every custom column is present");
  t.equal(g.body.vip, null, "an unset column is null");

  const p = await u.client.put("/api/v/1/user/info", { age: 21, nickname: "after", vip: false });
  ok200(t, p, "update custom columns");
  const g2 = await u.client.get("/api/v/1/user/info");
  t.equal(g2.body.age, 21);
  t.equal(g2.body.nickname, "after");
  t.equal(g2.body.vip, false);
  t.equal(g2.body.email, u.email, "email unchanged");
  t.equal(g2.body.creation_date, g.body.creation_date, "creation_date unchanged");

  const newEmail = `${uniq("moved")}@example.com`;
  ok200(t, await u.client.put("/api/v/1/user/info", { email: newEmail }), "change email");
  t.equal((await u.client.get("/api/v/1/user/info")).body.email, newEmail);
  ok200(t, await auth(s, newEmail, u.password), "sign in with the new email");
  isErr(t, await auth(s, u.email, u.password), 401, undefined, "the old email no longer signs in");

  const pw = await u.client.put("/api/v/1/user/info", { password: "sneaky" });
  isErr(t, pw, 400, undefined, "password in PUT info");
  ok200(t, await auth(s, newEmail, u.password), "password unchanged");
  isErr(t, await auth(s, newEmail, "sneaky"), 401);

  const wrong = await u.client.put("/api/v/1/user/info", { age: "old" });
  isErr(t, wrong, 400, undefined, "wrong type");
  t.match(wrong.body.error.detail, /age/);
  const unk = await u.client.put("/api/v/1/user/info", { shoe_size: 44 });
  isErr(t, unk, 400, undefined, "unknown column");
  t.match(unk.body.error.detail, /shoe_size/);
  isErr(t, await u.client.put("/api/v/1/user/info", { email: "nope" }), 400, undefined, "invalid email");
  const other = await newUser(s);
  isErr(t, await u.client.put("/api/v/1/user/info", { email: other.email }), 400, undefined, "email of another user");
  const g3 = await u.client.get("/api/v/1/user/info");
  t.equal(g3.body.email, newEmail, "failed updates changed nothing");
  t.equal(g3.body.age, 21);

  isErr(t, await s.app.get("/api/v/1/user/info"), 401, undefined, "no token");
  isErr(t, await withToken(s, "garbage").get("/api/v/1/user/info"), 400, 204, "bad token");
});

t.test("DELETE /api/v/1/user/info needs UT+SK+SS and the users-list delete permission", async (t) => {
  const caller = await newUser(s);
  const victim = await newUser(s);
  const callerFull = s.app.with({ "ClearBlade-UserToken": caller.token });

  const denied = await callerFull.del("/api/v/1/user/info", { user_id: victim.userId });
  isErr(t, denied, 401, undefined, "plain user");
  ok200(t, await info(s, victim.token), "victim untouched");

  const roleName = uniq("Deleters");
  await makeRole(s, roleName, { users: { permissions: 8 } });
  await addUserToRole(s, caller.userId, roleName);
  const callerTok = (await auth(s, caller.email, caller.password)).body.user_token as string;
  const full = s.app.with({ "ClearBlade-UserToken": callerTok });

  isErr(t, await withTokenOnly(callerTok).del("/api/v/1/user/info", { user_id: victim.userId }), 401, undefined, "UT without SK/SS");
  isErr(t, await withTokenOnly(callerTok).del("/api/v/1/user/info", { user_id: victim.userId }, { "ClearBlade-SystemKey": s.systemKey }), 401, undefined, "UT + SK without SS");
  isErr(t, await full.del("/api/v/1/user/info", { user_id: victim.userId }, { "ClearBlade-SystemSecret": s2.systemSecret }), 401, undefined, "wrong secret");
  ok200(t, await info(s, victim.token), "victim still there");

  const del = await full.del("/api/v/1/user/info", { user_id: victim.userId });
  ok200(t, del, "with the permission");
  isErr(t, await info(s, victim.token), 400, 204, "the deleted user's token stops working");
  isErr(t, await auth(s, victim.email, victim.password), 401, undefined, "the deleted user cannot sign in");
  const list = await s.dev.get(`/admin/user/${s.systemKey}?query=${qs({ FILTERS: [[{ EQ: [{ email: victim.email }] }]] })}`);
  t.same(list.body, [], "gone from the admin listing");

  const again = await full.del("/api/v/1/user/info", { user_id: victim.userId });
  t.ok(again.status === 404 || again.status === 400, `deleting again -> 400/404 (${again.status})`);
  t.ok(isEnvelope(again.body, again.status));
  ok200(t, await info(s, callerTok), "the caller is fine");

  function withTokenOnly(tok: string) { return new Client(o.url, { "ClearBlade-UserToken": tok }); }
});

// ---- password ---------------------------------------------------------------------------------

t.test("PUT /api/v/1/user/pass", async (t) => {
  const u = await newUser(s);
  const s1 = (await auth(s, u.email, u.password)).body.user_token as string;
  const s2tok = (await auth(s, u.email, u.password)).body.user_token as string;

  isErr(t, await withToken(s, s1).put("/api/v/1/user/pass", { old_password: "wrong", new_password: "new-pw-1" }), 401, undefined, "wrong old password");
  ok200(t, await info(s, s2tok), "a failed change invalidates nothing");
  isErr(t, await withToken(s, s1).put("/api/v/1/user/pass", { old_password: u.password, new_password: "" }), 400, undefined, "empty new password");
  isErr(t, await withToken(s, s1).put("/api/v/1/user/pass", { new_password: "x" }), 400, undefined, "missing old_password");
  ok200(t, await auth(s, u.email, u.password), "password unchanged so far");

  const r = await withToken(s, s1).put("/api/v/1/user/pass", { old_password: u.password, new_password: "new-pw-1" });
  ok200(t, r, "change");
  t.equal(r.text, "Success", "the body is the text Success");

  ok200(t, await info(s, s1), "the caller's session stays valid");
  isErr(t, await info(s, s2tok), 400, 204, "another session of that user is invalidated");
  isErr(t, await info(s, u.token), 400, 204, "the registration session is invalidated");
  isErr(t, await auth(s, u.email, u.password), 401, undefined, "old password rejected");
  ok200(t, await auth(s, u.email, "new-pw-1"), "new password works");
  isErr(t, await s.app.put("/api/v/1/user/pass", { old_password: "new-pw-1", new_password: "x" }), 401, undefined, "no token");
});

// ---- managing other users ---------------------------------------------------------------------

t.test("PUT /api/v/4/user/manage needs the manage-users permission", async (t) => {
  const manager = await newUser(s);
  const target = await newUser(s);
  const readers = uniq("Readers");
  await makeRole(s, readers, { users: { permissions: 1 } });
  const body = { user: target.userId, changes: { password: "managed-pw", roles: { add: [readers] } } };

  isErr(t, await manager.client.put("/api/v/4/user/manage", body), 401, undefined, "without manageusers");
  ok200(t, await auth(s, target.email, target.password), "target password unchanged");

  const managers = uniq("Managers");
  await makeRole(s, managers, { manageusers: { permissions: 4 } });
  await addUserToRole(s, manager.userId, managers);
  const mt = (await auth(s, manager.email, manager.password)).body.user_token as string;
  const m = withToken(s, mt);

  isErr(t, await m.put("/api/v/4/user/manage", { user: "0".repeat(30), changes: { password: "x" } }), 404, undefined, "unknown user");
  isErr(t, await m.put("/api/v/4/user/manage", { user: target.userId, changes: { roles: { add: ["NoSuchRole"] } } }), 404, undefined, "unknown role");
  isErr(t, await m.put("/api/v/4/user/manage", { user: target.userId, changes: { email: "x@example.com" } }), 400, undefined, "email is not a manage change");
  isErr(t, await m.put("/api/v/4/user/manage", { user: target.userId, changes: { password: "" } }), 400, undefined, "empty password");

  const r = await m.put("/api/v/4/user/manage", body);
  ok200(t, r, "with manageusers");
  isErr(t, await auth(s, target.email, target.password), 401, undefined, "target's old password rejected");
  const tt = await auth(s, target.email, "managed-pw");
  ok200(t, tt, "target's new password works");
  isErr(t, await info(s, target.token), 400, 204, "target's old sessions are invalidated by the password change");
  ok200(t, await info(s, mt), "the manager's session is untouched");
  const roles = await s.dev.get(`/admin/user/${s.systemKey}/roles?user=${target.userId}`);
  ok200(t, roles);
  t.ok(roles.body.some((x: any) => x.Name === readers), "role added");
  ok200(t, await withToken(s, tt.body.user_token).get("/api/v/1/user"), "the added role takes effect");

  ok200(t, await m.put("/api/v/4/user/manage", { user: target.email, changes: { roles: { delete: [readers] } } }), "remove the role (user by email)");
  const roles2 = await s.dev.get(`/admin/user/${s.systemKey}/roles?user=${target.userId}`);
  t.notOk(roles2.body.some((x: any) => x.Name === readers), "role removed");
  isErr(t, await withToken(s, tt.body.user_token).get("/api/v/1/user"), 403, undefined, "the removed role no longer grants listing");
});

// ---- listing users with the query object ------------------------------------------------------

t.test("GET /api/v/1/user with the query object", async (t) => {
  const sl = await devWithSystemNamed("users-list");
  await addColumn(sl, "age", "int");
  await addColumn(sl, "team", "string");
  const p = uniq("l");
  const fixtures = [
    { key: "a", age: 20, team: "red" }, { key: "b", age: 30, team: "blue" }, { key: "c", age: 40, team: "red" },
    { key: "d", age: 50, team: "green" }, { key: "e", age: 60, team: "red" }, { key: "r", age: 99, team: "ops" },
  ].map((f) => ({ ...f, email: `${p}-${f.key}@example.com` }));
  for (const f of fixtures) {
    const r = await sl.dev.post(`/admin/user/${sl.systemKey}`, { email: f.email, password: "pw", age: f.age, team: f.team });
    if (r.status !== 200) throw new Error(r.text);
  }
  const plain = (await auth(sl, fixtures[0]!.email, "pw")).body.user_token as string;
  const listRole = uniq("Lister");
  await makeRole(sl, listRole, { users: { permissions: 1 } });
  const reader = (await sl.dev.get(`/admin/user/${sl.systemKey}?query=${qs({ FILTERS: [[{ EQ: [{ email: `${p}-r@example.com` }] }]] })}`)).body[0];
  await addUserToRole(sl, reader.user_id, listRole);
  const rt = (await auth(sl, `${p}-r@example.com`, "pw")).body.user_token as string;
  const R = withToken(sl, rt);
  const list = (q: unknown) => R.get(`/api/v/1/user?query=${qs(q)}`);
  const emails = (r: HttpResponse) => (r.body.Data as any[]).map((u) => u.email).sort();
  const expect = (pred: (f: (typeof fixtures)[number]) => boolean) => fixtures.filter(pred).map((f) => f.email).sort();

  isErr(t, await withToken(sl, plain).get("/api/v/1/user"), 403, undefined, "no users-list read permission");
  isErr(t, await withToken(sl, plain).get(`/api/v/1/user?query=${qs({ FILTERS: [] })}`), 403, undefined, "no permission, with a query");

  const all = await R.get("/api/v/1/user");
  ok200(t, all, "no query");
  t.ok(Array.isArray(all.body.Data), "Data is an array");
  t.type(all.body.Total, "number", "Total is a number");
  t.equal(all.body.Total, fixtures.length);
  t.same(emails(all), expect(() => true));
  const a = (all.body.Data as any[]).find((u) => u.email === `${p}-a@example.com`);
  t.type(a.user_id, "string");
  t.type(a.creation_date, "string");
  t.equal(a.age, 20);
  t.equal(a.team, "red");
  t.notOk("password" in a || "password_hash" in a, "no password material");

  const eq = await list({ FILTERS: [[{ EQ: [{ team: "red" }] }]] });
  ok200(t, eq, "EQ");
  t.same(emails(eq), expect((f) => f.team === "red"));
  t.equal(eq.body.Total, 3);
  const neq = await list({ FILTERS: [[{ NEQ: [{ team: "red" }] }]] });
  t.same(emails(neq), expect((f) => f.team !== "red"), "NEQ");
  const gt = await list({ FILTERS: [[{ GT: [{ age: 40 }] }]] });
  t.same(emails(gt), expect((f) => f.age > 40), "GT");
  const lt = await list({ FILTERS: [[{ LT: [{ age: 40 }] }]] });
  t.same(emails(lt), expect((f) => f.age < 40), "LT");
  const and = await list({ FILTERS: [[{ EQ: [{ team: "red" }] }, { GT: [{ age: 25 }] }]] });
  t.same(emails(and), expect((f) => f.team === "red" && f.age > 25), "conditions in a group are ANDed");
  const or = await list({ FILTERS: [[{ EQ: [{ team: "blue" }] }], [{ EQ: [{ team: "green" }] }]] });
  t.same(emails(or), expect((f) => f.team === "blue" || f.team === "green"), "groups are ORed");
  const re = await list({ FILTERS: [[{ RE: [{ email: `^${p}-[ab]@` }] }]] });
  ok200(t, re, "RE");
  t.same(emails(re), expect((f) => f.key === "a" || f.key === "b"), "RE");

  const desc = await list({ SORT: [{ DESC: "age" }] });
  ok200(t, desc);
  t.same((desc.body.Data as any[]).map((u) => u.age), fixtures.map((f) => f.age).sort((x, y) => y - x), "SORT DESC");
  const asc = await list({ SORT: [{ ASC: "age" }] });
  t.same((asc.body.Data as any[]).map((u) => u.age), fixtures.map((f) => f.age).sort((x, y) => x - y), "SORT ASC");

  const sortedAges = fixtures.map((f) => f.age).sort((x, y) => x - y);
  const seen: number[] = [];
  for (let page = 1; page <= 3; page++) {
    const pg = await list({ SORT: [{ ASC: "age" }], PAGESIZE: 2, PAGENUM: page });
    ok200(t, pg, `page ${page}`);
    t.same((pg.body.Data as any[]).map((u) => u.age), sortedAges.slice((page - 1) * 2, page * 2), `page ${page} contents`);
    t.equal(pg.body.Total, fixtures.length, `Total counts all matches on page ${page}`);
    seen.push(...(pg.body.Data as any[]).map((u) => u.age));
  }
  t.same(seen, sortedAges, "pages cover everything once");
  const past = await list({ SORT: [{ ASC: "age" }], PAGESIZE: 2, PAGENUM: 4 });
  t.same(past.body.Data, [], "page past the end is empty");
  const everything = await list({ PAGESIZE: 0, PAGENUM: 0 });
  t.equal(everything.body.Data.length, fixtures.length, "PAGESIZE 0 + PAGENUM 0 = all");

  const bare = await R.get(`/api/v/1/user?query=${qs([[{ EQ: [{ team: "blue" }] }]])}`);
  ok200(t, bare, "a bare FILTERS array as the query");
  t.same(emails(bare), expect((f) => f.team === "blue"));

  // SQL text in values is data, never SQL
  for (const v of ["red' OR '1'='1", "red\"; DROP TABLE users; --", "' OR 1=1 --", "red') OR ('a'='a"]) {
    const inj = await list({ FILTERS: [[{ EQ: [{ team: v }] }]] });
    ok200(t, inj, `EQ ${v}`);
    t.same(inj.body.Data, [], `no rows for ${v}`);
    t.equal(inj.body.Total, 0);
  }
  const injRe = await list({ FILTERS: [[{ RE: [{ team: "' OR 1=1 --" }] }]] });
  ok200(t, injRe);
  t.same(injRe.body.Data, [], "RE with SQL text");
  t.equal((await R.get("/api/v/1/user")).body.Total, fixtures.length, "table intact afterwards");

  const unk = await list({ FILTERS: [[{ EQ: [{ nosuch: 1 }] }]] });
  isErr(t, unk, 400, 305, "unknown column");
  isErr(t, await list({ FILTERS: [[{ EQ: [{ "team) OR (1=1": "x" }] }]] }), 400, 305, "column name with SQL");
  isErr(t, await list({ SORT: [{ DESC: "nosuch" }] }), 400, 305, "sort on unknown column");
  isErr(t, await list({ FILTERS: [[{ LIKE: [{ team: "red" }] }]] }), 400, 305, "unknown operator");
  isErr(t, await list({ FILTERS: [[{ GT: [{ age: "abc" }] }]] }), 400, undefined, "wrong value type for an int column");
  const bad = await R.get(`/api/v/1/user?query=${encodeURIComponent("{not json")}`);
  isErr(t, bad, 400, undefined, "malformed query JSON");

  const cnt = await R.get(`/api/v/1/user/count?query=${qs([[{ EQ: [{ team: "red" }] }]])}`);
  ok200(t, cnt, "count");
  t.same(cnt.body, { count: fixtures.filter((f) => f.team === "red").length });
  isErr(t, await withToken(sl, plain).get("/api/v/1/user/count"), 403, undefined, "count without permission");
});

// ---- expiry and cross-system tokens -----------------------------------------------------------

t.test("tokens expire after the system's token_ttl", async (t) => {
  const se = await devWithSystemNamed("users-ttl");
  const upd = await se.dev.put("/admin/systemmanagement", { id: se.systemKey, token_ttl: 1 });
  ok200(t, upd, "set token_ttl 1");
  t.equal(upd.body.token_ttl, 1);
  const email = `${uniq("ttl")}@example.com`;
  const reg = await se.app.post("/api/v/1/user/reg", { email, password: "pw" });
  ok200(t, reg);
  t.ok(reg.body.expires_at <= nowSec() + 2, "expires_at reflects the 1 s lifetime");
  t.ok(reg.body.expires_at >= nowSec() - 1, "expires_at is not in the past");

  // a fresh token works at once (retry a few times in case it was issued at the end of a second)
  let worked = false;
  let last: { user_token: string; refresh_token: string } | undefined;
  for (let i = 0; i < 5 && !worked; i++) {
    const a = await auth(se, email, "pw");
    last = a.body;
    worked = (await info(se, a.body.user_token)).status === 200;
  }
  t.ok(worked, "a fresh token is accepted");
  await new Promise((r) => setTimeout(r, 2200));
  isErr(t, await info(se, last!.user_token), 400, 204, "expired token on user/info");
  isErr(t, await withToken(se, last!.user_token).post("/api/v/1/user/checkauth"), 400, 204, "expired token on checkauth");
  const ref = await se.app.post("/api/v/1/user/auth", { grant_type: "refresh_token", refresh_token: last!.refresh_token, access_token: last!.user_token });
  ok200(t, ref, "an expired access token can still be refreshed");
  t.type(ref.body.user_token, "string");
});

t.test("service accounts: cb_service_account gives the user a token that never expires, shown to developers as cb_token", async (t) => {
  const sa = await devWithSystemNamed("users-sa");
  const u = await newUser(sa);
  const set = await sa.dev.put(`/admin/user/${sa.systemKey}`, { user: u.userId, changes: { cb_service_account: true } });
  ok200(t, set, "make it a service account");
  const token = set.body.cb_token as string;
  t.type(token, "string", "the answer carries cb_token");
  t.not(token, u.token, "a token of its own");
  ok200(t, await info(sa, token), "the token works");
  ok200(t, await withToken(sa, token).post("/api/v/1/user/checkauth"), "checkauth");
  const listed = (await sa.dev.get(`/admin/user/${sa.systemKey}`)).body.Data.find((x: any) => x.user_id === u.userId);
  t.equal(listed?.cb_token, token, "the developer's listing shows it");
  t.equal(listed?.cb_service_account, true);
  const own = await info(sa, u.token);
  t.notOk("cb_token" in own.body, "the user's own record does not");
  t.equal(own.body.cb_service_account, true);
  t.notOk(JSON.stringify(own.body).includes(token), "nor anywhere in it");

  // a password change keeps the service token and ends the user's other sessions
  ok200(t, await sa.dev.put(`/admin/user/${sa.systemKey}`, { user: u.userId, changes: { password: "another-password-2" } }), "new password");
  ok200(t, await info(sa, token), "the service token still works");
  isErr(t, await info(sa, u.token), 400, 204, "the session token does not");

  // the user cannot make itself one, nor stretch its own tokens
  isErr(t, await withToken(sa, token).put("/api/v/1/user/info", { cb_service_account: false }), 401, undefined, "a user clearing the flag");
  isErr(t, await withToken(sa, token).put("/api/v/1/user/info", { cb_ttl_override: -1 }), 401, undefined, "a user setting cb_ttl_override");
  isErr(t, await sa.app.post("/api/v/1/user/reg", { email: `${uniq("self")}@example.com`, password: "pw", cb_service_account: true }), 401, undefined, "registering as a service account");
  isErr(t, await sa.dev.put(`/admin/user/${sa.systemKey}`, { user: u.userId, changes: { __service_token: { sealed: "x", hash: "y" } } }), 400, undefined, "the stored token is not a column");

  // clearing the flag revokes the token; setting it again issues a new one
  const cleared = await sa.dev.put(`/admin/user/${sa.systemKey}`, { user: u.userId, changes: { cb_service_account: false } });
  ok200(t, cleared, "clear the flag");
  t.notOk("cb_token" in cleared.body, "no cb_token any more");
  isErr(t, await info(sa, token), 400, 204, "the old token is revoked");
  const again = await sa.dev.put(`/admin/user/${sa.systemKey}`, { user: u.userId, changes: { cb_service_account: true } });
  t.type(again.body.cb_token, "string");
  t.not(again.body.cb_token, token, "a new token");
  ok200(t, await info(sa, again.body.cb_token), "which works");

  // created as one by the developer
  const created = await sa.dev.post(`/admin/user/${sa.systemKey}`, { email: `${uniq("svc")}@example.com`, password: "pw", cb_service_account: true });
  ok200(t, created, "create a service account");
  const row = (await sa.dev.get(`/admin/user/${sa.systemKey}`)).body.Data.find((x: any) => x.user_id === created.body.user_id);
  t.type(row?.cb_token, "string", "its token is listed");
  ok200(t, await info(sa, row.cb_token), "and works");

  // deleting the user revokes it
  ok200(t, await sa.dev.del(`/admin/user/${sa.systemKey}?user=${u.userId}`), "delete the user");
  isErr(t, await info(sa, again.body.cb_token), 400, 204, "the service token died with the user");
});

t.test("cb_ttl_override sets a user's token lifetime", async (t) => {
  const st = await devWithSystemNamed("users-ttl-override");
  const u = await newUser(st);
  ok200(t, await st.dev.put(`/admin/user/${st.systemKey}`, { user: u.userId, changes: { cb_ttl_override: 2 } }), "2 s");
  const a = await auth(st, u.email, u.password);
  ok200(t, a);
  t.ok(a.body.expires_at <= nowSec() + 3 && a.body.expires_at >= nowSec(), `expires_at is about now + 2 s (${a.body.expires_at - nowSec()})`);
  ok200(t, await info(st, a.body.user_token), "works at once");
  await new Promise((r) => setTimeout(r, 3200));
  isErr(t, await info(st, a.body.user_token), 400, 204, "expired after its own lifetime");
  ok200(t, await st.dev.put(`/admin/user/${st.systemKey}`, { user: u.userId, changes: { cb_ttl_override: -1 } }), "-1");
  const b = await auth(st, u.email, u.password);
  t.equal(b.body.expires_at, -1, "never expires");
  const ref = await st.app.post("/api/v/1/user/auth", { grant_type: "refresh_token", refresh_token: b.body.refresh_token, access_token: b.body.user_token });
  t.equal(ref.body.expires_at, -1, "a refresh keeps the override");
  ok200(t, await st.dev.put(`/admin/user/${st.systemKey}`, { user: u.userId, changes: { cb_ttl_override: null } }), "cleared");
  const c = await auth(st, u.email, u.password);
  t.ok(c.body.expires_at > nowSec() + 60, "the system's lifetime again");
});

t.test("a token of system A is refused on system B", async (t) => {
  const a = await newUser(s);
  isErr(t, await a.client.get(`/admin/user/${s2.systemKey}/roles`), 401, 201, "GET /admin/user/{B}/roles");
  isErr(t, await a.client.get(`/api/v/3/user/roles/${s2.systemKey}`), 401, 201, "GET /api/v/3/user/roles/{B}");
  isErr(t, await a.client.post(`/api/v/3/user/roles/${s2.systemKey}`, { name: uniq("x") }), 401, 201, "POST /api/v/3/user/roles/{B}");
  isErr(t, await s2.app.with({ "ClearBlade-UserToken": a.token }).del("/api/v/1/user/info", { user_id: a.userId }), 401, 201, "DELETE user/info with B's key/secret");
  ok200(t, await info(s, a.token), "and it still works on A");
});

// ---- developer administration -----------------------------------------------------------------

t.test("GET /admin/user/{sk} and /count", async (t) => {
  const u = await newUser(s, { age: 77 });
  const all = await s.dev.get(`/admin/user/${s.systemKey}`);
  ok200(t, all, "no query param");
  t.ok(Array.isArray(all.body.Data), "{Data} without a query");
  t.type(all.body.Total, "number");
  t.equal(all.body.Total, all.body.Data.length);
  const mine = (all.body.Data as any[]).find((x) => x.user_id === u.userId);
  t.ok(mine, "lists the new user");
  t.equal(mine?.email, u.email);
  t.equal(mine?.age, 77);

  const q = await s.dev.get(`/admin/user/${s.systemKey}?query=${qs({ FILTERS: [[{ EQ: [{ email: u.email }] }]] })}`);
  ok200(t, q, "with a query");
  t.ok(Array.isArray(q.body), "a bare array with ?query=");
  t.equal(q.body.length, 1);
  t.equal(q.body[0].user_id, u.userId);
  const paged = await s.dev.get(`/admin/user/${s.systemKey}?query=${qs({ PAGESIZE: 1, PAGENUM: 1 })}`);
  t.ok(Array.isArray(paged.body) && paged.body.length === 1, "PAGESIZE 1");

  const c = await s.dev.get(`/admin/user/${s.systemKey}/count`);
  ok200(t, c, "count");
  t.type(c.body.count, "number");
  t.equal(c.body.count, all.body.Total);
  const c1 = await s.dev.get(`/admin/user/${s.systemKey}/count?query=${qs([[{ EQ: [{ email: u.email }] }]])}`);
  t.same(c1.body, { count: 1 }, "count with a FILTERS array");
  isErr(t, await s.dev.get(`/admin/user/${s.systemKey}?query=${qs({ FILTERS: [[{ EQ: [{ nosuch: 1 }] }]] })}`), 400, 305, "unknown column");
  isErr(t, await s.dev.get(`/admin/user/${"f".repeat(30)}`), 404, undefined, "unknown system");
});

t.test("POST /admin/user/{sk} creates a user like registration", async (t) => {
  const email = `${uniq("adm")}@example.com`;
  const r = await s.dev.post(`/admin/user/${s.systemKey}`, { email, password: "adm-pw", age: 5, nickname: "admin-made" });
  ok200(t, r);
  t.type(r.body.user_id, "string");
  t.match(r.body.user_id, HEX_ID);
  t.type(r.body.user_token, "string");
  t.type(r.body.expires_at, "number", "numeric expires_at (Go asserts float64)");
  t.ok(r.body.expires_at > nowSec());
  const me = await info(s, r.body.user_token);
  ok200(t, me, "the token works");
  t.equal(me.body.email, email);
  t.equal(me.body.age, 5);
  ok200(t, await auth(s, email, "adm-pw"), "password set");
  isErr(t, await s.dev.post(`/admin/user/${s.systemKey}`, { email, password: "x" }), 400, undefined, "duplicate");
  isErr(t, await s.dev.post(`/admin/user/${s.systemKey}`, { email: "bad", password: "x" }), 400, undefined, "invalid email");
  const unk = await s.dev.post(`/admin/user/${s.systemKey}`, { email: `${uniq("adm")}@example.com`, password: "x", hat: "top" });
  isErr(t, unk, 400, undefined, "unknown column");
  t.match(unk.body.error.detail, /hat/);
  const wt = await s.dev.post(`/admin/user/${s.systemKey}`, { email: `${uniq("adm")}@example.com`, password: "x", age: "five" });
  isErr(t, wt, 400, undefined, "wrong type");
  t.match(wt.body.error.detail, /age/);
});

t.test("PUT /admin/user/{sk} changes columns, email, password and roles", async (t) => {
  const u = await newUser(s, { age: 1 });
  const roleName = uniq("Ops");
  const roleId = await makeRole(s, roleName, { users: { permissions: 1 } });
  const newEmail = `${uniq("upd")}@example.com`;
  const r = await s.dev.put(`/admin/user/${s.systemKey}`, {
    user: u.userId,
    changes: { age: 2, nickname: "changed", email: newEmail, password: "admin-set-pw", roles: { add: [roleName], delete: ["Authenticated"] } },
  });
  ok200(t, r, "update");
  isErr(t, await info(s, u.token), 400, 204, "old sessions end when the password changes");
  isErr(t, await auth(s, u.email, u.password), 401, undefined, "old credentials rejected");
  const a = await auth(s, newEmail, "admin-set-pw");
  ok200(t, a, "new email + password");
  const me = await info(s, a.body.user_token);
  t.equal(me.body.age, 2);
  t.equal(me.body.nickname, "changed");
  const roles = await s.dev.get(`/admin/user/${s.systemKey}/roles?user=${u.userId}`);
  ok200(t, roles);
  const names = (roles.body as any[]).map((x) => x.Name);
  t.ok(names.includes(roleName), "role added by name");
  t.notOk(names.includes("Authenticated"), "Authenticated removed");
  ok200(t, await withToken(s, a.body.user_token).get("/api/v/1/user"), "the added role's permission applies");

  ok200(t, await s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { roles: { delete: [roleId], add: ["Authenticated"] } } }), "roles by id");
  const names2 = ((await s.dev.get(`/admin/user/${s.systemKey}/roles?user=${u.userId}`)).body as any[]).map((x) => x.Name);
  t.notOk(names2.includes(roleName), "role removed by id");
  t.ok(names2.includes("Authenticated"));

  isErr(t, await s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { age: 99, roles: { add: ["NoSuchRole"] } } }), 404, undefined, "unknown role");
  t.equal((await info(s, a.body.user_token)).body.age, 2, "a failed update changes nothing (atomic)");
  const wt = await s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { age: "x" } });
  isErr(t, wt, 400, undefined, "wrong type");
  t.match(wt.body.error.detail, /age/);
  isErr(t, await s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { ghost: 1 } }), 400, undefined, "unknown column");
  isErr(t, await s.dev.put(`/admin/user/${s.systemKey}`, { user: "0".repeat(30), changes: { age: 3 } }), 404, undefined, "unknown user");
  isErr(t, await s.dev.put(`/admin/user/${s.systemKey}`, { changes: { age: 3 } }), 400, undefined, "no user");
});

t.test("DELETE /admin/user/{sk}?user=", async (t) => {
  const u = await newUser(s);
  const before = (await s.dev.get(`/admin/user/${s.systemKey}/count`)).body.count as number;
  const d = await s.dev.del(`/admin/user/${s.systemKey}?user=${u.userId}`);
  ok200(t, d, "delete");
  t.equal((await s.dev.get(`/admin/user/${s.systemKey}/count`)).body.count, before - 1, "count drops by one");
  isErr(t, await info(s, u.token), 400, 204, "the deleted user's token is rejected");
  isErr(t, await auth(s, u.email, u.password), 401, undefined, "cannot sign in");
  const again = await s.dev.del(`/admin/user/${s.systemKey}?user=${u.userId}`);
  t.ok(again.status === 404 || again.status === 400, `again -> 400/404 (${again.status})`);
  t.ok(isEnvelope(again.body, again.status));
  isErr(t, await s.dev.del(`/admin/user/${s.systemKey}`), 400, undefined, "no user parameter");
  const re = await s.app.post("/api/v/1/user/reg", { email: u.email, password: "again" });
  ok200(t, re, "the email can be registered again");
  t.not(re.body.user_id, u.userId, "as a new user");
});

t.test("user columns: GET / POST / DELETE /admin/user/{sk}/columns", async (t) => {
  const sc = await devWithSystemNamed("users-cols");
  const g = await sc.dev.get(`/admin/user/${sc.systemKey}/columns`);
  ok200(t, g);
  t.ok(Array.isArray(g.body), "an array");
  for (const c of g.body as any[]) {
    t.type(c.ColumnName, "string");
    t.type(c.ColumnType, "string");
    t.type(c.PK, "boolean");
    t.type(c.UserDefined, "boolean", `${c.ColumnName}: UserDefined is a boolean`);
  }
  const byName = (b: any[], n: string) => b.find((c) => c.ColumnName === n);
  t.equal(byName(g.body, "user_id")?.PK, true, "user_id is the PK");
  t.equal(byName(g.body, "user_id")?.UserDefined, false);
  t.equal(byName(g.body, "email")?.UserDefined, false);
  t.equal(byName(g.body, "email")?.PK, false);

  ok200(t, await sc.dev.post(`/admin/user/${sc.systemKey}/columns`, { column_name: "shoe", type: "int" }), "add int column");
  ok200(t, await sc.dev.post(`/admin/user/${sc.systemKey}/columns`, { column_name: "motto", type: "string" }), "add string column");
  const g2 = await sc.dev.get(`/admin/user/${sc.systemKey}/columns`);
  t.equal(byName(g2.body, "shoe")?.UserDefined, true, "custom column is UserDefined");
  t.equal(byName(g2.body, "shoe")?.ColumnType, "int");
  t.equal(byName(g2.body, "shoe")?.PK, false);
  t.equal(byName(g2.body, "motto")?.ColumnType, "string");

  for (const [body, what] of [
    [{ column_name: "c1", type: "potato" }, "bad type"],
    [{ column_name: "c2" }, "no type"],
    [{ column_name: "a b", type: "string" }, "name with a space"],
    [{ column_name: "x;drop", type: "string" }, "name with ;"],
    [{ column_name: "x\"); DROP TABLE users;--", type: "string" }, "name with SQL"],
    [{ column_name: "", type: "string" }, "empty name"],
    [{ type: "string" }, "no name"],
    [{ column_name: "shoe", type: "int" }, "duplicate"],
    [{ column_name: "email", type: "int" }, "built-in name with another type"],
  ] as const) {
    isErr(t, await sc.dev.post(`/admin/user/${sc.systemKey}/columns`, body), 400, undefined, what);
  }
  const g3 = await sc.dev.get(`/admin/user/${sc.systemKey}/columns`);
  t.equal(g3.body.length, g2.body.length, "no column was added by the failures");

  const u = await newUser(sc, { shoe: 42, motto: "hi" });
  t.equal((await u.client.get("/api/v/1/user/info")).body.shoe, 42);
  ok200(t, await sc.dev.del(`/admin/user/${sc.systemKey}/columns?column=shoe`), "delete column");
  const g4 = await sc.dev.get(`/admin/user/${sc.systemKey}/columns`);
  t.notOk(byName(g4.body, "shoe"), "gone from the listing");
  t.ok(byName(g4.body, "motto"), "others kept");
  t.notOk("shoe" in (await u.client.get("/api/v/1/user/info")).body, "gone from user records");
  isErr(t, await sc.app.post("/api/v/1/user/reg", { email: `${uniq("c")}@example.com`, password: "pw", shoe: 1 }), 400, undefined, "the deleted column is unknown now");
  const missing = await sc.dev.del(`/admin/user/${sc.systemKey}/columns?column=shoe`);
  t.ok(missing.status === 404 || missing.status === 400, `deleting a missing column -> 400/404 (${missing.status})`);
  t.ok(isEnvelope(missing.body, missing.status));
  isErr(t, await sc.dev.del(`/admin/user/${sc.systemKey}/columns`), 400, undefined, "no column parameter");
  ok200(t, await sc.dev.post(`/admin/user/${sc.systemKey}/columns`, { column_name: "shoe", type: "string" }), "re-add with another type");
  const fresh = await newUser(sc, { shoe: "eleven" });
  t.equal((await fresh.client.get("/api/v/1/user/info")).body.shoe, "eleven");
});

t.test("the /admin/user routes refuse user tokens, other developers and missing tokens", async (t) => {
  const u = await newUser(s);
  const sk = s.systemKey;
  const calls: [string, string, unknown?][] = [
    ["GET", `/admin/user/${sk}`], ["GET", `/admin/user/${sk}?query=${qs({})}`], ["GET", `/admin/user/${sk}/count`],
    ["POST", `/admin/user/${sk}`, { email: `${uniq("z")}@example.com`, password: "pw" }],
    ["PUT", `/admin/user/${sk}`, { user: u.userId, changes: { age: 9 } }],
    ["DELETE", `/admin/user/${sk}?user=${u.userId}`],
    ["GET", `/admin/user/${sk}/columns`], ["POST", `/admin/user/${sk}/columns`, { column_name: "zz", type: "string" }],
    ["DELETE", `/admin/user/${sk}/columns?column=age`],
  ];
  for (const [m, path, body] of calls) {
    const r = await u.client.req(m, path, body);
    isErr(t, r, 401, undefined, `user token: ${m} ${path.split("?")[0]}`);
    t.ok(r.body.error.code >= 200 && r.body.error.code < 300, "a users/permissions error code");
    isErr(t, await s2.dev.req(m, path, body), 401, 201, `another developer: ${m} ${path.split("?")[0]}`);
      isErr(t, await request(o.url, m, path, { body }), 401, undefined, `no token: ${m} ${path.split("?")[0]}`);
  }
  ok200(t, await info(s, u.token), "the user was not deleted");
  t.equal((await info(s, u.token)).body.age, null, "nor changed");
  const cols = (await s.dev.get(`/admin/user/${sk}/columns`)).body as any[];
  t.ok(cols.some((c) => c.ColumnName === "age"), "age column not deleted");
  t.notOk(cols.some((c) => c.ColumnName === "zz"), "zz column not added");
});

t.test("a developer token with the system key is accepted on the /api/v user routes", async (t) => {
  // dev tokens are used against /api/v/* user endpoints too
  const u = await newUser(s);
  const d = s.dev.with({ "ClearBlade-SystemKey": s.systemKey });
  const l = await d.get(`/api/v/1/user?query=${qs({ FILTERS: [[{ EQ: [{ email: u.email }] }]] })}`);
  ok200(t, l, "GET /api/v/1/user");
  t.equal(l.body.Data?.length, 1);
  t.equal(l.body.Data?.[0]?.user_id, u.userId);
  const c = await d.get("/api/v/1/user/count");
  ok200(t, c, "GET /api/v/1/user/count");
  t.type(c.body.count, "number");
  const m = await d.put("/api/v/4/user/manage", { user: u.userId, changes: { password: "dev-managed-pw" } });
  ok200(t, m, "PUT /api/v/4/user/manage");
  if (m.status === 200) ok200(t, await auth(s, u.email, "dev-managed-pw"), "the managed password works");
  isErr(t, await s2.dev.with({ "ClearBlade-SystemKey": s.systemKey }).get("/api/v/1/user"), 401, 201, "another developer's token");
});

t.test("users cannot give themselves roles or another identity", async (t) => {
  const email = `${uniq("esc")}@example.com`;
  const r = await s.app.post("/api/v/1/user/reg", { email, password: "pw", roles: ["Administrator"] });
  t.ok(r.status === 200 || r.status === 400, `reg with roles -> 200 (ignored) or 400 (${r.status})`);
  if (r.status === 200) {
    const roles = await s.dev.get(`/admin/user/${s.systemKey}/roles?user=${r.body.user_id}`);
    t.notOk((roles.body as any[]).some((x) => x.Name === "Administrator"), "self-registration did not grant Administrator");
    isErr(t, await withToken(s, r.body.user_token).get("/api/v/1/user"), 403, undefined, "and the user has no extra rights");
  } else t.ok(isEnvelope(r.body, 400));

  const u = await newUser(s);
  isErr(t, await u.client.put("/api/v/1/user/info", { roles: { add: ["Administrator"] } }), 400, undefined, "roles in PUT info");
  const roles = await s.dev.get(`/admin/user/${s.systemKey}/roles?user=${u.userId}`);
  t.same((roles.body as any[]).map((x) => x.Name), ["Authenticated"], "roles unchanged");
  const other = await newUser(s);
  isErr(t, await u.client.put("/api/v/1/user/info", { user_id: other.userId, nickname: "hijack" }), 400, undefined, "user_id of another user in PUT info");
  t.equal((await other.client.get("/api/v/1/user/info")).body.nickname, null, "the other user was not touched");
  isErr(t, await u.client.put("/api/v/4/user/manage", { user: u.userId, changes: { roles: { add: ["Administrator"] } } }), 401, undefined, "manage on oneself without the permission");
  t.same(((await s.dev.get(`/admin/user/${s.systemKey}/roles?user=${u.userId}`)).body as any[]).map((x) => x.Name), ["Authenticated"]);
});

t.test("registration while signed in (anonymous token + key/secret, Python SDK style)", async (t) => {
  const anon = await s.app.post("/api/v/1/user/anon");
  const r = await s.app.post("/api/v/1/user/reg", { email: `${uniq("py")}@example.com`, password: "pw" }, { "ClearBlade-UserToken": anon.body.user_token });
  ok200(t, r, "reg with an anon token");
  t.type(r.body.user_token, "string");
  t.not(r.body.user_token, anon.body.user_token, "a new token for the new user");
  isErr(t, await s.app.post("/api/v/1/user/reg", { email: `${uniq("py")}@example.com`, password: "pw" }, { "ClearBlade-UserToken": "bogus" }), 400, 204, "reg with an invalid token");
});

t.test("GET /api/v/1/user/columns with a user token", async (t) => {
  const u = await newUser(s);
  const r = await u.client.get("/api/v/1/user/columns");
  ok200(t, r);
  t.ok(Array.isArray(r.body), "an array");
  const age = (r.body as any[]).find((c) => c.ColumnName === "age");
  t.equal(age?.ColumnType, "int", "custom column listed with its type");
  t.equal(age?.UserDefined, true);
  t.equal((r.body as any[]).find((c) => c.ColumnName === "user_id")?.PK, true);
  for (const c of r.body as any[]) t.type(c.UserDefined, "boolean");
  isErr(t, await s.app.get("/api/v/1/user/columns"), 401, undefined, "no token");
});

t.test("POST /api/v/1/user/info (a user adds a user) needs users-list create", async (t) => {
  const u = await newUser(s);
  const email = `${uniq("added")}@example.com`;
  isErr(t, await u.client.post("/api/v/1/user/info", { email, password: "pw" }), 401, undefined, "without the permission");
  isErr(t, await auth(s, email, "pw"), 401, undefined, "nobody created");
  const role = uniq("Creators");
  await makeRole(s, role, { users: { permissions: 2 } });
  await addUserToRole(s, u.userId, role);
  const c = withToken(s, (await auth(s, u.email, u.password)).body.user_token);
  const r = await c.post("/api/v/1/user/info", { email, password: "pw", age: 3 });
  ok200(t, r, "with users create");
  t.type(r.body.user_id, "string");
  const a = await auth(s, email, "pw");
  ok200(t, a, "the added user can sign in");
  t.equal((await info(s, a.body.user_token)).body.age, 3);
  isErr(t, await c.post("/api/v/1/user/info", { email, password: "pw" }), 400, undefined, "duplicate");
  isErr(t, await c.post("/api/v/1/user/info", { email: `${uniq("added")}@example.com`, password: "pw", roles: ["Administrator"] }), 400, undefined, "a user cannot hand out roles this way");
});

t.test("PUT /api/v/2/user/info {query, changes} updates matching users with users-list update", async (t) => {
  const tag = uniq("bulk");
  const a = await newUser(s, { nickname: tag });
  const b = await newUser(s, { nickname: tag });
  const c = await newUser(s, { nickname: "other" });
  const body = { query: { FILTERS: [[{ EQ: [{ nickname: tag }] }]] }, changes: { age: 64 } };
  isErr(t, await c.client.put("/api/v/2/user/info", body), 401, undefined, "without the permission");
  t.equal((await a.client.get("/api/v/1/user/info")).body.age, null, "nothing changed");
  const role = uniq("Updaters");
  await makeRole(s, role, { users: { permissions: 5 } });
  await addUserToRole(s, c.userId, role);
  const cc = withToken(s, (await auth(s, c.email, c.password)).body.user_token);
  const r = await cc.put("/api/v/2/user/info", body);
  ok200(t, r, "with users update");
  t.equal((await a.client.get("/api/v/1/user/info")).body.age, 64, "first match updated");
  t.equal((await b.client.get("/api/v/1/user/info")).body.age, 64, "second match updated");
  t.equal((await cc.get("/api/v/1/user/info")).body.age, null, "non-matching user untouched");
  isErr(t, await cc.put("/api/v/2/user/info", { query: { FILTERS: [[{ EQ: [{ nickname: tag }] }]] }, changes: { age: "x" } }), 400, undefined, "wrong type");
  isErr(t, await cc.put("/api/v/2/user/info", { query: { FILTERS: [[{ EQ: [{ nickname: tag }] }]] }, changes: { password: "x" } }), 400, undefined, "password via bulk update");
  ok200(t, await auth(s, a.email, a.password), "password unchanged");
  isErr(t, await cc.put("/api/v/2/user/info", { query: { FILTERS: [[{ EQ: [{ nosuch: 1 }] }]] }, changes: { age: 1 } }), 400, 305, "unknown column in the query");
});
