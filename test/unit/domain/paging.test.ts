// TOTAL in-process: counted once per filter while nothing is written, and the unfiltered total of a
// collection carried over its inserts, updates and deletes instead of counted again after each.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, start } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { loadConfig } from "../../../src/config.ts";
import { parseQuery } from "../../../src/core/query.ts";

let app: App;
let dev: Principal;
let systemKey: string;

beforeAll(async () => {
  app = await start(loadConfig(["--db", ":memory:", "--http-port", "0", "--mqtt-port", "0", "--mqtt-ws-port", "0", "--log-level", "silent"]));
  const reg = await app.services.developers.register({ email: "paging@example.com", password: "pw" });
  dev = (await app.services.tokens.resolve(reg.dev_token))!;
  systemKey = (await app.services.systems.create(dev, { name: "paging" })).system_key;
});
afterAll(() => app.stop());

/** The counts the database runs while `fn` runs, and what `fn` gave. */
async function counting<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const db = app.services.db;
  const { get } = db;
  let n = 0;
  db.get = (sql, args) => { if (/\bcount\(\*\)/i.test(sql)) n++; return get.call(db, sql, args) as never; };
  try { return [await fn(), n]; } finally { db.get = get; }
}

describe("TOTAL", () => {
  test("counted once, then carried over writes that say how many rows they added or removed", async () => {
    const c = app.services.collections;
    const { collectionID } = await c.createCollection(dev, { name: "totals", appID: systemKey, columns: [{ name: "n", type: "int" }, { name: "s", type: "string" }] });
    const col = async () => c.byIdFor(dev, collectionID);
    await c.insert(dev, await col(), Array.from({ length: 250 }, (_, n) => ({ n })));
    let page = 0;
    // a new query text each time, so no whole result is reused: only the total may be
    const fetch = async (filters: unknown[] = []) => c.fetch(dev, await col(), parseQuery({ FILTERS: filters, PAGESIZE: 100, PAGENUM: 1, SORT: [{ [page++ % 2 ? "ASC" : "DESC"]: "n" }], SELECTCOLUMNS: page % 3 ? ["n"] : ["item_id", "n"] }));
    const total = async (filters: unknown[] = []) => { const [r, counts] = await counting(() => fetch(filters)); return [r.total, counts]; };

    expect(await total()).toEqual([250, 1]);
    expect(await total()).toEqual([250, 0]);
    await c.insert(dev, await col(), Array.from({ length: 10 }, (_, i) => ({ n: 1000 + i })));
    expect(await total()).toEqual([260, 0]);
    await c.update(dev, await col(), { query: [[{ LT: [{ n: 5 }] }]], $set: { s: "updated" } });
    expect(await total()).toEqual([260, 0]);
    await c.delete(dev, await col(), JSON.stringify([[{ GTE: [{ n: 1005 }] }]]));
    expect(await total()).toEqual([255, 0]);

    // a filtered total is counted again after each write
    const big = [[{ GTE: [{ n: 100 }] }]];
    expect(await total(big)).toEqual([155, 1]);
    expect(await total(big)).toEqual([155, 0]);
    await c.insert(dev, await col(), [{ n: 500 }]);
    expect(await total(big)).toEqual([156, 1]);

    // a write that does not say (an upsert may insert or update) makes the next page count again
    await c.createIndex(dev, await col(), "n", true);
    await c.upsert(dev, await col(), "n", [{ n: 2000 }, { n: 500 }]);
    expect(await total()).toEqual([257, 1]);
    expect(await total()).toEqual([257, 0]);
  });
});
