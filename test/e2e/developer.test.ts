// Developer accounts and platform-admin operations:
// /admin/reg, /admin/auth (password and refresh grants), /admin/logout, /admin/checkauth,
// /admin/userinfo, /admin/putpass, /admin/resetpassword, /admin/pkey.
import { rmSync } from "node:fs";
import t, { type Test } from "tap";
import { Client, type HttpResponse, type Outpost, devWithSystem, isEnvelope, newUser, request, startOutpost, uniq } from "./harness.ts";

const ADMIN_EMAIL = "admin@example.com";
const ADMIN_PASSWORD = "adminpw";
const ADMIN_ARGS = ["--admin-email", ADMIN_EMAIL, "--admin-password", ADMIN_PASSWORD];

// error codes of src/core/errors.ts
const E = {
  BAD_JSON: 106, INVALID_ARGUMENT: 111, AUTH_REQUIRED: 202, BAD_CREDENTIALS: 203, INVALID_TOKEN: 204,
  DEVELOPER_ONLY: 205, ADMIN_ONLY: 206, ALREADY_EXISTS: 207, NOT_FOUND: 208,
} as const;

let o: Outpost;
let anon: Client;

t.before(async () => {
  o = await startOutpost({ args: ADMIN_ARGS });
  anon = new Client(o.url);
});
t.teardown(() => o?.stop());

type T = Test;

/** Asserts a ClearBlade error envelope with the given HTTP status and application code. */
function isError(t: T, r: HttpResponse, status: number, code: number, detail?: RegExp, what = "") {
  const p = what ? `${what}: ` : "";
  t.equal(r.status, status, `${p}status ${status}`);
  t.ok(isEnvelope(r.body, status), `${p}error envelope`);
  t.equal(r.body?.error?.code, code, `${p}error code ${code}`);
  if (detail) t.match(r.body?.error?.detail, detail, `${p}detail names the problem`);
}

const nowSec = () => Math.floor(Date.now() / 1000);

/** Checks a developer session body (reg, auth, refresh) the way Go/Py clients read it. */
function isSession(t: T, b: any, what: string) {
  t.type(b?.dev_token, "string", `${what}: dev_token is a string`);
  t.ok(b?.dev_token?.length > 0, `${what}: dev_token not empty`);
  t.type(b?.expires_at, "number", `${what}: expires_at is a JSON number`);
  // UNIX seconds in the future (not milliseconds), or -1 for "never"
  t.ok(b?.expires_at === -1 || (b?.expires_at > nowSec() && b?.expires_at < nowSec() + 10 * 365 * 86400), `${what}: expires_at is future UNIX seconds`);
  t.type(b?.refresh_token, "string", `${what}: refresh_token is a string`);
  t.ok(b?.refresh_token?.length > 0, `${what}: refresh_token not empty`);
  t.not(b?.refresh_token, b?.dev_token, `${what}: refresh token differs from the access token`);
  t.type(b?.user_id, "string", `${what}: user_id is a string`);
  t.ok(b?.user_id?.length > 0, `${what}: user_id not empty`);
  t.equal(b?.is_two_factor, false, `${what}: is_two_factor is false`);
}

interface Dev { email: string; password: string; token: string; refresh: string; id: string; client: Client }

async function register(extra: Record<string, unknown> = {}): Promise<Dev> {
  const email = `${uniq("dev")}@example.com`, password = "pw-" + uniq();
  const r = await anon.post("/admin/reg", { email, password, fname: "Ada", lname: "Lovelace", org: "Engines", ...extra });
  if (r.status !== 200) throw new Error(`register failed: ${r.status} ${r.text}`);
  return { email, password, token: r.body.dev_token, refresh: r.body.refresh_token, id: r.body.user_id, client: devClient(r.body.dev_token) };
}

const devClient = (token: string) => new Client(o.url, { "ClearBlade-DevToken": token });
const login = (email: string, password: string) => anon.post("/admin/auth", { email, password });
const checkauth = (token: string) => devClient(token).post("/admin/checkauth");

// ---- POST /admin/reg -------------------------------------------------------------------------

t.test("POST /admin/reg creates a developer and returns a working session", async (t) => {
  const email = `${uniq("reg")}@example.com`;
  const r = await anon.post("/admin/reg", { email, password: "s3cret!", fname: "Grace", lname: "Hopper", org: "Navy" });
  t.equal(r.status, 200);
  t.match(r.headers["content-type"], /application\/json/);
  isSession(t, r.body, "reg");

  const me = await devClient(r.body.dev_token).get("/admin/userinfo");
  t.equal(me.status, 200, "the registration token works");
  t.equal(me.body.email, email);
  t.equal(me.body.fname, "Grace");
  t.equal(me.body.lname, "Hopper");
  t.equal(me.body.org, "Navy");
  t.equal(me.body.userid, r.body.user_id, "userinfo userid is the reg user_id");

  const again = await login(email, "s3cret!");
  t.equal(again.status, 200, "the registered password signs in");
  t.equal(again.body.user_id, r.body.user_id, "same developer id");

  const other = await anon.post("/admin/reg", { email: `${uniq("reg")}@example.com`, password: "x" });
  t.equal(other.status, 200, "fname, lname and org are optional");
  t.not(other.body.user_id, r.body.user_id, "each developer gets its own id");
  t.not(other.body.dev_token, r.body.dev_token, "each session gets its own token");
});

t.test("POST /admin/reg rejects a duplicate email (any letter case) without touching the account", async (t) => {
  const d = await register();
  const dup = await anon.post("/admin/reg", { email: d.email, password: "another-password" });
  isError(t, dup, 400, E.ALREADY_EXISTS, undefined, "same email");
  const dupCase = await anon.post("/admin/reg", { email: d.email.toUpperCase(), password: "another-password" });
  isError(t, dupCase, 400, E.ALREADY_EXISTS, undefined, "same email, other case");
  t.equal((await login(d.email, d.password)).status, 200, "original password still works");
  isError(t, await login(d.email, "another-password"), 401, E.BAD_CREDENTIALS, undefined, "duplicate's password was not stored");
  t.equal((await checkauth(d.token)).status, 200, "existing session unaffected");
});

t.test("concurrent registrations of one email create exactly one developer", async (t) => {
  const email = `${uniq("race")}@example.com`;
  const rs = await Promise.all(Array.from({ length: 6 }, (_, i) => anon.post("/admin/reg", { email, password: `race-pw-${i}` })));
  const ok = rs.filter((r) => r.status === 200);
  t.equal(ok.length, 1, "one registration wins");
  for (const r of rs.filter((r) => r.status !== 200)) isError(t, r, 400, E.ALREADY_EXISTS, undefined, "the others are duplicates");
  const winner = rs.indexOf(ok[0]!);
  const l = await login(email, `race-pw-${winner}`);
  t.equal(l.status, 200, "the winner's password is the one stored");
  t.equal(l.body.user_id, ok[0]!.body.user_id);
});

t.test("POST /admin/reg validates its body and names the offending field", async (t) => {
  const ok = () => `${uniq("val")}@example.com`;
  const cases: [string, unknown, RegExp][] = [
    ["empty object", {}, /email/],
    ["missing email", { password: "pw" }, /email/],
    ["invalid email", { email: "not-an-email", password: "pw" }, /email/],
    ["email with spaces", { email: "a b@example.com", password: "pw" }, /email/],
    ["email of wrong type", { email: 12345, password: "pw" }, /email/],
    ["missing password", { email: ok() }, /password/],
    ["empty password", { email: ok(), password: "" }, /password/],
    ["password of wrong type", { email: ok(), password: 123456 }, /password/],
    ["unknown field", { email: ok(), password: "pw", favourite_colour: "blue" }, /favourite_colour/],
    ["fname of wrong type", { email: ok(), password: "pw", fname: 7 }, /fname/],
    ["lname of wrong type", { email: ok(), password: "pw", lname: false }, /lname/],
    ["org of wrong type", { email: ok(), password: "pw", org: { a: 1 } }, /org/],
    ["array body", [{ email: ok(), password: "pw" }], /./],
    ["string body", "\"just a string\"", /./],
  ];
  for (const [what, body, field] of cases) {
    const r = await anon.post("/admin/reg", body);
    isError(t, r, 400, E.INVALID_ARGUMENT, field, what);
    const email = body && typeof body === "object" && !Array.isArray(body) ? (body as any).email : undefined;
    if (typeof email === "string" && /@/.test(email)) {
      isError(t, await login(email, "pw"), 401, E.BAD_CREDENTIALS, undefined, `${what}: no account was created`);
    }
  }
  const noBody = await anon.post("/admin/reg");
  isError(t, noBody, 400, E.INVALID_ARGUMENT, /email/, "no body at all");
});

t.test("POST /admin/reg with malformed JSON is a 400 with code 106", async (t) => {
  const email = `${uniq("bad")}@example.com`;
  for (const [text, headers] of [
    [`{"email":"${email}","password":`, {}],
    [`{"email":"${email}","password":"pw",}`, { "Content-Type": "application/json" }],
    ["not json at all", { "Content-Type": "application/json" }],
    [`{email: '${email}', password: 'pw'}`, {}],
  ] as [string, Record<string, string>][]) {
    const r = await anon.post("/admin/reg", text, headers);
    isError(t, r, 400, E.BAD_JSON, undefined, JSON.stringify(text));
  }
  isError(t, await login(email, "pw"), 401, E.BAD_CREDENTIALS, undefined, "nothing was registered");
});

t.test("POST /admin/reg parses JSON whatever the Content-Type (Go clients send none)", async (t) => {
  for (const ct of [undefined, "application/json", "application/json; charset=utf-8", "text/plain", "application/x-www-form-urlencoded"]) {
    const email = `${uniq("ct")}@example.com`;
    const headers: Record<string, string> = ct ? { "Content-Type": ct } : {};
    const r = await anon.post("/admin/reg", JSON.stringify({ email, password: "pw-ct" }), headers);
    t.equal(r.status, 200, `Content-Type ${ct ?? "(none)"}: registered`);
    t.type(r.body?.dev_token, "string", `Content-Type ${ct ?? "(none)"}: dev_token`);
    t.equal((await login(email, "pw-ct")).status, 200, `Content-Type ${ct ?? "(none)"}: password stored`);
  }
});

// ---- POST /admin/auth --------------------------------------------------------------------------

t.test("POST /admin/auth signs in with {email,password} and with {username,password}", async (t) => {
  const d = await register();
  const byEmail = await login(d.email, d.password);
  t.equal(byEmail.status, 200, "email + password");
  isSession(t, byEmail.body, "auth(email)");
  t.equal(byEmail.body.user_id, d.id, "same developer");
  t.not(byEmail.body.dev_token, d.token, "a new session token");

  const byUsername = await anon.post("/admin/auth", { username: d.email, password: d.password });
  t.equal(byUsername.status, 200, "username + password");
  isSession(t, byUsername.body, "auth(username)");
  t.equal(byUsername.body.user_id, d.id);

  const byUpper = await login(d.email.toUpperCase(), d.password);
  t.equal(byUpper.status, 200, "email matching ignores letter case");

  // every session is independent and valid at the same time
  for (const tok of [d.token, byEmail.body.dev_token, byUsername.body.dev_token]) {
    const c = await checkauth(tok);
    t.equal(c.status, 200);
    t.same(c.body, { is_authenticated: true });
  }
  const me = await devClient(byUsername.body.dev_token).get("/admin/userinfo");
  t.equal(me.body.email, d.email, "the token belongs to that developer");
});

t.test("POST /admin/auth rejects bad credentials and bad bodies", async (t) => {
  const d = await register();
  const wrong = await login(d.email, d.password + "x");
  isError(t, wrong, 401, E.BAD_CREDENTIALS, undefined, "wrong password");
  const unknown = await login(`${uniq("nobody")}@example.com`, d.password);
  isError(t, unknown, 401, E.BAD_CREDENTIALS, undefined, "unknown email");
  t.equal(unknown.body.error.detail, wrong.body.error.detail, "unknown email and wrong password are indistinguishable");
  isError(t, await anon.post("/admin/auth", { username: d.email, password: "nope" }), 401, E.BAD_CREDENTIALS, undefined, "wrong password via username");
  isError(t, await anon.post("/admin/auth", { email: d.email }), 400, E.INVALID_ARGUMENT, undefined, "missing password");
  isError(t, await anon.post("/admin/auth", { password: d.password }), 400, E.INVALID_ARGUMENT, undefined, "neither email nor username");
  isError(t, await anon.post("/admin/auth", {}), 400, E.INVALID_ARGUMENT, undefined, "empty body");
  isError(t, await anon.post("/admin/auth"), 400, E.INVALID_ARGUMENT, undefined, "no body");
  isError(t, await anon.post("/admin/auth", { email: d.email, password: 42 }), 400, E.INVALID_ARGUMENT, undefined, "password of wrong type");
  isError(t, await anon.post("/admin/auth", `{"email":"${d.email}",`), 400, E.BAD_JSON, undefined, "malformed JSON");
});

t.test("POST /admin/auth refresh grant issues a new session and retires the old one", async (t) => {
  const d = await register();
  const r = await anon.post("/admin/auth", { grant_type: "refresh_token", refresh_token: d.refresh, access_token: d.token });
  t.equal(r.status, 200, "refresh accepted");
  isSession(t, r.body, "refresh");
  t.equal(r.body.user_id, d.id, "same developer");
  t.not(r.body.dev_token, d.token, "a new access token");
  t.not(r.body.refresh_token, d.refresh, "a new refresh token");

  const fresh = await checkauth(r.body.dev_token);
  t.equal(fresh.status, 200, "new token works");
  t.same(fresh.body, { is_authenticated: true });
  t.equal((await devClient(r.body.dev_token).get("/admin/userinfo")).body.email, d.email, "new token belongs to the same developer");
  isError(t, await checkauth(d.token), 400, E.INVALID_TOKEN, undefined, "old access token stops working");

  const reuse = await anon.post("/admin/auth", { grant_type: "refresh_token", refresh_token: d.refresh, access_token: d.token });
  isError(t, reuse, 401, E.BAD_CREDENTIALS, undefined, "refresh token used a second time");
  const reuseNew = await anon.post("/admin/auth", { grant_type: "refresh_token", refresh_token: d.refresh, access_token: r.body.dev_token });
  isError(t, reuseNew, 401, E.BAD_CREDENTIALS, undefined, "old refresh token with the new access token");
  t.equal((await checkauth(r.body.dev_token)).status, 200, "failed reuse does not harm the current session");

  const again = await anon.post("/admin/auth", { grant_type: "refresh_token", refresh_token: r.body.refresh_token, access_token: r.body.dev_token });
  t.equal(again.status, 200, "the new refresh token can be used in turn");
  t.equal((await checkauth(again.body.dev_token)).status, 200);
});

t.test("POST /admin/auth refresh grant rejects mismatches, wrong grant types and foreign tokens", async (t) => {
  const d = await register();
  const s2 = (await login(d.email, d.password)).body;
  const other = await register();

  const mismatch = await anon.post("/admin/auth", { grant_type: "refresh_token", refresh_token: d.refresh, access_token: s2.dev_token });
  isError(t, mismatch, 401, E.BAD_CREDENTIALS, undefined, "access token of another session of the same developer");
  const mismatch2 = await anon.post("/admin/auth", { grant_type: "refresh_token", refresh_token: d.refresh, access_token: other.token });
  isError(t, mismatch2, 401, E.BAD_CREDENTIALS, undefined, "access token of another developer");
  const garbage = await anon.post("/admin/auth", { grant_type: "refresh_token", refresh_token: "not-a-refresh-token", access_token: d.token });
  isError(t, garbage, 401, E.BAD_CREDENTIALS, undefined, "unknown refresh token");

  for (const gt of ["password", "client_credentials", "REFRESH_TOKEN", ""]) {
    const r = await anon.post("/admin/auth", { grant_type: gt, refresh_token: d.refresh, access_token: d.token });
    isError(t, r, 400, E.INVALID_ARGUMENT, /grant_type/, `grant_type ${JSON.stringify(gt)}`);
  }
  isError(t, await anon.post("/admin/auth", { grant_type: "refresh_token", access_token: d.token }), 400, E.INVALID_ARGUMENT, undefined, "missing refresh_token");
  isError(t, await anon.post("/admin/auth", { grant_type: "refresh_token", refresh_token: d.refresh }), 400, E.INVALID_ARGUMENT, undefined, "missing access_token");
  t.equal((await checkauth(d.token)).status, 200, "rejected refresh attempts leave the session alone");

  // a user's refresh pair is not a developer's
  const sys = await devWithSystem(o, "refresh-sys");
  const u = await newUser(sys);
  const foreign = await anon.post("/admin/auth", { grant_type: "refresh_token", refresh_token: u.reg.refresh_token, access_token: u.token });
  isError(t, foreign, 401, E.BAD_CREDENTIALS, undefined, "user refresh token at /admin/auth");
});

t.test("refresh after logout fails", async (t) => {
  const d = await register();
  t.equal((await d.client.post("/admin/logout")).status, 200);
  const r = await anon.post("/admin/auth", { grant_type: "refresh_token", refresh_token: d.refresh, access_token: d.token });
  isError(t, r, 401, E.BAD_CREDENTIALS);
});

// ---- POST /admin/logout, POST /admin/checkauth ---------------------------------------------------------

t.test("POST /admin/logout invalidates exactly that developer token", async (t) => {
  const d = await register();
  const s2 = (await login(d.email, d.password)).body.dev_token;
  t.equal((await checkauth(d.token)).status, 200, "token works before logout");
  const out = await d.client.post("/admin/logout");
  t.equal(out.status, 200);
  t.type(out.body, "object", "a JSON body");
  isError(t, await checkauth(d.token), 400, E.INVALID_TOKEN, undefined, "checkauth after logout");
  isError(t, await d.client.get("/admin/userinfo"), 400, E.INVALID_TOKEN, undefined, "userinfo after logout");
  isError(t, await d.client.get("/admin/allsystems"), 400, E.INVALID_TOKEN, undefined, "allsystems after logout");
  isError(t, await d.client.post("/admin/logout"), 400, E.INVALID_TOKEN, undefined, "second logout");
  t.equal((await checkauth(s2)).status, 200, "another session of the same developer stays valid");
});

t.test("POST /admin/logout needs a valid developer token", async (t) => {
  isError(t, await anon.post("/admin/logout"), 401, E.AUTH_REQUIRED, undefined, "no token");
  isError(t, await devClient("not-a-token").post("/admin/logout"), 400, E.INVALID_TOKEN, undefined, "garbage token");
  const sys = await devWithSystem(o, "logout-sys");
  const u = await newUser(sys);
  isError(t, await u.client.post("/admin/logout"), 401, E.DEVELOPER_ONLY, undefined, "user token");
  const still = await u.client.post("/api/v/1/user/checkauth");
  t.equal(still.status, 200, "the user token was not logged out by the refused call");
});

t.test("POST /admin/checkauth", async (t) => {
  const d = await register();
  const r = await checkauth(d.token);
  t.equal(r.status, 200);
  t.same(r.body, { is_authenticated: true });
  t.equal(r.body.is_authenticated, true, "a JSON boolean");
  isError(t, await anon.post("/admin/checkauth"), 401, E.AUTH_REQUIRED, undefined, "no token");
  isError(t, await checkauth("bogus-token"), 400, E.INVALID_TOKEN, undefined, "unknown token");
  const sys = await devWithSystem(o, "checkauth-sys");
  const u = await newUser(sys);
  isError(t, await u.client.post("/admin/checkauth"), 401, E.DEVELOPER_ONLY, undefined, "user token");
  isError(t, await sys.dev.with({ "ClearBlade-DevToken": u.token }).post("/admin/checkauth"), 401, E.DEVELOPER_ONLY, undefined, "user token in the dev-token header");
  const anonTok = (await sys.app.post("/api/v/1/user/anon")).body.user_token;
  isError(t, await devClient(anonTok).post("/admin/checkauth"), 401, E.DEVELOPER_ONLY, undefined, "anonymous user token");
});

t.test("developer token header spellings: Platform-DevToken and ClearBlade-DevToken in any case", async (t) => {
  const d = await register();
  for (const h of ["Platform-DevToken", "ClearBlade-DevToken", "platform-devtoken", "clearblade-devtoken", "PLATFORM-DEVTOKEN", "CLEARBLADE-DEVTOKEN", "Clearblade-Devtoken", "pLaTfOrM-dEvToKeN"]) {
    const c = new Client(o.url, { [h]: d.token });
    const r = await c.post("/admin/checkauth");
    t.equal(r.status, 200, `${h}: checkauth`);
    t.same(r.body, { is_authenticated: true }, `${h}: authenticated`);
    const me = await c.get("/admin/userinfo");
    t.equal(me.body?.email, d.email, `${h}: resolves the right developer`);
    isError(t, await new Client(o.url, { [h]: d.token + "x" }).post("/admin/checkauth"), 400, E.INVALID_TOKEN, undefined, `${h}: wrong token`);
  }
  // any token type in any token header; the token itself identifies the caller
  for (const h of ["ClearBlade-UserToken", "Platform-UserToken", "ClearBlade-DeviceToken"]) {
    const me = await new Client(o.url, { [h]: d.token }).get("/admin/userinfo");
    t.equal(me.status, 200, `developer token in ${h}`);
    t.equal(me.body?.email, d.email, `developer token in ${h}: right developer`);
  }
});

// ---- GET/PUT /admin/userinfo ---------------------------------------------------------------------

t.test("GET /admin/userinfo returns the caller's profile", async (t) => {
  const d = await register({ fname: "Katherine", lname: "Johnson", org: "NASA" });
  const r = await d.client.get("/admin/userinfo");
  t.equal(r.status, 200);
  t.equal(r.body.email, d.email);
  t.equal(r.body.fname, "Katherine");
  t.equal(r.body.lname, "Johnson");
  t.equal(r.body.org, "NASA");
  t.equal(r.body.userid, d.id);
  t.equal(r.body.admin, false, "admin is a boolean false for normal developers");
  t.type(r.body.creation_date, "string");
  t.ok(!Number.isNaN(Date.parse(r.body.creation_date)), "creation_date is a date");
  t.notOk("password" in r.body || "password_hash" in r.body, "no password material");
  t.notMatch(JSON.stringify(r.body), /argon2/, "no password hash anywhere");

  const other = await register({ fname: "Other" });
  const r2 = await other.client.get("/admin/userinfo");
  t.equal(r2.body.email, other.email, "each token sees its own profile");
  t.equal(r2.body.fname, "Other");

  isError(t, await anon.get("/admin/userinfo"), 401, E.AUTH_REQUIRED, undefined, "no token");
  isError(t, await devClient("nope").get("/admin/userinfo"), 400, E.INVALID_TOKEN, undefined, "bad token");
  const sys = await devWithSystem(o, "userinfo-sys");
  const u = await newUser(sys);
  isError(t, await u.client.get("/admin/userinfo"), 401, E.DEVELOPER_ONLY, undefined, "user token");
});

t.test("PUT /admin/userinfo accepts and stores every two_factor_method value", async (t) => {
  const d = await register();
  for (const m of ["email", "sms", "email_sms", "email"]) {
    const r = await d.client.put("/admin/userinfo", { two_factor_method: m });
    t.equal(r.status, 200, `${m}: accepted`);
    t.equal(r.body?.two_factor_method, m, `${m}: echoed`);
    const g = await d.client.get("/admin/userinfo");
    t.equal(g.body.two_factor_method, m, `${m}: stored`);
  }
  const s2 = await login(d.email, d.password);
  t.equal((await devClient(s2.body.dev_token).get("/admin/userinfo")).body.two_factor_method, "email", "visible from another session");
});

t.test("PUT /admin/userinfo rejects other two_factor_method values, unknown fields and wrong types", async (t) => {
  const d = await register({ fname: "Before" });
  t.equal((await d.client.put("/admin/userinfo", { two_factor_method: "sms" })).status, 200);
  for (const bad of ["voice", "", "EMAIL", "email sms", "totp", 1, null, ["email"]]) {
    const r = await d.client.put("/admin/userinfo", { two_factor_method: bad });
    isError(t, r, 400, E.INVALID_ARGUMENT, /two_factor_method/, `two_factor_method ${JSON.stringify(bad)}`);
  }
  t.equal((await d.client.get("/admin/userinfo")).body.two_factor_method, "sms", "stored value unchanged by the rejected updates");

  const unk = await d.client.put("/admin/userinfo", { fname: "After", nickname: "x" });
  isError(t, unk, 400, E.INVALID_ARGUMENT, /nickname/, "unknown field");
  isError(t, await d.client.put("/admin/userinfo", { password: "new" }), 400, E.INVALID_ARGUMENT, /password/, "password is not changed through userinfo");
  isError(t, await d.client.put("/admin/userinfo", { admin: true }), 400, E.INVALID_ARGUMENT, /admin/, "admin cannot be set through userinfo");
  isError(t, await d.client.put("/admin/userinfo", { fname: 5 }), 400, E.INVALID_ARGUMENT, /fname/, "fname of wrong type");
  isError(t, await d.client.put("/admin/userinfo", { two_factor_enabled: "yes" }), 400, E.INVALID_ARGUMENT, /two_factor_enabled/, "two_factor_enabled of wrong type");
  isError(t, await d.client.put("/admin/userinfo", { email: "not-an-email" }), 400, E.INVALID_ARGUMENT, /email/, "invalid email");
  isError(t, await d.client.put("/admin/userinfo", "{\"fname\":"), 400, E.BAD_JSON, undefined, "malformed JSON");
  const after = await d.client.get("/admin/userinfo");
  t.equal(after.body.fname, "Before", "nothing of a rejected body was applied");
  t.equal(after.body.admin, false, "still not an admin");

  const sys = await devWithSystem(o, "putinfo-sys");
  const u = await newUser(sys);
  isError(t, await u.client.put("/admin/userinfo", { fname: "x" }), 401, E.DEVELOPER_ONLY, undefined, "user token");
  isError(t, await anon.put("/admin/userinfo", { fname: "x" }), 401, E.AUTH_REQUIRED, undefined, "no token");
});

t.test("PUT /admin/userinfo updates profile fields, 2FA enablement and email", async (t) => {
  const d = await register();
  const r = await d.client.put("/admin/userinfo", { fname: "New", lname: "Name", org: "Org2", phone: "+15550100" });
  t.equal(r.status, 200);
  const g = await d.client.get("/admin/userinfo");
  t.equal(g.body.fname, "New");
  t.equal(g.body.lname, "Name");
  t.equal(g.body.org, "Org2");
  t.equal(g.body.phone, "+15550100");
  t.equal(g.body.email, d.email, "untouched fields keep their values");

  isError(t, await d.client.put("/admin/userinfo", { two_factor_enabled: true }), 400, E.INVALID_ARGUMENT, /two_factor_method/, "enabling 2FA without a method");
  // two-factor takes effect (twofactor.test.ts): with no email or SMS service to send codes, it stays off
  isError(t, await d.client.put("/admin/userinfo", { two_factor_enabled: true, two_factor_method: "email_sms" }), 400, E.INVALID_ARGUMENT, /email service is not configured/, "enabling 2FA with nothing to send codes");
  const g2 = await d.client.get("/admin/userinfo");
  t.equal(g2.body.two_factor_enabled, false);
  t.equal(g2.body.two_factor_enabled_instance, false, "not required of every developer");

  const taken = await register();
  isError(t, await d.client.put("/admin/userinfo", { email: taken.email }), 400, E.ALREADY_EXISTS, undefined, "email of another developer");
  const newEmail = `${uniq("moved")}@example.com`;
  t.equal((await d.client.put("/admin/userinfo", { email: newEmail })).status, 200, "email change");
  t.equal((await d.client.get("/admin/userinfo")).body.email, newEmail);
  t.equal((await login(newEmail, d.password)).status, 200, "signs in with the new email");
  isError(t, await login(d.email, d.password), 401, E.BAD_CREDENTIALS, undefined, "old email no longer signs in");
  const reuse = await anon.post("/admin/reg", { email: d.email, password: "pw" });
  t.equal(reuse.status, 200, "the old email is free again");
});

// ---- PUT /admin/putpass ------------------------------------------------------------------------

t.test("PUT /admin/putpass changes the password and ends the developer's other sessions", async (t) => {
  const d = await register();
  const s2 = (await login(d.email, d.password)).body.dev_token;
  const s3 = (await login(d.email, d.password)).body.dev_token;
  const bystander = await register();

  const wrong = await d.client.put("/admin/putpass", { old_password: d.password + "-wrong", new_password: "brand-new-pw" });
  isError(t, wrong, 401, E.BAD_CREDENTIALS, undefined, "wrong old password");
  t.equal((await login(d.email, d.password)).status, 200, "password unchanged after the refused change");
  isError(t, await login(d.email, "brand-new-pw"), 401, E.BAD_CREDENTIALS, undefined, "new password not set after the refused change");
  t.equal((await checkauth(s2)).status, 200, "other sessions survive a refused change");

  isError(t, await d.client.put("/admin/putpass", { old_password: d.password }), 400, E.INVALID_ARGUMENT, /new_password/, "missing new_password");
  isError(t, await d.client.put("/admin/putpass", { old_password: d.password, new_password: "" }), 400, E.INVALID_ARGUMENT, /new_password/, "empty new_password");
  isError(t, await d.client.put("/admin/putpass", { old_password: d.password, new_password: 99 }), 400, E.INVALID_ARGUMENT, /new_password/, "new_password of wrong type");
  isError(t, await d.client.put("/admin/putpass", { old_password: d.password, new_password: "x", extra: 1 }), 400, E.INVALID_ARGUMENT, /extra/, "unknown field");
  isError(t, await d.client.put("/admin/putpass", "{"), 400, E.BAD_JSON, undefined, "malformed JSON");
  t.equal((await login(d.email, d.password)).status, 200, "password unchanged after the invalid bodies");

  const ok = await d.client.put("/admin/putpass", { old_password: d.password, new_password: "brand-new-pw" });
  t.equal(ok.status, 200, "password changed");
  const mine = await checkauth(d.token);
  t.equal(mine.status, 200, "the caller's own token keeps working");
  t.same(mine.body, { is_authenticated: true });
  isError(t, await checkauth(s2), 400, E.INVALID_TOKEN, undefined, "other session logged out");
  isError(t, await checkauth(s3), 400, E.INVALID_TOKEN, undefined, "third session logged out");
  t.equal((await checkauth(bystander.token)).status, 200, "other developers are not affected");
  isError(t, await login(d.email, d.password), 401, E.BAD_CREDENTIALS, undefined, "old password no longer works");
  const fresh = await login(d.email, "brand-new-pw");
  t.equal(fresh.status, 200, "new password works");
  t.equal(fresh.body.user_id, d.id);
  isError(t, await d.client.put("/admin/putpass", { old_password: d.password, new_password: "x" }), 401, E.BAD_CREDENTIALS, undefined, "old password is no longer the old_password");

  const sys = await devWithSystem(o, "putpass-sys");
  const u = await newUser(sys);
  isError(t, await u.client.put("/admin/putpass", { old_password: u.password, new_password: "zzz" }), 401, E.DEVELOPER_ONLY, undefined, "user token");
  isError(t, await anon.put("/admin/putpass", { old_password: "a", new_password: "b" }), 401, E.AUTH_REQUIRED, undefined, "no token");
});

// ---- platform admin: POST /admin/resetpassword, GET /admin/pkey -------------------------------------

async function adminSession(base = o.url) {
  const r = await request(base, "POST", "/admin/auth", { body: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
  if (r.status !== 200) throw new Error(`admin login failed: ${r.status} ${r.text}`);
  return new Client(base, { "ClearBlade-DevToken": r.body.dev_token });
}

t.test("the platform admin given on the command line can sign in and is marked admin", async (t) => {
  const r = await login(ADMIN_EMAIL, ADMIN_PASSWORD);
  t.equal(r.status, 200);
  isSession(t, r.body, "admin auth");
  const me = await devClient(r.body.dev_token).get("/admin/userinfo");
  t.equal(me.body.email, ADMIN_EMAIL);
  t.equal(me.body.admin, true);
  isError(t, await login(ADMIN_EMAIL, "wrong"), 401, E.BAD_CREDENTIALS, undefined, "admin wrong password");
  isError(t, await anon.post("/admin/reg", { email: ADMIN_EMAIL, password: "takeover" }), 400, E.ALREADY_EXISTS, undefined, "admin email cannot be re-registered");
});

t.test("GET /admin/pkey: platform admin only, stable value", async (t) => {
  const admin = await adminSession();
  const a = await admin.get("/admin/pkey");
  t.equal(a.status, 200);
  t.type(a.body.pkey, "string", "pkey is a string");
  t.ok(a.body.pkey.length >= 16, "pkey is not trivially short");
  const b = await admin.get("/admin/pkey");
  t.equal(b.body.pkey, a.body.pkey, "same value on a repeated call");
  const admin2 = await adminSession();
  t.equal((await admin2.get("/admin/pkey")).body.pkey, a.body.pkey, "same value from another admin session");

  const d = await register();
  const dr = await d.client.get("/admin/pkey");
  isError(t, dr, 401, E.ADMIN_ONLY, undefined, "normal developer");
  t.notMatch(dr.text, a.body.pkey, "the key is not leaked in the error");
  isError(t, await anon.get("/admin/pkey"), 401, E.AUTH_REQUIRED, undefined, "no token");
  isError(t, await devClient("junk").get("/admin/pkey"), 400, E.INVALID_TOKEN, undefined, "bad token");
  const sys = await devWithSystem(o, "pkey-sys");
  const u = await newUser(sys);
  isError(t, await u.client.get("/admin/pkey"), 401, E.DEVELOPER_ONLY, undefined, "user token");
});

t.test("POST /admin/resetpassword: the admin sets a developer's password and ends their sessions", async (t) => {
  const admin = await adminSession();
  const d = await register();
  const s2 = (await login(d.email, d.password)).body.dev_token;
  const bystander = await register();

  const r = await admin.post("/admin/resetpassword", { email: d.email, new_password: "reset-pw-1" });
  t.equal(r.status, 200);
  isError(t, await checkauth(d.token), 400, E.INVALID_TOKEN, undefined, "victim's session ended");
  isError(t, await checkauth(s2), 400, E.INVALID_TOKEN, undefined, "victim's other session ended");
  t.equal((await checkauth(bystander.token)).status, 200, "other developers keep their sessions");
  t.equal((await admin.post("/admin/checkauth")).status, 200, "the admin's own session continues");
  isError(t, await login(d.email, d.password), 401, E.BAD_CREDENTIALS, undefined, "old password rejected");
  const n = await login(d.email, "reset-pw-1");
  t.equal(n.status, 200, "new password works");
  t.equal(n.body.user_id, d.id);

  const r2 = await admin.post("/admin/resetpassword", { email: d.email.toUpperCase(), password: "reset-pw-2" });
  t.equal(r2.status, 200, "`password` field and any email case accepted");
  t.equal((await login(d.email, "reset-pw-2")).status, 200, "second reset applied");
  isError(t, await login(d.email, "reset-pw-1"), 401, E.BAD_CREDENTIALS, undefined, "first reset password replaced");

  isError(t, await admin.post("/admin/resetpassword", { email: `${uniq("ghost")}@example.com`, new_password: "x" }), 404, E.NOT_FOUND, undefined, "unknown developer");
  isError(t, await admin.post("/admin/resetpassword", { email: d.email }), 400, E.INVALID_ARGUMENT, /password/, "no new password");
  isError(t, await admin.post("/admin/resetpassword", { email: d.email, new_password: "" }), 400, E.INVALID_ARGUMENT, /password/, "empty new password");
  isError(t, await admin.post("/admin/resetpassword", { new_password: "x" }), 400, E.INVALID_ARGUMENT, /email/, "no email");
  isError(t, await admin.post("/admin/resetpassword", { email: "nope", new_password: "x" }), 400, E.INVALID_ARGUMENT, /email/, "invalid email");
  isError(t, await admin.post("/admin/resetpassword", { email: d.email, new_password: "x", sneaky: true }), 400, E.INVALID_ARGUMENT, /sneaky/, "unknown field");
  isError(t, await admin.post("/admin/resetpassword", "{\"email\""), 400, E.BAD_JSON, undefined, "malformed JSON");
  t.equal((await login(d.email, "reset-pw-2")).status, 200, "refused resets changed nothing");
});

t.test("POST /admin/resetpassword is refused to anyone but the platform admin", async (t) => {
  const victim = await register();
  const attacker = await register();
  isError(t, await attacker.client.post("/admin/resetpassword", { email: victim.email, new_password: "pwned" }), 401, E.ADMIN_ONLY, undefined, "normal developer");
  isError(t, await attacker.client.post("/admin/resetpassword", { email: ADMIN_EMAIL, new_password: "pwned" }), 401, E.ADMIN_ONLY, undefined, "normal developer on the admin");
  isError(t, await anon.post("/admin/resetpassword", { email: victim.email, new_password: "pwned" }), 401, E.AUTH_REQUIRED, undefined, "no token");
  const sys = await devWithSystem(o, "reset-sys");
  const u = await newUser(sys);
  isError(t, await u.client.post("/admin/resetpassword", { email: victim.email, new_password: "pwned" }), 401, E.DEVELOPER_ONLY, undefined, "user token");
  t.equal((await login(victim.email, victim.password)).status, 200, "victim's password unchanged");
  isError(t, await login(victim.email, "pwned"), 401, E.BAD_CREDENTIALS);
  t.equal((await checkauth(victim.token)).status, 200, "victim's session intact");
  t.equal((await login(ADMIN_EMAIL, ADMIN_PASSWORD)).status, 200, "admin password unchanged");
});

t.test("GET /admin/pkey survives a restart on the same data directory", async (t) => {
  const first = await startOutpost({ args: ADMIN_ARGS, keepData: true });
  const dataDir = first.dataDir;
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  let second: Outpost | undefined;
  t.teardown(async () => { await first.stop(); await second?.stop(); });

  const k1 = (await (await adminSession(first.url)).get("/admin/pkey")).body.pkey;
  t.type(k1, "string");
  const devEmail = `${uniq("persist")}@example.com`;
  t.equal((await request(first.url, "POST", "/admin/reg", { body: { email: devEmail, password: "persist-pw" } })).status, 200);
  t.equal(await first.stop(), 0, "first server stopped cleanly");

  second = await startOutpost({ args: ADMIN_ARGS, dataDir });
  const admin = await adminSession(second.url);
  const k2 = (await admin.get("/admin/pkey")).body.pkey;
  t.equal(k2, k1, "same license key after restart");
  t.equal((await request(second.url, "POST", "/admin/auth", { body: { email: devEmail, password: "persist-pw" } })).status, 200, "developers persist too");

  const other = await startOutpost({ args: ADMIN_ARGS });
  t.teardown(() => other.stop());
  const k3 = (await (await adminSession(other.url)).get("/admin/pkey")).body.pkey;
  t.type(k3, "string");
  t.not(k3, k1, "a fresh installation has its own key");
});

// ---- SQL text is data --------------------------------------------------------------------------

t.test("SQL text in developer fields is stored verbatim and harmless", async (t) => {
  const evil = {
    fname: "x'); DROP TABLE developers;--",
    lname: "Robert\"); DELETE FROM tokens; --",
    org: "' OR '1'='1",
  };
  const email = `o'brien.${uniq()}@example.com`;
  const r = await anon.post("/admin/reg", { email, password: "p' OR '1'='1", ...evil });
  t.equal(r.status, 200);
  const me = await devClient(r.body.dev_token).get("/admin/userinfo");
  t.equal(me.body.fname, evil.fname);
  t.equal(me.body.lname, evil.lname);
  t.equal(me.body.org, evil.org);
  t.equal(me.body.email, email);
  t.equal((await login(email, "p' OR '1'='1")).status, 200, "quote-laden password works");
  isError(t, await login(email, "' OR '1'='1"), 401, E.BAD_CREDENTIALS, undefined, "injection as password does not sign in");
  isError(t, await login("' OR '1'='1", "' OR '1'='1"), 401, E.BAD_CREDENTIALS, undefined, "injection as email does not sign in");

  const upd = await devClient(r.body.dev_token).put("/admin/userinfo", { fname: "'; UPDATE developers SET admin = 1; --" });
  t.equal(upd.status, 200);
  const me2 = await devClient(r.body.dev_token).get("/admin/userinfo");
  t.equal(me2.body.fname, "'; UPDATE developers SET admin = 1; --");
  t.equal(me2.body.admin, false, "no privilege gained");
  const d = await register();
  t.equal((await checkauth(d.token)).status, 200, "other developers and tokens still exist");
  t.equal((await login(ADMIN_EMAIL, ADMIN_PASSWORD)).status, 200, "admin still exists");
});
