// Reused query results on PostgreSQL. A platform alone on its database answers a repeated read
// from the result it took (as on a libSQL file); once another node shows up on the database, every
// read goes to the database again, so a write made by that node is seen at once. Skipped with a
// note where the server is absent.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, start } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { loadConfig } from "../../../src/config.ts";
import { parseQuery } from "../../../src/core/query.ts";
import type { Collection } from "../../../src/domain/collections.ts";
import { createPgDatabase, dropPgDatabase, pgReachable } from "../../pgdb.ts";
import { available } from "../services.ts";

const PG = available("PostgreSQL (reused query results)", await pgReachable());

const node = (url: string, id: string) =>
  start(loadConfig(["--db", url, "--http-port", "0", "--mqtt-port", "0", "--mqtt-ws-port", "0", "--log-level", "silent", "--node-id", id]));

/** Counts the statements that read collection rows (the tables c_<id>) on a node's database. */
function countRowReads(app: App): { n: number } {
  const counter = { n: 0 };
  const all = app.db.all.bind(app.db);
  app.db.all = ((sql: string, args?: readonly unknown[]) => {
    if (/ FROM "c_/.test(sql)) counter.n++;
    return all(sql, args);
  }) as typeof app.db.all;
  return counter;
}

describe.skipIf(!PG)("query results on PostgreSQL", () => {
  let url = "";
  let a: App;
  let b: App | undefined;
  let devA: Principal;
  let devB: Principal;
  let systemKey = "", collectionID = "";
  const query = JSON.stringify({ FILTERS: [[{ EQ: [{ sensor: "s-1" }] }]] });
  const read = async (app: App, dev: Principal) => {
    const c: Collection = await app.services.collections.byIdFor(dev, collectionID);
    return app.services.collections.fetch(dev, c, parseQuery(query, { continuation: true }));
  };

  beforeAll(async () => {
    url = await createPgDatabase();
    a = await node(url, "node-a");
    const reg = await a.services.developers.register({ email: "pg@example.com", password: "pw" });
    devA = (await a.services.tokens.resolve(reg.dev_token))!;
    systemKey = (await a.services.systems.create(devA, { name: "pg" })).system_key;
    const cs = a.services.collections;
    ({ collectionID } = await cs.createCollection(devA, { name: "readings", appID: systemKey }));
    await cs.updateCollection(devA, { id: collectionID, addColumn: { name: "sensor", type: "string" } });
    await cs.insert(devA, await cs.byIdFor(devA, collectionID), [{ sensor: "s-1" }, { sensor: "s-2" }]);
  });
  afterAll(async () => { await b?.stop(); await a?.stop(); if (url) await dropPgDatabase(url); });

  test("a platform alone on its database reads a repeated query once, and again after a write", async () => {
    const reads = countRowReads(a);
    expect((await read(a, devA)).total).toBe(1);
    expect(reads.n).toBe(1);
    for (let i = 0; i < 5; i++) expect((await read(a, devA)).rows.map((r) => r.sensor)).toEqual(["s-1"]);
    expect(reads.n).toBe(1);
    const cs = a.services.collections;
    await cs.insert(devA, await cs.byIdFor(devA, collectionID), { sensor: "s-1" });
    expect((await read(a, devA)).total).toBe(2);
    expect(reads.n).toBe(2);
  });

  test("with another node on the database, each node reads the rows again and sees the other's writes at once", async () => {
    b = await node(url, "node-b");
    devB = devA; // the same developer, as a load balancer would send it to either node
    // node a sees node b at its next heartbeat (every 2 s)
    const reads = countRowReads(a);
    const cs = b.services.collections;
    await cs.insert(devB, await cs.byIdFor(devB, collectionID), { sensor: "s-1" });
    const seen = Date.now() + 10_000;
    while ((await read(a, devA)).total !== 3) {
      if (Date.now() > seen) throw new Error("node a never read node b's write");
      await Bun.sleep(50);
    }
    for (let i = 0; i < 3; i++) {
      await cs.insert(devB, await cs.byIdFor(devB, collectionID), { sensor: "s-1" });
      expect((await read(a, devA)).total).toBe(4 + i);
    }
    const before = reads.n;
    await read(a, devA);
    await read(a, devA);
    expect(reads.n).toBe(before + 2);
  });
});
