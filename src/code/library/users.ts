// Users: ClearBlade.User, the classic sign-in calls (loginUser, registerUser, loginAnon, setUser,
// reauthUser, logoutUser, isCurrentUserAuthenticated), deleteUser(s), ClearBladeAsync.Users and
// ClearBladeAsync.Auth. A sign-in from code is the REST sign-in with the system's own key and
// secret: it yields a session of the user whose password (or token) the code holds, never more.
// Failed sign-ins lock an account out from code by the rule of the REST device and developer
// sign-ins (3 failures lock it for 60 s, doubling up to 600 s; counted apart from REST's), and a
// run may open a bounded number of sessions.
import { deviceKey } from "../../core/ids.ts";
import { ApiError, ErrorKinds, fail, failFor } from "../../core/errors.ts";
import { Lockouts, type SignInOutcome } from "../../throttle/limiters.ts";
import { emailKey } from "../../throttle/cases.ts";
import type { HostContext, LibraryArea } from "./types.ts";
import { queryText } from "./types.ts";

/** Sessions one run may open (sign-ins, registrations, refreshes). */
export const RUN_SIGN_INS_MAX = 100;
/** As the REST sign-in lockout: failures that lock an account, within this window. */
const LOCKOUT_FAILURES = 3, LOCKOUT_WINDOW_MS = 600_000;
/** Users one deleteUsers call may name. */
const DELETE_MAX = 1000;
/** Sign-ins from code, by system and account (this node's). */
const lockouts = new Lockouts();

const text = (v: unknown, what: string): string => {
  if (typeof v !== "string" || !v) throw fail("INVALID_ARGUMENT", `${what} must be a non-empty string`);
  if (v.length > 1024) throw fail("INVALID_ARGUMENT", `${what} has at most 1024 characters`);
  return v;
};

const secretOf = async (x: HostContext) => (await x.e.systems.get(x.systemKey)).system_secret;

/** A sign-in with credentials, counted against the run's sessions and the account's lockout. */
async function signIn<T>(x: HostContext, account: string, attempt: () => Promise<T>): Promise<T> {
  const count = x.run.resource("signIns", () => ({ value: { n: 0 }, close() {} }));
  if (++count.n > RUN_SIGN_INS_MAX) throw fail("INVALID_ARGUMENT", `a run may open at most ${RUN_SIGN_INS_MAX} sessions`);
  const key = `${x.systemKey}\u0000${account}`;
  const wait = lockouts.attempt(key, LOCKOUT_FAILURES);
  if (wait) throw failFor(wait, "THROTTLED", `too many failed sign-ins for this account: try again in ${wait} s`);
  let outcome: SignInOutcome = "other";
  try {
    const r = await attempt();
    outcome = "succeeded";
    return r;
  } catch (e) {
    if (e instanceof ApiError && e.kind === ErrorKinds.BAD_CREDENTIALS) outcome = "failed";
    throw e;
  } finally {
    lockouts.settle(key, outcome, LOCKOUT_FAILURES, LOCKOUT_WINDOW_MS);
  }
}

/** Counts a session opened without a password (anonymous, a refresh). */
function counted(x: HostContext) {
  const count = x.run.resource("signIns", () => ({ value: { n: 0 }, close() {} }));
  if (++count.n > RUN_SIGN_INS_MAX) throw fail("INVALID_ARGUMENT", `a run may open at most ${RUN_SIGN_INS_MAX} sessions`);
}

/** Makes the run act as the holder of `token` (a session of this system). */
async function actAs(x: HostContext, token: string, email: string | null) {
  const principal = await x.e.d.tokens.resolve(token);
  if (!principal) throw fail("INVALID_TOKEN", "the token is not valid (expired, revoked or unknown)");
  await x.e.systems.access(principal, x.systemKey);
  x.run.as = { principal, email, token };
}

const userSignIn = (x: HostContext, email: string, password: string) =>
  signIn(x, `user:${emailKey(email)}`, async () => x.e.users.authenticate(x.systemKey, await secretOf(x), { email, password }));

/** ClearBladeAsync.Auth's answer. */
const authAnswer = (token: string, refresh: string, expiresAt: number) => ({ auth_token: token, refresh_token: refresh, expiry: expiresAt });

export const users: LibraryArea = {
  ops: {
    "user.get": (x) => x.e.users.info(x.p),
    "user.set": (x, a) => x.e.users.updateInfo(x.p, a.data ?? {}),
    "user.list": (x, a) => x.e.users.list(x.p, queryText(a.query) ?? null, x.systemKey),
    "user.count": (x, a) => x.e.users.count(x.p, queryText(a.query) ?? null, x.systemKey),
    "users.create": async (x, a) => {
      // a developer may give roles (as its REST route); anyone else needs create on the users list
      const r = x.p.kind === "developer" ? await x.e.users.adminCreate(x.p, x.systemKey, a.info) : await x.e.users.createAsUser(x.p, a.info, x.systemKey);
      return r.user_id;
    },
    "users.update": (x, a) => x.e.users.updateByQuery(x.p, { query: a.query ?? [], changes: a.changes }, x.systemKey),
    "users.delete": (x, a) => x.e.users.deleteByQuery(x.p, a.query ?? [], x.systemKey),

    // ---- sessions of the run (classic) ----
    "user.login": async (x, a) => {
      const email = text(a.email, "email"), password = text(a.password, "password");
      const s = await userSignIn(x, email, password);
      await actAs(x, s.user_token, email);
      return { email, authToken: s.user_token };
    },
    "user.register": async (x, a) => {
      const email = text(a.email, "email"), password = text(a.password, "password");
      counted(x);
      const r = await x.e.users.register(x.systemKey, await secretOf(x), x.p, { email, password });
      await actAs(x, r.user_token, r.email);
      return { email: r.email, authToken: r.user_token, user_id: r.user_id };
    },
    "user.loginAnon": async (x) => {
      counted(x);
      const r = await x.e.users.anonymous(x.systemKey, await secretOf(x));
      await actAs(x, r.user_token, null);
      return { email: null, authToken: r.user_token };
    },
    "user.reauth": async (x, a) => {
      const token = text(a.token, "the user token"), refresh = text(a.refreshToken, "the refresh token");
      counted(x);
      const r = await x.e.users.authenticate(x.systemKey, await secretOf(x), { grant_type: "refresh_token", refresh_token: refresh, access_token: token });
      await actAs(x, r.user_token, x.run.as?.email ?? null);
      return { authToken: r.user_token, refreshToken: r.refresh_token, expires_at: r.expires_at, user_id: r.user_id };
    },
    "user.setToken": async (x, a) => {
      await actAs(x, text(a.token, "the token"), typeof a.email === "string" ? a.email : null);
      return { email: x.run.as!.email, authToken: x.run.as!.token };
    },
    // Ends the session the run opened and acts as itself again; without one, the caller's own
    // session (as the caller's own POST /api/v/1/user/logout would).
    "user.logout": async (x) => {
      if (x.run.as) {
        await x.e.users.logout(x.run.as.principal);
        x.run.as = null;
      } else if (x.p.tokenHash) await x.e.users.logout(x.p);
      return "User Logged out";
    },
    "user.checkAuth": async (x) => (x.run.as ? (await x.e.d.tokens.resolve(x.run.as.token)) !== null : true),
    "user.delete": async (x, a) => {
      const list = Array.isArray(a.users) ? a.users : [];
      if (!list.length || list.length > DELETE_MAX) throw fail("INVALID_ARGUMENT", `name 1 to ${DELETE_MAX} users (emails or user ids)`);
      const secret = await secretOf(x);
      for (const u of list) await x.e.users.deleteBySecret(x.p, x.systemKey, secret, { user: text(u, "a user (email or user id)") });
      return {};
    },

    // ---- ClearBladeAsync.Auth ----
    "auth.anon": async (x) => {
      counted(x);
      const r = await x.e.users.anonymous(x.systemKey, await secretOf(x));
      return authAnswer(r.user_token, r.refresh_token, r.expires_at);
    },
    "auth.user": async (x, a) => {
      const r = await userSignIn(x, text(a.email, "email"), text(a.password, "password"));
      return authAnswer(r.user_token, r.refresh_token, r.expires_at);
    },
    "auth.device": async (x, a) => {
      const name = text(a.name, "the device name"), key = text(a.key, "the device key");
      const r = await signIn(x, `device:${name}`, () => x.e.devices.authenticate(x.systemKey, { deviceName: name, activeKey: key }));
      return authAnswer(r.deviceToken, r.refreshToken, r.expiresAt);
    },
    "auth.reauth": async (x, a) => {
      const refresh = text(a.refreshToken, "the refresh token");
      if (typeof a.token !== "string" || !a.token) throw fail("INVALID_ARGUMENT", "reauth(refreshToken, accessToken): Outpost also needs the access token the refresh token came with");
      counted(x);
      const grant = { grant_type: "refresh_token", refresh_token: refresh, access_token: a.token };
      const holder = await x.e.d.tokens.resolve(a.token);
      if (holder?.kind === "device") {
        const r = await x.e.devices.authenticate(x.systemKey, grant);
        return authAnswer(r.deviceToken, r.refreshToken, r.expiresAt);
      }
      const r = await x.e.users.authenticate(x.systemKey, await secretOf(x), grant);
      return authAnswer(r.user_token, r.refresh_token, r.expires_at);
    },
    "auth.impersonate": async (x, a) => {
      counted(x);
      const r = await x.e.users.impersonate(x.p, x.systemKey, text(a.user, "the user id"));
      return authAnswer(r.user_token, r.refresh_token, r.expires_at);
    },
    "auth.whose": async (x, a) => {
      const p = await x.e.d.tokens.resolve(text(a.token, "the token"));
      if (!p || p.kind === "developer" || p.kind === "edge" || p.systemKey !== x.systemKey) throw fail("INVALID_TOKEN", "not a valid user or device token of this system");
      return p.kind === "device" ? deviceKey(p.systemKey, p.name) : p.id;
    },
  },
};
