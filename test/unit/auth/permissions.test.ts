// src/auth/permissions.ts: topic filters, level unions and the Permissions check against a real db.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ApiError } from "../../../src/core/errors.ts";
import {
  emptyPermissions, grantedLevel, LEVEL, parsePermissions, Permissions, type Resource, type RolePermissions, topicMatches,
} from "../../../src/auth/permissions.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { openDb, type Db } from "../../../src/store/db.ts";
import { migrate } from "../../../src/store/migrations.ts";
import { developersRepo } from "../../../src/store/developers.ts";
import { systemsRepo } from "../../../src/store/systems.ts";
import { rolesRepo } from "../../../src/store/roles.ts";

const { READ, CREATE, UPDATE, DELETE, ALL } = LEVEL;

describe("topicMatches", () => {
  const yes: [string, string][] = [
    ["a/b", "a/b"], ["#", "a"], ["#", "a/b/c"], ["#", "/"], ["a/#", "a/b"], ["a/#", "a/b/c/d"], ["a/#", "a"],
    ["+", "a"], ["a/+", "a/b"], ["a/+/c", "a/b/c"], ["+/+", "a/b"], ["+/b/+", "x/b/y"], ["a/+", "a/"],
    ["+/a", "/a"], ["a/+/#", "a/b"], ["a/+/#", "a/b/c/d"], ["sport/tennis/+", "sport/tennis/player1"],
    ["", ""],
  ];
  const no: [string, string][] = [
    ["a/b", "a/c"], ["a/b", "a"], ["a", "a/b"], ["a/b", "a/b/"], ["a/b/", "a/b"], ["/a", "a"], ["a", "/a"],
    ["A/b", "a/b"], ["a/#", "b/a"], ["a/#", "ab"], ["a/#", "ab/c"], ["+", "a/b"], ["a/+", "a"], ["a/+", "a/b/c"],
    ["a/+/c", "a/b/d"], ["+/+", "a"], ["a/+/#", "a"], ["sport/+", "sport"], ["a/b", ""],
  ];
  test("matches", () => {
    for (const [f, t] of yes) expect({ f, t, m: topicMatches(f, t) }).toEqual({ f, t, m: true });
  });
  test("does not match", () => {
    for (const [f, t] of no) expect({ f, t, m: topicMatches(f, t) }).toEqual({ f, t, m: false });
  });
  test("wildcards in the topic are not wildcards", () => {
    expect(topicMatches("a/b", "a/+")).toBe(false);
    expect(topicMatches("a/b", "#")).toBe(false);
  });
});

describe("grantedLevel", () => {
  const perms = (p: Partial<RolePermissions>): RolePermissions => ({ items: p.items ?? {}, scalars: p.scalars ?? {} });

  test("no roles or empty roles grant nothing", () => {
    const res: Resource[] = [
      { kind: "collection", id: "c1", name: "temps" }, { kind: "service", name: "s" }, { kind: "topic", name: "a/b" },
      { kind: "item", itemKind: "webhooks", name: "w" }, { kind: "users" }, { kind: "devices" },
    ];
    for (const r of res) {
      expect(grantedLevel([], r)).toBe(0);
      expect(grantedLevel([emptyPermissions(), perms({})], r)).toBe(0);
    }
  });

  test("collections: by id; by name only when the grant has no id; allcollections adds to all", () => {
    const p = perms({ items: { collections: [{ id: "c1", name: "temps", level: READ }, { name: "logs", level: CREATE }] } });
    expect(grantedLevel([p], { kind: "collection", id: "c1" })).toBe(READ);
    expect(grantedLevel([p], { kind: "collection", id: "c2", name: "temps" })).toBe(0); // id mismatch wins over name
    expect(grantedLevel([p], { kind: "collection", id: "c9", name: "logs" })).toBe(CREATE);
    expect(grantedLevel([p], { kind: "collection", id: "c9", name: "other" })).toBe(0);
    const all = perms({ scalars: { allcollections: UPDATE } });
    expect(grantedLevel([p, all], { kind: "collection", id: "c1" })).toBe(READ | UPDATE);
    expect(grantedLevel([all], { kind: "collection", id: "anything" })).toBe(UPDATE);
  });

  test("levels of several roles (and several grants of one role) are unioned", () => {
    const a = perms({ items: { collections: [{ id: "c1", name: "x", level: READ }] } });
    const b = perms({ items: { collections: [{ id: "c1", name: "x", level: UPDATE }, { id: "c1", name: "x", level: DELETE }] } });
    expect(grantedLevel([a], { kind: "collection", id: "c1" })).toBe(READ);
    expect(grantedLevel([a, b], { kind: "collection", id: "c1" })).toBe(READ | UPDATE | DELETE);
    expect(grantedLevel([b, a], { kind: "collection", id: "c1" })).toBe(READ | UPDATE | DELETE);
    expect(grantedLevel([a, a], { kind: "collection", id: "c1" })).toBe(READ);
  });

  test("services by name plus allservices", () => {
    const p = perms({ items: { services: [{ name: "run", level: READ }] }, scalars: { allservices: CREATE } });
    expect(grantedLevel([p], { kind: "service", name: "run" })).toBe(READ | CREATE);
    expect(grantedLevel([p], { kind: "service", name: "other" })).toBe(CREATE);
    expect(grantedLevel([perms({ items: { services: [{ name: "run", level: READ }] } })], { kind: "service", name: "Run" })).toBe(0);
  });

  test("topics by MQTT filter, unioned over matching grants", () => {
    const p = perms({ items: { topics: [{ name: "sensors/#", level: READ }, { name: "sensors/+/temp", level: CREATE }, { name: "cmd/x", level: UPDATE }] } });
    expect(grantedLevel([p], { kind: "topic", name: "sensors/a/temp" })).toBe(READ | CREATE);
    expect(grantedLevel([p], { kind: "topic", name: "sensors/a/hum" })).toBe(READ);
    expect(grantedLevel([p], { kind: "topic", name: "cmd/x" })).toBe(UPDATE);
    expect(grantedLevel([p], { kind: "topic", name: "cmd/y" })).toBe(0);
  });

  test("named items of other kinds", () => {
    const p = perms({ items: { webhooks: [{ name: "hook", level: READ | UPDATE }], edges: [{ name: "e1", level: DELETE }] } });
    expect(grantedLevel([p], { kind: "item", itemKind: "webhooks", name: "hook" })).toBe(READ | UPDATE);
    expect(grantedLevel([p], { kind: "item", itemKind: "webhooks", name: "e1" })).toBe(0);
    expect(grantedLevel([p], { kind: "item", itemKind: "edges", name: "e1" })).toBe(DELETE);
    expect(grantedLevel([p], { kind: "item", itemKind: "adapters", name: "hook" })).toBe(0);
  });

  test("service caches by name plus allservicecaches (which reaches no other kind)", () => {
    const p = perms({ items: { servicecaches: [{ name: "c1", level: READ }] }, scalars: { allservicecaches: UPDATE } });
    expect(grantedLevel([p], { kind: "item", itemKind: "servicecaches", name: "c1" })).toBe(READ | UPDATE);
    expect(grantedLevel([p], { kind: "item", itemKind: "servicecaches", name: "other" })).toBe(UPDATE);
    expect(grantedLevel([perms({ items: { servicecaches: [{ name: "c1", level: READ }] } })], { kind: "item", itemKind: "servicecaches", name: "C1" })).toBe(0);
    expect(grantedLevel([p], { kind: "item", itemKind: "externaldatabases", name: "c1" })).toBe(0);
    expect(grantedLevel([perms({ scalars: { allexternaldatabases: ALL } })], { kind: "item", itemKind: "servicecaches", name: "c1" })).toBe(0);
  });

  test("whole kinds (scalars) are unioned across roles", () => {
    const a = perms({ scalars: { users: READ, devices: ALL } });
    const b = perms({ scalars: { users: UPDATE } });
    expect(grantedLevel([a, b], { kind: "users" })).toBe(READ | UPDATE);
    expect(grantedLevel([a, b], { kind: "devices" })).toBe(ALL);
    expect(grantedLevel([a, b], { kind: "roles" })).toBe(0);
  });
});

describe("parsePermissions", () => {
  test("reads items and scalars, fills what is missing, survives bad JSON", () => {
    const p: RolePermissions = { items: { services: [{ name: "s", level: 1 }] }, scalars: { users: 3 } };
    expect(parsePermissions(JSON.stringify(p))).toEqual(p);
    expect(parsePermissions("{}")).toEqual(emptyPermissions());
    expect(parsePermissions('{"scalars":{"users":1}}')).toEqual({ items: {}, scalars: { users: 1 } });
    expect(parsePermissions("not json")).toEqual(emptyPermissions());
  });
});

// ---------------------------------------------------------------------------------------------
describe("Permissions with a real database", () => {
  let db: Db;
  const SK = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaa1";
  const SK2 = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbb2";
  const DEV = "dddddddddddddddddddddddddddddd";

  const role = (systemKey: string, id: string, p: Partial<RolePermissions>, raw?: string) =>
    rolesRepo.insert(db, { role_id: id, system_key: systemKey, name: id, description: "", permissions: raw ?? JSON.stringify({ items: p.items ?? {}, scalars: p.scalars ?? {} }) });
  const user = (roles: string[], systemKey = SK): Principal => ({ kind: "user", systemKey, id: "u1", email: "u@x.io", roles, tokenHash: "h" });

  beforeAll(async () => {
    db = await openDb({ url: ":memory:" });
    await migrate(db);
    await developersRepo.insert(db, {
      id: DEV, email: "dev@x.io", email_lower: "dev@x.io", password_hash: "x", fname: "", lname: "", org: "", admin: 0, creation_date: new Date().toISOString(),
    });
    for (const key of [SK, SK2]) {
      await systemsRepo.insert(db, {
        system_key: key, system_secret: key.toUpperCase(), name: key, description: "", owner_id: DEV, token_ttl: 3600,
        token_ttl_user: null, token_ttl_device: null, auth_required: 1, registration: 1, created_at: new Date().toISOString(),
      });
    }
    await role(SK, "reader", { items: { collections: [{ id: "c1", name: "temps", level: READ }], topics: [{ name: "sensors/#", level: READ }] }, scalars: { users: READ } });
    await role(SK, "writer", { items: { collections: [{ id: "c1", name: "temps", level: CREATE | UPDATE }], services: [{ name: "ingest", level: READ }] } });
    await role(SK, "Anonymous", { items: { services: [{ name: "public", level: READ }] } });
    await role(SK, "broken", {}, "{{not json");
    // same role id in another system, with more rights
    await role(SK2, "reader", { scalars: { allcollections: ALL, users: ALL } });
  });
  afterAll(async () => { await db.close(); });

  const c1: Resource = { kind: "collection", id: "c1", name: "temps" };

  test("a developer holds everything", async () => {
    const perms = new Permissions(db);
    const dev: Principal = { kind: "developer", id: DEV, email: "dev@x.io", admin: false, tokenHash: "h" };
    for (const r of [c1, { kind: "users" } as Resource, { kind: "service", name: "nope" } as Resource]) {
      expect(await perms.level(dev, r)).toBe(ALL);
      expect(await perms.can(dev, r, DELETE)).toBe(true);
      await perms.require(dev, r, ALL);
    }
  });

  test("an edge acts for its system", async () => {
    const perms = new Permissions(db);
    const edge: Principal = { kind: "edge", systemKey: SK, id: "e", name: "e", tokenHash: "h" };
    expect(await perms.level(edge, { kind: "roles" })).toBe(ALL);
  });

  test("the Administrator role holds everything, with or without a role row", async () => {
    const perms = new Permissions(db);
    const admin = user(["Administrator"]);
    expect(await perms.level(admin, c1)).toBe(ALL);
    expect(await perms.level(admin, { kind: "deployments" })).toBe(ALL);
    await perms.require(admin, { kind: "topic", name: "any/thing" }, DELETE);
    const dev: Principal = { kind: "device", systemKey: SK, id: "d", name: "d", roles: ["Authenticated", "Administrator"], tokenHash: "h" };
    expect(await perms.level(dev, { kind: "service", name: "x" })).toBe(ALL);
  });

  test("a user gets the union of its roles' grants", async () => {
    const perms = new Permissions(db);
    const u = user(["reader", "writer"]);
    expect(await perms.level(u, c1)).toBe(READ | CREATE | UPDATE);
    expect(await perms.can(u, c1, READ)).toBe(true);
    expect(await perms.can(u, c1, READ | UPDATE)).toBe(true);
    expect(await perms.can(u, c1, DELETE)).toBe(false);
    expect(await perms.can(u, c1, READ | DELETE)).toBe(false); // every bit is needed
    expect(await perms.level(u, { kind: "collection", id: "c2", name: "other" })).toBe(0);
    expect(await perms.level(u, { kind: "service", name: "ingest" })).toBe(READ);
    expect(await perms.level(u, { kind: "topic", name: "sensors/1/t" })).toBe(READ);
    expect(await perms.level(u, { kind: "users" })).toBe(READ);
    expect(await perms.level(user(["writer"]), { kind: "users" })).toBe(0);
  });

  test("require throws PERMISSION_DENIED (200 / 401) naming the action and the resource", async () => {
    const perms = new Permissions(db);
    const u = user(["reader"]);
    await perms.require(u, c1, READ);
    let e: unknown;
    try { await perms.require(u, c1, DELETE); } catch (x) { e = x; }
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).code).toBe(200);
    expect((e as ApiError).status).toBe(401);
    expect((e as ApiError).detail).toContain("delete");
    expect((e as ApiError).detail).toContain("temps");
    await expect(perms.require(u, { kind: "service", name: "ingest" }, READ, "service 'ingest'")).rejects.toThrow("ingest");
  });

  test("no roles, unknown roles and a role with unreadable permissions grant nothing", async () => {
    const perms = new Permissions(db);
    for (const roles of [[], ["ghost"], ["broken"], ["Authenticated"]]) {
      expect(await perms.level(user(roles), c1)).toBe(0);
      await expect(perms.require(user(roles), c1, READ)).rejects.toBeInstanceOf(ApiError);
    }
  });

  test("anonymous principals use their roles", async () => {
    const perms = new Permissions(db);
    const anon: Principal = { kind: "anonymous", systemKey: SK, id: "anon", email: "anon", roles: ["Anonymous"], tokenHash: "h" };
    expect(await perms.can(anon, { kind: "service", name: "public" }, READ)).toBe(true);
    expect(await perms.can(anon, { kind: "service", name: "ingest" }, READ)).toBe(false);
  });

  test("roles are looked up in the principal's own system", async () => {
    const perms = new Permissions(db);
    expect(await perms.level(user(["reader"], SK), { kind: "collection", id: "zz" })).toBe(0);
    expect(await perms.level(user(["reader"], SK2), { kind: "collection", id: "zz" })).toBe(ALL);
    expect(await perms.level(user(["reader"], SK), { kind: "users" })).toBe(READ);
    expect(await perms.level(user(["reader"], SK2), { kind: "users" })).toBe(ALL);
    expect(await perms.level(user(["writer"], SK2), c1)).toBe(0);
  });

  test("role changes are seen after invalidate(systemKey)", async () => {
    const perms = new Permissions(db);
    await role(SK, "changing", { scalars: { devices: READ } });
    const u = user(["changing"]);
    expect(await perms.level(u, { kind: "devices" })).toBe(READ);

    await rolesRepo.update(db, SK, "changing", "changing", "", JSON.stringify({ items: {}, scalars: { devices: READ | DELETE } }));
    // cached per system until invalidated: another system's invalidation does not refresh it
    perms.invalidate(SK2);
    expect(await perms.level(u, { kind: "devices" })).toBe(READ);
    perms.invalidate(SK);
    expect(await perms.level(u, { kind: "devices" })).toBe(READ | DELETE);

    // a role created or deleted after the cache was filled
    await role(SK, "late", { scalars: { timers: UPDATE } });
    perms.invalidate(SK);
    expect(await perms.level(user(["late"]), { kind: "timers" })).toBe(UPDATE);
    await rolesRepo.delete(db, SK, "late");
    perms.invalidate(SK);
    expect(await perms.level(user(["late"]), { kind: "timers" })).toBe(0);
  });

  test("levelNow's remembered decisions end with a role change, another name or other roles", async () => {
    const perms = new Permissions(db);
    await role(SK, "polling", { items: { collections: [{ name: "byname", level: READ }], services: [{ name: "svc", level: READ }] } });
    const u = user(["polling"]);
    const byName: Resource = { kind: "collection", id: "c7", name: "byname" };
    const svc: Resource = { kind: "service", name: "svc" };
    expect(perms.levelNow(u, byName)).toBeUndefined(); // the system's roles are not cached yet
    expect(await perms.level(u, byName)).toBe(READ);
    for (let i = 0; i < 3; i++) { expect(perms.levelNow(u, byName)).toBe(READ); expect(perms.levelNow(u, svc)).toBe(READ); }
    // the same collection under another name (renamed): the grant by name no longer holds
    expect(perms.levelNow(u, { kind: "collection", id: "c7", name: "renamed" })).toBe(0);
    expect(perms.levelNow(u, byName)).toBe(READ);
    expect(perms.levelNow(u, { kind: "service", name: "other" })).toBe(0);

    await rolesRepo.update(db, SK, "polling", "polling", "", JSON.stringify({ items: { collections: [{ name: "byname", level: READ | UPDATE }] }, scalars: {} }));
    perms.invalidate(SK);
    await perms.level(u, { kind: "users" }); // fills the cache again
    expect(perms.levelNow(u, byName)).toBe(READ | UPDATE);
    expect(perms.levelNow(u, svc)).toBe(0);
    expect(() => perms.checkedNow(u, svc, READ)).toThrow(ApiError);

    // another principal of other roles decides for itself
    const other = user(["reader"]);
    expect(perms.levelNow(other, byName)).toBe(0);
    expect(perms.levelNow(other, c1)).toBe(READ);
    expect(perms.levelNow(u, c1)).toBe(0);
    // a principal whose roles array was replaced (not the usual way, but never a stale answer)
    const changing = user(["polling"]);
    expect(perms.levelNow(changing, byName)).toBe(READ | UPDATE);
    (changing as { roles: string[] }).roles = ["reader"];
    expect(perms.levelNow(changing, byName)).toBe(0);
    expect(perms.levelNow(changing, c1)).toBe(READ);
  });
});
