// Fast paths and slow paths agree. The hot paths answer from caches without waiting:
// Tokens.resolveNow, Systems.accessNow, Permissions.levelNow and checkedNow. Each has a full,
// asynchronous counterpart (resolve, access, level, require). A fast path may answer `undefined`
// (or checkedNow false): "not cached, ask the slow path". It must never answer anything else than
// the slow path would: not for valid, expired, revoked (logged out) or foreign-system tokens of
// users, devices, developers and the platform admin, not for missing permission bits, and not after
// a change that invalidated the cache (a role changed, a user's roles changed, a system renamed or
// deleted). After such a change made on this node, neither path may answer from before it: the
// answers are also checked against the database itself (a fresh, uncached Permissions; the role
// memberships in the table).
//
// The domain is built as in src/app.ts on a real libSQL database (in memory).
import { afterAll, afterEach, beforeAll, describe, expect, setSystemTime, test } from "bun:test";
import { LEVEL, Permissions, type Resource } from "../../../src/auth/permissions.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { Tokens } from "../../../src/auth/tokens.ts";
import { loadConfig } from "../../../src/config.ts";
import { ApiError } from "../../../src/core/errors.ts";
import { EventBus } from "../../../src/core/events.ts";
import { createLogger } from "../../../src/core/log.ts";
import type { DomainDeps } from "../../../src/domain/deps.ts";
import { Signals } from "../../../src/core/signals.ts";
import { Developers } from "../../../src/domain/developers.ts";
import { Devices } from "../../../src/domain/devices.ts";
import { Roles } from "../../../src/domain/roles.ts";
import { Systems } from "../../../src/domain/systems.ts";
import { Users } from "../../../src/domain/users.ts";
import { type Db, openDb } from "../../../src/store/db.ts";
import { migrate } from "../../../src/store/migrations.ts";
import { rolesRepo } from "../../../src/store/roles.ts";
import { tokensRepo } from "../../../src/store/tokens.ts";
import { ChangeRecorder } from "../../../src/domain/changes.ts";

const { READ, CREATE, UPDATE, DELETE, ALL } = LEVEL;

let db: Db;
let tokens: Tokens;
let perms: Permissions;
let systems: Systems;
let roles: Roles;
let developers: Developers;
let users: Users;
let devices: Devices;

/** Named tokens and principals of the cases. */
const tok: Record<string, string> = {};
const who: Record<string, Principal> = {};
let skA = "", skB = "", secretA = "", roleA = "", roleB = "";
let userAId = "";
const DEVICE_A = "thermo-a", DEVICE_B = "thermo-b";

async function principal(token: string): Promise<Principal> {
  const p = await tokens.resolve(token);
  if (!p) throw new Error("setup: token does not resolve");
  return p;
}

beforeAll(async () => {
  db = await openDb({ url: ":memory:" });
  await migrate(db);
  const config = loadConfig(["--db", ":memory:", "--log-level", "silent", "--http-port", "0"], {});
  const log = createLogger("silent");
  const signals = new Signals();
  tokens = new Tokens(db, signals);
  perms = new Permissions(db, signals);
  const deps: DomainDeps = { db, tokens, perms, events: new EventBus(log), signals, log, config, changes: new ChangeRecorder("platform", "platform"), writerAloneSince: () => 0 };
  systems = new Systems(deps);
  roles = new Roles(deps, systems);
  developers = new Developers(deps);
  users = new Users(deps, systems, roles, null);
  devices = new Devices(deps, systems, roles);

  // developers: two owners and the platform admin
  tok.devA = (await developers.register({ email: "dev-a@example.com", password: "pw-a" })).dev_token;
  tok.devB = (await developers.register({ email: "dev-b@example.com", password: "pw-b" })).dev_token;
  await developers.bootstrapAdmin("admin@example.com", "pw-admin");
  tok.admin = (await developers.authenticate({ email: "admin@example.com", password: "pw-admin" })).dev_token;
  for (const k of ["devA", "devB", "admin"]) who[k] = await principal(tok[k]!);
  expect(who.admin).toMatchObject({ kind: "developer", admin: true });

  const a = await systems.create(who.devA!, { name: "A" });
  const b = await systems.create(who.devB!, { name: "B" });
  skA = a.system_key; skB = b.system_key; secretA = a.system_secret;

  // a role in each system: some topics, a service, a collection by id, reading the users list
  roleA = (await roles.create(who.devA!, skA, {
    name: "ops", topics: [{ itemInfo: { name: "a/#" }, permissions: READ | CREATE }], services: [{ itemInfo: { name: "svc" }, permissions: READ }],
    collections: [{ itemInfo: { id: "col1" }, permissions: READ | UPDATE }], users: READ,
  })).role_id;
  roleB = (await roles.create(who.devB!, skB, { name: "ops", topics: [{ itemInfo: { name: "#" }, permissions: ALL }] })).role_id;

  // users: with the role, without any role, with Administrator; one in B; an anonymous session
  const uA = await users.adminCreate(who.devA!, skA, { email: "u-a@example.com", password: "pw", roles: ["Authenticated", roleA] });
  tok.userA = uA.user_token; userAId = uA.user_id;
  tok.userBare = (await users.adminCreate(who.devA!, skA, { email: "bare@example.com", password: "pw", roles: [] })).user_token;
  tok.userAdmin = (await users.adminCreate(who.devA!, skA, { email: "boss@example.com", password: "pw", roles: ["Administrator"] })).user_token;
  tok.userB = (await users.adminCreate(who.devB!, skB, { email: "u-b@example.com", password: "pw", roles: ["Authenticated", roleB] })).user_token;
  tok.anonA = (await users.anonymous(skA, secretA)).user_token;

  // devices: one with the role in A, one without roles in B
  await devices.create(who.devA!, skA, DEVICE_A, { active_key: "secret-key-a" });
  await devices.changeRoles(who.devA!, skA, DEVICE_A, { add: [roleA] });
  tok.deviceA = (await devices.authenticate(skA, { deviceName: DEVICE_A, activeKey: "secret-key-a" })).deviceToken;
  await devices.create(who.devB!, skB, DEVICE_B, { active_key: "secret-key-b" });
  tok.deviceB = (await devices.authenticate(skB, { deviceName: DEVICE_B, activeKey: "secret-key-b" })).deviceToken;

  for (const k of ["userA", "userBare", "userAdmin", "userB", "anonA", "deviceA", "deviceB"]) who[k] = await principal(tok[k]!);
  // an edge principal (edge tokens are edge records, not token rows): built as the loader builds it
  who.edgeA = { kind: "edge", systemKey: skA, id: "edge-a", name: "edge-a", tokenHash: "" };
}, 60_000);

afterEach(() => { setSystemTime(); });
afterAll(async () => { await db.close(); });

// ---- comparing ---------------------------------------------------------------------------------

type Outcome = { ok: unknown } | { error: string };
async function outcome(f: () => Promise<unknown>): Promise<Outcome> {
  try { return { ok: await f() }; } catch (e) { return { error: e instanceof ApiError ? `${e.code}: ${e.message}` : String(e) }; }
}
function syncOutcome(f: () => unknown): Outcome {
  try { return { ok: f() }; } catch (e) { return { error: e instanceof ApiError ? `${e.code}: ${e.message}` : String(e) }; }
}
const json = (v: unknown) => JSON.stringify(v);

/** Disagreements found by one test, reported together. */
class Ledger {
  readonly disagreements: string[] = [];
  readonly unanswered: string[] = [];
  /** `fast` is the fast path's answer, `undefined` meaning "ask the slow path". */
  compare(label: string, fast: unknown, slow: unknown) {
    if (fast === undefined) return;
    if (json(fast) !== json(slow)) this.disagreements.push(`${label}: fast ${json(fast)} but slow ${json(slow)}`);
  }
  /** A warm fast path is expected to answer (else the comparisons above would prove nothing). */
  answers(label: string, fast: unknown) { if (fast === undefined) this.unanswered.push(label); }
}

// ---- tokens -------------------------------------------------------------------------------------

/** resolveNow, then resolve, then resolveNow again (warm); returns the three answers. */
async function tokenRound(l: Ledger, label: string, token: string) {
  const cold = tokens.resolveNow(token);
  const slow = await tokens.resolve(token);
  const warm = tokens.resolveNow(token);
  l.compare(`${label} (before the slow path)`, cold, slow);
  l.compare(`${label} (after the slow path)`, warm, slow);
  return { cold, slow, warm };
}

describe("Tokens.resolveNow agrees with resolve", () => {
  test("valid tokens of users, devices, developers, the admin and anonymous sessions: warm answers are the slow path's principal", async () => {
    const l = new Ledger();
    for (const [name, token] of Object.entries(tok)) {
      const r = await tokenRound(l, name, token);
      expect({ name, resolves: r.slow !== null }).toEqual({ name, resolves: true });
      l.answers(`${name} warm`, r.warm);
    }
    // cold: the cache dropped for one subject, the fast path must step aside, not answer old data
    tokens.forgetSubject("user", userAId, skA);
    expect(tokens.resolveNow(tok.userA!)).toBeUndefined();
    await tokenRound(l, "userA after forgetSubject", tok.userA!);
    expect(l.disagreements).toEqual([]);
    expect(l.unanswered).toEqual([]);
  });

  test("unknown and malformed tokens: resolveNow never invents a principal", async () => {
    const l = new Ledger();
    for (const t of ["not-a-token", "", " ", tok.userA!.slice(0, -1), tok.userA! + "x", tok.userA!.toUpperCase(), skA]) {
      const r = await tokenRound(l, `unknown ${json(t)}`, t);
      expect(r.slow).toBeNull();
      expect(r.warm).toBeUndefined();
    }
    expect(l.disagreements).toEqual([]);
  });

  test("expired tokens: warm then past expiry (cache entry still alive), and never warmed", async () => {
    const l = new Ledger();
    const now = Date.now();
    const warmed = await tokens.issue(db, "user", userAId, skA, 2);
    const dev = await tokens.issue(db, "dev", who.devA!.kind === "developer" ? who.devA!.id : "", null, 2);
    const device = await tokens.issue(db, "device", DEVICE_A, skA, 2);
    for (const t of [warmed, dev, device]) expect(await tokens.resolve(t.token)).not.toBeNull(); // cached now
    const cold = await tokens.issue(db, "user", userAId, skA, 1);
    // 3.5 s later: past every expiry, within the 5 s the cache keeps an entry
    setSystemTime(new Date(now + 3_500));
    for (const [name, t] of [["user (warm)", warmed], ["developer (warm)", dev], ["device (warm)", device], ["user (never resolved)", cold]] as const) {
      const fast = tokens.resolveNow(t.token);
      const slow = await tokens.resolve(t.token);
      l.compare(`expired ${name}`, fast, slow);
      expect({ name, fast, slow }).toEqual({ name, fast: undefined, slow: null });
      expect({ name, again: tokens.resolveNow(t.token) }).toEqual({ name, again: undefined });
    }
    expect(l.disagreements).toEqual([]);
  });

  test("revoked: logged out users and developers, a deleted user, a removed and a disabled device", async () => {
    const l = new Ledger();
    const fresh = async (make: () => Promise<string>) => { const t = await make(); expect(await tokens.resolve(t)).not.toBeNull(); return t; };
    const u = await users.adminCreate(who.devA!, skA, { email: "leaving@example.com", password: "pw", roles: ["Authenticated"] });
    const userTok = await fresh(async () => u.user_token);
    const devTok = await fresh(async () => (await developers.authenticate({ email: "dev-a@example.com", password: "pw-a" })).dev_token);
    const adminTok = await fresh(async () => (await developers.authenticate({ email: "admin@example.com", password: "pw-admin" })).dev_token);
    const anonTok = await fresh(async () => (await users.anonymous(skA, secretA)).user_token);
    const doomed = await users.adminCreate(who.devA!, skA, { email: "doomed@example.com", password: "pw", roles: ["Authenticated"] });
    const doomedTok = await fresh(async () => doomed.user_token);
    await devices.create(who.devA!, skA, "gone", { active_key: "secret-gone" });
    const goneTok = await fresh(async () => (await devices.authenticate(skA, { deviceName: "gone", activeKey: "secret-gone" })).deviceToken);
    await devices.create(who.devA!, skA, "off", { active_key: "secret-off" });
    const offTok = await fresh(async () => (await devices.authenticate(skA, { deviceName: "off", activeKey: "secret-off" })).deviceToken);

    await users.logout((await tokens.resolve(userTok))!);
    await developers.logout((await tokens.resolve(devTok))!);
    await developers.logout((await tokens.resolve(adminTok))!);
    await users.logout((await tokens.resolve(anonTok))!);
    await users.adminDelete(who.devA!, skA, doomed.user_id);
    await devices.remove(who.devA!, skA, "gone");
    await devices.update(who.devA!, skA, "off", { enabled: false });

    for (const [name, t] of [["logged-out user", userTok], ["logged-out developer", devTok], ["logged-out admin", adminTok], ["logged-out anonymous", anonTok],
      ["deleted user", doomedTok], ["removed device", goneTok], ["disabled device", offTok]] as const) {
      const r = await tokenRound(l, name, t);
      expect({ name, fast: r.cold, slow: r.slow }).toEqual({ name, fast: undefined, slow: null });
    }
    // the other tokens of the same developer and system still work, on both paths
    for (const name of ["devA", "admin", "userA", "deviceA"]) l.answers(`${name} still valid`, (await tokenRound(l, name, tok[name]!)).warm);
    expect(l.disagreements).toEqual([]);
    expect(l.unanswered).toEqual([]);
  });

  test("a revocation this node did not make (the row deleted elsewhere): both paths keep the cached principal alike", async () => {
    const l = new Ledger();
    const t = await tokens.issue(db, "user", userAId, skA, 3600);
    const before = await tokens.resolve(t.token);
    await tokensRepo.delete(db, t.hash);
    const r = await tokenRound(l, "row deleted behind the cache", t.token);
    // within TOKEN_CACHE_MS either may still answer, but only with the same principal
    expect(r.slow).toEqual(before);
    expect(l.disagreements).toEqual([]);
  });

  test("role membership changed after the cache was warmed: the fast path steps aside, then answers the new roles", async () => {
    const l = new Ledger();
    const u = await users.adminCreate(who.devA!, skA, { email: "promoted@example.com", password: "pw", roles: ["Authenticated"] });
    const warm = await tokens.resolve(u.user_token);
    expect(tokens.resolveNow(u.user_token)).toEqual(warm!);

    await users.adminUpdate(who.devA!, skA, { user: u.user_id, changes: { roles: { add: [roleA, "Administrator"], delete: ["Authenticated"] } } });
    const after = tokens.resolveNow(u.user_token);
    const r = await tokenRound(l, "user after its roles changed", u.user_token);
    l.compare("user after its roles changed (first fast answer)", after, r.slow);
    const truth = await rolesRepo.rolesOf(db, skA, "user", u.user_id);
    expect(((r.slow as Principal & { roles: string[] }).roles).slice().sort()).toEqual(truth.slice().sort());
    expect(after === undefined || json(after) === json(r.slow)).toBe(true);

    // a device's roles
    await devices.create(who.devA!, skA, "regrouped", { active_key: "secret-r" });
    const dt = (await devices.authenticate(skA, { deviceName: "regrouped", activeKey: "secret-r" })).deviceToken;
    await tokens.resolve(dt);
    await devices.changeRoles(who.devA!, skA, "regrouped", { add: [roleA] });
    const d = await tokenRound(l, "device after its roles changed", dt);
    expect((d.slow as Principal & { roles: string[] }).roles).toEqual(await rolesRepo.rolesOf(db, skA, "device", "regrouped"));

    // a role deleted: its members' cached principals go
    const temp = (await roles.create(who.devA!, skA, { name: "temp", topics: [{ itemInfo: { name: "t/#" }, permissions: READ }] })).role_id;
    const m = await users.adminCreate(who.devA!, skA, { email: "member@example.com", password: "pw", roles: [temp] });
    expect((await tokens.resolve(m.user_token) as Principal & { roles: string[] }).roles).toEqual([temp]);
    await roles.remove(who.devA!, skA, temp);
    const gone = await tokenRound(l, "member after its role was deleted", m.user_token);
    expect((gone.slow as Principal & { roles: string[] }).roles).toEqual([]);
    expect(l.disagreements).toEqual([]);
  });
});

// ---- systems ------------------------------------------------------------------------------------

/** accessNow, then access, then accessNow again: the row, or the error access throws. */
async function accessRound(l: Ledger, label: string, p: Principal, key: string) {
  const cold = systems.accessNow(p, key);
  const slow = await outcome(() => systems.access(p, key));
  const warm = systems.accessNow(p, key);
  // a fast answer is a row: the slow path must have answered the same row
  const asOutcome = (fast: unknown) => (fast === undefined ? undefined : { ok: fast });
  l.compare(`${label} (before the slow path)`, asOutcome(cold), slow);
  l.compare(`${label} (after the slow path)`, asOutcome(warm), slow);
  return { cold, slow, warm };
}

describe("Systems.accessNow agrees with access", () => {
  test("every principal against its own system, the other system, an unknown key and ''", async () => {
    const l = new Ledger();
    const allowed = new Set(["devA>A", "admin>A", "admin>B", "devB>B", "userA>A", "userBare>A", "userAdmin>A", "anonA>A", "deviceA>A", "edgeA>A", "userB>B", "deviceB>B"]);
    const keys: [string, string][] = [["A", skA], ["B", skB], ["unknown", "0123456789abcdef0123456789abcd"], ["empty", ""]];
    systems.forget(skA);
    systems.forget(skB);
    for (const [name, p] of Object.entries(who)) {
      for (const [kn, key] of keys) {
        const r = await accessRound(l, `${name} on ${kn}`, p, key);
        const may = allowed.has(`${name}>${kn}`);
        expect({ case: `${name} on ${kn}`, allowed: "ok" in r.slow }).toEqual({ case: `${name} on ${kn}`, allowed: may });
        if (may) l.answers(`${name} on ${kn} warm`, r.warm);
        else expect({ case: `${name} on ${kn}`, fast: r.warm }).toEqual({ case: `${name} on ${kn}`, fast: undefined });
      }
    }
    expect(l.disagreements).toEqual([]);
    expect(l.unanswered).toEqual([]);
  });

  test("a system renamed after the cache was warmed, and a system deleted", async () => {
    const l = new Ledger();
    await accessRound(l, "devA on A", who.devA!, skA);
    await systems.update(who.devA!, { id: skA, name: "A renamed" });
    const r = await accessRound(l, "devA on A after the rename", who.devA!, skA);
    expect((r.slow as { ok: { name: string } }).ok.name).toBe("A renamed");
    for (const name of ["userA", "admin", "deviceA"]) await accessRound(l, `${name} on A after the rename`, who[name]!, skA);

    const c = await systems.create(who.devA!, { name: "C" });
    const uc = await users.adminCreate(who.devA!, c.system_key, { email: "c@example.com", password: "pw" });
    const pc = (await tokens.resolve(uc.user_token))!;
    for (const [name, p] of [["devA", who.devA!], ["admin", who.admin!], ["user of C", pc]] as const) {
      expect(systems.accessNow(p, c.system_key) ?? (await systems.access(p, c.system_key))).toMatchObject({ system_key: c.system_key });
      l.answers(`${name} on C warm`, systems.accessNow(p, c.system_key));
    }
    await systems.remove(who.devA!, c.system_key);
    for (const [name, p] of [["devA", who.devA!], ["admin", who.admin!], ["user of C (stale principal)", pc]] as const) {
      const d = await accessRound(l, `${name} on the deleted C`, p, c.system_key);
      expect({ name, fast: d.cold, slowFailed: "error" in d.slow }).toEqual({ name, fast: undefined, slowFailed: true });
    }
    expect(await tokens.resolve(uc.user_token)).toBeNull();
    expect(l.disagreements).toEqual([]);
    expect(l.unanswered).toEqual([]);
  });
});

// ---- permissions --------------------------------------------------------------------------------

const RESOURCES: [string, Resource][] = [
  ["topic a/b", { kind: "topic", name: "a/b" }], ["topic a", { kind: "topic", name: "a" }], ["topic c/d", { kind: "topic", name: "c/d" }],
  ["topic #", { kind: "topic", name: "#" }], ["topic $share/g/a/b", { kind: "topic", name: "$share/g/a/b" }],
  ["service svc", { kind: "service", name: "svc" }], ["service other", { kind: "service", name: "other" }],
  ["collection col1", { kind: "collection", id: "col1" }], ["collection col2", { kind: "collection", id: "col2", name: "col1" }],
  ["users", { kind: "users" }], ["devices", { kind: "devices" }], ["roles", { kind: "roles" }],
  ["webhook w", { kind: "item", itemKind: "webhooks", name: "w" }],
];
const LEVELS = [0, READ, CREATE, UPDATE, DELETE, READ | CREATE, READ | UPDATE, READ | DELETE, ALL];

/** levelNow/level and checkedNow/require for one principal on one resource at every level. */
async function permRound(l: Ledger, label: string, p: Principal, res: Resource, expectAnswer: boolean) {
  const coldLevel = perms.levelNow(p, res);
  const coldChecks = LEVELS.map((lv) => syncOutcome(() => perms.checkedNow(p, res, lv, "it")));
  const slowLevel = await perms.level(p, res);
  const warmLevel = perms.levelNow(p, res);
  l.compare(`${label}: levelNow before level`, coldLevel, slowLevel);
  l.compare(`${label}: levelNow after level`, warmLevel, slowLevel);
  if (expectAnswer) l.answers(`${label}: levelNow warm`, warmLevel);
  // checkedNow: true = allowed, throws = denied (as require throws), false = "not known now"
  const answer = (fast: Outcome) => ("ok" in fast && fast.ok === false ? undefined : fast);
  for (const [i, lv] of LEVELS.entries()) {
    const fastAnswer = answer(syncOutcome(() => perms.checkedNow(p, res, lv, "it")));
    const slow = await outcome(() => perms.require(p, res, lv, "it").then(() => true));
    l.compare(`${label} level ${lv}: checkedNow before level vs require`, answer(coldChecks[i]!), slow);
    l.compare(`${label} level ${lv}: checkedNow vs require`, fastAnswer, slow);
    if (expectAnswer) l.answers(`${label} level ${lv}: checkedNow warm`, fastAnswer);
    const can = await perms.can(p, res, lv);
    l.compare(`${label} level ${lv}: checkedNow vs can`, fastAnswer === undefined ? undefined : "ok" in fastAnswer, can);
  }
  return { coldLevel, slowLevel, warmLevel };
}

/** The database's answer: a Permissions with nothing cached. */
const truth = (p: Principal, res: Resource) => new Permissions(db).level(p, res);

describe("Permissions.levelNow and checkedNow agree with level and require", () => {
  test("every principal, resource and level, with the roles cold and warm (missing bits included)", async () => {
    const l = new Ledger();
    perms.invalidate(skA);
    perms.invalidate(skB);
    const p = await Promise.all(Object.keys(who).map(async (k) => [k, (await tokens.resolve(tok[k] ?? "")) ?? who[k]!] as const));
    for (const [name, pr] of p) for (const [rn, res] of RESOURCES) {
      // each round starts cold, so the fast paths' "not cached" answers are compared too
      perms.invalidate(skA);
      perms.invalidate(skB);
      const r = await permRound(l, `${name} on ${rn}`, pr, res, true);
      expect({ case: `${name} on ${rn}`, level: r.slowLevel }).toEqual({ case: `${name} on ${rn}`, level: await truth(pr, res) });
    }
    // the cases the matrix must contain, so it can fail: a user missing bits, a foreign grant unused
    expect(await perms.level(who.userA!, { kind: "topic", name: "a/b" })).toBe(READ | CREATE);
    expect(() => perms.checkedNow(who.userA!, { kind: "topic", name: "a/b" }, READ | UPDATE)).toThrow(ApiError);
    expect(await perms.level(who.userA!, { kind: "topic", name: "c/d" })).toBe(0);
    expect(await perms.level(who.userB!, { kind: "topic", name: "c/d" })).toBe(ALL); // B's own role, not A's
    expect(await perms.level(who.deviceB!, { kind: "topic", name: "a/b" })).toBe(0);
    expect(perms.levelNow(who.userAdmin!, { kind: "roles" })).toBe(ALL);
    expect(l.disagreements).toEqual([]);
    expect(l.unanswered).toEqual([]);
  });

  test("a role's permissions changed after the cache was warmed: the fast path steps aside, then answers the new grants", async () => {
    const l = new Ledger();
    const res: Resource = { kind: "topic", name: "a/b" }, other: Resource = { kind: "topic", name: "c/d" };
    await permRound(l, "userA on a/b (warm)", who.userA!, res, true);
    expect(perms.levelNow(who.userA!, res)).toBe(READ | CREATE);

    await roles.update(who.devA!, skA, { id: roleA, changes: { topics: [{ itemInfo: { name: "a/#" }, permissions: 0 }, { itemInfo: { name: "c/#" }, permissions: READ }] } });
    const first = { ab: perms.levelNow(who.userA!, res), cd: perms.levelNow(who.userA!, other) };
    for (const [name, pr] of [["userA", who.userA!], ["deviceA", who.deviceA!], ["userBare", who.userBare!], ["userAdmin", who.userAdmin!]] as const) {
      for (const [rn, r] of [["a/b", res], ["c/d", other]] as const) {
        const round = await permRound(l, `${name} on ${rn} after the role changed`, pr, r, true);
        expect({ case: `${name} on ${rn}`, level: round.slowLevel }).toEqual({ case: `${name} on ${rn}`, level: await truth(pr, r) });
      }
    }
    l.compare("userA on a/b: first fast answer after the change", first.ab, await perms.level(who.userA!, res));
    l.compare("userA on c/d: first fast answer after the change", first.cd, await perms.level(who.userA!, other));
    expect(perms.levelNow(who.userA!, res)).toBe(0);
    expect(perms.levelNow(who.userA!, other)).toBe(READ);
    // B's cache is not A's: a change in A leaves B's answers as they were
    expect(perms.levelNow(who.userB!, other) ?? (await perms.level(who.userB!, other))).toBe(ALL);
    expect(l.disagreements).toEqual([]);
    expect(l.unanswered).toEqual([]);
  });

  test("a role changed while its system's roles were being loaded: neither path keeps the old grants", async () => {
    const l = new Ledger();
    const res: Resource = { kind: "service", name: "svc" };
    for (const [i, lvl] of [[0, READ | UPDATE], [1, READ], [2, 0], [3, ALL]] as const) {
      perms.invalidate(skA);
      const loading = perms.level(who.userA!, res); // the load starts, cold
      await roles.update(who.devA!, skA, { id: roleA, changes: { services: [{ itemInfo: { name: "svc" }, permissions: lvl }] } });
      await loading;
      const want = await truth(who.userA!, res);
      expect({ round: i, want }).toEqual({ round: i, want: lvl });
      const fast = perms.levelNow(who.userA!, res);
      const slow = await perms.level(who.userA!, res);
      l.compare(`round ${i}: levelNow`, fast, slow);
      expect({ round: i, fast: fast ?? slow, slow }).toEqual({ round: i, fast: want, slow: want });
    }
    expect(l.disagreements).toEqual([]);
  });

  test("a principal still holding a role that was deleted, and one whose roles changed: both paths read the same roles", async () => {
    const l = new Ledger();
    const extra = (await roles.create(who.devA!, skA, { name: "extra", topics: [{ itemInfo: { name: "x/#" }, permissions: ALL }] })).role_id;
    const u = await users.adminCreate(who.devA!, skA, { email: "holder@example.com", password: "pw", roles: [extra] });
    const stale = (await tokens.resolve(u.user_token))!;
    const res: Resource = { kind: "topic", name: "x/y" };
    await permRound(l, "holder on x/y", stale, res, true);
    expect(perms.levelNow(stale, res)).toBe(ALL);
    await roles.remove(who.devA!, skA, extra);
    // the old principal object names a role that no longer exists: both paths grant nothing
    const r = await permRound(l, "stale principal on x/y after its role was deleted", stale, res, true);
    expect(r.slowLevel).toBe(0);
    const fresh = (await tokens.resolve(u.user_token))!;
    expect((fresh as Principal & { roles: string[] }).roles).toEqual([]);
    await permRound(l, "fresh principal on x/y", fresh, res, true);
    expect(l.disagreements).toEqual([]);
    expect(l.unanswered).toEqual([]);
  });
});
