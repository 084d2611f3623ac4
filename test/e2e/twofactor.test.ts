// Developer two-factor sign-in and instance settings, black-box: /admin/settings/security,
// /admin/settings/email-service (an SMTP server started here, in the test process, receives the
// codes), /admin/settings/sms-service (an HTTP gateway started here), PUT /admin/userinfo turning
// two-factor on, POST /admin/auth answering the challenge, POST /admin/auth/verify.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import t, { type Test } from "tap";
import { Client, type Outpost, devWithSystem, freePort, isErr, must, newUser, ok200, request, startOutpost, uniq } from "./harness.ts";

const ADMIN_EMAIL = "admin@example.com";
const ADMIN_PASSWORD = "adminpw";

// error codes of src/core/errors.ts
const E = { INVALID_ARGUMENT: 111, AUTH_REQUIRED: 202, BAD_CREDENTIALS: 203, INVALID_TOKEN: 204, DEVELOPER_ONLY: 205, ADMIN_ONLY: 206, ALREADY_EXISTS: 207, NOT_FOUND: 208, DELIVERY_FAILED: 211, THROTTLED: 429 } as const;

interface Received { to: string[]; data: string }
const inbox: Received[] = [];
let smtp: SMTPServer;
let smtpPort = 0;
const smtpLogins: string[] = [];

interface Sms { auth: string; form: URLSearchParams }
const texts: Sms[] = [];
let gateway: http.Server;
let gatewayUrl = "";

let o: Outpost;
let admin: Client;
let anon: Client;

t.before(async () => {
  smtp = new SMTPServer({
    disabledCommands: ["STARTTLS"], authOptional: true, logger: false,
    onAuth(auth, _session, cb) {
      smtpLogins.push(`${auth.username}:${auth.password}`);
      cb(null, { user: auth.username });
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => { inbox.push({ to: session.envelope.rcptTo.map((r) => r.address), data: Buffer.concat(chunks).toString("utf8") }); cb(); });
    },
  });
  await new Promise<void>((res) => smtp.listen(0, "127.0.0.1", () => res()));
  smtpPort = (smtp.server.address() as AddressInfo).port;
  gateway = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      texts.push({ auth: req.headers.authorization ?? "", form: new URLSearchParams(body) });
      res.writeHead(201, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((res) => gateway.listen(0, "127.0.0.1", () => res()));
  gatewayUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}/2010-04-01/Accounts/AC1/Messages.json`;
  o = await startOutpost({ args: ["--admin-email", ADMIN_EMAIL, "--admin-password", ADMIN_PASSWORD] });
  anon = new Client(o.url);
  const a = await must(anon.post("/admin/auth", { email: ADMIN_EMAIL, password: ADMIN_PASSWORD }), "admin sign-in");
  admin = anon.with({ "ClearBlade-DevToken": a.dev_token });
});
t.teardown(async () => {
  await o?.stop();
  await new Promise<void>((res) => smtp.close(() => res()));
  await new Promise<void>((res) => gateway.close(() => res()));
});

/** The code of the newest message to `to` (waiting for it to arrive). */
async function codeMailedTo(to: string, after: number): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const m = inbox.slice(after).find((x) => x.to.includes(to));
    if (m) {
      const code = /code is (\d{6})/.exec(m.data.replace(/=\r?\n/g, ""))?.[1];
      if (!code) throw new Error(`no code in the message: ${m.data}`);
      return code;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no message reached ${to}`);
}

const emailService = () => ({
  host: "127.0.0.1", port: String(smtpPort), username: "mailer", password: "smtp-secret", from: "outpost@example.com",
  protocol: "SMTP", encryption_type: "NONE", two_factor_subject: "Sign-in code", two_factor_message: "Your code is $CODE. It lasts five minutes.",
});

/** A developer (with a system) that has turned two-factor on by email. */
async function devWith2fa(t: Test, method = "email", extra: Record<string, unknown> = {}) {
  const s = await devWithSystem(o, "tf");
  ok200(t, await s.dev.put("/admin/userinfo", { two_factor_enabled: true, two_factor_method: method, ...extra }), "turn two-factor on");
  return s;
}

t.test("instance settings are the platform admin's", async (t) => {
  const s = await devWithSystem(o, "plain");
  for (const [m, path] of [["GET", "/admin/settings/security"], ["PUT", "/admin/settings/security"], ["GET", "/admin/settings/email-service"], ["POST", "/admin/settings/email-service"],
    ["PUT", "/admin/settings/email-service"], ["DELETE", "/admin/settings/email-service"], ["POST", "/admin/settings/email-service/test"], ["GET", "/admin/settings/sms-service"],
    ["POST", "/admin/settings/sms-service"], ["DELETE", "/admin/settings/sms-service"], ["POST", "/admin/settings/sms-service/test"]] as const) {
    isErr(t, await s.dev.req(m, path, m === "GET" || m === "DELETE" ? undefined : {}), 401, E.ADMIN_ONLY, `${m} ${path} by a developer`);
  }
  const u = await newUser(s);
  isErr(t, await u.client.get("/admin/settings/security"), 401, E.DEVELOPER_ONLY, "a user");
  isErr(t, await anon.get("/admin/settings/security"), 401, E.AUTH_REQUIRED, "no token");
  const sec = await must(admin.get("/admin/settings/security"), "admin reads");
  t.same(sec, { developer_token_ttl: 432000, two_factor_auth: { enabled: false } }, "defaults: --dev-token-ttl, two-factor not required");
});

t.test("security settings: bounds and bad bodies; the TTL applies to new developer tokens", async (t) => {
  isErr(t, await admin.put("/admin/settings/security", { developer_token_ttl: 86399 }), 400, E.INVALID_ARGUMENT, "below 86400");
  isErr(t, await admin.put("/admin/settings/security", { developer_token_ttl: 2592001 }), 400, E.INVALID_ARGUMENT, "above 2592000");
  isErr(t, await admin.put("/admin/settings/security", { developer_token_ttl: "86400" }), 400, E.INVALID_ARGUMENT, "a string");
  isErr(t, await admin.put("/admin/settings/security", { developer_token_ttl: 90000.5 }), 400, E.INVALID_ARGUMENT, "a fraction");
  isErr(t, await admin.put("/admin/settings/security", { two_factor_auth: true }), 400, E.INVALID_ARGUMENT, "two_factor_auth not an object");
  isErr(t, await admin.put("/admin/settings/security", { ttl: 90000 }), 400, E.INVALID_ARGUMENT, "an unknown field");
  isErr(t, await admin.put("/admin/settings/security", { two_factor_auth: { enabled: true } }), 400, E.INVALID_ARGUMENT, "required of all with no email service: nobody could sign in");
  const put = await must(admin.put("/admin/settings/security", { developer_token_ttl: 86400 }), "set the TTL");
  t.same(put, { developer_token_ttl: 86400, two_factor_auth: { enabled: false } }, "answers the settings");
  const s = await devWithSystem(o, "ttl");
  const before = Math.floor(Date.now() / 1000);
  const a = await must(anon.post("/admin/auth", { email: s.email, password: s.password }), "sign in");
  t.ok(a.expires_at >= before + 86400 && a.expires_at <= before + 86400 + 5, `a new token lives 86400 s (expires_at ${a.expires_at - before} s from now)`);
  const r = await must(anon.post("/admin/auth", { grant_type: "refresh_token", refresh_token: a.refresh_token, access_token: a.dev_token }), "refresh");
  t.ok(r.expires_at <= Math.floor(Date.now() / 1000) + 86400 + 5, "a refreshed token too");
  ok200(t, await admin.put("/admin/settings/security", { developer_token_ttl: 432000 }), "back to the default");
});

t.test("email service: bad bodies, create, read without the password, test message, update", async (t) => {
  isErr(t, await admin.post("/admin/settings/email-service", { ...emailService(), host: undefined }), 400, E.INVALID_ARGUMENT, "no host");
  isErr(t, await admin.post("/admin/settings/email-service", { ...emailService(), port: "70000" }), 400, E.INVALID_ARGUMENT, "a port out of range");
  isErr(t, await admin.post("/admin/settings/email-service", { ...emailService(), encryption_type: "SSL" }), 400, E.INVALID_ARGUMENT, "an unknown encryption");
  isErr(t, await admin.post("/admin/settings/email-service", { ...emailService(), protocol: "IMAP" }), 400, E.INVALID_ARGUMENT, "a protocol other than SMTP");
  isErr(t, await admin.post("/admin/settings/email-service", { ...emailService(), two_factor_message: "no code here" }), 400, E.INVALID_ARGUMENT, "a message without $CODE");
  isErr(t, await admin.post("/admin/settings/email-service", { ...emailService(), colour: "red" }), 400, E.INVALID_ARGUMENT, "an unknown field");
  isErr(t, await admin.get("/admin/settings/email-service"), 404, E.NOT_FOUND, "not configured yet");
  isErr(t, await admin.put("/admin/settings/email-service", { host: "x" }), 404, E.NOT_FOUND, "update before create");
  const s = await devWithSystem(o, "early");
  isErr(t, await s.dev.put("/admin/userinfo", { two_factor_enabled: true, two_factor_method: "email" }), 400, E.INVALID_ARGUMENT, "turning two-factor on with no email service");
  t.equal((await must(s.dev.get("/admin/userinfo"), "info")).two_factor_enabled, false, "still off");

  ok200(t, await admin.post("/admin/settings/email-service", emailService()), "create");
  isErr(t, await admin.post("/admin/settings/email-service", emailService()), 400, E.ALREADY_EXISTS, "create twice");
  const got = await must(admin.get("/admin/settings/email-service"), "read");
  t.equal(got.host, "127.0.0.1");
  t.equal(got.port, String(smtpPort), "port as a string, as ClearBlade has it");
  t.equal(got.encryption_type, "NONE");
  t.notOk("password" in got, "the password is never read back");
  t.equal(got.password_set, true, "but whether one is set");
  const n = inbox.length;
  isErr(t, await admin.post("/admin/settings/email-service/test", { recipient: "not-an-email" }), 400, E.INVALID_ARGUMENT, "a recipient that is not an address");
  ok200(t, await admin.post("/admin/settings/email-service/test", { recipient: "ops@example.com" }), "test message");
  t.ok(inbox.slice(n).some((m) => m.to.includes("ops@example.com") && /test message/.test(m.data)), "the SMTP server received it");
  t.ok(smtpLogins.includes("mailer:smtp-secret"), "signed in to the SMTP server with the configured (sealed, then opened) password");
  ok200(t, await admin.put("/admin/settings/email-service", { from: "codes@example.com" }), "update one field");
  const after = await must(admin.get("/admin/settings/email-service"), "read again");
  t.equal(after.from, "codes@example.com");
  t.equal(after.host, "127.0.0.1", "the rest kept");
});

t.test("two-factor by email: challenge, wrong code, right code, code reused", async (t) => {
  const s = await devWith2fa(t);
  const info = await must(s.dev.get("/admin/userinfo"), "info");
  t.equal(info.two_factor_enabled, true);
  t.equal(info.two_factor_method, "email");
  t.equal(info.two_factor_enabled_instance, false, "not required of all");
  const n = inbox.length;
  const ch = await must(anon.post("/admin/auth", { email: s.email, password: s.password }), "sign in");
  t.equal(ch.is_two_factor, true, "is_two_factor");
  t.equal(ch.dev_token, "", "dev_token an empty string (Go reads it as a string)");
  for (const k of ["next_step_url", "intermediate_token", "two_factor_method", "otp_id", "otp_issued"]) t.type(ch[k], "string", `${k} is a string`);
  t.equal(ch.two_factor_method, "email");
  t.notOk(ch.refresh_token, "no refresh token before the code");
  const code = await codeMailedTo(s.email, n);
  const mid = anon.with({ "ClearBlade-DevToken": ch.intermediate_token });
  isErr(t, await mid.get("/admin/userinfo"), 400, E.INVALID_TOKEN, "the intermediate token is not a session");
  const wrong = code === "000000" ? "000001" : "000000";
  const w = await mid.post("/admin/auth/verify", { code: wrong, two_factor_method: "email", otp_id: ch.otp_id, otp_issued: ch.otp_issued });
  isErr(t, w, 401, E.BAD_CREDENTIALS, "a wrong code");
  t.match(w.body.error.detail, /4 attempts left/, "says how many attempts are left");
  isErr(t, await anon.post("/admin/auth/verify", { code, otp_id: ch.otp_id }), 401, E.AUTH_REQUIRED, "no intermediate token");
  isErr(t, await anon.with({ "ClearBlade-DevToken": "forged" }).post("/admin/auth/verify", { code, otp_id: ch.otp_id }), 401, E.BAD_CREDENTIALS, "another intermediate token");
  isErr(t, await mid.post("/admin/auth/verify", { code, otp_id: "nope" }), 401, E.BAD_CREDENTIALS, "another otp_id");
  isErr(t, await mid.post("/admin/auth/verify", { otp_id: ch.otp_id }), 400, E.INVALID_ARGUMENT, "no code");
  isErr(t, await mid.post("/admin/auth/verify", { code, otp_id: ch.otp_id, extra: 1 }), 400, E.INVALID_ARGUMENT, "an unknown field");
  const v = await must(mid.post("/admin/auth/verify", { code, two_factor_method: "email", otp_id: ch.otp_id, otp_issued: ch.otp_issued }), "the right code");
  t.type(v.dev_token, "string");
  t.ok(v.dev_token.length > 20, "a developer token");
  t.type(v.expires_at, "number", "expires_at a number");
  t.equal(v.is_two_factor, false);
  const me = await must(new Client(o.url, { "ClearBlade-DevToken": v.dev_token }).get("/admin/userinfo"), "the token works");
  t.equal(me.email, s.email);
  isErr(t, await mid.post("/admin/auth/verify", { code, otp_id: ch.otp_id }), 401, E.BAD_CREDENTIALS, "the same code again");
  // a new sign-in gets a new code; the old one does not answer it
  const n2 = inbox.length;
  const ch2 = await must(anon.post("/admin/auth", { email: s.email, password: s.password }), "sign in again");
  const code2 = await codeMailedTo(s.email, n2);
  t.not(ch2.otp_id, ch.otp_id, "a new challenge");
  isErr(t, await anon.with({ "ClearBlade-DevToken": ch.intermediate_token }).post("/admin/auth/verify", { code: code2, otp_id: ch2.otp_id }), 401, E.BAD_CREDENTIALS, "the first challenge's token does not answer the second");
  ok200(t, await anon.with({ "ClearBlade-DevToken": ch2.intermediate_token }).post("/admin/auth/verify", { code: Number(code2), otp_id: ch2.otp_id }), "the code as a number");
  isErr(t, await anon.post("/admin/auth", { email: s.email, password: "wrong" }), 401, E.BAD_CREDENTIALS, "a wrong password gets no challenge");
});

t.test("five wrong codes and the challenge is dead, even for the right code", async (t) => {
  const s = await devWith2fa(t);
  const n = inbox.length;
  const ch = await must(anon.post("/admin/auth", { email: s.email, password: s.password }), "sign in");
  const code = await codeMailedTo(s.email, n);
  const mid = anon.with({ "ClearBlade-DevToken": ch.intermediate_token });
  const wrong = code === "999999" ? "999998" : "999999";
  for (let i = 1; i <= 5; i++) isErr(t, await mid.post("/admin/auth/verify", { code: wrong, otp_id: ch.otp_id }), 401, E.BAD_CREDENTIALS, `wrong code ${i}`);
  isErr(t, await mid.post("/admin/auth/verify", { code, otp_id: ch.otp_id }), 429, E.THROTTLED, "the right code after five wrong ones");
});

t.test("turning two-factor off signs in with the password alone again", async (t) => {
  const s = await devWith2fa(t);
  ok200(t, await s.dev.put("/admin/userinfo", { two_factor_enabled: false }), "off");
  const a = await must(anon.post("/admin/auth", { email: s.email, password: s.password }), "sign in");
  t.equal(a.is_two_factor, false);
  t.ok(a.dev_token.length > 20, "a token straight away");
  isErr(t, await s.dev.put("/admin/userinfo", { two_factor_enabled: true, two_factor_method: "carrier-pigeon" }), 400, E.INVALID_ARGUMENT, "an unknown method");
});

t.test("SMS codes through the configured HTTP gateway", async (t) => {
  const s0 = await devWithSystem(o, "sms");
  isErr(t, await s0.dev.put("/admin/userinfo", { two_factor_enabled: true, two_factor_method: "sms", phone: "+15550100" }), 400, E.INVALID_ARGUMENT, "no SMS service yet");
  isErr(t, await admin.post("/admin/settings/sms-service", { url: "ftp://x", from: "+1555" }), 400, E.INVALID_ARGUMENT, "not an http URL");
  isErr(t, await admin.post("/admin/settings/sms-service", { url: gatewayUrl }), 400, E.INVALID_ARGUMENT, "no from");
  ok200(t, await admin.post("/admin/settings/sms-service", { service_name: "Twilio", url: gatewayUrl, username: "AC1", password: "twilio-token", from: "+15550000", two_factor_message: "Code: $CODE" }), "create");
  isErr(t, await admin.post("/admin/settings/sms-service", { url: gatewayUrl, from: "+1" }), 400, E.ALREADY_EXISTS, "twice");
  const got = await must(admin.get("/admin/settings/sms-service"), "read");
  t.equal(got.url, gatewayUrl);
  t.notOk("password" in got, "no password read back");
  isErr(t, await s0.dev.put("/admin/userinfo", { two_factor_enabled: true, two_factor_method: "sms" }), 400, E.INVALID_ARGUMENT, "SMS with no phone number");
  ok200(t, await s0.dev.put("/admin/userinfo", { two_factor_enabled: true, two_factor_method: "sms", phone: "+15550100" }), "on, by SMS");
  const n = texts.length;
  const ch = await must(anon.post("/admin/auth", { email: s0.email, password: s0.password }), "sign in");
  t.equal(ch.two_factor_method, "sms");
  const sms = texts[n];
  t.ok(sms, "the gateway received a message");
  t.equal(sms?.form.get("To"), "+15550100", "To");
  t.equal(sms?.form.get("From"), "+15550000", "From");
  t.equal(sms?.auth, `Basic ${Buffer.from("AC1:twilio-token").toString("base64")}`, "basic auth with the account and token");
  const code = /Code: (\d{6})/.exec(sms?.form.get("Body") ?? "")?.[1];
  t.ok(code, "the body carries the code");
  ok200(t, await anon.with({ "ClearBlade-DevToken": ch.intermediate_token }).post("/admin/auth/verify", { code, two_factor_method: "sms", otp_id: ch.otp_id }), "verified");
  const n2 = texts.length;
  ok200(t, await admin.post("/admin/settings/sms-service/test", { recipient: "+15550199" }), "test message");
  t.equal(texts[n2]?.form.get("To"), "+15550199", "the test message reached the gateway");
  ok200(t, await s0.dev.put("/admin/userinfo", { two_factor_enabled: false }), "off");
  ok200(t, await admin.del("/admin/settings/sms-service"), "delete the SMS service");
  isErr(t, await admin.get("/admin/settings/sms-service"), 404, E.NOT_FOUND, "gone");
});

t.test("required of every developer: a developer who never chose two-factor gets a code by email", async (t) => {
  const s = await devWithSystem(o, "req");
  const put = await must(admin.put("/admin/settings/security", { two_factor_auth: { enabled: true } }), "require two-factor");
  t.equal(put.two_factor_auth.enabled, true);
  t.teardown(async () => { await admin.put("/admin/settings/security", { two_factor_auth: { enabled: false } }); });
  t.equal((await must(s.dev.get("/admin/userinfo"), "info")).two_factor_enabled_instance, true, "userinfo says so");
  isErr(t, await admin.del("/admin/settings/email-service"), 400, E.INVALID_ARGUMENT, "the email service cannot go while codes need it");
  const n = inbox.length;
  const ch = await must(anon.post("/admin/auth", { email: s.email, password: s.password }), "sign in");
  t.equal(ch.is_two_factor, true);
  t.equal(ch.two_factor_method, "email");
  const code = await codeMailedTo(s.email, n);
  ok200(t, await anon.with({ "ClearBlade-DevToken": ch.intermediate_token }).post("/admin/auth/verify", { code, otp_id: ch.otp_id }), "verified");
});

t.test("a code that cannot be sent: a clear 503, and no token", async (t) => {
  const s = await devWith2fa(t);
  const closed = await freePort();
  ok200(t, await admin.put("/admin/settings/email-service", { port: closed }), "point the email service at a closed port");
  t.teardown(async () => { await admin.put("/admin/settings/email-service", { port: smtpPort }); });
  const r = await anon.post("/admin/auth", { email: s.email, password: s.password });
  isErr(t, r, 503, E.DELIVERY_FAILED, "sign-in");
  t.match(r.body.error.detail, /email service could not send/, "says why");
  t.notOk(r.body.dev_token, "no token");
  isErr(t, await admin.post("/admin/settings/email-service/test", { recipient: "ops@example.com" }), 503, E.DELIVERY_FAILED, "the test message says so too");
});

t.test("delete the email service", async (t) => {
  const probe = uniq("x");
  t.ok(probe);
  ok200(t, await admin.del("/admin/settings/email-service"), "delete");
  isErr(t, await admin.get("/admin/settings/email-service"), 404, E.NOT_FOUND, "gone");
  const s = await devWithSystem(o, "after");
  isErr(t, await s.dev.put("/admin/userinfo", { two_factor_enabled: true, two_factor_method: "email" }), 400, E.INVALID_ARGUMENT, "two-factor cannot be turned on now");
  t.equal((await request(o.url, "GET", "/admin/settings/security", { headers: admin.headers })).body.two_factor_auth.enabled, false, "not required");
});
