// Collections in-process: the typed domain events every change emits (with the
// payload keys triggers receive), and that reused query results never outlive a write.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, start } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { loadConfig } from "../../../src/config.ts";
import { parseQuery } from "../../../src/core/query.ts";
import type { DomainEvent } from "../../../src/core/events.ts";

let app: App;
let dev: Principal;
let systemKey: string;
const events: DomainEvent[] = [];

beforeAll(async () => {
  app = await start(loadConfig(["--db", ":memory:", "--http-port", "0", "--log-level", "silent"]));
  app.events.on((e) => { events.push(e); });
  const s = app.services;
  const reg = await s.developers.register({ email: "events@example.com", password: "pw" });
  dev = (await s.tokens.resolve(reg.dev_token))!;
  systemKey = (await s.systems.create(dev, { name: "ev" })).system_key;
});
afterAll(() => app.stop());

const settle = () => new Promise((r) => setTimeout(r, 5));
const take = async (type: string) => { await settle(); const found = events.filter((e) => e.type === type); events.length = 0; return found; };

describe("domain events", () => {
  test("collection and item changes emit typed events with their payload keys", async () => {
    const c = app.services.collections;
    const { collectionID } = await c.createCollection(dev, { name: "readings", appID: systemKey });
    expect((await take("Data::CollectionCreated")).map((e) => [e.systemKey, e.payload])).toEqual([[systemKey, { collectionId: collectionID, collectionName: "readings" }]]);

    await c.updateCollection(dev, { id: collectionID, addColumn: { name: "v", type: "int" } });
    expect((await take("Data::CollectionUpdated")).map((e) => e.payload)).toEqual([{ collectionId: collectionID, collectionName: "readings" }]);

    const col = await c.byIdFor(dev, collectionID);
    const ins = await c.insert(dev, col, [{ v: 1 }, { v: 2 }]);
    expect((await take("Data::ItemCreated")).map((e) => e.payload)).toEqual([{ collectionId: collectionID, collectionName: "readings", items: ins }]);

    await c.update(dev, col, { query: [[{ EQ: [{ v: 1 }] }]], $set: { v: 10 } });
    const upd = await take("Data::ItemUpdated");
    expect(upd.length).toBe(1);
    expect(upd[0]!.payload).toMatchObject({ collectionId: collectionID, collectionName: "readings", items: [ins[0]] });

    await c.createIndex(dev, await c.byIdFor(dev, collectionID), "v", true);
    const fresh = await c.byIdFor(dev, collectionID);
    const up = await c.upsert(dev, fresh, "v", { v: 2 });
    expect((await take("Data::ItemUpserted")).map((e) => e.payload)).toEqual([{ collectionId: collectionID, collectionName: "readings", items: [{ item_id: up.DATA[0]!.item_id as string }] }]);

    await c.delete(dev, fresh, JSON.stringify([[{ EQ: [{ v: 10 }] }]]));
    const del = await take("Data::ItemDeleted");
    expect(del.map((e) => (e.payload as { items: unknown }).items)).toEqual([[ins[0]]]);

    await c.delete(dev, fresh, JSON.stringify([[{ EQ: [{ v: 999 }] }]]));
    expect(await take("Data::ItemDeleted")).toEqual([]); // nothing deleted, nothing emitted

    await c.removeCollection(dev, collectionID);
    expect((await take("Data::CollectionDeleted")).map((e) => e.payload)).toEqual([{ collectionId: collectionID, collectionName: "readings" }]);
  });

  test("user changes emit User events", async () => {
    const s = app.services;
    const u = await s.users.adminCreate(dev, systemKey, { email: "ev-user@example.com", password: "pw" });
    expect((await take("User::UserCreated")).map((e) => (e.payload as { user: { user_id: string } }).user.user_id)).toEqual([u.user_id]);
    await s.users.adminUpdate(dev, systemKey, { user: u.user_id, changes: { roles: { add: ["Administrator"] } } });
    await settle();
    expect(events.filter((e) => e.type === "UserRoles::UserRoleAdded").map((e) => e.payload)).toEqual([{ userID: u.user_id, roleID: "Administrator", roles: ["Administrator", "Authenticated"] }]);
    events.length = 0;
    await s.users.adminDelete(dev, systemKey, u.user_id);
    expect((await take("User::UserDeleted")).length).toBe(1);
  });
});

describe("reused query results", () => {
  test("the same query after each kind of write sees the write", async () => {
    const c = app.services.collections;
    const { collectionID } = await c.createCollection(dev, { name: "cache", appID: systemKey, columns: [{ name: "k", type: "string" }, { name: "n", type: "int" }] });
    const col = () => c.byIdFor(dev, collectionID);
    const query = JSON.stringify({ FILTERS: [[{ EQ: [{ k: "a" }] }]], SORT: [{ ASC: "n" }] });
    const ns = async () => (await c.fetch(dev, await col(), parseQuery(query, { continuation: true }))).rows.map((r) => r.n);
    expect(await ns()).toEqual([]);
    await c.insert(dev, await col(), { k: "a", n: 1 });
    expect(await ns()).toEqual([1]);
    expect(await ns()).toEqual([1]);
    await c.update(dev, await col(), { query: [[{ EQ: [{ n: 1 }] }]], $set: { n: 2 } });
    expect(await ns()).toEqual([2]);
    await c.createIndex(dev, await col(), "k", true);
    await c.upsert(dev, await col(), "k", { k: "a", n: 3 });
    expect(await ns()).toEqual([3]);
    await c.delete(dev, await col(), JSON.stringify([]));
    expect(await ns()).toEqual([]);
    expect((await c.fetch(dev, await col(), parseQuery(query, { continuation: true }))).total).toBe(0);
  });
});
